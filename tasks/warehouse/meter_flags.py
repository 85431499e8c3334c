"""``meter_flags``: hours an ingest judged implausible, kept as they arrived, treated as missing.

An ingest flags them (:mod:`~tasks.ingest.flagging`, the checks of
:mod:`~tasks.ingest.meter_checks`); until an operator accepts one (``accepted_at``,
:func:`accept_readings`, the command ``wadiro accept-readings``) the hour is missing for
forecasts and scores (:data:`~tasks.warehouse.usable.USABLE_READINGS`), and a forecasting run
counts those its windows held (:func:`load_flagged_hours`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime

import duckdb
import numpy as np
import pandas as pd

from tasks.errors import PipelineError, UnknownBuildingError
from tasks.warehouse.connection import connect, transaction
from tasks.warehouse.rescoring import rescore_forecasts
from tasks.warehouse.schema import ensure_schema


def load_flagged_hours(
    con: duckdb.DuckDBPyConnection, building_ids: Sequence[str],
    start: datetime | pd.Timestamp, end: datetime | pd.Timestamp,
) -> dict[str, np.ndarray]:
    """Each building's flagged, not accepted hours with a stored reading in ``[start, end)``, as
    epoch microseconds in time order (buildings without any are left out)."""
    rows = con.execute("""
        SELECT DISTINCT f.building_id, epoch_us(f.ts) AS us FROM meter_flags AS f
        JOIN meter_readings AS m ON m.building_id = f.building_id AND m.ts = f.ts
        WHERE f.accepted_at IS NULL AND f.building_id IN (SELECT unnest(?::VARCHAR[]))
          AND f.ts >= ? AND f.ts < ?
        ORDER BY 1, 2""", [list(building_ids), pd.Timestamp(start).to_pydatetime(),
                           pd.Timestamp(end).to_pydatetime()]).fetchall()
    found: dict[str, list[int]] = {}
    for building, us in rows:
        found.setdefault(building, []).append(int(us))
    return {building: np.array(us, dtype=np.int64) for building, us in found.items()}


@dataclass(frozen=True)
class AcceptSummary:
    """What :func:`accept_readings` accepted."""

    building_id: str
    hours: int
    first: datetime | None
    last: datetime | None
    rescored: int = 0
    seconds: float = 0.0

    def line(self) -> str:
        if not self.hours:
            return f"no flagged reading of {self.building_id} to accept in that range"
        rescored = (f"; re-scored {self.rescored:,} stored forecast score(s)"
                    if self.rescored else "")
        return (f"accepted {self.hours:,} flagged reading(s) of {self.building_id} from "
                f"{self.first:%Y-%m-%d %H:%M} to {self.last:%Y-%m-%d %H:%M} UTC: forecasts and "
                f"scores use them from now on{rescored}")


class ReversedRangeError(PipelineError, ValueError):
    """Hours to accept whose start is after their end: a range that holds no hour."""


def _utc(moment: datetime | None, default: datetime) -> datetime:
    """``moment`` (UTC unless it has an offset; ``default`` when ``None``) in UTC."""
    moment = moment or default
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).astimezone(UTC)


def accept_readings(
    con: duckdb.DuckDBPyConnection, building_id: str,
    start: datetime | None = None, end: datetime | None = None,
) -> AcceptSummary:
    """Accept the flagged hours of ``building_id`` from ``start`` to ``end`` (inclusive; each
    open when ``None``; UTC unless it has an offset) as real, and score the forecasts of those
    hours again, in one transaction. An unknown building, or a ``start`` after ``end`` (which
    would say that nothing is flagged), is refused."""
    lo, hi = _utc(start, datetime(1, 1, 1)), _utc(end, datetime(9999, 12, 31))
    if lo > hi:
        raise ReversedRangeError(
            f"nothing accepted: --start ({lo:%Y-%m-%d %H:%M} UTC) is after --end "
            f"({hi:%Y-%m-%d %H:%M} UTC); give the first hour to accept as --start, the last "
            "as --end")
    if not con.execute("SELECT count(*) FROM buildings WHERE building_id = ?",
                       [building_id]).fetchone()[0]:
        raise UnknownBuildingError(f"building {building_id!r} is not in the buildings table")
    where = "building_id = ? AND accepted_at IS NULL AND ts >= ? AND ts <= ?"
    bounds = [building_id, lo, hi]
    with transaction(con):
        hours, first, last = con.execute(
            f"SELECT count(DISTINCT ts), min(ts), max(ts) FROM meter_flags WHERE {where}",
            bounds).fetchone()
        if not hours:
            return AcceptSummary(building_id, 0, None, None)
        con.execute(f"UPDATE meter_flags SET accepted_at = ? WHERE {where}",
                    [datetime.now(UTC), *bounds])
        rescored = rescore_forecasts(con, buildings=[building_id], start=first, end=last)
    return AcceptSummary(building_id, int(hours), first, last, rescored)


def accept_flagged_readings(warehouse: str, building_id: str, start: datetime | None = None,
                            end: datetime | None = None) -> AcceptSummary:
    """:func:`accept_readings` on the warehouse file (``wadiro accept-readings``); a missing
    warehouse is refused, never created."""
    began = time.perf_counter()
    with connect(warehouse, create=False) as con:
        ensure_schema(con)
        summary = accept_readings(con, building_id, start, end)
    return replace(summary, seconds=time.perf_counter() - began)
