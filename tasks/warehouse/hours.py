"""Read a building's hourly frame (load joined to its site's weather) from the warehouse.

The frame is a complete hourly UTC grid over ``[start_utc, end_utc)``: one row per hour, a
missing reading is NaN (never 0). Weather per (site, hour) comes from the ``observed`` row when
there is one, else from the ``forecast`` row; ``weather_kind`` says which (missing when
neither).
The preference is per row, not per value, so one hour's weather never mixes two sources. (The
ingest stores one forecast per site and hour, its latest issue: ``tasks/ingest/weather_file.py``.)

Only ``SELECT`` statements are issued; the caller owns the connection (any session time zone:
timestamps come back converted to UTC).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta

import duckdb
import pandas as pd
from wadiro_fleet.tasks.errors import BuildingDataError, UnknownBuildingError
from wadiro_fleet.tasks.protocol.batch import BuildingInfo
from wadiro_fleet.tasks.protocol.features import WEATHER_COLUMNS
from wadiro_fleet.tasks.protocol.weeks import latest_complete_week, local_midnight_utc
from wadiro_fleet.tasks.protocol.windows import TEST_WEATHER_PROFILE_MAX_HOURS

HOUR_COLUMNS: tuple[str, ...] = (
    "ts",
    "kwh",
    "temperature_c",
    "irradiance_wm2",
    "wind_speed_ms",
    "humidity_pct",
    "weather_kind",
)
"""Columns of one building's hourly frame (:func:`load_many_building_hours` puts
``building_id`` first)."""


class TimeRangeError(BuildingDataError):
    """A load range that is not a pair of time-zone-aware whole hours with start <= end (e.g.
    the window of a building whose local midnight is not a whole UTC hour)."""


class DuplicateRowError(BuildingDataError):
    """The warehouse holds two rows for one key that should be unique."""


class OffHourReadingError(BuildingDataError):
    """A meter reading whose timestamp is not the start of an hour."""


_INFO_COLUMNS = ", ".join(BuildingInfo.__dataclass_fields__)


def load_buildings_info(
    con: duckdb.DuckDBPyConnection, building_ids: Sequence[str]
) -> dict[str, BuildingInfo]:
    """The ``buildings`` rows of ``building_ids``, keyed by id, in the order asked.

    Raises :class:`UnknownBuildingError` naming every id the table lacks.
    """
    ids = _distinct_ids(building_ids)
    rows = con.execute(
        f"SELECT {_INFO_COLUMNS} FROM buildings "
        "WHERE building_id IN (SELECT unnest(?::VARCHAR[]))",
        [ids],
    ).fetchall()
    found = {row[0]: BuildingInfo(*row) for row in rows}
    missing = [bid for bid in ids if bid not in found]
    if missing:
        shown = ", ".join(repr(b) for b in missing[:10])
        more = f" and {len(missing) - 10} more" if len(missing) > 10 else ""
        raise UnknownBuildingError(
            f"{len(missing)} building id(s) not in the buildings table: {shown}{more}"
        )
    return {bid: found[bid] for bid in ids}


def load_many_building_hours(
    con: duckdb.DuckDBPyConnection,
    building_ids: Sequence[str],
    start_utc: datetime | pd.Timestamp,
    end_utc: datetime | pd.Timestamp,
) -> pd.DataFrame:
    """Hourly frames of many buildings over ``[start_utc, end_utc)`` in one query.

    Columns ``building_id`` then :data:`HOUR_COLUMNS`, sorted by building then hour; each
    building has every hour of the range. Raises :class:`UnknownBuildingError` for ids missing
    from ``buildings``, :class:`DuplicateRowError` when a reading or a weather row of one kind
    is stored twice for the same hour, and :class:`OffHourReadingError` for a reading that is
    not at the start of an hour (it would otherwise be silently left out).
    """
    start, end = _hour_range(start_utc, end_utc)
    infos = load_buildings_info(con, building_ids)
    ids = list(infos)
    params = {"ids": ids, "start": start.to_pydatetime(), "end": end.to_pydatetime()}
    _check_integrity(con, params)
    # Through Arrow: several times faster than ``.df()`` for millions of rows with strings.
    frame = con.sql(_HOURS_SQL, params=params).to_arrow_table().to_pandas()
    frame["ts"] = frame["ts"].dt.tz_convert("UTC")
    for col in ("kwh", "temperature_c", "irradiance_wm2", "wind_speed_ms", "humidity_pct"):
        frame[col] = frame[col].astype("float64")
    return frame[["building_id", *HOUR_COLUMNS]]


# The grid is built from the range's bounds so that it does not depend on the session zone:
# adding whole hours to a TIMESTAMPTZ is exact.
_HOURS_SQL = """
WITH ids AS (
    SELECT unnest($ids::VARCHAR[]) AS building_id
),
b AS (
    SELECT building_id, site_id FROM buildings WHERE building_id IN (SELECT building_id FROM ids)
),
grid AS (
    SELECT b.building_id, b.site_id, g.ts
    FROM b, generate_series(
        $start::TIMESTAMPTZ, $end::TIMESTAMPTZ - INTERVAL 1 HOUR, INTERVAL 1 HOUR
    ) AS g(ts)
),
r AS (
    SELECT building_id, ts, kwh FROM meter_readings
    WHERE building_id IN (SELECT building_id FROM ids)
      AND ts >= $start::TIMESTAMPTZ AND ts < $end::TIMESTAMPTZ
),
w AS (
    SELECT site_id, ts, temperature_c, irradiance_wm2, wind_speed_ms, humidity_pct, kind
    FROM weather
    WHERE site_id IN (SELECT site_id FROM b)
      AND ts >= $start::TIMESTAMPTZ AND ts < $end::TIMESTAMPTZ
      AND kind IN ('observed', 'forecast')
    QUALIFY row_number() OVER (PARTITION BY site_id, ts ORDER BY kind = 'observed' DESC) = 1
)
SELECT grid.building_id, grid.ts, r.kwh,
       w.temperature_c, w.irradiance_wm2, w.wind_speed_ms, w.humidity_pct,
       w.kind AS weather_kind
