"""The live Monday loop on the real Cambridge archive: each Monday the operator ingests last
week's meter export and the coming week's weather forecast, and the weekly run forecasts the
coming week before its actuals exist; the next Monday's run scores it.

The fast version runs the flow directly (no Prefect server) over two Mondays and the Monday
that scores the second; the slow one deploys ``prefect.yaml`` to a real local server and runs
six Mondays (and the seventh that scores the sixth) through a process worker, with the
physics-constrained WaDiRo-SCNN beside the fast models.
"""

from __future__ import annotations

import json
import logging
import re
import subprocess
import sys
from datetime import date, datetime, timedelta
from pathlib import Path

import httpx
import pytest

from flows.engine import run_flow
from flows.forecast import weekly_forecast_flow
from flows.settings import WeeklySettings
from tasks.warehouse.connection import connect
from tests.cli_runs import invoke
from tests.flows.live_loop import (
    ANNEX,
    ARCHIVE_BUILDINGS,
    FIRST_MONDAY,
    MODELS,
    Archive,
    expected_scores,
    monday_commands,
    setup_commands,
    utc,
)
from tests.flows.processes import WORK_POOL, prefect_cli

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
FAST = MODELS.split(",")
WITH_SCNN = [*FAST, "wadiro_pcscnn"]


def _cli(*args: str) -> None:
    result = invoke(*args)
    assert result.exit_code == 0, f"wadiro {' '.join(args)}:\n{result.output}"


def _monday_morning(monday: date) -> datetime:
    """The replayed Monday's 06:00 in the fleet's local time: the run's reference time."""
    return datetime(monday.year, monday.month, monday.day, 6)


def _readings_in_week(warehouse: Path, monday: date) -> int:
    with connect(warehouse, read_only=True) as con:
        return con.execute("SELECT count(*) FROM meter_readings WHERE ts >= ? AND ts < ?",
                           [utc(monday), utc(monday + timedelta(weeks=1))]).fetchone()[0]


def check_monday(warehouse: Path, monday: date, run_id: str, models: list[str]) -> None:
    """After the run of ``monday``: it forecast the coming week, with forecast weather, before
    any of its readings existed (scores rows of no hour yet); the week before is scored."""
    with connect(warehouse, read_only=True) as con:
        status = {row[0]: row[1:] for row in con.execute(
            "SELECT building_id, target_week, status, weather_source, n_test_weather_observed, "
            "n_test_weather_forecast, n_test_labelled FROM window_status WHERE run_id = ?",
            [run_id]).fetchall()}
        now = con.execute(
            "SELECT building_id, model, n_hours, mae FROM scores WHERE target_week = ? "
            "ORDER BY 1, 2", [monday]).fetchall()
        before = con.execute(
            "SELECT min(n_hours), count(*) FROM scores WHERE target_week = ? AND building_id "
            "IN (SELECT unnest(?::VARCHAR[]))", [monday - timedelta(weeks=1),
                                                  list(ARCHIVE_BUILDINGS)]).fetchone()
    for building_id in ARCHIVE_BUILDINGS:
        assert status[building_id] == (monday, "ok", "forecast", 0, 168, 0), building_id
    assert status[ANNEX][:3] == (monday, "no_weather", None)
    assert [row[0] for row in now].count(ANNEX) == 1  # seasonal naive only, published
    assert len(now) == len(ARCHIVE_BUILDINGS) * len(models) + 1
    assert all(n_hours == 0 and mae is None for _, _, n_hours, mae in now)
    if monday > FIRST_MONDAY:
        assert before == (168, len(ARCHIVE_BUILDINGS) * len(models))  # scored on its full week


