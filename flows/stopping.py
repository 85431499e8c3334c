"""Stopping a run on purpose, within seconds, and leaving no process behind.

* :data:`STOP` is the process's one stop request. A signal (Ctrl-C's SIGINT, SIGTERM) or a lost
  Prefect server sets it; a run's loop polls it (:meth:`StopRequest.polling`), stops submitting
  work, abandons the batches in flight, writes what is complete, records the run as
  ``interrupted`` and raises. Outside such a loop the first signal interrupts at once
  (``KeyboardInterrupt``), as Python would. A second signal stops everything at once.
* Once a stop is requested, a process that may be ended -- the command line's, a flow run's
  started by a Prefect worker, not a notebook that runs a flow -- ends within :data:`GRACE_S`
  seconds whatever it is waiting for (a Prefect server that no longer answers, a thread that
  cannot be interrupted): :func:`arm_exit_deadline`, and at once when it reaches the
  interpreter's exit. A second signal ends it at once. What must be written before such an end
  (a run's closing record) is registered with :meth:`StopRequest.last_words`.
* Worker processes (the ``processes`` task runner) start with :func:`worker_init`: they leave
  Ctrl-C to their parent, and end by themselves as soon as the parent is gone, even
  after ``kill -9`` (nothing else would end them: they are not in the parent's session once it
  is gone). :func:`stop_child_processes` ends them when a run stops, and
  :func:`quiet_abandoned_futures` keeps Python's process pool from printing a traceback about
  the batches it abandoned.

Standard library only: worker processes import this module before anything else.
"""

from __future__ import annotations

import atexit
import logging
import multiprocessing
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import FrameType

GRACE_S = 15.0
"""Longest time between a stop request and the end of the process."""

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@dataclass(frozen=True)
class Stop:
    """Why a run stops: the message to show, the ``runs`` status and the exit status."""

    reason: str
    status: str = "interrupted"
    exit_code: int = 1


class StopRequest:
    """The process's stop request, set from a signal handler or a watching thread."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self._stop: Stop | None = None
        self._polling = 0
        self._deadline: threading.Timer | None = None
        self._last_words: list[Callable[[], None]] = []
        self.may_end_process = bool(os.environ.get("PREFECT__FLOW_RUN_ID"))
        """Whether a stop may end this process (the command line sets it; a flow run that a
        Prefect worker started has it); in any other process the run only raises."""

    @property
    def requested(self) -> Stop | None:
        return self._stop

    def request(self, stop: Stop) -> bool:
        """Ask the run to stop; ``False`` if a stop was already requested."""
        if self._stop is not None:
            return False
        self._stop = stop
        self._event.set()
        return True

    def wait(self, seconds: float) -> bool:
        """Sleep up to ``seconds``, waking early on a stop request; whether one is pending."""
        return self._event.wait(seconds)

    @property
    def polled(self) -> bool:
        """Whether a loop is polling the request (a signal then only asks it to stop)."""
        return self._polling > 0

    @contextmanager
    def polling(self) -> Iterator[StopRequest]:
        """While the block runs, a signal only sets the request: the block polls it. The
        handlers are (re)installed for the block, over any installed meanwhile (Prefect's flow
        engine installs its own for SIGTERM), and restored after it."""
        self._polling += 1
        try:
            with handle_stop_signals():
                yield self
        finally:
            self._polling -= 1

    @contextmanager
    def last_words(self, callback: Callable[[], None]) -> Iterator[None]:
        """While the block runs, ``callback()`` is called (from whichever thread ends the
        process) if the process is ended at once, before it ends."""
        self._last_words.append(callback)
        try:
            yield
        finally:
            self._last_words.remove(callback)

    def say_last_words(self) -> None:
        for callback in list(self._last_words):
            try:
                callback()
            except Exception as error:  # noqa: BLE001 -- ending anyway; say what was not done
                print(f"warning: {error}", file=sys.stderr, flush=True)

    def reset(self) -> None:
        """Forget a request and its deadline (a new command or run in the same process)."""
        if self._deadline is not None:
            self._deadline.cancel()
        may_end_process = self.may_end_process
        self.__init__()
        self.may_end_process = may_end_process


STOP = StopRequest()


def _signal_name(signum: int) -> str:
    return {signal.SIGINT: "Ctrl-C (SIGINT)", signal.SIGTERM: "SIGTERM"}.get(
        signum, signal.Signals(signum).name)


def _on_signal(signum: int, frame: FrameType | None) -> None:
    exit_code = 128 + signum
    if STOP.requested is not None:
        if not STOP.may_end_process:
            raise KeyboardInterrupt
        hard_exit(exit_code, f"{_signal_name(signum)} again: stopping at once")
    STOP.request(Stop(f"interrupted by {_signal_name(signum)}", "interrupted", exit_code))
    arm_exit_deadline(GRACE_S, exit_code)
    if not STOP.polled:
        raise KeyboardInterrupt
    print(f"{_signal_name(signum)}: stopping; finished batches are being written "
          "(again to stop at once)", file=sys.stderr, flush=True)


@contextmanager
def handle_stop_signals() -> Iterator[None]:
    """Route SIGINT and SIGTERM to :data:`STOP` while the block runs (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.getsignal(s) for s in STOP_SIGNALS}
    for s in STOP_SIGNALS:
        signal.signal(s, _on_signal)
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler if handler is not None else signal.SIG_DFL)


