"""Window boundaries around clock changes, coverage counts and the skip rules."""

from __future__ import annotations

from datetime import date, datetime, timezone

import numpy as np
import pandas as pd
import pytest

from tasks.ingest.cambridge_archive import load_cambridge
from tasks.protocol.features import build_features, get_feature_set
from tasks.protocol.weeks import NotALocalMondayError
from tasks.protocol.windows import (
    WindowInputError,
    WindowStatus,
    build_window,
    window_bounds,
    window_load_range,
)

TZ = "Europe/London"
CALENDAR = {"timezone": TZ, "holiday_country": "GB", "holiday_subdiv": "ENG"}
UTC = pd.Timestamp


def featured(week: str, *, feature_set: str = "paper", kwh=None) -> pd.DataFrame:
    """Features of a complete synthetic frame covering the window of ``week`` (kwh = 1..n)."""
    start, end = window_load_range(week, TZ, feature_set=feature_set)
    ts = pd.date_range(start, end, freq="h", inclusive="left")
    hours = pd.DataFrame(
        {
            "ts": ts,
            "temperature_c": np.linspace(0.0, 10.0, len(ts)),
            "irradiance_wm2": 100.0,
            "wind_speed_ms": 4.0,
            "kwh": np.arange(1.0, len(ts) + 1.0) if kwh is None else kwh(ts),
        }
    )
    return build_features(hours, **CALENDAR, feature_set=feature_set)


def set_kwh(frame: pd.DataFrame, start: str, end: str, value=np.nan, column="kwh") -> pd.DataFrame:
    frame = frame.copy()
    frame.loc[(frame["ts"] >= UTC(start)) & (frame["ts"] < UTC(end)), column] = value
    return frame


# --- week bounds -------------------------------------------------------------------------

def target_week_bounds(week, timezone):
    return window_bounds(week, timezone).part("test")


def test_week_containing_the_spring_change_has_167_hours():
    start, end = target_week_bounds(date(2019, 3, 25), TZ)
    assert start == UTC("2019-03-25 00:00Z")  # Monday 00:00 GMT
    assert end == UTC("2019-03-31 23:00Z")  # Monday 1 April 00:00 BST
    assert (end - start) == pd.Timedelta(hours=167)


def test_week_containing_the_autumn_change_has_169_hours():
    start, end = target_week_bounds(date(2019, 10, 21), TZ)
    assert start == UTC("2019-10-20 23:00Z")  # Monday 00:00 BST
    assert end == UTC("2019-10-28 00:00Z")  # Monday 00:00 GMT
    assert (end - start) == pd.Timedelta(hours=169)


def test_summer_week_starts_at_23h_utc_on_sunday():
    assert target_week_bounds("2019-07-01", TZ) == (UTC("2019-06-30 23:00Z"), UTC("2019-07-07 23:00Z"))


@pytest.mark.parametrize(
    "week", [date(2019, 3, 26), "2019-03-31", datetime(2019, 3, 25, 0, tzinfo=timezone.utc),
             datetime(2019, 3, 25, 6), "not a date"],
)
def test_week_must_be_a_monday_date(week):
    with pytest.raises(NotALocalMondayError):
        target_week_bounds(week, TZ)


def test_history_of_the_week_of_25_march_ends_at_its_local_monday():
    b = window_bounds(date(2019, 3, 25), TZ)
    assert b.history_start == UTC("2018-12-31 00:00Z")
    assert b.validation_start == UTC("2019-03-18 00:00Z")
    assert b.test_start == UTC("2019-03-25 00:00Z")
    assert b.test_end == UTC("2019-03-31 23:00Z")


def test_validation_week_holding_the_spring_change():
    b = window_bounds(date(2019, 4, 1), TZ)
    assert b.history_start == UTC("2019-01-07 00:00Z")
    assert b.validation_start == UTC("2019-03-25 00:00Z")
    assert b.test_start == UTC("2019-03-31 23:00Z")
    assert b.test_end == UTC("2019-04-07 23:00Z")


