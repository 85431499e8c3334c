"""Warehouse I/O of the forecasting results: rows from protocol outputs, idempotent writes.

A batch of :class:`~tasks.protocol.forecasting.BuildingWeekResult` becomes one
Arrow table per result table (:func:`result_tables`, the form a run stages it in), written in
ONE short transaction that, for each target week, replaces the slice (those buildings x that
week x the run's models) in every result table. Rerunning a week or resuming a killed backfill
therefore replaces rows and never duplicates them, and a model that produced nothing this time
leaves no stale row behind.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, date, datetime, timedelta
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tasks.protocol.config import ForecastConfig
from tasks.protocol.forecasting import (
    BuildingWeekResult,
    IssuedForecast,
    ModelOutcome,
    StoredParams,
    epoch_us,
)
from tasks.protocol.intervals import LEVELS, QUANTILES, quantile_name, quantile_suffix
from tasks.protocol.track_record import WeekScore
from tasks.warehouse.connection import transaction
from tasks.warehouse.rescoring import level_pct
from tasks.warehouse.slices import Slice, empty_rows, replace_slice

PER_MODEL_TABLES = ("forecasts", "scores", "tuning_trials", "model_fits")
PER_WEEK_TABLES = ("window_status", "publications", "validation_errors")
RESULT_SLICE_TABLES = (*PER_WEEK_TABLES, *PER_MODEL_TABLES)
"""The tables a batch of results replaces its slice of: per (building, week), and per
(building, week, model) for the run's models."""

_FIT_COLUMNS = ("status", "error", "tuned_week", "solver", "solver_status", "objective",
                "fit_time_s", "tuning_time_s", "n_train", "validation_mae", "validation_source",
                "l_eps", "l_eps_lower", "l_eps_status", "oos_bound_kwh", "certify_time_s",
                "level_shift", "base")
"""The ``model_fits`` columns that hold the :class:`ModelOutcome` field of the same name."""


def to_json(value: Any) -> str:
    """Stable JSON text for a JSON column (sorted keys; numpy numbers as floats)."""
    return json.dumps(value, sort_keys=True, default=float)


def result_tables(results: Sequence[BuildingWeekResult], run_id: str) -> dict[str, pa.Table]:
    """The rows of every result table for a batch of building-weeks, as Arrow tables (the
    tables without rows left out). A missing float (NaN) is stored as NULL."""
    rows: dict[str, list[dict[str, Any]]] = defaultdict(list)
    forecasts: list[tuple[BuildingWeekResult, ModelOutcome]] = []
    for res in results:
        key = {"building_id": res.building_id, "target_week": res.week}
        rows["window_status"].append(
            {**key, "status": res.status, "reason": res.reason, **res.coverage, "run_id": run_id,
             "compute_time_s": res.compute_time_s,
             "left_out": "; ".join(f"{k} {why}" for k, why in res.left_out.items()) or None}
        )
        if res.publication is not None:
            rows["publications"].append({
                **key, "model": res.publication.model, "reason": res.publication.reason,
                "expected_ratio": res.publication.expected_ratio, "run_id": run_id,
                "outcome": res.publication.outcome,
                "ensemble_members": ",".join(res.publication.ensemble_members) or None,
            })
        for out in res.outcomes:
            mkey = {**key, "model": out.model}
            rows["model_fits"].append({
                **mkey, **{name: getattr(out, name) for name in _FIT_COLUMNS},
                "params": None if out.params is None else to_json(out.params), "run_id": run_id,
            })
            for trial in out.trials:
                rows["tuning_trials"].append({
                    **mkey, "trial": trial.number, "params": to_json(trial.params),
                    "value": trial.value, "state": trial.state,
                    "duration_s": trial.duration_s, "error": trial.error, "run_id": run_id,
                })
            if out.status != "ok":
                continue
            s = out.scores
            rows["scores"].append({
                **mkey, "mae": s.mae, "rmse": s.rmse, "mean_actual": s.mean_actual,
                "n_hours": s.n_hours, "n_violations": s.n_violations,
                "n_train_violations": s.n_train_violations, "run_id": run_id,
                **{f"coverage_{level_pct(level)}": s.interval_coverage.get(level, np.nan)
                   for level in LEVELS},
                **{f"width_{level_pct(level)}": s.interval_width.get(level, np.nan)
                   for level in LEVELS},
                "pinball_mean": np.nan if s.pinball_mean is None else s.pinball_mean,
                **{f"{kind}_{quantile_suffix(level)}": values.get(level, np.nan)
                   for kind, values in (("below", s.quantile_below), ("pinball", s.pinball))
                   for level in QUANTILES},
            })
            forecasts.append((res, out))
    tables = {table: _arrow_rows(rows[table]) for table in RESULT_SLICE_TABLES if rows[table]}
    if forecasts:
        tables["forecasts"] = _forecasts_table(forecasts, run_id)
    issued = [(res, out) for res, out in forecasts
              if res.publication is not None and out.model == res.publication.model]
    if issued:
        tables["issued_forecasts"] = _issued_table(issued, run_id)
    published = _published_errors(results)
    if published:
        tables["validation_errors"] = _validation_errors_table(published, run_id)
    return tables


