"""The forecasting flows: one target week for the fleet (weekly production) and a backfill.

Orchestration only. The flow reads each batch's data from the warehouse in a short read, submits
the batch to the task runner (threads, processes or a Dask cluster), and writes each finished
batch back in one short transaction from this process -- the warehouse's single writer. At most
``max_in_flight`` batches are in the air, which bounds memory and the load on Prefect's API
however large the fleet.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import date, timedelta

from prefect import flow, get_run_logger, runtime
from prefect.artifacts import create_progress_artifact, create_table_artifact, update_progress_artifact
from prefect.futures import PrefectFuture, as_completed
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from flows.runners import make_task_runner, shared_local_api
from tasks.building_frame import DATA_ERRORS, load_buildings_info, load_many_building_hours
from tasks.forecasting import BuildingWeekResult, ForecastConfig
from tasks.pipeline_tasks import BuildingJob, failed_results, forecast_batch
from tasks.provenance import code_version
from tasks.report import run_leaderboard
from tasks.results import (
    ensure_result_schema,
    load_stored_params,
    record_run_end,
    record_run_start,
    rescore_forecasts,
    write_results,
)
from tasks.warehouse import connect, transaction
from tasks.week_selection import (
    check_mondays,
    default_target_week,
    fleet_building_ids,
    mondays_between,
)
from tasks.windows import window_load_range


@dataclass
class RunSummary:
    """What a forecasting run did, for the command line and the ``runs`` table."""

    run_id: str
    weeks: list[date]
    building_weeks: int = 0
    ok: int = 0
    skipped: int = 0
    failed: int = 0
    failures: list[str] = field(default_factory=list)
    model_failures: int = 0

    def counts(self) -> dict[str, int]:
        return {"building_weeks": self.building_weeks, "ok": self.ok,
                "skipped": self.skipped, "failed": self.failed}

    def add(self, results: Sequence) -> None:
        for res in results:
            self.building_weeks += 1
            self.model_failures += res.n_failed_models
            if res.status == "ok":
                self.ok += 1
            elif res.status == "failed":
                self.failed += 1
                self.failures.append(f"{res.building_id} {res.week}: {res.reason}")
            else:
                self.skipped += 1

    def line(self) -> str:
        return (f"{self.building_weeks} building-weeks over {len(self.weeks)} week(s): "
                f"{self.ok} ok, {self.skipped} skipped, {self.failed} failed, "
                f"{self.model_failures} model fit(s) failed")


def _batches(ids: Sequence[str], size: int) -> Iterator[list[str]]:
    for start in range(0, len(ids), size):
        yield list(ids[start:start + size])


def _load_jobs(
    warehouse: str, ids: list[str], weeks: list[date], config: ForecastConfig
) -> list[BuildingJob]:
    """Read one batch's hours (history of the first week through the end of the last)."""
    with connect(warehouse, read_only=True) as con:
        infos = load_buildings_info(con, ids)
        tz = next(iter(infos.values())).timezone
        start, _ = window_load_range(weeks[0], tz, history_weeks=config.history_weeks,
                                     feature_set=config.feature_set)
        _, end = window_load_range(weeks[-1], tz, history_weeks=config.history_weeks,
                                   feature_set=config.feature_set)
        # A day of slack on both sides covers buildings in other time zones of the batch.
        hours = load_many_building_hours(con, ids, start - timedelta(days=1), end + timedelta(days=1))
        stored = (load_stored_params(con, ids, config.models, weeks[0])
                  if config.tuning == "reuse" else {})
    return [
        BuildingJob(info=infos[bid], hours=frame.drop(columns="building_id").reset_index(drop=True),
                    weeks=tuple(weeks), stored_params=stored.get(bid, {}))
        for bid, frame in hours.groupby("building_id", sort=False)
    ]


