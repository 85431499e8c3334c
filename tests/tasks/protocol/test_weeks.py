from datetime import date, datetime, timezone

import pandas as pd
import pytest

from tasks.errors import EmptySelectionError
from tasks.protocol.weeks import (
    InvalidTimezoneError,
    NotALocalMondayError,
    as_monday,
    check_mondays,
    local_midnight_utc,
    mondays_between,
    resolve_timezone,
    same_local_hour_weeks_before,
)

TZ = "Europe/London"
UTC = pd.Timestamp


def test_mondays_between_is_inclusive():
    assert mondays_between(date(2019, 3, 18), date(2019, 4, 1)) == [
        date(2019, 3, 18), date(2019, 3, 25), date(2019, 4, 1)]
    assert mondays_between("2019-03-18", "2019-03-18") == [date(2019, 3, 18)]


def test_week_range_errors():
    with pytest.raises(EmptySelectionError, match="before start"):
        mondays_between(date(2019, 4, 1), date(2019, 3, 18))
    with pytest.raises(NotALocalMondayError, match="Tuesday"):
        mondays_between(date(2019, 3, 19), date(2019, 4, 1))
    with pytest.raises(EmptySelectionError):
        check_mondays([])


def test_check_mondays_sorts_and_deduplicates():
    assert check_mondays(["2019-04-01", date(2019, 3, 25), "2019-04-01"]) == [
        date(2019, 3, 25), date(2019, 4, 1)]


@pytest.mark.parametrize(
    "week", [date(2019, 3, 26), "2019-03-31", datetime(2019, 3, 25, 0, tzinfo=timezone.utc),
             datetime(2019, 3, 25, 6), "not a date"],
)
def test_week_must_be_a_monday_date(week):
    with pytest.raises(NotALocalMondayError):
        as_monday(week)


def test_local_midnight_in_summer_and_winter():
    assert local_midnight_utc(date(2019, 7, 1), TZ) == UTC("2019-06-30 23:00Z")
    assert local_midnight_utc(date(2019, 1, 7), TZ) == UTC("2019-01-07 00:00Z")
    with pytest.raises(InvalidTimezoneError, match="Europe/Atlantis"):
        resolve_timezone("Europe/Atlantis")


def _local(*utc: str) -> pd.DatetimeIndex:
    return pd.DatetimeIndex([UTC(t) for t in utc]).tz_convert(TZ)


def test_same_local_hour_a_week_before_follows_the_wall_clock():
    # Hand-derived: Monday 28 Oct 2019 08:00 GMT is 08:00 UTC; the Monday before, 08:00 BST,
    # was 07:00 UTC -- 169 hours earlier, not 168.
    assert list(same_local_hour_weeks_before(_local("2019-10-28 08:00Z"), 1)) == [
        UTC("2019-10-21 07:00Z")]
    # Two weeks back from a summer hour after the spring change: 167 + 168 hours.
    assert list(same_local_hour_weeks_before(_local("2019-04-01 07:00Z"), 2)) == [
        UTC("2019-03-18 08:00Z")]
    # An ordinary week is 168 hours.
    assert list(same_local_hour_weeks_before(_local("2019-07-08 07:00Z"), 1)) == [
        UTC("2019-07-01 07:00Z")]


def test_same_local_hour_never_lands_in_the_same_local_week():
    # Sunday 27 Oct 2019 23:00 GMT, the last hour of a 169-hour week: a fixed 168 h lag would
    # read Monday 21 Oct 00:00 BST, the first hour of that same week.
    last_hour = _local("2019-10-27 23:00Z")
    assert list(same_local_hour_weeks_before(last_hour, 1)) == [UTC("2019-10-20 22:00Z")]
    # A wall-clock time skipped by the spring change moves forward to the next instant:
    # Sunday 31 Mar 2019 01:30 does not exist in London.
    after_gap = pd.DatetimeIndex([pd.Timestamp("2019-04-07 01:30", tz=TZ)])
    assert list(same_local_hour_weeks_before(after_gap, 1)) == [UTC("2019-03-31 01:00Z")]