def _published_errors(results: Sequence[BuildingWeekResult]
                      ) -> list[tuple[BuildingWeekResult, ModelOutcome]]:
    """Each building-week's published outcome that still carries its validation errors."""
    found = []
    for res in results:
        if res.publication is None:
            continue
        for out in res.outcomes:
            if (out.model == res.publication.model and out.validation_errors is not None
                    and len(out.validation_errors)):
                found.append((res, out))
    return found


def _validation_errors_table(published: Sequence[tuple[BuildingWeekResult, ModelOutcome]],
                             run_id: str) -> pa.Table:
    """The ``validation_errors`` rows: the published model's validation errors by UTC hour."""
    repeated = _repeater([len(out.validation_errors) for _, out in published])
    return pa.table({
        "building_id": repeated([res.building_id for res, _ in published], pa.large_string()),
        "target_week": repeated([res.week for res, _ in published], pa.date32()),
        "model": repeated([out.model for _, out in published], pa.large_string()),
        "ts": pa.array(np.concatenate([epoch_us(out.validation_errors.index)
                                       for _, out in published]), pa.timestamp("us", tz="UTC")),
        "error": _floats(out.validation_errors.to_numpy() for _, out in published),
        "run_id": repeated([run_id] * len(published), pa.large_string()),
    })


def _repeater(lengths: Sequence[int]) -> Callable[[list[Any], pa.DataType], pa.Array]:
    """For a table of ``lengths[i]`` rows per item ``i``: a column of one value per item,
    each repeated over its item's rows, taken from one small array (never row by row)."""
    part = pa.array(np.repeat(np.arange(len(lengths), dtype=np.int32), lengths))
    return lambda values, kind: pa.array(values, kind).take(part)


def _arrow_rows(rows: list[dict[str, Any]]) -> pa.Table:
    """Rows as an Arrow table with a column for every key of any row (a failed building-week
    has no hour counts): text as large strings, a NaN float as NULL."""
    names = dict.fromkeys(name for row in rows for name in row)
    table = pa.Table.from_pydict({name: [row.get(name) for row in rows] for name in names})
    for i, column in enumerate(table.columns):
        if pa.types.is_string(column.type):
            column = column.cast(pa.large_string())
        elif pa.types.is_floating(column.type):
            column = pc.if_else(pc.is_nan(column), pa.scalar(None, column.type), column)
        table = table.set_column(i, table.field(i).name, column)
    return table


