"""The forecasting flows: one target week for the fleet (the weekly run) and a backfill.

Orchestration only. Both run the same subflow, ``forecast-weeks``: open the run, then for each
batch of buildings read its data, submit its forecasts to the task runner (threads, processes
or a Dask cluster) and write its results as soon as they are back, at most
``settings.max_in_flight`` batches in the air -- which bounds memory and the load on Prefect's
API however large the fleet -- and close the run.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import date, timedelta

from prefect import flow, get_run_logger, runtime
from prefect.futures import PrefectFuture, as_completed
from wadiro_fleet.flows.progress import RunProgress
from wadiro_fleet.flows.runners import make_task_runner, shared_local_api
from wadiro_fleet.flows.settings import BackfillSettings, RunSettings, WeeklySettings
from wadiro_fleet.tasks.forecast_tasks import (
    OpenRun,
    RunSummary,
    close_run,
    forecast_batch,
    latest_forecastable_week,
    open_run,
    publish_leaderboard,
    read_batch,
    rescore_earlier_forecasts,
    write_batch,
)
from wadiro_fleet.tasks.protocol.forecasting import BuildingWeekResult
from wadiro_fleet.tasks.protocol.weeks import check_mondays, mondays_between

RESCORE_WEEKS = 8
"""How far back the weekly run looks for forecasts whose actuals arrived after scoring."""


def _batch_results(run: OpenRun, settings: RunSettings) -> Iterator[list[BuildingWeekResult]]:
    """Each batch's results as it finishes; buildings whose data cannot be read come back at
    once as failed results."""
    batches = run.batches(settings.batch_size)
    pending: set[PrefectFuture] = set()
    while True:
        while len(pending) < settings.max_in_flight and (ids := next(batches, None)):
            batch = read_batch(run, ids)
            if batch.unreadable:
                yield batch.unreadable
            if batch.jobs:
                pending.add(forecast_batch.submit(batch.jobs, run.config, batch.label))
        if not pending:
            return
        done = next(as_completed(list(pending)))
        pending.remove(done)
        yield done.result()


@flow(name="forecast-weeks")
def forecast_weeks_flow(weeks: list[date], settings: RunSettings, label: str) -> RunSummary:
    """The protocol for every (building, week); results are stored batch by batch."""
    logger = get_run_logger()
    weeks = check_mondays(weeks)
    run = open_run(
        settings.warehouse, str(runtime.flow_run.id or uuid.uuid4()), label, weeks,
        settings.buildings, settings.forecast_config(), settings.record(weeks, label),
    )
    logger.info("run %s: %d building(s) x %d week(s), models %s", run.run_id,
                len(run.building_ids), len(weeks), ", ".join(run.config.models))
    summary = RunSummary(run_id=run.run_id, weeks=weeks)
    try:
        with RunProgress(label, run.n_building_weeks) as progress:
            for results in _batch_results(run, settings):
                write_batch(run, results)
                summary.add(results)
                progress.update(summary.building_weeks)
    except BaseException as error:
        close_run.fn(run, summary, error)  # without Prefect, which may be what is failing
        raise
    close_run(run, summary)
    for failure in summary.failures:
        logger.warning("failed: %s", failure)
    publish_leaderboard(run)
    return summary


def _run_weeks(weeks: list[date], settings: RunSettings, label: str) -> RunSummary:
    """``forecast_weeks_flow`` as a subflow on the settings' task runner."""
    task_runner = make_task_runner(settings.runner, max_workers=settings.workers,
                                   dask_address=settings.dask_address)
    with shared_local_api():
        return forecast_weeks_flow.with_options(task_runner=task_runner)(weeks, settings, label)


@flow(name="weekly-forecast")
def weekly_forecast_flow(
    week: date | None = None, settings: WeeklySettings = WeeklySettings()
) -> RunSummary:
    """One target week for the fleet (default: the latest week that can be forecast).

    First scores the last weeks' forecasts again where their actuals have arrived since.
    """
    if week is None:
        week = latest_forecastable_week(settings.warehouse, settings.buildings)
    rescored = rescore_earlier_forecasts(settings.warehouse, week - timedelta(weeks=RESCORE_WEEKS))
    get_run_logger().info("rescored %d earlier forecast(s) whose actuals have arrived", rescored)
    return _run_weeks([week], settings, "forecast")


@flow(name="backfill")
def backfill_flow(
    start: date, end: date, settings: BackfillSettings = BackfillSettings()
) -> RunSummary:
    """Every target week from ``start`` to ``end`` (both local Mondays, inclusive)."""
    return _run_weeks(mondays_between(start, end), settings, "backfill")
