"""The data quality of each building's meter readings, worst first (``wadiro quality``).

The columns are those of the ``building_data_quality`` view
(:func:`~tasks.warehouse.schema.data_quality_sql` defines each). The query is run
from its SQL rather than through the view, so a warehouse made before the view existed reads
the same on a read-only connection, and a selection of buildings reads only their readings.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import duckdb
import pandas as pd

from tasks.warehouse.schema import _NOT_FUTURE, QUALITY_WINDOW_HOURS, data_quality_sql
from tasks.warehouse.selection import fleet_building_ids

WORST_FIRST = ("missing_share_12w DESC NULLS LAST, hours_since_last_reading DESC NULLS FIRST, "
               "flat_runs_24h DESC, negative_readings DESC, spike_readings DESC, "
               "longest_gap_hours DESC NULLS FIRST, longest_flat_hours DESC, building_id")
"""The order of the table: the most recent hours missing first (a building without readings
before one that stopped reporting), then flat lines, negative readings, spikes and long gaps."""


TIME_COLUMNS = ("first_reading", "last_reading", "longest_gap_start")
"""Columns holding an hour (UTC)."""
COUNT_COLUMNS = ("readings", "future_readings", "missing_hours", "hours_since_last_reading",
                 "longest_gap_hours", "longest_flat_hours", "flat_runs_24h", "zero_readings",
                 "longest_zero_hours", "negative_readings", "longest_negative_hours",
                 "spike_readings")
"""Columns holding a count of hours or runs (NULL where undefined, see the view)."""
_CELL_FORMATS = {**dict.fromkeys(TIME_COLUMNS, "{:%Y-%m-%d %H:%M}".format),
                 **dict.fromkeys(COUNT_COLUMNS, lambda v: str(int(v))),
                 "missing_share_12w": "{:.3f}".format, "largest_reading": "{:g}".format}


@dataclass(frozen=True)
class DataQuality:
    """The table, worst first, and the recent period its ``missing_share_12w`` covers."""

    table: pd.DataFrame
    period_start: pd.Timestamp | None
    """First hour (UTC) of the recent period; ``None`` when the warehouse holds no reading."""
    period_end: pd.Timestamp | None
    """Last hour of the recent period: the warehouse's latest reading (the reference hour)."""

    @property
    def period_hours(self) -> int:
        """Hours in the recent period (:data:`QUALITY_WINDOW_HOURS`, or fewer in a warehouse
        holding less); 0 without readings."""
        if self.period_start is None or self.period_end is None:
            return 0
        return int((self.period_end - self.period_start) / pd.Timedelta(hours=1)) + 1

    def cells(self, null: str = "-", limit: int | None = None) -> pd.DataFrame:
        """The table (its ``limit`` first rows) as text cells: hours to the minute, counts as
        integers, the share to three decimals, kWh as written, ``null`` for NULL."""
        table = self.table if limit is None else self.table.head(limit)
        shown = table.astype(object)
        for column, form in _CELL_FORMATS.items():
            shown[column] = [null if pd.isna(v) else form(v) for v in table[column]]
        return shown

    def text(self, limit: int | None = None) -> str:
        """The table (its ``limit`` first rows) as aligned text, ``-`` for NULL."""
        return self.cells("-", limit).to_string(index=False)

    def period_line(self) -> str:
        """One line saying which hours ``missing_share_12w`` covers."""
        if self.period_start is None or self.period_end is None:
            return "no meter readings in the warehouse yet"
        short = "" if self.period_hours == QUALITY_WINDOW_HOURS else ", all the warehouse holds"
        return (f"missing_share_12w covers the {self.period_hours:,} hours from "
                f"{self.period_start:%Y-%m-%d %H:%M} to {self.period_end:%Y-%m-%d %H:%M} UTC"
                f"{short} (ending at the warehouse's latest reading)")


def data_quality(con: duckdb.DuckDBPyConnection, buildings: Sequence[str] | None = None, *,
                 require_buildings: bool = False) -> DataQuality:
    """Every building's data quality, or that of ``buildings`` (an empty list or an unknown id
    is refused), worst first (:data:`WORST_FIRST`). The reference hour is the whole
    warehouse's latest reading either way. With ``require_buildings`` a warehouse without
    buildings is refused too (:class:`~tasks.errors.EmptySelectionError`)."""
    if buildings is not None:
        buildings = fleet_building_ids(con, buildings)  # refuses [] and unknown ids
    elif require_buildings:
        fleet_building_ids(con, None)  # refuses a warehouse without buildings
    selected = buildings is not None
    con.execute("SET enable_progress_bar = false")  # a long scan must not draw on stdout
    table = con.execute(
        f"SELECT * FROM ({data_quality_sql(selected=selected)}) ORDER BY {WORST_FIRST}",
        [list(buildings)] if selected else [],
    ).df()
    start, end = con.execute(
        f"SELECT greatest(min(ts), max(ts) - INTERVAL {QUALITY_WINDOW_HOURS - 1} HOUR), max(ts) "
        f"FROM meter_readings WHERE kwh IS NOT NULL AND {_NOT_FUTURE}").fetchone()
    return DataQuality(table,
                       pd.Timestamp(start).tz_convert("UTC") if start is not None else None,
                       pd.Timestamp(end).tz_convert("UTC") if end is not None else None)
