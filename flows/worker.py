"""A Prefect process worker that stops on the first signal, its flow runs first (``wadiro worker``).

``prefect worker start`` (Prefect 3.9) turns a SIGTERM into a SIGINT to itself and stops on
SIGINT. Two things made an operator send a second signal, which Prefect's worker turns into a
SIGKILL of itself:

* where SIGINT is ignored -- a worker started in the background of a script (``prefect worker
  start ... &``), which the shell starts with SIGINT ignored -- neither signal stops it;
* a worker that does stop while a flow run is in progress ends the run at once: it sends it
  SIGTERM and, closing the process a moment later, SIGKILL, before the run can record anything
  (its ``runs`` row stays ``running``, its Prefect flow run ``Running``).

:func:`run_worker` starts ``prefect worker start`` in a session of its own (so a terminal's
Ctrl-C reaches only this process) with SIGINT at its default. On the first SIGINT or SIGTERM it
sends SIGTERM to each flow run the worker is executing -- each stops within
:data:`~flows.stopping.GRACE_S` seconds, writes what it finished and records its
run as ``interrupted`` -- waits for them, then stops the worker (SIGINT) and exits with status
128 + the signal's number. A second signal ends everything at once (SIGKILL). As it starts, it
warns of what would make every scheduled run fail (:func:`preflight_warnings`).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import FrameType

import psutil

from flows.stopping import GRACE_S, STOP_SIGNALS
from tasks.warehouse.connection import WAREHOUSE_ENV, blank_warehouse_env, default_warehouse

WORKER_STOP_S = 20.0
"""How long the Prefect worker gets to stop once its flow runs have ended."""

POLL_S = 0.2


def _sigint_at_default() -> None:
    """In the worker's process, before it starts: SIGINT as Python expects it (raising
    ``KeyboardInterrupt``), however this command was started."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _say(message: str) -> None:
    print(f"wadiro worker: {message}", file=sys.stderr, flush=True)


def _flow_runs(worker: psutil.Process) -> list[psutil.Process]:
    """The flow runs the worker is executing: its child processes."""
    try:
        return worker.children()
    except psutil.Error:
        return []


def _signal_all(processes: list[psutil.Process], signum: int) -> None:
    for process in processes:
        try:
            process.send_signal(signum)
        except psutil.Error:
            pass  # ended meanwhile


def _kill_everything(worker: subprocess.Popen) -> None:
    """SIGKILL the worker's flow runs (and what they started) and the worker."""
    try:
        parent = psutil.Process(worker.pid)
        tree = [*parent.children(recursive=True), parent]
    except psutil.Error:
        tree = []
    _signal_all(tree, signal.SIGKILL)


class _Stopper:
    """Counts this command's stop signals; the second ends everything at once."""

    def __init__(self, worker: subprocess.Popen) -> None:
        self.worker = worker
        self.signum: int | None = None
        self.event = threading.Event()

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        if self.signum is not None:
            _say(f"{signal.Signals(signum).name} again: stopping at once")
            _kill_everything(self.worker)
            os._exit(128 + signum)
        self.signum = signum
        self.event.set()


def _stop(worker: subprocess.Popen, signum: int) -> None:
    """Stop the flow runs in progress (SIGTERM, at most ``GRACE_S`` + a margin), then the
    worker; whatever is left after that is killed."""
    handle = psutil.Process(worker.pid)
    asked: set[int] = set()
    deadline = time.monotonic() + GRACE_S + 10.0
    while (runs := _flow_runs(handle)) and time.monotonic() < deadline:
        new = [run for run in runs if run.pid not in asked]
        if new:
            _say(f"{signal.Signals(signum).name}: asking {len(new)} flow run(s) to stop (PID "
                 f"{', '.join(str(run.pid) for run in new)}); they write what they finished "
                 "and record their runs as interrupted (again to stop at once)")
            _signal_all(new, signal.SIGTERM)
            asked.update(run.pid for run in new)
        time.sleep(POLL_S)
    if worker.poll() is None:
        worker.send_signal(signal.SIGINT)
    try:
        worker.wait(WORKER_STOP_S)
    except subprocess.TimeoutExpired:
        _say(f"the Prefect worker did not stop within {WORKER_STOP_S:.0f} s; killed")
    _kill_everything(worker)
    worker.wait()


def preflight_warnings() -> list[str]:
    """What would make every scheduled run fail at its start, seen from the worker's environment,
    where the deployments resolve it (``prefect deploy`` runs elsewhere and cannot tell): no
    ``WADIRO_PROJECT_DIR``, or a default warehouse (``$WADIRO_WAREHOUSE``, else
    ``warehouse.duckdb`` in the project folder) that does not exist."""
    project = os.environ.get("WADIRO_PROJECT_DIR", "").strip()
    if not project:
        return ["WADIRO_PROJECT_DIR is not set: every flow run will fail in its pull step; set it "
                "to the checkout that holds flows/ and start the worker again"]
    warehouse = Path(default_warehouse())
    found = warehouse if warehouse.is_absolute() else Path(project) / warehouse
    if found.is_file():
        return []
    origin = (f"from {WAREHOUSE_ENV}" if os.environ.get(WAREHOUSE_ENV, "").strip()
              else f"{WAREHOUSE_ENV} is set but empty" if blank_warehouse_env()
              else f"{WAREHOUSE_ENV} is not set")
    return [f"the deployments' default warehouse, {found} ({origin}), does not exist: a run "
            "given no settings.warehouse (a scheduled run, unless prefect.yaml sets it) will fail "
            f"at its start; set {WAREHOUSE_ENV} to the operator's warehouse and start the worker "
            "again"]


def run_worker(arguments: list[str]) -> int:
    """``prefect worker start ARGUMENTS`` until it ends, or until the first stop signal stops
    its flow runs and then it; the exit status (128 + the signal's number after a signal)."""
    for warning in preflight_warnings():
        _say(f"warning: {warning}")
    prefect = Path(sys.executable).with_name("prefect")
    command = [str(prefect)] if prefect.exists() else [sys.executable, "-m", "prefect"]
    worker = subprocess.Popen([*command, "worker", "start", *arguments],
                              start_new_session=True, preexec_fn=_sigint_at_default)
    stopper = _Stopper(worker)
    previous = {s: signal.signal(s, stopper) for s in STOP_SIGNALS}
    try:
        while worker.poll() is None and not stopper.event.wait(POLL_S):
            pass
        if stopper.signum is None:
            return worker.returncode
        _stop(worker, stopper.signum)
        _say("stopped")
        return 128 + stopper.signum
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