def check_loop(warehouse: Path, archive: Archive, run_of_week: dict[date, str],
               models: list[str]) -> None:
    """Every forecast week has one set of forecasts (from its own Monday's run) and one set of
    scores, which match the scores recomputed in SQL and, independently, from the archive."""
    weeks = sorted(run_of_week)
    with connect(warehouse, read_only=True) as con:
        sets = con.execute(
            "SELECT target_week, building_id, model, count(*), count(DISTINCT ts), "
            "list(DISTINCT run_id) FROM forecasts GROUP BY ALL").fetchall()
        scores = con.execute(
            "SELECT building_id, model, target_week, mae, rmse, n_hours, run_id FROM scores "
            "WHERE target_week IN (SELECT unnest(?::DATE[]))", [weeks]).df()
        in_sql = con.execute(
            """SELECT f.building_id, f.model, f.target_week, avg(abs(f.y_hat - m.kwh)) AS mae,
                      count(*) AS n_hours
               FROM forecasts f JOIN meter_readings m USING (building_id, ts)
               WHERE m.kwh IS NOT NULL AND f.y_hat IS NOT NULL GROUP BY ALL""").df()
        forecasts = con.execute("SELECT building_id, model, target_week, ts, y_hat "
                                "FROM forecasts").df()
        statuses = con.execute("SELECT target_week, count(*), count(DISTINCT building_id) "
                               "FROM window_status GROUP BY 1 ORDER BY 1").fetchall()
    assert statuses == [(w, 3, 3) for w in [*weeks, weeks[-1] + timedelta(weeks=1)]]
    per_week = {}
    for week, building_id, model, n, distinct, runs in sets:
        assert n == distinct == 168 and runs == [run_of_week.get(week, runs[0])]
        per_week[week] = per_week.get(week, 0) + 1
    assert all(per_week[w] == len(ARCHIVE_BUILDINGS) * len(models) + 1 for w in weeks)
    key = ["building_id", "model", "target_week"]
    assert not scores.duplicated(key).any()
    assert len(scores) == len(weeks) * (len(ARCHIVE_BUILDINGS) * len(models) + 1)
    assert (scores["n_hours"] > 0).all()
    forecasts["ts"] = forecasts["ts"].dt.tz_convert("UTC")
    for truth in (in_sql, expected_scores(archive, forecasts)):
        merged = scores.merge(truth, on=key, suffixes=("", "_truth"), validate="one_to_one")
        assert len(merged) == len(scores)
        assert (merged["n_hours"] == merged["n_hours_truth"]).all()
        assert (merged["mae"] - merged["mae_truth"]).abs().max() <= 1e-9
    rmse = scores.merge(expected_scores(archive, forecasts), on=key, suffixes=("", "_truth"))
    assert (rmse["rmse"] - rmse["rmse_truth"]).abs().max() <= 1e-9


def test_live_loop_directly(cambridge_archive, tmp_path, no_prefect_server):
    mondays = [FIRST_MONDAY + timedelta(weeks=k) for k in range(3)]
    archive = Archive.load(cambridge_archive, len(mondays))
    warehouse = tmp_path / "w.duckdb"
    for command in setup_commands(archive, tmp_path, warehouse):
        _cli(*command)
    heard: list[str] = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = lambda record: heard.append(record.getMessage())  # type: ignore[method-assign]
    logging.getLogger("wadiro.run").addHandler(handler)
    run_of_week: dict[date, str] = {}
    try:
        for monday in mondays:
            for command in monday_commands(archive, monday, tmp_path, warehouse):
                _cli(*command)
            assert _readings_in_week(warehouse, monday) == 0
            heard.clear()
            summary = run_flow(weekly_forecast_flow, as_of=_monday_morning(monday),
                               settings=WeeklySettings(warehouse=str(warehouse), models=FAST,
                                                       trials=2, runner="threads", workers=2))
            assert summary.weeks == [monday]
            check_monday(warehouse, monday, summary.run_id, FAST)
            said = [line for line in heard if ANNEX in line]
            assert len(said) == 1 and "no_weather" in said[0] and "seasonal_naive" in said[0]
            run_of_week[monday] = summary.run_id
    finally:
        logging.getLogger("wadiro.run").removeHandler(handler)
    run_of_week.pop(mondays[-1])  # the last Monday's week is not over: not scored yet
    check_loop(warehouse, archive, run_of_week, FAST)


