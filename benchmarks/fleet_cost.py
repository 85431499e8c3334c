"""CPU seconds per building-week of the full protocol, and which part dominates.

Runs the whole per-(building, week) protocol -- window, features, TPE tuning of every model
(15 trials by default), refit on 12 weeks, forecast, scoring -- on real Cambridge windows, in
this process, with BLAS pinned to one thread as the pipeline does. Prints CPU and wall time per
building-week and the split by model (tuning vs refit). With ``--reference`` the same windows
also run with the SCNN family on the cvxpy + Clarabel reference path, and the ratio is printed.

    python benchmarks/fleet_cost.py [--buildings UCam_Building_b7,...] [--weeks 2019-04-01,...]
                                    [--trials 15] [--feature-set NAME] [--target load|residual]
                                    [--reference]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections import defaultdict
from datetime import date, timedelta
from pathlib import Path

from wadiro_fleet.tasks.ingest.cambridge import ingest_cambridge
from wadiro_fleet.tasks.protocol.batch import BuildingJob, run_jobs
from wadiro_fleet.tasks.protocol.config import ForecastConfig
from wadiro_fleet.tasks.protocol.models import MODEL_NAMES
from wadiro_fleet.tasks.warehouse.batches import load_jobs

ARCHIVE = Path(__file__).resolve().parents[2] / "shared" / "data" / "cambridge-estates"


def measure(jobs: list[BuildingJob], config: ForecastConfig) -> dict:
    cpu0, wall0 = time.process_time(), time.perf_counter()
    results = run_jobs(jobs, config)
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    per_model: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0])
    solvers: dict[str, set] = defaultdict(set)
    done = [r for r in results if r.status == "ok"]
    for res in done:
        for out in res.outcomes:
            entry = per_model[out.model]
            entry[0] += out.tuning_time_s or 0.0
            entry[1] += out.fit_time_s or 0.0
            entry[2] += out.status != "ok"
            if out.solver:
                solvers[out.model].add(out.solver)
    n = max(len(done), 1)
    return {"cpu": cpu / n, "wall": wall / n, "n": len(done), "skipped": len(results) - len(done),
            "per_model": {m: (t / n, f / n, int(k)) for m, (t, f, k) in per_model.items()},
            "solvers": {m: sorted(s) for m, s in solvers.items()}}


def report(label: str, m: dict) -> None:
    print(f"\n== {label}: {m['n']} building-week(s) ({m['skipped']} skipped) ==")
    print(f"CPU per building-week: {m['cpu']:.1f} s   wall: {m['wall']:.1f} s")
    total = sum(t + f for t, f, _ in m["per_model"].values()) or 1.0
    print(f"{'model':<16}{'tuning s':>10}{'refit s':>10}{'share':>8}{'failed':>8}  solver")
    for model, (t, f, k) in sorted(m["per_model"].items(), key=lambda kv: -sum(kv[1][:2])):
        print(f"{model:<16}{t:>10.2f}{f:>10.2f}{100 * (t + f) / total:>7.1f}%{k:>8}  "
              f"{','.join(m['solvers'].get(model, [])) or '-'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--buildings", default="UCam_Building_b7,UCam_Building_b0")
    parser.add_argument("--weeks", default="2019-04-01")
    parser.add_argument("--trials", type=int, default=15)
    parser.add_argument("--models", default=",".join(MODEL_NAMES))
    parser.add_argument("--feature-set", default=ForecastConfig.model_fields["feature_set"].default)
    parser.add_argument("--target", default=ForecastConfig.model_fields["target"].default)
    parser.add_argument("--reference", action="store_true",
                        help="also run the SCNN family on cvxpy + Clarabel and print the ratio")
    args = parser.parse_args()
    buildings = args.buildings.split(",")
    weeks = [date.fromisoformat(w) for w in args.weeks.split(",")]
    models = tuple(args.models.split(","))
    fast_config = ForecastConfig(models=models, trials=args.trials, feature_set=args.feature_set,
                                 target=args.target)
    with tempfile.TemporaryDirectory() as tmp:
        warehouse = Path(tmp) / "bench.duckdb"
        ingest_cambridge(warehouse, ARCHIVE, buildings=buildings,
                         start=weeks[0] - timedelta(weeks=13), end=weeks[-1] + timedelta(days=7))
        jobs = load_jobs(warehouse, buildings, weeks, fast_config)
    fast = measure(jobs, fast_config)
    report("fast path (solver=ipm)", fast)
    if args.reference:
        options = {m: {**o, "solver": "clarabel"} for m, o in fast_config.model_options.items()}
        ref = measure(jobs, fast_config.model_copy(update={"model_options": options}))
        report("reference path (solver=clarabel)", ref)
        print(f"\nspeed-up of the full protocol (CPU per building-week): "
              f"{ref['cpu'] / fast['cpu']:.2f}x")


if __name__ == "__main__":
    main()
