"""A run writes its finished batches straight into a free warehouse: every ``write_every_s``
at most (with none, each batch's rows as soon as its write returns) and at its end, nothing
staged beside it; a run of one building per batch writes the rows a run of every building in
one batch writes, however its batches were grouped into writes."""

from __future__ import annotations

import shutil

import pytest

from flows.engine import run_flow
from flows.forecast import backfill_flow
from flows.settings import BackfillSettings
from tasks.warehouse.connection import connect
from tasks.warehouse.pending import RunWriter, pending_root
from tests.flows.warehouse_rows import WEEKS, make_warehouse, result_rows

SETTINGS = {"models": ["seasonal_naive", "wadiro_linreg"], "trials": 2, "runner": "threads",
            "max_in_flight": 1}


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    return make_warehouse(tmp_path_factory.mktemp("staged") / "pristine.duckdb", buildings=3)


def _backfill(pristine, tmp_path, monkeypatch, batch_size: int,
              write_every_s: float = 0.0) -> tuple[list, list]:
    """Backfill a copy of ``pristine``: the building-weeks the warehouse held after each
    batch's write, and its result rows at the end."""
    warehouse = tmp_path / f"batch-{batch_size}-{write_every_s}.duckdb"
    shutil.copy(pristine, warehouse)
    write, held = RunWriter.write, []

    def watched_write(writer, results=(), **options):
        write(writer, results, **options)
        if not results:  # the run's closing write, not a batch's
            return
        assert not pending_root(warehouse).exists()  # written, not staged
        with connect(warehouse, read_only=True) as con:
            held.append(con.execute("SELECT count(*) FROM window_status").fetchone()[0])

    monkeypatch.setattr(RunWriter, "write", watched_write)
    run_flow(backfill_flow, prefect=False, start=WEEKS[0], end=WEEKS[-1],
             settings=BackfillSettings(warehouse=str(warehouse), batch_size=batch_size,
                                       write_every_s=write_every_s, **SETTINGS))
    with connect(warehouse, read_only=True) as con:
        assert con.execute("SELECT status, n_building_weeks FROM runs").fetchall() == [
            ("completed", 6)]
    assert not pending_root(warehouse).exists()  # nothing left staged
    return held, result_rows(warehouse)


def test_each_batch_is_in_the_warehouse_when_its_write_returns(pristine, tmp_path, monkeypatch):
    held, rows = _backfill(pristine, tmp_path, monkeypatch, batch_size=1)
    assert held == [2, 4, 6]  # one building, two weeks, per batch
    together_held, together_rows = _backfill(pristine, tmp_path, monkeypatch, batch_size=3)
    assert together_held == [6]
    assert rows == together_rows and len(rows["forecasts"]) > 0


def test_batches_finished_within_the_interval_are_written_together_at_the_end(
    pristine, tmp_path, monkeypatch
):
    held, rows = _backfill(pristine, tmp_path, monkeypatch, batch_size=1, write_every_s=3600)
    assert held == [0, 0, 0]  # each batch held, none written when it came back ...
    _, one_by_one = _backfill(pristine, tmp_path, monkeypatch, batch_size=1)
    assert rows == one_by_one  # ... and all of them at the run's end, the same rows
