"""The same weekly run on this machine's processes and on a Dask cluster: wall time, CPU (the
run's own process tree, and on Dask the scheduler's and workers' too) and whether both publish
the same rows (a hash of the week's ``published_forecasts``).

The cluster is started beforehand, as an operator starts one, as separate commands::

    dask scheduler --host 127.0.0.1 --port 8786 &
    dask worker tcp://127.0.0.1:8786 --nthreads 1 --nworkers 1 &    # twice: two worker processes
    dask worker tcp://127.0.0.1:8786 --nthreads 1 --nworkers 1 &

Then, given a warehouse whose week before ``--week`` was forecast (``benchmarks/fleet_scale.py
--keep DIR`` leaves one: its steady week is 2024-04-08), the week is forecast again
(``wadiro forecast --week W --tuning reuse``, every deployed model) on two copies of it: with
the default runner (processes, one per core) and with ``--runner dask --dask-address A``, the
documented way. The Dask side's CPU is the scheduler's and workers' process trees' CPU
(``psutil``) over the run, beside the run's own process tree.

    python benchmarks/dask_overhead.py --warehouse /tmp/fs1k/fleet.duckdb --week 2024-04-08 \\
        --dask-address tcp://127.0.0.1:8786
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import tempfile
from datetime import date
from pathlib import Path

import psutil
from _commands import Measured, latest_run, measure

from tasks.warehouse.connection import connect


def published_hash(warehouse: Path, week: date) -> tuple[int, str]:
    """The week's published rows (building, hour, model, forecast and bounds, every digit)
    and their SHA-256."""
    with connect(warehouse, read_only=True) as con:
        rows = con.execute(
            "SELECT building_id, ts, model, y_hat, y_lo_80, y_hi_80, y_lo_95, y_hi_95 "
            "FROM published_forecasts WHERE target_week = ? ORDER BY building_id, ts",
            [week]).fetchall()
    return len(rows), hashlib.sha256(repr(rows).encode()).hexdigest()[:16]


def dask_processes() -> list[psutil.Process]:
    """The scheduler's and workers' processes (and their children: a nanny's worker)."""
    roots = [p for p in psutil.process_iter(["cmdline"])
             if any("dask" in part for part in (p.info["cmdline"] or [])[:3])
             and any(part in ("scheduler", "worker") for part in p.info["cmdline"] or [])]
    found = {p.pid: p for root in roots for p in [root, *root.children(recursive=True)]}
    return list(found.values())


def cpu_of(processes: list[psutil.Process]) -> float:
    total = 0.0
    for p in processes:
        try:
            times = p.cpu_times()
            total += times.user + times.system
        except psutil.Error:
            pass
    return total


def run(warehouse: Path, week: date, runner: list[str]) -> Measured:
    return measure("forecast", "--warehouse", str(warehouse), "--week", week.isoformat(),
                   "--tuning", "reuse", *runner)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--warehouse", type=Path, required=True)
    parser.add_argument("--week", type=date.fromisoformat, required=True)
    parser.add_argument("--dask-address", required=True)
    args = parser.parse_args()
    os.environ.pop("PREFECT_API_URL", None)  # the command line's own engine, no server
    with tempfile.TemporaryDirectory(dir=args.warehouse.parent) as tmp:
        results = {}
        for name, runner in (("processes", []),
                             ("dask", ["--runner", "dask", "--dask-address", args.dask_address])):
            copy = Path(tmp) / f"{name}.duckdb"
            shutil.copyfile(args.warehouse, copy)
            cluster = dask_processes() if name == "dask" else []
            if name == "dask" and not cluster:
                raise SystemExit("no dask scheduler or worker process found on this machine")
            before = cpu_of(cluster)
            m = run(copy, args.week, runner)
            outside = cpu_of(cluster) - before
            facts = latest_run(copy)
            rows, digest = published_hash(copy, args.week)
            results[name] = (m, outside, facts, rows, digest)
            print(f"{name:<10} wall {m.wall / 60:5.1f} min, CPU {m.cpu:7.0f} s (run) + "
                  f"{outside:6.0f} s (scheduler and workers), inside the protocol "
                  f"{facts.inside:6.0f} s, peak memory of the run {m.peak_total / 2**30:.2f} "
                  f"GiB; {rows:,} published rows, sha256 {digest}", flush=True)
    (local, _, _, _, a), (dask, extra, _, _, b) = results["processes"], results["dask"]
    print(f"\nDask against processes: wall {dask.wall / local.wall:.2f}x, CPU "
          f"{(dask.cpu + extra) / local.cpu:.2f}x; published rows "
          f"{'the same' if a == b else 'DIFFER'}")


if __name__ == "__main__":
    main()
