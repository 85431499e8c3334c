"""Read a building's hourly frame (load joined to its site's weather) from the warehouse.

The frame is a complete hourly UTC grid over ``[start_utc, end_utc)``: one row per hour, a
missing reading is NaN (never 0). Weather per (site, hour) is merged per input: each of
temperature, irradiance, wind and humidity is the ``observed`` row's value when it holds one,
else the ``forecast`` row's; so an observation with a blank wind cell takes the forecast's
wind for that hour, and one blank input never hides the others. ``weather_kind`` says whether
an observation row exists for the hour (``observed``), else a forecast row (``forecast``;
missing when neither). (The ingest stores one forecast per site and hour, its latest issue:
``tasks/ingest/weather_file.py``.)

A reading an ingest flagged as implausible, and no operator accepted, is missing too: the
readings are the usable ones (:mod:`~tasks.warehouse.usable`).

Only ``SELECT`` statements are issued; the caller owns the connection (any session time zone:
timestamps come back converted to UTC).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa

from tasks.errors import BuildingDataError, UnknownBuildingError
from tasks.protocol.batch import BuildingInfo
from tasks.protocol.features import WEATHER_COLUMNS
from tasks.protocol.weeks import local_midnight_utc
from tasks.warehouse.usable import USABLE_READINGS

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
    """Hourly frames of many buildings over ``[start_utc, end_utc)``, read in one pass, as one
    frame: columns ``building_id`` then :data:`HOUR_COLUMNS`, sorted by building then hour
    (:func:`load_building_hours_by_id`, whose errors it raises)."""
    frames = load_building_hours_by_id(con, building_ids, start_utc, end_utc)
    if not frames:
        return pd.DataFrame(columns=["building_id", *HOUR_COLUMNS])
    ids = np.repeat(np.array(list(frames), dtype=object),
                    [len(frame) for frame in frames.values()])
    together = pd.concat(frames.values(), ignore_index=True)
    together.insert(0, "building_id", pd.array(ids, dtype="str"))
    return together


def load_building_hours_by_id(
    con: duckdb.DuckDBPyConnection,
    building_ids: Sequence[str],
    start_utc: datetime | pd.Timestamp,
    end_utc: datetime | pd.Timestamp,
) -> dict[str, pd.DataFrame]:
    """Each building's hourly frame over ``[start_utc, end_utc)`` (columns
    :data:`HOUR_COLUMNS`, every hour of the range), keyed by id in id order, read in one pass.

    Raises :class:`UnknownBuildingError` for ids missing from ``buildings``,
    :class:`DuplicateRowError` when a reading or a weather row of one kind is stored twice for
    the same hour, and :class:`OffHourReadingError` for a reading that is not at the start of
    an hour (it would otherwise be silently left out).
    """
    start, end = _hour_range(start_utc, end_utc)
    infos = load_buildings_info(con, building_ids)
    ids = sorted(infos)
    sites = sorted({info.site_id for info in infos.values()})
    params = {"ids": ids, "start": start.to_pydatetime(), "end": end.to_pydatetime()}
    _check_integrity(con, params)
    # Stored rows only, each put at its place in the (building x hour) grid by its position:
    # no grid joined in SQL and no sort, which cost several times the scan itself. Each
    # building's frame is then made from its rows of the grids (a site's for the weather).
    n_hours = int((end - start) // pd.Timedelta(hours=1))
    readings = con.sql(_READINGS_SQL, params=params).to_arrow_table()
    weather = con.sql(_WEATHER_SQL, params={**params, "ids": sites}).to_arrow_table()
    kwh = _on_grid(readings, "building_id", ids, n_hours, ["kwh"])[0]
    *site_weather, site_kind = _on_grid(weather, "site_id", sites, n_hours, [*_WEATHER, "kind"])
    ts = pd.DatetimeIndex(start.value // 1000 + np.arange(n_hours) * _HOUR_US,
                          dtype="datetime64[us]").tz_localize("UTC")
    site_frames = {}
    for row, site in enumerate(sites):
        kind = site_kind[row]
        site_frames[site] = {
            **{name: values[row] for name, values in zip(_WEATHER, site_weather, strict=True)},
            "weather_kind": pd.array(np.where(np.isnan(kind), None, _KIND_NAMES[
                np.nan_to_num(kind).astype(np.int64)]), dtype="str"),
        }
    return {bid: pd.DataFrame({"ts": ts, "kwh": kwh[row],
                               **site_frames[infos[bid].site_id]}, columns=list(HOUR_COLUMNS))
            for row, bid in enumerate(ids)}


_HOUR_US = 3_600_000_000
_WEATHER = HOUR_COLUMNS[2:6]
"""The stored weather inputs of :data:`HOUR_COLUMNS`."""
_KIND_NAMES = np.array(["observed", "forecast"], dtype=object)
"""``kind`` of the weather query: 0 an hour with an observation, 1 a forecast only."""


def _on_grid(rows: pa.Table, key: str, keys: list[str], n_hours: int,
             columns: list[str]) -> list[np.ndarray]:
    """``columns`` of ``rows`` (one row per key and hour, ``hour`` its position from the
    range's start) as (key x hour) arrays, NaN where no row is stored."""
    grids = [np.full((len(keys), n_hours), np.nan) for _ in columns]
    if not rows.num_rows:
        return grids
    codes = rows[key].combine_chunks().dictionary_encode()
    position = {k: i for i, k in enumerate(keys)}
    row_of = np.array([position[k] for k in codes.dictionary.to_pylist()], dtype=np.int64)
    places = (row_of[codes.indices.to_numpy()], rows["hour"].to_numpy())
    for grid, column in zip(grids, columns, strict=True):
        grid[places] = rows[column].to_numpy()
    return grids


# The usable readings: an hour an ingest flagged (not accepted) is missing, as a NULL one.
_READINGS_SQL = f"""
SELECT building_id, (epoch_us(ts) - epoch_us($start::TIMESTAMPTZ)) // 3600000000 AS hour, kwh
FROM {USABLE_READINGS}
WHERE building_id IN (SELECT unnest($ids::VARCHAR[]))
  AND ts >= $start::TIMESTAMPTZ AND ts < $end::TIMESTAMPTZ
"""

def _observed_else_forecast(column: str) -> str:
    """SQL of one weather input merged per value over an hour's rows: the observation's value,
    else the forecast's (a (site, hour, kind) holds one row: ``_check_integrity``)."""
    return (f"coalesce(any_value({column}) FILTER (WHERE kind = 'observed'), "
            f"any_value({column}) FILTER (WHERE kind = 'forecast')) AS {column}")


# Each input of an hour takes the observation's value when it has one, else the forecast's; a
# row that is not at the start of an hour is not any hour's weather.
_WEATHER_SQL = f"""
SELECT site_id, (epoch_us(ts) - epoch_us($start::TIMESTAMPTZ)) // 3600000000 AS hour,
       {", ".join(_observed_else_forecast(column) for column in _WEATHER)},
       CASE WHEN bool_or(kind = 'observed') THEN 0 ELSE 1 END AS kind
FROM weather
WHERE site_id IN (SELECT unnest($ids::VARCHAR[]))
  AND ts >= $start::TIMESTAMPTZ AND ts < $end::TIMESTAMPTZ
  AND kind IN ('observed', 'forecast') AND epoch_us(ts) % 3600000000 = 0
GROUP BY site_id, ts
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


WEEK_WEATHER_MIN_SHARE = 0.5
"""The weekly run takes the week after the latest readings when at least this share of its
hours has weather stored (one input is enough: the window leaves out the inputs it lacks)."""


SHORT_LOOKBACK = pd.Timedelta(weeks=4)
"""How far before a week a building's latest reading is looked for (:class:`WeekInputs`)."""


@dataclass(frozen=True)
class WeekInputs:
    """What the stored inputs say about one target week.

    ``weather_hours`` of its ``hours`` have a weather input stored, observed or forecast, at the
    selected site that has the most, and ``blank`` counts, per weather input the protocol reads,
    that site's hours of the week without it. ``last_reading`` is the selected buildings' latest
    reading before the week starts (None: none), and ``short`` each building whose own latest
    reading in the :data:`SHORT_LOOKBACK` before it is not the last hour before it (None: no
    reading there at all): one building's full file never hides another's gap.
    """

    week: date
    hours: int
    weather_hours: int
    blank: dict[str, int] = field(default_factory=dict)
    last_reading: datetime | None = None
    short: dict[str, datetime | None] = field(default_factory=dict)

    @property
    def weather_suffices(self) -> bool:
        """Whether the week has weather for enough hours to be forecast
        (:data:`WEEK_WEATHER_MIN_SHARE`): the window fills an input's remaining hours or leaves
        the input out."""
        return self.weather_hours >= WEEK_WEATHER_MIN_SHARE * self.hours

    def blanks(self) -> str:
        """``"; wind_speed_ms blank at 161 of them"`` for the inputs with blank hours, or ``""``."""
        said = ", ".join(f"{column} blank at {n}" for column, n in self.blank.items() if n)
        return f"; {said} of them" if said else ""


def week_inputs(
    con: duckdb.DuckDBPyConnection, building_ids: Sequence[str], week: date, timezone: str
) -> WeekInputs:
    """How much of ``week`` (a local Monday in ``timezone``) has weather at the selected
    buildings' sites, and their latest reading before it starts."""
    ids = _distinct_ids(building_ids)
    start = local_midnight_utc(week, timezone)
    end = local_midnight_utc(week + timedelta(weeks=1), timezone)
    last_reading = con.execute(
        "SELECT max(ts) FROM meter_readings WHERE building_id IN (SELECT unnest(?::VARCHAR[])) "
        "AND kwh IS NOT NULL AND ts < ?", [ids, start.to_pydatetime()]).fetchone()[0]
    short = dict(con.execute(
        """SELECT b.id, max(m.ts) FROM (SELECT unnest(?::VARCHAR[]) AS id) AS b
           LEFT JOIN meter_readings AS m ON m.building_id = b.id AND m.kwh IS NOT NULL
                AND m.ts >= ? AND m.ts < ?
           GROUP BY b.id HAVING max(m.ts) IS NULL OR max(m.ts) < ? ORDER BY b.id""",
        [ids, (start - SHORT_LOOKBACK).to_pydatetime(), start.to_pydatetime(),
         (start - pd.Timedelta(hours=1)).to_pydatetime()]).fetchall())
    any_input = " OR ".join(f"{col} IS NOT NULL" for col in WEATHER_COLUMNS)
    per_input = ", ".join(f"count(DISTINCT ts) FILTER (WHERE {col} IS NOT NULL)"
                          for col in WEATHER_COLUMNS)
    covered = con.execute(
        f"""
        SELECT count(DISTINCT ts) FILTER (WHERE {any_input}) AS n, {per_input} FROM weather
        WHERE site_id IN (SELECT site_id FROM buildings
                          WHERE building_id IN (SELECT unnest(?::VARCHAR[])))
          AND kind IN ('observed', 'forecast') AND ts >= ? AND ts < ?
        GROUP BY site_id ORDER BY n DESC LIMIT 1
        """, [ids, start.to_pydatetime(), end.to_pydatetime()]).fetchone()
    hours = int((end - start) / pd.Timedelta(hours=1))
    n, *each = covered if covered is not None else (0, *[0] * len(WEATHER_COLUMNS))
    return WeekInputs(week=week, hours=hours, weather_hours=int(n),
                      blank={col: hours - int(k)
                             for col, k in zip(WEATHER_COLUMNS, each, strict=True)},
                      last_reading=last_reading, short=short)


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


def fleet_levels(con: duckdb.DuckDBPyConnection, start_utc: datetime | pd.Timestamp,
                 end_utc: datetime | pd.Timestamp, min_hours: int,
                 leave_out: Sequence[str] = ()) -> np.ndarray:
    """The mean hourly kWh of each building with at least ``min_hours`` usable readings over
    ``[start_utc, end_utc)``, but those of ``leave_out`` (building ids): the fleet's
    established buildings' levels, in one aggregate."""
    ids = _distinct_ids(leave_out)
    left_out = " AND building_id NOT IN (SELECT unnest(?::VARCHAR[]))" if ids else ""
    rows = con.execute(
        f"SELECT avg(kwh) FROM {USABLE_READINGS} WHERE ts >= ? AND ts < ?{left_out} "
        "GROUP BY building_id HAVING count(kwh) >= ?",
        [pd.Timestamp(start_utc).to_pydatetime(), pd.Timestamp(end_utc).to_pydatetime(),
         *([ids] if ids else []), min_hours]).fetchall()
    return np.asarray([row[0] for row in rows], dtype=np.float64)
