"""Flagging an ingest's new hours: each building's judged in the context of its stored ones.

Every ingest of readings calls :func:`flag_new_hours` in the transaction that writes them: the
checks of :mod:`~tasks.ingest.meter_checks` run on each building's new hours with its stored
hours within :data:`CONTEXT_DAYS` days of them, and each flagged hour is recorded in
``meter_flags`` with the check that flagged it, the value it flagged and when. Until an
operator accepts it (``accepted_at``, :func:`~tasks.warehouse.meter_flags.accept_readings`,
``wadiro accept-readings``) the hour is missing for forecasts and scores
(:data:`~tasks.warehouse.usable.USABLE_READINGS`). The lines that name the flagged runs show
their hours in each building's own time zone (``buildings.timezone``); the tables keep UTC.

A file that sends an hour again replaces its judgement: the hour's flags are dropped, unless
accepted for the very value the file sends again, and the hour is judged anew. An accepted
value is never flagged again. A stored hour flagged and not accepted is no evidence of what the
building draws: ``stuck_zero`` does not compare a run with it.

The buildings are judged a few at a time (:data:`CHUNK_HOURS` new hours), each chunk's context
read with only the columns the checks use, so that judging a large file costs memory of a
chunk's size, not the file's (a 182 MB meter export judged whole held every building's eight
weeks of context at once and tripled the ingest's peak memory).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tasks.ingest.meter_checks import FlaggedRun, flagged_runs, hour_stamp

CONTEXT_DAYS = 28
"""New hours are judged with the building's stored hours within this many days of them."""
CHUNK_HOURS = 250_000
"""New hours whose buildings are judged together (at least one building at a time)."""
_US_PER_HOUR = 3_600_000_000
_NEW = "__wadiro_new_hours"
_CHUNK = "__wadiro_judged_buildings"
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
        """One line per flagged run: building, check, first and last hour (the building's
        local time), values."""
        return [f"flagged: {run.line()}" for run in self.runs]


@dataclass(frozen=True)
class _Building:
    """A building of the registered new hours: its new hours' count and span, its zone."""

    building_id: str
    new_hours: int
    first: datetime
    last: datetime
    timezone: str


@dataclass(frozen=True)
class _Context:
    """A building's stored hours around its new ones, in time order (see :func:`_context`)."""

    hours: np.ndarray
    kwh: np.ndarray
    new: np.ndarray
    accepted: np.ndarray
    """Hours with an accepted flag: never flagged again."""
    flagged: np.ndarray
    """Stored hours flagged and not accepted (the new ones' flags are dropped already)."""


def _forget_judgements(con: duckdb.DuckDBPyConnection) -> None:
    """Drop the flags of the registered new hours, but those accepted for the value sent."""
    con.execute(f"""
        DELETE FROM meter_flags AS f
        USING (SELECT building_id::VARCHAR AS building_id, ts, kwh FROM {_NEW}) AS n
        WHERE f.building_id = n.building_id AND f.ts = n.ts
          AND (f.accepted_at IS NULL OR f.kwh IS DISTINCT FROM n.kwh)""")


def _buildings(con: duckdb.DuckDBPyConnection) -> list[_Building]:
    """The registered new hours' buildings, in id order."""
    rows = con.execute(f"""
        SELECT n.building_id, n.hours, n.lo, n.hi, coalesce(b.timezone, 'UTC')
        FROM (SELECT building_id::VARCHAR AS building_id, count(*) AS hours, min(ts) AS lo,
                     max(ts) AS hi
              FROM {_NEW} GROUP BY 1) AS n
        LEFT JOIN buildings AS b ON b.building_id = n.building_id
        ORDER BY 1""").fetchall()
    return [_Building(b, int(n), lo, hi, zone) for b, n, lo, hi, zone in rows]


