"""Loading a building's hourly frame from a DuckDB file holding the input tables."""

from __future__ import annotations

from datetime import date, datetime

import duckdb
import numpy as np
import pandas as pd
import pytest

from tasks.errors import UnknownBuildingError
from tasks.ingest.cambridge_archive import ingest_cambridge
from tasks.protocol.batch import BuildingInfo
from tasks.protocol.features import build_features
from tasks.protocol.windows import (
    WindowStatus,
    build_window,
    window_bounds,
    window_load_range,
)
from tasks.warehouse.connection import connect
from tasks.warehouse.hours import (
    HOUR_COLUMNS,
    DuplicateRowError,
    OffHourReadingError,
    TimeRangeError,
    load_building_hours_by_id,
    load_buildings_info,
    load_many_building_hours,
)
from tasks.warehouse.schema import INPUT_TABLES
from tests.rows import insert_rows

T = pd.Timestamp


def load_building_hours(con, building_id, start, end) -> pd.DataFrame:
    """One building's hourly frame, through the batch reader the pipeline uses."""
    frame = load_many_building_hours(con, [building_id], start, end)
    return frame.drop(columns="building_id").reset_index(drop=True)


def load_building_info(con, building_id) -> BuildingInfo:
    return load_buildings_info(con, [building_id])[building_id]


@pytest.fixture
def con(tmp_path):
    connection = duckdb.connect(str(tmp_path / "inputs.duckdb"))
    for ddl in INPUT_TABLES.values():
        connection.execute(ddl)
    connection.executemany(
        "INSERT INTO buildings (building_id, site_id, timezone, holiday_country, holiday_subdiv, building_type, source) VALUES (?, ?, ?, ?, ?, ?, ?)",
        [
            ("b1", "bedford", "Europe/London", "GB", "ENG", "office", "test"),
            ("b2", "bedford", "Europe/London", "GB", "ENG", None, "test"),
            ("b3", "boston", "America/New_York", "US", None, "lab", "test"),
        ],
    )
    yield connection
    connection.close()


def add_readings(con, building_id: str, rows: list[tuple[str, float | None]]) -> None:
    insert_rows(con, "meter_readings", ["building_id", "ts", "kwh"],
                [(building_id, T(ts).to_pydatetime(), kwh) for ts, kwh in rows])


def add_weather(con, site_id: str, rows: list[tuple[str, float, str]]) -> None:
    insert_rows(con, "weather", ["site_id", "ts", "temperature_c", "irradiance_wm2",
                                 "wind_speed_ms", "humidity_pct", "kind"],
                [(site_id, T(ts).to_pydatetime(), temp, 10.0 * temp, 1.0, 80.0, kind)
                 for ts, temp, kind in rows])


def test_building_info_is_the_buildings_row(con):
    assert load_building_info(con, "b1") == BuildingInfo(
        "b1", "bedford", "Europe/London", "GB", "ENG", "office", "test"
    )
    infos = load_buildings_info(con, ["b3", "b1", "b3"])
    assert list(infos) == ["b3", "b1"]
    assert infos["b3"].holiday_subdiv is None and infos["b3"].timezone == "America/New_York"


def test_unknown_buildings_are_named(con):
    with pytest.raises(UnknownBuildingError, match="'nope'"):
        load_building_info(con, "nope")
    with pytest.raises(UnknownBuildingError, match="2 building id.*'x1', 'x2'"):
        load_many_building_hours(con, ["b1", "x1", "x2"], T("2019-07-01 00:00Z"), T("2019-07-02 00:00Z"))


def test_frame_is_a_complete_hourly_grid_with_missing_readings_as_nan(con):
    add_readings(con, "b1", [("2019-07-01 00:00Z", 5.0), ("2019-07-01 02:00Z", None),
                             ("2019-07-01 03:00Z", 0.0), ("2019-07-01 04:00Z", 7.5)])
    frame = load_building_hours(con, "b1", T("2019-07-01 00:00Z"), T("2019-07-01 05:00Z"))
    assert list(frame.columns) == list(HOUR_COLUMNS)
    assert list(frame["ts"]) == list(pd.date_range("2019-07-01", periods=5, freq="h", tz="UTC"))
    assert str(frame["ts"].dt.tz) == "UTC"
    np.testing.assert_array_equal(frame["kwh"].to_numpy(), [5.0, np.nan, np.nan, 0.0, 7.5])


