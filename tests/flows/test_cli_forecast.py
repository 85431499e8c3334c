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
    assert "4 building-weeks of 2 weeks, 2024-03-25 to 2024-04-01: 4 published: " in result.output
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


def _weeks_of_last_run(warehouse) -> list[tuple]:
    with connect(warehouse, read_only=True) as con:
        return con.execute("SELECT DISTINCT target_week::VARCHAR FROM window_status "
                           "WHERE run_id = (SELECT run_id FROM runs ORDER BY started_at DESC "
                           "LIMIT 1)").fetchall()


@pytest.mark.parametrize("as_of", ["2024-04-01 06:00", "2024-03-31 20:00",
                                   "2024-03-31T23:30+00:00"])
def test_forecast_takes_its_week_from_its_reference_time(as_of, warehouse, prefect_backend):
    """Monday 06:00 forecasts the week that began that day; Sunday evening, the next day's
    (in the fleet's time zone: 23:30 UTC on 31 March is 00:30 on Monday in London)."""
    result = invoke("forecast", "--as-of", as_of, "--models", "seasonal_naive",
                    "--warehouse", str(warehouse))
    assert result.exit_code == 0, result.output
    assert "2 building-weeks of the week of 2024-04-01: " in result.output
    assert _weeks_of_last_run(warehouse) == [("2024-04-01",)]
    with connect(warehouse, read_only=True) as con:
        tuning = con.execute("SELECT parameters->>'$.tuning', target_weeks FROM runs "
                             "ORDER BY started_at DESC LIMIT 1").fetchone()
    assert tuning == ("reuse", "2024-04-01")  # the weekly run's default, as in the deployment


def test_a_week_that_cannot_be_forecast_exits_non_zero_naming_it(warehouse, prefect_backend):
    """The fleet's readings and weather end on Sunday 2024-04-07: a run at Monday 2024-04-08
    06:00 with no weather for that week forecasts that week or nothing, never an earlier one."""
    result = invoke("forecast", "--as-of", "2024-04-08 06:00", "--models", "seasonal_naive,svr",
                    "--trials", "1", "--warehouse", str(warehouse))
    assert result.exit_code == 4, result.output
    assert "the week of 2024-04-08 could not be forecast" in result.output
    degraded = [line for line in result.output.splitlines() if line.startswith("  degraded: ")]
    assert len(degraded) == 2 and all("2024-04-08: persistence published (no_weather" in line
                                      for line in degraded)
    assert _weeks_of_last_run(warehouse) == [("2024-04-08",)]
    with connect(warehouse, read_only=True) as con:
        statuses = con.execute("SELECT building_id, status FROM window_status "
                               "WHERE target_week = '2024-04-08' ORDER BY 1").fetchall()
    assert [status for _, status in statuses] == ["no_weather", "no_weather"]


def test_week_and_as_of_together_are_refused(warehouse, prefect_backend):
    result = invoke("forecast", "--week", "2024-04-01", "--as-of", "2024-04-01 06:00",
                    "--warehouse", str(warehouse))
    assert result.exit_code == 1 and "give --week or --as-of, not both" in result.output


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
