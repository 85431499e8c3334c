"""Synthetic fleet: determinism, believable schedules and weather, faults, and the warehouse write."""

from __future__ import annotations

from datetime import date, datetime, timezone

import numpy as np
import pyarrow as pa
import pytest
from pydantic import ValidationError

from tasks.ingest import synthetic_fleet
from tasks.ingest.synthetic_fleet import (
    CHUNK_BUILDINGS,
    FleetSpec,
    first_monday,
    fleet_buildings,
    fleet_hours,
    fleet_readings,
    fleet_weather,
    ingest_synthetic,
)
from tasks.warehouse.connection import connect

UTC = timezone.utc


def readings_frame(spec: FleetSpec):
    return pa.Table.from_batches(list(fleet_readings(spec))).to_pandas()


def local(frame, column: str = "ts"):
    stamps = frame[column].dt.tz_convert("Europe/London")
    return frame.assign(hour=stamps.dt.hour, weekday=stamps.dt.day_of_week, day=stamps.dt.date)


@pytest.fixture(scope="module")
def fleet():
    spec = FleetSpec(buildings=60, start=date(2023, 10, 2), weeks=4, seed=11)
    readings = local(readings_frame(spec))
    types = fleet_buildings(spec).to_pandas().set_index("building_id")["building_type"]
    return spec, readings.assign(building_type=readings["building_id"].map(types))


def test_first_monday_on_or_after_the_start():
    assert first_monday(date(2023, 1, 1)) == date(2023, 1, 2)  # a Sunday
    assert first_monday(date(2023, 1, 2)) == date(2023, 1, 2)  # already a Monday
    assert first_monday(date(2023, 1, 3)) == date(2023, 1, 9)


def test_hours_follow_local_weeks_across_daylight_saving():
    # the local week of 2023-03-20 contains the spring-forward night (26 March): one hour less
    spring = fleet_hours(FleetSpec(buildings=1, start=date(2023, 3, 20), weeks=2))
    assert spring.ts.size == 2 * 168 - 1
    assert spring.start == datetime(2023, 3, 20, 0, tzinfo=UTC)  # GMT
    assert spring.end == datetime(2023, 4, 2, 23, tzinfo=UTC)  # Monday 3 April 00:00 BST
    summer = fleet_hours(FleetSpec(buildings=1, start=date(2023, 7, 1), weeks=1))
    assert summer.start == datetime(2023, 7, 2, 23, tzinfo=UTC)  # Monday 3 July 00:00 BST
    assert summer.ts.size == 168


def test_same_seed_same_data_and_different_seed_differs():
    spec = FleetSpec(buildings=CHUNK_BUILDINGS + 7, start=date(2024, 1, 1), weeks=1, seed=5)
    first, again = readings_frame(spec), readings_frame(spec)
    assert first.equals(again)
    assert fleet_weather(spec).equals(fleet_weather(spec))
    assert fleet_buildings(spec).equals(fleet_buildings(spec))
    other = readings_frame(FleetSpec(buildings=spec.buildings, start=spec.start, weeks=1, seed=6))
    assert len(other) == len(first)
    assert not np.allclose(other["kwh"].fillna(-1), first["kwh"].fillna(-1))
    assert not fleet_weather(FleetSpec(buildings=1, start=spec.start, weeks=1, seed=6)).equals(fleet_weather(spec))


def test_shape_ids_and_sites(fleet):
    spec, readings = fleet
    hours = fleet_hours(spec).ts.size
    assert len(readings) == spec.buildings * hours
    assert readings["building_id"].iloc[0] == "synthetic_b00000"
    assert readings.groupby("building_id").size().eq(hours).all()
    buildings = fleet_buildings(spec).to_pandas()
    assert set(buildings["site_id"]) <= {f"synthetic_site_{i}" for i in range(spec.sites)}
    assert buildings["building_type"].nunique() >= 4
    assert (buildings[["timezone", "holiday_country", "holiday_subdiv"]].drop_duplicates().values.tolist()
            == [["Europe/London", "GB", "ENG"]])


def test_schedules_show_weekday_weekend_contrast(fleet):
    _, readings = fleet
    offices = readings[(readings["building_type"] == "office") & readings["hour"].between(10, 15)]
    weekday = offices[offices["weekday"] < 5].groupby("building_id")["kwh"].median()
    weekend = offices[offices["weekday"] >= 5].groupby("building_id")["kwh"].median()
    assert len(weekday) >= 5
    assert (weekday > 1.3 * weekend).all()
    # and offices are busier at 11:00 than at 03:00 on weekdays
    days = readings[(readings["building_type"] == "office") & (readings["weekday"] < 5)]
    at = days.groupby("hour")["kwh"].mean()
    assert at[11] > 1.5 * at[3]
    # retail stays open on Saturdays, unlike offices
    shops = readings[(readings["building_type"] == "retail") & readings["hour"].between(11, 15)]
    assert shops[shops["weekday"] == 5]["kwh"].mean() > 0.8 * shops[shops["weekday"] < 5]["kwh"].mean()


