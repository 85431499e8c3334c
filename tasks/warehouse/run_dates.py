"""Target weeks a forecasting run can believe.

A target week far outside the range an operator could mean (``--week 9999-12-27``, a mistyped
year) is refused before anything is read or written, naming the range
(:func:`check_plausible_weeks`). The weekly run's week comes from its reference time
(:func:`~tasks.warehouse.selection.week_of_run`), never from the stored readings, so a reading
dated in the future (a meter clock or a file with a wrong year) cannot move it; such readings
are the data-quality report's to show (``future_readings``).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, date, datetime, timedelta

from tasks.errors import PipelineError

EARLIEST_WEEK = date(1970, 1, 5)
"""The first Monday of 1970: no earlier week is a plausible target."""

WEEKS_AHEAD = 53
"""How far after today a target week may start: a weekly forecast is for next week, a synthetic
or test fleet may reach a little further, nothing plausible reaches beyond a year."""

class ImplausibleWeekError(PipelineError, ValueError):
    """A target week outside the range a run accepts."""


def latest_plausible_week(today: date | None = None) -> date:
    """The last Monday a run accepts as a target week."""
    today = today or datetime.now(UTC).date()
    latest = today + timedelta(weeks=WEEKS_AHEAD)
    return latest - timedelta(days=latest.weekday())


def check_plausible_weeks(weeks: Iterable[date], today: date | None = None) -> None:
    """Refuse target weeks before :data:`EARLIEST_WEEK` or after :func:`latest_plausible_week`,
    naming the first such week and the range."""
    latest = latest_plausible_week(today)
    for week in weeks:
        if not EARLIEST_WEEK <= week <= latest:
            raise ImplausibleWeekError(
                f"target week {week.isoformat()} is outside the weeks a run forecasts, "
                f"{EARLIEST_WEEK.isoformat()} to {latest.isoformat()} (a year after today); "
                "check the year")