def test_range_is_half_open_and_other_buildings_do_not_leak(con):
    add_readings(con, "b1", [("2019-06-30 23:00Z", 1.0), ("2019-07-01 00:00Z", 2.0),
                             ("2019-07-01 02:00Z", 3.0)])
    add_readings(con, "b2", [("2019-07-01 01:00Z", 99.0)])
    frame = load_building_hours(con, "b1", T("2019-07-01 00:00Z"), T("2019-07-01 02:00Z"))
    np.testing.assert_array_equal(frame["kwh"].to_numpy(), [2.0, np.nan])


def test_grid_ignores_the_session_time_zone_across_a_clock_change(con):
    con.execute("SET TimeZone = 'Europe/London'")
    add_readings(con, "b1", [("2019-10-27 00:00Z", 1.0), ("2019-10-27 01:00Z", 2.0)])
    frame = load_building_hours(con, "b1", T("2019-10-26 23:00Z"), T("2019-10-27 03:00Z"))
    assert list(frame["ts"]) == list(pd.date_range("2019-10-26 23:00", periods=4, freq="h", tz="UTC"))
    np.testing.assert_array_equal(frame["kwh"].to_numpy(), [np.nan, 1.0, 2.0, np.nan])
    # Bounds given in another zone are the same instants.
    local = load_building_hours(
        con, "b1", T("2019-10-27 00:00", tz="Europe/London"), T("2019-10-27 03:00", tz="Europe/London")
    )
    pd.testing.assert_frame_equal(local, frame)


def test_observed_weather_is_preferred_then_forecast(con):
    add_weather(con, "bedford", [
        ("2019-07-01 00:00Z", 10.0, "observed"), ("2019-07-01 00:00Z", 11.0, "forecast"),
        ("2019-07-01 01:00Z", 12.0, "forecast"), ("2019-07-01 02:00Z", 13.0, "observed"),
    ])
    add_weather(con, "boston", [("2019-07-01 03:00Z", 30.0, "observed")])
    frame = load_building_hours(con, "b1", T("2019-07-01 00:00Z"), T("2019-07-01 04:00Z"))
    np.testing.assert_array_equal(frame["temperature_c"].to_numpy(), [10.0, 12.0, 13.0, np.nan])
    np.testing.assert_array_equal(frame["irradiance_wm2"].to_numpy(), [100.0, 120.0, 130.0, np.nan])
    assert list(frame["weather_kind"].iloc[:3]) == ["observed", "forecast", "observed"]
    assert pd.isna(frame["weather_kind"].iloc[3])


def test_weather_is_merged_per_input_an_observed_blank_takes_the_forecast(con):
    con.execute(
        "INSERT INTO weather (site_id, ts, temperature_c, irradiance_wm2, wind_speed_ms, kind) "
        "VALUES ('bedford', TIMESTAMPTZ '2019-07-01 00:00Z', 10.0, 100.0, NULL, 'observed'), "
        "('bedford', TIMESTAMPTZ '2019-07-01 00:00Z', 11.0, 110.0, 3.5, 'forecast'), "
        "('bedford', TIMESTAMPTZ '2019-07-01 01:00Z', NULL, NULL, NULL, 'observed'), "
        "('bedford', TIMESTAMPTZ '2019-07-01 01:00Z', 12.0, NULL, 4.5, 'forecast')")
    frame = load_building_hours(con, "b1", T("2019-07-01 00:00Z"), T("2019-07-01 02:00Z"))
    np.testing.assert_array_equal(frame["temperature_c"].to_numpy(), [10.0, 12.0])
    np.testing.assert_array_equal(frame["irradiance_wm2"].to_numpy(), [100.0, np.nan])
    np.testing.assert_array_equal(frame["wind_speed_ms"].to_numpy(), [3.5, 4.5])
    assert list(frame["weather_kind"]) == ["observed", "observed"]


def test_batch_equals_one_query_per_building(con):
    add_readings(con, "b1", [("2019-07-01 00:00Z", 1.0), ("2019-07-01 02:00Z", 2.0)])
    add_readings(con, "b3", [("2019-07-01 01:00Z", 3.0)])
    add_weather(con, "bedford", [("2019-07-01 01:00Z", 15.0, "observed")])
    add_weather(con, "boston", [("2019-07-01 02:00Z", 25.0, "forecast")])
    start, end = T("2019-07-01 00:00Z"), T("2019-07-01 03:00Z")
    batch = load_many_building_hours(con, ["b3", "b2", "b1"], start, end)
    assert list(batch.columns) == ["building_id", *HOUR_COLUMNS]
    assert batch.groupby("building_id").size().to_dict() == {"b1": 3, "b2": 3, "b3": 3}
    for building_id, part in batch.groupby("building_id"):
        single = load_building_hours(con, building_id, start, end)
        pd.testing.assert_frame_equal(part.drop(columns="building_id").reset_index(drop=True), single)
    assert batch.loc[batch["building_id"] == "b2", "temperature_c"].tolist()[1] == 15.0