def _load_batch(
    warehouse: str, ids: list[str], weeks: list[date], config: ForecastConfig
) -> tuple[list[BuildingJob], list[BuildingWeekResult]]:
    """Jobs for the buildings whose data can be read, failed results for the others.

    A batch that cannot be read is retried building by building, so one building's bad data
    (e.g. a duplicated reading) fails that building only.
    """
    try:
        return _load_jobs(warehouse, ids, weeks, config), []
    except DATA_ERRORS as exc:
        if len(ids) == 1:
            return [], failed_results(ids[0], weeks, exc)
    jobs: list[BuildingJob] = []
    failed: list[BuildingWeekResult] = []
    for building_id in ids:
        more_jobs, more_failed = _load_batch(warehouse, [building_id], weeks, config)
        jobs += more_jobs
        failed += more_failed
    return jobs, failed


@flow(name="forecast-weeks")
def forecast_weeks_flow(
    weeks: list[date],
    warehouse: str = "warehouse.duckdb",
    buildings: list[str] | None = None,
    models: list[str] | None = None,
    trials: int = 15,
    tuning: str = "per-window",
    feature_set: str = "paper",
    reuse_max_age_weeks: int = 8,
    batch_size: int = 2,
    max_in_flight: int = 8,
    flow_label: str = "forecast",
    show_progress: bool = True,
    runner_info: dict | None = None,
) -> RunSummary:
    """Run the forecasting protocol for every (building, week) and store the results.

    ``runner_info`` describes the task runner for the ``runs`` table (set by the callers that
    choose it).
    """
    logger = get_run_logger()
    if batch_size < 1 or max_in_flight < 1:
        raise ValueError(f"batch_size and max_in_flight must be >= 1, "
                         f"got {batch_size} and {max_in_flight}")
    weeks = sorted(check_mondays(weeks))
    config = ForecastConfig(
        trials=trials, tuning=tuning, feature_set=feature_set,
        reuse_max_age_weeks=reuse_max_age_weeks,
        **({"models": tuple(models)} if models else {}),
    )
    run_id = str(runtime.flow_run.id or uuid.uuid4())
    summary = RunSummary(run_id=run_id, weeks=weeks)
    parameters = {**config.as_record(), "weeks": [w.isoformat() for w in weeks],
                  "buildings": buildings, "batch_size": batch_size,
                  "max_in_flight": max_in_flight, "flow": flow_label,
                  "runner": runner_info or {}}
    with connect(warehouse) as con:
        ensure_result_schema(con)
        ids = fleet_building_ids(con, buildings)
        record_run_start(con, run_id=run_id, flow=flow_label, parameters=parameters,
                         code_version=code_version())
    logger.info("run %s: %d building(s) x %d week(s), models %s", run_id, len(ids), len(weeks),
                ", ".join(config.models))

    batches = _batches(ids, batch_size)
    total = len(ids) * len(weeks)
    progress_id = create_progress_artifact(0.0, key=f"{flow_label}-progress",
                                           description="building-weeks done (%)")
    pending: set[PrefectFuture] = set()
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    bar = Progress(*columns, disable=not show_progress)
    bar_task = bar.add_task("building-weeks", total=total)

    def record(results: list) -> None:
        """Write one batch's results in one short transaction and advance the progress."""
        with connect(warehouse) as con:
            write_results(con, results, run_id=run_id, models=config.models)
        summary.add(results)
        bar.update(bar_task, completed=summary.building_weeks)
        update_progress_artifact(progress_id, 100.0 * summary.building_weeks / max(total, 1))

    def submit_next() -> None:
        """Read the next batch and submit it; buildings whose data cannot be read are recorded
        as failed right away, and the next batch is tried so the pipeline stays full."""
        while (batch := next(batches, None)) is not None:
            jobs, unreadable = _load_batch(warehouse, batch, weeks, config)
            if unreadable:
                record(unreadable)
            if jobs:
                pending.add(forecast_batch.submit(jobs, config, f"{batch[0]}+{len(batch) - 1}"))
                return

    status, message = "completed", None
    try:
        with bar:
            for _ in range(max_in_flight):
                submit_next()
            while pending:
                future = next(as_completed(list(pending)))
                pending.remove(future)
                record(future.result())
                submit_next()
    except BaseException as exc:
        status, message = "crashed", f"{type(exc).__name__}: {exc}"
        raise
    finally:
        if summary.failed and status == "completed":
            status, message = "completed_with_failures", "; ".join(summary.failures[:20])
        with connect(warehouse) as con, transaction(con):
            record_run_end(con, run_id=run_id, status=status, counts=summary.counts(), message=message)
    for failure in summary.failures:
        logger.warning("failed: %s", failure)
    _publish_leaderboard(warehouse, run_id, flow_label)
    return summary