def _forecasts_table(forecasts: Sequence[tuple[BuildingWeekResult, ModelOutcome]],
                     run_id: str) -> pa.Table:
    """The ``forecasts`` rows of a batch's forecasts, built column by column: the repeated
    keys are taken from one small array each, never made row by row as Python objects."""
    repeated = _repeater([len(out.y_hat) for _, out in forecasts])
    hours: dict[int, np.ndarray] = {}  # a building-week's hours, shared by its models
    for res, _ in forecasts:
        if id(res) not in hours:
            hours[id(res)] = epoch_us(res.test_ts)
    columns = {
        "building_id": repeated([res.building_id for res, _ in forecasts], pa.large_string()),
        "model": repeated([out.model for _, out in forecasts], pa.large_string()),
        "target_week": repeated([res.week for res, _ in forecasts], pa.date32()),
        "ts": pa.array(np.concatenate([hours[id(res)] for res, _ in forecasts]),
                       pa.timestamp("us", tz="UTC")),
        "y_hat": _floats(out.y_hat for _, out in forecasts),
        "run_id": repeated([run_id] * len(forecasts), pa.large_string()),
    }
    for level in LEVELS:
        columns[f"y_lo_{level_pct(level)}"] = _floats(_bound(out, level, 0) for _, out in forecasts)
        columns[f"y_hi_{level_pct(level)}"] = _floats(_bound(out, level, 1) for _, out in forecasts)
    for level in QUANTILES:
        columns[quantile_name(level)] = _floats(_quantile(out, level) for _, out in forecasts)
    return pa.table(columns)


def _issued_table(issued: Sequence[tuple[BuildingWeekResult, ModelOutcome]],
                  run_id: str) -> pa.Table:
    """The ``issued_forecasts`` rows: each building-week's published forecast as this run
    issues it, a vintage beside every earlier one (``issued_at`` set again when written)."""
    rows = _forecasts_table(issued, run_id)
    repeated = _repeater([len(out.y_hat) for _, out in issued])
    now = datetime.now(UTC)
    return (rows.append_column("issued_at", pa.array([now] * len(rows),
                                                     pa.timestamp("us", tz="UTC")))
            .append_column("outcome", repeated([res.publication.outcome for res, _ in issued],
                                               pa.large_string()))
            .append_column("reason", repeated([res.publication.reason for res, _ in issued],
                                              pa.large_string())))


def _floats(parts: Iterable[Any]) -> pa.Array:
    """Arrays joined into one float column, NaN as NULL."""
    return pa.array(np.concatenate([np.asarray(p, dtype=np.float64) for p in parts]),
                    from_pandas=True)


def _bound(out: ModelOutcome, level: float, side: int) -> np.ndarray:
    """An outcome's lower (``side`` 0) or upper (1) bound at ``level``; NaN if it has none."""
    bounds = out.intervals.bounds(level)
    return np.full(len(out.y_hat), np.nan) if bounds is None else bounds[side]


def _quantile(out: ModelOutcome, level: float) -> np.ndarray:
    """An outcome's quantile at ``level``; NaN if it has none."""
    quantile = out.intervals.quantiles.get(level)
    return np.full(len(out.y_hat), np.nan) if quantile is None else quantile


def write_results(
    con: duckdb.DuckDBPyConnection,
    results: Sequence[BuildingWeekResult],
    *,
    run_id: str,
    models: Sequence[str],
) -> int:
    """Replace the batch's slices in every result table in one transaction; rows inserted."""
    return write_result_tables(con, result_tables(results, run_id), models)


def write_result_tables(
    con: duckdb.DuckDBPyConnection, tables: dict[str, pa.Table], models: Sequence[str]
) -> int:
    """Replace, in one transaction, the slices of the building-weeks in
    ``tables["window_status"]`` (per model: ``models``) with ``tables``' rows; rows inserted."""
    weeks: dict[date, list[str]] = defaultdict(list)
    status = tables.get("window_status", pa.table({"building_id": [], "target_week": []}))
    for building, week in zip(status["building_id"].to_pylist(),
                              status["target_week"].to_pylist(), strict=True):
        weeks[week].append(building)
    inserted, written_at = 0, datetime.now(UTC)
    with transaction(con):
        for week, buildings in weeks.items():
            for table in RESULT_SLICE_TABLES:
                where: dict[str, Sequence[Any]] = {"building_id": buildings, "target_week": [week]}
                if table not in PER_WEEK_TABLES:
                    where["model"] = list(models)
                rows = tables.get(table)
                if rows is None:
                    rows = empty_rows(con, table)
                rows = rows.filter(pc.equal(rows["target_week"], pa.scalar(week, pa.date32())))
                _, n = replace_slice(con, table, rows, Slice(where_in=where), own_transaction=False)
                inserted += n
            inserted += _add_vintages(con, tables.get("issued_forecasts"), week, buildings,
                                      written_at)
    return inserted