@pytest.mark.parametrize(
    "week, counts",
    [
        # (train, fit, validation, test) hours
        ("2019-03-25", (2016, 1848, 168, 167)),  # the change is in the test week
        ("2019-04-01", (2015, 1848, 167, 168)),  # ... in the validation week
        ("2019-04-08", (2015, 1847, 168, 168)),  # ... in the last fit week
        ("2019-10-21", (2016, 1848, 168, 169)),
        ("2019-07-01", (2016, 1848, 168, 168)),
    ],
)
def test_part_sizes_follow_local_weeks(week, counts):
    w = build_window(featured(week), week, TZ)
    assert w.status == WindowStatus.OK
    got = tuple(w.coverage[p].hours for p in ("train", "fit", "validation", "test"))
    assert got == counts
    assert (len(w.train), len(w.fit), len(w.validation), len(w.test)) == counts


def test_parts_are_contiguous_and_disjoint():
    w = build_window(featured("2019-04-01"), "2019-04-01", TZ)
    assert w.fit["ts"].max() + pd.Timedelta(hours=1) == w.validation["ts"].min()
    assert w.validation["ts"].max() + pd.Timedelta(hours=1) == w.test["ts"].min()
    pd.testing.assert_frame_equal(pd.concat([w.fit, w.validation], ignore_index=True), w.train)
    assert w.test["ts"].iloc[0] == UTC("2019-03-31 23:00Z")
    assert w.test["dow_cos"].iloc[0] == pytest.approx(1.0)  # local Monday
    assert w.test["hour_cos"].iloc[0] == pytest.approx(1.0)  # local midnight


def test_load_range_adds_the_lookback_of_the_lags_and_the_persistence_forecast():
    b = window_bounds("2019-07-01", TZ)
    four_weeks = pd.Timedelta(hours=4 * 168 + 1)  # persistence reads up to four weeks back
    for feature_set in ("paper", "paper_lags", "recent"):
        start, end = window_load_range("2019-07-01", TZ, feature_set=feature_set)
        assert (start, end) == (b.history_start - four_weeks, b.test_end)


# --- coverage and the skip rules ------------------------------------------------------------

def test_missing_labels_are_dropped_from_fitting_and_kept_unscored_in_test():
    frame = featured("2019-07-01")
    frame = set_kwh(frame, "2019-05-01 00:00Z", "2019-05-01 10:00Z")  # 10 fit hours
    frame = set_kwh(frame, "2019-07-02 00:00Z", "2019-07-02 03:00Z")  # 3 test hours
    w = build_window(frame, "2019-07-01", TZ)
    assert w.ok
    assert w.coverage["fit"].labelled == w.coverage["fit"].usable == 1848 - 10
    assert len(w.fit) == 1838 and w.fit["kwh"].notna().all()
    assert len(w.test) == 168 and w.test["kwh"].isna().sum() == 3
    assert w.coverage["test"].usable == 165 and w.coverage["test"].complete_features == 168
    x, y = w.xy("fit")
    assert x.shape == (1838, 8) and np.isfinite(x).all() and np.isfinite(y).all()
    # No imputed zeros: every labelled value is an original one (the originals are >= 1).
    assert (w.train["kwh"] >= 1).all()


def test_hours_absent_from_the_frame_count_as_missing():
    frame = featured("2019-07-01")
    frame = frame[~frame["ts"].between(UTC("2019-06-24 00:00Z"), UTC("2019-06-24 04:00Z"))]
    w = build_window(frame, "2019-07-01", TZ)
    assert w.coverage["validation"].hours == 168
    assert w.coverage["validation"].labelled == 163


