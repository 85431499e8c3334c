"""The forecasting flows on Prefect's test backend: failures recorded, runs table, artifacts, reuse."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, date, datetime

import pytest
from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import (
    ArtifactFilter,
    ArtifactFilterFlowRunId,
    ArtifactFilterKey,
)
from prefect.exceptions import ParameterTypeError
from pydantic import ValidationError

from flows.forecast import backfill_flow, weekly_forecast_flow
from flows.settings import BackfillSettings
from tasks.warehouse.connection import connect
from tests.flows.warehouse_rows import FAST_MODELS, WEEKS, make_warehouse, result_rows

GOOD = ["synthetic_b00000", "synthetic_b00001"]
EMPTY = "empty_b"  # a building without a single reading
BROKEN = "broken_b"  # a holiday calendar that does not exist: every week of it fails


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory):
    path = make_warehouse(tmp_path_factory.mktemp("flow") / "w.duckdb", buildings=2)
    with connect(path) as con:
        site = con.execute("SELECT site_id FROM buildings LIMIT 1").fetchone()[0]
        for building_id, country in ((EMPTY, "GB"), (BROKEN, "XX")):
            con.execute(
                "INSERT INTO buildings (building_id, site_id, timezone, holiday_country, holiday_subdiv, building_type, source) VALUES (?, ?, 'Europe/London', ?, NULL, 'office', 'test')",
                [building_id, site, country],
            )
    return path


@pytest.fixture(scope="module")
def backfill(warehouse, prefect_backend):
    """One backfill over two weeks of the whole fleet, batches of two buildings."""
    return backfill_flow(
        start=WEEKS[0], end=WEEKS[-1],
        settings=BackfillSettings(warehouse=str(warehouse), models=FAST_MODELS, trials=2,
                                  batch_size=2),
    )


def test_failures_are_recorded_and_the_run_goes_on(backfill, warehouse):
    assert (backfill.building_weeks, backfill.ok, backfill.skipped, backfill.failed) == (8, 4, 2, 2)
    assert len(backfill.failures) == 2 and all(f.startswith(BROKEN) for f in backfill.failures)
    with connect(warehouse, read_only=True) as con:
        status = dict(con.execute(
            "SELECT building_id || ' ' || target_week, status || ': ' || coalesce(reason, '') "
            "FROM window_status WHERE run_id = ?", [backfill.run_id]).fetchall())
        run = con.execute("SELECT status, n_building_weeks, n_ok, n_skipped, n_failed, message, "
                          "finished_at IS NOT NULL FROM runs WHERE run_id = ?",
                          [backfill.run_id]).fetchone()
        scored = con.execute("SELECT DISTINCT building_id FROM scores ORDER BY 1").fetchall()
    assert len(status) == 8
    for week in WEEKS:
        assert status[f"{BROKEN} {week}"].startswith("failed: ") and "XX" in status[f"{BROKEN} {week}"]
        assert status[f"{EMPTY} {week}"].startswith("insufficient_data: ")
        for building_id in GOOD:
            assert status[f"{building_id} {week}"].startswith("ok: ")
    assert run[:5] == ("completed_with_failures", 8, 4, 2, 2)
    assert BROKEN in run[5] and run[6]
    assert scored == [(b,) for b in GOOD]


def test_every_model_is_scored_for_every_ok_week(backfill, warehouse):
    with connect(warehouse, read_only=True) as con:
        n_scores = con.execute("SELECT count(*) FROM scores WHERE run_id = ?",
                               [backfill.run_id]).fetchone()[0]
        hours = con.execute(
            "SELECT s.n_hours, (SELECT count(*) FROM forecasts f WHERE f.building_id = s.building_id"
            " AND f.model = s.model AND f.target_week = s.target_week) FROM scores s"
        ).fetchall()
    assert n_scores == len(GOOD) * len(WEEKS) * len(FAST_MODELS)
    # 167 local hours in the spring-forward week, 168 after it; scored hours never exceed them
    assert all(scored <= forecast and forecast in (167, 168) for scored, forecast in hours)


def _artifacts(key: str, run_id: str):
    """The artifacts with ``key`` that the flow run ``run_id`` created (other tests make more)."""
    with get_client(sync_client=True) as client:
        return client.read_artifacts(artifact_filter=ArtifactFilter(
            key=ArtifactFilterKey(any_=[key]), flow_run_id=ArtifactFilterFlowRunId(any_=[run_id])))


def test_progress_and_leaderboard_artifacts(backfill, warehouse):
    progress = _artifacts("backfill-progress", backfill.run_id)
    assert progress and progress[0].type == "progress" and float(progress[0].data) == 100.0
    boards = _artifacts("backfill-leaderboard", backfill.run_id)
    assert boards and boards[0].type == "table"
    with connect(warehouse, read_only=True) as con:
        expected = dict(con.execute("SELECT model, count(*) FROM scores WHERE run_id = ? "
                                    "GROUP BY model", [backfill.run_id]).fetchall())
        expected["published"] = con.execute(
            "SELECT count(*) FROM publications WHERE run_id = ?", [backfill.run_id]).fetchone()[0]
    table = boards[0].data
    rows = json.loads(table) if isinstance(table, str) else table
    assert {r["model"]: r["n_building_weeks"] for r in rows} == expected


def test_weekly_forecast_reuses_the_backfills_tuning(backfill, warehouse):
    # settings given as a deployment gives them: a partial JSON object, the rest from the
    # weekly run's defaults (tuning = reuse)
    summary = weekly_forecast_flow(
        as_of=datetime(2024, 4, 1, 6, tzinfo=UTC),
        settings={"warehouse": str(warehouse), "buildings": GOOD, "models": FAST_MODELS,
                  "trials": 2},
    )
    # a run at Monday 2024-04-01 06:00 forecasts the week that began that day
    assert summary.weeks == [date(2024, 4, 1)] and summary.ok == len(GOOD)
    with connect(warehouse, read_only=True) as con:
        fits = con.execute(
            "SELECT model, tuned_week, (SELECT count(*) FROM tuning_trials t WHERE t.run_id = m.run_id"
            " AND t.model = m.model) FROM model_fits m WHERE run_id = ? AND model <> 'seasonal_naive'",
            [summary.run_id]).fetchall()
        flows = dict(con.execute("SELECT run_id, flow FROM runs").fetchall())
    assert len(fits) == len(GOOD) * 2
    assert all(tuned == WEEKS[0] and trials == 0 for _, tuned, trials in fits)
    assert flows[summary.run_id] == "forecast" and flows[backfill.run_id] == "backfill"


def test_bad_settings_are_refused_before_the_run_starts(warehouse, prefect_backend):
    with pytest.raises(ValidationError, match="batch_size"):
        BackfillSettings(warehouse=str(warehouse), batch_size=0)
    with pytest.raises(ValidationError, match="dask runner needs dask_address"):
        BackfillSettings(runner="dask")
    with pytest.raises(ParameterTypeError, match="feature_set"):
        backfill_flow(start=WEEKS[0], end=WEEKS[0],
                      settings={"warehouse": str(warehouse), "feature_set": "bogus"})
    with connect(warehouse, read_only=True) as con:
        assert con.execute("SELECT count(*) FROM runs WHERE status = 'crashed'").fetchone() == (0,)


@pytest.mark.slow
@pytest.mark.parametrize("runner", ["processes", "threads"])
def test_parallel_runners_match_one_thread(runner, tmp_path, prefect_backend, worker_processes):
    parallel = make_warehouse(tmp_path / f"{runner}.duckdb", buildings=2)
    on_thread = tmp_path / "thread.duckdb"
    shutil.copy(parallel, on_thread)
    run = {"models": FAST_MODELS, "trials": 2, "batch_size": 1}
    summary = backfill_flow(WEEKS[0], WEEKS[-1], BackfillSettings(
        warehouse=str(parallel), runner=runner, workers=2, **run))
    assert summary.ok == 2 * len(WEEKS)
    backfill_flow(WEEKS[0], WEEKS[-1], BackfillSettings(
        warehouse=str(on_thread), runner="threads", workers=1, **run))
    assert result_rows(parallel) == result_rows(on_thread)


def test_a_building_with_unreadable_data_fails_alone(tmp_path, prefect_backend):
    """A duplicated reading makes one building's data unreadable: it fails, its batch-mate runs."""
    path = make_warehouse(tmp_path / "dup.duckdb", buildings=2)
    with connect(path) as con:
        con.execute("INSERT INTO meter_readings SELECT * FROM meter_readings "
                    "WHERE building_id = 'synthetic_b00001' LIMIT 1")
    summary = backfill_flow(WEEKS[0], WEEKS[0], BackfillSettings(
        warehouse=str(path), models=["seasonal_naive"], trials=1, batch_size=2))
    assert (summary.ok, summary.failed) == (1, 1)
    with connect(path, read_only=True) as con:
        status = dict(con.execute("SELECT building_id, status || ' ' || reason FROM window_status")
                      .fetchall())
    assert status["synthetic_b00000"].startswith("ok")
    assert status["synthetic_b00001"].startswith("failed DuplicateRowError")