# --- through a Prefect server and a process worker ------------------------------------------




def _wadiro(env: dict[str, str], args: list[str], cwd: Path) -> None:
    done = subprocess.run([str(BIN / "wadiro"), *args], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, f"wadiro {' '.join(args)}:\n{done.stdout[-3000:]}{done.stderr[-3000:]}"


def _api(env: dict[str, str], method: str, path: str, body: dict | None = None):
    response = httpx.request(method, f"{env['PREFECT_API_URL']}{path}", json=body, timeout=30)
    response.raise_for_status()
    return response.json()


@pytest.mark.slow
def test_six_live_mondays_through_a_worker(cambridge_archive, tmp_path, prefect_server):
    mondays = [FIRST_MONDAY + timedelta(weeks=k) for k in range(7)]
    archive = Archive.load(cambridge_archive, len(mondays))
    project = tmp_path / "project"
    project.mkdir()
    (project / "flows").symlink_to(ROOT / "flows", target_is_directory=True)
    warehouse = project / "warehouse.duckdb"
    env = {**prefect_server, "WADIRO_PROJECT_DIR": str(project)}
    prefect_cli(env, "work-pool", "create", WORK_POOL, "--type", "process", cwd=ROOT)
    prefect_cli(env, "--no-prompt", "deploy", "--name", "weekly-forecast", cwd=ROOT)
    for command in setup_commands(archive, tmp_path, warehouse):
        _wadiro(env, command, cwd=tmp_path)
    settings = json.dumps({"models": WITH_SCNN, "trials": 2, "workers": 2})
    run_of_week: dict[date, str] = {}
    for monday in mondays:
        for command in monday_commands(archive, monday, tmp_path, warehouse):
            _wadiro(env, command, cwd=tmp_path)
        assert _readings_in_week(warehouse, monday) == 0
        out = prefect_cli(env, "deployment", "run", "weekly-forecast/weekly-forecast",
                          "--param", f"settings={settings}",
                          "--param", f"as_of={_monday_morning(monday).isoformat()}", cwd=tmp_path)
        flow_run_id = re.search(r"UUID: ([0-9a-f-]{36})", out).group(1)
        prefect_cli(env, "worker", "start", "--pool", WORK_POOL, "--run-once", cwd=tmp_path)
        flow_run = _api(env, "GET", f"/flow_runs/{flow_run_id}")
        assert flow_run["state_type"] == "COMPLETED", flow_run["state"]
        with connect(warehouse, read_only=True) as con:
            run_id = con.execute("SELECT run_id FROM runs WHERE flow = 'forecast' "
                                 "ORDER BY started_at DESC LIMIT 1").fetchone()[0]
        check_monday(warehouse, monday, run_id, WITH_SCNN)
        # the run's log and its artifact name the building that could not be forecast
        logs = _api(env, "POST", "/logs/filter", {"logs": {
            "flow_run_id": {"any_": [run_id]}, "level": {"ge_": logging.WARNING}}})
        said = [log["message"] for log in logs if "not forecast:" in log["message"]]
        assert all(ANNEX in line for line in said)
        assert len(said) == 1 and "no_weather" in said[0]
        artifacts = _api(env, "POST", "/artifacts/filter", {"artifacts": {
            "key": {"any_": ["forecast-not-forecast"]}, "flow_run_id": {"any_": [run_id]}}})
        table = artifacts[0]["data"]
        rows = json.loads(table) if isinstance(table, str) else table
        assert [(r["building_id"], r["status"], r["published"]) for r in rows] == [
            (ANNEX, "no_weather", "seasonal_naive")]
        run_of_week[monday] = run_id
    run_of_week.pop(mondays[-1])
    check_loop(warehouse, archive, run_of_week, WITH_SCNN)