def test_frames_by_building_are_each_buildings_own_in_id_order(con):
    add_readings(con, "b2", [("2019-07-01 00:00Z", 5.0)])
    add_readings(con, "b1", [("2019-07-01 01:00Z", 4.0)])
    add_weather(con, "bedford", [("2019-07-01 01:00Z", 15.0, "observed"),
                                 ("2019-07-01 02:00Z", 16.0, "forecast")])
    start, end = T("2019-07-01 00:00Z"), T("2019-07-01 03:00Z")
    frames = load_building_hours_by_id(con, ["b3", "b2", "b1"], start, end)
    assert list(frames) == ["b1", "b2", "b3"]
    for building_id, frame in frames.items():
        pd.testing.assert_frame_equal(frame, load_building_hours(con, building_id, start, end))
    assert frames["b1"]["kwh"].tolist()[1] == 4.0 and np.isnan(frames["b2"]["kwh"][1])
    assert frames["b1"]["weather_kind"].tolist()[1:] == ["observed", "forecast"]
    assert pd.isna(frames["b1"]["weather_kind"][0])
    # two buildings of one site hold the site's weather each in a frame of its own
    frames["b1"].loc[1, "temperature_c"] = -99.0
    assert frames["b2"]["temperature_c"].tolist()[1] == 15.0


def test_no_buildings_give_an_empty_frame(con):
    frame = load_many_building_hours(con, [], T("2019-07-01 00:00Z"), T("2019-07-02 00:00Z"))
    assert frame.empty and list(frame.columns) == ["building_id", *HOUR_COLUMNS]


def test_empty_range_gives_an_empty_frame(con):
    frame = load_building_hours(con, "b1", T("2019-07-01 00:00Z"), T("2019-07-01 00:00Z"))
    assert frame.empty and list(frame.columns) == list(HOUR_COLUMNS)


@pytest.mark.parametrize(
    "start, end, match",
    [
        (datetime(2019, 7, 1), T("2019-07-02 00:00Z"), "no time zone"),
        (T("2019-07-01 00:30Z"), T("2019-07-02 00:00Z"), "not at the start of an hour"),
        (T("2019-07-02 00:00Z"), T("2019-07-01 00:00Z"), "before start_utc"),
    ],
)
def test_bad_ranges_are_refused(con, start, end, match):
    with pytest.raises(TimeRangeError, match=match):
        load_building_hours(con, "b1", start, end)


def test_duplicate_reading_is_refused_with_its_building_and_hour(con):
    add_readings(con, "b2", [("2019-07-01 05:00Z", 1.0), ("2019-07-01 05:00Z", 1.5)])
    with pytest.raises(DuplicateRowError, match=r"meter_readings.*'b2'.*2019-07-01T05:00:00\+00:00"):
        load_building_hours(con, "b2", T("2019-07-01 00:00Z"), T("2019-07-02 00:00Z"))
    # A duplicate outside the range does not matter.
    load_building_hours(con, "b2", T("2019-07-02 00:00Z"), T("2019-07-03 00:00Z"))


def test_weather_off_the_hour_is_no_hours_weather(con):
    add_weather(con, "bedford", [("2019-07-01 00:30Z", 10.0, "observed"),
                                 ("2019-07-01 01:00Z", 12.0, "forecast"),
                                 ("2019-07-01 01:15Z", 13.0, "observed")])
    frame = load_building_hours(con, "b1", T("2019-07-01 00:00Z"), T("2019-07-01 02:00Z"))
    np.testing.assert_array_equal(frame["temperature_c"].to_numpy(), [np.nan, 12.0])
    assert pd.isna(frame["weather_kind"].iloc[0]) and frame["weather_kind"].iloc[1] == "forecast"


def test_duplicate_weather_of_one_kind_is_refused(con):
    add_weather(con, "bedford", [("2019-07-01 05:00Z", 1.0, "forecast"), ("2019-07-01 05:00Z", 2.0, "forecast")])
    with pytest.raises(DuplicateRowError, match="weather.*'bedford'.*'forecast'"):
        load_building_hours(con, "b1", T("2019-07-01 00:00Z"), T("2019-07-02 00:00Z"))


