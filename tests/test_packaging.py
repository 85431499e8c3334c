"""The project installs its rooms under their folders' names: ``wadiro_models``, ``tasks``, ``flows``."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ROOMS = ("wadiro_models", "tasks", "flows")


def _config() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def test_every_package_folder_is_installed_under_its_own_name():
    config = _config()
    assert "package-dir" not in config  # an import path is the folder's path
    listed = {p.replace(".", "/") for p in config["packages"]}
    on_disk = {
        str(init.parent.relative_to(ROOT))
        for room in ROOMS
        for init in (ROOT / room).rglob("__init__.py")
    }
    assert listed == on_disk


def test_no_other_installed_distribution_provides_our_rooms():
    """``tasks`` and ``flows`` are common names: another distribution in the same environment
    that ships a top-level package of the same name would shadow ours, or be shadowed."""
    providers = importlib.metadata.packages_distributions()
    for room in ROOMS:
        assert set(providers.get(room, [])) <= {"wadiro-fleet"}, (room, providers.get(room))


def test_the_rooms_import_from_the_checkout():
    import flows
    import tasks
    import wadiro_models

    for module in (wadiro_models, tasks, flows):
        assert Path(module.__file__).resolve().parent == ROOT / module.__name__


@pytest.mark.slow
def test_the_wheel_holds_the_three_rooms_and_nothing_else(tmp_path):
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path),
                    str(ROOT)], check=True, capture_output=True)
    [wheel] = tmp_path.glob("*.whl")
    with zipfile.ZipFile(wheel) as archive:
        top = {name.split("/")[0] for name in archive.namelist()}
        names = set(archive.namelist())
    assert {t for t in top if not t.endswith(".dist-info")} == set(ROOMS)
    assert "tasks/protocol/forecasting.py" in names
    assert "flows/forecast.py" in names
    assert not any(name.startswith(("tests/", "benchmarks/")) for name in names)
