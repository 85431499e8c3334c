"""Warehouse I/O of the forecasting results: rows from protocol outputs, idempotent writes.

A batch of :class:`~wadiro_fleet.tasks.protocol.forecasting.BuildingWeekResult` is written in
ONE short transaction that, for each target week, replaces the slice (those buildings x that
week x the run's models) in every result table. Rerunning a week or resuming a killed backfill therefore replaces rows and
never duplicates them, and a model that produced nothing this time leaves no stale row behind.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Sequence
from datetime import date
from typing import Any

import duckdb
import pandas as pd
from wadiro_fleet.tasks.protocol.forecasting import BuildingWeekResult, StoredParams
from wadiro_fleet.tasks.warehouse.connection import transaction
from wadiro_fleet.tasks.warehouse.slices import Slice, empty_rows, replace_slice

PER_MODEL_TABLES = ("forecasts", "scores", "tuning_trials", "model_fits")
RESULT_SLICE_TABLES = ("window_status", *PER_MODEL_TABLES)
"""The tables a batch of results replaces its slice of."""


def to_json(value: Any) -> str:
    """Stable JSON text for a JSON column (sorted keys; numpy numbers as floats)."""
    return json.dumps(value, sort_keys=True, default=float)


def result_frames(results: Sequence[BuildingWeekResult], run_id: str) -> dict[str, pd.DataFrame]:
    """The rows of every result table for a batch of building-weeks."""
    rows: dict[str, list[dict[str, Any]]] = defaultdict(list)
    forecasts: list[pd.DataFrame] = []
    for res in results:
        key = {"building_id": res.building_id, "target_week": res.week}
        rows["window_status"].append(
            {**key, "status": res.status, "reason": res.reason, **res.coverage, "run_id": run_id}
        )
        for out in res.outcomes:
            mkey = {**key, "model": out.model}
            rows["model_fits"].append({
                **mkey, "status": out.status, "error": out.error,
                "params": None if out.params is None else to_json(out.params),
                "tuned_week": out.tuned_week, "solver": out.solver,
                "solver_status": out.solver_status, "objective": out.objective,
                "fit_time_s": out.fit_time_s, "tuning_time_s": out.tuning_time_s,
                "n_train": out.n_train, "run_id": run_id, "l_eps": out.l_eps,
                "l_eps_lower": out.l_eps_lower, "l_eps_status": out.l_eps_status,
                "oos_bound_kwh": out.oos_bound_kwh, "certify_time_s": out.certify_time_s,
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
            })
            forecasts.append(pd.DataFrame({
                "building_id": res.building_id, "model": out.model, "target_week": res.week,
                "ts": res.test_ts.to_numpy(), "y_hat": out.y_hat, "run_id": run_id,
            }))
    frames = {table: pd.DataFrame(rows[table]) for table in RESULT_SLICE_TABLES}
    if forecasts:
        frames["forecasts"] = pd.concat(forecasts, ignore_index=True)
    for frame in frames.values():
        if "target_week" in frame:
            frame["target_week"] = pd.to_datetime(frame["target_week"]).dt.date
    return frames


def write_results(
    con: duckdb.DuckDBPyConnection,
    results: Sequence[BuildingWeekResult],
    *,
    run_id: str,
    models: Sequence[str],
) -> int:
    """Replace the batch's slices in every result table in one transaction; rows inserted."""
    frames = result_frames(results, run_id)
    weeks: dict[date, list[str]] = defaultdict(list)
    for res in results:
        weeks[res.week].append(res.building_id)
    inserted = 0
    with transaction(con):
        for week, buildings in weeks.items():
            for table in RESULT_SLICE_TABLES:
                where: dict[str, Sequence[Any]] = {"building_id": buildings, "target_week": [week]}
                if table != "window_status":
                    where["model"] = list(models)
                frame = frames[table]
                if not frame.empty:
                    frame = frame[(frame["target_week"] == week)]
                _, n = replace_slice(
                    con, table, frame if not frame.empty else empty_rows(con, table),
                    Slice(where_in=where), own_transaction=False,
                )
                inserted += n
    return inserted


def rescore_forecasts(con: duckdb.DuckDBPyConnection, since: date) -> int:
    """Score stored forecasts again where actuals arrived after they were scored.

    A live forecast is written before its week happens, so it is scored on no hour at all;
    once the readings are in, this recomputes MAE, RMSE, mean actual and hours scored of every
    target week from ``since`` on whose forecasts now have more hours with actuals. Violations
    depend on the forecasts alone and stay as they are. Returns the number of updated rows.
    """
    return con.execute(
        """
        UPDATE scores AS s
        SET mae = fresh.mae, rmse = fresh.rmse, mean_actual = fresh.mean_actual,
            n_hours = fresh.n_hours
        FROM (
            SELECT f.building_id, f.model, f.target_week,
                   avg(abs(f.y_hat - m.kwh))            AS mae,
                   sqrt(avg((f.y_hat - m.kwh) ^ 2))     AS rmse,
                   avg(m.kwh)                           AS mean_actual,
                   count(*)                             AS n_hours
            FROM forecasts f
            JOIN meter_readings m USING (building_id, ts)
            WHERE f.target_week >= ? AND f.y_hat IS NOT NULL AND m.kwh IS NOT NULL
            GROUP BY f.building_id, f.model, f.target_week
        ) AS fresh
        WHERE s.building_id = fresh.building_id AND s.model = fresh.model
          AND s.target_week = fresh.target_week AND fresh.n_hours > s.n_hours
        """,
        [since],
    ).fetchone()[0]


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