def test_reading_off_the_hour_is_refused(con):
    add_readings(con, "b1", [("2019-07-01 05:30Z", 1.0)])
    with pytest.raises(OffHourReadingError, match="'b1'.*05:30"):
        load_building_hours(con, "b1", T("2019-07-01 00:00Z"), T("2019-07-02 00:00Z"))


def test_loaded_hours_feed_features_and_a_window(con):
    week = "2019-04-01"
    start, end = window_load_range(week, "Europe/London", feature_set="paper_lags")
    grid = pd.date_range(start, end, freq="h", inclusive="left")
    rng = np.random.default_rng(1)
    kwh = rng.uniform(5, 50, len(grid))
    history_start = window_bounds(week, "Europe/London").history_start  # Monday 7 January
    gap = (grid >= history_start - pd.Timedelta(hours=137)) & (grid < history_start - pd.Timedelta(hours=127))
    kwh[gap] = np.nan  # ten readings on 1 January, the week before the history
    new_readings = pd.DataFrame({"building_id": "b1", "ts": grid, "kwh": kwh})
    new_weather = pd.DataFrame({"site_id": "bedford", "ts": grid, "t": rng.normal(8, 4, len(grid))})
    con.execute("INSERT INTO meter_readings SELECT building_id, ts, kwh FROM new_readings")
    con.execute(
        "INSERT INTO weather (site_id, ts, temperature_c, irradiance_wm2, wind_speed_ms, "
        "humidity_pct, kind) SELECT site_id, ts, t, 0.0, 2.0, 70.0, 'observed' FROM new_weather"
    )

    info = load_building_info(con, "b1")
    hours = load_building_hours(con, "b1", start, end)
    feats = build_features(
        hours, timezone=info.timezone, holiday_country=info.holiday_country,
        holiday_subdiv=info.holiday_subdiv, feature_set="paper_lags",
    )
    w = build_window(feats, week, info.timezone, feature_set="paper_lags")
    assert w.status == WindowStatus.OK
    assert w.coverage["train"].hours == 2015  # the validation week holds 31 March
    assert w.coverage["train"].labelled == 2015  # the ten gaps lie before the history
    # The ten missing readings' one- and two-week lags inside the history fall back to the
    # week before (the loaded range reaches four weeks back), so no history hour is lost.
    assert w.coverage["train"].complete_features == 2015
    assert w.coverage["test"].usable == 168
    load = pd.Series(kwh, index=grid)
    first_gap_hour = history_start - pd.Timedelta(hours=137)
    row = w.train.set_index("ts").loc[first_gap_hour + pd.Timedelta(weeks=1)]
    assert row["kwh_lag_168"] == load[first_gap_hour - pd.Timedelta(weeks=1)]


# --- the real archive, through the ingest --------------------------------------------------

def test_real_buildings_from_the_warehouse_match_their_source_files(tmp_path, cambridge_archive):
    ids = ["UCam_Building_b0", "UCam_Building_b1", "UCam_Building_b10"]
    warehouse = tmp_path / "wh.duckdb"
    ingest_cambridge(warehouse, cambridge_archive, ids, date(2019, 1, 1), date(2020, 1, 1))
    week = "2019-04-01"
    start, end = window_load_range(week, "Europe/London")
    with connect(warehouse, read_only=True) as con:
        infos = load_buildings_info(con, ids)
        frame = load_many_building_hours(con, ids, start, end)

    for building_id, hours in frame.groupby("building_id"):
        source = pd.read_csv(
            cambridge_archive / "building_data" / "processed_data" / building_id / "electricity" / "2019.csv"
        )
        load = source.set_index("datetime")["equipment load [kWh]"]
        # History 2019-01-07 00:00 to 2019-03-31 22:00 UTC, test week to 2019-04-07 22:00 UTC.
        history, test = load["2019-01-07 00:00:00":"2019-03-31 22:00:00"], load[
            "2019-03-31 23:00:00":"2019-04-07 22:00:00"
        ]
        info = infos[building_id]
        w = build_window(
            build_features(
                hours, timezone=info.timezone, holiday_country=info.holiday_country,
                holiday_subdiv=info.holiday_subdiv,
            ),
            week,
            info.timezone,
        )
        assert w.coverage["train"].hours == len(history) == 2015
        assert w.coverage["test"].hours == len(test) == 168
        # The archive's zeros are missing readings: never labelled.
        assert w.coverage["train"].labelled == int((history != 0).sum())
        assert w.coverage["test"].labelled == int((test != 0).sum())
        assert (w.train["kwh"] > 0).all()
