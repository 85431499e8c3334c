"""An analyst's open read-only connection never makes a run throw away what it computed.

The analyst is a separate process (DuckDB's lock is per process) that opens the warehouse
read-only in the middle of a backfill and keeps it open. The backfill keeps computing, keeps
its finished batches staged beside the warehouse, says so, and writes them when the analyst
lets go -- or, if that takes longer than the run is told to wait, says exactly how to load them.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
import threading
import time

import pytest
from prefect import task

from flows import engine
from flows.engine import run_flow
from flows.forecast import backfill_flow
from flows.settings import BackfillSettings
from tasks.forecast_tasks import forecast_batch as _forecast_batch
from tasks.warehouse import pending
from tasks.warehouse.connection import connect
from tasks.warehouse.pending import pending_root
from tests.cli_runs import invoke
from tests.flows.processes import count_rows
from tests.flows.warehouse_rows import WEEKS, make_warehouse, result_rows

MODELS = ["svr", "seasonal_naive"]
SETTINGS = {"models": MODELS, "trials": 2, "runner": "threads", "batch_size": 1, "max_in_flight": 1,
            "write_every_s": 0}
BACKFILL = ["backfill", "--start", WEEKS[0].isoformat(), "--end", WEEKS[-1].isoformat(),
            "--models", ",".join(MODELS), "--trials", "2", "--runner", "threads",
            "--batch-size", "1", "--max-in-flight", "1", "--write-every-s", "0"]
"""Every batch written (or staged) as it comes back."""

_ANALYST = textwrap.dedent("""
    import sys, time, duckdb
    print("ready", flush=True)
    while True:  # look in now and then, and stay once the first batch is written
        try:
            con = duckdb.connect(sys.argv[1], read_only=True)
        except duckdb.IOException:  # the backfill is writing at this very moment
            time.sleep(0.05)
            continue
        if con.execute("SELECT count(*) FROM window_status").fetchone()[0] > 0:
            break
        con.close()
        time.sleep(0.05)
    print("open", flush=True)
    sys.stdin.readline()  # until the test lets go
    con.close()
""")


class Analyst:
    """Opens the warehouse read-only once the run has written its first batch (polling from
    its own process: in this one, DuckDB refuses a read-only connection beside the run's); lets
    go when ``release_when()`` holds."""

    def __init__(self, warehouse, release_when) -> None:
        self.warehouse = warehouse
        self.release_when = release_when
        self.proc = subprocess.Popen([sys.executable, "-c", _ANALYST, str(warehouse)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout.readline().strip() == "ready"
        self.opened = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _say(self, line: str) -> None:
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def _run(self) -> None:
        assert self.proc.stdout.readline().strip() == "open"
        self.opened.set()
        while not self.release_when():
            time.sleep(0.1)
        self.release()

    def release(self) -> None:
        if self.proc.poll() is None:
            if not self.opened.is_set():
                self.proc.kill()
            else:
                self._say("close")
            self.proc.wait(timeout=30)


def slow_forecast_batch(jobs, config, label):
    """The real step, a second slower: the analyst gets in before the run has finished."""
    time.sleep(1.0)
    return _forecast_batch.fn(jobs, config, label)


@pytest.fixture(scope="module")
def undisturbed(tmp_path_factory):
    """A fleet, and the rows an undisturbed backfill of it writes."""
    base = tmp_path_factory.mktemp("undisturbed")
    pristine = make_warehouse(base / "pristine.duckdb", buildings=3)
    reference = base / "reference.duckdb"
    shutil.copy(pristine, reference)
    run_flow(backfill_flow, prefect=False, start=WEEKS[0], end=WEEKS[-1],
             settings=BackfillSettings(warehouse=str(reference), **SETTINGS))
    return pristine, result_rows(reference)


@pytest.fixture
def warehouses(undisturbed, tmp_path):
    pristine, expected = undisturbed
    warehouse = tmp_path / "w.duckdb"
    shutil.copy(pristine, warehouse)
    return warehouse, expected


@pytest.fixture
def slow_steps(monkeypatch, no_prefect_server):
    """The compute step a second slower, and the waits for the lock shorter."""
    monkeypatch.setattr(engine, "forecast_batch", task(slow_forecast_batch))
    monkeypatch.setattr(pending, "PENDING_RETRY_S", 0.5)
    monkeypatch.setattr(pending, "WRITE_WAIT_S", 0.3)


def _closing_kept(warehouse) -> bool:
    return any(pending_root(warehouse).glob("*/closing.parquet"))


def test_the_run_keeps_computing_and_writes_everything_when_the_analyst_lets_go(
    warehouses, slow_steps
):
    warehouse, expected = warehouses
    # The analyst lets go only once the run has computed everything and waits at its end.
    analyst = Analyst(warehouse, release_when=lambda: _closing_kept(warehouse))
    result = invoke(*BACKFILL, "--warehouse", warehouse)
    analyst.release()
    assert analyst.opened.is_set()
    assert result.exit_code == 0, result.output
    assert "is locked by another process" in result.output  # said while it happened ...
    assert "written as soon as it is free" in result.output
    assert "warehouse free again: wrote the" in result.output  # ... and when it was over
    assert result_rows(warehouse) == expected  # nothing was lost
    with connect(warehouse, read_only=True) as con:
        assert con.execute("SELECT status, n_building_weeks FROM runs").fetchall() == [
            ("completed", 6)]
    assert not pending_root(warehouse).exists()


def test_when_the_lock_outlasts_the_wait_the_user_is_told_how_to_load_the_results(
    warehouses, slow_steps
):
    warehouse, expected = warehouses
    analyst = Analyst(warehouse, release_when=lambda: False)  # holds until told below
    try:
        result = invoke(*BACKFILL, "--lock-wait-minutes", "0.05", "--warehouse", warehouse)
    finally:
        analyst.opened.wait(timeout=60)
        analyst.release()
    assert result.exit_code == 1, result.output
    last = result.output.strip().splitlines()[-1]
    assert last.startswith("error: the warehouse stayed locked;")
    assert f"load them with `wadiro load-pending --warehouse {warehouse}`" in last
    assert 0 < count_rows(warehouse, "SELECT count(*) FROM window_status") < 6
    run_folder = next(pending_root(warehouse).iterdir())
    staged = sorted(p.relative_to(run_folder).as_posix() for p in run_folder.rglob("*")
                    if p.is_file())
    assert staged[-1] == "closing.parquet" and len(staged) > 1  # Parquet files, nothing else
    assert all(name.startswith("batch-") and name.endswith(".parquet") for name in staged[:-1])

    loaded = invoke("load-pending", "--warehouse", warehouse)
    assert loaded.exit_code == 0, loaded.output
    assert loaded.output.startswith("load-pending: wrote ")
    assert result_rows(warehouse) == expected
    with connect(warehouse, read_only=True) as con:
        assert con.execute("SELECT status, n_building_weeks FROM runs").fetchall() == [
            ("completed", 6)]
    assert not pending_root(warehouse).exists()
    again = invoke("load-pending", "--warehouse", warehouse)
    assert again.output.strip() == "load-pending: nothing pending"
    assert result_rows(warehouse) == expected  # loading again changed nothing
