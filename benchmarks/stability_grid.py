"""The paper's stability experiment (Section 8.3) on the UCI energy and concrete data.

For every cell of a grid max_neurons x regularisation, three networks are fitted on a 90/10
split (gates drawn from one fixed seed, as in the paper): LASSO-SCNN (``lambda_reg``) and
WaDiRo-SCNN with the l1 and the l2 Wasserstein metric (``radius``). Each cell records the test
MAE and the certified L_eps of the gated form (what ``predict`` computes, as the paper
certifies it), both in the data's own units. The perturbation is ``--eps`` standard deviations
of each feature (the published notebook: 0.001 in standardised units, an l2 ball), the domain
the training data's range. Writes one PNG per dataset (``<out>/stability_<dataset>.png``) and
prints the grid's extremes per model, the paper's corner annotations.

    python benchmarks/stability_grid.py                       # minutes: a 4 x 5 grid
    python benchmarks/stability_grid.py --full                # the paper's 29 x 13 grid
    python benchmarks/stability_grid.py --neurons 2,6,10,14,18,22,26,30 --time-limit 5
    python benchmarks/stability_grid.py --norm 2 --time-limit 60 --runner threads
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
from _runners import add_runner_options, executor, run_all

UCI = Path(__file__).resolve().parents[2] / "shared" / "data" / "uci"
DATASETS = {
    # name: (file, feature columns, target column); energy: heating load (Y1)
    "energy": ("ENB2012_data.csv", slice(0, 8), 8),
    "concrete": ("Concrete_Data.csv", slice(0, 8), 8),
}
MODELS = ("lasso_scnn", "wadiro_scnn_l1", "wadiro_scnn_l2")
PAPER_NEURONS = list(range(2, 31))
PAPER_REGULARISATION = [0, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1, 10, 100, 1e3, 1e4]
QUICK_NEURONS = [2, 6, 10, 14]
QUICK_REGULARISATION = [0, 1e-4, 1e-2, 1, 100]


def load(name: str, seed: int = 0) -> tuple[np.ndarray, ...]:
    file, features, target = DATASETS[name]
    data = np.loadtxt(UCI / file, delimiter=",")
    X, y = data[:, features], data[:, target]
    order = np.random.default_rng(seed).permutation(len(y))
    n_train = int(0.9 * len(y))
    train, test = order[:n_train], order[n_train:]
    return X[train], y[train], X[test], y[test]


def make_model(model: str, neurons: int, regularisation: float):
    from wadiro_models import SCNN, WaDiRoSCNN

    if model == "lasso_scnn":
        return SCNN(max_neurons=neurons, regularizer="lasso", lambda_reg=regularisation,
                    random_state=0)
    norm = model.rsplit("_", 1)[1]
    return WaDiRoSCNN(max_neurons=neurons, radius=regularisation, wasserstein=norm,
                      random_state=0, solver="ipm")


def cell(dataset: str, model: str, neurons: int, regularisation: float, eps: float,
         norm: str, time_limit: float) -> dict:
    from wadiro_models import certify_stability

    X, y, X_test, y_test = load(dataset)
    started = time.perf_counter()
    fitted = make_model(model, neurons, regularisation).fit(X, y)
    fit_s = time.perf_counter() - started
    mae = float(np.mean(np.abs(fitted.predict(X_test) - y_test)))
    certificate = certify_stability(fitted, None, eps * X.std(axis=0), norm,
                                    time_limit=time_limit)
    return {"dataset": dataset, "model": model, "neurons": neurons,
            "regularisation": regularisation, "gates": int(fitted.n_gates_), "mae": mae,
            "l_eps": certificate.l_eps, "lower": certificate.lower,
            "status": certificate.status, "fit_s": fit_s,
            "certify_s": certificate.solve_time}


def plot(rows: list[dict], dataset: str, neurons: list[int], grid: list[float],
         path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import LogNorm

    fig, axes = plt.subplots(len(MODELS), 2, figsize=(11, 3.2 * len(MODELS)),
                             constrained_layout=True)
    titles = {"lasso_scnn": "LASSO-SCNN", "wadiro_scnn_l1": "WaDiRo-SCNN (W1, l1)",
              "wadiro_scnn_l2": "WaDiRo-SCNN (W1, l2)"}
    for r, model in enumerate(MODELS):
        for c, metric in enumerate(("mae", "l_eps")):
            Z = np.full((len(neurons), len(grid)), np.nan)
            limited = np.zeros_like(Z, dtype=bool)
            for row in rows:
                if row["dataset"] == dataset and row["model"] == model:
                    i, j = neurons.index(row["neurons"]), grid.index(row["regularisation"])
                    Z[i, j] = row[metric]
                    limited[i, j] = row["status"] != "optimal"
            ax = axes[r, c]
            positive = Z[np.isfinite(Z) & (Z > 0)]
            norm = (LogNorm(vmin=positive.min(), vmax=positive.max())
                    if metric == "l_eps" and positive.size else None)
            image = ax.imshow(Z, origin="lower", aspect="auto", cmap="viridis", norm=norm)
            if metric == "l_eps":
                for i, j in zip(*np.nonzero(limited), strict=True):
                    ax.text(j, i, "*", ha="center", va="center", color="white")
            ax.set_xticks(range(len(grid)), [f"{g:g}" for g in grid], rotation=45)
            ax.set_yticks(range(len(neurons)), neurons)
            ax.set_xlabel("lambda_reg" if model == "lasso_scnn" else "radius")
            ax.set_ylabel("max_neurons")
            label = "test MAE" if metric == "mae" else "L_eps (* = time limit: upper bound)"
            finite = Z[np.isfinite(Z)]
            extremes = f"min {finite.min():.3g}, max {finite.max():.3g}" if finite.size else ""
            ax.set_title(f"{titles[model]}: {label}\n{extremes}", fontsize=9)
            fig.colorbar(image, ax=ax)
    fig.suptitle(f"Stability certification on {dataset}")
    fig.savefig(path, dpi=110)
    plt.close(fig)


def summarise(rows: list[dict]) -> None:
    print(f"\n{'dataset':<9}{'model':<16}{'MAE min':>9}{'MAE max':>9}{'L_eps min':>11}"
          f"{'L_eps max':>11}{'optimal':>9}  best-MAE cell (neurons, reg): MAE, L_eps")
    for dataset in DATASETS:
        for model in MODELS:
            sel = [r for r in rows if r["dataset"] == dataset and r["model"] == model]
            if not sel:
                continue
            mae = np.array([r["mae"] for r in sel])
            leps = np.array([r["l_eps"] for r in sel])
            best = sel[int(np.argmin(mae))]
            optimal = sum(r["status"] == "optimal" for r in sel)
            print(f"{dataset:<9}{model:<16}{mae.min():>9.3f}{mae.max():>9.3f}{leps.min():>11.3g}"
                  f"{leps.max():>11.3g}{optimal:>5}/{len(sel):<3}  ({best['neurons']}, "
                  f"{best['regularisation']:g}): {best['mae']:.3f}, {best['l_eps']:.3g}")
    print("\nmedian L_eps by regularisation (all models, neurons and datasets pooled per model):")
    for model in MODELS:
        by_reg: dict[float, list[float]] = {}
        for r in rows:
            if r["model"] == model:
                by_reg.setdefault(r["regularisation"], []).append(r["l_eps"])
        cells = ", ".join(f"{g:g}: {np.median(v):.3g}" for g, v in sorted(by_reg.items()))
        print(f"  {model:<16}{cells}")
    fit = sum(r["fit_s"] for r in rows)
    cert = sum(r["certify_s"] for r in rows)
    print(f"\nfit {fit:.0f} s, certification {cert:.0f} s over {len(rows)} cells")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--full", action="store_true", help="the paper's 29 x 13 grid")
    parser.add_argument("--neurons", default=None, help="max_neurons values, comma-separated")
    parser.add_argument("--regularisation", default=None,
                        help="radius / lambda_reg values, comma-separated")
    parser.add_argument("--datasets", default=",".join(DATASETS))
    parser.add_argument("--eps", type=float, default=1e-3,
                        help="perturbation radius in standard deviations of each feature")
    parser.add_argument("--norm", choices=("inf", "1", "2"), default="inf")
    parser.add_argument("--time-limit", type=float, default=20.0, help="seconds per MILP")
    parser.add_argument("--out", type=Path, default=Path("reports/benchmarks"))
    add_runner_options(parser)
    args = parser.parse_args()
    neurons = PAPER_NEURONS if args.full else QUICK_NEURONS
    grid = PAPER_REGULARISATION if args.full else QUICK_REGULARISATION
    if args.neurons:
        neurons = [int(v) for v in args.neurons.split(",")]
    if args.regularisation:
        grid = [float(v) for v in args.regularisation.split(",")]
    datasets = args.datasets.split(",")
    jobs = [{"dataset": d, "model": m, "neurons": n, "regularisation": g, "eps": args.eps,
             "norm": args.norm, "time_limit": args.time_limit}
            for d in datasets for m in MODELS for n in neurons for g in grid]
    print(f"{len(jobs)} cells on {args.runner}; eps = {args.eps} std per feature, "
          f"norm {args.norm}, time limit {args.time_limit} s")
    started = time.perf_counter()
    with executor(args.runner, args.workers, args.dask_address) as pool:
        rows = run_all(pool, cell, jobs)
    print(f"wall {time.perf_counter() - started:.0f} s")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "stability_grid.json").write_text(json.dumps(rows, indent=1))
    for dataset in datasets:
        path = args.out / f"stability_{dataset}.png"
        plot(rows, dataset, neurons, grid, path)
        print(f"wrote {path}")
    summarise(rows)


if __name__ == "__main__":
    main()
