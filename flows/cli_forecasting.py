"""The forecasting commands, ``wadiro forecast`` and ``wadiro backfill``: an option per field of
the run's settings (:mod:`~flows.settings`) and of the forecast they hold."""

from __future__ import annotations

from datetime import date, datetime
from typing import Annotated

from cyclopts import Parameter

from flows import cli
from flows.settings import BackfillSettings, WeeklySettings


def forecast(
    *,
    week: Annotated[date | None, Parameter(
        help="Target week's local Monday (default: the week of --as-of).")
    ] = None,
    as_of: Annotated[datetime | None, Parameter(
        help="The run's reference time, for a run made later than it was due (default: now, or "
             "a deployment's scheduled time); the week forecast is that time's local Monday, or "
             "the first Monday after it. A time without an offset is the fleet's local time, "
             "e.g. '2024-10-28 06:00'.")
    ] = None,
    settings: Annotated[WeeklySettings, Parameter(name="*")] = WeeklySettings(),
) -> None:
    """``wadiro forecast`` (its help: :data:`~flows.cli.LAZY_HELP`)."""
    from flows.engine import run_flow
    from flows.forecast import weekly_forecast_flow

    with cli.run_report(settings.resolved().warehouse) as report:
        report.summary = run_flow(weekly_forecast_flow, week=week, as_of=as_of,
                                  settings=settings)


def backfill(
    *,
    start: Annotated[date, Parameter(help="First target week's local Monday.")],
    end: Annotated[date, Parameter(help="Last target week's local Monday (inclusive).")],
    settings: Annotated[BackfillSettings, Parameter(name="*")] = BackfillSettings(),
) -> None:
    """``wadiro backfill`` (its help: :data:`~flows.cli.LAZY_HELP`)."""
    from flows.engine import run_flow
    from flows.forecast import backfill_flow

    with cli.run_report(settings.resolved().warehouse) as report:
        report.summary = run_flow(backfill_flow, start=start, end=end, settings=settings)


