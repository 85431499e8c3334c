"""A run stops cleanly on Ctrl-C or SIGTERM, fails fast when its Prefect server is lost, and
leaves no process behind, not even after ``kill -9``.

The slow tests start ``wadiro backfill`` as a real process in a session of its own (its worker
processes join that session, and stay in it when they outlive the command), signal it as a
user or a service manager would, and look for what is left in the session.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from concurrent.futures import InvalidStateError

import pytest

from flows.engine import run_flow
from flows.forecast import backfill_flow
from flows.settings import BackfillSettings
from flows.stopping import GRACE_S, STOP, Stop, handle_stop_signals
from tasks.errors import RunStoppedError
from tasks.warehouse.connection import connect
from tasks.warehouse.pending import RunWriter
from tests.flows.processes import (
    count_rows,
    kill_session,
    local_env,
    session_processes,
    start,
    wait_for_rows,
    wait_until_gone,
)
from tests.flows.warehouse_rows import WEEKS, make_warehouse

BACKFILL = ["backfill", "--start", "2024-03-04", "--end", "2024-04-01", "--models",
            "wadiro_pcscnn,svr,seasonal_naive", "--trials", "3", "--tuning", "per-window",
            "--batch-size", "1", "--max-in-flight", "2", "--runner", "processes", "--workers", "2",
            "--write-every-s", "0"]
"""Three buildings x five weeks, every window tuned, one building per batch, each written as it
comes back: a minute or more of work (the deployed protocol's fast fits finish the cheaper
models' run before a signal lands), first rows early."""

WRITTEN = "SELECT count(*) FROM window_status"
NAMES = {signal.SIGINT: "Ctrl-C (SIGINT)", signal.SIGTERM: "SIGTERM"}
STOPS_WITHIN_S = 10.0


def _runs(warehouse) -> list[tuple]:
    with connect(warehouse, read_only=True) as con:
        return con.execute("SELECT status, n_building_weeks, message FROM runs").fetchall()


# --- the stop itself, in this process --------------------------------------------------------

def test_a_stop_writes_what_is_finished_and_records_the_run_interrupted(tmp_path, monkeypatch):
    _stop_after_the_first_write(tmp_path, monkeypatch, prefect=False)


def test_a_stop_writes_what_is_finished_and_records_the_run_interrupted_under_prefect(
    tmp_path, monkeypatch, prefect_backend
):
    _stop_after_the_first_write(tmp_path, monkeypatch, prefect=True)


def _stop_after_the_first_write(tmp_path, monkeypatch, prefect: bool) -> None:
    warehouse = make_warehouse(tmp_path / "w.duckdb", buildings=3)
    write = RunWriter.write

    def write_then_stop(writer, results=(), **options):  # the signal: after a batch's write
        write(writer, results, **options)
        if results:
            STOP.request(Stop("interrupted by Ctrl-C (SIGINT)", "interrupted", 130))

    monkeypatch.setattr(RunWriter, "write", write_then_stop)
    settings = BackfillSettings(warehouse=str(warehouse), models=["seasonal_naive"],
                                runner="threads", batch_size=1, max_in_flight=1)
    with pytest.raises(RunStoppedError) as stopped:
        run_flow(backfill_flow, prefect=prefect, start=WEEKS[0], end=WEEKS[-1], settings=settings)
    assert stopped.value.exit_code == 130 and stopped.value.status == "interrupted"
    # the first batch (one building, both weeks) is written and counted; nothing else ran
    assert _runs(warehouse) == [("interrupted", 2, "interrupted by Ctrl-C (SIGINT)")]
    assert count_rows(warehouse, WRITTEN) == 2


@pytest.mark.parametrize("moment", ["open", "close"])
def test_ctrl_c_as_the_run_opens_or_closes_never_leaves_it_running(tmp_path, monkeypatch, moment):
    """Issue 60's probe: Ctrl-C at the moment a run wrote its row, or its last results, left it
    `running` (a KeyboardInterrupt outside the run's loop). The signal is a stop request from
    the moment the row may be written to the moment the run is closed."""
    from tasks.warehouse.run_store import RunStore

    warehouse = make_warehouse(tmp_path / "w.duckdb", buildings=2)
    target = (RunStore, "open_run") if moment == "open" else (RunWriter, "close")
    original = getattr(*target)

    def signalled(*args, **kwargs):
        done = original(*args, **kwargs) if moment == "open" else None
        os.kill(os.getpid(), signal.SIGINT)  # as the row is written / as the run closes
        return done if moment == "open" else original(*args, **kwargs)

    monkeypatch.setattr(*target, signalled)
    settings = BackfillSettings(warehouse=str(warehouse), models=["seasonal_naive"],
                                runner="threads", batch_size=1, max_in_flight=1)
    try:
        with handle_stop_signals():
            run_flow(backfill_flow, prefect=False, start=WEEKS[0], end=WEEKS[0],
                     settings=settings)
    except (RunStoppedError, KeyboardInterrupt):
        pass
    (status, _, _), = _runs(warehouse)
    assert status != "running" and status == ("interrupted" if moment == "open" else
                                               "completed")


def test_a_pool_broken_by_the_same_ctrl_c_records_the_run_interrupted(tmp_path, monkeypatch):
    # Issue 46: Ctrl-C while the fork server was still importing ended it; the next submit
    # failed (EOFError) and the run was recorded crashed.
    import concurrent.futures as cf

    warehouse = make_warehouse(tmp_path / "w.duckdb", buildings=3)

    def broken(executor, *args, **kwargs):
        STOP.request(Stop("interrupted by Ctrl-C (SIGINT)", "interrupted", 130))
        raise EOFError("unexpected EOF")

    monkeypatch.setattr(cf.ThreadPoolExecutor, "submit", broken)
    settings = BackfillSettings(warehouse=str(warehouse), models=["seasonal_naive"],
                                runner="threads", batch_size=1, max_in_flight=1)
    with pytest.raises(RunStoppedError) as stopped:
        run_flow(backfill_flow, prefect=False, start=WEEKS[0], end=WEEKS[-1], settings=settings)
    assert stopped.value.exit_code == 130
    assert _runs(warehouse) == [("interrupted", 0, "interrupted by Ctrl-C (SIGINT)")]


SLOW_PRELOAD = """
import pathlib, time
pathlib.Path({marker!r}).write_text("importing")
time.sleep(4)
"""

FORK_SERVER_UNDER_CTRL_C = """
import os, pathlib, signal, threading, time, types
import psutil
from flows import engine
engine.WORKER_PRELOAD = ("slow_preload",)
marker = pathlib.Path({marker!r})

def ctrl_c_while_it_imports():  # Ctrl-C reaches the terminal's whole process group
    while not marker.exists():
        time.sleep(0.05)
    server = next(c for c in psutil.Process().children()
                  if "forkserver" in " ".join(c.cmdline()))
    os.kill(server.pid, signal.SIGINT)

threading.Thread(target=ctrl_c_while_it_imports, daemon=True).start()
with engine._process_pool(types.SimpleNamespace(workers=1)) as pool:
    print("worker", pool.submit(os.getpid).result(timeout=60) > 0)
"""


def test_ctrl_c_while_the_fork_server_imports_leaves_it_serving(tmp_path, worker_processes):
    # Issue 46: the fork server imports the protocol's libraries before it ignores Ctrl-C
    # itself; a Ctrl-C then printed its 40-line KeyboardInterrupt traceback and broke the pool.
    marker = tmp_path / "importing"
    (tmp_path / "slow_preload.py").write_text(SLOW_PRELOAD.format(marker=str(marker)))
    done = subprocess.run([sys.executable, "-c", FORK_SERVER_UNDER_CTRL_C.format(
        marker=str(marker))], capture_output=True, text=True, timeout=120, cwd=tmp_path,
        env={**local_env(), "PYTHONPATH": str(tmp_path)})
    assert done.returncode == 0 and done.stdout.strip() == "worker True", done.stderr[-3000:]
    assert "Traceback" not in done.stderr and "KeyboardInterrupt" not in done.stderr, done.stderr


@pytest.mark.parametrize("where", ["parsing", "starting"])
def test_ctrl_c_while_a_command_starts_is_one_line(monkeypatch, capsys, where):
    # Issue 46: a Ctrl-C while the command imports its libraries, before the run handles the
    # signal, was a 50-line traceback (while its options were parsed) or a silent exit 130.
    import cyclopts.core

    import flows.cli as cli

    def ctrl_c(*args, **kwargs):
        raise KeyboardInterrupt

    if where == "parsing":
        monkeypatch.setattr(cyclopts.core.App, "parse_args", ctrl_c)
    else:
        monkeypatch.setattr(cli, "run_report", ctrl_c)
    monkeypatch.setattr(sys, "argv", ["wadiro", "backfill", "--start", "2024-03-25", "--end",
                                      "2024-04-01", "--warehouse", "w.duckdb"])
    with pytest.raises(SystemExit) as ended:
        cli.main()
    assert ended.value.code == 130
    written = capsys.readouterr()
    assert written.out == "" and written.err == "error: interrupted by Ctrl-C (SIGINT)\n"


# --- real processes and signals ----------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize(("signum", "to_group", "server"), [
    (signal.SIGINT, True, False), (signal.SIGTERM, False, False), (signal.SIGINT, True, True),
], ids=["ctrl-c-to-the-terminal's-group", "sigterm-to-the-command", "ctrl-c-with-a-prefect-server"])
def test_the_first_signal_stops_a_backfill_within_seconds(tmp_path, signum, to_group, server,
                                                          request):
    warehouse = make_warehouse(tmp_path / "w.duckdb", buildings=3)
    env = request.getfixturevalue("prefect_server") if server else local_env()
    proc = start([*BACKFILL, "--warehouse", str(warehouse)], env, tmp_path)
    try:
        wait_for_rows(proc, warehouse, WRITTEN, 1, within_s=300)
        assert len(session_processes(proc.pid)) >= 3  # the command and its two workers
        (os.killpg if to_group else os.kill)(proc.pid, signum)
        began = time.monotonic()
        _, err = proc.communicate(timeout=GRACE_S + 30)
        took = time.monotonic() - began
        assert proc.returncode == 128 + signum, err[-3000:]
        assert took < STOPS_WITHIN_S, f"stopped after {took:.1f} s"
        assert err.strip().splitlines()[-1] == f"error: interrupted by {NAMES[signum]}", err[-3000:]
        assert "Traceback" not in err and "Warning" not in err, err[-3000:]
        assert wait_until_gone(proc.pid, within_s=5) == []
        [(status, counted, message)] = _runs(warehouse)
        assert status == "interrupted" and message.startswith("interrupted by")
        assert 0 < counted == count_rows(warehouse, WRITTEN) < 15  # what finished is written
    finally:
        kill_session(proc.pid)


