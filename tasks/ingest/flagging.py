"""Flagging an ingest's new hours: each building's judged in the context of its stored ones.

Every ingest of readings calls :func:`flag_new_hours` in the transaction that writes them: the
checks of :mod:`~tasks.ingest.meter_checks` run on each building's new hours with its stored
hours within :data:`CONTEXT_DAYS` days of them, and each flagged hour is recorded in
``meter_flags`` with the check that flagged it, the value it flagged and when. Until an
operator accepts it (``accepted_at``, :func:`~tasks.warehouse.meter_flags.accept_readings`,
``wadiro accept-readings``) the hour is missing for forecasts and scores
(:data:`~tasks.warehouse.usable.USABLE_READINGS`).

A file that sends an hour again replaces its judgement: the hour's flags are dropped, unless
accepted for the very value the file sends again, and the hour is judged anew. An accepted
value is never flagged again.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa

from tasks.ingest.meter_checks import FlaggedRun, flagged_runs

CONTEXT_DAYS = 28
"""New hours are judged with the building's stored hours within this many days of them."""
_US_PER_HOUR = 3_600_000_000
_NEW = "__wadiro_new_hours"
_FLAGS = "__wadiro_new_flags"


@dataclass(frozen=True)
class FlagReport:
    """What an ingest flagged: the runs of hours, per building and check."""

    runs: tuple[FlaggedRun, ...] = ()

    @property
    def hours(self) -> int:
        return sum(run.hours for run in self.runs)

    def note(self) -> str:
        """The summary's clause (``""`` when nothing was flagged)."""
        if not self.runs:
            return ""
        buildings = len({run.building_id for run in self.runs})
        return (f"; flagged {self.hours:,} implausible reading(s) of {buildings} building(s), "
                "kept but treated as missing until accepted (wadiro accept-readings)")

    def span(self, start: datetime, end: datetime) -> tuple[datetime, datetime]:
        """``start`` to ``end`` widened to every flagged hour (a run may go on into stored
        hours beside the new ones): the hours whose scores may change."""
        firsts = [run.first.to_pydatetime() for run in self.runs]
        lasts = [run.last.to_pydatetime() for run in self.runs]
        return min([start, *firsts]), max([end, *lasts])

    def lines(self) -> list[str]:
        """One line per flagged run: building, check, first and last hour, values."""
        return [f"flagged: {run.line()}" for run in self.runs]


def _context(con: duckdb.DuckDBPyConnection) -> pa.Table:
    """The stored hours (the new ones written already) of each building of the registered new
    hours within :data:`CONTEXT_DAYS` of them, in building and time order, ``new`` marking the
    new ones."""
    return con.sql(f"""
        WITH new AS (SELECT building_id::VARCHAR AS building_id, ts FROM {_NEW}),
        span AS (SELECT building_id, min(ts) AS lo, max(ts) AS hi FROM new GROUP BY 1)
        SELECT m.building_id, epoch_us(m.ts) // {_US_PER_HOUR} AS hour, m.kwh,
               n.ts IS NOT NULL AS new
        FROM meter_readings AS m
        JOIN span AS s ON m.building_id = s.building_id
             AND m.ts >= s.lo - INTERVAL {CONTEXT_DAYS} DAY
             AND m.ts <= s.hi + INTERVAL {CONTEXT_DAYS} DAY
        LEFT JOIN new AS n ON n.building_id = m.building_id AND n.ts = m.ts
        WHERE epoch_us(m.ts) % {_US_PER_HOUR} = 0
        ORDER BY m.building_id, m.ts""").to_arrow_table()


def _accepted(con: duckdb.DuckDBPyConnection) -> set[tuple[str, int]]:
    """(building, hour number) of the accepted flags of the registered new hours' buildings."""
    rows = con.execute(f"""
        SELECT building_id, epoch_us(ts) // {_US_PER_HOUR} FROM meter_flags
        WHERE accepted_at IS NOT NULL
          AND building_id IN (SELECT DISTINCT building_id::VARCHAR FROM {_NEW})""").fetchall()
    return {(b, int(h)) for b, h in rows}


def _judged(context: pa.Table, accepted: set[tuple[str, int]]) -> list[FlaggedRun]:
    """Each building's flagged runs touching a new hour, without its accepted hours."""
    if not context.num_rows:
        return []
    ids = context["building_id"].to_numpy(zero_copy_only=False)
    hours = context["hour"].to_numpy()
    kwh = context["kwh"].to_numpy(zero_copy_only=False).astype(float)
    new = context["new"].to_numpy(zero_copy_only=False).astype(bool)
    starts = np.r_[0, np.flatnonzero(ids[1:] != ids[:-1]) + 1, ids.size]
    runs = []
    for lo, hi in zip(starts[:-1], starts[1:], strict=True):
        building = str(ids[lo])
        for run in flagged_runs(building, hours[lo:hi], kwh[lo:hi], new[lo:hi]):
            kept = np.array([p for p in run.positions
                             if (building, int(hours[lo + p])) not in accepted], dtype=np.int64)
            if kept.size:  # positions of the whole context from here on
                first, last = (pd.Timestamp(int(hours[lo + kept[i]]) * _US_PER_HOUR, unit="us",
                                            tz="UTC") for i in (0, -1))
                runs.append(replace(run, positions=kept + lo, first=first, last=last))
    return runs


def flag_new_hours(con: duckdb.DuckDBPyConnection, new_hours: pa.Table) -> FlagReport:
    """Judge the buildings' new hours (``new_hours``: ``building_id``, ``ts``, ``kwh``, written
    already) in the context of their stored ones and record what is flagged; call it inside
    the transaction that wrote them. Returns what was flagged."""
    con.register(_NEW, new_hours.select(["building_id", "ts", "kwh"]))
    try:
        con.execute(f"""
            DELETE FROM meter_flags AS f
            USING (SELECT building_id::VARCHAR AS building_id, ts, kwh FROM {_NEW}) AS n
            WHERE f.building_id = n.building_id AND f.ts = n.ts
              AND (f.accepted_at IS NULL OR f.kwh IS DISTINCT FROM n.kwh)""")
        context = _context(con)
        runs = _judged(context, _accepted(con))
    finally:
        con.unregister(_NEW)
    if runs:
        _insert(con, runs, context)
    return FlagReport(tuple(runs))


def _insert(con: duckdb.DuckDBPyConnection, runs: list[FlaggedRun], context: pa.Table) -> None:
    """Record the runs' hours, each (building, hour, check) once."""
    positions = np.concatenate([run.positions for run in runs])
    hours = context["hour"].to_numpy()[positions]
    rows = pa.table({
        "building_id": pa.array([run.building_id for run in runs for _ in run.positions]),
        "ts": pa.array(hours * _US_PER_HOUR, pa.timestamp("us", tz="UTC")),
        "check_name": pa.array([run.check_name for run in runs for _ in run.positions]),
        "kwh": context["kwh"].take(pa.array(positions)).combine_chunks().cast(pa.float64()),
    })
    con.register(_FLAGS, rows)
    try:
        con.execute(f"""
            INSERT INTO meter_flags (building_id, ts, check_name, kwh, flagged_at)
            SELECT r.building_id, r.ts, r.check_name, r.kwh, ? FROM {_FLAGS} AS r
            WHERE NOT EXISTS (SELECT 1 FROM meter_flags AS f
                              WHERE f.building_id = r.building_id AND f.ts = r.ts
                                AND f.check_name = r.check_name)""", [datetime.now(UTC)])
    finally:
        con.unregister(_FLAGS)