def stop_child_processes(timeout_s: float = 5.0) -> int:
    """End every worker process this process started (SIGKILL: they hold nothing worth
    saving); how many there were."""
    children = multiprocessing.active_children()
    for child in children:
        child.kill()
    for child in children:
        child.join(timeout_s)
    return len(children)


def hard_exit(exit_code: int, message: str) -> None:
    """End the process now: workers first, then what must be written (the run's closing
    record), then this process, without waiting for anything else."""
    stop_child_processes(timeout_s=2.0)
    STOP.say_last_words()
    print(f"error: {message}", file=sys.stderr, flush=True)
    sys.stdout.flush()
    os._exit(exit_code)


def arm_exit_deadline(seconds: float, exit_code: int, message: str | None = None) -> None:
    """End the process ``seconds`` from now unless it has ended by then (only where
    :attr:`StopRequest.may_end_process`)."""
    if STOP._deadline is not None or not STOP.may_end_process:
        return
    text = message or f"did not stop within {seconds:.0f} s; stopped at once"
    STOP._deadline = threading.Timer(seconds, hard_exit, (exit_code, text))
    STOP._deadline.daemon = True
    STOP._deadline.start()
    atexit.register(_end_at_exit)


def _end_at_exit() -> None:
    """At the interpreter's exit after a stop (a flow run that a Prefect worker started ends
    through its engine, not through :func:`hard_exit`): flush the logs -- a flow run's go to its
    Prefect server -- and end now. Python's own exit handlers would otherwise wait for what the
    stop abandoned: a process pool's queue still feeding a worker that was ended, forever, until
    the deadline."""
    stop = STOP.requested
    if stop is None:
        return
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(stop.exit_code)


# --- worker processes ------------------------------------------------------------------------

def quiet_resource_tracker() -> None:
    """Ending worker processes at once leaves the semaphores they made to Python's resource
    tracker, which frees them -- and warns about each "leak" on standard error, after the
    command's own one-line message. Ask it not to (it reads this process's warning options when
    it starts)."""
    quiet = "ignore::UserWarning:multiprocessing.resource_tracker"
    if quiet not in sys.warnoptions:
        sys.warnoptions.append(quiet)


def _is_abandoned_future_error(args: threading.ExceptHookArgs) -> bool:
    """The process pool's manager thread failing a future the stopped run had cancelled."""
    from concurrent.futures import InvalidStateError
    from concurrent.futures.process import _ExecutorManagerThread

    return (STOP.requested is not None and args.exc_type is InvalidStateError
            and isinstance(args.thread, _ExecutorManagerThread))


def quiet_abandoned_futures() -> None:
    """A stopped run cancels the batches it abandons, then ends its worker processes; Python's
    process pool then tries to fail the cancelled futures as well, and before Python 3.12 its
    manager thread dies printing a 10-line ``InvalidStateError`` traceback (CPython gh-107219)
    after the run's own message. Let that one error of a stopped run pass quietly; every other
    thread error is printed as before (idempotent)."""
    if getattr(threading.excepthook, "_wadiro", False):
        return
    printed = threading.excepthook

    def excepthook(args: threading.ExceptHookArgs) -> None:
        if not _is_abandoned_future_error(args):
            printed(args)

    excepthook._wadiro = True  # type: ignore[attr-defined]
    threading.excepthook = excepthook


def worker_init() -> None:
    """Initializer of a worker process: Ctrl-C is for the parent (which stops the workers
    itself), and the worker ends as soon as its parent -- the run's process, which started it
    directly or through a fork server -- has ended."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    parent = multiprocessing.parent_process()
    if parent is not None:
        threading.Thread(target=_exit_with, args=(parent,), name="wadiro-parent-watch",
                         daemon=True).start()


def _exit_with(parent: multiprocessing.process.BaseProcess) -> None:
    parent.join()  # returns once the parent's end of the pipe it left the worker is closed
    os._exit(1)


