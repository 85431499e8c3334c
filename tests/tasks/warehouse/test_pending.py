"""Results staged as Parquet beside a locked warehouse: loaded in order, once, never over newer
rows, never lost; a staged batch loads exactly the rows a direct write does. The run's writer
writes straight into a free warehouse, stages while it is locked and loads once it is free."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from datetime import UTC, date, datetime, timedelta, timezone

import duckdb
import pytest

from tasks.ingest.synthetic_fleet import FleetSpec, ingest_synthetic
from tasks.protocol.batch import failed_results, run_batch
from tasks.protocol.config import ForecastConfig
from tasks.warehouse import pending
from tasks.warehouse.batches import load_jobs
from tasks.warehouse.connection import (
    WarehouseError,
    WarehouseLockedError,
    connect,
)
from tasks.warehouse.pending import (
    load_staged,
    pending_root,
    stage_closing,
    stage_results,
    stage_tables,
    staged_building_weeks,
    staged_runs,
)
from tasks.warehouse.results import RESULT_SLICE_TABLES, write_results
from tasks.warehouse.refusals import UNCHANGED, ResourceError
from tasks.warehouse.run_store import RunStore
from tasks.warehouse.runs import RunSummary, close_abandoned_runs, record_run_start
from tasks.warehouse.schema import ensure_schema

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


def load(path, run_id=None):
    with connect(path) as con:
        return load_staged(con, path, run_id)


def test_staged_batches_are_parquet_loaded_in_order_then_the_closing_record(warehouse):
    stage_results(warehouse, "old", results("a", "first"), MODELS)
    stage_results(warehouse, "old", results("a", "second"), MODELS)  # the same slice: later wins
    stage_results(warehouse, "old", results("b", "only"), MODELS)
    summary = RunSummary(run_id="old", weeks=[W1, W2])
    summary.add(results("a", "second") + results("b", "only"))
    stage_closing(warehouse, summary, "completed_with_failures", "4 failed")
    folder = pending_root(warehouse) / "old"
    assert sorted(p.name for p in folder.iterdir()) == [
        "batch-000001-2", "batch-000002-2", "batch-000003-2", "closing.parquet"]
    assert staged_runs(warehouse) == ["old"] and staged_building_weeks(warehouse, "old") == 6
    # Plain Parquet of the table's own rows, readable by any tool: here DuckDB.
    first = duckdb.sql("SELECT building_id, target_week, reason FROM "
                       f"'{folder / 'batch-000001-2' / 'window_status.parquet'}'").fetchall()
    assert first == [("a", W1, "RuntimeError: first"), ("a", W2, "RuntimeError: first")]

    report = load(warehouse)
    with connect(warehouse, read_only=True) as con:
        run = con.execute("SELECT status, n_building_weeks, n_failed, message FROM runs "
                          "WHERE run_id = 'old'").fetchone()
    assert (report.batches, report.building_weeks, report.superseded) == (3, 6, 0)
    assert [r[2] for r in statuses(warehouse)] == ["RuntimeError: second"] * 2 + ["RuntimeError: only"] * 2
    assert run == ("completed_with_failures", 4, 4, "4 failed")
    assert not pending_root(warehouse).exists()  # files and folders gone


def test_a_later_run_s_rows_are_never_overwritten(warehouse):
    stage_results(warehouse, "new", results("a", "newer", weeks=(W1,)), MODELS)
    load(warehouse, "new")
    stage_results(warehouse, "old", results("a", "older"), MODELS)  # interrupted earlier
    report = load(warehouse)
    assert report.superseded == 1 and report.building_weeks == 1
    assert report.line() == ("wrote 1 building-week(s) in 1 batch(es) of 1 run(s), 1 left out "
                             "(a later run wrote them since)")
    assert statuses(warehouse) == [("a", W1, "RuntimeError: newer", "new"),
                                   ("a", W2, "RuntimeError: older", "old")]


def test_loading_twice_changes_nothing(warehouse):
    stage_results(warehouse, "old", results("a", "x"), MODELS)
    load(warehouse)
    before = statuses(warehouse)
    again = load(warehouse)
    assert again.line() == "nothing pending" and statuses(warehouse) == before
    assert staged_runs(warehouse) == []


def test_a_damaged_staged_file_is_named_in_one_line_and_nothing_is_lost(warehouse):
    for reason in ("one", "two", "three"):
        stage_results(warehouse, "old", results(reason, reason, weeks=(W1,)), MODELS)
    folder = pending_root(warehouse) / "old"
    damaged = folder / "batch-000002-1" / "window_status.parquet"
    good = damaged.read_bytes()
    damaged.write_bytes(good[: len(good) // 2])  # cut short: a full disk, a copy broken off

    with pytest.raises(WarehouseError) as error:
        load(warehouse)
    message = str(error.value)
    assert "\n" not in message and str(damaged) in message
    assert "wadiro load-pending" in message
    # The batch before it is loaded; it and the batch after it stay staged, untouched.
    assert [r[0] for r in statuses(warehouse)] == ["one"]
    assert sorted(p.name for p in folder.iterdir()) == ["batch-000002-1", "batch-000003-1"]
    damaged.write_bytes(good)  # restored from a backup
    assert load(warehouse).building_weeks == 2
    assert [r[0] for r in statuses(warehouse)] == ["one", "three", "two"]


def fitted_batch(tmp_path) -> tuple[list, ForecastConfig]:
    """Two synthetic buildings' results of week W1 under two models."""
    fleet = tmp_path / "fleet.duckdb"
    ingest_synthetic(fleet, FleetSpec(buildings=2, start=date(2024, 1, 1), weeks=14, seed=3))
    config = ForecastConfig(models=("svr", "seasonal_naive"), trials=2)
    return run_batch(load_jobs(fleet, ["synthetic_b00000", "synthetic_b00001"], [W1], config),
                     config, sent_back=False), config


