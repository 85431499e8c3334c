"""``wadiro worker`` stops on the first SIGTERM, its flow runs first (issue 30: "the worker
needed a second signal to stop").

Both tests start it as the trial did, in the background of a script, where the shell leaves
SIGINT ignored: ``prefect worker start`` started so ignores SIGTERM too (it turns it into a
SIGINT to itself), and, when it does stop, kills its flow runs before they can record anything.
"""

from __future__ import annotations

import re
import signal
import subprocess
import time
from pathlib import Path

import httpx
import psutil
import pytest

from flows.stopping import GRACE_S
from tasks.warehouse.connection import connect
from tests.flows.processes import WADIRO, WORK_POOL, count_rows, prefect_cli, wait_for_rows
from tests.flows.warehouse_rows import make_warehouse

ROOT = Path(__file__).resolve().parents[2]
SLOW_BACKFILL = ('{"models": ["wadiro_pcscnn", "svr", "seasonal_naive"], "trials": 3, '
                 '"tuning": "per-window", "batch_size": 1, "max_in_flight": 2, "workers": 2, '
                 '"write_every_s": 0}')
"""Three buildings x five weeks, every window tuned, each batch written as it comes back: a
minute or more of work."""


def _as_in_a_script() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # what `command &` in a script gets


def _start_worker(env: dict[str, str], cwd: Path) -> subprocess.Popen:
    return subprocess.Popen([WADIRO, "worker", "--pool", WORK_POOL], env=env, cwd=cwd,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True, preexec_fn=_as_in_a_script)


def _tree(pid: int) -> list[psutil.Process]:
    parent = psutil.Process(pid)
    return [parent, *parent.children(recursive=True)]


@pytest.fixture
def deployed(tmp_path, prefect_server):
    project = tmp_path / "project"
    project.mkdir()
    (project / "flows").symlink_to(ROOT / "flows", target_is_directory=True)
    warehouse = make_warehouse(tmp_path / "operator.duckdb", buildings=3)
    env = {**prefect_server, "WADIRO_PROJECT_DIR": str(project), "WADIRO_WAREHOUSE": str(warehouse)}
    prefect_cli(env, "work-pool", "create", WORK_POOL, "--type", "process", cwd=ROOT)
    prefect_cli(env, "--no-prompt", "deploy", "--name", "backfill", cwd=ROOT)
    return env, warehouse


@pytest.mark.slow
def test_one_sigterm_stops_the_flow_run_cleanly_then_the_worker(deployed, tmp_path):
    env, warehouse = deployed
    out = prefect_cli(env, "deployment", "run", "backfill/backfill", "--param",
                      "start=2024-03-04", "--param", "end=2024-04-01", "--param",
                      f"settings={SLOW_BACKFILL}", cwd=tmp_path)
    flow_run_id = re.search(r"UUID: ([0-9a-f-]{36})", out).group(1)
    worker = _start_worker(env, tmp_path)
    try:
        wait_for_rows(worker, warehouse, "SELECT count(*) FROM window_status", 1, within_s=400)
        started = _tree(worker.pid)
        assert len(started) >= 3  # this command, Prefect's worker, the flow run (and its workers)
        worker.send_signal(signal.SIGTERM)
        began = time.monotonic()
        output, _ = worker.communicate(timeout=GRACE_S + 60)
        took = time.monotonic() - began
        assert worker.returncode == 128 + signal.SIGTERM, output[-3000:]
        assert took < GRACE_S + 15, f"stopped after {took:.1f} s"
        assert "wadiro worker: SIGTERM: asking 1 flow run(s) to stop" in output, output[-3000:]
        assert output.strip().splitlines()[-1] == "wadiro worker: stopped"
        assert "Traceback" not in output, output[-3000:]
        time.sleep(1)
        alive = [p.pid for p in started if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
        assert alive == []
        with connect(warehouse, read_only=True) as con:
            [(status, counted, message)] = con.execute(
                "SELECT status, n_building_weeks, message FROM runs").fetchall()
        assert (status, message) == ("interrupted", "interrupted by SIGTERM")
        assert 0 < counted == count_rows(warehouse, "SELECT count(*) FROM window_status") < 15
        flow_run = httpx.get(f"{env['PREFECT_API_URL']}/flow_runs/{flow_run_id}", timeout=10).json()
        assert flow_run["state_type"] == "FAILED", flow_run["state"]
        assert "interrupted by SIGTERM" in flow_run["state"]["message"]
    finally:
        for process in _tree(worker.pid) if worker.poll() is None else []:
            process.kill()


@pytest.mark.slow
def test_an_idle_worker_stops_on_one_sigterm_and_warns_of_a_missing_warehouse(deployed, tmp_path):
    env, _ = deployed
    worker = _start_worker({**env, "WADIRO_WAREHOUSE": str(tmp_path / "nope.duckdb")}, tmp_path)
    try:
        time.sleep(15)  # it has started and polls
        assert worker.poll() is None
        worker.send_signal(signal.SIGTERM)
        output, _ = worker.communicate(timeout=40)
        assert worker.returncode == 128 + signal.SIGTERM, output[-3000:]
        assert output.splitlines()[0] == (
            "wadiro worker: warning: the deployments' default warehouse, "
            f"{tmp_path / 'nope.duckdb'} "
            "(from WADIRO_WAREHOUSE), does not exist: a run given no settings.warehouse (a "
            "scheduled run, unless prefect.yaml sets it) will fail at its start; set "
            "WADIRO_WAREHOUSE to the operator's warehouse and start the worker again")
        assert "stopped!" in output and "Traceback" not in output, output[-3000:]
    finally:
        if worker.poll() is None:
            for process in _tree(worker.pid):
                process.kill()
