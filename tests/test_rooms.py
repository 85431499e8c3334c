"""The rooms of the design import only downward: flows -> tasks -> wadiro_models.

Inside ``tasks/`` the pipeline's order holds too: the protocol is pure (no warehouse, no
Prefect, no DuckDB), the warehouse reads and writes the protocol's data, ingest writes the
warehouse, and only the run's task module and the outputs sit on top. The flows reach the
warehouse only through the task modules meant for them.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# room (a folder or a module, as a dotted path under the checkout) -> rooms it may import
ALLOWED: dict[str, set[str]] = {
    "wadiro_models": {"wadiro_models"},
    "tasks": set(),  # the package's own __init__
    "tasks.errors": set(),
    "tasks.protocol": {"wadiro_models", "tasks.errors", "tasks.protocol"},
    "tasks.warehouse": {"tasks.errors", "tasks.protocol", "tasks.warehouse"},
    "tasks.ingest": {"tasks.errors", "tasks.protocol", "tasks.warehouse", "tasks.ingest"},
    "tasks.outputs": {"tasks.errors", "tasks.protocol", "tasks.warehouse", "tasks.outputs"},
    "tasks.forecast_tasks": {"tasks"},
    "flows": {"flows", "tasks.errors", "tasks.protocol", "tasks.forecast_tasks", "tasks.ingest",
              "tasks.outputs", "tasks.warehouse.connection", "tasks.warehouse.selection",
              "tasks.warehouse.run_store", "tasks.warehouse.run_dates",
              "tasks.warehouse.meter_flags"},  # wadiro accept-readings' task
}
FORBIDDEN_LIBRARIES = {
    "wadiro_models": {"prefect", "duckdb", "pandas", "pyarrow", "optuna"},
    "tasks.protocol": {"prefect", "duckdb"},
}


def _module(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")


def _imports(path: Path) -> set[str]:
    """Absolute names imported by ``path`` (relative imports resolved against its package)."""
    names: set[str] = set()
    package = _module(path) if path.name == "__init__.py" else _module(path).rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            names.add(base)
    return names


def _room(module: str) -> str | None:
    matches = [r for r in ALLOWED if module == r or module.startswith(r + ".")]
    return max(matches, key=len) if matches else None


def _within(name: str, rooms: set[str]) -> bool:
    return any(name == r or name.startswith(r + ".") for r in rooms)


SOURCES = sorted(p for room in ("wadiro_models", "tasks", "flows")
                 for p in (ROOT / room).rglob("*.py"))


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_imports_run_only_downward(path):
    room = _room(_module(path))
    assert room is not None, f"{path} is in no room of the design"
    ours = {n for n in _imports(path) if n.split(".")[0] in {"wadiro_models", "tasks", "flows"}}
    upward = sorted(n for n in ours if not _within(n, ALLOWED[room]))
    assert not upward, f"{room} imports {upward}"
    libraries = {n.split(".")[0] for n in _imports(path)}
    for pure, banned in FORBIDDEN_LIBRARIES.items():
        if _within(_module(path), {pure}):
            assert not libraries & banned, f"{pure} must stay pure but imports {libraries & banned}"


def test_the_rooms_are_imported_by_their_folders_names():
    """An import path is a folder path: ``tasks.protocol.fitting`` is ``tasks/protocol/fitting.py``.

    The project once installed ``tasks`` and ``flows`` under another name; nothing may import
    through that name again (it would load a second copy of each module)."""
    for path in SOURCES + sorted(p for folder in ("tests", "benchmarks")
                                 for p in (ROOT / folder).rglob("*.py")):
        tree = ast.parse(path.read_text())
        names = [n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module]
        names += [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
        mapped = [n for n in names if n.split(".")[0] == "wadiro_fleet"]
        assert not mapped, f"{path.relative_to(ROOT)} imports {mapped}"
