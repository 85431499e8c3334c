"""What was bid stays (issue 46): every published forecast is kept as a vintage with its issue
time and run; a second run of a week adds one and never rewrites the first; "what was published
at a time" is answered by ``published_as_of``; the weekly run takes its week from the clock, so
a meter file one hour short never makes it forecast last week again."""

from __future__ import annotations

import hashlib
import shutil
import time
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pandas as pd
import pytest

from flows.engine import run_flow
from flows.forecast import weekly_forecast_flow
from flows.settings import WeeklySettings
from tasks.errors import WeekNotForecastError
from tasks.warehouse.connection import connect
from tests.cli_runs import invoke
from tests.flows.warehouse_rows import make_warehouse

MODELS = ["seasonal_naive", "wadiro_linreg"]
WEEK = date(2024, 4, 1)  # the fleet's 14 weeks end on Sunday 2024-04-07


@pytest.fixture(scope="module")
def fleet(tmp_path_factory) -> Path:
    return make_warehouse(tmp_path_factory.mktemp("vintages") / "w.duckdb", buildings=2)


@pytest.fixture
def warehouse(fleet, tmp_path) -> Path:
    return Path(shutil.copy(fleet, tmp_path / "w.duckdb"))


def _run(warehouse: Path, **week) -> object:
    settings = WeeklySettings(warehouse=str(warehouse), models=MODELS, trials=1, runner="threads")
    return run_flow(weekly_forecast_flow, prefect=False, settings=settings, **week)


def _rows_hash(warehouse: Path, sql: str, params: list) -> str:
    with connect(warehouse, read_only=True) as con:
        rows = con.execute(sql, params).fetchall()
    assert rows
    return hashlib.sha256(repr(rows).encode()).hexdigest()


ISSUED = ("SELECT building_id, target_week, ts, model, y_hat, y_lo_80, y_hi_80, y_lo_95, y_hi_95, "
          "reason, run_id, issued_at FROM issued_forecasts WHERE run_id = ? ORDER BY ALL")
AS_OF = ("SELECT building_id, target_week, ts, model, y_hat, y_lo_80, y_hi_80, y_lo_95, y_hi_95, "
         "reason, run_id, issued_at FROM published_as_of(?::TIMESTAMPTZ) "
         "WHERE target_week = ? ORDER BY ALL")


def test_a_second_run_of_a_week_adds_a_vintage_and_keeps_the_first(warehouse):
    first = _run(warehouse, week=WEEK)
    before = _rows_hash(warehouse, ISSUED, [first.run_id])
    with connect(warehouse, read_only=True) as con:
        issued_first = con.execute("SELECT max(issued_at) FROM issued_forecasts").fetchone()[0]
    time.sleep(0.05)
    between = datetime.now(UTC)
    time.sleep(0.05)
    second = _run(warehouse, week=WEEK)
    assert _rows_hash(warehouse, ISSUED, [first.run_id]) == before  # byte for byte
    with connect(warehouse, read_only=True) as con:
        vintages = con.execute(
            "SELECT building_id, count(DISTINCT run_id), count(*) FROM issued_forecasts "
            "GROUP BY 1 ORDER BY 1").fetchall()
        latest = con.execute("SELECT DISTINCT run_id FROM published_forecasts").fetchall()
        scored = con.execute("SELECT vintage, run_id FROM vintage_scores ORDER BY building_id, "
                             "vintage").fetchall()
    assert [(n_runs, n_rows) for _, n_runs, n_rows in vintages] == [(2, 2 * 168)] * 2
    assert latest == [(second.run_id,)]  # the default view shows the latest vintage
    assert scored == [(1, first.run_id), (2, second.run_id)] * 2
    assert issued_first < between
    # what was published between the two runs is the first vintage, exactly
    assert _rows_hash(warehouse, AS_OF, [between, WEEK]) == before
    assert _rows_hash(warehouse, AS_OF, [datetime.now(UTC), WEEK]) == _rows_hash(
        warehouse, ISSUED, [second.run_id])


