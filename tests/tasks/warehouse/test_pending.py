"""Results kept beside a locked warehouse: written in order, once, never over newer rows."""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone

import pytest
from wadiro_fleet.tasks.protocol.batch import failed_results
from wadiro_fleet.tasks.warehouse.connection import connect
from wadiro_fleet.tasks.warehouse.pending import (
    PendingResults,
    kept_batches,
    pending_root,
    pending_runs,
    write_pending,
)
from wadiro_fleet.tasks.warehouse.runs import RunSummary, record_run_start
from wadiro_fleet.tasks.warehouse.schema import ensure_schema

W1, W2 = date(2024, 3, 25), date(2024, 4, 1)
MODELS = ("seasonal_naive",)


def results(building: str, reason: str, weeks=(W1, W2)):
    return failed_results(building, list(weeks), RuntimeError(reason))


@pytest.fixture
def warehouse(tmp_path):
    path = tmp_path / "w.duckdb"
    with connect(path) as con:
        ensure_schema(con)
        for run_id, minutes in (("old", 0), ("new", 10)):
            record_run_start(con, run_id=run_id, flow="backfill", parameters={}, code_version="x")
            con.execute("UPDATE runs SET started_at = ? WHERE run_id = ?",
                        [datetime(2024, 5, 1, tzinfo=timezone.utc) + timedelta(minutes=minutes), run_id])
    return path


def statuses(path) -> list[tuple]:
    with connect(path, read_only=True) as con:
        return con.execute("SELECT building_id, target_week, reason, run_id FROM window_status "
                           "ORDER BY ALL").fetchall()


def test_kept_batches_are_written_in_order_then_the_closing_record(warehouse):
    pending = PendingResults(warehouse, "old")
    pending.keep(results("a", "first"), MODELS)
    pending.keep(results("a", "second"), MODELS)  # the same slice again: the later one wins
    pending.keep(results("b", "only"), MODELS)
    summary = RunSummary(run_id="old", weeks=[W1, W2])
    summary.add(results("a", "second") + results("b", "only"))
    pending.keep_closing(summary, "completed_with_failures", "4 failed")
    assert pending.building_weeks() == 6 and len(pending.batch_files()) == 3
    assert [b.results[0].reason for b in kept_batches(pending)] == [
        "RuntimeError: first", "RuntimeError: second", "RuntimeError: only"]

    with connect(warehouse) as con:
        report = pending.write_to(con)
        run = con.execute("SELECT status, n_building_weeks, n_failed, message FROM runs "
                          "WHERE run_id = 'old'").fetchone()
    assert (report.batches, report.building_weeks, report.superseded) == (3, 6, 0)
    assert [r[2] for r in statuses(warehouse)] == ["RuntimeError: second"] * 2 + ["RuntimeError: only"] * 2
    assert run == ("completed_with_failures", 4, 4, "4 failed")
    assert not pending and not pending_root(warehouse).exists()  # files and folders gone


def test_a_later_run_s_rows_are_never_overwritten(warehouse):
    PendingResults(warehouse, "new").keep(results("a", "newer", weeks=(W1,)), MODELS)
    with connect(warehouse) as con:
        PendingResults(warehouse, "new").write_to(con)
    PendingResults(warehouse, "old").keep(results("a", "older"), MODELS)  # interrupted earlier
    with connect(warehouse) as con:
        report = write_pending(con, warehouse)
    assert report.superseded == 1 and report.building_weeks == 1
    assert report.line() == ("wrote 1 building-week(s) in 1 batch(es) of 1 run(s), 1 left out "
                             "(a later run wrote them since)")
    assert statuses(warehouse) == [("a", W1, "RuntimeError: newer", "new"),
                                   ("a", W2, "RuntimeError: older", "old")]


def test_loading_twice_changes_nothing(warehouse):
    PendingResults(warehouse, "old").keep(results("a", "x"), MODELS)
    with connect(warehouse) as con:
        write_pending(con, warehouse)
    before = statuses(warehouse)
    with connect(warehouse) as con:
        again = write_pending(con, warehouse)
    assert again.line() == "nothing pending" and statuses(warehouse) == before
    assert pending_runs(warehouse) == []
