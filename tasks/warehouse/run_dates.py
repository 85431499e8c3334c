"""Dates a forecasting run can believe: target weeks in a plausible range, readings not dated
after now.

A target week far outside the range an operator could mean (``--week 9999-12-27``, a mistyped
year) is refused before anything is read or written, naming the range
(:func:`check_plausible_weeks`).

A reading dated after now (a meter clock or a file with a wrong year) would otherwise make "the
week after the latest reading" a week in 2099: no weather is stored for it, so every weekly run
falls back to forecasting last week again; a reading dated 9999 makes that week's end overflow
the calendar. Such readings stay stored -- they are the operator's to correct -- and
:func:`readings_until` shows the week choice only the readings up to a cutoff (now plus
:data:`FUTURE_MARGIN`): inside the block, on that connection, ``meter_readings`` is a temporary
view of the readings up to it, shadowing the table (DuckDB looks up temporary objects first), so
the selection's own queries need no change. The run says in a warning what it left out
(:class:`FutureReadings`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

import duckdb

from tasks.errors import PipelineError

EARLIEST_WEEK = date(1970, 1, 5)
"""The first Monday of 1970: no earlier week is a plausible target."""

WEEKS_AHEAD = 53
"""How far after today a target week may start: a weekly forecast is for next week, a synthetic
or test fleet may reach a little further, nothing plausible reaches beyond a year."""

FUTURE_MARGIN = timedelta(days=1)
"""Readings dated up to this long after now still count as now's (clocks and time zones set
slightly wrong); later ones are ignored when choosing the week."""


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


def readings_cutoff(now: datetime | None = None) -> datetime:
    """The latest reading time the week choice believes: now plus :data:`FUTURE_MARGIN`, UTC."""
    return (now or datetime.now(UTC)) + FUTURE_MARGIN


@dataclass(frozen=True)
class FutureReadings:
    """Readings of the selected buildings dated after the cutoff."""

    readings: int
    buildings: int
    latest: datetime
    cutoff: datetime

    def warning(self) -> str:
        return (f"{self.readings:,} reading(s) of {self.buildings} building(s) are dated in the "
                f"future (after {self.cutoff:%Y-%m-%d %H:%M} UTC, a day from now; the latest "
                f"{self.latest:%Y-%m-%d %H:%M} UTC): the choice of the week ignored them; "
                "correct or remove them (`SELECT building_id, ts, kwh FROM meter_readings WHERE "
                "ts > now()`)")


def future_readings(con: duckdb.DuckDBPyConnection, building_ids: Sequence[str],
                    cutoff: datetime) -> FutureReadings | None:
    """The readings of ``building_ids`` dated after ``cutoff``, or ``None`` when there are none."""
    count, buildings, latest = con.execute(
        "SELECT count(*), count(DISTINCT building_id), max(ts) FROM meter_readings "
        "WHERE building_id IN (SELECT unnest(?::VARCHAR[])) AND ts > ?",
        [list(building_ids), cutoff]).fetchone()
    return FutureReadings(count, buildings, latest, cutoff) if count else None


@contextmanager
def readings_until(con: duckdb.DuckDBPyConnection, cutoff: datetime) -> Iterator[None]:
    """While the block runs, ``meter_readings`` on ``con`` holds only the readings up to
    ``cutoff`` (a temporary view over the table; works on a read-only connection)."""
    database = con.execute("SELECT current_database()").fetchone()[0]
    quoted = '"' + database.replace('"', '""') + '"'
    con.execute(f"CREATE OR REPLACE TEMP VIEW meter_readings AS SELECT * FROM "
                f"{quoted}.main.meter_readings WHERE ts <= TIMESTAMPTZ '{cutoff.isoformat()}'")
    try:
        yield
    finally:
        con.execute("DROP VIEW IF EXISTS temp.main.meter_readings")


__all__ = [
    "EARLIEST_WEEK",
    "FUTURE_MARGIN",
    "WEEKS_AHEAD",
    "FutureReadings",
    "ImplausibleWeekError",
    "check_plausible_weeks",
    "future_readings",
    "latest_plausible_week",
    "readings_cutoff",
    "readings_until",
]