def _copies_of_the_fleet(tmp_path):
    """Two copies of the fitted fleet's warehouse, its readings in both: a load scores what it
    writes against the readings stored then, as a direct write's scores were computed."""
    copies = tmp_path / "direct.duckdb", tmp_path / "staged.duckdb"
    for copy in copies:
        shutil.copyfile(tmp_path / "fleet.duckdb", copy)
    return copies


def result_table_rows(path) -> dict[str, list[tuple]]:
    with connect(path, read_only=True) as con:
        return {t: con.execute(f"SELECT * FROM {t} ORDER BY ALL").fetchall()
                for t in RESULT_SLICE_TABLES}


def test_a_staged_batch_loads_exactly_the_rows_a_direct_write_does(tmp_path):
    batch, config = fitted_batch(tmp_path)
    direct, staged = _copies_of_the_fleet(tmp_path)
    with connect(direct) as con:
        ensure_schema(con)
        write_results(con, batch, run_id="r", models=config.models)
    stage_results(staged, "r", batch, config.models)
    assert not list(pending_root(staged).rglob("*.partial"))
    with connect(staged) as con:
        ensure_schema(con)
        load_staged(con, staged)
    assert result_table_rows(direct) == result_table_rows(staged)
    assert len(result_table_rows(direct)["forecasts"]) == 2 * 2 * 167


def test_batches_of_fitted_and_failed_weeks_load_the_rows_of_direct_writes(tmp_path):
    """Batches of fitted and of failed building-weeks (columns all empty in one, filled in the
    other), one repeating a building-week of an earlier one: the later batch's rows win, as
    they do when each is written directly."""
    fitted, config = fitted_batch(tmp_path)
    batches = [fitted[:1], results("c", "no data"), fitted[1:],
               results("c", "later", weeks=(W1,))]
    direct, staged = _copies_of_the_fleet(tmp_path)
    with connect(direct) as con:
        ensure_schema(con)
        for batch in batches:
            write_results(con, batch, run_id="r", models=config.models)
    for batch in batches:
        stage_results(staged, "r", batch, config.models)
    with connect(staged) as con:
        ensure_schema(con)
        report = load_staged(con, staged)
    assert (report.batches, report.building_weeks) == (4, 5)
    assert result_table_rows(direct) == result_table_rows(staged)
    assert ("c", W1, "RuntimeError: later", "r") in statuses(staged)


class _Told(list):
    def __call__(self, line: str) -> None:
        self.append(line)


def test_the_writer_holds_finished_batches_until_its_interval_is_up_then_writes_them_together(
    warehouse, monkeypatch
):
    writer = pending.RunWriter(str(warehouse), "old", MODELS, lock_wait_s=0.2, tell=_Told())
    writer.write(results("a", "first"))
    writer.write(results("b", "second"))
    writer.retry()  # the run waits, the interval is not up
    assert statuses(warehouse) == [] and not pending_root(warehouse).exists()
    writer._last_write -= pending.WRITE_EVERY_S  # ... and now it is
    writer.retry()
    assert [r[0] for r in statuses(warehouse)] == ["a", "a", "b", "b"]
    writer.write(results("c", "third"))  # held again: the interval starts anew
    assert len(statuses(warehouse)) == 4
    assert writer.close(RunSummary(run_id="old", weeks=[W1, W2])) == "completed"
    assert [r[0] for r in statuses(warehouse)] == ["a", "a", "b", "b", "c", "c"]  # the end
    assert not pending_root(warehouse).exists()


