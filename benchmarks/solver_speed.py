"""Reference path (cvxpy + Clarabel) against the structured interior-point path, in one process.

One real 12-week window of the Cambridge archive (one building's hourly electricity, Bedford
weather, the paper's eight features, standardised), the bound y_hat >= 0 (in kWh), gates from
a fixed seed. For each max_neurons and Wasserstein norm both paths solve the same program;
the script prints times, the speed ratio, iterations and the objective gap::

    python benchmarks/solver_speed.py                      # 10, 30, 70 neurons, l1 and l2
    python benchmarks/solver_speed.py --neurons 70 --tight # also a tight-tolerance reference
    python benchmarks/solver_speed.py --trials 16          # a tuning-like mix of programs
    python benchmarks/solver_speed.py --repeat 5           # medians of 5 timings per path
    python benchmarks/solver_speed.py --direct             # also the direct cvxpy formulation
    python benchmarks/solver_speed.py --bound-week         # also with the target week bounded

Clarabel at its default tolerances may stop slightly above the optimum (3e-6 relative was
measured on synthetic programs; about 1e-9 on this window), so the gap against it is not an
accuracy measure; ``--tight`` adds a reference solved to 1e-10 and reports the gap against
that one. ``--direct`` also times the reference written without its auxiliary variables
(``formulation="direct"`` in :mod:`wadiro_models.solvers`, the program as usually
first written, several times slower in Clarabel) and prints the ratio against it too.
Both paths run with BLAS pinned to one thread. On a loaded machine use ``--repeat``: each
path is then timed that many times, alternating, and the medians are printed.
``--bound-week`` solves every program a second time with the target week's inputs (its
hours with every feature, known when the forecast is issued) added as bound points with
y_hat >= 0 (column ``M``: the bound points, 0 without).
"""

from __future__ import annotations

import argparse
import itertools
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
from wadiro_models import (
    ScnnProgram,
    WaDiRoSCNN,
    max_constraint_violation,
    solve_clarabel,
    solve_ipm,
)

ARCHIVE = Path(__file__).resolve().parents[2] / "shared" / "data" / "cambridge-estates"
TIGHT = {"tol_gap_abs": 1e-10, "tol_gap_rel": 1e-10, "tol_feas": 1e-10}


def real_window(
    building: str = "UCam_Building_b1",
    target_week: date = date(2019, 3, 4),
    archive: Path = ARCHIVE,
) -> tuple[np.ndarray, np.ndarray]:
    """Features (paper set) and labels [kWh] of the 12 weeks before ``target_week``.

    Hours with a missing label (the archive's zeros) or a missing feature are dropped.
    """
    bounds = window_bounds(target_week, TIMEZONE)
    batch = load_cambridge(
        archive,
        [building],
        bounds.history_start.date() - timedelta(days=1),
        bounds.test_start.date() + timedelta(days=1),
    )
    readings = batch.readings.to_pandas()[["ts", "kwh"]]
    weather = batch.weather.to_pandas().drop(columns=["site_id", "kind"], errors="ignore")
    hours = readings.merge(weather, on="ts", how="left")
    hours = hours[(hours.ts >= bounds.history_start) & (hours.ts < bounds.test_start)]
    feature_set = get_feature_set("paper")
    frame = build_features(
        hours.reset_index(drop=True),
        timezone=TIMEZONE,
        holiday_country=HOLIDAY_COUNTRY,
        holiday_subdiv=HOLIDAY_SUBDIV,
        feature_set=feature_set,
    )
    columns = [f.name for f in feature_set.features]
    frame = frame.dropna(subset=[*columns, "kwh"])
    frame = frame[frame.kwh != 0]
    return frame[columns].to_numpy(float), frame["kwh"].to_numpy(float)


def target_week_inputs(
    building: str = "UCam_Building_b1",
    target_week: date = date(2019, 3, 4),
    archive: Path = ARCHIVE,
) -> np.ndarray:
    """Features (paper set) of the hours of ``target_week`` that have every feature: the
    inputs a forecast issued before that week knows (calendar and weather, no load)."""
    bounds = window_bounds(target_week, TIMEZONE)
    batch = load_cambridge(
        archive,
        [building],
        bounds.test_start.date() - timedelta(days=1),
        bounds.test_end.date() + timedelta(days=1),
    )
    hours = batch.weather.to_pandas().drop(columns=["site_id", "kind"], errors="ignore")
    hours = hours[(hours.ts >= bounds.test_start) & (hours.ts < bounds.test_end)]
    feature_set = get_feature_set("paper")
    frame = build_features(
        hours.reset_index(drop=True),
        timezone=TIMEZONE,
        holiday_country=HOLIDAY_COUNTRY,
        holiday_subdiv=HOLIDAY_SUBDIV,
        feature_set=feature_set,
    )
    columns = [f.name for f in feature_set.features]
    return frame.dropna(subset=columns)[columns].to_numpy(float)


def window_program(
    X_raw: np.ndarray,
    y_raw: np.ndarray,
    *,
    max_neurons: int,
    wasserstein: str,
    radius: float = 0.01,
    nonnegative: bool = True,
    seed: int = 0,
    bound_X: np.ndarray | None = None,
) -> ScnnProgram:
    """The training program that WaDiRoSCNN's fit solves on one window (standardised, gates
    from ``seed``); y_hat >= 0 kWh becomes a lower bound in program units, on the training
    rows and, when given, at the bound points ``bound_X``."""
    model = WaDiRoSCNN(
        radius=radius,
        max_neurons=max_neurons,
        wasserstein=wasserstein,
        lower_bound=0.0 if nonnegative else None,
        random_state=seed,
    )
    if bound_X is None:
        return model.build_program(X_raw, y_raw)
    return model.build_program(X_raw, y_raw, bound_X=bound_X, bound_lower=0.0)


