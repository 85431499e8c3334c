"""What Prefect costs at fleet scale: the forecasting flow against the same work without Prefect.

A synthetic fleet of N buildings (default 1,000) is generated in a temporary directory and one
target week is forecast with the cheap ``seasonal_naive`` model only, so the compute is tiny and
the orchestration overhead dominates. Timed with ``time.perf_counter``:

* ``compute``: ``tasks.protocol.batch.run_batch`` over every building in this process, the
  buildings' hours already in memory;
* ``bare``: the flow's work without Prefect, one batch after another: read the batch's hours
  (read-only), ``run_batch``, write its results in one transaction;
* ``flow``: ``weekly_forecast_flow`` on the threads runner (and the processes runner) for each
  batch size; at most ``max_in_flight`` batches are submitted at a time. Through Prefect
  (``prefect``), and as the command line runs it without a Prefect server (``direct``:
  the flow functions called directly, no Prefect API).

Overhead = flow - bare, also per building. Flows through Prefect talk to a temporary local
Prefect server (started here) unless ``--api-url`` names a running one::

    python benchmarks/orchestration_overhead.py
    python benchmarks/orchestration_overhead.py --buildings 200 --batch-sizes 1,10 --runners threads
"""

from __future__ import annotations

import argparse
import contextlib
import os
import tempfile
import time
from collections.abc import Iterator
from datetime import date
from pathlib import Path

from tasks.ingest.synthetic_fleet import (
    FleetSpec,
    building_ids,
    ingest_synthetic,
)
from tasks.protocol.batch import run_batch
from tasks.protocol.config import ForecastConfig
from tasks.warehouse.batches import load_jobs
from tasks.warehouse.connection import connect
from tasks.warehouse.results import write_results
from tasks.warehouse.schema import ensure_schema

WEEK = date(2024, 4, 1)  # the 14th week of a fleet starting 2024-01-01: 12 weeks of history before it
MODELS = ("seasonal_naive",)


@contextlib.contextmanager
def prefect_api(api_url: str | None) -> Iterator[str]:
    """A running server named by URL, or a temporary local one for the duration."""
    if api_url:
        os.environ["PREFECT_API_URL"] = api_url
        yield api_url
        return
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness():
        from prefect.settings import PREFECT_API_URL

        yield f"temporary local server {PREFECT_API_URL.value()}"


def time_compute(warehouse: Path, ids: list[str], batch_size: int) -> tuple[float, int]:
    """``run_batch`` alone over every building, hours read beforehand (not timed)."""
    config = ForecastConfig(models=MODELS)
    jobs = [job for start in range(0, len(ids), batch_size)
            for job in load_jobs(warehouse, ids[start:start + batch_size], [WEEK], config)]
    started = time.perf_counter()
    results = run_batch(jobs, config, sent_back=False)
    elapsed = time.perf_counter() - started
    return elapsed, sum(r.status == "ok" for r in results)


def time_bare(warehouse: Path, ids: list[str], batch_size: int) -> tuple[float, int]:
    """The flow's read -> compute -> write per batch, sequentially, without Prefect."""
    config = ForecastConfig(models=MODELS)
    ok = 0
    started = time.perf_counter()
    for start in range(0, len(ids), batch_size):
        jobs = load_jobs(warehouse, ids[start:start + batch_size], [WEEK], config)
        results = run_batch(jobs, config, sent_back=False)
        with connect(warehouse) as con:
            write_results(con, results, run_id="bare", models=MODELS)
        ok += sum(r.status == "ok" for r in results)
    return time.perf_counter() - started, ok


def time_flow(warehouse: Path, runner: str, batch_size: int, max_in_flight: int,
              engine: str = "prefect") -> tuple[float, int]:
    from flows.engine import run_flow
    from flows.forecast import weekly_forecast_flow
    from flows.settings import WeeklySettings

    started = time.perf_counter()
    summary = run_flow(
        weekly_forecast_flow, prefect=engine == "prefect",
        week=WEEK, settings=WeeklySettings(
            warehouse=str(warehouse), models=MODELS, runner=runner, batch_size=batch_size,
            max_in_flight=max_in_flight))
    return time.perf_counter() - started, summary.ok


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--buildings", type=int, default=1000)
    parser.add_argument("--batch-sizes", default="2,25", help="comma-separated (default 2,25)")
    parser.add_argument("--runners", default="threads,processes", help="threads and/or processes")
    parser.add_argument("--max-in-flight", type=int, default=8)
    parser.add_argument("--api-url", default=None, help="a running Prefect server's API URL")
    parser.add_argument("--engines", default="prefect,direct",
                        help="prefect (through a Prefect API) and/or direct (no Prefect API)")
    args = parser.parse_args()
    engines = [e for e in args.engines.split(",") if e]
    batch_sizes = [int(b) for b in args.batch_sizes.split(",")]
    runners = [r for r in args.runners.split(",") if r]
    n = args.buildings

    with tempfile.TemporaryDirectory(prefix="orchestration-overhead-") as tmp:
        warehouse = Path(tmp) / "fleet.duckdb"
        started = time.perf_counter()
        ingest_synthetic(warehouse, FleetSpec(buildings=n, start=date(2024, 1, 1), weeks=14, seed=11))
        with connect(warehouse) as con:
            ensure_schema(con)
        print(f"fleet of {n} buildings x 14 weeks generated in {time.perf_counter() - started:.1f} s; "
              f"target week {WEEK}, model {', '.join(MODELS)}, {os.cpu_count()} cores", flush=True)
        ids = building_ids(n)

        rows: list[tuple[str, int, float, int]] = []
        compute_s, ok = time_compute(warehouse, ids, max(batch_sizes))
        rows.append(("compute (run_batch only)", 0, compute_s, ok))
        bare: dict[int, float] = {}
        for size in batch_sizes:
            bare[size], ok = time_bare(warehouse, ids, size)
            rows.append(("bare read+compute+write", size, bare[size], ok))
        if "direct" in engines:
            for runner in runners:
                for size in batch_sizes:
                    elapsed, ok = time_flow(warehouse, runner, size, args.max_in_flight, "direct")
                    rows.append((f"flow direct, {runner}", size, elapsed, ok))
        if "prefect" in engines:
            with prefect_api(args.api_url) as where:
                print(f"Prefect API: {where}", flush=True)
                for runner in runners:
                    for size in batch_sizes:
                        elapsed, ok = time_flow(warehouse, runner, size, args.max_in_flight)
                        rows.append((f"flow, {runner} runner", size, elapsed, ok))

    print(f"\n{'what':<26}{'batch':>6}{'tasks':>7}{'wall s':>9}{'ok':>6}"
          f"{'vs bare':>9}{'overhead ms/bldg':>18}{'ms/task':>9}")
    for what, size, elapsed, ok in rows:
        line = f"{what:<26}{size or '':>6}"
        if size:
            tasks = -(-n // size)
            line += f"{tasks:>7}{elapsed:>9.2f}{ok:>6}"
            if what.startswith("flow"):
                extra = elapsed - bare[size]
                line += f"{elapsed / bare[size]:>8.2f}x{1000 * extra / n:>18.1f}{1000 * extra / tasks:>9.1f}"
        else:
            line += f"{'':>7}{elapsed:>9.2f}{ok:>6}"
        print(line)


if __name__ == "__main__":
    main()
