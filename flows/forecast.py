"""The forecasting flows: one target week for the fleet (the weekly run) and a backfill.

Orchestration only. Both run the same subflow, ``forecast-weeks``: open the run, then read the
data of a few batches of buildings at a time (:data:`READ_BUILDINGS`), submit each batch's
forecasts to the task runner (threads, processes or a Dask cluster) and write its results as
soon as they are back, at most ``settings.max_in_flight`` batches in the air -- which bounds
memory and the load on Prefect's API however large the fleet -- and close the run.

The flows run through Prefect or directly (:mod:`~wadiro_fleet.flows.engine`). Either way a
run:

* stops cleanly on the first Ctrl-C or SIGTERM: it submits nothing more, abandons the batches
  in flight and ends their worker processes, writes what is finished, records the run as
  ``interrupted`` and raises :class:`~wadiro_fleet.tasks.errors.RunStoppedError`
  (:mod:`~wadiro_fleet.flows.stopping`);
* stops the same way, recorded as ``crashed``, when the Prefect server it reports to stops
  answering;
* never throws computed results away because another process holds the warehouse: each batch is
  staged as Parquet beside it and loaded once the lock clears; the run waits for that at its
  end, at most ``settings.lock_wait_minutes``, and otherwise says how to load them later.
"""

from __future__ import annotations

import logging
import queue
import time
from collections import deque
from collections.abc import Iterator
from datetime import date, timedelta
from itertools import islice

from prefect import flow
from wadiro_fleet.flows.engine import Engine, current_engine, one_line_input_errors
from wadiro_fleet.flows.progress import RunProgress
from wadiro_fleet.flows.settings import BackfillSettings, RunSettings, WeeklySettings
from wadiro_fleet.flows.stopping import STOP, quiet_resource_tracker, stop_child_processes
from wadiro_fleet.tasks.errors import DegradedRunError, RunStoppedError
from wadiro_fleet.tasks.forecast_tasks import (
    Batch,
    OpenRun,
    RunSummary,
    WriteOutcome,
    check_plausible_weeks,
    close_run,
    forecast_batch,
    latest_forecastable_week,
    not_forecast,
    open_run,
    publish_leaderboard,
    publish_not_forecast,
    publish_outcomes,
    read_batches,
    rescore_earlier_forecasts,
    write_batch,
)
from wadiro_fleet.tasks.protocol.forecasting import BuildingWeekResult
from wadiro_fleet.tasks.protocol.weeks import check_mondays, mondays_between
from wadiro_fleet.tasks.warehouse.connection import (
    ResourceError,
    WarehouseLockedError,
    require_warehouse,
)

RESCORE_WEEKS = 8
"""How far back the weekly run looks for forecasts whose actuals arrived after scoring."""

POLL_S = 0.5
"""How often a run waiting for its batches checks for a stop request."""

PENDING_RETRY_S = 10.0
"""How often a run with staged results that a locked warehouse kept out tries to load them while
it computes."""

READ_BUILDINGS = 200
"""About how many buildings a run reads from the warehouse at a time (whole batches, at least
one). Each read scans the stored hours and forecasts of every building once, so its cost per
building falls with its size and rises with the fleet's: on a 1,000-building warehouse, 12.5 ms
of CPU per building at 50, 6.8 at 200. The batches read ahead of the task runner wait in the
run's process (about 0.2 MB per building for a weekly run; more for a backfill's weeks)."""

NOT_FORECAST_SHOWN = 50
"""How many building-weeks the learned models could not forecast a run names in its log (all
of them are in its artifact and in ``window_status``)."""


class _Writer:
    """Writes finished batches: each staged at once, the staged ones loaded at most every
    ``load_every_s`` (a load opens the warehouse for writing, 0.04 CPU-s on a small warehouse,
    and replaces a slice of each result table: a fleet of hundreds of batches is loaded in a few
    dozen loads, not one per batch). Says when the warehouse is locked and when it is free
    again."""

    def __init__(self, engine: Engine, run: OpenRun, load_every_s: float) -> None:
        self.engine = engine
        self.run = run
        self.load_every_s = load_every_s
        self.locked = False
        self.pending = 0
        self._last_try = self._last_load = time.monotonic()

    def write(self, results: list[BuildingWeekResult], load: bool | None = None) -> None:
        """Stage ``results``; load what is staged when ``load``, or (``None``) when the last
        load is ``load_every_s`` old."""
        if load is None:
            load = time.monotonic() - self._last_load >= self.load_every_s
        if load:
            self._last_load = time.monotonic()
        self.note(self.engine.call(write_batch, self.run, results, load=load))

    def retry(self) -> None:
        """Load what a locked warehouse kept out, at most every :data:`PENDING_RETRY_S`."""
        if self.locked and time.monotonic() - self._last_try >= PENDING_RETRY_S:
            self.write([], load=True)

    def note(self, outcome: WriteOutcome) -> None:
        if not outcome.tried:  # staged only: the warehouse was not asked
            self.pending = outcome.pending
            return
        self._last_try = time.monotonic()
        if outcome.locked and not self.locked:
            holder = f" ({outcome.holder})" if outcome.holder else ""
            self.engine.warn(
                "warehouse %s is locked by another process%s: finished results are kept in %s "
                "and written as soon as it is free", self.run.warehouse, holder,
                self.run.pending_folder)
        elif self.locked and not outcome.locked:
            self.engine.warn("warehouse free again: wrote the %d kept building-week(s)", self.pending)
        self.locked, self.pending = outcome.locked, outcome.pending

    def how_to_load(self) -> str:
        return (f"{self.pending} building-week(s) of run {self.run.run_id} are kept in "
                f"{self.run.pending_folder}; load them with `wadiro load-pending --warehouse "
                f"{self.run.warehouse}` once the warehouse is free")


