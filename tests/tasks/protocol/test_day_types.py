"""The holiday-aware persistence forecast against hand-picked source hours.

The load of every hour is its own UTC instant in hours since 2019-01-01 00:00 UTC, so the value
the forecast takes names the hour it was read from.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tasks.protocol.day_types import (
    OFF_WEEKDAY,
    WEEKEND,
    WORKDAY,
    ClosurePeriod,
    ClosurePeriodError,
    day_types,
    parse_closure_periods,
    unlike_last_week,
)
from tasks.protocol.features import (
    DAY_TYPE_PERSISTENCE,
    PERSISTENCE,
    build_features,
    holiday_dates,
)

EPOCH = pd.Timestamp("2019-01-01", tz="UTC")
LONDON = {"timezone": "Europe/London", "holiday_country": "GB", "holiday_subdiv": "ENG"}


def hours(start: str, end: str) -> pd.DataFrame:
    ts = pd.date_range(start, end, freq="h", tz="UTC", inclusive="left")
    frame = pd.DataFrame({"ts": ts, "kwh": (ts - EPOCH) / pd.Timedelta(hours=1)})
    return frame.assign(temperature_c=10.0, irradiance_wm2=0.0, wind_speed_ms=1.0)


def source(frame: pd.DataFrame, local: str, column: str = DAY_TYPE_PERSISTENCE) -> pd.Timestamp:
    """The UTC hour the forecast of local wall-clock time ``local`` was read from."""
    utc = pd.Timestamp(local).tz_localize("Europe/London").tz_convert("UTC")
    value = frame.set_index("ts").loc[utc, column]
    return EPOCH + pd.Timedelta(hours=float(value))


@pytest.fixture(scope="module")
def spring():
    return build_features(hours("2019-02-01", "2019-05-20"), **LONDON)


@pytest.fixture(scope="module")
def winter():
    return build_features(hours("2019-11-01", "2020-01-20"), **LONDON)


def utc(local: str) -> pd.Timestamp:
    return pd.Timestamp(local).tz_localize("Europe/London").tz_convert("UTC")


def test_a_workday_after_a_workday_is_last_weeks_hour(spring):
    assert source(spring, "2019-04-23 10:00") == utc("2019-04-16 10:00")


def test_a_bank_holiday_is_the_sunday_before_its_week(spring):
    # Easter Monday and Good Friday 2019: no off weekday 1-4 weeks back, so the Sunday before
    assert source(spring, "2019-04-22 10:00") == utc("2019-04-21 10:00")
    assert source(spring, "2019-04-19 15:00") == utc("2019-04-14 15:00")


def test_the_workday_after_a_holiday_skips_it(spring):
    # last week's Monday was Easter Monday: two weeks back instead
    assert source(spring, "2019-04-29 09:00") == utc("2019-04-15 09:00")
    assert source(spring, "2019-04-29 09:00", PERSISTENCE) == utc("2019-04-22 09:00")


def test_a_weekend_is_last_weeks_same_day(spring):
    assert source(spring, "2019-04-20 11:00") == utc("2019-04-13 11:00")


def test_local_wall_clock_across_the_clock_change(spring):
    # Monday 1 April 2019 10:00 BST is 09:00 UTC; a week before, 10:00 GMT is 10:00 UTC
    assert source(spring, "2019-04-01 10:00") == pd.Timestamp("2019-03-25 10:00", tz="UTC")


def test_a_missing_reading_falls_back_to_an_older_week_of_the_same_type():
    frame = hours("2019-02-01", "2019-05-20")
    gone = frame["ts"] == utc("2019-04-16 10:00")
    frame.loc[gone, "kwh"] = np.nan
    out = build_features(frame, **LONDON)
    assert source(out, "2019-04-23 10:00") == utc("2019-04-09 10:00")


def test_closure_days_are_off_weekdays(winter):
    # Tuesday 31 Dec: the Tuesday before (Christmas Eve) is also a closure day
    assert source(winter, "2019-12-31 14:00") == utc("2019-12-24 14:00")
    # Friday 27 Dec, not a public holiday: no off Friday 1-4 weeks back, so the Sunday before
    assert source(winter, "2019-12-27 14:00") == utc("2019-12-22 14:00")
    # Thursday 2 Jan, a workday: last Thursday (Boxing Day) was off, the one before was not
    assert source(winter, "2020-01-02 14:00") == utc("2019-12-19 14:00")


def test_without_closure_periods_only_public_holidays_are_off():
    out = build_features(hours("2019-11-01", "2020-01-20"), **LONDON, closure_periods=())
    assert source(out, "2019-12-27 14:00") == utc("2019-12-20 14:00")
    assert source(out, "2019-12-26 14:00") == utc("2019-12-22 14:00")  # Boxing Day stays off


def test_day_types_of_a_christmas_week():
    wall = pd.date_range("2019-12-21", "2019-12-28", freq="D")
    types = day_types(wall, holiday_dates("GB", "ENG", [2019]),
                      parse_closure_periods(["12-24..01-01"]))
    assert types.tolist() == [WEEKEND, WEEKEND, WORKDAY, OFF_WEEKDAY, OFF_WEEKDAY, OFF_WEEKDAY,
                              OFF_WEEKDAY, WEEKEND]


def test_closure_periods_parse_and_wrap_over_new_year():
    period = ClosurePeriod.parse(" 12-24 .. 01-01 ")
    assert str(period) == "12-24..01-01"
    inside = period.contains(np.array([12, 12, 1, 1]), np.array([23, 24, 1, 2]))
    assert inside.tolist() == [False, True, True, False]
    assert ClosurePeriod.parse("07-20..08-10").contains(np.array([8]), np.array([1])).all()
    for bad in ("12-24", "13-01..01-01", "02-30..03-01", "Dec 24..Jan 1"):
        with pytest.raises(ClosurePeriodError):
            ClosurePeriod.parse(bad)


def test_hours_unlike_last_week_are_holidays_closures_and_the_days_after_them():
    days = pd.date_range("2019-04-15", "2019-05-01", freq="D", tz="Europe/London")
    unlike = unlike_last_week(days + pd.Timedelta(hours=12), holiday_dates("GB", "ENG", [2019]),
                              parse_closure_periods(["12-24..01-01"]))
    marked = {d.strftime("%a %d") for d, flag in zip(days, unlike) if flag}
    # Good Friday and Easter Monday (off weekdays), then the Friday and Monday a week later
    # (workdays whose day last week was off)
    assert marked == {"Fri 19", "Mon 22", "Fri 26", "Mon 29"}


def test_the_off_day_flag_counts_closure_weekdays_as_the_day_types_do():
    # 2019-12-16 .. 2020-01-13 in London, every day at 14:00 local
    frame = build_features(hours("2019-12-01", "2020-01-20"), **LONDON, feature_set="year")
    assert "is_off_day" in frame.columns and "is_holiday_or_weekend" not in frame.columns
    paper = build_features(hours("2019-12-01", "2020-01-20"), **LONDON, feature_set="paper")
    days = pd.date_range("2019-12-16 14:00", "2020-01-12 14:00", freq="D")
    off = frame.set_index("ts")["is_off_day"]
    public = paper.set_index("ts")["is_holiday_or_weekend"]
    flags = {day.date(): (off[utc(str(day))], public[utc(str(day))]) for day in days}
    # a closure weekday that is no public holiday: off for the deployed sets, not the paper's
    for day in ("2019-12-24", "2019-12-27", "2019-12-30", "2019-12-31"):
        assert flags[pd.Timestamp(day).date()] == (1.0, 0.0), day
    # public holidays and weekends are off in both; workdays in neither
    for day in ("2019-12-25", "2019-12-26", "2020-01-01", "2019-12-21", "2020-01-05"):
        assert flags[pd.Timestamp(day).date()] == (1.0, 1.0), day
    for day in ("2019-12-20", "2020-01-02", "2020-01-06"):
        assert flags[pd.Timestamp(day).date()] == (0.0, 0.0), day
    # without closure periods the flag is the paper's
    plain = build_features(hours("2019-12-01", "2020-01-20"), **LONDON, feature_set="year",
                           closure_periods=())
    assert (plain["is_off_day"].to_numpy() == paper["is_holiday_or_weekend"].to_numpy()).all()


def test_day_types_agree_with_pandas_calendar_on_any_day_of_any_year():
    """Computed on the days as numbers: the weekday, month and day pandas' calendar gives, for
    hours before and after 1970, leap days and the turn of the year included."""
    rng = np.random.default_rng(11)
    seconds = rng.integers(pd.Timestamp("1950-01-01").value // 10**9,
                           pd.Timestamp("2050-01-01").value // 10**9, 50_000)
    wall = pd.DatetimeIndex(pd.to_datetime(seconds, unit="s")).append(pd.DatetimeIndex(
        ["2024-02-29 23:00", "2023-12-31 23:59", "2024-01-01 00:00", "1969-12-31 12:00"]))
    holidays = frozenset(np.datetime64(day, "D") for day in
                         pd.date_range("1950-01-01", "2050-01-01", freq="11D").to_numpy())
    closures = parse_closure_periods(["12-24..01-01", "02-29..03-02"])
    month, day = wall.month.to_numpy(), wall.day.to_numpy()
    off = np.isin(wall.normalize().to_numpy().astype("datetime64[D]"),
                  np.array(sorted(holidays), dtype="datetime64[D]"))
    for period in closures:
        off |= period.contains(month, day)
    expected = np.where(wall.day_of_week.to_numpy() >= 5, WEEKEND,
                        np.where(off, OFF_WEEKDAY, WORKDAY))
    np.testing.assert_array_equal(day_types(wall, holidays, closures), expected)
    assert set(np.unique(expected)) == {WORKDAY, WEEKEND, OFF_WEEKDAY}