def _add_vintages(con: duckdb.DuckDBPyConnection, issued: pa.Table | None, week: date,
                  buildings: list[str], written_at: datetime) -> int:
    """Add the run's issued forecasts of ``week`` beside every earlier run's, dated
    ``written_at`` (a batch staged while the warehouse was locked was issued when it went
    in, not when it was computed): only the rows of this run are replaced (a staged batch
    loaded twice), never another run's vintage."""
    if issued is None or not len(issued):
        return 0
    rows = issued.filter(pc.equal(issued["target_week"], pa.scalar(week, pa.date32())))
    if not len(rows):
        return 0
    at = rows.schema.get_field_index("issued_at")
    rows = rows.set_column(at, "issued_at", pa.repeat(
        pa.scalar(written_at, pa.timestamp("us", tz="UTC")), len(rows)))
    where = {"building_id": buildings, "target_week": [week],
             "run_id": pc.unique(rows["run_id"]).to_pylist()}
    _, n = replace_slice(con, "issued_forecasts", rows, Slice(where_in=where),
                         own_transaction=False)
    # the zone the bid is exported in, as it was when issued (a building's may change later)
    con.execute("""UPDATE issued_forecasts AS i SET timezone = b.timezone FROM buildings AS b
                   WHERE i.building_id = b.building_id AND i.target_week = ?
                     AND i.run_id IN (SELECT unnest(?::VARCHAR[]))
                     AND i.building_id IN (SELECT unnest(?::VARCHAR[])) AND i.timezone IS NULL""",
                [week, where["run_id"], buildings])
    return n


def load_stored_params(
    con: duckdb.DuckDBPyConnection, building_ids: Iterable[str], models: Sequence[str], before: date
) -> dict[str, dict[str, StoredParams]]:
    """The latest successful tuning per (building, model) from a week before ``before``.

    Only rows that were tuned in their own week count (``tuned_week = target_week``), so reuse
    never chains from a reused fit.
    """
    rows = con.execute(
        """
        SELECT building_id, model, params, tuned_week FROM (
            SELECT building_id, model, params, tuned_week,
                   row_number() OVER (PARTITION BY building_id, model
                                      ORDER BY tuned_week DESC) AS rank
            FROM model_fits
            WHERE status = 'ok' AND tuned_week = target_week AND target_week < ?
              AND building_id IN (SELECT unnest(?::VARCHAR[]))
              AND model IN (SELECT unnest(?::VARCHAR[]))
        ) WHERE rank = 1
        """,
        [before, list(building_ids), list(models)],
    ).fetchall()
    stored: dict[str, dict[str, StoredParams]] = defaultdict(dict)
    for building_id, model, params, tuned_week in rows:
        stored[building_id][model] = StoredParams(json.loads(params), tuned_week)
    return dict(stored)