def test_too_few_fit_labels_is_insufficient_data():
    frame = featured("2019-07-01")
    b = window_bounds("2019-07-01", TZ)
    # Leave 923 of the 1848 fit hours labelled: one short of half.
    cut = b.history_start + pd.Timedelta(hours=1848 - 923)
    frame = set_kwh(frame, str(b.history_start), str(cut))
    w = build_window(frame, "2019-07-01", TZ)
    assert w.status == WindowStatus.INSUFFICIENT_DATA and not w.ok
    assert "fit weeks have 923 usable hours of 1848" in w.reason and "need 924" in w.reason
    one_more = set_kwh(featured("2019-07-01"), str(b.history_start), str(cut - pd.Timedelta(hours=1)))
    assert build_window(one_more, "2019-07-01", TZ).status == WindowStatus.OK
    assert build_window(frame, "2019-07-01", TZ, min_fit_fraction=0.4).ok


def test_validation_week_needs_its_minimum_of_labelled_hours():
    frame = set_kwh(featured("2019-07-01"), "2019-06-23 23:00Z", "2019-06-30 22:00Z")
    w = build_window(frame, "2019-07-01", TZ)  # 1 labelled validation hour left
    assert w.status == WindowStatus.INSUFFICIENT_DATA
    assert "validation week has 1 usable hours of 168" in w.reason
    assert build_window(frame, "2019-07-01", TZ, min_validation_hours=1).ok


def test_short_weather_gaps_are_interpolated_long_ones_drop_rows():
    frame = featured("2019-07-01")
    temp = frame.set_index("ts")["temperature_c"]
    before, after = temp[UTC("2019-05-01 09:00Z")], temp[UTC("2019-05-01 12:00Z")]
    frame = set_kwh(frame, "2019-05-01 10:00Z", "2019-05-01 12:00Z", column="temperature_c")
    frame = set_kwh(frame, "2019-05-08 10:00Z", "2019-05-08 14:00Z", column="wind_speed_ms")
    w = build_window(frame, "2019-07-01", TZ)
    assert w.ok
    filled = w.fit.set_index("ts")["temperature_c"]
    assert filled[UTC("2019-05-01 10:00Z")] == pytest.approx(before + (after - before) / 3)
    assert filled[UTC("2019-05-01 11:00Z")] == pytest.approx(before + 2 * (after - before) / 3)
    assert w.coverage["fit"].weather_filled == 2
    assert w.coverage["fit"].complete_features == 1848 - 4
    assert w.coverage["fit"].usable == 1848 - 4
    assert UTC("2019-05-08 11:00Z") not in set(w.fit["ts"])
    none_filled = build_window(frame, "2019-07-01", TZ, max_weather_gap_hours=0)
    assert none_filled.coverage["fit"].complete_features == 1848 - 6


def test_gap_at_the_edge_of_the_window_is_not_extrapolated():
    frame = featured("2019-07-01")
    b = window_bounds("2019-07-01", TZ)
    frame = set_kwh(frame, str(b.test_end - pd.Timedelta(hours=1)), str(b.test_end), column="wind_speed_ms")
    w = build_window(frame, "2019-07-01", TZ, test_weather_profile_days=0)
    assert w.status == WindowStatus.NO_WEATHER
    assert "167 of 168 hours" in w.reason
    # with the default profile fill the week goes out, and says so
    w = build_window(frame, "2019-07-01", TZ)
    assert w.ok and w.coverage["test"].weather_filled == 1
    assert "weather filled for 1" in w.reason and w.test["wind_speed_ms"].iloc[-1] == 4.0


def test_test_week_weather_gaps_are_filled_from_the_last_weeks_daily_profile():
    """40 hours of a week's forecast temperature missing (under a quarter of the week): the
    week is forecast with it, each missing hour taking the mean of the same local hour over the
    last 7 days."""
    frame = featured("2019-07-01")  # temperature rises linearly over the frame
    missing = ("2019-07-03 10:00Z", "2019-07-05 02:00Z")  # 40 hours
    gappy = set_kwh(frame, *missing, column="temperature_c")
    w = build_window(gappy, "2019-07-01", TZ)
    assert w.ok and w.coverage["test"].weather_filled == 40 and not w.left_out
    assert "temperature_c" in w.feature_columns
    # by hand: the last 7 days before Monday 1 July 00:00 BST, by London hour of day
    last_week = frame[(frame["ts"] >= UTC("2019-06-23 23:00Z")) & (frame["ts"] < UTC("2019-06-30 23:00Z"))]
    profile = last_week.groupby(last_week["ts"].dt.tz_convert(TZ).dt.hour)["temperature_c"].mean()
    filled = w.test[(w.test["ts"] >= UTC(missing[0])) & (w.test["ts"] < UTC(missing[1]))]
    expected = profile.loc[filled["ts"].dt.tz_convert(TZ).dt.hour].to_numpy()
    np.testing.assert_allclose(filled["temperature_c"].to_numpy(), expected)
    untouched = w.test[w.test["ts"] < UTC(missing[0])]
    np.testing.assert_array_equal(
        untouched["temperature_c"].to_numpy(),
        frame.set_index("ts").loc[untouched["ts"], "temperature_c"].to_numpy())


