"""CPU per ``WaDiRoSCNN(solver="ipm").fit`` at the pipeline's window sizes, and its answers.

The pipeline's windows have N of about 1,750-2,000 hourly rows and 15 features (the
``recent_change`` set), and its SCNN models use 5-20 gates (max_neurons 10-40), both
Wasserstein norms, radius in [e^-6, e^1], sometimes a per-sample lower bound. This script
builds a fixed set of such fits -- real Cambridge windows (features built by the pipeline's
own code) and synthetic data of the same shape -- and for each prints the median CPU time
(``time.process_time``, BLAS pinned to one thread) of the whole fit, the iterations and the
objective::

    python benchmarks/ipm_small_windows.py                   # every case, median of 3
    python benchmarks/ipm_small_windows.py --quick           # a subset (one radius per case)
    python benchmarks/ipm_small_windows.py --save run.npz    # also keep objectives/predictions
    python benchmarks/ipm_small_windows.py --compare run.npz # ... and compare with a kept run
    python benchmarks/ipm_small_windows.py --reference       # also a 1e-10 Clarabel reference
    python benchmarks/ipm_small_windows.py --noise           # also the solver's own noise

``--save``/``--compare`` compare two versions of the solver on the same cases (run the older
one with ``--save``, the newer with ``--compare``): the largest relative objective
difference, the largest prediction difference relative to the spread of y, and any change
of status or solver (a fallback to Clarabel shows as ``ipm->clarabel``); ``--times`` adds
the kept run's CPU times and the ratio. ``--reference`` solves each program with cvxpy +
Clarabel at tight tolerances (gap and feasibility 1e-10) and prints the relative objective
excess of the ipm answer over it (slow: seconds per case). ``--noise`` fits each case a second
time with the samples in another order (the same program up to rounding) and prints how far
the predictions move, relative to the spread of y: many of these programs have a flat optimum
(the l1 loss and the dual norm's max), so two correct answers agree on the objective to ~1e-15
but their predictions only to ~1e-5, and a difference between two solver versions is only
meaningful against that. Run it niced on a shared machine.
"""

from __future__ import annotations

import argparse
import statistics
import time
from datetime import date, timedelta
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

from tasks.ingest.cambridge_archive import (
    HOLIDAY_COUNTRY,
    HOLIDAY_SUBDIV,
    TIMEZONE,
    load_cambridge,
)
from tasks.protocol.features import build_features, get_feature_set
from tasks.protocol.windows import window_bounds
from wadiro_models import WaDiRoSCNN

ARCHIVE = Path(__file__).resolve().parents[2] / "shared" / "data" / "cambridge-estates"
TIGHT = {"tol_gap_abs": 1e-10, "tol_gap_rel": 1e-10, "tol_feas": 1e-10}
FEATURE_SET = "recent_change"
WINDOWS = (("UCam_Building_b1", date(2019, 3, 4)), ("UCam_Building_b7", date(2019, 4, 1)))
NEURONS = (10, 20, 30, 40)
RADII = (float(np.exp(-6.0)), 0.01, 0.1, float(np.exp(1.0)))


def real_window(building: str, target_week: date) -> tuple[np.ndarray, np.ndarray]:
    """The ``recent_change`` features and load [kWh] of the 12 weeks before ``target_week``
    (five weeks earlier loaded too, for the lags); hours missing a label or feature dropped."""
    bounds = window_bounds(target_week, TIMEZONE)
    batch = load_cambridge(
        ARCHIVE, [building],
        bounds.history_start.date() - timedelta(weeks=5),
        bounds.test_start.date() + timedelta(days=1),
    )
    readings = batch.readings.to_pandas()[["ts", "kwh"]]
    weather = batch.weather.to_pandas().drop(columns=["site_id", "kind"], errors="ignore")
    hours = readings.merge(weather, on="ts", how="left")
    hours = hours[hours.ts < bounds.test_start].reset_index(drop=True)
    feature_set = get_feature_set(FEATURE_SET)
    frame = build_features(hours, timezone=TIMEZONE, holiday_country=HOLIDAY_COUNTRY,
                           holiday_subdiv=HOLIDAY_SUBDIV, feature_set=feature_set)
    frame = frame[frame.ts >= bounds.history_start]
    columns = [f.name for f in feature_set.features]
    frame = frame.dropna(subset=[*columns, "kwh"])
    frame = frame[frame.kwh != 0]
    return frame[columns].to_numpy(float), frame["kwh"].to_numpy(float)