def load_issued_forecasts(
    con: duckdb.DuckDBPyConnection, building_ids: Iterable[str], week: date,
    config: ForecastConfig,
) -> dict[str, dict[str, IssuedForecast]]:
    """Per building, each model's stored forecast of ``week`` with the hyperparameters
    it was made with, where the run that made it used ``config``'s protocol
    (:meth:`~tasks.protocol.config.ForecastConfig.protocol_record`) and the week's
    window left no weather input out (its models then were not the usual ones)."""
    args = [week, list(building_ids), list(config.models)]
    fits = con.execute(
        """
        SELECT m.building_id, m.model, m.run_id, m.params, r.parameters,
               coalesce(m.level_shift, 0.0)
        FROM model_fits m JOIN runs r ON r.run_id = m.run_id
        LEFT JOIN window_status w ON w.building_id = m.building_id
          AND w.target_week = m.target_week
        WHERE m.target_week = ? AND m.status = 'ok' AND m.params IS NOT NULL
          AND m.building_id IN (SELECT unnest(?::VARCHAR[]))
          AND m.model IN (SELECT unnest(?::VARCHAR[]))
          AND w.left_out IS NULL
        """, args).fetchall()
    wanted = config.protocol_record()
    same_protocol: dict[str, bool] = {}  # by the run's recorded parameters: a few runs, many rows
    made: dict[tuple[str, str, str], tuple[str, float]] = {}  # -> params, level shift
    for building_id, model, run_id, params, parameters, shift in fits:
        if parameters not in same_protocol:
            recorded = json.loads(parameters)
            same_protocol[parameters] = all(recorded.get(name) == value
                                            for name, value in wanted.items())
        if same_protocol[parameters]:
            made[building_id, model, run_id] = params, shift
    if not made:
        return {}
    # The hours as flat arrays through Arrow, in one block per forecast (a join and a list per
    # forecast in SQL cost twice as much, Python objects per hour far more).
    rows = con.sql(
        """
        SELECT building_id, model, run_id, epoch_us(ts) AS hour, y_hat FROM forecasts
        WHERE target_week = ? AND building_id IN (SELECT unnest(?::VARCHAR[]))
          AND model IN (SELECT unnest(?::VARCHAR[])) AND building_id BETWEEN ? AND ?
        ORDER BY building_id, model, ts
        """, params=[*args, *_id_range(args[1])]).to_arrow_table()
    (buildings, b), (models, m) = (
        (codes.dictionary.to_pylist(), codes.indices.to_numpy())
        for codes in (rows[name].combine_chunks().dictionary_encode()
                      for name in ("building_id", "model")))
    block = b * len(models) + m
    starts = np.flatnonzero(np.r_[True, block[1:] != block[:-1]]) if len(block) else block
    hours = rows["hour"].to_numpy()
    y_hat = rows["y_hat"].to_numpy()  # a NULL becomes NaN
    run_ids = rows["run_id"].take(pa.array(starts, pa.int64())).to_pylist()
    issued: dict[str, dict[str, IssuedForecast]] = defaultdict(dict)
    for start, end, run_id in zip(starts, [*starts[1:], len(block)], run_ids, strict=True):
        building_id, model = buildings[b[start]], models[m[start]]
        found = made.get((building_id, model, run_id))
        if found is not None:
            issued[building_id][model] = IssuedForecast(
                json.loads(found[0]), hours[start:end].copy(), y_hat[start:end].copy(), found[1])
    return dict(issued)


def load_issued_history(
    con: duckdb.DuckDBPyConnection, building_ids: Iterable[str], models: Sequence[str],
    start: date, end: date,
) -> dict[str, dict[str, IssuedForecast]]:
    """Per building, each of ``models``' stored forecasts of the target weeks from ``start`` up
    to ``end`` (excluded), as issued, in one series of hours: what a model stacked on them
    corrects."""
    ids = list(building_ids)
    rows = con.sql(
        """
        SELECT building_id, model, epoch_us(ts) AS hour, y_hat FROM forecasts
        WHERE target_week >= ? AND target_week < ?
          AND building_id IN (SELECT unnest(?::VARCHAR[]))
          AND model IN (SELECT unnest(?::VARCHAR[])) AND building_id BETWEEN ? AND ?
        ORDER BY building_id, model, ts
        """, params=[start, end, ids, list(models), *_id_range(ids)]).to_arrow_table()
    history: dict[str, dict[str, IssuedForecast]] = defaultdict(dict)
    frame = rows.to_pandas()
    for (building_id, model), part in frame.groupby(["building_id", "model"], sort=False):
        history[building_id][model] = IssuedForecast(
            {}, part["hour"].to_numpy(np.int64), part["y_hat"].to_numpy(np.float64))
    return dict(history)


