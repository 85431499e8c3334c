"""The forecasting flows: one target week for the fleet (the weekly run) and a backfill.

Orchestration only, and one road, read top to bottom in :func:`forecast_weeks`: open the run;
read a few batches of buildings at a time (:data:`READ_BUILDINGS`); submit each batch's
forecasts to the task runner (processes, threads or a Dask cluster), at most
``settings.max_in_flight`` batches in the air -- which bounds memory and the load on Prefect's
API however large the fleet; write the batches' rows as they come back (every
``settings.write_every_s`` at most); close the run.

The flows run through Prefect or directly (:mod:`~flows.engine`). Either way a
run:

* stops cleanly on the first Ctrl-C or SIGTERM: it submits nothing more, abandons the batches
  in flight and ends their worker processes, writes what is finished, records the run as
  ``interrupted`` and raises :class:`~tasks.errors.RunStoppedError`
  (:mod:`~flows.stopping`);
* stops the same way, recorded as ``crashed``, when the Prefect server it reports to stops
  answering;
* never throws computed results away because another process holds the warehouse: its writer
  stages them beside it and loads them once the lock clears; the run waits for that at its
  end, at most ``settings.lock_wait_minutes``, and otherwise says how to load them later
  (:class:`~tasks.warehouse.pending.RunWriter`).
"""

from __future__ import annotations

import logging
import queue
from collections import deque
from collections.abc import Callable, Iterator
from datetime import date, datetime, timedelta
from itertools import islice
from typing import Any

from prefect import flow

from flows.engine import Engine, one_line_input_errors
from flows.progress import RunProgress
from flows.settings import BackfillSettings, RunSettings, WeeklySettings
from flows.stopping import STOP, quiet_resource_tracker, stop_child_processes
from tasks.errors import (
    ConflictingWeekError,
    DegradedRunError,
    HeldBidsError,
    RunStoppedError,
    WeekNotForecastError,
)
from tasks.forecast_tasks import publish_leaderboard, publish_not_forecast, publish_outcomes
from tasks.protocol.forecasting import BuildingWeekResult
from tasks.protocol.weeks import check_mondays, mondays_between
from tasks.warehouse.connection import WarehouseLockedError, require_warehouse
from tasks.warehouse.run_dates import check_plausible_weeks
from tasks.warehouse.run_store import Batch, OpenRun, RunStore, RunSummary, RunWriter

RESCORE_WEEKS = 8
"""How far back the weekly run looks for forecasts whose actuals arrived after scoring."""

POLL_S = 0.5
"""How often a run waiting for its batches checks for a stop request."""

READ_BUILDINGS = 200
"""About how many buildings a run reads from the warehouse at a time (whole batches, at least
one), or a :data:`READS_PER_RUN`-th of a larger fleet (at most :data:`MAX_READ_BUILDINGS`).
Each read scans the stored hours and forecasts of every building once, so its cost per building
falls with its size and rises with the fleet's: on a 1,000-building warehouse, 12.5 ms of CPU
per building at 50, 6.8 at 200; on a 10,000-building one 9.8 ms at 200, 5-7 at 1,000 (issue
49). The batches read ahead of the task runner wait in the run's process (about 0.2 MB per
building for a weekly run; more for a backfill's weeks)."""

READS_PER_RUN, MAX_READ_BUILDINGS = 20, 2000

NOT_FORECAST_SHOWN = 50
"""How many building-weeks the learned models could not forecast a run names in its log (all
of them are in its artifact and in ``window_status``)."""