def test_public_holidays_are_quiet():
    # Monday 28 August 2023 is the English summer bank holiday
    spec = FleetSpec(buildings=80, start=date(2023, 8, 14), weeks=3, seed=2)
    readings = local(readings_frame(spec))
    types = fleet_buildings(spec).to_pandas().set_index("building_id")["building_type"]
    offices = readings[readings["building_id"].map(types).eq("office") & readings["hour"].between(10, 15)]
    mondays = offices[offices["weekday"] == 0].groupby("day")["kwh"].mean()
    holiday = mondays[date(2023, 8, 28)]
    assert holiday < 0.6 * mondays.drop(date(2023, 8, 28)).min()


def test_weather_cycles_and_sun():
    spec = FleetSpec(buildings=1, start=date(2023, 1, 2), weeks=52, seed=3)
    weather = local(fleet_weather(spec).to_pandas())
    month = weather["ts"].dt.month
    assert weather[month == 7]["temperature_c"].mean() > weather[month == 1]["temperature_c"].mean() + 8
    night = weather["hour"].isin([0, 1, 2])
    assert (weather.loc[night, "irradiance_wm2"] == 0).all()
    june_noon = weather[(month == 6) & weather["hour"].between(12, 14)]["irradiance_wm2"].mean()
    december_noon = weather[(month == 12) & weather["hour"].between(12, 14)]["irradiance_wm2"].mean()
    assert june_noon > 2.5 * december_noon > 0
    assert weather["irradiance_wm2"].max() < 1100
    afternoon = weather[weather["hour"] == 15]["temperature_c"].mean()
    dawn = weather[weather["hour"] == 5]["temperature_c"].mean()
    assert afternoon > dawn + 1.5
    assert (weather["wind_speed_ms"] > 0).all()
    assert weather["humidity_pct"].between(0, 100).all()
    assert weather.groupby("site_id").size().eq(fleet_hours(spec).ts.size).all()


def test_faults_outages_and_outliers(fleet):
    _, readings = fleet
    kwh = readings["kwh"]
    assert (kwh.dropna() > 0).all()  # no zero or negative readings: missing is NaN
    share_missing = kwh.isna().mean()
    assert 0.001 < share_missing < 0.1
    # outages are runs of consecutive missing hours, not only isolated holes
    runs = (
        readings.assign(gap=kwh.isna())
        .groupby("building_id")["gap"]
        .apply(lambda g: (g & g.shift(fill_value=False)).sum())
    )
    assert runs.sum() > 0
    ratio = readings.groupby("building_id")["kwh"].transform(lambda s: s / s.rolling(25, center=True, min_periods=5).median())
    assert (ratio > 2.2).sum() >= 1


def test_bad_specs_are_refused():
    good = dict(buildings=1, start=date(2023, 1, 1), weeks=1)
    for change, message in [
        ({"buildings": 0}, "buildings"),
        ({"weeks": 0}, "weeks"),
        ({"sites": 0}, "sites"),
        ({"seed": -1}, "seed"),
        ({"timezone": "Mars/Olympus"}, "time zone"),
        ({"holiday_country": "XX"}, "holiday calendar"),
    ]:
        with pytest.raises(ValidationError, match=message):
            FleetSpec(**{**good, **change})


def test_ingest_writes_all_tables_idempotently(tmp_path):
    spec = FleetSpec(buildings=12, start=date(2023, 5, 1), weeks=2, seed=4)
    warehouse = tmp_path / "fleet.duckdb"
    first = ingest_synthetic(warehouse, spec)
    hours = fleet_hours(spec).ts.size
    assert (first.buildings, first.readings, first.weather_hours) == (12, 12 * hours, spec.sites * hours)

    def contents():
        with connect(warehouse, read_only=True) as con:
            return {t: con.execute(f"SELECT * FROM {t} ORDER BY ALL").fetchall() for t in ("buildings", "meter_readings", "weather")}

    before = contents()
    assert len(before["meter_readings"]) == 12 * hours
    assert sum(r[2] is None for r in before["meter_readings"]) == first.missing_readings
    again = ingest_synthetic(warehouse, spec)
    assert again.readings == first.readings
    assert contents() == before


