"""The weekly run's week, on hand-built warehouses: the week of its reference time (that local
Monday, or the first Monday after it), whatever the stored readings and weather say; what they
hold for that week is said in ``why`` and ``complete``."""

from __future__ import annotations

import shutil
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

import pandas as pd
import pytest

from tasks.protocol.weeks import week_of_reference
from tasks.warehouse.connection import connect
from tasks.warehouse.hours import week_inputs
from tasks.warehouse.schema import ensure_schema
from tasks.warehouse.selection import week_of_run
from tests.rows import insert_rows

NEXT = date(2024, 2, 12)  # winter: local (London) Mondays are UTC midnights
HISTORY_START = pd.Timestamp("2024-01-01 00:00Z")
READINGS_END = pd.Timestamp("2024-02-12 00:00Z")  # through Sunday 2024-02-11 23:00
MONDAY_6 = datetime(2024, 2, 12, 6)  # the fleet's local time


def _hours(start: pd.Timestamp, n: int) -> pd.DatetimeIndex:
    return pd.date_range(start, periods=n, freq="h")


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    """Two buildings at two sites; readings and observed weather through Sunday 2024-02-11
    (built once)."""
    path = tmp_path_factory.mktemp("week-of-run") / "w.duckdb"
    hours = pd.date_range(HISTORY_START, READINGS_END, freq="h", inclusive="left")
    with connect(path) as con:
        ensure_schema(con)
        con.execute("INSERT INTO buildings (building_id, site_id, timezone, holiday_country, holiday_subdiv, building_type, source) VALUES ('a', 'site-a', 'Europe/London', 'GB', 'ENG', "
                    "NULL, 't'), ('b', 'site-b', 'Europe/London', 'GB', 'ENG', NULL, 't')")
        insert_rows(con, "meter_readings", ["building_id", "ts", "kwh"],
                    [(building_id, ts.to_pydatetime(), 10.0) for building_id in ("a", "b")
                     for ts in hours])
        for site in ("site-a", "site-b"):
            _weather(con, site, hours, "observed")
    return path


@pytest.fixture
def warehouse(pristine, tmp_path):
    """A copy of the pristine warehouse, for the test to change."""
    return Path(shutil.copyfile(pristine, tmp_path / "w.duckdb"))


def _weather(con, site: str, hours, kind: str) -> None:
    issued = None if kind == "observed" else pd.Timestamp("2024-02-11 18:00Z").to_pydatetime()
    insert_rows(con, "weather", ["site_id", "ts", "temperature_c", "irradiance_wm2",
                                 "wind_speed_ms", "kind", "issued_at"],
                [(site, ts.to_pydatetime(), 5.0, 100.0, 3.0, kind, issued) for ts in hours])


def _forecast(path, n_hours: int, site: str = "site-a") -> None:
    with connect(path) as con:
        _weather(con, site, _hours(READINGS_END, n_hours), "forecast")


@pytest.mark.parametrize(("local", "week"), [
    ("2024-02-12 00:00", NEXT),          # Monday midnight: that week
    ("2024-02-12 06:00", NEXT),          # the deployment's Monday 06:00
    ("2024-02-11 20:00", NEXT),          # Sunday evening: the next day's week
    ("2024-02-13 09:00", date(2024, 2, 19)),  # Tuesday: the first Monday after it
    ("2024-03-31 00:30", date(2024, 4, 1)),   # the spring clock change, Sunday
    ("2024-10-28 00:30", date(2024, 10, 28)),  # the Monday after the autumn one
])
def test_the_rule_by_hand(local, week):
    zone = "Europe/London"
    assert week_of_reference(pd.Timestamp(local, tz=zone), zone) == week
    assert week_of_reference(pd.Timestamp(local, tz=zone).tz_convert("UTC"), zone) == week
    assert week_of_reference(pd.Timestamp(local, tz="Asia/Tokyo"), zone) == (
        week_of_reference(pd.Timestamp(local, tz="Asia/Tokyo").tz_convert(zone), zone))
    with pytest.raises(ValueError, match="no time zone"):
        week_of_reference(pd.Timestamp(local), zone)


def test_the_coming_week_with_its_forecast_weather(warehouse):
    _forecast(warehouse, 168)
    with connect(warehouse, read_only=True) as con:
        inputs = week_inputs(con, ["a", "b"], NEXT, "Europe/London")
        chosen = week_of_run(con, None, MONDAY_6)
    assert (inputs.week, inputs.hours, inputs.weather_hours) == (NEXT, 168, 168)
    assert inputs.last_reading == (READINGS_END - pd.Timedelta(hours=1)).to_pydatetime()
    assert chosen.week == NEXT and chosen.complete
    assert "2024-02-12 06:00 Europe/London (a Monday)" in chosen.why
    assert "168 of its 168 hours" in chosen.why and "short" not in chosen.why


