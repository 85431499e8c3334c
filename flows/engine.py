"""Where a run's steps execute: through Prefect, or directly in this process.

The flows are written once, against :class:`Engine`, and run two ways:

* :class:`PrefectEngine` -- the flows as Prefect flows, each batch's compute a Prefect task
  run on a Prefect task runner. Used by deployments (a worker runs the flow), and by the
  command line whenever a Prefect server is configured (``PREFECT_API_URL``, from the
  environment or the active Prefect profile): every run is then in that server's history and
  UI.
* :class:`LocalEngine` -- the same flow functions called directly, the batches' compute on a
  ``concurrent.futures`` executor (processes, threads, or a Dask cluster's). No Prefect API
  is contacted and no temporary server is started, so a command starts in about a second and
  several commands at once on a loaded machine cannot time out waiting for one. The run's
  history is the warehouse's ``runs`` table, as it always is.

:func:`run_flow` picks the engine for a command: Prefect when a server is configured (it must
answer: a configured server that is down is an error, never silently skipped), local otherwise.
"""

from __future__ import annotations

import concurrent.futures as cf
import logging
import multiprocessing
import os
import signal
import threading
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

from flows.stopping import (
    GRACE_S,
    STOP,
    Stop,
    arm_exit_deadline,
    quiet_abandoned_futures,
    worker_init,
)
from tasks.errors import PipelineError, RunStoppedError
from tasks.protocol.batch import LOADED_ON_FIRST_USE

R = TypeVar("R")

USER_LOG = logging.getLogger("wadiro_fleet.run")
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


class Engine(ABC):
    """How a flow's compute step runs: on a Prefect task runner as task runs, or on a
    ``concurrent.futures`` executor. Storage steps are plain calls in the flow's process."""

    prefect: bool

    @abstractmethod
    def run_id(self) -> str:
        """The id of the run being executed (the flow run's id under Prefect)."""

    @abstractmethod
    def submit(self, compute: Any, jobs: Any, config: Any, label: str) -> Any:
        """Send a batch's compute step (a Prefect task) to the task runner; a future with
        ``add_done_callback``, ``result`` and ``cancel``."""

    @abstractmethod
    def run_subflow(self, flow: Any, settings: Any, *args: Any) -> Any:
        """Run ``flow(*args)`` with the task runner the run settings ask for."""

    def watch(self) -> AbstractContextManager[None]:
        """Watch what the run depends on while the block runs (its Prefect server)."""
        return nullcontext()

    def reference_time(self) -> datetime:
        """The instant the run stands for, from which a weekly run takes its week: now."""
        return datetime.now(UTC)

    def log(self, level: int, message: str, *args: Any) -> None:
        USER_LOG.log(level, message, *args)

    def warn(self, message: str, *args: Any) -> None:
        """Tell the user (standard error under the command line)."""
        self.log(logging.WARNING, message, *args)


class PrefectEngine(Engine):
    """Steps as Prefect task runs, the flow reporting to a Prefect server."""

    prefect = True

    def run_id(self) -> str:
        from prefect import runtime

        return str(runtime.flow_run.id or uuid.uuid4())

    def submit(self, compute: Any, jobs: Any, config: Any, label: str) -> Any:
        return compute.submit(jobs, config, label)

    def reference_time(self) -> datetime:
        """The flow run's scheduled time (a deployment's Monday 06:00 even when its worker
        picks the run up late); now for a run started by hand."""
        from prefect import runtime

        return datetime.fromisoformat(runtime.flow_run.scheduled_start_time.isoformat())

    def run_subflow(self, flow: Any, settings: Any, *args: Any) -> Any:
        task_runner = RUNNERS[settings.runner].prefect(settings)
        with _shared_local_api():
            return flow.with_options(task_runner=task_runner)(*args)

    def log(self, level: int, message: str, *args: Any) -> None:
        from prefect import get_run_logger
        from prefect.exceptions import MissingContextError

        super().log(level, message, *args)
        try:
            get_run_logger().log(level, message, *args)  # into the run's logs on the server
        except MissingContextError:
            pass

    @contextmanager
    def watch(self) -> Iterator[None]:
        url = configured_api_url()
        if not url:  # Prefect's own temporary server: it lives and dies with this process
            yield
            return
        watch = _ServerWatch(url)
        watch.start()
        try:
            yield
        finally:
            watch.stop()


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


class LocalEngine(Engine):
    """Storage steps as plain calls; compute steps on a ``concurrent.futures`` executor."""

    prefect = False

    def __init__(self) -> None:
        self._executor: cf.Executor | None = None

    def run_id(self) -> str:
        return str(uuid.uuid4())  # asked once per run

    def submit(self, compute: Any, jobs: Any, config: Any, label: str) -> cf.Future:
        """The step's own function (the protocol's), not the Prefect task: a worker process
        imports the protocol only."""
        if self._executor is None:
            raise RuntimeError("no executor: submit() belongs inside run_subflow()")
        try:
            return self._executor.submit(getattr(compute, "fn", compute), jobs, config, label)
        except BaseException:
            if STOP.requested or STOP.wait(0.2):  # the pool broken by the same signal
                stop = STOP.requested
                raise RunStoppedError(stop.reason, status=stop.status,
                                      exit_code=stop.exit_code) from None
            raise

    def run_subflow(self, flow: Any, settings: Any, *args: Any) -> Any:
        if settings.runner not in RUNNERS:
            raise ValueError(f"unknown task runner {settings.runner!r}; expected "
                             f"{', '.join(RUNNERS)}")
        with RUNNERS[settings.runner].local(settings) as executor:
            self._executor = executor
            try:
                return flow.fn(*args)
            finally:
                self._executor = None


_ENGINE: ContextVar[Engine | None] = ContextVar("wadiro_engine", default=None)


def current_engine() -> Engine:
    """The engine of the flow being run: Prefect unless :func:`run_flow` chose otherwise."""
    return _ENGINE.get() or PrefectEngine()


def choose_engine() -> Engine:
    """Prefect when a Prefect server is configured (and answers), else local."""
    url = configured_api_url()
    if not url:
        return LocalEngine()
    if not server_answers(url):
        raise PrefectServerError(
            f"PREFECT_API_URL is {url} but no Prefect server answers there; start it "
            "(`prefect server start`), or unset PREFECT_API_URL to run without one")
    return PrefectEngine()


def run_flow(flow: Any, engine: Engine | None = None, **parameters: Any) -> Any:
    """Run ``flow`` with ``parameters`` on ``engine`` (default: :func:`choose_engine`)."""
    engine = engine or choose_engine()
    return on_engine(lambda: (flow if engine.prefect else flow.fn)(**parameters), engine)


def on_engine(call: Callable[[], R], engine: Engine) -> R:
    """``call()`` with ``engine`` as the current engine (tests, benchmarks)."""
    token = _ENGINE.set(engine)
    try:
        return call()
    finally:
        _ENGINE.reset(token)


__all__ = [
    "RUNNERS",
    "USER_LOG",
    "Engine",
    "LocalEngine",
    "PrefectEngine",
    "PrefectServerError",
    "Runner",
    "choose_engine",
    "configured_api_url",
    "current_engine",
    "on_engine",
    "one_line_input_errors",
    "run_flow",
    "server_answers",
]