def forecast_weeks(weeks: list[date], settings: RunSettings, label: str) -> RunSummary:
    """The protocol for every (building, week): open the run, read its batches, submit them
    to the task runner, write their results as they come back; leaving the block closes the
    run, with its summary or with the error or stop that ended it. The task runner is torn
    down only after that: a stopped run's record never waits for it (a process ended by its
    stop deadline in the meantime would leave the run ``running``)."""
    engine, store, weeks = Engine.current(), _store(settings), check_mondays(weeks)
    if not STOP.polled:
        STOP.reset()  # a stop of an earlier run in this process is not this run's
    # a signal from the moment the run's row may be written is a stop request the run's loop
    # handles (the row closed as interrupted), not an interruption that leaves it running
    with engine.compute(settings) as submit, STOP.polling():  # torn down after the run closes
        run = store.open_run(engine.run_id(), label, weeks, settings.buildings,
                             settings.forecast, settings.record(weeks, label))
        with store.writer(run, engine.warn, settings.write_every_s) as writer, \
                STOP.polling(), engine.watch(), \
                STOP.last_words(lambda: writer.close(writer.summary, _stopped_or_ended())), \
                RunProgress(label, run.n_building_weeks, artifact=engine.prefect) as progress:
            _tell_start(engine, run, store)
            for results in _batch_results(run, store, settings, submit, writer, progress):
                writer.write(results)
                progress.update(writer.summary.building_weeks)
    if writer.locked:
        raise RunStoppedError(f"the warehouse stayed locked; {writer.how_to_load()}",
                              status=writer.status)
    summary = writer.summary
    _tell_end(engine, store, run, summary, writer.status)
    if summary.held:
        raise HeldBidsError(summary.held_message() or summary.line(), summary)
    if settings.strict and not summary.healthy:
        raise DegradedRunError(f"--strict: {summary.degraded_message() or summary.line()}",
                               summary)
    return summary