FROM grid
LEFT JOIN r ON r.building_id = grid.building_id AND r.ts = grid.ts
LEFT JOIN w ON w.site_id = grid.site_id AND w.ts = grid.ts
ORDER BY grid.building_id, grid.ts
"""

_INTEGRITY_SQL = """
WITH ids AS (SELECT unnest($ids::VARCHAR[]) AS building_id),
sites AS (SELECT DISTINCT site_id FROM buildings WHERE building_id IN (SELECT building_id FROM ids))
(SELECT 'meter_readings' AS tbl, building_id AS key, ts, NULL AS kind
 FROM meter_readings
 WHERE building_id IN (SELECT building_id FROM ids)
   AND ts >= $start::TIMESTAMPTZ AND ts < $end::TIMESTAMPTZ
 GROUP BY building_id, ts HAVING count(*) > 1 LIMIT 1)
UNION ALL
(SELECT 'weather', site_id, ts, kind
 FROM weather
 WHERE site_id IN (SELECT site_id FROM sites)
   AND ts >= $start::TIMESTAMPTZ AND ts < $end::TIMESTAMPTZ
 GROUP BY site_id, ts, kind HAVING count(*) > 1 LIMIT 1)
UNION ALL
(SELECT 'meter_readings (off the hour)', building_id, ts, NULL
 FROM meter_readings
 WHERE building_id IN (SELECT building_id FROM ids)
   AND ts >= $start::TIMESTAMPTZ AND ts < $end::TIMESTAMPTZ
   AND epoch_us(ts) % 3600000000 <> 0
 LIMIT 1)