def _building_runs(ids: pa.ChunkedArray) -> list[tuple[str, int, int]]:
    """(building, first row, rows) of each run of consecutive rows of one building, read from
    the ids' codes (a dictionary's) or compared in place: no copy of the column."""
    runs: list[tuple[str, int, int]] = []
    offset = 0
    for chunk in ids.chunks:
        if len(chunk) == 0:
            continue
        if pa.types.is_dictionary(chunk.type):
            codes = chunk.indices.to_numpy(zero_copy_only=False)
            starts = np.r_[0, np.flatnonzero(codes[1:] != codes[:-1]) + 1]
            names = chunk.dictionary.take(pa.array(codes[starts])).to_pylist()
        else:
            change = pc.not_equal(chunk.slice(1), chunk.slice(0, len(chunk) - 1))
            starts = np.r_[0, pc.indices_nonzero(change).to_numpy() + 1]
            names = chunk.take(pa.array(starts)).to_pylist()
        for name, start, end in zip(names, starts, np.r_[starts[1:], len(chunk)], strict=True):
            if runs and runs[-1][0] == name and sum(runs[-1][1:]) == offset + start:
                runs[-1] = (name, runs[-1][1], runs[-1][2] + int(end - start))
            else:
                runs.append((name, offset + int(start), int(end - start)))
        offset += len(chunk)
    return runs


def _chunks(new_hours: pa.Table) -> Iterator[pa.Table]:
    """``new_hours`` in slices of about :data:`CHUNK_HOURS` rows, each building's rows whole in
    one slice (an ingest's rows come grouped by building; rows that are not are sorted)."""
    runs = _building_runs(new_hours["building_id"])
    if len({name for name, _, _ in runs}) < len(runs):  # a building's rows apart
        new_hours = new_hours.set_column(
            0, "building_id", new_hours["building_id"].cast(pa.string())).sort_by("building_id")
        runs = _building_runs(new_hours["building_id"])
    first = 0
    for _, start, rows in runs:
        if start + rows - first >= CHUNK_HOURS:
            yield new_hours.slice(first, start + rows - first)
            first = start + rows
    if first < new_hours.num_rows:
        yield new_hours.slice(first)


_CONTEXT_SQL = f"""
    WITH judged AS (SELECT * FROM {_CHUNK}),
    new AS (SELECT building_id::VARCHAR AS building_id, ts FROM {_NEW}),
    flags AS (SELECT building_id, ts, bool_or(accepted_at IS NOT NULL) AS accepted,
                     bool_or(accepted_at IS NULL) AS flagged
              FROM meter_flags WHERE building_id IN (SELECT building_id FROM judged)
              GROUP BY ALL)
    SELECT j.position, epoch_us(m.ts) AS us, m.kwh,
           n.ts IS NOT NULL AS new, coalesce(f.accepted, false) AS accepted,
           coalesce(f.flagged, false) AS flagged
    FROM meter_readings AS m
    JOIN judged AS j ON m.building_id = j.building_id
         AND m.ts >= j.lo - INTERVAL {CONTEXT_DAYS} DAY
         AND m.ts <= j.hi + INTERVAL {CONTEXT_DAYS} DAY
    LEFT JOIN new AS n ON n.building_id = m.building_id AND n.ts = m.ts
    LEFT JOIN flags AS f ON f.building_id = m.building_id AND f.ts = m.ts
    WHERE m.ts >= ?::TIMESTAMPTZ - INTERVAL {CONTEXT_DAYS} DAY
      AND m.ts <= ?::TIMESTAMPTZ + INTERVAL {CONTEXT_DAYS} DAY
    ORDER BY j.position, m.ts"""