def test_an_input_missing_for_over_a_quarter_of_the_week_is_left_out_not_guessed():
    """58 hours of temperature missing (as in a real week of 2021): more than a quarter of the
    week would be guessed, so temperature is left out of the window and the others stay."""
    gappy = set_kwh(featured("2019-07-01"), "2019-07-03 10:00Z", "2019-07-05 20:00Z",
                    column="temperature_c")
    w = build_window(gappy, "2019-07-01", TZ)
    assert w.ok and w.coverage["test"].weather_filled == 0
    assert dict(w.left_out) == {"temperature_c": "missing for 58 of 168 target-week hours"}
    assert "temperature_c" not in w.feature_columns
    assert {"irradiance_wm2", "wind_speed_ms", "hour_cos"} <= set(w.feature_columns)
    assert w.xy("train")[0].shape[1] == 7
    assert "left out: temperature_c missing for 58 of 168 target-week hours" in w.reason
    # at the limit (42 = a quarter of 168 hours) it is kept and filled
    at_limit = set_kwh(featured("2019-07-01"), "2019-07-03 10:00Z", "2019-07-05 04:00Z",
                       column="temperature_c")
    w = build_window(at_limit, "2019-07-01", TZ)
    assert not w.left_out and w.coverage["test"].weather_filled == 42


def test_a_blank_input_leaves_out_its_change_feature_too():
    start, end = window_load_range("2019-07-01", TZ, feature_set="recent_change")
    ts = pd.date_range(start, end, freq="h", inclusive="left")
    blank = (ts >= UTC("2019-07-01 00:00Z")) & (ts < UTC("2019-07-07 17:00Z"))  # 161 h
    hours = pd.DataFrame({"ts": ts, "temperature_c": np.linspace(0.0, 10.0, len(ts)),
                          "irradiance_wm2": np.where(blank, np.nan, 100.0),
                          "wind_speed_ms": 4.0, "kwh": np.arange(1.0, len(ts) + 1.0)})
    features = build_features(hours, **CALENDAR, feature_set="recent_change")
    w = build_window(features, "2019-07-01", TZ, feature_set="recent_change")
    assert w.ok and set(w.left_out) == {"irradiance_wm2"}
    assert "161 of 168 target-week hours" in w.left_out["irradiance_wm2"]
    assert not {"irradiance_wm2", "irradiance_wm2_change_168"} & set(w.feature_columns)
    assert "temperature_c_change_168" in w.feature_columns


def test_test_week_without_one_input_goes_on_without_it():
    frame = set_kwh(featured("2019-07-01"), "2019-06-30 23:00Z", "2019-07-07 23:00Z", column="irradiance_wm2")
    w = build_window(frame, "2019-07-01", TZ)
    assert w.ok and set(w.left_out) == {"irradiance_wm2"}
    assert w.coverage["test"].complete_features == 168


def test_test_week_without_any_weather_is_no_weather():
    frame = featured("2019-07-01")
    for column in ("temperature_c", "irradiance_wm2", "wind_speed_ms"):
        frame = set_kwh(frame, "2019-06-30 23:00Z", "2019-07-07 23:00Z", column=column)
    w = build_window(frame, "2019-07-01", TZ)
    assert w.status == WindowStatus.NO_WEATHER and not w.left_out
    assert w.coverage["test"].complete_features == 0 and w.coverage["test"].labelled == 168
    assert len(w.test) == 168  # still reported, for the record
    assert "no weather input usable: temperature_c missing for 168 of 168" in w.reason
    assert build_window(frame, "2019-07-01", TZ, min_test_feature_fraction=0.0).ok