@pytest.mark.slow
def test_kill_9_leaves_no_process_behind(tmp_path):
    warehouse = make_warehouse(tmp_path / "w.duckdb", buildings=3)
    proc = start([*BACKFILL, "--warehouse", str(warehouse)], local_env(), tmp_path)
    try:
        wait_for_rows(proc, warehouse, WRITTEN, 1, within_s=300)
        workers = [p for p in session_processes(proc.pid) if p != proc.pid]
        assert len(workers) >= 2
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        assert wait_until_gone(proc.pid, within_s=5) == []  # workers, resource tracker: all gone
    finally:
        kill_session(proc.pid)


@pytest.mark.slow
def test_a_lost_prefect_server_fails_the_run_quickly_with_a_clear_message(tmp_path, prefect_server):
    warehouse = make_warehouse(tmp_path / "w.duckdb", buildings=3)
    proc = start([*BACKFILL, "--warehouse", str(warehouse)], prefect_server, tmp_path)
    try:
        wait_for_rows(proc, warehouse, WRITTEN, 1, within_s=400)
        os.killpg(int(prefect_server["WADIRO_TEST_SERVER_PID"]), signal.SIGKILL)
        began = time.monotonic()
        _, err = proc.communicate(timeout=120)
        took = time.monotonic() - began
        assert proc.returncode == 1, err[-3000:]
        assert "lost the Prefect server" in err and "Traceback" not in err, err[-3000:]
        # three missed health checks 5 s apart, then at most the grace period
        assert took < 15 + GRACE_S + 10, f"ended {took:.1f} s after the server"
        assert wait_until_gone(proc.pid, within_s=5) == []
        [(status, counted, message)] = _runs(warehouse)
        assert status == "crashed" and "lost the Prefect server" in message
        assert counted == count_rows(warehouse, WRITTEN)
    finally:
        kill_session(proc.pid)


