"""Warehouse I/O of the forecasting results: rows from protocol outputs, idempotent writes.

A batch of :class:`~wadiro_fleet.tasks.protocol.forecasting.BuildingWeekResult` becomes one
Arrow table per result table (:func:`result_tables`, the form a run stages it in), written in
ONE short transaction that, for each target week, replaces the slice (those buildings x that
week x the run's models) in every result table. Rerunning a week or resuming a killed backfill therefore replaces rows and
never duplicates them, and a model that produced nothing this time leaves no stale row behind.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Sequence
from datetime import date, timedelta
from typing import Any

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from wadiro_fleet.tasks.protocol.config import ForecastConfig
from wadiro_fleet.tasks.protocol.forecasting import (
    BuildingWeekResult,
    IssuedForecast,
    ModelOutcome,
    StoredParams,
)
from wadiro_fleet.tasks.protocol.intervals import LEVELS
from wadiro_fleet.tasks.protocol.track_record import WeekScore
from wadiro_fleet.tasks.warehouse.connection import transaction
from wadiro_fleet.tasks.warehouse.rescoring import level_pct
from wadiro_fleet.tasks.warehouse.slices import Slice, empty_rows, replace_slice

PER_MODEL_TABLES = ("forecasts", "scores", "tuning_trials", "model_fits")
PER_WEEK_TABLES = ("window_status", "publications")
RESULT_SLICE_TABLES = (*PER_WEEK_TABLES, *PER_MODEL_TABLES)
"""The tables a batch of results replaces its slice of: per (building, week), and per
(building, week, model) for the run's models."""


def to_json(value: Any) -> str:
    """Stable JSON text for a JSON column (sorted keys; numpy numbers as floats)."""
    return json.dumps(value, sort_keys=True, default=float)


def result_frames(results: Sequence[BuildingWeekResult], run_id: str) -> dict[str, pd.DataFrame]:
    """The rows of every result table for a batch of building-weeks."""
    rows: dict[str, list[dict[str, Any]]] = defaultdict(list)
    forecasts: list[dict[str, np.ndarray]] = []
    for res in results:
        key = {"building_id": res.building_id, "target_week": res.week}
        rows["window_status"].append(
            {**key, "status": res.status, "reason": res.reason, **res.coverage, "run_id": run_id,
             "compute_time_s": res.compute_time_s}
        )
        if res.publication is not None:
            rows["publications"].append({
                **key, "model": res.publication.model, "reason": res.publication.reason,
                "expected_ratio": res.publication.expected_ratio, "run_id": run_id,
            })
        for out in res.outcomes:
            mkey = {**key, "model": out.model}
            rows["model_fits"].append({
                **mkey, "status": out.status, "error": out.error,
                "params": None if out.params is None else to_json(out.params),
                "tuned_week": out.tuned_week, "solver": out.solver,
                "solver_status": out.solver_status, "objective": out.objective,
                "fit_time_s": out.fit_time_s, "tuning_time_s": out.tuning_time_s,
                "n_train": out.n_train, "run_id": run_id, "validation_mae": out.validation_mae,
                "validation_source": out.validation_source,
                "l_eps": out.l_eps, "l_eps_lower": out.l_eps_lower,
                "l_eps_status": out.l_eps_status, "oos_bound_kwh": out.oos_bound_kwh,
                "certify_time_s": out.certify_time_s,
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
                **{f"coverage_{level_pct(level)}": value for level, value in s.interval_coverage.items()},
                **{f"width_{level_pct(level)}": value for level, value in s.interval_width.items()},
            })
            forecasts.append(_forecast_columns(res, out, run_id))
    frames = {table: pd.DataFrame(rows[table]) for table in RESULT_SLICE_TABLES}
    if not frames["scores"].empty:  # every interval column, even when no model had intervals
        for level in LEVELS:
            for column in (f"coverage_{level_pct(level)}", f"width_{level_pct(level)}"):
                if column not in frames["scores"]:
                    frames["scores"][column] = np.nan
    if forecasts:
        columns = {name: np.concatenate([part[name] for part in forecasts])
                   for name in forecasts[0]}
        columns["ts"] = pd.DatetimeIndex(columns["ts"]).tz_localize("UTC")
        frames["forecasts"] = pd.DataFrame(columns)
    for frame in frames.values():
        if "target_week" in frame:
            frame["target_week"] = pd.to_datetime(frame["target_week"]).dt.date
    return frames