def test_a_failure_mid_stream_leaves_the_warehouse_unchanged(tmp_path, monkeypatch):
    warehouse = tmp_path / "fleet.duckdb"
    small = FleetSpec(buildings=3, start=date(2023, 5, 1), weeks=1, seed=1)
    ingest_synthetic(warehouse, small)
    with connect(warehouse, read_only=True) as con:
        before = con.execute("SELECT count(*), count(kwh) FROM meter_readings").fetchone()

    real = synthetic_fleet._chunk_load

    def failing(spec, cal, temperature, params, chunk):
        if chunk.start >= CHUNK_BUILDINGS:  # the second chunk: the first is already inserted
            raise RuntimeError("generator broke")
        return real(spec, cal, temperature, params, chunk)

    monkeypatch.setattr(synthetic_fleet, "_chunk_load", failing)
    with pytest.raises(RuntimeError, match="generator broke"):
        ingest_synthetic(warehouse, FleetSpec(buildings=CHUNK_BUILDINGS + 1, start=date(2023, 5, 1), weeks=1, seed=1))
    with connect(warehouse, read_only=True) as con:
        assert con.execute("SELECT count(*), count(kwh) FROM meter_readings").fetchone() == before
        assert con.execute("SELECT count(*) FROM buildings").fetchone() == (3,)


@pytest.mark.slow
def test_full_scale_fleet_streams_into_the_warehouse(tmp_path):
    """5,000 buildings x 52 weeks (43.7 M readings) in one streamed transaction."""
    spec = FleetSpec(buildings=5000, start=date(2023, 1, 1), weeks=52, seed=7)
    summary = ingest_synthetic(tmp_path / "fleet.duckdb", spec)
    hours = fleet_hours(spec).ts.size
    assert hours == 52 * 168  # 2 Jan 2023 to 1 Jan 2024: both clock changes inside
    with connect(tmp_path / "fleet.duckdb", read_only=True) as con:
        rows, labelled, buildings = con.execute(
            "SELECT count(*), count(kwh), count(DISTINCT building_id) FROM meter_readings"
        ).fetchone()
    assert (rows, buildings) == (5000 * hours, 5000) == (summary.readings, summary.buildings)
    assert rows - labelled == summary.missing_readings


def test_the_coming_week_has_a_weather_forecast_and_no_readings(tmp_path):
    spec = FleetSpec(buildings=2, start=date(2024, 1, 1), weeks=3, forecast_weeks=1, seed=4)
    summary = ingest_synthetic(tmp_path / "w.duckdb", spec)
    with connect(tmp_path / "w.duckdb", read_only=True) as con:
        readings_end = con.execute("SELECT max(ts) FROM meter_readings").fetchone()[0]
        kinds = con.execute(
            "SELECT kind, min(ts), max(ts), count(*), min(issued_at), max(issued_at) "
            "FROM weather GROUP BY kind ORDER BY kind").fetchall()
        paired = con.execute(
            "SELECT f.temperature_c - o.temperature_c FROM weather f JOIN weather o USING "
            "(site_id, ts) WHERE f.kind = 'forecast' AND o.kind = 'observed'").fetchall()
    (fc, fc_start, fc_end, fc_rows, issued, issued_max), (obs, _, obs_end, obs_rows, *_) = kinds
    assert (fc, obs) == ("forecast", "observed")
    # readings and observations end on Sunday 23:00 (London, GMT in January) of the third
    # week; the forecast covers the week after, issued on that Sunday at 18:00 local time
    assert readings_end == obs_end == datetime(2024, 1, 21, 23, tzinfo=UTC)
    assert fc_start == datetime(2024, 1, 22, tzinfo=UTC) and fc_end == datetime(2024, 1, 28, 23, tzinfo=UTC)
    assert issued == issued_max == datetime(2024, 1, 21, 18, tzinfo=UTC)
    assert fc_rows == 168 * spec.sites and summary.forecast_hours == fc_rows
    assert obs_rows == summary.weather_hours == 3 * 168 * spec.sites
    assert paired == []  # no observation of the coming week yet


def test_a_forecast_week_leaves_the_history_as_it_was_without_one(tmp_path):
    """The coming weeks' readings are generated and dropped, so the readings of the weeks
    that have them follow the same weather as those stored."""
    spec = FleetSpec(buildings=2, start=date(2024, 1, 1), weeks=3, forecast_weeks=1, seed=4)
    cal = fleet_hours(spec.model_copy(update={"weeks": 4}))
    whole = pa.Table.from_batches(list(fleet_readings(spec, cal))).to_pandas()
    ingest_synthetic(tmp_path / "w.duckdb", spec)
    with connect(tmp_path / "w.duckdb", read_only=True) as con:
        stored = con.execute("SELECT building_id, ts, kwh FROM meter_readings "
                             "ORDER BY building_id, ts").df()
    expected = whole[whole["ts"] <= stored["ts"].max()].sort_values(["building_id", "ts"])
    np.testing.assert_array_equal(stored["kwh"].to_numpy(), expected["kwh"].to_numpy())
