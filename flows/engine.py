"""Where a run's steps execute: as a Prefect flow run, or directly in this process.

The flows are written once and run two ways; :class:`Engine` tells them apart from Prefect's
own context (a flow run's or none):

* as Prefect flows, each batch's compute a Prefect task run on a Prefect task runner. Used by
  deployments (a worker runs the flow), and by the command line whenever a Prefect server is
  configured (``PREFECT_API_URL``, from the environment or the active Prefect profile): every
  run is then in that server's history and UI.
* directly: the same flow functions called as functions, the batches' compute on a
  ``concurrent.futures`` executor (processes, threads, or a Dask cluster's). No Prefect API
  is contacted and no temporary server is started, so a command starts in about a second and
  several commands at once on a loaded machine cannot time out waiting for one. The run's
  history is the warehouse's ``runs`` table, as it always is.

:func:`run_flow` picks the way for a command: Prefect when a server is configured (it must
answer: a configured server that is down is an error, never silently skipped), direct otherwise.
"""

from __future__ import annotations

import concurrent.futures as cf
import logging
import multiprocessing
import os
import signal
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from typing import Any

from flows.stopping import (
    GRACE_S,
    STOP,
    Stop,
    arm_exit_deadline,
    quiet_abandoned_futures,
    worker_init,
)
from tasks.errors import PipelineError, RunStoppedError
from tasks.forecast_tasks import forecast_batch
from tasks.protocol.batch import LOADED_ON_FIRST_USE

USER_LOG = logging.getLogger("wadiro.run")
"""What a run tells its user (a locked warehouse, results kept, a stop); the command line shows
it on standard error, Prefect's run logs get it too."""

SERVER_CHECK_TIMEOUT_S = 5.0
SERVER_WATCH_INTERVAL_S = 5.0
SERVER_WATCH_MISSES = 3
"""A configured server that misses this many health checks in a row is lost."""


class PrefectServerError(PipelineError):
    """The configured Prefect server does not answer."""


def configured_api_url() -> str:
    """The Prefect server's API URL from the environment or the active profile, or ``""``."""
    from prefect.settings import PREFECT_API_URL

    return PREFECT_API_URL.value() or ""


def server_answers(api_url: str, timeout_s: float = SERVER_CHECK_TIMEOUT_S) -> bool:
    """Whether the Prefect API at ``api_url`` answers its health check."""
    import httpx
    from prefect.settings import PREFECT_API_KEY

    headers = {"Authorization": f"Bearer {key}"} if (key := PREFECT_API_KEY.value()) else {}
    try:
        return httpx.get(f"{api_url.rstrip('/')}/health", headers=headers,
                         timeout=timeout_s).status_code == 200
    except httpx.HTTPError:
        return False


@dataclass(frozen=True)
class Engine:
    """How the flow being run executes: inside a Prefect flow run (``prefect``), or called
    directly. Storage steps are plain calls in the flow's process either way; only the
    batches' compute (:meth:`compute`), the log and the run's identity differ."""

    prefect: bool

    @classmethod
    def current(cls) -> Engine:
        """The engine of the code running now: Prefect inside a Prefect flow run."""
        from prefect.context import FlowRunContext

        return cls(prefect=FlowRunContext.get() is not None)

    def run_id(self) -> str:
        """The run's id: its Prefect flow run's, or a new one."""
        from prefect import runtime

        return str(runtime.flow_run.id if self.prefect else uuid.uuid4())

    def reference_time(self) -> datetime:
        """The instant the run stands for, from which a weekly run takes its week: the flow
        run's scheduled time (a deployment's Monday 06:00 even when its worker picks the run up
        late), else now."""
        if not self.prefect:
            return datetime.now(UTC)
        from prefect import runtime

        return datetime.fromisoformat(runtime.flow_run.scheduled_start_time.isoformat())

    @contextmanager
    def compute(self, settings: Any) -> Iterator[Callable[[Any, Any, str], Any]]:
        """Where the run's batches compute while the block runs: the task runner the settings
        name (:data:`RUNNERS`), Prefect's under Prefect. Yields ``submit(jobs, config,
        label)``, which returns a future with ``add_done_callback``, ``result`` and
        ``cancel``."""
        if settings.runner not in RUNNERS:
            raise ValueError(f"unknown task runner {settings.runner!r}; expected "
                             f"{', '.join(RUNNERS)}")
        runner = RUNNERS[settings.runner]
        if self.prefect:
            with _shared_local_api(), runner.prefect(settings) as task_runner:
                yield lambda jobs, config, label: task_runner.submit(
                    forecast_batch, {"jobs": jobs, "config": config, "label": label})
        else:
            with runner.local(settings) as executor:
                yield partial(_submit, executor)

    @contextmanager
    def watch(self) -> Iterator[None]:
        """Watch what the run depends on while the block runs: the Prefect server it reports
        to, when one is configured (Prefect's temporary one lives and dies with this process)."""
        url = configured_api_url() if self.prefect else ""
        if not url:
            yield
            return
        watch = _ServerWatch(url)
        watch.start()
        try:
            yield
        finally:
            watch.stop()

    def log(self, level: int, message: str, *args: Any) -> None:
        """Tell the user (standard error under the command line), and the flow run's log on
        the server under Prefect."""
        USER_LOG.log(level, message, *args)
        if self.prefect:
            from prefect import get_run_logger
            from prefect.exceptions import MissingContextError

            with suppress(MissingContextError):  # a thread outside the flow run's context
                get_run_logger().log(level, message, *args)

    def warn(self, message: str, *args: Any) -> None:
        self.log(logging.WARNING, message, *args)