def tuning_mix(X_raw: np.ndarray, y_raw: np.ndarray, trials: int, seed: int = 0) -> None:
    """Programs drawn like one model's tuning of one window (max_neurons 10..70, radius
    log-uniform on [e^-6, e^1], l1 or l2, y_hat >= 0); total time of each path."""
    rng = np.random.default_rng(seed)
    totals = {"clarabel": 0.0, "ipm": 0.0}
    worst_gap, fallbacks = 0.0, 0
    for _ in range(trials):
        program = window_program(
            X_raw, y_raw,
            max_neurons=int(rng.integers(10, 71)),
            wasserstein=str(rng.choice(["l1", "l2"])),
            radius=float(np.exp(rng.uniform(-6.0, 1.0))),
        )
        with threadpool_limits(limits=1, user_api="blas"):
            started = time.perf_counter()
            ref = solve_clarabel(program)
            totals["clarabel"] += time.perf_counter() - started
        started = time.perf_counter()
        fast = solve_ipm(program)
        totals["ipm"] += time.perf_counter() - started
        fallbacks += fast.solver != "ipm"
        worst_gap = max(worst_gap, (fast.objective - ref.objective) / abs(ref.objective))
    print(f"{trials} tuning-like programs: clarabel {totals['clarabel']:.1f} s, "
          f"ipm {totals['ipm']:.1f} s, ratio {totals['clarabel'] / totals['ipm']:.1f}x, "
          f"ipm fallbacks {fallbacks}, largest objective excess over clarabel {worst_gap:.1e}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--neurons", type=int, nargs="+", default=[10, 30, 70])
    parser.add_argument("--norms", nargs="+", default=["l1", "l2"], choices=["l1", "l2"])
    parser.add_argument("--radius", type=float, default=0.01)
    parser.add_argument("--building", default="UCam_Building_b1")
    parser.add_argument("--week", type=date.fromisoformat, default=date(2019, 3, 4))
    parser.add_argument("--tight", action="store_true", help="also solve a 1e-10 reference")
    parser.add_argument("--direct", action="store_true",
                        help="also time the reference without auxiliary variables (slow)")
    parser.add_argument("--repeat", type=int, default=1,
                        help="time each path this many times (alternating) and print medians")
    parser.add_argument("--trials", type=int, default=0,
                        help="instead time this many tuning-like random programs")
    parser.add_argument("--bound-week", action="store_true",
                        help="also solve each program with the target week's inputs as bound "
                             "points (y_hat >= 0 there)")
    args = parser.parse_args()

    X_raw, y_raw = real_window(args.building, args.week)
    print(f"{args.building}, 12 weeks before {args.week}: N = {len(y_raw)}, "
          f"{X_raw.shape[1]} features, y_hat >= 0")
    if args.trials:
        tuning_mix(X_raw, y_raw, args.trials)
        return
    variants: list[np.ndarray | None] = [None]
    if args.bound_week:
        variants.append(target_week_inputs(args.building, args.week))
    print(f"radius {args.radius}")
    header = (f"{'neurons':>7} {'P':>3} {'norm':>4} {'M':>5} {'clarabel s':>10} {'it':>3} "
              f"{'ipm s':>7} {'it':>3} {'ratio':>6} {'gap vs ref':>10} {'ipm viol':>8} "
              f"{'ipm status':>14}")
    if args.tight:
        header += f" {'tight s':>8} {'gap vs tight':>12}"
    if args.direct:
        header += f" {'direct s':>8} {'it':>3} {'ratio':>6}"
    print(header)
    for neurons in args.neurons:
        for norm, bound_X in itertools.product(args.norms, variants):
            program = window_program(X_raw, y_raw, max_neurons=neurons, wasserstein=norm,
                                     radius=args.radius, bound_X=bound_X)
            ref_times, fast_times = [], []
            for _ in range(max(1, args.repeat)):
                with threadpool_limits(limits=1, user_api="blas"):
                    started = time.perf_counter()
                    ref = solve_clarabel(program)
                    ref_times.append(time.perf_counter() - started)
                started = time.perf_counter()
                fast = solve_ipm(program)
                fast_times.append(time.perf_counter() - started)
            t_ref, t_fast = float(np.median(ref_times)), float(np.median(fast_times))
            viol = max_constraint_violation(program, fast.nu, fast.omega, fast.b)
            gap = (fast.objective - ref.objective) / abs(ref.objective)
            line = (f"{neurons:>7} {program.n_gates:>3} {norm:>4} "
                    f"{program.n_bound_points:>5} {t_ref:>10.2f} "
                    f"{ref.iterations or 0:>3} {t_fast:>7.3f} {fast.iterations or 0:>3} "
                    f"{t_ref / t_fast:>5.0f}x {gap:>10.1e} {viol:>8.1e} "
                    f"{fast.solver + ':' + fast.status:>14}")
            if args.tight:
                with threadpool_limits(limits=1, user_api="blas"):
                    started = time.perf_counter()
                    tight = solve_clarabel(program, **TIGHT)
                    t_tight = time.perf_counter() - started
                tight_gap = (fast.objective - tight.objective) / abs(tight.objective)
                line += f" {t_tight:>8.2f} {tight_gap:>12.1e}"
            if args.direct:
                with threadpool_limits(limits=1, user_api="blas"):
                    started = time.perf_counter()
                    direct = solve_clarabel(program, formulation="direct")
                    t_direct = time.perf_counter() - started
                line += (f" {t_direct:>8.2f} {direct.iterations or 0:>3} "
                         f"{t_direct / t_fast:>5.0f}x")
            print(line, flush=True)


if __name__ == "__main__":
    main()
