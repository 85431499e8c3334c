"""A forecasting run's storage steps, in one place: :class:`RunStore`.

They run in the flow's own process, the warehouse's single writer: choose the weekly run's
week, score earlier forecasts again, open the run, read batches of buildings, write their
results (:class:`~tasks.warehouse.pending.RunWriter`, which never throws them away because
another process holds the warehouse), list what was not forecast. Each either only reads or
changes the warehouse in one transaction that replaces what it owns, so running it again is
safe. A step that finds the warehouse locked by another process waits for it
(:func:`~tasks.warehouse.connection.connect`'s one retry policy) at most the run's
``--lock-wait-minutes`` (``lock_wait_s``), then fails saying so.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from tasks.errors import BuildingDataError
from tasks.protocol.batch import BuildingJob
from tasks.protocol.config import ForecastConfig
from tasks.protocol.forecasting import BuildingWeekResult
from tasks.warehouse.batches import load_batch, load_jobs
from tasks.warehouse.connection import connect, require_warehouse
from tasks.warehouse.pending import WRITE_WAIT_S, LoadReport, RunWriter, load_staged, staged_runs
from tasks.warehouse.provenance import code_version
from tasks.warehouse.rescoring import rescore_forecasts
from tasks.warehouse.runs import (
    ABANDONED,
    STAGED,
    NotForecast,
    RunSummary,
    close_abandoned_runs,
    not_forecast_rows,
    process_gone,
    record_run_start,
)
from tasks.warehouse.schema import ensure_schema
from tasks.warehouse.selection import ChosenWeek, fleet_building_ids, week_of_run


@dataclass(frozen=True)
class OpenRun:
    """A run whose ``runs`` row is written: what it covers."""

    run_id: str
    label: str
    weeks: tuple[date, ...]
    building_ids: tuple[str, ...]
    config: ForecastConfig
    earlier_pending: tuple[str, ...] = ()
    """Runs whose results are staged beside the warehouse, not loaded (``wadiro load-pending``)."""

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


@dataclass(frozen=True)
class RunStore:
    """Where a run reads and writes: the warehouse, and how long a step waits for its lock
    (``--lock-wait-minutes``)."""

    warehouse: str
    lock_wait_s: float = 600.0

    def week_of_run(self, buildings: Sequence[str] | None, reference: datetime) -> ChosenWeek:
        """The weekly run's target week from its reference time (:func:`week_of_run`)."""
        with connect(self.warehouse, read_only=True, wait_s=self.lock_wait_s) as con:
            return week_of_run(con, buildings, reference)

    def rescore(self, since: date) -> int:
        """Score stored forecasts from ``since`` on again where their readings changed since."""
        with connect(self.warehouse, wait_s=self.lock_wait_s) as con:
            ensure_schema(con)
            return rescore_forecasts(con, since)

    def open_run(self, run_id: str, label: str, weeks: Sequence[date],
                 buildings: Sequence[str] | None, config: ForecastConfig,
                 parameters: dict[str, Any]) -> OpenRun:
        """Create the schema if needed, resolve the buildings and write the run's ``running``
        row (``parameters`` is recorded with it)."""
        with connect(self.warehouse, wait_s=self.lock_wait_s) as con:
            ensure_schema(con)
            ids = fleet_building_ids(con, buildings)
            close_abandoned_runs(con, staged_runs(self.warehouse))
            record_run_start(con, run_id=run_id, flow=label, parameters=parameters,
                             code_version=code_version(), weeks=weeks)
        earlier = tuple(staged for staged in staged_runs(self.warehouse) if staged != run_id)
        return OpenRun(run_id=run_id, label=label, weeks=tuple(weeks), building_ids=tuple(ids),
                       config=config, earlier_pending=earlier)

    def read_batches(self, run: OpenRun, groups: list[list[str]]) -> list[Batch]:
        """The hours and stored tuning of each of ``groups``' buildings, read in one short
        read-only connection; when a building's data cannot be read, group by group and
        building by building (:func:`~tasks.warehouse.batches.load_batch`): it fails alone."""
        weeks, config, wait = list(run.weeks), run.config, self.lock_wait_s
        loaded: list[tuple[list[BuildingJob], list[BuildingWeekResult]]]
        if len(groups) == 1:
            loaded = [load_batch(self.warehouse, groups[0], weeks, config, wait)]
        else:
            try:
                jobs = load_jobs(self.warehouse, [bid for ids in groups for bid in ids], weeks,
                                 config, wait)
            except BuildingDataError:
                loaded = [load_batch(self.warehouse, ids, weeks, config, wait) for ids in groups]
            else:
                group_of = {bid: number for number, ids in enumerate(groups) for bid in ids}
                loaded = [([], []) for _ in groups]
                for job in jobs:  # in the order one batch's read gives them
                    loaded[group_of[job.info.building_id]][0].append(job)
        return [Batch(f"{ids[0]}+{len(ids) - 1}", jobs, unreadable)
                for ids, (jobs, unreadable) in zip(groups, loaded, strict=True)]

    def writer(self, run: OpenRun, tell: Callable[[str], None],
               write_every_s: float | None = None) -> RunWriter:
        """The run's one writer of results and of its closing record, a context manager that
        closes the run (writing every ``write_every_s``, default
        :data:`~tasks.warehouse.pending.WRITE_EVERY_S`)."""
        return RunWriter(self.warehouse, run.run_id, run.config.models, self.lock_wait_s, tell,
                         write_every_s=write_every_s,
                         summary=RunSummary(run_id=run.run_id, weeks=list(run.weeks)))

    def not_forecast(self, run: OpenRun) -> list[NotForecast]:
        """The run's building-weeks that could not be forecast by the learned models, and why.
        A report at the run's end: it waits for a locked warehouse only briefly (raising
        :class:`WarehouseLockedError`), never holding up a run whose results are written."""
        with connect(self.warehouse, read_only=True, wait_s=WRITE_WAIT_S) as con:
            return not_forecast_rows(con, run.run_id)

    def history(self, limit: int = 20) -> list[tuple]:
        """The latest runs, newest first: id, flow, start, minutes, status, target weeks,
        building-weeks done, what they published (learned, persistence, degraded, nothing) and
        failed, what degraded them, message, and the building-weeks they held out of every
        bid."""
        with connect(self.warehouse, read_only=True) as con:
            known = {row[0] for row in con.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_name = 'runs'"
            ).fetchall()}
            # a warehouse no run of this release has written yet lacks the newer columns
            later = {c: c if c in known else f"NULL AS {c}"
                     for c in ("target_weeks", "degradations", "n_held", "host", "pid")}
            rows = con.execute(
                "SELECT run_id, flow, strftime(started_at, '%Y-%m-%d %H:%M:%S UTC'), "
                "round(epoch(finished_at - started_at) / 60.0, 1), status, "
                f"{later['target_weeks']}, n_building_weeks, n_learned, n_persistence, "
                f"n_degraded, n_unpublished, n_failed, {later['degradations']}, message, "
                f"{later['n_held']}, {later['host']}, {later['pid']}, started_at "
                "FROM runs ORDER BY started_at DESC LIMIT ?", [limit]).fetchall()
        # a run left running by a process that is gone is shown as such (the next run or
        # load-pending records it), unless its results wait beside the warehouse to be loaded
        staged = set(staged_runs(self.warehouse))
        shown = []
        for row in rows:
            status = _shown_status(row[0], row[4], row[-3:], staged)
            message = (row[13] or "its results are kept beside the warehouse, which was locked: "
                       "wadiro load-pending loads them") if status == STAGED else row[13]
            shown.append((*row[:4], status, *row[5:13], message, *row[14:-3]))
        return shown

    def load_pending(self) -> LoadReport:
        """Load what runs left staged beside the warehouse (``wadiro load-pending``); a
        missing warehouse is refused, never created empty."""
        require_warehouse(self.warehouse, otherwise="kept results are loaded only into the "
                          "warehouse whose runs kept them")
        with connect(self.warehouse, create=False) as con:
            report = load_staged(con, self.warehouse)
            close_abandoned_runs(con, staged_runs(self.warehouse))
            return report


def _shown_status(run_id: str, status: str, process: tuple, staged: set[str]) -> str:
    """What ``wadiro runs`` calls a run: a ``running`` one whose process is gone is
    :data:`STAGED` when its results wait to be loaded, else :data:`ABANDONED`."""
    if status != "running" or not process_gone(*process):
        return status
    return STAGED if run_id in staged else ABANDONED


__all__ = ["Batch", "OpenRun", "RunStore", "RunSummary", "RunWriter"]