@pytest.mark.parametrize(("n_hours", "complete"), [(84, True), (83, False), (0, False)])
def test_the_week_stays_whatever_weather_is_stored(warehouse, n_hours, complete):
    """Half the week without weather is filled by the gap rule; more is said, never a reason
    to forecast another week."""
    if n_hours:
        _forecast(warehouse, n_hours)
    with connect(warehouse, read_only=True) as con:
        chosen = week_of_run(con, None, MONDAY_6)
    assert (chosen.week, chosen.complete) == (NEXT, complete)
    assert f"weather stored for {n_hours} of its 168 hours" in chosen.why


def test_a_meter_file_short_of_its_last_hours_is_said_not_followed(warehouse):
    _forecast(warehouse, 168)
    with connect(warehouse) as con:
        con.execute("DELETE FROM meter_readings WHERE ts >= ?",
                    [(READINGS_END - pd.Timedelta(hours=3)).to_pydatetime()])
        chosen = week_of_run(con, None, MONDAY_6)
    assert chosen.week == NEXT and not chosen.complete  # said as a warning
    assert "the latest reading before it is 2024-02-11 20:00 UTC, 3 hour(s) short" in chosen.why
    assert ("2 building(s) end short of it: a (last reading 2024-02-11 20:00 UTC, 3 hour(s) "
            "short), b (last reading 2024-02-11 20:00 UTC, 3 hour(s) short)") in chosen.why


def test_one_buildings_full_file_does_not_hide_anothers_gap(warehouse):
    _forecast(warehouse, 168)
    with connect(warehouse) as con:
        con.execute("DELETE FROM meter_readings WHERE building_id = 'b' AND ts >= ?",
                    [(READINGS_END - pd.Timedelta(hours=1)).to_pydatetime()])
        chosen = week_of_run(con, None, MONDAY_6)
    assert chosen.week == NEXT and not chosen.complete
    assert "latest reading before it is" not in chosen.why  # the fleet's is a's, complete
    assert ("1 building(s) end short of it: b (last reading 2024-02-11 22:00 UTC, 1 hour(s) "
            "short)") in chosen.why


def test_readings_after_the_reference_time_or_in_the_future_do_not_move_it(warehouse):
    _forecast(warehouse, 168)
    with connect(warehouse) as con:
        con.execute("INSERT INTO meter_readings VALUES ('a', TIMESTAMPTZ '2099-01-05 00:00Z', 1.0)")
        chosen = week_of_run(con, None, MONDAY_6)
    assert chosen.week == NEXT and chosen.complete


def test_a_stale_fleet_is_not_complete(warehouse):
    with connect(warehouse, read_only=True) as con:
        late = week_of_run(con, None, MONDAY_6 + timedelta(weeks=5))
        aware = week_of_run(con, None, datetime(2024, 2, 12, 6, tzinfo=timezone.utc))
    assert (late.week, late.complete) == (NEXT + timedelta(weeks=5), False)
    assert aware.week == NEXT


def test_the_best_covered_site_decides_and_a_blank_input_is_named(warehouse):
    _forecast(warehouse, 168, site="site-b")  # a's site has none: its building-week says so
    with connect(warehouse) as con:
        con.execute("UPDATE weather SET wind_speed_ms = NULL WHERE kind = 'forecast' "
                    "AND ts < ?", [pd.Timestamp("2024-02-15 00:00Z").to_pydatetime()])
        inputs = week_inputs(con, ["a", "b"], NEXT, "Europe/London")
        assert inputs.weather_hours == 168 and inputs.weather_suffices
        assert inputs.blank == {"temperature_c": 0, "irradiance_wm2": 0, "wind_speed_ms": 72}
        assert "wind_speed_ms blank at 72 of them" in week_of_run(con, None, MONDAY_6).why
        assert week_inputs(con, ["a"], NEXT, "Europe/London").weather_hours == 0
        assert week_of_run(con, ["a"], MONDAY_6).week == NEXT


def test_the_fleets_most_common_time_zone_decides(warehouse):
    with connect(warehouse) as con:
        con.executemany("INSERT INTO buildings (building_id, site_id, timezone, holiday_country, holiday_subdiv, building_type, source) VALUES (?, 'site-a', 'Asia/Tokyo', 'JP', NULL, "
                        "NULL, 't')", [("t1",), ("t2",), ("t3",)])
        # Monday 2024-02-12 06:00 in Tokyo is Sunday 21:00 in London
        chosen = week_of_run(con, None, datetime(2024, 2, 11, 21, tzinfo=timezone.utc))
    assert chosen.week == date(2024, 2, 12)
    assert "Asia/Tokyo (a Monday)" in chosen.why


@pytest.mark.parametrize("wall", [datetime(2024, 10, 27, 1, 30), datetime(2024, 3, 31, 1, 30)],
                         ids=["passed-twice", "skipped"])
def test_a_wall_clock_time_the_clocks_pass_twice_or_skip_chooses_its_week(pristine, wall):
    with connect(pristine, read_only=True) as con:
        chosen = week_of_run(con, None, wall)
    # a Sunday: the week of the Monday after it
    assert chosen.week == wall.date() + timedelta(days=1)
    assert f"{wall:%Y-%m-%d} 0" in chosen.why