def _contexts(con: duckdb.DuckDBPyConnection, chunk: list[_Building]) -> list[_Context]:
    """The stored hours (the new ones written already) of each building of ``chunk`` (those of
    the registered new hours) within :data:`CONTEXT_DAYS` of its new hours, in ``chunk``'s
    order."""
    judged = pa.table({
        "building_id": pa.array([b.building_id for b in chunk], pa.string()),
        "position": pa.array(range(len(chunk)), pa.int32()),
        "lo": pa.array([b.first for b in chunk], pa.timestamp("us", tz="UTC")),
        "hi": pa.array([b.last for b in chunk], pa.timestamp("us", tz="UTC"))})
    with _registered(con, _CHUNK, judged):
        table = con.sql(_CONTEXT_SQL, params=[min(b.first for b in chunk),
                                              max(b.last for b in chunk)]).to_arrow_table()
    us = table["us"].to_numpy()
    on_hour = us % _US_PER_HOUR == 0  # in numpy: as a filter in SQL it cost 400 MB a chunk
    columns = {name: table[name].to_numpy()[on_hour]
               for name in ("position", "new", "accepted", "flagged")}
    hour = us[on_hour] // _US_PER_HOUR
    kwh = table["kwh"].cast(pa.float64()).to_numpy()[on_hour]  # NULL -> NaN
    bounds = np.searchsorted(columns["position"], np.arange(len(chunk) + 1))
    return [_Context(hour[lo:hi], kwh[lo:hi], columns["new"][lo:hi],
                     columns["accepted"][lo:hi], columns["flagged"][lo:hi])
            for lo, hi in zip(bounds[:-1], bounds[1:], strict=True)]


def _judged(building: _Building, context: _Context) -> list[FlaggedRun]:
    """The building's flagged runs touching a new hour, without its accepted hours."""
    runs = []
    for run in flagged_runs(building.building_id, context.hours, context.kwh, context.new,
                            usable=~context.flagged, timezone=building.timezone):
        kept = run.positions[~context.accepted[run.positions]]
        if kept.size:
            runs.append(replace(run, positions=kept,
                                first=hour_stamp(int(context.hours[kept[0]])),
                                last=hour_stamp(int(context.hours[kept[-1]]))))
    return runs


def _rows(runs: list[FlaggedRun], context: _Context) -> pa.Table:
    """``meter_flags``' rows of one building's runs (all but the times when flagged)."""
    positions = np.concatenate([run.positions for run in runs])
    sizes = [run.hours for run in runs]
    return pa.table({
        "building_id": pa.array(np.repeat([run.building_id for run in runs], sizes)),
        "ts": pa.array(context.hours[positions] * _US_PER_HOUR, pa.timestamp("us", tz="UTC")),
        "check_name": pa.array(np.repeat([run.check_name for run in runs], sizes)),
        "kwh": pa.array(context.kwh[positions], pa.float64())})


def flag_new_hours(con: duckdb.DuckDBPyConnection, new_hours: pa.Table) -> FlagReport:
    """Judge the buildings' new hours (``new_hours``: ``building_id``, ``ts``, ``kwh``, written
    already) in the context of their stored ones and record what is flagged; call it inside
    the transaction that wrote them. Returns what was flagged."""
    new_hours = new_hours.select(["building_id", "ts", "kwh"])
    with _registered(con, _NEW, new_hours):
        _forget_judgements(con)
    runs: list[FlaggedRun] = []
    rows: list[pa.Table] = []
    for chunk in _chunks(new_hours):
        with _registered(con, _NEW, chunk):
            buildings = _buildings(con)
            contexts = _contexts(con, buildings)
        for building, context in zip(buildings, contexts, strict=True):
            found = _judged(building, context)
            if found:
                runs += found
                rows.append(_rows(found, context))
    if rows:
        with _registered(con, _FLAGS, pa.concat_tables(rows)):
            _insert(con)
    return FlagReport(tuple(runs))


@contextmanager
def _registered(con: duckdb.DuckDBPyConnection, name: str, table: pa.Table) -> Iterator[None]:
    """``table`` visible to ``con``'s queries as ``name`` inside the block."""
    con.register(name, table)
    try:
        yield
    finally:
        con.unregister(name)


def _insert(con: duckdb.DuckDBPyConnection) -> None:
    """Record the registered flagged hours, each (building, hour, check) once."""
    con.execute(f"""
        INSERT INTO meter_flags (building_id, ts, check_name, kwh, flagged_at)
        SELECT r.building_id, r.ts, r.check_name, r.kwh, ? FROM {_FLAGS} AS r
        WHERE NOT EXISTS (SELECT 1 FROM meter_flags AS f
                          WHERE f.building_id = r.building_id AND f.ts = r.ts
                            AND f.check_name = r.check_name)""", [datetime.now(UTC)])