def synthetic_window(n: int = 2000, d: int = 15, seed: int = 3) -> tuple[np.ndarray, np.ndarray]:
    """Hourly-looking synthetic data of the real shape: a daily and weekly cycle, weather-like
    smooth inputs, nonnegative load."""
    rng = np.random.default_rng(seed)
    hours = np.arange(n)
    X = np.empty((n, d))
    X[:, 0] = np.sin(2 * np.pi * hours / 24)
    X[:, 1] = np.cos(2 * np.pi * hours / 24)
    X[:, 2] = (hours // 24) % 7 >= 5
    for k in range(3, d):
        X[:, k] = np.convolve(rng.normal(size=n + 47), np.ones(48) / 48, "valid") * 5
    y = 50 + 20 * np.maximum(X[:, 0], 0) * (1 - X[:, 2]) + 3 * X[:, 3] - 2 * X[:, 4] ** 2
    y += rng.standard_t(3, size=n) * 2
    return X, np.maximum(y, 1.0)


def floor_of(y: np.ndarray) -> np.ndarray:
    """A per-sample floor like the pipeline's: part of the load a week earlier."""
    return 0.7 * np.roll(y, 168)


def cases(quick: bool) -> list[dict]:
    data = {f"{b.split('_')[-1]}@{w}": real_window(b, w) for b, w in WINDOWS}
    data["synthetic"] = synthetic_window()
    radii = (0.01,) if quick else RADII
    out = []
    for name, (X, y) in data.items():
        for neurons in NEURONS:
            for norm in ("l1", "l2"):
                for radius in radii:
                    for bound in (None, "zero", "floor"):
                        if quick and bound == "zero":
                            continue
                        if not quick and bound is not None and radius not in (0.01, RADII[-1]):
                            continue
                        lower = {None: None, "zero": 0.0, "floor": floor_of(y)}[bound]
                        out.append({
                            "key": f"{name} n{neurons} {norm} r{radius:.3g} lb={bound}",
                            "X": X, "y": y, "lower": lower, "neurons": neurons,
                            "norm": norm, "radius": radius,
                        })
    return out


def fit(case: dict, **solver: object) -> WaDiRoSCNN:
    model = WaDiRoSCNN(radius=case["radius"], max_neurons=case["neurons"],
                       wasserstein=case["norm"], lower_bound=case["lower"],
                       random_state=0, **solver)
    return model.fit(case["X"], case["y"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--only", default="", help="keep cases whose key contains this")
    parser.add_argument("--save", type=Path)
    parser.add_argument("--compare", type=Path)
    parser.add_argument("--times", action="store_true", help="with --compare: CPU ratios")
    parser.add_argument("--reference", action="store_true")
    parser.add_argument("--noise", action="store_true",
                        help="refit with the samples permuted; print the prediction change")
    args = parser.parse_args()

    kept = np.load(args.compare, allow_pickle=True)["runs"].item() if args.compare else {}
    runs: dict[str, dict] = {}
    worst_obj = worst_pred = worst_ref = worst_noise = 0.0
    changed = []
    total_new = total_old = 0.0
    header = f"{'case':<40}{'N':>5}{'P':>4}{'iter':>5}{'cpu s':>8}{'objective':>16}"
    if args.compare and args.times:
        header += f"{'old s':>8}{'ratio':>7}"
    if args.compare:
        header += f"{'d obj':>9}{'d pred':>9}"
    if args.reference:
        header += f"{'vs ref':>10}"
    if args.noise:
        header += f"{'self':>9}"
    print(header)
    with threadpool_limits(limits=1, user_api="blas"):
        for case in cases(args.quick):
            if args.only not in case["key"]:
                continue
            times = []
            for _ in range(args.repeat):
                started = time.process_time()
                model = fit(case, solver="ipm")
                times.append(time.process_time() - started)
            cpu = statistics.median(times)
            pred = model.predict(case["X"])
            run = {"objective": model.objective_, "pred": pred, "status": model.solver_status_,
                   "solver": model.solver_name_, "iterations": model.n_iter_, "cpu": cpu}
            runs[case["key"]] = run
            line = (f"{case['key']:<40}{len(case['y']):>5}{model.n_gates_:>4}"
                    f"{model.n_iter_ or 0:>5}{cpu:>8.3f}{model.objective_:>16.10f}")
            old = kept.get(case["key"])
            if old is not None:
                d_obj = abs(run["objective"] - old["objective"]) / abs(old["objective"])
                spread = np.ptp(case["y"])
                d_pred = float(np.max(np.abs(pred - old["pred"]))) / spread
                worst_obj, worst_pred = max(worst_obj, d_obj), max(worst_pred, d_pred)
                if (run["status"], run["solver"]) != (old["status"], old["solver"]):
                    changed.append(f"{case['key']}: {old['status']}/{old['solver']} -> "
                                   f"{run['status']}/{run['solver']}")
                if args.times:
                    line += f"{old['cpu']:>8.3f}{old['cpu'] / cpu:>7.2f}"
                    total_new, total_old = total_new + cpu, total_old + old["cpu"]
                line += f"{d_obj:>9.1e}{d_pred:>9.1e}"
            if args.reference:
                ref = fit(case, solver="clarabel", solver_options=TIGHT)
                excess = (model.objective_ - ref.objective_) / abs(ref.objective_)
                worst_ref = max(worst_ref, abs(excess))
                line += f"{excess:>10.1e}"
            if args.noise:
                order = np.random.default_rng(1).permutation(len(case["y"]))
                lower = case["lower"]
                permuted = dict(case, X=case["X"][order], y=case["y"][order],
                                lower=lower if lower is None or np.isscalar(lower)
                                else lower[order])
                other = fit(permuted, solver="ipm")
                moved = np.max(np.abs(other.predict(case["X"]) - pred)) / np.ptp(case["y"])
                worst_noise = max(worst_noise, moved)
                line += f"{moved:>9.1e}"
            if run["solver"] != "ipm" or run["status"] != "optimal":
                line += f"  [{run['status']}/{run['solver']}]"
            print(line, flush=True)
    print(f"\n{len(runs)} cases, total CPU {sum(r['cpu'] for r in runs.values()):.2f} s "
          f"(medians of {args.repeat}); fallbacks/non-optimal: "
          f"{sum(r['solver'] != 'ipm' or r['status'] != 'optimal' for r in runs.values())}")
    if kept:
        print(f"against {args.compare}: largest relative objective difference {worst_obj:.1e}, "
              f"largest prediction difference / ptp(y) {worst_pred:.1e}, "
              f"status/solver changes: {len(changed)}")
        for line in changed:
            print("  " + line)
        if args.times and total_new:
            print(f"total CPU {total_old:.2f} s -> {total_new:.2f} s "
                  f"({total_old / total_new:.2f}x)")
    if args.reference:
        print(f"largest |relative objective difference| to the tight Clarabel reference: "
              f"{worst_ref:.1e}")
    if args.noise:
        print(f"largest prediction change / ptp(y) with the samples reordered: {worst_noise:.1e}")
    if args.save:
        np.savez(args.save, runs=np.array(runs, dtype=object))


if __name__ == "__main__":
    main()