def _batch_results(
    run: OpenRun, store: RunStore, settings: RunSettings,
    submit: Callable[[Any, Any, str], Any], writer: RunWriter, progress: RunProgress,
) -> Iterator[list[BuildingWeekResult]]:
    """Each batch's results as it finishes, at most ``settings.max_in_flight`` batches in the
    air; buildings whose data cannot be read come back at once as failed results. While none
    has finished (every :data:`POLL_S`) the writer retries what a locked warehouse kept out.
    Stops (raising) when a stop is requested, ending the batches' worker processes."""
    size = settings.batch_size_for(len(run.building_ids))
    reads = max(READ_BUILDINGS, min(MAX_READ_BUILDINGS, len(run.building_ids) // READS_PER_RUN))
    batches, per_read = run.batches(size), max(1, reads // size)
    read: deque[Batch] = deque()
    pending: set = set()
    finished: queue.SimpleQueue = queue.SimpleQueue()
    try:
        while True:
            while not STOP.requested and len(pending) < settings.max_in_flight:
                if not read and (groups := list(islice(batches, per_read))):
                    read.extend(store.read_batches(run, groups))
                if not read:
                    break
                batch = read.popleft()
                if batch.unreadable:
                    yield batch.unreadable
                if batch.jobs:
                    future = submit(batch.jobs, run.config, batch.label)
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
                progress.update(writer.summary.building_weeks)
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
        if STOP.requested:
            stop_child_processes()  # the batches in flight are abandoned


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


def _stopped_or_ended() -> RunStoppedError:
    """Why a run whose process is being ended at once stops."""
    return _stopped() if STOP.requested else RunStoppedError("stopped at once")


def _store(settings: RunSettings) -> RunStore:
    return RunStore(settings.warehouse, 60.0 * settings.lock_wait_minutes)


def _tell_start(engine: Engine, run: OpenRun, store: RunStore) -> None:
    engine.log(logging.INFO, "run %s: %d building(s) x %d week(s), models %s", run.run_id,
               len(run.building_ids), len(run.weeks), ", ".join(run.config.models))
    if run.earlier_pending:
        engine.warn("results of %d earlier run(s) are still kept beside the warehouse (%s); "
                    "load them with `wadiro load-pending --warehouse %s`",
                    len(run.earlier_pending), ", ".join(run.earlier_pending), store.warehouse)


def _tell_end(engine: Engine, store: RunStore, run: OpenRun, summary: RunSummary,
              status: str | None) -> None:
    """The run's failures, what the learned models could not forecast and its last line in
    the log; under Prefect, its outcomes and leaderboard as artifacts."""
    for failure in summary.failures:
        engine.log(logging.WARNING, "failed: %s", failure)
    _tell_not_forecast(engine, store, run)
    engine.log(logging.INFO if summary.healthy else logging.WARNING, "run %s %s: %s",
               run.run_id, status, summary.line())
    if engine.prefect:
        publish_outcomes(run, summary)
        publish_leaderboard(store.warehouse, run)


def _tell_not_forecast(engine: Engine, store: RunStore, run: OpenRun) -> None:
    """Name, in the run's log and (through Prefect) an artifact, every building-week the
    learned models could not forecast, with its window status and reason."""
    try:
        rows = store.not_forecast(run)
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


def _check_start(engine: Engine, settings: RunSettings, weeks: list[date]) -> None:
    """Refuse at once, in one line, a run that cannot start: target weeks no one could mean, a
    warehouse that is not there (a deployment's default is ``$WADIRO_WAREHOUSE`` on the
    worker). Under Prefect such input errors are logged without a traceback too."""
    if engine.prefect:
        one_line_input_errors()
    quiet_resource_tracker()  # a stopped run's worker processes leave semaphores behind
    check_plausible_weeks(weeks)
    require_warehouse(settings.warehouse)


@flow(name="weekly-forecast")
def weekly_forecast_flow(
    week: date | None = None,
    as_of: datetime | None = None,
    settings: WeeklySettings = WeeklySettings(),
) -> RunSummary:
    """One target week for the fleet: ``week`` when named, else the week of the run's
    reference time (``as_of``, default its scheduled time, or now): that time's local Monday,
    or the first Monday after it (:func:`~tasks.protocol.weeks.week_of_reference`). The
    stored data never moves the week: a short or late meter file is a gap in its history.

    First scores the last weeks' forecasts again where their actuals have arrived since, so a
    forecast made before its week happened is scored by the first run after its readings are in.
    A run whose week no building could be forecast for by the learned models (no weather, no
    history) records why per building and raises :class:`WeekNotForecastError`.
    """
    engine, settings = Engine.current(), settings.resolved()
    if week is not None and as_of is not None:
        raise ConflictingWeekError("give --week or --as-of, not both: --week names the week, "
                                   "--as-of the time the week is chosen from")
    _check_start(engine, settings, [] if week is None else [week])
    if week is None:
        chosen = _store(settings).week_of_run(settings.buildings,
                                              as_of or engine.reference_time())
        week = chosen.week
        check_plausible_weeks([week])
        engine.log(logging.INFO if chosen.complete else logging.WARNING,
                   "target week %s: %s", week, chosen.why)
    rescored = _store(settings).rescore(week - timedelta(weeks=RESCORE_WEEKS))
    engine.log(logging.INFO, "rescored %d earlier forecast(s) whose readings changed since they "
               "were scored", rescored)
    summary = forecast_weeks([week], settings, "forecast")
    if summary.building_weeks and not summary.ok:
        raise WeekNotForecastError(
            f"the week of {week} could not be forecast by the learned models for any of the "
            f"{summary.building_weeks} building(s) ({summary.not_ok_causes()}); each one's "
            f"reason is in window_status of run {summary.run_id}", summary)
    return summary


@flow(name="backfill")
def backfill_flow(
    start: date, end: date, settings: BackfillSettings = BackfillSettings()
) -> RunSummary:
    """Every target week from ``start`` to ``end`` (both local Mondays, inclusive)."""
    engine, settings = Engine.current(), settings.resolved()
    _check_start(engine, settings, [start, end])
    return forecast_weeks(mondays_between(start, end), settings, "backfill")