def test_the_writer_writes_a_free_warehouse_at_once_and_stages_only_while_it_is_locked(
    warehouse, monkeypatch
):
    monkeypatch.setattr(pending, "WRITE_WAIT_S", 0.2)
    told = _Told()  # every batch written as it comes (no interval)
    writer = pending.RunWriter(str(warehouse), "old", MODELS, lock_wait_s=0.2, tell=told,
                               write_every_s=0.0)
    writer.write(results("a", "free"))
    assert [r[0] for r in statuses(warehouse)] == ["a", "a"] and not pending_root(warehouse).exists()

    holder = duckdb.connect(str(warehouse))  # another process's writer, as DuckDB sees it
    try:
        with pytest.MonkeyPatch.context() as patched:  # this process cannot lock its own file
            patched.setattr(pending, "connect", _refused)
            writer.write(results("b", "locked"))
            writer.write(results("c", "still locked"))
            assert writer.locked and writer.pending == 4
            assert len(told) == 1 and "is locked by another process" in told[0]
            summary = RunSummary(run_id="old", weeks=[W1, W2])
            assert writer.close(summary) == "completed"  # the lock outlasts the wait
            assert writer.locked and "wadiro load-pending" in writer.how_to_load()
    finally:
        holder.close()
    writer._load(0.2)  # the lock cleared: everything staged goes in, in order
    assert not writer.locked and "free again: wrote the 4 kept" in told[-1]
    assert [r[0] for r in statuses(warehouse)] == ["a", "a", "b", "b", "c", "c"]
    with connect(warehouse, read_only=True) as con:
        assert con.execute("SELECT status FROM runs WHERE run_id = 'old'").fetchone() == (
            "completed",)
    assert not pending_root(warehouse).exists()
    assert writer.close(summary) == "completed"  # closed once


def _refused(path, **kwargs):
    raise WarehouseLockedError(f"warehouse {path} is locked by another process", "test (PID 1)")


def test_results_staged_by_an_earlier_version_are_refused_in_one_line_and_kept(warehouse):
    folder = pending_root(warehouse) / "old"
    folder.mkdir(parents=True)
    earlier = folder / "batch-000001-2.parquet"  # the earlier layout: a file per batch
    earlier.write_bytes(b"PAR1")
    with pytest.raises(WarehouseError) as refused:
        load(warehouse)
    assert "\n" not in str(refused.value) and "earlier version of wadiro" in str(refused.value)
    assert earlier.exists() and statuses(warehouse) == []


def test_a_staged_run_s_vintages_are_dated_when_loaded_not_when_computed(tmp_path):
    """Issue 60: results kept beside a locked warehouse and loaded later (``wadiro
    load-pending``) were dated when computed, so ``--as-of`` showed them as bid before they
    existed. The buildings' vintages and, with the run's closing, its portfolios' are dated
    when they go in."""
    batch, config = fitted_batch(tmp_path)
    path = tmp_path / "fleet.duckdb"
    with connect(path) as con:
        ensure_schema(con)
        record_run_start(con, run_id="r", flow="forecast", parameters={}, code_version="x")
    stage_results(path, "r", batch, config.models)
    summary = RunSummary(run_id="r", weeks=[W1])
    summary.add(batch)
    stage_closing(path, summary, "completed", None)
    computed = datetime.now(UTC)
    time.sleep(0.05)
    load(path)
    with connect(path, read_only=True) as con:
        buildings = con.execute("SELECT min(issued_at), count(DISTINCT building_id) FROM "
                                "issued_forecasts").fetchone()
        portfolios = con.execute("SELECT portfolio_id, min(issued_at), count(*), "
                                 "max(n_buildings) FROM issued_portfolio_forecasts "
                                 "WHERE run_id = 'r' GROUP BY ALL").fetchall()
        bid_then = con.execute("SELECT (SELECT count(*) FROM portfolio_as_of($t)), "
                               "(SELECT count(*) FROM published_as_of($t))",
                               {"t": computed}).fetchone()
        closed = con.execute("SELECT status FROM runs").fetchone()
    assert buildings[0] > computed and buildings[1] == 2
    assert [(p, n, summed) for p, _, n, summed in portfolios] == [("all", 167, 2)]  # 31 March
    assert portfolios[0][1] > computed and closed[0] == "completed"
    assert bid_then == (0, 0)  # nothing of the run was bid before it went in