def test_a_window_for_models_that_take_missing_inputs_keeps_the_hours_a_load_gap_leaves_lagless():
    # readings missing four weeks before a target hour and before a history hour (summer time
    # all): the load four weeks back, which no earlier week stands in for, is missing there
    gap, deep = UTC("2019-06-03 05:00Z"), UTC("2019-05-07 05:00Z")
    frame = featured("2019-07-01", feature_set="year", kwh=lambda ts: np.where(
        ts.isin([gap, deep]), np.nan, np.arange(1.0, len(ts) + 1.0)))
    strict = build_window(frame, "2019-07-01", TZ, feature_set="year")
    assert strict.status == WindowStatus.INCOMPLETE_FEATURES
    assert "test week has every feature for 167 of 168 hours" in strict.reason
    loose = build_window(frame, "2019-07-01", TZ, feature_set="year", missing_load_ok=True)
    assert loose.ok and loose.coverage["test"].complete_features == 168
    lagless = loose.test[loose.test["ts"] == gap + pd.Timedelta(weeks=4)]
    assert lagless["kwh_lag_672"].isna().all() and lagless["kwh"].notna().all()
    # in the history: the hour without a reading is still no row; the hours whose lags it
    # blanks are rows, with only those lags missing
    assert gap not in set(loose.train["ts"])
    extra = loose.train[~loose.train["ts"].isin(strict.train["ts"])]
    assert list(extra["ts"]) == [deep + pd.Timedelta(weeks=4)]
    assert len(loose.train) == len(strict.train) + 1
    load = list(get_feature_set("year").load_columns)
    other = [c for c in loose.feature_columns if c not in load]
    assert extra[load].isna().any(axis=1).all() and extra[other].notna().all().all()


def test_history_without_one_input_leaves_it_out():
    frame = set_kwh(featured("2019-07-01"), "2019-04-07 23:00Z", "2019-06-30 23:00Z", column="temperature_c")
    w = build_window(frame, "2019-07-01", TZ)
    assert w.ok and set(w.left_out) == {"temperature_c"}
    assert "missing at 2016 of the history's hours with a reading" in w.reason
    assert w.coverage["fit"].labelled == 1848 and w.coverage["fit"].usable == 1848


def test_history_without_any_weather_is_no_weather_not_missing_labels():
    frame = featured("2019-07-01")
    for column in ("temperature_c", "irradiance_wm2", "wind_speed_ms"):
        frame = set_kwh(frame, "2019-04-07 23:00Z", "2019-06-30 23:00Z", column=column)
    w = build_window(frame, "2019-07-01", TZ)
    assert w.status == WindowStatus.NO_WEATHER
    assert w.coverage["fit"].labelled == 1848 and w.coverage["fit"].usable == 0


def test_too_few_readings_leave_no_input_out():
    frame = set_kwh(featured("2019-07-01"), "2019-04-07 23:00Z", "2019-06-20 23:00Z")
    frame = set_kwh(frame, "2019-04-07 23:00Z", "2019-04-10 23:00Z", column="wind_speed_ms")
    w = build_window(frame, "2019-07-01", TZ)
    assert w.status == WindowStatus.INSUFFICIENT_DATA and not w.left_out


def test_a_missing_lag_reading_falls_back_to_the_week_before():
    frame = featured("2019-07-01", feature_set="paper_lags")
    # One validation-week reading is missing: the matching test hour's one-week lag reads two
    # weeks back instead (kwh counts hours, so that is the hour's own kwh minus 336).
    frame = set_kwh(frame, "2019-06-26 10:00Z", "2019-06-26 11:00Z")
    again = build_features(frame, **CALENDAR, feature_set="paper_lags")
    w = build_window(again, "2019-07-01", TZ, feature_set="paper_lags")
    assert w.ok and w.coverage["test"].complete_features == 168
    row = w.test.set_index("ts").loc[UTC("2019-07-03 10:00Z")]
    assert row["kwh_lag_168"] == row["kwh"] - 336 == row["kwh_lag_336"]
    assert w.feature_columns[-2:] == ("kwh_lag_168", "kwh_lag_336")


