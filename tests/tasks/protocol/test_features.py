"""Features in local time: values checked by hand against the Europe/London calendar."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tasks.protocol.features import (
    FEATURE_SETS,
    PAPER_COLUMNS,
    FeatureInputError,
    UnknownFeatureSetError,
    UnknownHolidayCalendarError,
    build_features,
    get_feature_set,
)
from tasks.protocol.weeks import InvalidTimezoneError

LONDON = {"timezone": "Europe/London", "holiday_country": "GB", "holiday_subdiv": "ENG"}


def hourly(start: str, end: str, *, kwh: bool = False) -> pd.DataFrame:
    """A weather frame on the UTC grid [start, end); kwh = hours since 2019-01-01 00:00 UTC."""
    ts = pd.date_range(start, end, freq="h", inclusive="left", tz="UTC")
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(
        {
            "ts": ts,
            "temperature_c": rng.normal(10, 5, len(ts)),
            "irradiance_wm2": rng.uniform(0, 800, len(ts)),
            "wind_speed_ms": rng.uniform(0, 12, len(ts)),
        }
    )
    if kwh:
        frame["kwh"] = (ts - pd.Timestamp("2019-01-01", tz="UTC")) / pd.Timedelta(hours=1)
    return frame


def features_at(frame: pd.DataFrame, utc: str, **kwargs) -> pd.Series:
    out = build_features(frame, **LONDON, **kwargs)
    return out.loc[out["ts"] == pd.Timestamp(utc)].iloc[0]


def test_paper_set_is_default_with_the_papers_columns_in_order():
    out = build_features(hourly("2019-07-01", "2019-07-02"), **LONDON)
    assert tuple(out.columns) == ("ts", *PAPER_COLUMNS)
    assert PAPER_COLUMNS == (
        "dow_cos", "dow_sin", "hour_cos", "hour_sin", "is_holiday_or_weekend",
        "temperature_c", "irradiance_wm2", "wind_speed_ms",
    )
    assert FEATURE_SETS["paper"].columns == PAPER_COLUMNS
    assert FEATURE_SETS["paper_lags"].columns == (*PAPER_COLUMNS, "kwh_lag_168", "kwh_lag_336")


def test_midnight_utc_in_summer_is_one_am_bst_on_monday():
    row = features_at(hourly("2019-06-30", "2019-07-02"), "2019-07-01 00:00Z")
    assert row["dow_cos"] == pytest.approx(1.0) and row["dow_sin"] == pytest.approx(0.0, abs=1e-12)
    assert row["hour_cos"] == pytest.approx(np.cos(2 * np.pi / 24))
    assert row["hour_sin"] == pytest.approx(np.sin(2 * np.pi / 24))


def test_local_monday_midnight_is_angle_zero_for_both_cycles():
    summer = features_at(hourly("2019-06-30", "2019-07-02"), "2019-06-30 23:00Z")
    winter = features_at(hourly("2019-01-06", "2019-01-08"), "2019-01-07 00:00Z")
    for row in (summer, winter):
        assert row[["dow_cos", "hour_cos"]].tolist() == pytest.approx([1.0, 1.0])
        assert row[["dow_sin", "hour_sin"]].tolist() == pytest.approx([0.0, 0.0], abs=1e-12)


def test_sunday_23h_local_is_day_six_hour_23():
    row = features_at(hourly("2019-06-30", "2019-07-02"), "2019-06-30 22:00Z")
    assert row["dow_cos"] == pytest.approx(np.cos(2 * np.pi * 6 / 7))
    assert row["dow_sin"] == pytest.approx(np.sin(2 * np.pi * 6 / 7))
    assert row["hour_cos"] == pytest.approx(np.cos(2 * np.pi * 23 / 24))
    assert row["hour_sin"] == pytest.approx(np.sin(2 * np.pi * 23 / 24))
    assert row["is_holiday_or_weekend"] == 1.0


def test_clock_changes_repeat_and_skip_local_hours():
    out = build_features(hourly("2019-03-30", "2019-10-29"), **LONDON)
    hour = np.round(np.arctan2(out["hour_sin"], out["hour_cos"]) / (2 * np.pi) * 24) % 24
    hour.index = out["ts"]
    # 31 March 2019: 00:00 UTC is 00:00 GMT, 01:00 UTC is already 02:00 BST.
    assert hour[pd.Timestamp("2019-03-31 00:00Z")] == 0
    assert hour[pd.Timestamp("2019-03-31 01:00Z")] == 2
    # 27 October 2019: 00:00 UTC is 01:00 BST and 01:00 UTC is 01:00 GMT.
    assert hour[pd.Timestamp("2019-10-27 00:00Z")] == 1
    assert hour[pd.Timestamp("2019-10-27 01:00Z")] == 1


def test_cyclical_encodings_lie_on_the_unit_circle():
    out = build_features(hourly("2019-01-01", "2019-02-01"), **LONDON)
    np.testing.assert_allclose(out["dow_cos"] ** 2 + out["dow_sin"] ** 2, 1.0)
    np.testing.assert_allclose(out["hour_cos"] ** 2 + out["hour_sin"] ** 2, 1.0)
    assert out["hour_cos"].round(12).nunique() == 13  # cos of 24 hours takes 13 values


@pytest.mark.parametrize("day", ["2019-12-25", "2019-05-06", "2019-12-26", "2019-04-19"])
def test_bank_holidays_are_flagged_for_every_local_hour(day):
    out = build_features(hourly("2019-01-01", "2020-01-01"), **LONDON)
    local = out["ts"].dt.tz_convert("Europe/London")
    on_day = local.dt.date == pd.Timestamp(day).date()
    assert on_day.sum() == 24
    assert (out.loc[on_day, "is_holiday_or_weekend"] == 1.0).all()


def test_holiday_is_judged_on_the_local_date():
    out = build_features(hourly("2019-05-05", "2019-05-08"), **LONDON).set_index("ts")
    flag = out["is_holiday_or_weekend"]
    assert flag[pd.Timestamp("2019-05-05 23:00Z")] == 1.0  # Mon 6 May 00:00 BST: bank holiday
    assert flag[pd.Timestamp("2019-05-06 22:00Z")] == 1.0  # Mon 6 May 23:00 BST
    assert flag[pd.Timestamp("2019-05-06 23:00Z")] == 0.0  # Tue 7 May 00:00 BST: working day


def test_flagged_hours_of_2019_match_a_hand_count():
    # 2019 starts on a Tuesday: 52 Saturdays + 52 Sundays; England's 8 bank holidays all fall
    # on weekdays. 112 days of 24 hours, less the skipped hour of Sunday 31 March, plus the
    # repeated hour of Sunday 27 October.
    out = build_features(hourly("2019-01-01 00:00", "2019-12-31 23:59"), **LONDON)
    local_2019 = out["ts"].dt.tz_convert("Europe/London").dt.year == 2019
    assert out.loc[local_2019, "is_holiday_or_weekend"].sum() == 112 * 24 - 1 + 1


def test_weather_passes_through_and_missing_weather_stays_missing():
    frame = hourly("2019-07-01", "2019-07-02")
    frame.loc[5, "temperature_c"] = np.nan
    frame.loc[7, "wind_speed_ms"] = np.nan
    out = build_features(frame, **LONDON)
    for col in ("temperature_c", "irradiance_wm2", "wind_speed_ms"):
        np.testing.assert_array_equal(out[col].to_numpy(), frame[col].to_numpy())
    assert np.isnan(out.loc[5, "temperature_c"]) and np.isnan(out.loc[7, "wind_speed_ms"])


def test_rows_keep_their_order_and_index():
    frame = hourly("2019-07-01", "2019-07-03")
    shuffled = frame.sample(frac=1.0, random_state=3)
    out = build_features(shuffled, **LONDON)
    expected = build_features(frame, **LONDON).loc[shuffled.index]
    pd.testing.assert_frame_equal(out, expected)


def test_label_is_carried_when_present():
    out = build_features(hourly("2019-07-01", "2019-07-02", kwh=True), **LONDON)
    assert list(out.columns[-4:]) == ["kwh", "kwh_persistence", "kwh_day_type_persistence",
                                      "unlike_last_week"]
    assert out["kwh"].iloc[0] == (31 + 28 + 31 + 30 + 31 + 30) * 24  # hours from 1 Jan to 1 Jul


# --- lag features --------------------------------------------------------------------------

def lag_hours(out: pd.DataFrame, column: str) -> pd.Series:
    """UTC hours between each row and the hour its lag reads (kwh encodes the hour number)."""
    return (out["kwh"] - out[column]).set_axis(out["ts"])


def test_lags_read_the_same_local_hour_one_and_two_weeks_earlier():
    out = build_features(
        hourly("2019-03-01", "2019-11-30", kwh=True), **LONDON, feature_set="paper_lags"
    )
    lag1, lag2 = lag_hours(out, "kwh_lag_168"), lag_hours(out, "kwh_lag_336")
    # Ordinary week: exactly 168 h.
    assert lag1[pd.Timestamp("2019-07-03 12:00Z")] == 168
    assert lag2[pd.Timestamp("2019-07-03 12:00Z")] == 336
    # Sun 31 Mar 13:00 BST (12:00Z) reads Sun 24 Mar 13:00 GMT (13:00Z): 167 h.
    assert lag1[pd.Timestamp("2019-03-31 12:00Z")] == 167
    # Mon 28 Oct 12:00 GMT reads Mon 21 Oct 12:00 BST (11:00Z): 169 h.
    assert lag1[pd.Timestamp("2019-10-28 12:00Z")] == 169
    # Sun 7 Apr 01:00 BST (00:00Z): 01:00 on 31 March did not exist; the next instant is read.
    assert lag1[pd.Timestamp("2019-04-07 00:00Z")] == 167
    # Sun 3 Nov 01:00 GMT (01:00Z): 01:00 on 27 October happened twice; the first is read.
    assert lag1[pd.Timestamp("2019-11-03 01:00Z")] == 169
    assert set(lag1.dropna().unique()) == {167.0, 168.0, 169.0}


def test_lags_of_any_local_week_are_known_before_that_week_starts():
    out = build_features(
        hourly("2018-12-01", "2020-01-15", kwh=True), **LONDON, feature_set="paper_lags"
    )
    hours_since = pd.Timestamp("2019-01-01", tz="UTC")
    local = out["ts"].dt.tz_convert("Europe/London")
    week_start_local = (local.dt.normalize() - pd.to_timedelta(local.dt.day_of_week, unit="D"))
    week_start_utc = week_start_local.dt.tz_convert("UTC")
    in_2019 = local.dt.year == 2019
    for column, weeks in (("kwh_lag_168", 1), ("kwh_lag_336", 2)):
        source = hours_since + pd.to_timedelta(out[column], unit="h")
        assert (source[in_2019] < week_start_utc[in_2019]).all()
        # ... and in the local week `weeks` weeks before.
        source_local = source.dt.tz_convert("Europe/London")
        day = local.dt.tz_localize(None).dt.normalize()
        source_day = source_local.dt.tz_localize(None).dt.normalize()
        days_back = (day - source_day).dt.days
        assert (days_back[in_2019] == 7 * weeks).all()


def test_lags_beyond_the_frame_are_missing_and_lookback_says_how_far_to_load():
    # every set loads four weeks before its history: the persistence forecast reads that far
    for name in ("paper", "paper_lags", "recent"):
        assert get_feature_set(name).lookback == pd.Timedelta(hours=4 * 168 + 1)
    out = build_features(
        hourly("2019-07-01", "2019-07-22", kwh=True), **LONDON, feature_set="paper_lags"
    )
    assert out["kwh_lag_168"].isna().sum() == 168
    assert out["kwh_lag_336"].isna().sum() == 336


def test_persistence_falls_back_to_earlier_weeks_and_the_median_ignores_gaps():
    frame = hourly("2019-06-03", "2019-07-15", kwh=True)  # kwh = hours since 1 January
    at = pd.Timestamp("2019-07-10 09:00Z")
    for weeks_back in (1, 2):  # the same hour one and two weeks back are missing
        frame.loc[frame["ts"] == at - pd.Timedelta(weeks=weeks_back), "kwh"] = np.nan
    out = build_features(frame, **LONDON, feature_set="recent").set_index("ts")
    hour = out.loc[at, "kwh"]
    assert out.loc[at, "kwh_persistence"] == hour - 3 * 168  # three weeks back
    assert out.loc[at, "kwh_lag_median"] == np.median([hour - 3 * 168, hour - 4 * 168])
    assert out.loc[at + pd.Timedelta(hours=1), "kwh_persistence"] == hour + 1 - 168


def test_a_holiday_in_the_lag_week_is_recognised():
    """Monday 26 August 2019 was England's summer bank holiday: a week later, on Monday
    2 September, the lag reads a holiday, and the row says so; Tuesday 3 September's does not."""
    frame = hourly("2019-08-05", "2019-09-09", kwh=True)
    out = build_features(frame, **LONDON, feature_set="recent").set_index("ts")
    assert out.loc[pd.Timestamp("2019-09-02 09:00Z"), "lag_week_is_off"] == 1.0
    assert out.loc[pd.Timestamp("2019-09-02 09:00Z"), "is_holiday_or_weekend"] == 0.0
    assert out.loc[pd.Timestamp("2019-09-03 09:00Z"), "lag_week_is_off"] == 0.0
    assert out.loc[pd.Timestamp("2019-09-08 09:00Z"), "lag_week_is_off"] == 1.0  # a Sunday