def test_a_meter_file_one_hour_short_does_not_move_the_week(warehouse):
    """The Monday file lacks Sunday 23:00: the run at Monday 06:00 forecasts that Monday's week
    (or says it cannot), and last week's issued rows stay byte for byte."""
    last_week = _run(warehouse, week=WEEK)
    before = _rows_hash(warehouse, ISSUED, [last_week.run_id])
    sunday_23 = datetime(2024, 4, 7, 23, tzinfo=UTC)  # London is on UTC+1 from 31 March
    with connect(warehouse) as con:
        con.execute("DELETE FROM meter_readings WHERE ts >= ?", [sunday_23 - timedelta(hours=1)])
    monday_6 = datetime(2024, 4, 8, 6)  # local time of the fleet
    with pytest.raises(WeekNotForecastError, match="the week of 2024-04-08"):
        _run(warehouse, as_of=monday_6)  # no weather is stored for that week
    assert _rows_hash(warehouse, ISSUED, [last_week.run_id]) == before
    with connect(warehouse, read_only=True) as con:
        weeks = con.execute("SELECT DISTINCT target_week FROM window_status WHERE run_id = "
                            "(SELECT run_id FROM runs ORDER BY started_at DESC LIMIT 1)"
                            ).fetchall()
        run = con.execute("SELECT target_weeks, status FROM runs ORDER BY started_at DESC "
                          "LIMIT 1").fetchone()
    assert weeks == [(date(2024, 4, 8),)]
    assert run == ("2024-04-08", "completed")


def test_export_as_of_a_time_between_two_runs_gives_the_first_vintage(warehouse, tmp_path):
    first = _run(warehouse, week=WEEK)
    time.sleep(0.05)
    between = datetime.now(UTC)
    time.sleep(0.05)
    _run(warehouse, week=WEEK)
    bid, latest = tmp_path / "bid.csv", tmp_path / "latest.csv"
    done = invoke("export", "--out", str(bid), "--week", str(WEEK), "--as-of",
                  between.isoformat(), "--warehouse", str(warehouse))
    assert done.exit_code == 0, done.output
    assert invoke("export", "--out", str(latest), "--week", str(WEEK),
                  "--warehouse", str(warehouse)).exit_code == 0
    exported = pd.read_csv(bid).sort_values(["building_id", "period_start_utc"])
    with connect(warehouse, read_only=True) as con:
        issued = con.execute("SELECT building_id, y_hat FROM issued_forecasts WHERE run_id = ? "
                             "ORDER BY building_id, ts", [first.run_id]).df()
    assert exported["y_hat"].to_numpy() == pytest.approx(issued["y_hat"].to_numpy(), rel=1e-12)
    assert list(exported["building_id"]) == list(issued["building_id"])
    # before any run had issued it, nothing was published: said, nothing written
    early = invoke("export", "--out", str(tmp_path / "none.csv"), "--as-of", "2000-01-03 06:00",
                   "--warehouse", str(warehouse))
    assert early.exit_code == 1 and "nothing is published by 2000-01-03 06:00" in early.output
    assert not (tmp_path / "none.csv").exists()


def test_export_as_of_a_bid_keeps_the_zone_it_was_bid_in(warehouse, tmp_path):
    """Issue 60's probe: after a building's time zone was changed, the bid exported as of its
    time came out in the new zone (every period_start, local_time and timezone differed)."""
    _run(warehouse, week=WEEK)
    time.sleep(0.05)
    after_bid = datetime.now(UTC)
    bid, later = tmp_path / "bid.csv", tmp_path / "later.csv"
    for out, resolution in ((bid, 30),):
        assert invoke("export", "--out", str(out), "--week", str(WEEK), "--resolution",
                      resolution, "--warehouse", str(warehouse)).exit_code == 0
    with connect(warehouse) as con:
        con.execute("UPDATE buildings SET timezone = 'Europe/Paris'")
    done = invoke("export", "--out", str(later), "--week", str(WEEK), "--resolution", 30,
                  "--as-of", after_bid.isoformat(), "--warehouse", str(warehouse))
    assert done.exit_code == 0, done.output
    assert later.read_bytes() == bid.read_bytes()
