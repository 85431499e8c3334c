"""Task runners by name: where the per-building work runs."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

from prefect.settings import PREFECT_API_URL, temporary_settings
from prefect.task_runners import ProcessPoolTaskRunner, TaskRunner, ThreadPoolTaskRunner
from wadiro_fleet.flows.stopping import quiet_abandoned_futures, worker_init


def make_task_runner(
    kind: str, *, max_workers: int | None = None, dask_address: str | None = None
) -> TaskRunner:
    """Threads or processes on this machine, or an existing Dask scheduler given by address.

    Solver-heavy tasks pin BLAS to one thread themselves, so the default worker count is the
    number of cores. Processes are the pipeline's default: tuning spends much of its time in
    Python (optuna, the solvers' iteration logic), which threads share under one interpreter
    lock (README, "Scale", compares the two). Worker processes leave Ctrl-C to the flow's
    process and end with it (:func:`~wadiro_fleet.flows.stopping.worker_init`).
    """
    workers = max_workers or os.cpu_count() or 1
    if kind == "threads":
        return ThreadPoolTaskRunner(max_workers=workers)
    if kind == "processes":
        quiet_abandoned_futures()
        return ProcessPoolTaskRunner(max_workers=workers, initializer=worker_init)
    if kind != "dask":
        raise ValueError(f"unknown task runner {kind!r}; expected threads, processes or dask")
    if not dask_address:
        raise ValueError("the dask runner needs a scheduler address (e.g. tcp://127.0.0.1:8786)")
    from prefect_dask import (
        DaskTaskRunner,  # imported lazily: only this runner needs it
    )

    return DaskTaskRunner(address=dask_address)


@contextmanager
def shared_local_api() -> Iterator[None]:
    """Make worker processes use this process's temporary Prefect server.

    Without a configured server (no ``PREFECT_API_URL``), Prefect starts a temporary local one
    on first use, in every process that needs one: each worker of the processes runner would
    start its own and keep it busy. This points the settings that the runner hands to its
    workers at the server already running here. With a configured server it does nothing.
    """
    if PREFECT_API_URL.value():
        yield
        return
    from prefect.server.api.server import (
        SubprocessASGIServer,  # the temporary-server handle
    )

    server = SubprocessASGIServer()
    server.start()  # already running once a flow has started; starts it otherwise
    with temporary_settings(updates={PREFECT_API_URL: server.api_url}):
        yield
