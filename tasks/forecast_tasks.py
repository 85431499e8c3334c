"""The Prefect tasks a forecasting run is wired from.

The storage side of a run -- open it, read a batch, write a batch, close it, score earlier
forecasts again -- runs in the flow's own process, the warehouse's single writer. Each storage
task either only reads or changes the warehouse in one transaction that replaces what it owns,
so running it again is safe: it is retried when the warehouse stays locked by another process.
The compute task, :func:`forecast_batch`, receives its data as arguments and returns plain
results, so the task runner may send it to a thread, a process or a Dask worker.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import date
from typing import Any

from prefect import task
from prefect.artifacts import create_table_artifact
from prefect.cache_policies import NO_CACHE
from prefect.client.schemas.objects import State, TaskRun
from prefect.tasks import Task
from wadiro_fleet.tasks.protocol.batch import BuildingJob, run_jobs
from wadiro_fleet.tasks.protocol.config import ForecastConfig
from wadiro_fleet.tasks.protocol.forecasting import BuildingWeekResult
from wadiro_fleet.tasks.provenance import code_version
from wadiro_fleet.tasks.report import run_leaderboard
from wadiro_fleet.tasks.warehouse.batches import load_batch
from wadiro_fleet.tasks.warehouse.connection import (
    WarehouseLockedError,
    connect,
    transaction,
)
from wadiro_fleet.tasks.warehouse.results import rescore_forecasts, write_results
from wadiro_fleet.tasks.warehouse.runs import (
    RunSummary,
    record_run_end,
    record_run_start,
)
from wadiro_fleet.tasks.warehouse.schema import ensure_schema
from wadiro_fleet.tasks.warehouse.selection import (
    default_target_week,
    fleet_building_ids,
)


def _warehouse_locked(task: Task, task_run: TaskRun, state: State) -> bool:
    """Retry a storage task only when another process kept the warehouse locked."""
    return isinstance(state.data, WarehouseLockedError)


_STORAGE: dict[str, Any] = {
    "cache_policy": NO_CACHE,
    "retries": 3,
    "retry_delay_seconds": [10, 30, 60],
    "retry_condition_fn": _warehouse_locked,
}
"""Storage tasks always run (never served from a cache) and retry while the file is locked."""


@dataclass(frozen=True)
class OpenRun:
    """A run whose ``runs`` row is written: where it writes and what it covers."""

    run_id: str
    warehouse: str
    label: str
    weeks: tuple[date, ...]
    building_ids: tuple[str, ...]
    config: ForecastConfig

    @property
    def n_building_weeks(self) -> int:
        return len(self.building_ids) * len(self.weeks)

    def batches(self, size: int) -> Iterator[list[str]]:
        """The run's buildings, ``size`` at a time."""
        for start in range(0, len(self.building_ids), size):
            yield list(self.building_ids[start:start + size])


@dataclass(frozen=True)
class Batch:
    """One batch's inputs: jobs for the buildings that could be read, failed results for the
    others."""

    label: str
    jobs: list[BuildingJob]
    unreadable: list[BuildingWeekResult]


@task(name="open-run", **_STORAGE)
def open_run(
    warehouse: str,
    run_id: str,
    label: str,
    weeks: Sequence[date],
    buildings: Sequence[str] | None,
    config: ForecastConfig,
    parameters: dict[str, Any],
) -> OpenRun:
    """Create the schema if needed, resolve the buildings and write the run's ``running`` row
    (``parameters`` is recorded with it)."""
    with connect(warehouse) as con:
        ensure_schema(con)
        ids = fleet_building_ids(con, buildings)
        record_run_start(con, run_id=run_id, flow=label, parameters=parameters,
                         code_version=code_version())
    return OpenRun(run_id=run_id, warehouse=warehouse, label=label, weeks=tuple(weeks),
                   building_ids=tuple(ids), config=config)


@task(name="read-batch", **_STORAGE)
def read_batch(run: OpenRun, building_ids: list[str]) -> Batch:
    """The batch's hours and stored tuning, read in one short read-only connection."""
    jobs, unreadable = load_batch(run.warehouse, building_ids, list(run.weeks), run.config)
    return Batch(f"{building_ids[0]}+{len(building_ids) - 1}", jobs, unreadable)


# No input caching: hashing each batch's hourly frames would cost more than it could save, and
# a rerun must recompute (the warehouse slice is replaced, never served from a cache).
@task(name="forecast-batch", task_run_name="forecast-batch-{label}", cache_policy=NO_CACHE)
def forecast_batch(
    jobs: list[BuildingJob], config: ForecastConfig, label: str
) -> list[BuildingWeekResult]:
    """The protocol for every (building, week) of the batch; failures are recorded, not raised."""
    return run_jobs(jobs, config)


@task(name="write-batch", **_STORAGE)
def write_batch(run: OpenRun, results: list[BuildingWeekResult]) -> int:
    """Replace the batch's slice of every result table in one transaction; rows written."""
    with connect(run.warehouse) as con:
        return write_results(con, results, run_id=run.run_id, models=run.config.models)


@task(name="close-run", **_STORAGE)
def close_run(run: OpenRun, summary: RunSummary, error: BaseException | None = None) -> str:
    """Write the run's counts and final status; returns the status."""
    with connect(run.warehouse) as con, transaction(con):
        return record_run_end(con, summary, error)


@task(name="latest-forecastable-week", **_STORAGE)
def latest_forecastable_week(warehouse: str, buildings: Sequence[str] | None) -> date:
    """The latest week whose history has ended and whose weather is stored."""
    with connect(warehouse, read_only=True) as con:
        return default_target_week(con, buildings)


@task(name="rescore-forecasts", **_STORAGE)
def rescore_earlier_forecasts(warehouse: str, since: date) -> int:
    """Score stored forecasts from ``since`` on again where their actuals arrived later."""
    with connect(warehouse) as con:
        ensure_schema(con)
        return rescore_forecasts(con, since)


@task(name="publish-leaderboard", cache_policy=NO_CACHE)
def publish_leaderboard(run: OpenRun) -> None:
    """This run's leaderboard as a Prefect table artifact (none when nothing was scored)."""
    with connect(run.warehouse, read_only=True) as con:
        board = run_leaderboard(con, run.run_id)
    if not board.empty:
        create_table_artifact(
            table=board.round(4).to_dict(orient="records"), key=f"{run.label}-leaderboard",
            description=f"Leaderboard of run {run.run_id}",
        )


__all__ = [
    "Batch",
    "OpenRun",
    "RunSummary",
    "close_run",
    "forecast_batch",
    "latest_forecastable_week",
    "open_run",
    "publish_leaderboard",
    "read_batch",
    "rescore_earlier_forecasts",
    "write_batch",
]
