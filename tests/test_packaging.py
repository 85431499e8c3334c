"""The project installs its rooms under names of its own: ``wadiro_models`` and ``wadiro_fleet``."""

from __future__ import annotations

import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _config() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def _folder_of(package: str, package_dir: dict[str, str]) -> Path:
    """The folder setuptools reads ``package`` from, through the longest mapped prefix."""
    for prefix in sorted(package_dir, key=len, reverse=True):
        if package == prefix or package.startswith(prefix + "."):
            rest = package[len(prefix):].lstrip(".").replace(".", "/")
            return ROOT / package_dir[prefix] / rest
    return ROOT / package.replace(".", "/")


def test_every_package_folder_is_installed_under_our_names():
    config = _config()
    package_dir = config["package-dir"]
    listed = {str(_folder_of(p, package_dir).relative_to(ROOT)) for p in config["packages"]}
    on_disk = {
        str(init.parent.relative_to(ROOT))
        for room in ("wadiro_models", "tasks", "flows")
        for init in (ROOT / room).rglob("__init__.py")
    }
    assert listed == on_disk
    assert all(p.split(".")[0] in {"wadiro_models", "wadiro_fleet"} for p in config["packages"])


@pytest.mark.slow
def test_the_wheel_puts_no_tasks_or_flows_at_the_top_level(tmp_path):
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path),
                    str(ROOT)], check=True, capture_output=True)
    [wheel] = tmp_path.glob("*.whl")
    with zipfile.ZipFile(wheel) as archive:
        top = {name.split("/")[0] for name in archive.namelist()}
        names = set(archive.namelist())
    assert {t for t in top if not t.endswith(".dist-info")} == {"wadiro_models", "wadiro_fleet"}
    assert "wadiro_fleet/tasks/protocol/forecasting.py" in names
    assert "wadiro_fleet/flows/forecast.py" in names