def test_a_full_disk_says_what_of_the_run_is_stored_and_the_run_is_closed(warehouse,
                                                                         monkeypatch):
    """A write refused by a full disk names the building-weeks stored before and those not;
    with no room to stage the closing record beside the warehouse, the run is closed in it."""
    writer = pending.RunWriter(str(warehouse), "old", MODELS, lock_wait_s=0.2, tell=_Told(),
                               write_every_s=0.0)
    writer.write(results("a", "stored"))
    full = ResourceError(f"cannot write warehouse w.duckdb: the disk is full; free space; "
                         f"{UNCHANGED}")

    def refuse(*args, **kwargs):
        raise full

    with pytest.MonkeyPatch.context() as patched:
        patched.setattr(pending, "write_now", refuse)
        with pytest.raises(ResourceError) as refused:
            writer.write(results("b", "lost"))
    assert str(refused.value) == (
        "cannot write warehouse w.duckdb: the disk is full; free space; the 2 building-week(s) "
        "of this write are not stored; the 2 building-week(s) run old wrote before stand (a "
        "new run replaces them); if its end cannot be recorded either, `wadiro runs` shows it "
        "abandoned and the next command that writes records it so")
    assert [r[0] for r in statuses(warehouse)] == ["a", "a"]

    def no_room(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(pending, "stage_closing", no_room)
    summary = RunSummary(run_id="old", weeks=[W1, W2])
    assert writer.close(summary, refused.value) == "crashed"
    with connect(warehouse, read_only=True) as con:
        assert con.execute("SELECT status FROM runs WHERE run_id = 'old'").fetchone() == (
            "crashed",)


def test_a_run_whose_process_is_gone_is_closed_as_abandoned_by_the_next(tmp_path):
    path = tmp_path / "w.duckdb"
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    with connect(path) as con:
        ensure_schema(con)
        for run_id in ("killed", "alive", "reused", "elsewhere"):
            record_run_start(con, run_id=run_id, flow="forecast", parameters={},
                             code_version="x")
        con.execute("UPDATE runs SET pid = ? WHERE run_id = 'killed'", [gone.pid])
        # a pid given again to a process started after the run: not the run's
        con.execute("UPDATE runs SET started_at = started_at - INTERVAL 1 DAY "
                    "WHERE run_id = 'reused'")
        con.execute("UPDATE runs SET host = 'another-host', pid = ? WHERE run_id = 'elsewhere'",
                    [gone.pid])
    shown = {row[0]: row[4] for row in RunStore(str(path)).history()}
    assert shown == {"killed": "abandoned", "alive": "running", "reused": "abandoned",
                     "elsewhere": "running"}
    with connect(path) as con:
        assert sorted(close_abandoned_runs(con)) == ["killed", "reused"]
        stored = dict(con.execute("SELECT run_id, status FROM runs").fetchall())
    assert stored == {"killed": "abandoned", "alive": "running", "reused": "abandoned",
                      "elsewhere": "running"}


def test_a_gone_run_whose_results_are_staged_is_shown_staged_and_never_closed_abandoned(
        tmp_path):
    """Its process ended with its results kept beside a locked warehouse (issue 60's probe:
    ``wadiro runs`` called it abandoned with no building-weeks): it waits for load-pending."""
    path = tmp_path / "w.duckdb"
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    with connect(path) as con:
        ensure_schema(con)
        for run_id in ("locked-out", "killed"):
            record_run_start(con, run_id=run_id, flow="forecast", parameters={},
                             code_version="x")
        con.execute("UPDATE runs SET pid = ?", [gone.pid])
    stage_tables(path, "locked-out", {}, ["svr"])
    assert staged_runs(path) == ["locked-out"]
    shown = {row[0]: (row[4], row[13]) for row in RunStore(str(path)).history()}
    assert shown["killed"] == ("abandoned", None)
    assert shown["locked-out"][0] == "staged" and "load-pending" in shown["locked-out"][1]
    with connect(path) as con:
        assert close_abandoned_runs(con, staged_runs(path)) == ["killed"]
        assert con.execute("SELECT status FROM runs WHERE run_id = 'locked-out'").fetchone() == (
            "running",)