def _publish_leaderboard(warehouse: str, run_id: str, flow_label: str) -> None:
    """This run's leaderboard as a Prefect table artifact."""
    with connect(warehouse, read_only=True) as con:
        board = run_leaderboard(con, run_id)
    if not board.empty:
        create_table_artifact(
            table=board.round(4).to_dict(orient="records"), key=f"{flow_label}-leaderboard",
            description=f"Leaderboard of run {run_id}",
        )


def _run_weeks(weeks: list[date], runner: str, dask_address: str | None,
               max_workers: int | None, **kwargs) -> RunSummary:
    """``forecast_weeks_flow`` as a subflow on the chosen task runner."""
    task_runner = make_task_runner(runner, max_workers=max_workers, dask_address=dask_address)
    runner_info = {"runner": runner, "max_workers": max_workers, "dask_address": dask_address}
    with shared_local_api():
        return forecast_weeks_flow.with_options(task_runner=task_runner)(
            weeks=weeks, runner_info=runner_info, **kwargs
        )


RESCORE_WEEKS = 8
"""How far back the weekly run looks for forecasts whose actuals arrived after scoring."""


@flow(name="weekly-forecast")
def weekly_forecast_flow(
    warehouse: str = "warehouse.duckdb",
    week: date | None = None,
    buildings: list[str] | None = None,
    models: list[str] | None = None,
    trials: int = 15,
    tuning: str = "reuse",
    feature_set: str = "paper",
    reuse_max_age_weeks: int = 8,
    runner: str = "processes",
    dask_address: str | None = None,
    max_workers: int | None = None,
    batch_size: int = 2,
    max_in_flight: int = 8,
    show_progress: bool = True,
) -> RunSummary:
    """One target week for the fleet (default: the latest week that can be forecast).

    First scores the last weeks' forecasts again where their actuals have arrived since.
    """
    if week is None:
        with connect(warehouse, read_only=True) as con:
            week = default_target_week(con, buildings)
    with connect(warehouse) as con:
        ensure_result_schema(con)
        rescored = rescore_forecasts(con, week - timedelta(weeks=RESCORE_WEEKS))
    get_run_logger().info("rescored %d earlier forecast(s) whose actuals have arrived", rescored)
    return _run_weeks(
        [week], runner, dask_address, max_workers, warehouse=warehouse, buildings=buildings,
        models=models, trials=trials, tuning=tuning, feature_set=feature_set,
        reuse_max_age_weeks=reuse_max_age_weeks, flow_label="forecast",
        batch_size=batch_size, max_in_flight=max_in_flight, show_progress=show_progress,
    )


@flow(name="backfill")
def backfill_flow(
    start: date,
    end: date,
    warehouse: str = "warehouse.duckdb",
    buildings: list[str] | None = None,
    models: list[str] | None = None,
    trials: int = 15,
    tuning: str = "per-window",
    feature_set: str = "paper",
    reuse_max_age_weeks: int = 8,
    runner: str = "processes",
    dask_address: str | None = None,
    max_workers: int | None = None,
    batch_size: int = 2,
    max_in_flight: int = 8,
    show_progress: bool = True,
) -> RunSummary:
    """Every target week from ``start`` to ``end`` (both local Mondays, inclusive)."""
    return _run_weeks(
        mondays_between(start, end), runner, dask_address, max_workers, warehouse=warehouse,
        buildings=buildings, models=models, trials=trials, tuning=tuning,
        feature_set=feature_set, reuse_max_age_weeks=reuse_max_age_weeks,
        flow_label="backfill", batch_size=batch_size, max_in_flight=max_in_flight,
        show_progress=show_progress,
    )
