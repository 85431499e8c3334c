from datetime import date

import pytest

from tasks.week_selection import EmptySelectionError, check_mondays, mondays_between
from tasks.windows import NotALocalMondayError


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
