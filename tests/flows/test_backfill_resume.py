"""A backfill killed mid-run and started again ends with exactly the rows of an uninterrupted run.

The killed run is a separate process (SIGKILL: no clean-up of any kind) that reports to the
same Prefect test server. While it runs, this process plays the analyst: it opens the warehouse
read-only over and over and records how long each open-and-query waited for the writer.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from prefect.settings import PREFECT_API_URL

from flows.forecast import backfill_flow
from flows.settings import BackfillSettings
from tasks.warehouse.connection import connect
from tests.flows.warehouse_rows import (
    FAST_MODELS,
    RESULT_TABLES,
    WEEKS,
    make_warehouse,
    result_rows,
)

BUILDINGS = 3
BACKFILL = {"models": FAST_MODELS, "trials": 2, "batch_size": 1, "max_in_flight": 1,
            "write_every_s": 0}
"""One building per batch, one batch at a time, each written as it finishes: the first rows land
long before the last."""

MAX_READ_WAIT_S = 5.0

_CHILD = textwrap.dedent("""
    import sys
    from datetime import date
    from flows.forecast import backfill_flow
    from flows.settings import BackfillSettings
    backfill_flow(date.fromisoformat(sys.argv[2]), date.fromisoformat(sys.argv[3]),
                  BackfillSettings(warehouse=sys.argv[1], models=sys.argv[4].split(","),
                                   trials=int(sys.argv[5]), batch_size=1, max_in_flight=1,
                                   write_every_s=0))
""")


def _count(warehouse, sql: str, params=()) -> tuple[int, float]:
    """A read-only query as an analyst would run it, and how long it took end to end."""
    started = time.perf_counter()
    with connect(warehouse, read_only=True, retries=12, backoff_s=0.05) as con:
        value = con.execute(sql, list(params)).fetchone()[0]
    return value, time.perf_counter() - started


def _start_backfill(warehouse) -> subprocess.Popen:
    env = {**os.environ, "PREFECT_API_URL": PREFECT_API_URL.value(),
           "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    args = [sys.executable, "-c", _CHILD, str(warehouse), WEEKS[0].isoformat(),
            WEEKS[-1].isoformat(), ",".join(FAST_MODELS), str(BACKFILL["trials"])]
    return subprocess.Popen(args, env=env, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _kill(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)


@pytest.mark.slow
def test_killed_backfill_resumes_to_the_uninterrupted_rows(tmp_path, prefect_backend):
    pristine = make_warehouse(tmp_path / "pristine.duckdb", buildings=BUILDINGS)
    reference, resumed = tmp_path / "reference.duckdb", tmp_path / "resumed.duckdb"
    shutil.copy(pristine, reference)
    shutil.copy(pristine, resumed)
    total = BUILDINGS * len(WEEKS)

    backfill_flow(WEEKS[0], WEEKS[-1], BackfillSettings(warehouse=str(reference), **BACKFILL))
    expected = result_rows(reference)
    assert len(expected["window_status"]) == total

    proc = _start_backfill(resumed)
    waits: list[float] = []
    try:
        deadline = time.monotonic() + 240
        done = 0
        while done < 2 * len(WEEKS):  # two of the three batches written, the third computing
            assert proc.poll() is None, f"backfill exited early: {proc.stderr.read().decode()[-2000:]}"
            assert time.monotonic() < deadline, "two batches were not written within 240 s"
            done, waited = _count(resumed, "SELECT count(*) FROM window_status")
            waits.append(waited)
            time.sleep(0.1)
    finally:
        _kill(proc)
    assert proc.returncode == -signal.SIGKILL

    # The killed run left part of the backfill and a 'running' row that will never finish.
    killed = result_rows(resumed)
    assert 0 < len(killed["window_status"]) < total
    with connect(resumed, read_only=True) as con:
        stale = con.execute("SELECT run_id, status, finished_at FROM runs").fetchall()
    assert len(stale) == 1 and stale[0][1:] == ("running", None)

    summary = backfill_flow(WEEKS[0], WEEKS[-1], BackfillSettings(warehouse=str(resumed), **BACKFILL))
    assert summary.ok == total and summary.failed == 0
    assert result_rows(resumed) == expected
    with connect(resumed, read_only=True) as con:
        for table in RESULT_TABLES:
            owners = con.execute(f"SELECT DISTINCT run_id FROM {table}").fetchall()
            assert owners == [(summary.run_id,)], table
        runs = dict(con.execute("SELECT run_id, status FROM runs").fetchall())
    # The killed run is recorded abandoned by the next run (its process is gone, issue 60); it
    # no longer owns any result row.
    assert runs == {stale[0][0]: "abandoned", summary.run_id: "completed"}

    assert len(waits) >= 3 and max(waits) < MAX_READ_WAIT_S, waits