# --- what a stop prints ------------------------------------------------------------------------

def _abandon_queued_work(stop: bool) -> None:
    """A process pool with one call running, two queued for its worker and three waiting, the
    waiting ones cancelled, its worker ended: as a stopped run leaves its pool (a full call
    queue keeps the cancelled calls in the pool's books until it breaks)."""
    import concurrent.futures as cf
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    pool = cf.ProcessPoolExecutor(max_workers=1, mp_context=context)
    running = pool.submit(time.sleep, 60)
    waiting = [pool.submit(time.sleep, 60) for _ in range(5)]
    while not running.running():
        time.sleep(0.05)
    time.sleep(0.5)  # the pool has queued what its worker will take next
    for future in waiting:
        future.cancel()
    if stop:
        STOP.request(Stop("interrupted by Ctrl-C (SIGINT)", "interrupted", 130))
    for child in multiprocessing.active_children():
        if child.pid in pool._processes:
            child.kill()
    with pytest.raises(cf.process.BrokenProcessPool):
        running.result(timeout=30)
    pool.shutdown(wait=True)


@pytest.mark.parametrize("stop", [True, False], ids=["stopped", "not-stopped"])
def test_a_stopped_run_s_abandoned_batches_print_no_traceback(monkeypatch, stop):
    # Python 3.11's process pool fails the cancelled futures too, and its manager thread dies
    # printing InvalidStateError (CPython gh-107219): 10 lines after a Ctrl-C's own message.
    import threading

    from flows import stopping

    printed = []
    monkeypatch.setattr(threading, "excepthook", lambda args: printed.append(args.exc_type))
    stopping.quiet_abandoned_futures()
    _abandon_queued_work(stop)
    if stop:
        assert printed == []
    elif sys.version_info < (3, 12):  # later Pythons no longer raise it at all
        assert InvalidStateError in printed  # only a stop's own error is quieted


@pytest.mark.slow
def test_ctrl_c_with_batches_waiting_prints_only_its_two_lines(tmp_path):
    warehouse = make_warehouse(tmp_path / "w.duckdb", buildings=3)
    many_waiting = [*BACKFILL[:BACKFILL.index("--max-in-flight")], "--max-in-flight", "8",
                    "--runner", "processes", "--workers", "2", "--write-every-s", "0"]
    proc = start([*many_waiting, "--warehouse", str(warehouse)], local_env(), tmp_path)
    try:
        wait_for_rows(proc, warehouse, WRITTEN, 1, within_s=300)
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=GRACE_S + 30)
        assert proc.returncode == 130, err[-3000:]
        # progress lines, and a wait for this test's own read of the warehouse (on a busy
        # machine its poll can hold the file while the run starts), are not the stop's lines
        own_lock = f"(PID {os.getpid()})); waiting"
        lines = [line for line in err.strip().splitlines()
                 if "building-weeks done" not in line and own_lock not in line]
        assert lines == ["Ctrl-C (SIGINT): stopping; finished batches are being written (again "
                         "to stop at once)", "error: interrupted by Ctrl-C (SIGINT)"], err[-3000:]
    finally:
        kill_session(proc.pid)
