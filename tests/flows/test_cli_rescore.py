"""Corrected readings re-score the weeks already scored (issue 18, item 4): the ingest that
changes a scored week's readings updates its ``scores`` rows in place, in its own transaction,
and the weekly run's re-scoring catches readings changed by any other writer too."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tasks.warehouse.connection import connect
from tasks.warehouse.rescoring import rescore_forecasts
from tests.cli_runs import invoke

B0, B7 = "UCam_Building_b0", "UCam_Building_b7"
WEEK = date(2019, 3, 25)
MODELS = "seasonal_naive,wadiro_linreg"
SCORES = ("building_id, model, target_week, mae, rmse, mean_actual, n_hours, n_violations, "
          "n_train_violations, coverage_80, coverage_95, width_80, width_95")


@pytest.fixture(scope="module")
def scored(tmp_path_factory, cambridge_archive) -> Path:
    """Two real buildings' winter 2019, and their week of 25 March 2019 forecast and scored."""
    from flows import engine

    warehouse = tmp_path_factory.mktemp("rescore") / "w.duckdb"
    with pytest.MonkeyPatch.context() as patch:  # no Prefect server: the commands run directly
        patch.setattr(engine, "configured_api_url", lambda: "")
        for args in (("ingest", "cambridge", "--path", cambridge_archive, "--buildings", f"{B0},{B7}",
                      "--start", "2018-12-17", "--end", "2019-03-31"),
                     ("backfill", "--start", WEEK, "--end", WEEK, "--models", MODELS, "--trials", "2",
                      "--runner", "threads", "--certify-nodes", "0")):
            result = invoke(*args, "--warehouse", warehouse)
            assert result.exit_code == 0, result.output
    return warehouse


@pytest.fixture
def warehouse(scored, tmp_path) -> Path:
    copy = tmp_path / "w.duckdb"
    copy.write_bytes(scored.read_bytes())
    return copy


def scores(warehouse: Path) -> dict[tuple, tuple]:
    """(building, model, week) -> the rest of its ``scores`` row; refuses duplicated keys."""
    with connect(warehouse, read_only=True) as con:
        rows = con.execute(f"SELECT {SCORES} FROM scores ORDER BY ALL").fetchall()
    keyed = {row[:3]: row[3:] for row in rows}
    assert len(keyed) == len(rows), "a score stored twice"
    return keyed


def by_hand(warehouse: Path, building: str, model: str) -> tuple[float, float, int]:
    """MAE, RMSE and hours scored of a stored forecast against the stored readings, in numpy."""
    with connect(warehouse, read_only=True) as con:
        frame = con.execute(
            "SELECT f.y_hat, m.kwh FROM forecasts f LEFT JOIN meter_readings m USING (building_id, ts) "
            "WHERE f.building_id = ? AND f.model = ? AND f.target_week = ?",
            [building, model, WEEK]).df()
    both = frame.dropna()
    error = both["y_hat"].to_numpy() - both["kwh"].to_numpy()
    return float(np.mean(np.abs(error))), float(np.sqrt(np.mean(error ** 2))), len(both)


def test_the_stored_scores_are_those_of_the_stored_readings(scored):
    stored = scores(scored)
    assert len(stored) == 4 and all(row[3] == 167 for row in stored.values())  # clocks go forward
    for building, model, _ in stored:
        mae, rmse, n = by_hand(scored, building, model)
        assert stored[(building, model, WEEK)][:2] == pytest.approx((mae, rmse), rel=1e-12)
    with connect(scored) as con:
        assert rescore_forecasts(con) == 0  # nothing changed: nothing rewritten


def test_corrected_readings_re_score_their_week_in_place(warehouse, tmp_path, no_prefect_server):
    before = scores(warehouse)
    with connect(warehouse, read_only=True) as con:
        week = con.execute("SELECT ts, kwh FROM meter_readings WHERE building_id = ? AND ts >= ? "
                           "AND ts < ? + INTERVAL 7 DAY ORDER BY ts", [B7, WEEK, WEEK]).df()
    week["ts"] = pd.to_datetime(week["ts"], utc=True)
    corrected = [f"{v * 1.5:.4f}" if i % 24 else "" for i, v in enumerate(week["kwh"])]  # 7 blanks
    path = tmp_path / "corrected.csv"
    path.write_text("building_id,ts,kwh\n" + "".join(
        f"{B7},{t:%Y-%m-%dT%H:%MZ},{v}\n" for t, v in zip(week["ts"], corrected, strict=True)))
    result = invoke("ingest", "readings", path, "--warehouse", warehouse)
    assert result.exit_code == 0, result.output
    assert "re-scored 2 stored forecast score(s) whose readings changed" in result.output

    after = scores(warehouse)
    assert after.keys() == before.keys()
    for model in MODELS.split(","):
        key = (B7, model, WEEK)
        mae, rmse, n = by_hand(warehouse, B7, model)
        assert n == 167 - 7 and after[key][3] == n
        assert after[key][:2] == pytest.approx((mae, rmse), rel=1e-12)
        assert after[key][0] != pytest.approx(before[key][0], rel=1e-3)
        assert after[key][4:6] == before[key][4:6]  # violations: the forecast's own
        assert after[(B0, model, WEEK)] == before[(B0, model, WEEK)]
    again = invoke("ingest", "readings", path, "--warehouse", warehouse)
    assert again.exit_code == 0 and "re-scored" not in again.output
    assert scores(warehouse) == after


def test_the_weekly_runs_re_scoring_catches_readings_changed_by_another_writer(warehouse):
    before = scores(warehouse)
    with connect(warehouse) as con:
        con.execute("UPDATE meter_readings SET kwh = kwh + 3 WHERE building_id = ? AND ts >= ? "
                    "AND ts < ? + INTERVAL 7 DAY", [B0, WEEK, WEEK])
        assert rescore_forecasts(con, WEEK) == 2
        assert rescore_forecasts(con, WEEK) == 0
    after = scores(warehouse)
    for model in MODELS.split(","):
        mae, rmse, n = by_hand(warehouse, B0, model)
        assert after[(B0, model, WEEK)][:2] == pytest.approx((mae, rmse), rel=1e-12) and n == 167
        assert after[(B7, model, WEEK)] == before[(B7, model, WEEK)]