def test_last_weeks_mean_is_constant_within_a_local_week():
    frame = hourly("2019-07-01", "2019-07-22", kwh=True)
    out = build_features(frame, **LONDON, feature_set="recent")
    week2 = out[(out["ts"] >= pd.Timestamp("2019-07-07 23:00Z")) & (out["ts"] < pd.Timestamp("2019-07-14 23:00Z"))]
    week1 = out[(out["ts"] >= pd.Timestamp("2019-06-30 23:00Z")) & (out["ts"] < pd.Timestamp("2019-07-07 23:00Z"))]
    assert week2["kwh_last_week_mean"].nunique() == 1
    assert week2["kwh_last_week_mean"].iloc[0] == pytest.approx(week1["kwh"].mean())
    assert week1["kwh_last_week_mean"].isna().all()  # its previous week is not in the frame


def test_missing_load_gives_missing_lags_not_zero():
    frame = hourly("2019-07-01", "2019-07-15", kwh=True)
    frame.loc[frame["ts"] == pd.Timestamp("2019-07-02 05:00Z"), "kwh"] = np.nan
    out = build_features(frame, **LONDON, feature_set="paper_lags").set_index("ts")
    assert np.isnan(out.loc[pd.Timestamp("2019-07-09 05:00Z"), "kwh_lag_168"])
    assert out.loc[pd.Timestamp("2019-07-09 06:00Z"), "kwh_lag_168"] > 0