def _forecast_columns(res: BuildingWeekResult, out: ModelOutcome,
                      run_id: str) -> dict[str, np.ndarray]:
    """One model's forecast of a building-week as the columns of its ``forecasts`` rows (joined
    into one frame per batch: a frame per forecast costs more than the rows in it)."""
    n = len(out.y_hat)
    columns: dict[str, np.ndarray] = {
        "building_id": np.full(n, res.building_id, dtype=object),
        "model": np.full(n, out.model, dtype=object),
        "target_week": np.full(n, res.week, dtype=object),
        "ts": pd.DatetimeIndex(res.test_ts).tz_convert("UTC").tz_localize(None).to_numpy(),
        "y_hat": np.asarray(out.y_hat, dtype=np.float64),
        "run_id": np.full(n, run_id, dtype=object),
    }
    for level in LEVELS:
        bounds = out.intervals.bounds(level)
        lower, upper = (np.full(n, np.nan), np.full(n, np.nan)) if bounds is None else bounds
        columns[f"y_lo_{level_pct(level)}"] = np.asarray(lower, dtype=np.float64)
        columns[f"y_hi_{level_pct(level)}"] = np.asarray(upper, dtype=np.float64)
    return columns


def result_tables(results: Sequence[BuildingWeekResult], run_id: str) -> dict[str, pa.Table]:
    """:func:`result_frames` as Arrow tables, the tables without rows left out."""
    return {table: pa.Table.from_pandas(frame, preserve_index=False)
            for table, frame in result_frames(results, run_id).items() if not frame.empty}


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
    for building, week in zip(status["building_id"].to_pylist(), status["target_week"].to_pylist()):
        weeks[week].append(building)
    inserted = 0
    with transaction(con):
        for week, buildings in weeks.items():
            for table in RESULT_SLICE_TABLES:
                where: dict[str, Sequence[Any]] = {"building_id": buildings, "target_week": [week]}
                if table not in PER_WEEK_TABLES:
                    where["model"] = list(models)
                rows = tables.get(table)
                if rows is not None:
                    rows = rows.filter(pc.equal(rows["target_week"], pa.scalar(week, pa.date32())))
                _, n = replace_slice(
                    con, table, rows if rows is not None and rows.num_rows else empty_rows(con, table),
                    Slice(where_in=where), own_transaction=False,
                )
                inserted += n
    return inserted


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
    (:meth:`~wadiro_fleet.tasks.protocol.config.ForecastConfig.protocol_record`)."""
    # Instants as microseconds since the epoch (DuckDB's resolution): a list of integers
    # converts at once, a list of time-zone-aware datetimes one Python object at a time.
    rows = con.execute(
        """
        SELECT f.building_id, f.model, m.params, r.parameters,
               list(epoch_us(f.ts) ORDER BY f.ts), list(f.y_hat ORDER BY f.ts)
        FROM forecasts f
        JOIN model_fits m ON m.building_id = f.building_id AND m.model = f.model
                         AND m.target_week = f.target_week AND m.run_id = f.run_id
        JOIN runs r ON r.run_id = f.run_id
        WHERE f.target_week = ? AND m.status = 'ok' AND m.params IS NOT NULL
          AND f.building_id IN (SELECT unnest(?::VARCHAR[]))
          AND f.model IN (SELECT unnest(?::VARCHAR[]))
        GROUP BY ALL
        """,
        [week, list(building_ids), list(config.models)],
    ).fetchall()
    wanted = config.protocol_record()
    same_protocol: dict[str, bool] = {}  # by the run's recorded parameters: a few runs, many rows
    issued: dict[str, dict[str, IssuedForecast]] = defaultdict(dict)
    for building_id, model, params, parameters, ts, y_hat in rows:
        if parameters not in same_protocol:
            recorded = json.loads(parameters)
            same_protocol[parameters] = all(recorded.get(name) == value
                                            for name, value in wanted.items())
        if not same_protocol[parameters]:
            continue
        index = pd.DatetimeIndex(np.asarray(ts, dtype="datetime64[us]")).tz_localize("UTC")
        values = np.array(y_hat, dtype=np.float64)  # a missing value (None) becomes NaN
        issued[building_id][model] = IssuedForecast(json.loads(params), pd.Series(values, index=index))
    return dict(issued)


def load_track_record(
    con: duckdb.DuckDBPyConnection, building_ids: Iterable[str], before: date, weeks: int
) -> dict[str, dict[date, dict[str, WeekScore]]]:
    """Per building, each model's MAE and interval coverage in each of the ``weeks`` scored
    target weeks before ``before``: the building's recent record."""
    coverage = ", ".join(f"coverage_{level_pct(level)}" for level in LEVELS)
    rows = con.execute(
        f"""
        SELECT building_id, target_week, model, mae, {coverage} FROM scores
        WHERE n_hours > 0 AND target_week < ? AND target_week >= ?
          AND building_id IN (SELECT unnest(?::VARCHAR[]))
        """,
        [before, before - timedelta(weeks=weeks), list(building_ids)],
    ).fetchall()
    record: dict[str, dict[date, dict[str, WeekScore]]] = defaultdict(lambda: defaultdict(dict))
    for building_id, week, model, mae, *covered in rows:
        record[building_id][week][model] = WeekScore(
            mae, {level: c for level, c in zip(LEVELS, covered) if c is not None})
    return {b: dict(weeks_) for b, weeks_ in record.items()}
