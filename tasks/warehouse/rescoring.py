"""Scores of stored forecasts kept true to the readings stored now.

A forecast is scored when it is written, against the readings stored then. Readings change
after that: a live forecast's week happens (its actuals arrive), an operator re-sends corrected
readings, a blank cell makes an hour missing. :func:`rescore_forecasts` recomputes the scores
of the forecasts whose hours it is given and updates, in place, every ``scores`` row whose
numbers changed -- never a second row. Every ingest of readings calls it for the buildings and
hours it wrote, in its own transaction (so no stored score ever disagrees with the stored
readings, however old its week); the weekly run calls it for the last weeks too, which covers
readings written by other tools and results kept on disk while the warehouse was locked.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, date, datetime, timedelta
from datetime import time as day_start

import duckdb

from tasks.protocol.intervals import LEVELS, QUANTILES, quantile_suffix
from tasks.warehouse.quantile_sql import quantile_scores_sql
from tasks.warehouse.usable import USABLE_READINGS


def level_pct(level: float) -> int:
    """0.8 -> 80: the level as it appears in column names."""
    return round(100 * level)


SCORE_TOLERANCE = 1e-9
"""Relative difference below which a recomputed score equals the stored one (the protocol
scores in numpy, this recomputation in SQL: they agree to about 1e-15)."""

EXACT_BOUND = 1e8
"""Hourly kWh beyond +-this are summed as this (squared errors as its square), so that a week's
169 fit ``DECIMAL(38, 18)``: exact sums, the same in any row order (a sum of doubles follows the
tables' physical order, which a Dask run's writes change: docs/benchmarks.md, issue 49)."""


def _mean(value: str, bound: float = EXACT_BOUND) -> str:
    """SQL: the exact mean of ``value`` over a group's non-NULL rows (``least`` skips NULLs)."""
    clipped = f"least(greatest({value}, -{bound}), {bound})"
    return f"avg(CASE WHEN {value} IS NOT NULL THEN {clipped}::DECIMAL(38, 18) END)"


def _differs(column: str) -> str:
    """SQL: the stored ``s.column`` and the recomputed ``fresh.column`` differ (NULL on one side
    only, or beyond :data:`SCORE_TOLERANCE`)."""
    return (f"((s.{column} IS NULL) <> (fresh.{column} IS NULL) OR abs(s.{column} - fresh.{column})"
            f" > {SCORE_TOLERANCE} * greatest(1.0, abs(fresh.{column})))")


RESCORE_BUILDINGS = 200
"""How many buildings a rescoring of every building (the weekly run's, of the last weeks)
scores at a time: each pass joins its buildings' forecasts and readings only, so its joins
do not grow with the fleet (issue 49)."""

RESCORE_MEMORY = "256MB"
"""DuckDB's memory while every building is rescored (``SET memory_limit``): DuckDB keeps the
blocks a query read up to its limit, 80 % of the machine's by default, which grew the run's
process with the fleet (docs/benchmarks.md, issue 49)."""


def rescore_forecasts(
    con: duckdb.DuckDBPyConnection,
    since: date | None = None,
    *,
    buildings: Sequence[str] | None = None,
    start: datetime | None = None,
    end: datetime | None = None,
) -> int:
    """Score stored forecasts again against the readings stored now, and update (in place)
    every ``scores`` row whose numbers changed: actuals that arrived after a forecast was
    scored (a live forecast is scored on no hour at all), corrected readings, readings removed,
    readings flagged or accepted (the usable readings, :data:`USABLE_READINGS`).

    Recomputes MAE, RMSE, mean actual, hours scored and the intervals' coverage and width, as
    the protocol does (``tasks/protocol/scoring.py``: hours with both a forecast and an actual;
    coverage over hours with an actual and both bounds). Violations depend on the forecasts
    alone and stay as they are. The forecasts looked at: target weeks from ``since`` on, of
    ``buildings``, with an hour from ``start`` to ``end`` (inclusive; each filter only when
    given). Without ``buildings``, every building's, :data:`RESCORE_BUILDINGS` at a time, each
    pass an update of its own (a pass repeated changes nothing). Returns the number of updated
    rows.
    """
    if buildings is not None:
        return _rescore(con, since, list(dict.fromkeys(buildings)), start, end)
    with _memory_held_to(con, RESCORE_MEMORY):
        ids = [row[0] for row in con.execute(
            "SELECT DISTINCT building_id FROM forecasts WHERE "
            + ("target_week >= ?" if since is not None else "true") + " ORDER BY 1",
            [] if since is None else [since]).fetchall()]
        updated = sum(_rescore(con, since, ids[first:first + RESCORE_BUILDINGS], start, end)
                      for first in range(0, len(ids), RESCORE_BUILDINGS))
        _checkpoint_if_free(con)
    return updated


def _checkpoint_if_free(con: duckdb.DuckDBPyConnection) -> None:
    """Write the updates out now, under the memory limit the rescoring holds, unless the
    caller's transaction is still open: a connection's close would write them out at DuckDB's
    own limit (at 900 buildings that took the process 0.44 GB against 0.35)."""
    try:
        con.execute("CHECKPOINT")
    except duckdb.TransactionException:
        pass  # written out when the caller's transaction commits


