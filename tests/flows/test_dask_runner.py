"""A backfill through an existing Dask cluster: a real scheduler and two workers on loopback."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from flows.engine import run_flow
from flows.forecast import backfill_flow
from flows.settings import BackfillSettings
from tasks.warehouse.connection import connect
from tests.flows.warehouse_rows import FAST_MODELS, WEEKS, make_warehouse, result_rows

BIN = Path(sys.executable).parent


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _spawn(args: list[str], log: Path, env: dict[str, str], cwd: Path) -> subprocess.Popen:
    with log.open("wb") as out:
        return subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=cwd,
                                start_new_session=True)


@pytest.fixture
def dask_cluster(tmp_path):
    """``dask scheduler`` and two single-threaded ``dask worker`` processes; their logs."""
    from distributed import Client

    port = _free_port()
    address = f"tcp://127.0.0.1:{port}"
    env = {**os.environ, "PREFECT_HOME": str(tmp_path / "prefect-home"),
           "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    env.pop("PREFECT_API_URL", None)  # the flow hands its API settings to the tasks it submits
    procs, logs = [], [tmp_path / "worker-1.log", tmp_path / "worker-2.log"]
    try:
        procs.append(_spawn([str(BIN / "dask"), "scheduler", "--host", "127.0.0.1", "--port",
                             str(port), "--dashboard-address", "127.0.0.1:0"],
                            tmp_path / "scheduler.log", env, tmp_path))
        for log in logs:
            procs.append(_spawn([str(BIN / "dask"), "worker", address, "--host", "127.0.0.1",
                                 "--nthreads", "1", "--dashboard-address", "127.0.0.1:0"],
                                log, env, tmp_path))
        with Client(address, timeout=60) as client:
            client.wait_for_workers(2, timeout=90)
        yield address, logs
    finally:
        for proc in reversed(procs):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=20)


@pytest.mark.slow
def test_backfill_on_dask_matches_threads(tmp_path, dask_cluster, prefect_backend):
    address, logs = dask_cluster
    on_dask = make_warehouse(tmp_path / "dask.duckdb", buildings=3)
    on_threads = tmp_path / "threads.duckdb"
    shutil.copy(on_dask, on_threads)
    run = {"models": FAST_MODELS, "trials": 2, "batch_size": 1}

    summary = backfill_flow(WEEKS[0], WEEKS[-1], BackfillSettings(
        warehouse=str(on_dask), runner="dask", dask_address=address, **run))
    assert summary.ok == 3 * len(WEEKS) and summary.failed == 0
    # One thread: liblinear (the SVR baseline) seeds the C library's process-wide rand(), so two
    # SVR fits running side by side on threads of one process do not reproduce each other.
    backfill_flow(WEEKS[0], WEEKS[-1], BackfillSettings(
        warehouse=str(on_threads), runner="threads", workers=1, **run))
    assert result_rows(on_dask) == result_rows(on_threads)
    # every batch (one building each) ran on a worker of the cluster: the workers log the task
    # runs they executed. Which worker takes which batch is the scheduler's choice: one idle
    # worker may take all three.
    ran = {match for log in logs
           for match in re.findall(r"forecast-batch-(\w+)\+0", log.read_text(errors="replace"))}
    with connect(on_dask, read_only=True) as con:
        buildings = {row[0] for row in con.execute("SELECT building_id FROM buildings").fetchall()}
    assert ran == buildings, logs
    # The command line without a Prefect server sends the same work to the same cluster.
    direct = tmp_path / "direct.duckdb"
    shutil.copy(on_threads, direct)
    run_flow(backfill_flow, prefect=False, start=WEEKS[0], end=WEEKS[-1], settings=BackfillSettings(
        warehouse=str(direct), runner="dask", dask_address=address, **run))
    assert result_rows(direct) == result_rows(on_threads)


def test_dask_runner_needs_an_address():
    with pytest.raises(ValueError, match="the dask runner needs dask_address"):
        BackfillSettings(runner="dask")
