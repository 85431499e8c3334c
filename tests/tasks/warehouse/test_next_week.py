"""The weekly run's default week, on hand-built warehouses: the week after the latest readings
when its weather (observed or forecast) covers enough of it, else the latest week whose stored
weather reaches its end, said so."""

from __future__ import annotations

from datetime import date

import pandas as pd
import pytest

from tasks.warehouse.connection import connect
from tasks.warehouse.hours import next_week_inputs
from tasks.warehouse.schema import ensure_schema
from tasks.warehouse.selection import choose_week

NEXT = date(2024, 2, 12)  # winter: local (London) Mondays are UTC midnights
HISTORY_START = pd.Timestamp("2024-01-01 00:00Z")
READINGS_END = pd.Timestamp("2024-02-12 00:00Z")  # through Sunday 2024-02-11 23:00


def _hours(start: pd.Timestamp, n: int) -> pd.DatetimeIndex:
    return pd.date_range(start, periods=n, freq="h")


@pytest.fixture
def warehouse(tmp_path):
    """Two buildings at two sites; readings and observed weather through Sunday 2024-02-11."""
    path = tmp_path / "w.duckdb"
    hours = pd.date_range(HISTORY_START, READINGS_END, freq="h", inclusive="left")
    with connect(path) as con:
        ensure_schema(con)
        con.executemany("INSERT INTO buildings VALUES (?, ?, 'Europe/London', 'GB', 'ENG', NULL, 't')",
                        [("a", "site-a"), ("b", "site-b")])
        for building_id in ("a", "b"):
            con.executemany("INSERT INTO meter_readings VALUES (?, ?, 10.0)",
                            [(building_id, ts.to_pydatetime()) for ts in hours])
        for site in ("site-a", "site-b"):
            _weather(con, site, hours, "observed")
    return path


def _weather(con, site: str, hours, kind: str) -> None:
    issued = None if kind == "observed" else pd.Timestamp("2024-02-11 18:00Z").to_pydatetime()
    con.executemany(
        "INSERT INTO weather (site_id, ts, temperature_c, irradiance_wm2, wind_speed_ms, kind, "
        "issued_at) VALUES (?, ?, 5.0, 100.0, 3.0, ?, ?)",
        [(site, ts.to_pydatetime(), kind, issued) for ts in hours])


def _forecast(path, n_hours: int, site: str = "site-a") -> None:
    with connect(path) as con:
        _weather(con, site, _hours(READINGS_END, n_hours), "forecast")


def test_the_coming_week_with_its_forecast_weather(warehouse):
    _forecast(warehouse, 168)
    with connect(warehouse, read_only=True) as con:
        inputs = next_week_inputs(con, ["a", "b"])
        chosen = choose_week(con, None)
    assert (inputs.next_week, inputs.hours, inputs.weather_hours) == (NEXT, 168, 168)
    assert chosen.week == NEXT and chosen.complete
    assert "168 of its 168 hours" in chosen.why


@pytest.mark.parametrize(("n_hours", "week", "complete"), [
    (84, NEXT, True),               # half the week missing: the gap rule fills it
    (83, date(2024, 2, 5), False),  # more than half missing: not that week
    (0, date(2024, 2, 5), False),   # no forecast: the week whose weather is stored
])
def test_how_much_forecast_weather_the_coming_week_needs(warehouse, n_hours, week, complete):
    if n_hours:
        _forecast(warehouse, n_hours)
    with connect(warehouse, read_only=True) as con:
        chosen = choose_week(con, None)
    assert (chosen.week, chosen.complete) == (week, complete)
    if not complete:
        assert f"{NEXT}, has weather for only {n_hours} of its 168 hours" in chosen.why
        assert "wadiro ingest weather FILE --kind forecast" in chosen.why


def test_the_best_covered_site_decides_and_a_blank_input_is_named_not_fatal(warehouse):
    _forecast(warehouse, 168, site="site-b")  # a's site has none: its building-week says so
    with connect(warehouse) as con:
        con.execute("UPDATE weather SET wind_speed_ms = NULL WHERE kind = 'forecast' "
                    "AND ts < ?", [pd.Timestamp("2024-02-15 00:00Z").to_pydatetime()])
        inputs = next_week_inputs(con, ["a", "b"])
        assert inputs.weather_hours == 168 and inputs.weather_suffices
        assert inputs.blank == {"temperature_c": 0, "irradiance_wm2": 0, "wind_speed_ms": 72}
        chosen = choose_week(con, None)
        assert chosen.week == NEXT
        assert "168 of its 168 hours; wind_speed_ms blank at 72 of them" in chosen.why
        assert next_week_inputs(con, ["a"]).weather_hours == 0
        assert choose_week(con, ["a"]).week == date(2024, 2, 5)


def test_a_building_without_readings_has_no_next_week(warehouse):
    with connect(warehouse) as con:
        con.execute("INSERT INTO buildings VALUES ('c', 'site-a', 'Europe/London', 'GB', 'ENG', "
                    "NULL, 't')")
        assert next_week_inputs(con, ["c"]) is None


def test_weather_that_reaches_the_end_with_a_long_gap_says_so(warehouse):
    with connect(warehouse) as con:
        _weather(con, "site-a", _hours(READINGS_END, 24), "forecast")
        _weather(con, "site-a", _hours(READINGS_END + pd.Timedelta(hours=160), 8), "forecast")
        chosen = choose_week(con, None)
    assert (chosen.week, chosen.complete) == (NEXT, False)
    assert "32 of its 168 hours" in chosen.why and "no_weather" in chosen.why
