"""Week arithmetic in a building's local time: target weeks, local midnights, "a week before".

A target week is a LOCAL week, Monday 00:00 to the next Monday 00:00 in the building's time
zone, so it lasts 167, 168 or 169 hours. "The same hour N weeks before" is defined once here,
on the local wall clock (:func:`same_local_hour_weeks_before`): the lag features and the
seasonal-naive forecast both use it, so a building's Monday 08:00 is compared with the Monday
08:00 before it whatever the clock changes in between.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import numpy as np
import pandas as pd

from tasks.errors import EmptySelectionError, PipelineError

WeekLike = date | datetime | str
"""A target week: a Monday as a date, a naive midnight datetime or an ISO date string."""


class NotALocalMondayError(PipelineError, ValueError):
    """A target week that is not given as a Monday date."""


class InvalidTimezoneError(PipelineError, ValueError):
    """A time zone name that the IANA database does not know."""


def resolve_timezone(timezone: str) -> ZoneInfo:
    """The IANA zone called ``timezone``, or :class:`InvalidTimezoneError`: the one check of a
    time zone name, for the protocol and for ingest (``timestamps.TimeZoneName``)."""
    try:
        return ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError, TypeError) as exc:
        raise InvalidTimezoneError(
            f"unknown time zone {timezone!r} (not an IANA zone, e.g. Europe/London)"
        ) from exc


def _as_date(week: WeekLike) -> date:
    if isinstance(week, str):
        try:
            return date.fromisoformat(week)
        except ValueError as exc:
            raise NotALocalMondayError(f"target week {week!r} is not an ISO date") from exc
    if isinstance(week, datetime):
        if week.tzinfo is not None or week.time() != datetime.min.time():
            raise NotALocalMondayError(
                f"target week {week!r} must be a local calendar date, not an instant"
            )
        return week.date()
    if isinstance(week, date):
        return week
    raise NotALocalMondayError(f"target week {week!r} is not a date")


def as_monday(week: WeekLike) -> date:
    """``week`` as a date, checked to be a Monday."""
    day = _as_date(week)
    if day.weekday() != 0:
        raise NotALocalMondayError(
            f"target week {day.isoformat()} is a {day.strftime('%A')}, not a Monday"
        )
    return day


def check_mondays(weeks: Sequence[WeekLike]) -> list[date]:
    """The target weeks as dates, each checked to be a Monday; duplicates removed, sorted."""
    if not weeks:
        raise EmptySelectionError("no target week given")
    return sorted({as_monday(w) for w in weeks})


def mondays_between(start: WeekLike, end: WeekLike) -> list[date]:
    """Every Monday from ``start`` to ``end``, both inclusive (both must be Mondays)."""
    first, last = as_monday(start), as_monday(end)
    if last < first:
        raise EmptySelectionError(f"empty week range: end {last} is before start {first}")
    return [first + timedelta(weeks=k) for k in range((last - first).days // 7 + 1)]


def local_midnight_utc(day: date, timezone: str) -> pd.Timestamp:
    """The UTC instant of local 00:00 on ``day``.

    Where a zone skips midnight the next existing instant is taken; where midnight repeats,
    its first occurrence.
    """
    zone = resolve_timezone(timezone)
    local = pd.Timestamp(day).tz_localize(zone, ambiguous=True, nonexistent="shift_forward")
    return local.tz_convert("UTC")


def same_local_hour_weeks_before(local: pd.DatetimeIndex, weeks: int) -> pd.DatetimeIndex:
    """The UTC instants of the same local wall-clock hour ``weeks`` weeks before each of
    ``local`` (time-zone-aware, in the building's zone).

    A local week lasts 167, 168 or 169 hours, so a fixed UTC lag of 168 h would, in an autumn
    week, let its last hour read the first hour of the same week -- not known when a
    week-ahead forecast is issued. The wall-clock lag always lands in an earlier local week. A
    wall-clock time that does not exist (spring gap) moves forward to the next instant; one
    that exists twice (autumn repeat) takes its first, summer-time, occurrence.
    """
    return wall_clock_to_utc(local.tz_localize(None) - pd.Timedelta(weeks=weeks), local.tz)


def wall_clock_to_utc(wall: pd.DatetimeIndex, zone: object) -> pd.DatetimeIndex:
    """Local wall-clock times in ``zone`` as UTC instants: a skipped time moves forward, a
    repeated one takes its first (summer-time) occurrence."""
    return wall.tz_localize(
        zone, ambiguous=np.ones(len(wall), dtype=bool), nonexistent="shift_forward"
    ).tz_convert("UTC")


def _aware_utc(value: datetime | pd.Timestamp, name: str) -> pd.Timestamp:
    ts = pd.Timestamp(value)
    if ts.tzinfo is None:
        raise ValueError(f"{name}={value!r} has no time zone; give an aware instant")
    return ts.tz_convert("UTC")


def week_of_reference(reference: datetime | pd.Timestamp, timezone: str) -> date:
    """The target week of a weekly run whose reference time is ``reference`` (an aware instant:
    its scheduled time, or the ``--as-of`` of a run made later).

    The rule of the Monday routine: the week of the reference time's local date if that date is
    a Monday, else the week of the first Monday after it. A run at Monday 06:00 forecasts the
    week that began at 00:00 that day; a run on Sunday evening, the week starting the next day.
    The data never moves the week: a meter file one hour short is a gap in its history.
    """
    local_day = _aware_utc(reference, "reference").tz_convert(resolve_timezone(timezone)).date()
    return local_day + timedelta(days=(7 - local_day.weekday()) % 7)
