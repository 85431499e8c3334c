"""The storage steps of a forecasting run, as plain functions; its compute step as a Prefect
task; its Prefect artifacts.

They run in the flow's own process, the warehouse's single writer: open the run, read batches
of buildings, choose the weekly run's week, score earlier forecasts again, list what was not
forecast. Each either only reads or changes the warehouse in one transaction that replaces
what it owns, so running it again is safe. A step that finds the warehouse locked by another
process waits for it (:func:`~tasks.warehouse.connection.connect`'s one retry
policy) at most the run's ``--lock-wait-minutes`` (``lock_wait_s``), then fails saying so.
Results are written by the run's :class:`~tasks.warehouse.pending.RunWriter`,
which never throws them away because another process holds the warehouse.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from prefect import task
from prefect.artifacts import create_table_artifact
from prefect.cache_policies import NO_CACHE

from tasks.protocol.batch import BuildingJob, run_batch
from tasks.protocol.config import ForecastConfig
from tasks.protocol.forecasting import BuildingWeekResult
from tasks.provenance import code_version
from tasks.report import run_leaderboard
from tasks.warehouse.batches import load_batches
from tasks.warehouse.connection import (
    connect,
    require_warehouse,
)
from tasks.warehouse.issued import validation_leaderboard
from tasks.warehouse.pending import (
    WRITE_WAIT_S,
    LoadReport,
    RunWriter,
    load_staged,
    staged_runs,
)
from tasks.warehouse.rescoring import rescore_forecasts
from tasks.warehouse.run_dates import check_plausible_weeks
from tasks.warehouse.runs import (
    NotForecast,
    RunSummary,
    not_forecast_rows,
    record_run_start,
)
from tasks.warehouse.schema import ensure_schema
from tasks.warehouse.selection import (
    ChosenWeek,
    fleet_building_ids,
    week_of_run,
)


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
    """How long a step waits for a warehouse another process keeps locked
    (``--lock-wait-minutes``)."""

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
                         code_version=code_version(), weeks=weeks)
    earlier = tuple(staged for staged in staged_runs(warehouse) if staged != run_id)
    return OpenRun(run_id=run_id, warehouse=warehouse, label=label, weeks=tuple(weeks),
                   building_ids=tuple(ids), config=config, earlier_pending=earlier,
                   lock_wait_s=lock_wait_s)


forecast_batch = task(name="forecast-batch", task_run_name="forecast-batch-{label}",
                      cache_policy=NO_CACHE)(run_batch)
"""The compute step, the one Prefect task of a run (a task run per batch in Prefect's UI). No
input caching: hashing a batch's hourly frames would cost more than it could save, and a rerun
must recompute. Its function is the protocol's own (``forecast_batch.fn``): a worker process
that runs it without Prefect imports the protocol, not Prefect or this module."""


def run_writer(run: OpenRun, tell: Callable[[str], None],
               write_every_s: float | None = None) -> RunWriter:
    """The run's one writer of results and of its closing record (writing every
    ``write_every_s``, default :data:`~tasks.warehouse.pending.WRITE_EVERY_S`)."""
    return RunWriter(run.warehouse, run.run_id, run.config.models, run.lock_wait_s, tell,
                     write_every_s=write_every_s)


def read_batches(run: OpenRun, groups: list[list[str]]) -> list[Batch]:
    """The hours and stored tuning of each of ``groups``' buildings, read in one short
    read-only connection."""
    loaded = load_batches(run.warehouse, groups, list(run.weeks), run.config,
                          lock_wait_s=run.lock_wait_s)
    return [Batch(f"{ids[0]}+{len(ids) - 1}", jobs, unreadable)
            for ids, (jobs, unreadable) in zip(groups, loaded, strict=True)]


def run_history(warehouse: str, limit: int = 20) -> list[tuple]:
    """The latest runs, newest first: id, flow, start, minutes, status, target weeks,
    building-weeks done, what they published (learned, persistence, degraded, nothing) and
    failed, what degraded them, message."""
    with connect(warehouse, read_only=True) as con:
        known = {row[0] for row in con.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = 'runs'"
        ).fetchall()}
        # a warehouse no run of this release has written yet lacks the newer columns
        later = {c: c if c in known else f"NULL AS {c}" for c in ("target_weeks", "degradations")}
        return con.execute(
            "SELECT run_id, flow, strftime(started_at, '%Y-%m-%d %H:%M:%S UTC'), "
            f"round(epoch(finished_at - started_at) / 60.0, 1), status, {later['target_weeks']}, "
            "n_building_weeks, n_learned, n_persistence, n_degraded, n_unpublished, n_failed, "
            f"{later['degradations']}, message FROM runs ORDER BY started_at DESC LIMIT ?",
            [limit]).fetchall()


def load_pending_results(warehouse: str) -> LoadReport:
    """Load what runs left staged beside the warehouse (``wadiro load-pending``); a missing
    warehouse is refused, never created empty."""
    require_warehouse(warehouse, otherwise="kept results are loaded only into the warehouse "
                      "whose runs kept them")
    with connect(warehouse, create=False) as con:
        return load_staged(con, warehouse)


def target_week_of_run(warehouse: str, buildings: Sequence[str] | None, reference: datetime,
                       lock_wait_s: float = 600.0) -> ChosenWeek:
    """The weekly run's target week from its reference time (:func:`week_of_run`)."""
    with connect(warehouse, read_only=True, wait_s=lock_wait_s) as con:
        return week_of_run(con, buildings, reference)


def not_forecast(run: OpenRun) -> list[NotForecast]:
    """The run's building-weeks that could not be forecast by the learned models, and why.
    A report at the run's end: it waits for a locked warehouse only briefly (raising
    :class:`WarehouseLockedError`), never holding up a run whose results are written."""
    with connect(run.warehouse, read_only=True, wait_s=WRITE_WAIT_S) as con:
        return not_forecast_rows(con, run.run_id)


NOT_FORECAST_ARTIFACT_ROWS = 1000
"""Rows of the not-forecast artifact at most (a large backfill's are all in ``window_status``)."""


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


def rescore_earlier_forecasts(warehouse: str, since: date, lock_wait_s: float = 600.0) -> int:
    """Score stored forecasts from ``since`` on again where their readings changed since."""
    with connect(warehouse, wait_s=lock_wait_s) as con:
        ensure_schema(con)
        return rescore_forecasts(con, since)


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
    degraded = [{"building_id": d.building_id, "target_week": d.week.isoformat(), "why": d.why}
                for d in summary.degraded_weeks] or [
        {"building_id": "", "target_week": "", "why": "no building-week was degraded"}]
    create_table_artifact(table=degraded, key=f"{run.label}-degraded",
                          description=f"Building-weeks of run {run.run_id} that were forecast "
                                      "but degraded, and what degraded each")


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
    "Batch",
    "ChosenWeek",
    "LoadReport",
    "NotForecast",
    "OpenRun",
    "RunSummary",
    "RunWriter",
    "check_plausible_weeks",
    "forecast_batch",
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
    "run_writer",
    "target_week_of_run",
]