# --- bad input ---------------------------------------------------------------------------

def test_unknown_feature_set_names_the_known_ones():
    with pytest.raises(UnknownFeatureSetError, match="'nope'.*paper"):
        build_features(hourly("2019-07-01", "2019-07-02"), **LONDON, feature_set="nope")


def test_lag_set_without_load_column_is_refused():
    with pytest.raises(FeatureInputError, match="paper_lags.*kwh"):
        build_features(hourly("2019-07-01", "2019-07-02"), **LONDON, feature_set="paper_lags")


def test_missing_weather_column_is_refused():
    frame = hourly("2019-07-01", "2019-07-02").drop(columns="wind_speed_ms")
    with pytest.raises(FeatureInputError, match="wind_speed_ms"):
        build_features(frame, **LONDON)


@pytest.mark.parametrize(
    "mutate, match",
    [
        (lambda f: f.assign(ts=f["ts"].dt.tz_localize(None)), "time-zone-aware"),
        (lambda f: f.drop(columns="ts"), "no 'ts' column"),
        (lambda f: pd.concat([f, f.iloc[[3]]]), "repeats the hour"),
    ],
)
def test_bad_timestamps_are_refused(mutate, match):
    with pytest.raises(FeatureInputError, match=match):
        build_features(mutate(hourly("2019-07-01", "2019-07-02")), **LONDON)