"""


def _check_integrity(con: duckdb.DuckDBPyConnection, params: dict) -> None:
    problem = con.execute(_INTEGRITY_SQL, params).fetchone()
    if problem is None:
        return
    table, key, ts, kind = problem
    when = pd.Timestamp(ts).tz_convert("UTC").isoformat()
    if table == "weather":
        raise DuplicateRowError(
            f"table weather holds more than one row for site {key!r}, kind {kind!r} at {when}"
        )
    if table == "meter_readings":
        raise DuplicateRowError(
            f"table meter_readings holds more than one row for building {key!r} at {when}"
        )
    raise OffHourReadingError(
        f"table meter_readings holds a reading of building {key!r} at {when}, "
        "which is not the start of an hour"
    )


@dataclass(frozen=True)
class WeekInputs:
    """What the stored inputs say about the week after the latest readings.

    ``next_week`` is the local Monday after the last hour with a reading (its history has
    ended); ``weather_hours`` of its ``hours`` have every weather input stored, observed or
    forecast, at the selected site that has the most.
    """

    next_week: date
    hours: int
    weather_hours: int

    @property
    def weather_suffices(self) -> bool:
        """Whether the week has weather for enough hours to be forecast: the rest, at most
        :data:`~wadiro_fleet.tasks.protocol.windows.TEST_WEATHER_PROFILE_MAX_HOURS`, is filled
        by the window's gap rule (more would make it ``no_weather``)."""
        return self.hours - self.weather_hours <= TEST_WEATHER_PROFILE_MAX_HOURS


def next_week_inputs(
    con: duckdb.DuckDBPyConnection, building_ids: Sequence[str]
) -> WeekInputs | None:
    """The week that starts after the selected buildings' latest reading, and how much of it
    has weather at their sites (None when they have no reading at all). The week is a Monday in
    the first building's time zone, as the run's weeks are."""
    ids = _distinct_ids(building_ids)
    infos = load_buildings_info(con, ids)
    timezone = infos[ids[0]].timezone
    meter_end = con.execute(
        "SELECT max(ts) FROM meter_readings WHERE building_id IN (SELECT unnest(?::VARCHAR[])) "
        "AND kwh IS NOT NULL", [ids]).fetchone()[0]
    if meter_end is None:
        return None
    week = latest_complete_week(pd.Timestamp(meter_end) + pd.Timedelta(hours=1), timezone,
                                include_test_week=False)
    start = local_midnight_utc(week, timezone)
    end = local_midnight_utc(week + timedelta(weeks=1), timezone)
    present = " AND ".join(f"{col} IS NOT NULL" for col in WEATHER_COLUMNS)
    covered = con.execute(
        f"""
        SELECT coalesce(max(n), 0) FROM (
            SELECT site_id, count(DISTINCT ts) AS n FROM weather
            WHERE site_id IN (SELECT site_id FROM buildings
                              WHERE building_id IN (SELECT unnest(?::VARCHAR[])))
              AND kind IN ('observed', 'forecast') AND {present}
              AND ts >= ? AND ts < ?
            GROUP BY site_id)
        """, [ids, start.to_pydatetime(), end.to_pydatetime()]).fetchone()[0]
    return WeekInputs(next_week=week, hours=int((end - start) / pd.Timedelta(hours=1)),
                      weather_hours=int(covered))


def _distinct_ids(building_ids: Sequence[str]) -> list[str]:
    if isinstance(building_ids, str):
        raise TypeError("building_ids must be a sequence of ids, not one string")
    return list(dict.fromkeys(str(b) for b in building_ids))


def _hour_range(
    start_utc: datetime | pd.Timestamp, end_utc: datetime | pd.Timestamp
) -> tuple[pd.Timestamp, pd.Timestamp]:
    bounds = []
    for name, value in (("start_utc", start_utc), ("end_utc", end_utc)):
        ts = pd.Timestamp(value)
        if ts.tzinfo is None:
            raise TimeRangeError(f"{name}={value!r} has no time zone; give an aware UTC instant")
        ts = ts.tz_convert("UTC")
        if ts != ts.floor("h"):
            raise TimeRangeError(f"{name}={ts.isoformat()} is not at the start of an hour")
        bounds.append(ts)
    start, end = bounds
    if end < start:
        raise TimeRangeError(f"end_utc {end.isoformat()} is before start_utc {start.isoformat()}")
    return start, end


__all__ = [
    "HOUR_COLUMNS",
    "WeekInputs",
    "DuplicateRowError",
    "OffHourReadingError",
    "TimeRangeError",
    "load_buildings_info",
    "load_many_building_hours",
    "next_week_inputs",
]
