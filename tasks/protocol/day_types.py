"""Day types and the holiday-aware persistence forecast.

Last week's load is a poor forecast of a day unlike last week's same day: a bank holiday, the
closure between Christmas and New Year, or the Monday after an Easter Monday. Such days occur
once or never in a 12-week window, so no model can learn them from the window; the calendar
can carry them instead. Every local day has a type:

* ``WORKDAY``: Monday to Friday, not a public holiday and not in a closure period;
* ``WEEKEND``: Saturday or Sunday;
* ``OFF_WEEKDAY``: a Monday-to-Friday public holiday (the building's ``holidays`` calendar) or a
  day of a closure period (annual ``MM-DD..MM-DD`` ranges, the run's ``closure_periods``).

An hour is *unlike last week* (:func:`unlike_last_week`) when its day type differs from that of
the same local hour a week earlier, or it is an off weekday: a bank holiday, a closure day, the
workday after a holiday. A correction learned from ordinary weeks has not seen such hours.

The holiday-aware persistence forecast of an hour (:func:`day_type_persistence`) is the load at
the same local hour one, two, three or four weeks earlier, the first of those days that has the
hour's own day type and a reading. An off weekday with no off weekday among them takes the same
local hour of the Sunday just before its week (a closed building on a holiday looks like a
Sunday); a workday with no workday among them, last week's persistence. Everything it reads lies
before the hour's own local week, so it is known when that week's forecast is issued.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import pandas as pd

from tasks.errors import PipelineError
from tasks.protocol.weeks import wall_clock_to_utc

WORKDAY, WEEKEND, OFF_WEEKDAY = 0, 1, 2

DEFAULT_CLOSURE_PERIODS: tuple[str, ...] = ("12-24..01-01",)
"""Christmas Eve to New Year's Day: most non-residential buildings in Europe run as on a
Sunday then, although only some of those days are public holidays."""

_PERIOD = re.compile(r"^\s*(\d{2})-(\d{2})\s*\.\.\s*(\d{2})-(\d{2})\s*$")


class ClosurePeriodError(PipelineError, ValueError):
    """A closure period that is not an ``MM-DD..MM-DD`` range of real calendar days."""


@dataclass(frozen=True)
class ClosurePeriod:
    """An annual range of days, both ends included; it may wrap over New Year."""

    start: tuple[int, int]
    end: tuple[int, int]

    @classmethod
    def parse(cls, text: str) -> ClosurePeriod:
        match = _PERIOD.match(str(text))
        if match is None:
            raise ClosurePeriodError(
                f"closure period {text!r}: expected MM-DD..MM-DD, e.g. 12-24..01-01")
        month_a, day_a, month_b, day_b = (int(g) for g in match.groups())
        for month, day in ((month_a, day_a), (month_b, day_b)):
            try:
                pd.Timestamp(year=2000, month=month, day=day)  # a leap year: 02-29 exists
            except ValueError:
                raise ClosurePeriodError(
                    f"closure period {text!r}: {month:02d}-{day:02d} is not a calendar day"
                ) from None
        return cls((month_a, day_a), (month_b, day_b))

    def __str__(self) -> str:
        return f"{self.start[0]:02d}-{self.start[1]:02d}..{self.end[0]:02d}-{self.end[1]:02d}"

    def contains(self, month: np.ndarray, day: np.ndarray) -> np.ndarray:
        """Whether each (month, day) lies in the period."""
        key = month * 100 + day
        first, last = self.start[0] * 100 + self.start[1], self.end[0] * 100 + self.end[1]
        if first <= last:
            return (key >= first) & (key <= last)
        return (key >= first) | (key <= last)


def parse_closure_periods(periods: Iterable[str]) -> tuple[ClosurePeriod, ...]:
    """``["12-24..01-01"]`` -> the periods, each checked."""
    if isinstance(periods, str):
        raise ClosurePeriodError("closure periods must be a sequence of MM-DD..MM-DD ranges")
    return tuple(ClosurePeriod.parse(text) for text in periods)


def day_types(wall: pd.DatetimeIndex, holidays: frozenset[np.datetime64],
              closures: Sequence[ClosurePeriod]) -> np.ndarray:
    """The day type of each local wall-clock time (naive), as :data:`WORKDAY`,
    :data:`WEEKEND` or :data:`OFF_WEEKDAY`.

    Computed on the days as numbers (a feature build asks for the types of tens of thousands
    of hours, several times over; pandas' calendar fields cost several times more)."""
    days = wall.to_numpy().astype("datetime64[D]")
    off = np.isin(days, _sorted_days(holidays))
    if closures:
        months = days.astype("datetime64[M]")
        month = months.astype(np.int64) % 12 + 1
        day = (days - months).astype(np.int64) + 1
        for period in closures:
            off |= period.contains(month, day)
    types = np.where(off, OFF_WEEKDAY, WORKDAY)
    weekday = (days.astype(np.int64) + 3) % 7  # 1970-01-01 was a Thursday; Monday is 0
    return np.where(weekday >= 5, WEEKEND, types)


@lru_cache(maxsize=64)
def _sorted_days(holidays: frozenset[np.datetime64]) -> np.ndarray:
    """A holiday calendar's dates as one sorted array (a building's calendar, asked for by
    every feature build)."""
    return np.array(sorted(holidays), dtype="datetime64[D]")


def unlike_last_week(local: pd.DatetimeIndex, holidays: frozenset[np.datetime64],
                     closures: Sequence[ClosurePeriod]) -> np.ndarray:
    """Whether each hour of ``local`` is unlike the same local hour a week earlier (module
    docstring)."""
    wall = local.tz_localize(None)
    own = day_types(wall, holidays, closures)
    before = day_types(wall - pd.Timedelta(weeks=1), holidays, closures)
    return (own != before) | (own == OFF_WEEKDAY)


def day_type_persistence(load: pd.Series, local: pd.DatetimeIndex,
                         holidays: frozenset[np.datetime64],
                         closures: Sequence[ClosurePeriod],
                         fallback: np.ndarray, weeks: Sequence[int] = (1, 2, 3, 4),
                         earlier_loads: Callable[[int], np.ndarray] | None = None) -> np.ndarray:
    """The holiday-aware persistence forecast of each hour of ``local`` (module docstring).

    ``load`` is indexed by UTC hour; ``fallback`` is last week's persistence of each hour,
    taken where no day of the same type is found (and by off weekdays without a Sunday
    reading). ``earlier_loads(k)``, when given, is the load at the same local hour ``k`` weeks
    back that a caller has already read (a feature build's load lags), else it is read here.
    """
    wall = local.tz_localize(None)
    own = day_types(wall, holidays, closures)
    out = np.full(len(wall), np.nan)
    found = np.zeros(len(wall), dtype=bool)
    for k in weeks:
        earlier = wall - pd.Timedelta(weeks=k)
        value = (earlier_loads(k) if earlier_loads is not None else
                 load.reindex(wall_clock_to_utc(earlier, local.tz).as_unit("us")).to_numpy())
        take = ~found & (day_types(earlier, holidays, closures) == own) & np.isfinite(value)
        out[take], found = value[take], found | take
    sunday = (wall.normalize() - pd.to_timedelta(wall.day_of_week + 1, unit="D")
              + (wall - wall.normalize()))
    value = load.reindex(wall_clock_to_utc(sunday, local.tz).as_unit("us")).to_numpy()
    take = ~found & (own == OFF_WEEKDAY) & np.isfinite(value)
    out[take], found = value[take], found | take
    return np.where(found, out, fallback)
