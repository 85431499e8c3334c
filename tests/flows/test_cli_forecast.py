"""``wadiro forecast``, ``backfill`` and ``report`` end to end (on Prefect's test backend)."""

from __future__ import annotations

import pytest

from tasks.warehouse.connection import connect
from tests.cli_runs import invoke
from tests.flows.warehouse_rows import make_warehouse


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory):
    return make_warehouse(tmp_path_factory.mktemp("cli") / "w.duckdb", buildings=2)



def test_backfill_then_report(warehouse, tmp_path, prefect_backend):
    result = invoke("backfill", "--start", "2024-03-25", "--end", "2024-04-01",
                    "--models", "svr,seasonal_naive", "--trials", "2",
                    "--warehouse", str(warehouse))
    assert result.exit_code == 0, result.output
    assert "4 building-weeks over 2 week(s): 4 published: " in result.output
    assert "0 degraded; 0 not published, 0 failed" in result.output
    assert "seasonal_naive" in result.output and "mean_mae" in result.output  # the leaderboard
    with connect(warehouse, read_only=True) as con:
        assert con.execute("SELECT count(*) FROM scores").fetchone()[0] == 2 * 2 * 2
        params = con.execute("SELECT parameters->>'$.trials', parameters->>'$.runner', "
                             "parameters->>'$.tuning' FROM runs").fetchone()
    assert params == ("2", "processes", "reuse")  # the deployed protocol tunes and reuses

    out = tmp_path / "report"
    result = invoke("report", "--out", str(out), "--warehouse", str(warehouse))
    assert result.exit_code == 0, result.output
    assert (out / "leaderboard.csv").exists() and list((out / "plots").glob("*.png"))


def test_forecast_defaults_to_the_latest_week_with_weather(warehouse, prefect_backend):
    result = invoke("forecast", "--models", "seasonal_naive", "--warehouse", str(warehouse))
    assert result.exit_code == 0, result.output
    with connect(warehouse, read_only=True) as con:
        weeks = con.execute("SELECT DISTINCT target_week::VARCHAR FROM window_status "
                            "WHERE run_id = (SELECT run_id FROM runs ORDER BY started_at DESC "
                            "LIMIT 1)").fetchall()
    assert weeks == [("2024-04-01",)]  # the fleet's 14 weeks end on Sunday 2024-04-07
    with connect(warehouse, read_only=True) as con:
        tuning = con.execute("SELECT parameters->>'$.tuning' FROM runs WHERE flow = 'forecast'"
                             ).fetchall()
    assert tuning == [("reuse",)]  # the weekly run's default, as in the deployment


@pytest.mark.parametrize(("args", "message"), [
    (("backfill", "--start", "2024-03-26", "--end", "2024-04-01"), "Tuesday, not a Monday"),
    (("backfill", "--start", "2024-04-01", "--end", "2024-03-25"), "empty week range"),
    (("forecast", "--week", "2024-04-01", "--buildings", "b404"), "b404"),
])
def test_input_errors_are_one_line(args, message, warehouse, prefect_backend):
    result = invoke(*args, "--warehouse", str(warehouse))
    assert result.exit_code == 1
    assert message in result.output and "Traceback" not in result.output


@pytest.mark.parametrize(("args", "message"), [
    (("forecast", "--models", "nope"), "--models: unknown model(s) ['nope']"),
    (("backfill", "--start", "2024-04-01", "--end", "2024-04-01", "--models", ""), "--models: the list is empty"),
    (("forecast", "--buildings", " , "), "--buildings: the list is empty"),
    (("forecast", "--feature-set", "bogus"), "--feature-set: unknown feature set 'bogus'"),
    (("forecast", "--trials", "0"), "--trials: Input should be greater than or equal to 1"),
    (("backfill", "--start", "2024-04-01", "--end", "2024-04-01", "--runner", "dask"),
     "dask runner needs dask_address"),
])
def test_bad_settings_are_usage_errors_before_any_run(args, message, warehouse):
    with connect(warehouse, read_only=True) as con:
        runs_before = con.execute("SELECT count(*) FROM runs").fetchone()
    result = invoke(*args, "--warehouse", str(warehouse))
    assert result.exit_code == 2, result.output
    shown = " ".join(result.output.replace("│", " ").split())  # unwrap the error box
    assert message in shown and "Traceback" not in shown
    with connect(warehouse, read_only=True) as con:
        assert con.execute("SELECT count(*) FROM runs").fetchone() == runs_before
