"""The paper's synthetic outlier benchmark (Sections 7 and 8.1): Experiments A, B and C.

Four benchmark functions (McCormick, PGP, Keane and Ackley in four dimensions) are sampled,
corrupted with sliced-Wasserstein outliers and Gaussian noise as the paper's corruption table
says (``wadiro_models.synthetic``), and six models are tuned on the validation MAE and scored
on the clean test set: WaDiRo-SCNN, SCNN, regularised SCNN (lasso or ridge), WaDiRo linear
regression, regularised linear regression (l1 loss, lasso or ridge) and a deep ReLU network
(scikit-learn's ``MLPRegressor``, four hidden layers). Prints the absolute and the normalised
errors (per function and metric, 0 = best model, 1 = worst, as the paper's figure) and writes
``<out>/outliers_normalised.png`` and ``<out>/outliers_absolute.png``.

    python benchmarks/outlier_benchmark.py                 # minutes: 500 samples, 10 trials
    python benchmarks/outlier_benchmark.py --full          # the paper: 2000 samples, 400 trials
    python benchmarks/outlier_benchmark.py --runner dask --dask-address tcp://HOST:8786

Differences from the paper: TPE (optuna) instead of simulated annealing (hyperopt); the deep
network is scikit-learn's (squared loss, an l2 penalty instead of dropout, Adam); the
regularised linear regression is solved with cvxpy + Clarabel like the WaDiRo one.
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
import zlib
from pathlib import Path

import numpy as np
from _runners import add_runner_options, executor, run_all

FUNCTIONS = ("McCormick", "PGP", "Keane", "Ackley")
EXPERIMENTS = ("A", "B", "C")
MODELS = ("wadiro_scnn", "scnn_regularised", "scnn", "wadiro_linreg", "linreg_regularised",
          "deep_relu")
LABELS = {
    "wadiro_scnn": "WaDiRo-SCNN", "scnn_regularised": "SCNN, regularised", "scnn": "SCNN",
    "wadiro_linreg": "WaDiRo lin. reg.", "linreg_regularised": "Lin. reg., regularised",
    "deep_relu": "Deep ReLU network",
}


def _lad_regression(X, y, Xs, *, lambda_reg: float, regularizer: str):
    """min (1/N) sum |x^T w + b - y| + lambda r(w) on standardised data; predictions for Xs."""
    import cvxpy as cp

    mean, scale = X.mean(axis=0), X.std(axis=0) + 1e-12
    y_mean, y_scale = y.mean(), y.std() + 1e-12
    Z, t = (X - mean) / scale, (y - y_mean) / y_scale
    w, b = cp.Variable(X.shape[1]), cp.Variable()
    penalty = cp.norm1(w) if regularizer == "lasso" else cp.sum_squares(w)
    cp.Problem(cp.Minimize(cp.sum(cp.abs(Z @ w + b - t)) / len(t) + lambda_reg * penalty)).solve(
        solver=cp.CLARABEL)
    return [y_mean + y_scale * (((A - mean) / scale) @ w.value + b.value) for A in Xs]


def _fit_predict(model: str, params: dict, data, seed: int):
    """(validation predictions, test predictions) of one trial."""
    Xs = (data.X_val, data.X_test)
    if model == "linreg_regularised":
        return _lad_regression(data.X_train, data.y_train, Xs, **params)
    if model == "deep_relu":
        from sklearn.compose import TransformedTargetRegressor
        from sklearn.neural_network import MLPRegressor
        from sklearn.pipeline import make_pipeline
        from sklearn.preprocessing import StandardScaler

        p = dict(params)
        width = p.pop("n_hidden")
        network = MLPRegressor(hidden_layer_sizes=(width,) * 4, activation="relu",
                               solver="adam", batch_size=p.pop("batch_size"),
                               learning_rate_init=p.pop("learning_rate"),
                               max_iter=p.pop("n_epochs"), alpha=p.pop("alpha"),
                               random_state=seed)
        estimator = TransformedTargetRegressor(make_pipeline(StandardScaler(), network),
                                               transformer=StandardScaler())
    else:
        from wadiro_models import SCNN, WaDiRoLinearRegression, WaDiRoSCNN

        if model == "wadiro_scnn":
            estimator = WaDiRoSCNN(solver="ipm", random_state=seed, **params)
        elif model in ("scnn", "scnn_regularised"):
            estimator = SCNN(random_state=seed, **params)
        else:
            estimator = WaDiRoLinearRegression(**params)
    estimator.fit(data.X_train, data.y_train)
    return [estimator.predict(A) for A in Xs]


def _suggest(model: str, trial, full: bool) -> dict:
    top = 300 if full else 60
    low, high = np.exp(-8), np.exp(1)
    if model == "wadiro_scnn":
        return {"radius": trial.suggest_float("radius", low, high, log=True),
                "max_neurons": trial.suggest_int("max_neurons", 10, top),
                "wasserstein": trial.suggest_categorical("wasserstein", ["l1", "l2"])}
    if model == "scnn_regularised":
        return {"lambda_reg": trial.suggest_float("lambda_reg", low, high, log=True),
                "max_neurons": trial.suggest_int("max_neurons", 10, top),
                "regularizer": trial.suggest_categorical("regularizer", ["lasso", "ridge"])}
    if model == "scnn":
        return {"max_neurons": trial.suggest_int("max_neurons", 10, top)}
    if model == "wadiro_linreg":
        return {"radius": trial.suggest_float("radius", low, high, log=True),
                "wasserstein": trial.suggest_categorical("wasserstein", ["l1", "l2"])}
    if model == "linreg_regularised":
        return {"lambda_reg": trial.suggest_float("lambda_reg", low, high, log=True),
                "regularizer": trial.suggest_categorical("regularizer", ["lasso", "ridge"])}
    return {"batch_size": trial.suggest_int("batch_size", 2, 100),
            "n_hidden": trial.suggest_int("n_hidden", 10, top),
            "learning_rate": trial.suggest_float("learning_rate", low, np.exp(-1), log=True),
            "n_epochs": trial.suggest_int("n_epochs", 2, 1000 if full else 200),
            "alpha": trial.suggest_float("alpha", low, high, log=True)}


def job(experiment: str, function: str, model: str, n_samples: int, trials: int,
        full: bool, seed: int) -> dict:
    import optuna
    from sklearn.exceptions import ConvergenceWarning

    from wadiro_models.synthetic import make_outlier_experiment

    warnings.filterwarnings("ignore", category=ConvergenceWarning)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    data_seed = seed + zlib.crc32(f"{function}/{experiment}".encode())
    data = make_outlier_experiment(function, experiment, n_samples=n_samples, seed=data_seed)
    started = time.perf_counter()
    best: dict = {"val_mae": np.inf}
    failures = 0

    def objective(trial) -> float:
        nonlocal best, failures
        params = _suggest(model, trial, full)
        try:
            val, test = _fit_predict(model, params, data, seed)
        except Exception:  # noqa: BLE001 - a failed trial counts as the worst
            failures += 1
            return float("inf")
        val_mae = float(np.mean(np.abs(val - data.y_val)))
        if not np.isfinite(val_mae):
            failures += 1
            return float("inf")
        if val_mae < best["val_mae"]:
            best = {"val_mae": val_mae, "params": params,
                    "mae": float(np.mean(np.abs(test - data.y_test))),
                    "rmse": float(np.sqrt(np.mean((test - data.y_test) ** 2)))}
        return val_mae

    seed_of_study = zlib.crc32(f"{function}/{experiment}/{model}".encode())
    sampler = optuna.samplers.TPESampler(seed=seed_of_study)
    optuna.create_study(sampler=sampler).optimize(objective, n_trials=trials)
    return {"experiment": experiment, "function": function, "model": model,
            "trials": trials, "failures": failures, "seconds": time.perf_counter() - started,
            "n_outliers": data.n_outliers_train + data.n_outliers_val, **best}


def normalised(rows: list[dict], experiment: str) -> tuple[list[str], np.ndarray, np.ndarray]:
    """(columns, absolute, normalised) with rows in MODELS order; 0 best, 1 worst per column."""
    functions = [f for f in FUNCTIONS if any(r["function"] == f for r in rows)]
    columns = [f"{f} {m}" for f in functions for m in ("MAE", "RMSE")]
    table = np.full((len(MODELS), len(columns)), np.nan)
    for r in rows:
        if r["experiment"] == experiment and "mae" in r:
            i = MODELS.index(r["model"])
            j = functions.index(r["function"]) * 2
            table[i, j], table[i, j + 1] = r["mae"], r["rmse"]
    with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        low, high = np.nanmin(table, axis=0), np.nanmax(table, axis=0)
        norm = (table - low) / np.where(high > low, high - low, 1.0)
    return columns, table, norm


def print_tables(rows: list[dict]) -> None:
    for experiment in EXPERIMENTS:
        if not any(r["experiment"] == experiment for r in rows):
            continue
        columns, table, norm = normalised(rows, experiment)
        for label, values, fmt in (("normalised", norm, "{:>15.2f}"),
                                   ("absolute", table, "{:>15.3f}")):
            print(f"\nExperiment {experiment}, {label} test error")
            print(f"{'model':<24}" + "".join(f"{c:>15}" for c in columns))
            for i, model in enumerate(MODELS):
                print(f"{LABELS[model]:<24}" + "".join(fmt.format(v) for v in values[i]))


def plot(rows: list[dict], path: Path, which: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    experiments = [e for e in EXPERIMENTS if any(r["experiment"] == e for r in rows)]
    fig, axes = plt.subplots(len(experiments), 1, figsize=(11, 3.4 * len(experiments)),
                             constrained_layout=True, squeeze=False)
    for ax, experiment in zip(axes[:, 0], experiments, strict=True):
        columns, table, norm = normalised(rows, experiment)
        values = norm if which == "normalised" else table
        shown = norm  # colours always by rank within the column
        ax.imshow(shown, cmap="coolwarm", vmin=0, vmax=1, aspect="auto")
        for i in range(values.shape[0]):
            for j in range(values.shape[1]):
                ax.text(j, i, f"{values[i, j]:.2f}", ha="center", va="center", fontsize=8)
        ax.set_xticks(range(len(columns)), columns, rotation=30, ha="right")
        ax.set_yticks(range(len(MODELS)), [LABELS[m] for m in MODELS])
        ax.set_title(f"Experiment {experiment}: {which} test error")
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--full", action="store_true",
                        help="the paper's sizes: 2000 samples, up to 300 neurons, 400 trials "
                             "(100 for the deep network)")
    parser.add_argument("--samples", type=int, default=None)
    parser.add_argument("--trials", type=int, default=None)
    parser.add_argument("--deep-trials", type=int, default=None)
    parser.add_argument("--experiments", default=",".join(EXPERIMENTS))
    parser.add_argument("--functions", default=",".join(FUNCTIONS))
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("reports/benchmarks"))
    add_runner_options(parser)
    args = parser.parse_args()
    samples = args.samples or (2000 if args.full else 500)
    trials = args.trials or (400 if args.full else 10)
    deep_trials = args.deep_trials or (100 if args.full else max(trials // 2, 1))
    jobs = [{"experiment": e, "function": f, "model": m, "n_samples": samples,
             "trials": deep_trials if m == "deep_relu" else trials, "full": args.full,
             "seed": args.seed}
            for e in args.experiments.split(",") for f in args.functions.split(",")
            for m in args.models.split(",")]
    print(f"{len(jobs)} jobs on {args.runner}: {samples} samples, {trials} trials "
          f"({deep_trials} for the deep network)")
    started = time.perf_counter()
    with executor(args.runner, args.workers, args.dask_address) as pool:
        rows = run_all(pool, job, jobs)
    print(f"wall {time.perf_counter() - started:.0f} s")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "outliers.json").write_text(json.dumps(rows, indent=1, default=str))
    print_tables(rows)
    for which in ("normalised", "absolute"):
        path = args.out / f"outliers_{which}.png"
        plot(rows, path, which)
        print(f"wrote {path}")
    seconds = {m: sum(r["seconds"] for r in rows if r["model"] == m) for m in MODELS}
    failures = {m: sum(r["failures"] for r in rows if r["model"] == m) for m in MODELS}
    print("\ntuning seconds per model: " + ", ".join(f"{m} {s:.0f}" for m, s in seconds.items()))
    print("failed trials per model: " + ", ".join(f"{m} {k}" for m, k in failures.items()))


if __name__ == "__main__":
    main()