def _submit(executor: cf.Executor, jobs: Any, config: Any, label: str) -> cf.Future:
    """A batch to an executor: the protocol's own function, not the Prefect task, so that a
    worker process imports the protocol only. A pool broken by the signal that stops the run
    stops it."""
    try:
        return executor.submit(forecast_batch.fn, jobs, config, label)
    except BaseException:
        if STOP.requested or STOP.wait(0.2):  # the pool broken by the same signal
            stop = STOP.requested
            raise RunStoppedError(stop.reason, status=stop.status,
                                  exit_code=stop.exit_code) from None
        raise


PREFECT_ERROR_LOGGERS = ("prefect.flow_runs", "prefect.task_runs", "prefect.engine")
"""The loggers through which Prefect reports a failed flow or task run, with its traceback."""


class _OneLineInputErrors(logging.Filter):
    """A record about a pipeline error (bad input, a missing warehouse, a stop, the machine's
    refusal) keeps its message and the error's one line, not the traceback: the error says
    what to do, and the traceback only buries it (a flow run's log, a worker's output)."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if isinstance(error, PipelineError):
            message = record.getMessage()
            shown = str(error)
            record.msg = message if shown in message else f"{message}: {shown}"
            record.args, record.exc_info, record.exc_text = (), None, None
        return True


_ONE_LINE = _OneLineInputErrors()


def one_line_input_errors() -> None:
    """Have Prefect log pipeline errors as one line each (idempotent): the flow run's
    "Encountered exception", the engine's "exited with unexpected exception", a task run's
    failure. Other errors keep their tracebacks."""
    for name in PREFECT_ERROR_LOGGERS:
        logger = logging.getLogger(name)
        if _ONE_LINE not in logger.filters:
            logger.addFilter(_ONE_LINE)


class _ServerWatch:
    """Checks the Prefect server's health every few seconds; when it misses
    :data:`SERVER_WATCH_MISSES` checks in a row, the run is asked to stop (status ``crashed``)
    and the process ends within :data:`~flows.stopping.GRACE_S` seconds."""

    def __init__(self, api_url: str) -> None:
        self.api_url = api_url
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="wadiro-server-watch", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._done.set()

    def _run(self) -> None:
        misses = 0
        while not self._done.wait(SERVER_WATCH_INTERVAL_S):
            misses = 0 if server_answers(self.api_url) else misses + 1
            if misses >= SERVER_WATCH_MISSES:
                reason = (f"lost the Prefect server at {self.api_url} (no answer for "
                          f"{misses * SERVER_WATCH_INTERVAL_S:.0f} s); start it again and rerun "
                          "the command (finished batches are written)")
                if STOP.request(Stop(reason, status="crashed", exit_code=1)):
                    arm_exit_deadline(GRACE_S, 1, reason)
                return


WORKER_PRELOAD = ("__main__", "tasks.protocol.batch", *LOADED_ON_FIRST_USE)
"""What the fork server imports once for all worker processes: the command's own module, the
protocol a batch runs and what that imports on first use."""


def _worker_context() -> multiprocessing.context.BaseContext:
    """Worker processes forked from a fork server that has imported the protocol once.

    Spawned workers would each import the protocol and its libraries (scikit-learn, SciPy, the
    solvers: seconds of CPU per worker, the larger part of a small run's start-up); a fork of
    the parent itself is unsafe once it runs threads. The fork server is a fresh,
    single-threaded process, started on first use and ending with this process. Where there is
    no fork (Windows), workers are spawned.
    """
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(list(WORKER_PRELOAD))
    return context


def _start_fork_server(context: multiprocessing.context.BaseContext) -> None:
    """Start the fork server with Ctrl-C ignored, which it keeps. It imports the protocol's
    libraries first (seconds on a loaded machine) and only then ignores Ctrl-C itself
    (CPython's forkserver), so a Ctrl-C to the terminal's process group meanwhile ended it with
    a 40-line traceback and broke the run's pool (the run recorded ``crashed``). An ignored
    signal stays ignored across the start of a program; a blocked one does not. This process
    ignores Ctrl-C only while the server is started (milliseconds); the fork server and the
    workers forked from it leave Ctrl-C to the run's process."""
    if (context.get_start_method() != "forkserver"
            or threading.current_thread() is not threading.main_thread()):
        return
    from multiprocessing import forkserver

    handler = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        forkserver.ensure_running()
    finally:
        signal.signal(signal.SIGINT, handler if handler is not None else signal.SIG_DFL)


def _workers(settings: Any) -> int:
    """Solver-heavy work pins BLAS to one thread itself: one worker per core by default."""
    return settings.workers or os.cpu_count() or 1


@contextmanager
def _stoppable(executor: cf.Executor) -> Iterator[cf.Executor]:
    try:
        yield executor
    finally:  # a stopped run does not wait for the work in flight (its workers are ended)
        executor.shutdown(wait=STOP.requested is None, cancel_futures=True)


def _thread_pool(settings: Any) -> AbstractContextManager[cf.Executor]:
    return _stoppable(cf.ThreadPoolExecutor(max_workers=_workers(settings)))


def _process_pool(settings: Any) -> AbstractContextManager[cf.Executor]:
    quiet_abandoned_futures()
    context = _worker_context()
    _start_fork_server(context)
    return _stoppable(cf.ProcessPoolExecutor(max_workers=_workers(settings),
                                             mp_context=context, initializer=worker_init))


@contextmanager
def _dask_cluster(settings: Any) -> Iterator[cf.Executor]:
    from distributed import Client

    with Client(settings.dask_address) as client:
        executor = client.get_executor(pure=False)
        try:
            yield executor
        finally:  # a stop cancels what is running
            executor.shutdown(wait=STOP.requested is None)


def _prefect_threads(settings: Any) -> Any:
    from prefect.task_runners import ThreadPoolTaskRunner

    return ThreadPoolTaskRunner(max_workers=_workers(settings))


def _prefect_processes(settings: Any) -> Any:
    from prefect.task_runners import ProcessPoolTaskRunner

    quiet_abandoned_futures()
    return ProcessPoolTaskRunner(max_workers=_workers(settings), initializer=worker_init)


def _prefect_dask(settings: Any) -> Any:
    from prefect_dask import DaskTaskRunner  # only this runner needs it

    return DaskTaskRunner(address=settings.dask_address)


@dataclass(frozen=True)
class Runner:
    """Where the per-building work runs, without Prefect (an executor, as a context manager)
    and with it (a Prefect task runner)."""

    local: Callable[[Any], AbstractContextManager[cf.Executor]]
    prefect: Callable[[Any], Any]


RUNNERS: dict[str, Runner] = {
    # Processes are the default: tuning spends much of its time in Python (optuna, the
    # solvers' iteration logic), which threads share under one interpreter lock. Worker
    # processes leave Ctrl-C to the run's process and end with it.
    "processes": Runner(_process_pool, _prefect_processes),
    "threads": Runner(_thread_pool, _prefect_threads),
    "dask": Runner(_dask_cluster, _prefect_dask),  # an existing scheduler, by address
}
"""The task runners by the settings' ``runner``."""


@contextmanager
def _shared_local_api() -> Iterator[None]:
    """Make worker processes use this process's temporary Prefect server.

    Without a configured server (no ``PREFECT_API_URL``), Prefect starts a temporary local one
    on first use, in every process that needs one: each worker of the processes runner would
    start its own and keep it busy. This points the settings that the runner hands to its
    workers at the server already running here. With a configured server it does nothing.
    """
    from prefect.settings import PREFECT_API_URL, temporary_settings

    if PREFECT_API_URL.value():
        yield
        return
    from prefect.server.api.server import SubprocessASGIServer  # the temporary server's handle

    server = SubprocessASGIServer()
    server.start()  # already running once a flow has started; starts it otherwise
    with temporary_settings(updates={PREFECT_API_URL: server.api_url}):
        yield


def use_prefect() -> bool:
    """Whether a command's flows run under Prefect: when a Prefect server is configured, which
    must answer."""
    url = configured_api_url()
    if url and not server_answers(url):
        raise PrefectServerError(
            f"PREFECT_API_URL is {url} but no Prefect server answers there; start it "
            "(`prefect server start`), or unset PREFECT_API_URL to run without one")
    return bool(url)


def run_flow(flow: Any, prefect: bool | None = None, **parameters: Any) -> Any:
    """Run ``flow`` with ``parameters``: as a Prefect flow when ``prefect`` (default:
    :func:`use_prefect`), else its function directly."""
    prefect = use_prefect() if prefect is None else prefect
    return (flow if prefect else flow.fn)(**parameters)


