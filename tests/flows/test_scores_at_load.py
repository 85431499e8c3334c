"""A run's stored scores follow the readings stored when its results are written (issue 30:
"corrected readings ingested while a backfill computes leave 6 of 12 stored scores stale").

A batch is computed (and scored) against the readings the run read; corrected readings are
ingested before it is loaded, as they would be while a long backfill computes or while its
results wait beside a locked warehouse; the load must leave the scores of the readings stored
then, recomputed here by hand from the stored forecasts and readings."""

from __future__ import annotations

import uuid
from datetime import date
from pathlib import Path

import pandas as pd
import pytest

from flows.settings import BackfillSettings
from tasks.forecast_tasks import forecast_batch
from tasks.warehouse.connection import connect
from tasks.warehouse.pending import load_staged, stage_results
from tasks.warehouse.run_store import RunStore
from tests.cli_runs import invoke
from tests.flows.warehouse_rows import make_warehouse

WEEK = date(2024, 3, 25)
CORRECTED = ("synthetic_b00000", "synthetic_b00002")
FACTOR = 1.5


def mae_by_hand(warehouse: Path, run_id: str) -> dict[tuple[str, str], float]:
    """MAE per (building, model) of the run's forecasts against the readings stored now."""
    with connect(warehouse, read_only=True) as con:
        forecasts = con.execute("SELECT building_id, model, ts, y_hat FROM forecasts "
                                "WHERE run_id = ?", [run_id]).df()
        readings = con.execute("SELECT building_id, ts, kwh FROM meter_readings").df()
    both = forecasts.merge(readings, on=["building_id", "ts"]).dropna(subset=["y_hat", "kwh"])
    errors = (both["y_hat"] - both["kwh"]).abs().groupby([both["building_id"], both["model"]])
    return errors.mean().to_dict()


def stored_mae(warehouse: Path, run_id: str) -> dict[tuple[str, str], float]:
    with connect(warehouse, read_only=True) as con:
        rows = con.execute("SELECT building_id, model, mae FROM scores WHERE run_id = ?",
                           [run_id]).fetchall()
    return {(b, m): mae for b, m, mae in rows}


def test_readings_corrected_between_compute_and_load_are_in_the_stored_scores(
    tmp_path, no_prefect_server
):
    warehouse = make_warehouse(tmp_path / "w.duckdb", buildings=3)
    settings = BackfillSettings(warehouse=str(warehouse), models=["svr", "seasonal_naive"],
                                trials=2)
    store = RunStore(str(warehouse))
    run = store.open_run(str(uuid.uuid4()), "backfill", [WEEK], None, settings.forecast,
                         settings.record([WEEK], "backfill"))
    [batch] = store.read_batches(run, [list(run.building_ids)])
    results = forecast_batch.fn(batch.jobs, run.config, batch.label)  # scored on the old readings
    # kept beside the warehouse, as a locked one keeps it
    stage_results(warehouse, run.run_id, results, run.config.models)
    before = mae_by_hand_of_results(results)

    # the operator re-sends two buildings' week, corrected, while the batch waits
    with connect(warehouse, read_only=True) as con:
        week = con.execute(
            "SELECT building_id, strftime(ts AT TIME ZONE 'UTC', '%Y-%m-%d %H:%M') AS ts, kwh "
            "FROM meter_readings WHERE building_id IN (SELECT unnest(?::VARCHAR[])) AND ts >= ? "
            "AND ts < ? + INTERVAL 8 DAY AND kwh IS NOT NULL",
            [list(CORRECTED), WEEK, WEEK]).df()
    week["kwh"] *= FACTOR
    week.to_csv(tmp_path / "corrected.csv", index=False)
    ingested = invoke("ingest", "readings", tmp_path / "corrected.csv", "--timezone", "UTC",
                      "--warehouse", warehouse)
    assert ingested.exit_code == 0, ingested.output

    with connect(warehouse) as con:
        assert load_staged(con, warehouse, run.run_id).building_weeks == 3
    stored, by_hand = stored_mae(warehouse, run.run_id), mae_by_hand(warehouse, run.run_id)
    assert stored.keys() == by_hand.keys() == before.keys() and len(stored) == 6
    for key, mae in by_hand.items():
        assert stored[key] == pytest.approx(mae, rel=1e-9)
        # the batch's own scores were stale exactly for the corrected buildings
        assert (before[key] == pytest.approx(mae, rel=1e-9)) == (key[0] not in CORRECTED)


def mae_by_hand_of_results(results) -> dict[tuple[str, str], float]:
    """The MAE each result carried when it was computed (on the readings read then)."""
    from tasks.warehouse.results import result_tables

    scores = result_tables(results, "r")["scores"].to_pandas()
    return {(row.building_id, row.model): row.mae for row in scores.itertuples()}


def test_without_corrections_the_loaded_scores_are_the_protocol_s(tmp_path, no_prefect_server):
    """Re-scoring at load agrees with the scores the protocol computed (it updates only rows
    whose numbers changed), and both with the MAE by hand."""
    warehouse = make_warehouse(tmp_path / "w.duckdb", buildings=2)
    result = invoke("backfill", "--start", WEEK, "--end", WEEK, "--models", "seasonal_naive",
                    "--warehouse", warehouse)
    assert result.exit_code == 0, result.output
    with connect(warehouse, read_only=True) as con:
        run_id = con.execute("SELECT run_id FROM runs").fetchone()[0]
    scores = stored_mae(warehouse, run_id)
    assert scores == pytest.approx(mae_by_hand(warehouse, run_id), rel=1e-9)
    assert all(not pd.isna(v) for v in scores.values())