def test_unknown_timezone_and_calendar_are_refused():
    frame = hourly("2019-07-01", "2019-07-02")
    with pytest.raises(InvalidTimezoneError, match="Europe/Atlantis"):
        build_features(frame, **{**LONDON, "timezone": "Europe/Atlantis"})
    with pytest.raises(UnknownHolidayCalendarError, match="'XX'"):
        build_features(frame, **{**LONDON, "holiday_country": "XX"})
    with pytest.raises(UnknownHolidayCalendarError, match="'NOWHERE'"):
        build_features(frame, **{**LONDON, "holiday_subdiv": "NOWHERE"})


def test_another_zone_and_calendar():
    # New York, 4 July 2019 (Independence Day, a Thursday): 04:00 UTC is local midnight (EDT).
    frame = hourly("2019-07-03", "2019-07-06")
    out = build_features(
        frame, timezone="America/New_York", holiday_country="US", holiday_subdiv="NY"
    ).set_index("ts")
    assert out.loc[pd.Timestamp("2019-07-04 04:00Z"), "hour_cos"] == pytest.approx(1.0)
    assert out.loc[pd.Timestamp("2019-07-04 04:00Z"), "is_holiday_or_weekend"] == 1.0
    assert out.loc[pd.Timestamp("2019-07-04 03:00Z"), "is_holiday_or_weekend"] == 0.0


def test_columns_read_from_one_computation_are_the_same_values_in_their_own_memory():
    """The year set's holiday-aware persistence is computed once for its feature and for the
    base a residual corrects: equal columns, each its own, so changing one leaves the other."""
    frame = hourly("2018-06-04", "2019-07-15", kwh=True)
    out = build_features(frame, **LONDON, feature_set="year")
    lag, base = out["kwh_day_type_lag"].to_numpy(), out["kwh_day_type_persistence"].to_numpy()
    np.testing.assert_array_equal(lag, base)
    arrays = [out[c].to_numpy() for c in out.columns if out[c].dtype == np.float64]
    assert not any(np.shares_memory(a, b) for i, a in enumerate(arrays) for b in arrays[i + 1:])
    out.loc[out.index[-1], "kwh_day_type_lag"] = -1.0
    assert out["kwh_day_type_persistence"].iloc[-1] == base[-1] != -1.0