def _batch_results(
    run: OpenRun, settings: RunSettings, engine: Engine, writer: _Writer
) -> Iterator[list[BuildingWeekResult]]:
    """Each batch's results as it finishes; buildings whose data cannot be read come back at
    once as failed results. Stops (raising) when a stop is requested."""
    size = settings.batch_size_for(len(run.building_ids))
    batches, per_read = run.batches(size), max(1, READ_BUILDINGS // size)
    read: deque[Batch] = deque()
    pending: set = set()
    finished: queue.SimpleQueue = queue.SimpleQueue()
    try:
        while True:
            while not STOP.requested and len(pending) < settings.max_in_flight:
                if not read and (groups := list(islice(batches, per_read))):
                    read.extend(engine.call(read_batches, run, groups))
                if not read:
                    break
                batch = read.popleft()
                if batch.unreadable:
                    yield batch.unreadable
                if batch.jobs:
                    future = engine.submit(forecast_batch, batch.jobs, run.config, batch.label)
                    future.add_done_callback(finished.put)
                    pending.add(future)
            if STOP.requested:
                raise _stopped()
            if not pending:
                return
            try:
                done = finished.get(timeout=POLL_S)
            except queue.Empty:
                writer.retry()
                continue
            pending.discard(done)
            try:
                results = done.result()
            except BaseException:
                if STOP.requested or STOP.wait(0.2):  # its worker was ended by the same signal
                    raise _stopped() from None
                raise
            yield results
    finally:
        for future in pending:  # abandoned: they are not waited for
            _abandon(future)


def _abandon(future: object) -> None:
    """Cancel a future that has not started (a Prefect future through the one it wraps)."""
    target = getattr(future, "wrapped_future", future)
    cancel = getattr(target, "cancel", None)
    if cancel is not None:
        cancel()


def _stopped() -> RunStoppedError:
    stop = STOP.requested
    assert stop is not None
    return RunStoppedError(stop.reason, status=stop.status, exit_code=stop.exit_code)


def _close(engine: Engine, run: OpenRun, summary: RunSummary, writer: _Writer,
           error: BaseException | None = None) -> str:
    """Record the run's end after its results (:func:`close_run` waits for a locked warehouse);
    raises when they stay staged. After an error the step runs as a plain call, whatever failed
    (Prefect itself, maybe)."""
    status, outcome = (close_run.fn(run, summary, error) if error is not None
                       else engine.call(close_run, run, summary))
    writer.note(outcome)
    if writer.locked and error is None:
        raise RunStoppedError(f"the warehouse stayed locked; {writer.how_to_load()}", status=status)
    if writer.locked:
        engine.warn(writer.how_to_load())
    return status


def forecast_weeks(weeks: list[date], settings: RunSettings, label: str) -> RunSummary:
    """The protocol for every (building, week); results are stored batch by batch."""
    engine = current_engine()
    weeks = check_mondays(weeks)
    if not STOP.polled:
        STOP.reset()  # a stop of an earlier run in this process is not this run's
    run = engine.call(
        open_run, settings.warehouse, engine.run_id(), label, weeks, settings.buildings,
        settings.forecast_config(), settings.record(weeks, label), 60.0 * settings.lock_wait_minutes,
    )
    engine.log(logging.INFO, "run %s: %d building(s) x %d week(s), models %s", run.run_id,
               len(run.building_ids), len(weeks), ", ".join(run.config.models))
    if run.earlier_pending:
        engine.warn("results of %d earlier run(s) are still kept beside the warehouse (%s); "
                    "load them with `wadiro load-pending --warehouse %s`",
                    len(run.earlier_pending), ", ".join(run.earlier_pending), run.warehouse)
    summary = RunSummary(run_id=run.run_id, weeks=weeks)
    writer = _Writer(engine, run, settings.load_every_seconds)
    closing = []  # set once a close has begun: the run is closed once

    def close_at_once() -> None:  # the process is being ended before the loop could close
        if not closing:
            closing.append(True)
            _close(engine, run, summary, writer, _stopped() if STOP.requested else
                   RunStoppedError("stopped at once"))

    try:
        with STOP.polling(), STOP.last_words(close_at_once), engine.watch(), \
                RunProgress(label, run.n_building_weeks, artifact=engine.prefect) as progress:
            for results in _batch_results(run, settings, engine, writer):
                writer.write(results)
                summary.add(results)
                progress.update(summary.building_weeks)
    except BaseException as error:
        if closing:
            raise
        closing.append(True)
        if isinstance(error, RunStoppedError):
            stop_child_processes()  # the batches in flight are abandoned
        try:
            _close(engine, run, summary, writer, error)
        except Exception as close_error:  # keep the original error; say why it was not closed
            if not isinstance(close_error, ResourceError):  # else the error's own line says it
                engine.warn("run %s not closed: %s", run.run_id, close_error)
        raise
    closing.append(True)
    status = _close(engine, run, summary, writer)
    for failure in summary.failures:
        engine.log(logging.WARNING, "failed: %s", failure)
    _tell_not_forecast(engine, run)
    engine.log(logging.INFO if summary.healthy else logging.WARNING, "run %s %s: %s",
               run.run_id, status, summary.line())
    if engine.prefect:
        publish_outcomes(run, summary)
        publish_leaderboard(run)
    if settings.strict and not summary.healthy:
        raise DegradedRunError(f"--strict: {summary.degraded_message() or summary.line()}",
                               summary)
    return summary


def _tell_not_forecast(engine: Engine, run: OpenRun) -> None:
    """Name, in the run's log and (through Prefect) an artifact, every building-week the
    learned models could not forecast, with its window status and reason."""
    try:
        rows = engine.call(not_forecast, run)
    except WarehouseLockedError as locked:
        engine.warn("could not list the building-weeks that were not forecast (%s); see "
                    "window_status of run %s", locked, run.run_id)
        return
    if rows:
        engine.log(logging.WARNING, "%d building-week(s) could not be forecast by the learned "
                   "models:", len(rows))
    for row in rows[:NOT_FORECAST_SHOWN]:
        engine.log(logging.WARNING, "  not forecast: %s", row.line())
    if len(rows) > NOT_FORECAST_SHOWN:
        engine.log(logging.WARNING, "  and %d more (SELECT * FROM window_status WHERE run_id = "
                   "'%s' AND status <> 'ok')", len(rows) - NOT_FORECAST_SHOWN, run.run_id)
    if engine.prefect:
        publish_not_forecast(run, rows)


@flow(name="forecast-weeks")
def forecast_weeks_flow(weeks: list[date], settings: RunSettings, label: str) -> RunSummary:
    """The protocol for every (building, week); results are stored batch by batch."""
    return forecast_weeks(weeks, settings, label)


def _check_start(engine: Engine, settings: RunSettings, weeks: list[date]) -> None:
    """Refuse at once, in one line, a run that cannot start: target weeks no one could mean, a
    warehouse that is not there (a deployment's default is ``$WADIRO_WAREHOUSE`` on the
    worker). Under Prefect such input errors are logged without a traceback too."""
    if engine.prefect:
        one_line_input_errors()
    quiet_resource_tracker()  # a stopped run's worker processes leave semaphores behind
    check_plausible_weeks(weeks)
    require_warehouse(settings.warehouse)


def _run_weeks(weeks: list[date], settings: RunSettings, label: str) -> RunSummary:
    """``forecast_weeks_flow`` as a subflow on the settings' task runner."""
    return current_engine().run_subflow(forecast_weeks_flow, settings, weeks, settings, label)


@flow(name="weekly-forecast")
def weekly_forecast_flow(
    week: date | None = None, settings: WeeklySettings = WeeklySettings()
) -> RunSummary:
    """One target week for the fleet (default: the week after the latest readings when its
    weather, observed or forecast, is stored; see
    :func:`~wadiro_fleet.tasks.warehouse.selection.choose_week`).

    First scores the last weeks' forecasts again where their actuals have arrived since, so a
    forecast made before its week happened is scored by the first run after its readings are in.
    """
    engine = current_engine()
    settings = settings.resolved()
    _check_start(engine, settings, [] if week is None else [week])
    if week is None:
        chosen = engine.call(latest_forecastable_week, settings.warehouse, settings.buildings,
                             60.0 * settings.lock_wait_minutes)
        week = chosen.week
        engine.log(logging.INFO if chosen.complete else logging.WARNING,
                   "target week %s: %s", week, chosen.why)
    rescored = engine.call(rescore_earlier_forecasts, settings.warehouse,
                           week - timedelta(weeks=RESCORE_WEEKS), 60.0 * settings.lock_wait_minutes)
    engine.log(logging.INFO, "rescored %d earlier forecast(s) whose readings changed since they "
               "were scored", rescored)
    return _run_weeks([week], settings, "forecast")


@flow(name="backfill")
def backfill_flow(
    start: date, end: date, settings: BackfillSettings = BackfillSettings()
) -> RunSummary:
    """Every target week from ``start`` to ``end`` (both local Mondays, inclusive)."""
    settings = settings.resolved()
    _check_start(current_engine(), settings, [start, end])
    return _run_weeks(mondays_between(start, end), settings, "backfill")
