"""The Prefect tasks a forecasting run is wired from.

The storage side of a run -- open it, read a batch, write a batch, close it, score earlier
forecasts again -- runs in the flow's own process, the warehouse's single writer. Each storage
task either only reads or changes the warehouse in one transaction that replaces what it owns,
so running it again is safe. A step that finds the warehouse locked by another process waits
for it (:func:`~wadiro_fleet.tasks.warehouse.connection.connect`'s one retry policy) at most the
run's ``--lock-wait-minutes`` (``lock_wait_s``), then fails saying so. Writing results is the
exception: computed results are never thrown away because another process holds the warehouse,
so each batch is staged as Parquet beside the warehouse first and loaded from there by the run's
next load (at most every ``--load-every-seconds``, and at its end) or, when the warehouse stays
locked past a short wait, as soon as the lock clears
(:mod:`~wadiro_fleet.tasks.warehouse.pending`). The compute task, :func:`forecast_batch`,
receives its data as arguments and returns plain results, so the task runner may send it to a
thread, a process or a Dask worker.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import date
from typing import Any

from prefect import task
from prefect.artifacts import create_table_artifact
from prefect.cache_policies import NO_CACHE
from wadiro_fleet.tasks.errors import EmptySelectionError
from wadiro_fleet.tasks.protocol.batch import BuildingJob, run_batch
from wadiro_fleet.tasks.protocol.config import ForecastConfig
from wadiro_fleet.tasks.protocol.forecasting import BuildingWeekResult
from wadiro_fleet.tasks.provenance import code_version
from wadiro_fleet.tasks.report import run_leaderboard
from wadiro_fleet.tasks.warehouse.batches import load_batches
from wadiro_fleet.tasks.warehouse.connection import (
    WarehouseLockedError,
    connect,
    require_warehouse,
)
from wadiro_fleet.tasks.warehouse.issued import validation_leaderboard
from wadiro_fleet.tasks.warehouse.pending import (
    LoadReport,
    load_staged,
    pending_root,
    stage_closing,
    stage_results,
    staged_building_weeks,
    staged_runs,
)
from wadiro_fleet.tasks.warehouse.rescoring import rescore_forecasts
from wadiro_fleet.tasks.warehouse.run_dates import (
    check_plausible_weeks,
    future_readings,
    readings_cutoff,
    readings_until,
)
from wadiro_fleet.tasks.warehouse.runs import (
    NotForecast,
    RunSummary,
    not_forecast_rows,
    record_run_start,
)
from wadiro_fleet.tasks.warehouse.schema import ensure_schema
from wadiro_fleet.tasks.warehouse.selection import (
    ChosenWeek,
    choose_week,
    fleet_building_ids,
)

_STORAGE: dict[str, Any] = {"cache_policy": NO_CACHE}
"""Storage tasks always run (never served from a cache) and are never retried by Prefect: they
wait for a locked warehouse inside :func:`~wadiro_fleet.tasks.warehouse.connection.connect`
(``wait_s``), so that a run waits the same way with or without Prefect."""

WRITE_WAIT_S = 2.0
"""How long a batch's write (then the batch stays staged) and the run's closing report wait for
a locked warehouse."""


@dataclass(frozen=True)
class OpenRun:
    """A run whose ``runs`` row is written: where it writes and what it covers."""

    run_id: str
    warehouse: str
    label: str
    weeks: tuple[date, ...]
    building_ids: tuple[str, ...]
    config: ForecastConfig
    earlier_pending: tuple[str, ...] = ()
    """Runs whose results are staged beside the warehouse, not loaded (``wadiro load-pending``)."""
    lock_wait_s: float = 600.0
    """How long a step waits for a warehouse another process keeps locked (``--lock-wait-minutes``)."""

    @property
    def pending_folder(self) -> str:
        """Where this run stages its results."""
        return str(pending_root(self.warehouse) / self.run_id)

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
    lock_wait_s: float = 600.0,
) -> OpenRun:
    """Create the schema if needed, resolve the buildings and write the run's ``running`` row
    (``parameters`` is recorded with it)."""
    with connect(warehouse, wait_s=lock_wait_s) as con:
        ensure_schema(con)
        ids = fleet_building_ids(con, buildings)
        record_run_start(con, run_id=run_id, flow=label, parameters=parameters,
                         code_version=code_version())
    earlier = tuple(staged for staged in staged_runs(warehouse) if staged != run_id)
    return OpenRun(run_id=run_id, warehouse=warehouse, label=label, weeks=tuple(weeks),
                   building_ids=tuple(ids), config=config, earlier_pending=earlier,
                   lock_wait_s=lock_wait_s)


@task(name="read-batches", **_STORAGE)
def read_batches(run: OpenRun, groups: list[list[str]]) -> list[Batch]:
    """The hours and stored tuning of each of ``groups``' buildings, read in one short
    read-only connection."""
    loaded = load_batches(run.warehouse, groups, list(run.weeks), run.config,
                          lock_wait_s=run.lock_wait_s)
    return [Batch(f"{ids[0]}+{len(ids) - 1}", jobs, unreadable)
            for ids, (jobs, unreadable) in zip(groups, loaded)]


# No input caching: hashing each batch's hourly frames would cost more than it could save, and
# a rerun must recompute (the warehouse slice is replaced, never served from a cache). The
# function is the protocol's own: a worker process that runs it imports the protocol, not
# Prefect or this module.
forecast_batch = task(name="forecast-batch", task_run_name="forecast-batch-{label}",
                      cache_policy=NO_CACHE)(run_batch)


@dataclass(frozen=True)
class WriteOutcome:
    """What a write did: building-weeks loaded into the warehouse, and, when another process
    (``holder``) kept it ``locked`` or no load was ``tried`` (the batch only staged),
    building-weeks left staged beside it."""

    written: int
    pending: int = 0
    locked: bool = False
    holder: str = ""
    tried: bool = True


@task(name="write-batch", cache_policy=NO_CACHE)
def write_batch(run: OpenRun, results: list[BuildingWeekResult],
                wait_s: float | None = None, load: bool = True) -> WriteOutcome:
    """Stage the batch, then (with ``load``) load everything the run has staged, in order,
    waiting for a locked warehouse at most ``wait_s`` (:data:`WRITE_WAIT_S`); what stays staged
    is loaded by a later write."""
    if results:
        stage_results(run.warehouse, run.run_id, results, run.config.models)
    staged = staged_building_weeks(run.warehouse, run.run_id)
    if not load:
        return WriteOutcome(0, staged, tried=False)
    try:
        with connect(run.warehouse, wait_s=WRITE_WAIT_S if wait_s is None else wait_s) as con:
            load_staged(con, run.warehouse, run.run_id)
    except WarehouseLockedError as locked:
        return WriteOutcome(0, staged, True, locked.holder)
    return WriteOutcome(staged)


@task(name="close-run", cache_policy=NO_CACHE)
def close_run(
    run: OpenRun, summary: RunSummary, error: BaseException | None = None
) -> tuple[str, WriteOutcome]:
    """Record the run's counts and final status after its results; returns the status and what
    stays staged. Waits for a locked warehouse at most the run's ``lock_wait_s`` (after an
    error, only briefly)."""
    status, message = summary.final_status(error)
    stage_closing(run.warehouse, summary, status, message)
    return status, write_batch.fn(run, [], run.lock_wait_s if error is None else None)


def run_history(warehouse: str, limit: int = 20) -> list[tuple]:
    """The latest runs, newest first: id, flow, start, minutes, status, building-weeks done,
    what they published (learned, persistence, degraded, nothing) and failed, message."""
    with connect(warehouse, read_only=True) as con:
        return con.execute(
            "SELECT run_id, flow, strftime(started_at, '%Y-%m-%d %H:%M:%S UTC'), "
            "round(epoch(finished_at - started_at) / 60.0, 1), status, n_building_weeks, "
            "n_learned, n_persistence, n_degraded, n_unpublished, n_failed, message "
            "FROM runs ORDER BY started_at DESC LIMIT ?", [limit]).fetchall()


def load_pending_results(warehouse: str) -> LoadReport:
    """Load what runs left staged beside the warehouse (``wadiro load-pending``); a missing
    warehouse is refused, never created empty."""
    require_warehouse(warehouse, otherwise="kept results are loaded only into the warehouse "
                      "whose runs kept them")
    with connect(warehouse, create=False) as con:
        return load_staged(con, warehouse)


@task(name="latest-forecastable-week", **_STORAGE)
def latest_forecastable_week(warehouse: str, buildings: Sequence[str] | None,
                             lock_wait_s: float = 600.0) -> ChosenWeek:
    """The weekly run's default target week (:func:`choose_week`), chosen from the readings
    dated up to now (:mod:`~wadiro_fleet.tasks.warehouse.run_dates`); when later ones are
    stored, ``why`` says so and the choice is not ``complete`` (the run warns)."""
    cutoff = readings_cutoff()
    with connect(warehouse, read_only=True, wait_s=lock_wait_s) as con:
        future = future_readings(con, fleet_building_ids(con, buildings), cutoff)
        if future is None:
            return choose_week(con, buildings)
        with readings_until(con, cutoff):
            try:
                chosen = choose_week(con, buildings)
            except EmptySelectionError as empty:
                raise EmptySelectionError(f"{empty}: {future.warning()}") from None
    return replace(chosen, why=f"{chosen.why}; {future.warning()}", complete=False)


@task(name="not-forecast", cache_policy=NO_CACHE)
def not_forecast(run: OpenRun) -> list[NotForecast]:
    """The run's building-weeks that could not be forecast by the learned models, and why.
    A report at the run's end: it waits for a locked warehouse only briefly (raising
    :class:`WarehouseLockedError`), never holding up a run whose results are written."""
    with connect(run.warehouse, read_only=True, wait_s=WRITE_WAIT_S) as con:
        return not_forecast_rows(con, run.run_id)


NOT_FORECAST_ARTIFACT_ROWS = 1000
"""Rows of the not-forecast artifact at most (a large backfill's are all in ``window_status``)."""


@task(name="publish-not-forecast", cache_policy=NO_CACHE)
def publish_not_forecast(run: OpenRun, rows: list[NotForecast]) -> None:
    """The run's building-weeks that could not be forecast as a Prefect table artifact
    (``<label>-not-forecast``; an empty table when every one could)."""
    table = [row.record() for row in rows[:NOT_FORECAST_ARTIFACT_ROWS]] or [
        {"building_id": "", "target_week": "", "status": "",
         "reason": "every building-week was forecast", "published": ""}]
    if len(rows) > NOT_FORECAST_ARTIFACT_ROWS:
        table.append({"building_id": "", "target_week": "", "status": "",
                      "reason": f"and {len(rows) - NOT_FORECAST_ARTIFACT_ROWS} more in "
                                "window_status", "published": ""})
    create_table_artifact(
        table=table,
        key=f"{run.label}-not-forecast",
        description=f"Building-weeks of run {run.run_id} the learned models could not forecast",
    )


@task(name="rescore-forecasts", **_STORAGE)
def rescore_earlier_forecasts(warehouse: str, since: date, lock_wait_s: float = 600.0) -> int:
    """Score stored forecasts from ``since`` on again where their readings changed since."""
    with connect(warehouse, wait_s=lock_wait_s) as con:
        ensure_schema(con)
        return rescore_forecasts(con, since)


@task(name="publish-outcomes", cache_policy=NO_CACHE)
def publish_outcomes(run: OpenRun, summary: RunSummary) -> None:
    """What the run published, as a Prefect table artifact (``<label>-outcomes``): building-weeks
    by outcome (learned, persistence, degraded and why, not published, failed) and the weather
    inputs left out, so a degraded week shows where an operator looks."""
    table = [{"outcome": name, "building_weeks": n, "detail": detail} for name, n, detail in (
        ("learned", summary.learned, "a learned model or a combination of at least two"),
        ("persistence", summary.persistence, "chosen over trusted learned models"),
        ("degraded", summary.degraded, ", ".join(
            f"{n} {cause}" for cause, n in summary.degraded_causes.most_common())
            or "persistence because no learned forecast could be trusted"),
        ("not published", summary.unpublished, "no load at the same hours in the last weeks"),
        ("failed", summary.failed, "; ".join(summary.failures[:5])),
    )]
    table += [{"outcome": f"weather input left out: {name}", "building_weeks": n,
               "detail": "the models were fitted without it"}
              for name, n in summary.left_out.most_common()]
    create_table_artifact(table=table, key=f"{run.label}-outcomes",
                          description=f"What run {run.run_id} published: {summary.line()}")


@task(name="publish-leaderboard", cache_policy=NO_CACHE)
def publish_leaderboard(run: OpenRun) -> None:
    """This run's leaderboard as a Prefect table artifact (``<label>-leaderboard``): its scores
    or, for a week not yet over (the weekly run's: nothing to score yet), how each model did on
    the week before it, its validation week, as the command line prints it (none when neither
    exists)."""
    with connect(run.warehouse, read_only=True) as con:
        board = run_leaderboard(con, run.run_id)
        description = f"Leaderboard of run {run.run_id}"
        if board.empty:
            board = validation_leaderboard(con, run.run_id)
            description = (f"Run {run.run_id}: the models on the validation week (the week "
                           "before the one forecast, fitted on the weeks before it), MAE "
                           "relative to seasonal naive's; the forecast week is scored once its "
                           "readings are ingested")
    if not board.empty:
        create_table_artifact(table=board.round(4).to_dict(orient="records"),
                              key=f"{run.label}-leaderboard", description=description)


__all__ = [
    "WRITE_WAIT_S",
    "Batch",
    "ChosenWeek",
    "LoadReport",
    "NotForecast",
    "OpenRun",
    "RunSummary",
    "WriteOutcome",
    "check_plausible_weeks",
    "close_run",
    "forecast_batch",
    "latest_forecastable_week",
    "load_pending_results",
    "not_forecast",
    "not_forecast_rows",
    "open_run",
    "publish_leaderboard",
    "publish_not_forecast",
    "publish_outcomes",
    "read_batches",
    "rescore_earlier_forecasts",
    "run_history",
    "write_batch",
]
