"""An editor finds ``wadiro_fleet.tasks`` and ``wadiro_fleet.flows`` in ``tasks/`` and ``flows/``.

At run time the editable install maps those names onto the folders with an import hook, which
static tools cannot follow. For them, ``typings/wadiro_fleet/`` holds two links, ``tasks`` and
``flows``, pointing at the real folders; ``typings`` is the stub path that pyright, basedpyright
and Pylance search first by default (their ``stubPath``), and an extra path to give a jedi-based
editor. This test asks jedi (pure Python: no language server, no node) for go-to-definition on
a few imports, as an editor would, with ``typings`` on its path.
"""

from __future__ import annotations

from pathlib import Path

import jedi

ROOT = Path(__file__).resolve().parents[1]

# What a reader writes, and the file each name should lead to.
PROBE = """\
from wadiro_fleet.tasks.protocol.fitting import Fitter
from wadiro_fleet.flows.forecast import forecast_weeks
from wadiro_fleet.tasks.warehouse import schema
from wadiro_models import WaDiRoSCNN
"""
EXPECTED = {
    "Fitter": ROOT / "tasks" / "protocol" / "fitting.py",
    "forecast_weeks": ROOT / "flows" / "forecast.py",
    "schema": ROOT / "tasks" / "warehouse" / "schema.py",
    "WaDiRoSCNN": ROOT / "wadiro_models" / "_wadiro_scnn.py",
}


def test_the_links_lead_to_the_rooms():
    for room in ("tasks", "flows"):
        link = ROOT / "typings" / "wadiro_fleet" / room
        assert link.is_symlink() and link.resolve() == ROOT / room


def test_go_to_definition_finds_the_rooms_files():
    project = jedi.Project(ROOT, added_sys_path=[str(ROOT / "typings")])
    # An unsaved editor buffer inside the checkout: nothing is written to disk.
    script = jedi.Script(PROBE, path=ROOT / "tests" / "_navigation_probe.py", project=project)
    lines = PROBE.splitlines()
    found = {}
    for name in EXPECTED:
        line = next(i for i, text in enumerate(lines) if text.endswith(" " + name))
        found[name] = [(d.module_path, d.name) for d in
                       script.goto(line + 1, len(lines[line]) - 1, follow_imports=True)]
    # Each name leads to its definition in its room's file ...
    assert {name: [(path.resolve(), defined) for path, defined in hits]
            for name, hits in found.items()} == {
        name: [(path, name)] for name, path in EXPECTED.items()}
    # ... and the pipeline's rooms are reached through the links (the editor opens
    # typings/wadiro_fleet/tasks/..., the same file).
    links = ROOT / "typings" / "wadiro_fleet"
    assert all(path.is_relative_to(links) for name in ("Fitter", "forecast_weeks", "schema")
               for path, _ in found[name])