@contextmanager
def _memory_held_to(con: duckdb.DuckDBPyConnection, limit: str) -> Iterator[None]:
    """DuckDB's memory limit set to ``limit`` in the block, then back to what it was: its
    default again, or (it reads back rounded, ``18.8 GiB``) about the limit set before."""
    setting = "SELECT current_setting('memory_limit')"
    before = con.execute(setting).fetchone()[0]
    con.execute(f"SET memory_limit = '{limit}'")
    try:
        yield
    finally:
        con.execute("RESET memory_limit")
        if con.execute(setting).fetchone()[0] != before:
            con.execute(f"SET memory_limit = '{before}'")


def _rescore(con: duckdb.DuckDBPyConnection, since: date | None, ids: list[str],
             start: datetime | None, end: datetime | None) -> int:
    """:func:`rescore_forecasts` of the buildings ``ids`` (none: nothing)."""
    if not ids:
        return 0
    # (clause, its parameters). The buildings also as their range: DuckDB then skips the row
    # groups outside it, and a batch's rescoring reads about its own rows, not the tables'.
    weeks = [("target_week >= ?", [since])] if since is not None else []
    of_buildings = [("building_id BETWEEN ? AND ?", [min(ids), max(ids)]),
                    (f"building_id IN ({', '.join('?' * len(ids))})", ids)]
    hours = [(clause, [value]) for clause, value in (("ts >= ?", start), ("ts <= ?", end))
             if value is not None]
    # The forecasts' and readings' scans take the week and building filters too (a forecast's
    # hours all share them; a target week's hours start after the day before its Monday in
    # UTC, whatever the building's time zone).
    since_hours = ([("ts >= ?", [datetime.combine(since, day_start(), UTC) - timedelta(days=1)])]
                   if since is not None else [])
    looked_at, forecast_rows, reading_rows = (
        _where(filters) for filters in ([*weeks, *of_buildings, *hours], [*weeks, *of_buildings],
                                        [*of_buildings, *since_hours]))
    both = "f.y_hat IS NOT NULL AND m.kwh IS NOT NULL"
    intervals = []
    for level in LEVELS:
        lo, hi, pct = f"f.y_lo_{level_pct(level)}", f"f.y_hi_{level_pct(level)}", level_pct(level)
        bounded = f"m.kwh IS NOT NULL AND {lo} IS NOT NULL AND {hi} IS NOT NULL"
        intervals += [f"avg(CASE WHEN m.kwh BETWEEN {lo} AND {hi} THEN 1.0 ELSE 0.0 END) "
                      f"FILTER (WHERE {bounded}) AS coverage_{pct}",
                      f"{_mean(f'{hi} - {lo}')} FILTER (WHERE {bounded}) AS width_{pct}"]
    intervals.append(quantile_scores_sql("m.kwh", "f.", mean=_mean))
    numbers = ["mae", "rmse", "mean_actual", *(f"{kind}_{level_pct(level)}" for level in LEVELS
                                               for kind in ("coverage", "width")),
               *(f"{kind}_{quantile_suffix(level)}" for kind in ("below", "pinball")
                 for level in QUANTILES), "pinball_mean"]
    return con.execute(
        f"""
        UPDATE scores AS s
        SET n_hours = fresh.n_hours, {", ".join(f"{c} = fresh.{c}" for c in numbers)}
        FROM (
            WITH weeks AS (
                SELECT DISTINCT building_id, model, target_week FROM forecasts
                WHERE {looked_at[0]}
            )
            SELECT f.building_id, f.model, f.target_week,
                   {_mean("abs(f.y_hat - m.kwh)")}                       AS mae,
                   sqrt({_mean('(f.y_hat - m.kwh) ^ 2', EXACT_BOUND ** 2)}) AS rmse,
                   {_mean("m.kwh")} FILTER (WHERE {both})                AS mean_actual,
                   count(*) FILTER (WHERE {both})                        AS n_hours,
                   {", ".join(intervals)}
            FROM (SELECT * FROM forecasts WHERE {forecast_rows[0]}) f
            JOIN weeks USING (building_id, model, target_week)
            LEFT JOIN (SELECT * FROM {USABLE_READINGS} WHERE {reading_rows[0]}) m
                USING (building_id, ts)
            GROUP BY f.building_id, f.model, f.target_week
        ) AS fresh
        WHERE s.building_id = fresh.building_id AND s.model = fresh.model
          AND s.target_week = fresh.target_week
          AND (s.n_hours <> fresh.n_hours OR {" OR ".join(_differs(c) for c in numbers)})
        """,
        [*looked_at[1], *forecast_rows[1], *reading_rows[1]],
    ).fetchone()[0]


def _where(filters: list[tuple[str, list]]) -> tuple[str, list]:
    """(clause, its parameters) pairs as one ``WHERE`` condition and its parameters in order."""
    return (" AND ".join(["true", *(clause for clause, _ in filters)]),
            [value for _, values in filters for value in values])


def rescored_note(rescored: int) -> str:
    """What an ingest's summary says about the scores it updated (``""`` for none)."""
    return (f"; re-scored {rescored:,} stored forecast score(s) whose readings changed"
            if rescored else "")
