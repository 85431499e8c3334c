"""Where a benchmark's independent jobs run: the pipeline's three kinds of runner.

Threads or processes on this machine, or an existing Dask scheduler (``--dask-address``).
The benchmarks need no warehouse and no orchestration, so they use the executors directly
(``concurrent.futures``; a Dask client's ``get_executor()``), not Prefect task runs.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor, as_completed
from contextlib import contextmanager
from typing import Any


def add_runner_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--runner", choices=("processes", "threads", "dask"),
                        default="processes")
    parser.add_argument("--workers", type=int, default=None, help="default: cores")
    parser.add_argument("--dask-address", default=None, help="tcp://HOST:PORT for --runner dask")


def _single_thread_blas() -> None:
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=1)


@contextmanager
def executor(kind: str, workers: int | None = None,
             dask_address: str | None = None) -> Iterator[Executor]:
    workers = workers or os.cpu_count() or 1
    if kind == "threads":
        with ThreadPoolExecutor(max_workers=workers) as pool:
            yield pool
    elif kind == "processes":
        with ProcessPoolExecutor(max_workers=workers, initializer=_single_thread_blas) as pool:
            yield pool
    elif kind == "dask":
        if not dask_address:
            raise SystemExit("--runner dask needs --dask-address tcp://HOST:PORT")
        from distributed import Client

        with Client(dask_address) as client:
            yield client.get_executor()
    else:
        raise SystemExit(f"unknown runner {kind!r}")


def run_all(pool: Executor, function: Callable[..., Any], jobs: Iterable[dict],
            *, progress: bool = True) -> list[Any]:
    """``function(**job)`` for every job, results in completion order."""
    futures = [pool.submit(function, **job) for job in jobs]
    results = []
    for done, future in enumerate(as_completed(futures), 1):
        results.append(future.result())
        if progress and (done % 10 == 0 or done == len(futures)):
            print(f"  {done}/{len(futures)} jobs done", flush=True)
    return results
