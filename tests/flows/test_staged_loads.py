"""A run stages every finished batch at once and loads the staged ones into the warehouse at most
every ``load_every_seconds`` and at its end: the warehouse ends with every row, each once, however
often it was loaded."""

from __future__ import annotations

import shutil

import pytest
from prefect import task
from prefect.cache_policies import NO_CACHE
from wadiro_fleet.flows import forecast
from wadiro_fleet.flows.engine import LocalEngine, run_flow
from wadiro_fleet.flows.forecast import backfill_flow
from wadiro_fleet.flows.settings import BackfillSettings
from wadiro_fleet.tasks.warehouse.connection import connect
from wadiro_fleet.tasks.warehouse.pending import pending_root
from warehouse_rows import WEEKS, make_warehouse, result_rows

SETTINGS = {"models": ["seasonal_naive", "wadiro_linreg"], "trials": 2, "runner": "threads",
            "batch_size": 1, "max_in_flight": 1}


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    return make_warehouse(tmp_path_factory.mktemp("staged") / "pristine.duckdb", buildings=3)


def _backfill(pristine, tmp_path, monkeypatch, load_every_s: float) -> tuple[list, list, list]:
    """Backfill a copy of ``pristine``: the ``load`` asked of each batch's write, the building-
    weeks the warehouse held after each write, and its result rows at the end."""
    warehouse = tmp_path / f"every-{load_every_s:g}.duckdb"
    shutil.copy(pristine, warehouse)
    write, asked, held = forecast.write_batch, [], []

    @task(name="write-batch", cache_policy=NO_CACHE)
    def watched_write(run, results, wait_s=None, load=True):
        outcome = write.fn(run, results, wait_s, load)
        asked.append(load)
        with connect(warehouse, read_only=True) as con:
            held.append(con.execute("SELECT count(*) FROM window_status").fetchone()[0])
        return outcome

    monkeypatch.setattr(forecast, "write_batch", watched_write)
    run_flow(backfill_flow, LocalEngine(), start=WEEKS[0], end=WEEKS[-1],
             settings=BackfillSettings(warehouse=str(warehouse), load_every_seconds=load_every_s,
                                       **SETTINGS))
    with connect(warehouse, read_only=True) as con:
        assert con.execute("SELECT status, n_building_weeks FROM runs").fetchall() == [
            ("completed", 6)]
    assert not pending_root(warehouse).exists()  # nothing left staged
    return asked, held, result_rows(warehouse)


def test_a_short_run_loads_once_at_its_end_and_writes_what_loading_every_batch_writes(
    pristine, tmp_path, monkeypatch
):
    asked, held, rows = _backfill(pristine, tmp_path, monkeypatch, load_every_s=3600.0)
    # three batches staged without a load, then the close loads all of them
    assert asked == [False, False, False] and held == [0, 0, 0]
    every_asked, every_held, every_rows = _backfill(pristine, tmp_path, monkeypatch,
                                                    load_every_s=0.0)
    assert every_asked == [True, True, True] and every_held == [2, 4, 6]
    assert rows == every_rows and len(rows) > 0