def load_recent_forecasts(
    con: duckdb.DuckDBPyConnection, building_ids: Iterable[str], start: date, end: date,
) -> dict[str, dict[tuple[date, str], tuple[np.ndarray, np.ndarray]]]:
    """Per building, every model's stored forecast of each target week from ``start`` up to
    ``end`` (excluded): (week, model) -> (its hours in epoch microseconds, ``y_hat`` as float32).
    With the readings of those weeks, a model's recent errors: what its quantiles are
    calibrated on beside its validation week (:func:`~tasks.protocol.track_record.
    recent_errors`)."""
    ids = list(building_ids)
    if not ids or start >= end:
        return {}
    table = con.sql(
        """
        SELECT building_id, target_week, model, epoch_us(ts) AS hour, y_hat FROM forecasts
        WHERE target_week >= ? AND target_week < ? AND y_hat IS NOT NULL
          AND building_id IN (SELECT unnest(?::VARCHAR[])) AND building_id BETWEEN ? AND ?
        ORDER BY building_id, target_week, model, ts
        """, params=[start, end, ids, *_id_range(ids)]).to_arrow_table()
    if table.num_rows == 0:
        return {}
    # the rows' keys as integer codes (no Python object per row: a fleet's run reads millions)
    encoded = {c: pc.dictionary_encode(table.column(c)).combine_chunks()
               for c in ("building_id", "model")}
    codes = [encoded[c].indices.to_numpy() for c in encoded]
    days = table.column("target_week").cast(pa.int32()).to_numpy()
    changed = np.zeros(table.num_rows, dtype=bool)
    changed[0] = True
    for key in (*codes, days):
        changed[1:] |= key[1:] != key[:-1]
    starts = np.flatnonzero(changed)
    ends = np.r_[starts[1:], table.num_rows]
    names = {c: encoded[c].dictionary.to_pylist() for c in encoded}
    hours = table.column("hour").to_numpy()
    y_hat = table.column("y_hat").to_numpy().astype(np.float32)
    recent: dict[str, dict[tuple[date, str], tuple[np.ndarray, np.ndarray]]] = defaultdict(dict)
    epoch = date(1970, 1, 1)
    for lo, hi in zip(starts, ends, strict=True):
        building_id = names["building_id"][codes[0][lo]]
        week = epoch + timedelta(days=int(days[lo]))
        recent[building_id][(week, names["model"][codes[1][lo]])] = (hours[lo:hi], y_hat[lo:hi])
    return dict(recent)


def _id_range(ids: Sequence[str]) -> list[str | None]:
    """The first and last of ``ids``: the range beside an ``IN`` list of buildings lets DuckDB
    skip the row groups of other buildings. With the list alone a read scanned, and DuckDB
    kept in memory, the forecasts of the whole fleet: a steady week's read of 200 buildings
    peaked at 576 MiB on a 300-building warehouse, 669 on a 900-building one; 566 and 593
    with the range (issue 49)."""
    return [min(ids), max(ids)] if ids else [None, None]


def load_track_record(
    con: duckdb.DuckDBPyConnection, building_ids: Iterable[str], before: date, weeks: int
) -> dict[str, dict[date, dict[str, WeekScore]]]:
    """Per building, each model's MAE, interval coverage and quantiles' calibration in each of
    the ``weeks`` scored target weeks before ``before``: the building's recent record."""
    coverage = ", ".join(f"coverage_{level_pct(level)}" for level in LEVELS)
    below = ", ".join(f"below_{quantile_suffix(level)}" for level in QUANTILES)
    rows = con.execute(
        f"""
        SELECT building_id, target_week, model, mae, {coverage}, {below} FROM scores
        WHERE n_hours > 0 AND target_week < ? AND target_week >= ?
          AND building_id IN (SELECT unnest(?::VARCHAR[]))
        """,
        [before, before - timedelta(weeks=weeks), list(building_ids)],
    ).fetchall()
    record: dict[str, dict[date, dict[str, WeekScore]]] = defaultdict(lambda: defaultdict(dict))
    for building_id, week, model, mae, *shares in rows:
        covered, held = shares[:len(LEVELS)], shares[len(LEVELS):]
        record[building_id][week][model] = WeekScore(
            mae, {level: c for level, c in zip(LEVELS, covered, strict=True) if c is not None},
            {level: b for level, b in zip(QUANTILES, held, strict=True) if b is not None})
    return {b: dict(weeks_) for b, weeks_ in record.items()}
