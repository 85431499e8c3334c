"""Which buildings a run covers, and the latest week their stored data lets it forecast."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from pathlib import Path

import duckdb
import pandas as pd

from tasks.errors import EmptySelectionError
from tasks.protocol.weeks import latest_complete_week
from tasks.warehouse.connection import connect
from tasks.warehouse.hours import load_buildings_info, next_week_inputs


def has_buildings(warehouse: str | Path) -> bool:
    """Whether the warehouse file exists and holds at least one building."""
    if not Path(warehouse).exists():
        return False
    with connect(warehouse, read_only=True) as con:
        known = con.execute(
            "SELECT count(*) FROM information_schema.tables WHERE table_name = 'buildings'"
        ).fetchone()[0]
        return bool(known) and con.execute("SELECT count(*) FROM buildings").fetchone()[0] > 0


def ids_not_in_buildings(
    con: duckdb.DuckDBPyConnection, column: str, ids: Sequence[str],
) -> list[str]:
    """The ``ids`` (in their order) that no ``buildings`` row has in ``column``
    (``building_id`` or ``site_id``)."""
    if column not in ("building_id", "site_id"):
        raise ValueError(f"not a column of buildings to look ids up in: {column!r}")
    known = {row[0] for row in con.execute(
        f"SELECT DISTINCT {column} FROM buildings WHERE {column} IN (SELECT unnest(?::VARCHAR[]))",
        [list(ids)]).fetchall()}
    return [i for i in ids if i not in known]


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


def default_target_week(con: duckdb.DuckDBPyConnection, buildings: Sequence[str] | None) -> date:
    """The latest week that can be forecast: its 12-week history has ended and its weather is
    stored (observed, or a forecast a user has loaded).

    Data ends are taken over the selected buildings and their sites; the week is a Monday in
    the first building's time zone.
    """
    ids = fleet_building_ids(con, buildings)
    row = con.execute(
        """
        SELECT any_value(b.timezone),
               (SELECT max(ts) FROM meter_readings
                 WHERE building_id IN (SELECT unnest(?::VARCHAR[])) AND kwh IS NOT NULL),
               (SELECT max(w.ts) FROM weather w
                 WHERE w.site_id IN (SELECT site_id FROM buildings
                                     WHERE building_id IN (SELECT unnest(?::VARCHAR[])))
                   AND w.temperature_c IS NOT NULL)
        FROM buildings b WHERE b.building_id = ?
        """,
        [ids, ids, ids[0]],
    ).fetchone()
    timezone, meter_end, weather_end = row
    if meter_end is None:
        raise EmptySelectionError("no meter readings for the selected buildings")
    if weather_end is None:
        raise EmptySelectionError("no weather for the selected buildings' sites")
    one_hour = pd.Timedelta(hours=1)
    by_history = latest_complete_week(pd.Timestamp(meter_end) + one_hour, timezone,
                                      include_test_week=False)
    by_weather = latest_complete_week(pd.Timestamp(weather_end) + one_hour, timezone,
                                      include_test_week=True)
    return min(by_history, by_weather)


@dataclass(frozen=True)
class ChosenWeek:
    """The weekly run's default target week and why it is that one (for the run's log);
    ``complete`` is False when the week after the latest readings lacked weather."""

    week: date
    why: str
    complete: bool = True


def choose_week(con: duckdb.DuckDBPyConnection, buildings: Sequence[str] | None) -> ChosenWeek:
    """The default target week of the weekly run, from what is stored.

    The week after the latest reading (its history has ended; its own readings are not needed
    to forecast it) when its weather, observed or forecast, is stored for enough of its hours
    that the window's gap rule fills the rest (at most half the week missing, at the best
    covered of the selected sites). Otherwise the latest week whose history has ended and
    whose stored weather reaches its end (the rule of a warehouse whose readings and weather
    end together, e.g. an archive), and ``complete`` is False.
    """
    ids = fleet_building_ids(con, buildings)
    inputs = next_week_inputs(con, ids)
    if inputs is not None and inputs.weather_suffices:
        return ChosenWeek(inputs.next_week, (
            f"the week after the latest readings; weather stored for {inputs.weather_hours} "
            f"of its {inputs.hours} hours{inputs.blanks()}"))
    week = default_target_week(con, buildings)
    assert inputs is not None  # default_target_week raises without readings
    short = (f"the week after the latest readings, {inputs.next_week}, has weather for only "
             f"{inputs.weather_hours} of its {inputs.hours} hours{inputs.blanks()}")
    if week == inputs.next_week:  # stored weather reaches its end, with long gaps
        return ChosenWeek(week, f"{short}: its building-weeks short of weather get status "
                          "no_weather", complete=False)
    return ChosenWeek(week, (
        f"{short}, so the latest week whose weather is stored is forecast instead; to forecast "
        f"{inputs.next_week}, ingest its weather (`wadiro ingest weather FILE --kind forecast`) "
        "and run again"), complete=False)
