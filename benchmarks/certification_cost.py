"""CPU share of the stability certificate (and out-of-sample bound) per building-week.

Runs the whole per-(building, week) protocol twice on the same real Cambridge windows, in
this process with BLAS on one thread as the pipeline does: once with certification off
(``certify_nodes=0``) and once with each node budget given. Tuning is seeded, so both runs do
the same work but for the certificates; the CPU difference is their cost. Also prints every
certificate (L_eps upper bound, the deviation found, status) of the last budget.

    python benchmarks/certification_cost.py [--buildings UCam_Building_b0,UCam_Building_b7]
        [--weeks 2019-03-04,2019-03-11] [--trials 15] [--nodes 100,1000]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from datetime import date, timedelta
from pathlib import Path

from tasks.ingest.cambridge_archive import ingest_cambridge
from tasks.protocol.batch import run_batch
from tasks.protocol.config import ForecastConfig
from tasks.protocol.models import MODEL_NAMES
from tasks.warehouse.batches import load_jobs

ARCHIVE = Path(__file__).resolve().parents[2] / "shared" / "data" / "cambridge-estates"


def cpu_of(jobs, config) -> tuple[float, list]:
    started = time.process_time()
    results = run_batch(jobs, config, sent_back=False)
    return time.process_time() - started, results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--buildings", default="UCam_Building_b0,UCam_Building_b7")
    parser.add_argument("--weeks", default="2019-03-04,2019-03-11")
    parser.add_argument("--trials", type=int, default=15)
    parser.add_argument("--models", default=",".join(MODEL_NAMES))
    parser.add_argument("--nodes", default="100", help="node budgets to compare with 0")
    args = parser.parse_args()
    buildings = args.buildings.split(",")
    weeks = [date.fromisoformat(w) for w in args.weeks.split(",")]
    base = {"models": tuple(args.models.split(",")), "trials": args.trials}
    with tempfile.TemporaryDirectory() as tmp:
        warehouse = Path(tmp) / "bench.duckdb"
        # the window's 12 weeks, and 4 more for the lag features' lookback
        ingest_cambridge(warehouse, ARCHIVE, buildings=buildings,
                         start=weeks[0] - timedelta(weeks=17), end=weeks[-1] + timedelta(days=7))
        jobs = load_jobs(warehouse, buildings, weeks, ForecastConfig(**base))
    off, _ = cpu_of(jobs, ForecastConfig(**base, certify_nodes=0))
    n = len(buildings) * len(weeks)
    print(f"{n} building-weeks, models {','.join(base['models'])}, {args.trials} trials")
    print(f"certification off: {off / n:.1f} s CPU per building-week")
    for nodes in (int(v) for v in args.nodes.split(",")):
        on, results = cpu_of(jobs, ForecastConfig(**base, certify_nodes=nodes))
        print(f"certify_nodes={nodes}: {on / n:.1f} s CPU per building-week; certification "
              f"{(on - off) / n:.1f} s = {100 * (on - off) / on:.1f} % of the building-week")
    print(f"\ncertificates at certify_nodes={nodes} (kWh):")
    print(f"{'building':<18}{'week':<12}{'model':<15}{'neurons':>8}{'L_eps <=':>10}{'found':>8}"
          f"{'status':>12}{'OOS bound':>11}{'mean load':>11}")
    for res in results:
        for out in res.outcomes:
            if out.l_eps_status is None:
                continue
            print(f"{res.building_id:<18}{res.week!s:<12}{out.model:<15}"
                  f"{out.params.get('max_neurons', 0):>8}{out.l_eps:>10.1f}"
                  f"{out.l_eps_lower:>8.1f}{out.l_eps_status:>12}{out.oos_bound_kwh:>11.0f}"
                  f"{out.scores.mean_actual:>11.1f}")


if __name__ == "__main__":
    main()