def test_lag_window_uses_known_loads_only():
    frame = featured("2019-10-28", feature_set="paper_lags")
    w = build_window(frame, "2019-10-28", TZ, feature_set="paper_lags")
    assert w.ok
    # Every lag in the test week reads a load from before the week (kwh = hour number).
    first = w.test["kwh"].min()
    assert (w.test["kwh_lag_168"] < first).all() and (w.test["kwh_lag_336"] < first).all()


def test_frame_without_feature_columns_is_refused():
    frame = featured("2019-07-01").drop(columns="hour_sin")
    with pytest.raises(WindowInputError, match="hour_sin"):
        build_window(frame, "2019-07-01", TZ)
    with pytest.raises(ValueError, match="min_fit_fraction"):
        build_window(featured("2019-07-01"), "2019-07-01", TZ, min_fit_fraction=1.5)


# --- a real building ------------------------------------------------------------------------

def test_real_building_window_across_the_spring_change(cambridge_archive):
    batch = load_cambridge(cambridge_archive, ["UCam_Building_b0"], date(2019, 1, 1), date(2019, 4, 30))
    weather = batch.weather.to_pandas()[["ts", "temperature_c", "irradiance_wm2", "wind_speed_ms"]]
    hours = batch.readings.to_pandas()[["ts", "kwh"]].merge(weather, on="ts", how="left")
    w = build_window(build_features(hours, **CALENDAR), "2019-03-25", TZ)

    source = cambridge_archive / "building_data/processed_data/UCam_Building_b0/electricity/2019.csv"
    raw = pd.read_csv(source, parse_dates=["datetime"]).set_index("datetime")["equipment load [kWh]"]
    history = raw["2018-12-31 00:00":"2019-03-24 23:00"]  # UTC, hand-derived bounds
    test = raw["2019-03-25 00:00":"2019-03-31 22:00"]
    assert w.coverage["test"].hours == len(test) == 167
    assert w.coverage["test"].labelled == int((test != 0).sum())
    # 2018 is not in the file: the history holds only its 2019 part.
    assert w.coverage["train"].labelled == int((history != 0).sum())
    assert w.coverage["train"].hours == 2016
    assert w.status == WindowStatus.OK
    assert (w.train["kwh"] > 0).all()


def test_filled_weather_also_fills_its_change_since_last_week():
    start, end = window_load_range("2019-07-01", TZ, feature_set="recent_change")
    ts = pd.date_range(start, end, freq="h", inclusive="left")
    hours = pd.DataFrame({"ts": ts, "temperature_c": np.linspace(0.0, 10.0, len(ts)),
                          "irradiance_wm2": 100.0, "wind_speed_ms": 4.0,
                          "kwh": np.arange(1.0, len(ts) + 1.0)})
    gap = (ts >= UTC("2019-07-03 10:00Z")) & (ts < UTC("2019-07-03 20:00Z"))
    gappy = hours.assign(temperature_c=hours["temperature_c"].where(~gap))
    features = build_features(gappy, **CALENDAR, feature_set="recent_change")
    assert features["temperature_c_change_168"].isna().sum() == 10
    w = build_window(features, "2019-07-01", TZ, feature_set="recent_change")
    assert w.ok and w.coverage["test"].weather_filled == 10
    test = w.test.set_index("ts")
    at = UTC("2019-07-03 12:00Z")
    last_week = hours.set_index("ts").loc[at - pd.Timedelta(weeks=1), "temperature_c"]
    assert test.loc[at, "temperature_c_change_168"] == pytest.approx(
        test.loc[at, "temperature_c"] - last_week)
