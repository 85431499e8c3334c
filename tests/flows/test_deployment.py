"""``prefect.yaml`` against a real Prefect server on loopback: deploy, run through a worker, check rows.

The worker runs flows from ``WADIRO_PROJECT_DIR``. Here that is a scratch project directory
holding a link to the checkout's ``flows/`` and the warehouse, so the test also shows that the
deployments' relative ``warehouse`` parameter is read relative to that directory (and not to
the worker's own working directory).
"""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest

from tasks.protocol.config import PROTOCOLS
from tasks.warehouse.connection import connect
from tests.flows.processes import WORK_POOL, prefect_cli
from tests.flows.warehouse_rows import FAST_MODELS, WEEKS, make_warehouse

ROOT = Path(__file__).resolve().parents[2]


def _run_deployment(env, name: str, params: dict[str, str], cwd: Path) -> dict:
    """``prefect deployment run`` then one worker poll; the finished flow run as the API has it."""
    args = [arg for key, value in params.items() for arg in ("--param", f"{key}={value}")]
    out = prefect_cli(env, "deployment", "run", name, *args, cwd=cwd)
    flow_run_id = re.search(r"UUID: ([0-9a-f-]{36})", out).group(1)
    prefect_cli(env, "worker", "start", "--pool", WORK_POOL, "--run-once", cwd=cwd)
    return httpx.get(f"{env['PREFECT_API_URL']}/flow_runs/{flow_run_id}", timeout=10).json()


@pytest.mark.slow
def test_deploy_from_prefect_yaml_and_run_through_a_worker(tmp_path, prefect_server):
    project = tmp_path / "project"
    project.mkdir()
    (project / "flows").symlink_to(ROOT / "flows", target_is_directory=True)
    make_warehouse(project / "warehouse.duckdb", buildings=2)
    elsewhere = tmp_path / "worker-cwd"
    elsewhere.mkdir()
    env = {**prefect_server, "WADIRO_PROJECT_DIR": str(project)}

    prefect_cli(env, "work-pool", "create", WORK_POOL, "--type", "process", cwd=ROOT)
    prefect_cli(env, "--no-prompt", "deploy", "--all", cwd=ROOT)

    api = env["PREFECT_API_URL"]
    deployments = {d["name"]: d for d in httpx.post(f"{api}/deployments/filter", json={}).json()}
    assert set(deployments) == {"weekly-forecast", "backfill"}
    weekly = deployments["weekly-forecast"]
    [schedule] = weekly["schedules"]
    assert schedule["active"] and schedule["schedule"]["cron"] == "0 6 * * 1"
    assert schedule["schedule"]["timezone"] == "Europe/London"
    assert weekly["work_pool_name"] == WORK_POOL
    assert deployments["backfill"]["schedules"] == []
    # Defaults are said once, in the flows' settings: prefect.yaml restates none of them.
    deployed = PROTOCOLS["deployed"]
    for name in ("weekly-forecast", "backfill"):
        assert deployments[name]["parameters"] == {}
        schema = deployments[name]["parameter_openapi_schema"]["properties"]["settings"]
        assert schema["default"]["protocol"] == "deployed"
        assert schema["default"]["tuning"] == deployed.tuning
        assert schema["default"]["trials"] == deployed.trials

    # Overrides as an operator gives them: a partial settings object, the rest from defaults.
    common = {"settings": '{"models": ["svr", "wadiro_linreg", "seasonal_naive"], "trials": 2}'}
    backfill = _run_deployment(env, "backfill/backfill",
                               {"start": WEEKS[0].isoformat(), "end": WEEKS[0].isoformat(), **common},
                               cwd=elsewhere)
    assert backfill["state_type"] == "COMPLETED", backfill["state"]
    # its Monday morning: a weekly run forecasts the week of its reference time
    weekly_run = _run_deployment(env, "weekly-forecast/weekly-forecast",
                                 {"as_of": f"{WEEKS[1].isoformat()}T06:00:00", **common},
                                 cwd=elsewhere)
    assert weekly_run["state_type"] == "COMPLETED", weekly_run["state"]

    assert not (elsewhere / "warehouse.duckdb").exists()
    with connect(project / "warehouse.duckdb", read_only=True) as con:
        runs = con.execute("SELECT flow, status FROM runs ORDER BY started_at").fetchall()
        weeks = con.execute("SELECT target_week, count(*) FROM window_status WHERE status = 'ok' "
                            "GROUP BY 1 ORDER BY 1").fetchall()
        scores = con.execute("SELECT count(*) FROM scores").fetchone()[0]
        reused = con.execute("SELECT DISTINCT tuned_week FROM model_fits WHERE target_week = ? "
                             "AND model <> 'seasonal_naive'", [WEEKS[1]]).fetchall()
    assert runs == [("backfill", "completed"), ("forecast", "completed")]
    assert weeks == [(WEEKS[0], 2), (WEEKS[1], 2)]
    assert scores == 2 * len(WEEKS) * len(FAST_MODELS)
    assert reused == [(WEEKS[0],)]  # the weekly run reused the backfill's tuning


def _flow_run_logs(env, flow_run_id: str) -> list[str]:
    logs = httpx.post(f"{env['PREFECT_API_URL']}/logs/filter", timeout=10, json={
        "logs": {"flow_run_id": {"any_": [flow_run_id]}}, "sort": "TIMESTAMP_ASC"}).json()
    return [log["message"] for log in logs]


@pytest.mark.slow
def test_a_scheduled_run_writes_to_the_worker_s_wadiro_warehouse_or_says_in_one_line_it_is_missing(
    tmp_path, prefect_server
):
    project = tmp_path / "project"
    project.mkdir()
    (project / "flows").symlink_to(ROOT / "flows", target_is_directory=True)
    operator = make_warehouse(tmp_path / "operator.duckdb", buildings=2)
    env = {**prefect_server, "WADIRO_PROJECT_DIR": str(project)}
    prefect_cli(env, "work-pool", "create", WORK_POOL, "--type", "process", cwd=ROOT)
    prefect_cli(env, "--no-prompt", "deploy", "--name", "weekly-forecast", cwd=ROOT)

    # As the Monday schedule starts it, at the fleet's Monday morning (the reference time a
    # schedule gives; the fleet's data are of 2024): no other parameter; the worker's
    # environment names the operator's warehouse.
    scheduled = _run_deployment({**env, "WADIRO_WAREHOUSE": str(operator)},
                                "weekly-forecast/weekly-forecast",
                                {"as_of": "2024-04-01T06:00:00"}, cwd=tmp_path)
    assert scheduled["state_type"] == "COMPLETED", scheduled["state"]
    with connect(operator, read_only=True) as con:
        assert con.execute("SELECT flow, status FROM runs").fetchall() == [("forecast", "completed")]
    assert not (project / "warehouse.duckdb").exists()

    # Without it the default is the project's warehouse.duckdb, which is not there.
    missing = _run_deployment(env, "weekly-forecast/weekly-forecast", {}, cwd=tmp_path)
    assert missing["state_type"] == "FAILED"
    line = (f"warehouse {project / 'warehouse.duckdb'} does not exist (the default; "
            f"WADIRO_WAREHOUSE is not set, relative to {project}): set WADIRO_WAREHOUSE or give "
            "--warehouse (a deployment: WADIRO_WAREHOUSE in the worker's environment, or "
            "settings.warehouse)")
    assert line in missing["state"]["message"]
    logs = _flow_run_logs(env, missing["id"])
    assert any(line in message for message in logs), logs
    assert not any("Traceback" in message for message in logs), logs
    assert not (project / "warehouse.duckdb").exists()
