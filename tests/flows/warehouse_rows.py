"""Helpers of the flow tests: a small synthetic warehouse and its result rows, comparable across runs."""

from __future__ import annotations

import atexit
import functools
import shutil
import tempfile
from datetime import date
from pathlib import Path

from tasks.ingest.synthetic_fleet import FleetSpec, ingest_synthetic
from tasks.warehouse.connection import connect
from tasks.warehouse.results import PER_MODEL_TABLES
from tasks.warehouse.schema import ensure_schema

FAST_MODELS = ["svr", "wadiro_linreg", "seasonal_naive"]
WEEKS = (date(2024, 3, 25), date(2024, 4, 1))
RESULT_TABLES = ("window_status", *PER_MODEL_TABLES)
RUN_SPECIFIC = frozenset({"run_id", "fit_time_s", "tuning_time_s", "duration_s", "certify_time_s",
                          "compute_time_s"})
"""Columns that differ between two runs of the same work: who wrote the row and how long it took."""


_TEMPLATES: dict[tuple[int, int], Path] = {}
"""The fleets built in this test process, by (buildings, seed): each is built once and copied."""


def make_warehouse(path: Path, buildings: int = 3, seed: int = 3) -> Path:
    """A synthetic fleet of 14 weeks from 2024-01-01 with the result tables created.

    The fleet is a copy of this test process's template of it: the same spec always ingests the
    same rows, so each distinct fleet is built once (about a second each time saved)."""
    template = _TEMPLATES.get((buildings, seed))
    if template is None or not template.is_file():
        template = _template_folder() / f"fleet-{buildings}-{seed}.duckdb"
        template.unlink(missing_ok=True)
        ingest_synthetic(template, FleetSpec(buildings=buildings, start=date(2024, 1, 1), weeks=14,
                                             seed=seed))
        with connect(template) as con:
            ensure_schema(con)
        _TEMPLATES[(buildings, seed)] = template
    shutil.copyfile(template, path)
    return path


@functools.cache
def _template_folder() -> Path:
    folder = Path(tempfile.mkdtemp(prefix="wadiro-test-fleets-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder


def result_rows(warehouse: Path) -> dict[str, list[tuple]]:
    """Every result table's rows, sorted, without the run-specific columns."""
    rows = {}
    with connect(warehouse, read_only=True) as con:
        for table in RESULT_TABLES:
            columns = [c for c in con.execute(f"SELECT * FROM {table} LIMIT 0").df().columns
                       if c not in RUN_SPECIFIC]
            rows[table] = con.execute(
                f"SELECT {', '.join(columns)} FROM {table} ORDER BY ALL"
            ).fetchall()
    return rows
