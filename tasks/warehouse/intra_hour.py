"""Each building's own intra-hour shape, kept from its sub-hourly readings, to split an hourly
forecast into settlement periods (half-hours, quarter-hours).

The readings ingest sums a sub-hourly meter export to hours (``meter_readings``); it also keeps
the latest :data:`KEEP_DAYS` days of each building's sub-hourly energies in
``sub_hourly_readings`` (:func:`recent_sub_hourly` picks them from the file's frame,
:func:`write_sub_hourly` stores them). :func:`period_shares` turns them into a shape: per
building and local hour of the day, the share of the hour's energy in each period, the ratio of
the periods' summed energies over the last :data:`KEEP_DAYS` days. A building without enough of
them (fewer than :data:`MIN_HOURS` complete hours at that hour of the day, or no energy) is split
evenly.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import nullcontext

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa

from tasks.warehouse.connection import has_table, transaction

KEEP_DAYS = 28
"""Days of sub-hourly readings kept per building (counted back from its latest)."""

MIN_HOURS = 7
"""Complete hours at an hour of the day that a shape needs (a week of them); fewer: even."""

RESOLUTIONS = (60, 30, 15)
"""Period lengths (minutes) an hour splits into."""

_SCHEMA = pa.schema([("building_id", pa.string()), ("ts", pa.timestamp("us", tz="UTC")),
                     ("minutes", pa.int32()), ("kwh", pa.float64())])


def recent_sub_hourly(frame: pd.DataFrame, minutes: int, days: int = KEEP_DAYS) -> pa.Table:
    """The ``sub_hourly_readings`` rows of a sub-hourly frame (``building_id``, ``ts`` the UTC
    start of each ``minutes``-long interval, ``kwh`` its energy, NaN when missing): the
    intervals of every complete hour (every interval present, with a non-negative energy) in
    the last ``days`` days of each building's hours in the frame. An hourly frame
    (``minutes == 60``) has none."""
    if minutes >= 60 or frame.empty:
        return _SCHEMA.empty_table()
    ts = pd.to_datetime(frame["ts"], utc=True)
    # A kept interval starts after its building's latest instant less the days and an hour:
    # those rows are picked first, so a long file costs the rows it keeps, not all it holds.
    codes = pd.factorize(frame["building_id"])[0]
    instants = ts.to_numpy(dtype="datetime64[us]").astype(np.int64)
    latest = np.full(int(codes.max()) + 1, np.iinfo(np.int64).min)
    np.maximum.at(latest, codes, instants)
    near = instants > latest[codes] - (days * 24 + 1) * 3_600_000_000
    frame, ts = frame[near], ts[near]
    hour = ts.dt.floor("h")
    kwh = pd.to_numeric(frame["kwh"], errors="coerce")
    valued = kwh.notna() & (kwh >= 0)
    keys = [frame["building_id"], hour]
    whole = (valued.groupby(keys).transform("sum") == 60 // minutes).to_numpy()
    latest = hour.groupby(frame["building_id"]).transform("max")
    recent = (hour > latest - pd.Timedelta(days=days)).to_numpy()
    keep = whole & recent
    return pa.table({"building_id": pa.array(frame["building_id"].to_numpy()[keep], pa.string()),
                     "ts": pa.array(ts[keep], pa.timestamp("us", tz="UTC")),
                     "minutes": pa.array(np.full(int(keep.sum()), minutes), pa.int32()),
                     "kwh": pa.array(kwh[keep].to_numpy(np.float64))}, schema=_SCHEMA)


def write_sub_hourly(con: duckdb.DuckDBPyConnection, rows: pa.Table, *,
                     own_transaction: bool = False) -> int:
    """Store ``rows`` (:func:`recent_sub_hourly`): each building's stored rows from its first
    to its last new one are replaced, then rows more than :data:`KEEP_DAYS` days older than the
    building's latest are dropped. Returns the rows inserted. Call it inside the ingest's
    transaction (or with ``own_transaction``)."""
    if rows.num_rows == 0:
        return 0
    con.register("__wadiro_sub_hourly", rows)
    try:
        with transaction(con) if own_transaction else nullcontext():
            con.execute("""
                DELETE FROM sub_hourly_readings USING (
                    SELECT building_id, min(ts) AS lo, max(ts) AS hi
                    FROM __wadiro_sub_hourly GROUP BY building_id) AS r
                WHERE sub_hourly_readings.building_id = r.building_id
                  AND sub_hourly_readings.ts BETWEEN r.lo AND r.hi""")
            inserted = con.execute(
                "INSERT INTO sub_hourly_readings (building_id, ts, minutes, kwh) "
                "SELECT building_id, ts, minutes, kwh FROM __wadiro_sub_hourly"
            ).fetchone()[0]
            con.execute(f"""
                DELETE FROM sub_hourly_readings USING (
                    SELECT building_id, max(ts) AS latest FROM sub_hourly_readings
                    WHERE building_id IN (SELECT DISTINCT building_id FROM __wadiro_sub_hourly)
                    GROUP BY building_id) AS r
                WHERE sub_hourly_readings.building_id = r.building_id
                  AND sub_hourly_readings.ts <= r.latest - INTERVAL {KEEP_DAYS} DAY""")
    finally:
        con.unregister("__wadiro_sub_hourly")
    return int(inserted)


def period_shares(con: duckdb.DuckDBPyConnection, buildings: Sequence[str],
                  minutes: int) -> pd.DataFrame:
    """Per building of ``buildings`` and local hour of the day (0-23): the share of the hour's
    energy in each ``minutes``-long period, one column per period (``share_0`` ...), each row
    summing to 1. From the building's stored sub-hourly readings (:func:`write_sub_hourly`):
    periods finer than the stored intervals split them evenly; a building or hour without
    enough of them (:data:`MIN_HOURS`) is split evenly (``shaped`` False)."""
    if minutes not in RESOLUTIONS:
        raise ValueError(f"a settlement period of {minutes} minutes is not one of {RESOLUTIONS}")
    periods = 60 // minutes
    grid = pd.MultiIndex.from_product([list(buildings), range(24)],
                                      names=["building_id", "local_hour"])
    even = pd.DataFrame({f"share_{j}": 1.0 / periods for j in range(periods)}, index=grid)
    even["shaped"] = False
    if periods == 1 or not buildings or not has_table(con, "sub_hourly_readings"):
        return even.reset_index()
    stored = con.execute(
        """
        SELECT s.building_id,
               hour(timezone(b.timezone, time_bucket(INTERVAL 1 HOUR, s.ts))) AS local_hour,
               any_value(s.minutes) AS stored_minutes,
               CAST((epoch(s.ts) - epoch(time_bucket(INTERVAL 1 HOUR, s.ts))) / 60 AS INTEGER)
                   AS start_minute,
               sum(s.kwh) AS kwh,
               count(DISTINCT time_bucket(INTERVAL 1 HOUR, s.ts)) AS hours
        FROM sub_hourly_readings s JOIN buildings b USING (building_id)
        WHERE s.building_id IN (SELECT unnest(?::VARCHAR[]))
        GROUP BY ALL
        """, [list(buildings)]).df()
    if stored.empty:
        return even.reset_index()
    # each stored interval's energy spread evenly over the export periods it covers
    rows = []
    for (building, hour), group in stored.groupby(["building_id", "local_hour"], sort=False):
        width = int(group["stored_minutes"].iloc[0])
        energy = np.zeros(60)
        for start, kwh in zip(group["start_minute"], group["kwh"], strict=True):
            energy[int(start):int(start) + width] += kwh / width
        total = energy.sum()
        if group["hours"].min() < MIN_HOURS or not total > 0:
            continue
        share = energy.reshape(periods, minutes).sum(axis=1) / total
        rows.append({"building_id": building, "local_hour": int(hour),
                     **{f"share_{j}": share[j] for j in range(periods)}, "shaped": True})
    if rows:
        shaped = pd.DataFrame(rows).set_index(["building_id", "local_hour"])
        even.loc[shaped.index, shaped.columns] = shaped
    return even.reset_index()
