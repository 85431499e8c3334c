"""Which buildings a run covers, and the week a weekly run forecasts."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from pathlib import Path

import duckdb
import pandas as pd

from tasks.errors import EmptySelectionError, UnknownBuildingError, UnknownSiteError
from tasks.protocol.weeks import local_midnight_utc, resolve_timezone, week_of_reference
from tasks.warehouse.connection import connect, has_table
from tasks.warehouse.hours import load_buildings_info, week_inputs


def has_buildings(warehouse: str | Path) -> bool:
    """Whether the warehouse file exists and holds at least one building."""
    if not Path(warehouse).exists():
        return False
    with connect(warehouse, read_only=True) as con:
        return (has_table(con, "buildings")
                and con.execute("SELECT count(*) FROM buildings").fetchone()[0] > 0)


def refuse_unknown_ids(con: duckdb.DuckDBPyConnection, path: str, column: str,
                       ids: Sequence[str]) -> None:
    """Refuse the file ``path``'s building (or site) ``ids`` that no stored building has in
    ``column`` (``building_id`` or ``site_id``), naming them and the fix."""
    if column not in ("building_id", "site_id"):
        raise ValueError(f"not a column of buildings to look ids up in: {column!r}")
    known = {row[0] for row in con.execute(
        f"SELECT DISTINCT {column} FROM buildings WHERE {column} IN (SELECT unnest(?::VARCHAR[]))",
        [list(ids)]).fetchall()}
    unknown = [i for i in ids if i not in known]
    if unknown and column == "site_id":
        raise UnknownSiteError(
            f"{path}: {len(unknown)} site id(s) that no building in the warehouse uses: "
            f"{shown_ids(unknown)}; fix the site ids, or ingest the buildings of those sites "
            "first (wadiro ingest buildings FILE)")
    if unknown:
        raise UnknownBuildingError(
            f"{path}: {len(unknown)} building id(s) not in the buildings table: "
            f"{shown_ids(unknown)}; ingest them first (wadiro ingest buildings FILE)")


def shown_ids(ids: Sequence[str], limit: int = 10) -> str:
    """``'a', 'b' and 3 more``: ids for a one-line message."""
    more = f" and {len(ids) - limit} more" if len(ids) > limit else ""
    return ", ".join(repr(i) for i in ids[:limit]) + more


def fleet_building_ids(
    con: duckdb.DuckDBPyConnection, buildings: Sequence[str] | None,
) -> list[str]:
    """The given ids (checked to exist) or, by default, every building in the warehouse."""
    if buildings is not None:
        if not buildings:
            raise EmptySelectionError("an empty list of buildings was given; give none for all")
        return list(load_buildings_info(con, buildings))
    ids = [r[0] for r in con.execute("SELECT building_id FROM buildings ORDER BY 1").fetchall()]
    if not ids:
        raise EmptySelectionError("the warehouse has no buildings; run `wadiro ingest` first")
    return ids


def fleet_timezone(con: duckdb.DuckDBPyConnection, building_ids: Sequence[str]) -> str:
    """The time zone most of ``building_ids`` share (ties: the first by name): the zone a run's
    one target week is chosen in."""
    return con.execute(
        "SELECT timezone FROM buildings WHERE building_id IN (SELECT unnest(?::VARCHAR[])) "
        "GROUP BY timezone ORDER BY count(*) DESC, timezone LIMIT 1", [list(building_ids)]
    ).fetchone()[0]


@dataclass(frozen=True)
class ChosenWeek:
    """The weekly run's target week and why it is that one (for the run's log); ``complete``
    is False when the stored inputs already show that it cannot be forecast whole (weather for
    too few of its hours, or no reading in the four weeks before it)."""

    week: date
    why: str
    complete: bool = True


HISTORY_STALE_AFTER = timedelta(weeks=4)
"""A fleet whose latest reading is this long before the target week has no recent history:
the run says so before it starts (its windows record the gaps building by building)."""


def week_of_run(
    con: duckdb.DuckDBPyConnection, buildings: Sequence[str] | None, reference: datetime
) -> ChosenWeek:
    """The weekly run's target week, from its reference time, never from the data
    (:func:`~tasks.protocol.weeks.week_of_reference`, in the fleet's time zone; a naive
    ``reference`` is a wall-clock time there). ``why`` says what the stored inputs hold for it.
    """
    ids = fleet_building_ids(con, buildings)
    zone = fleet_timezone(con, ids)
    at = pd.Timestamp(reference)
    if at.tzinfo is None:  # a wall clock the clocks pass twice is its first (summer) time, one
        # they skip the hour after: either way the same day, so the same week
        at = at.tz_localize(resolve_timezone(zone), ambiguous=True, nonexistent="shift_forward")
    week = week_of_reference(at, zone)
    local = at.tz_convert(resolve_timezone(zone))
    rule = "a Monday" if local.date() == week else "the week of the first Monday after it"
    inputs = week_inputs(con, ids, week, zone)
    why = (f"the run's reference time {local:%Y-%m-%d %H:%M} {zone} ({rule}); weather stored for "
           f"{inputs.weather_hours} of its {inputs.hours} hours{inputs.blanks()}")
    start = local_midnight_utc(week, zone)
    if inputs.last_reading is None:
        return ChosenWeek(week, f"{why}; no reading before it", complete=False)
    last = pd.Timestamp(inputs.last_reading).tz_convert("UTC")
    gap = (start - last - pd.Timedelta(hours=1)) / pd.Timedelta(hours=1)
    if gap > 0:
        why += f"; the latest reading before it is {last:%Y-%m-%d %H:%M} UTC, {gap:g} hour(s) short"
    stale = start - last > HISTORY_STALE_AFTER
    if inputs.short:
        why += f"; {short_buildings(inputs.short, start)}"
    return ChosenWeek(week, why, complete=inputs.weather_suffices and not stale
                      and not inputs.short)


SHORT_SHOWN = 5
"""Buildings whose readings end short of the week that the run's log names (all are counted)."""


def short_buildings(short: dict[str, datetime | None], start: pd.Timestamp) -> str:
    """``2 building(s) end short of it: b1 (last reading 2024-04-21 21:00 UTC, 1 hour(s)
    short), b2 (no reading in the 4 weeks before it)``."""
    named = []
    for building_id, last in list(short.items())[:SHORT_SHOWN]:
        if last is None:
            named.append(f"{building_id} (no reading in the 4 weeks before it)")
            continue
        last = pd.Timestamp(last).tz_convert("UTC")
        gap = (start - last - pd.Timedelta(hours=1)) / pd.Timedelta(hours=1)
        named.append(f"{building_id} (last reading {last:%Y-%m-%d %H:%M} UTC, {gap:g} hour(s) "
                     "short)")
    more = f" and {len(short) - SHORT_SHOWN} more" if len(short) > SHORT_SHOWN else ""
    return f"{len(short)} building(s) end short of it: {', '.join(named)}{more}"
