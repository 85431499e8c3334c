"""Hyperparameter search with optuna's TPE on the sliding-window split.

Fit on weeks 1-11 of the history, score MAE (in kWh) on week 12, ``n_trials`` trials seeded from
(building, week, model) so that a rerun reproduces the same trials. A trial whose fit fails (a
solver error, an infeasible constraint set) is recorded as failed and the search goes on; only
when every trial fails does tuning fail.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import optuna

from wadiro_models.search_spaces import Categorical, IntUniform, LogUniform

# optuna's default of 10 random start-up trials would leave 5 of the protocol's 15 to TPE.
N_STARTUP_TRIALS = 5


@dataclass(frozen=True)
class TrialRecord:
    number: int
    params: dict[str, Any]
    value: float | None
    state: str
    duration_s: float | None
    error: str | None = None


class TuningFailedError(RuntimeError):
    """Every trial of a search failed; the message carries the last error, ``trials`` them all."""

    def __init__(self, message: str, trials: list[TrialRecord]) -> None:
        super().__init__(message)
        self.trials = trials


@dataclass(frozen=True)
class TuningResult:
    best_params: dict[str, Any]
    best_value: float
    trials: list[TrialRecord] = field(default_factory=list)
    elapsed_s: float = 0.0
    best_prediction: np.ndarray | None = None
    """The best trial's predictions of the validation rows (no extra fit needed to know how
    the chosen hyperparameters forecast the validation week)."""


def suggest_params(trial: optuna.Trial, space: Mapping[str, Any]) -> dict[str, Any]:
    """Draw one point of a search space given as plain data (``wadiro_models.search_spaces``)."""
    params: dict[str, Any] = {}
    for name, dist in space.items():
        if isinstance(dist, LogUniform):
            params[name] = trial.suggest_float(name, dist.low, dist.high, log=True)
        elif isinstance(dist, IntUniform):
            params[name] = trial.suggest_int(name, dist.low, dist.high)
        elif isinstance(dist, Categorical):
            params[name] = trial.suggest_categorical(name, list(dist.choices))
        else:
            raise TypeError(f"unknown distribution for {name!r}: {dist!r}")
    return params


def mean_absolute_error(y_true: np.ndarray, y_hat: np.ndarray) -> float:
    mask = np.isfinite(y_true)
    return float(np.mean(np.abs(y_hat[mask] - y_true[mask])))


def tune(
    make_model: Callable[..., Any],
    space: Mapping[str, Any],
    X_fit: np.ndarray,
    y_fit: np.ndarray,
    X_val: np.ndarray,
    y_val: np.ndarray,
    *,
    n_trials: int,
    seed: int,
    catch: tuple[type[Exception], ...] = (Exception,),
    fit_params: dict[str, Any] | None = None,
) -> TuningResult:
    """Minimise validation MAE over ``space`` with a seeded TPE sampler.

    ``make_model(**params)`` builds an unfitted estimator, fitted with ``fit_params`` besides
    the data. A space with no dimensions (a model without hyperparameters) is evaluated once.
    """
    if n_trials < 1:
        raise ValueError(f"n_trials must be >= 1, got {n_trials}")
    sampler = optuna.samplers.TPESampler(
        seed=seed, n_startup_trials=min(N_STARTUP_TRIALS, n_trials)
    )
    # Failed trials are recorded in the results (state "fail"); optuna would also log each one
    # with its traceback at WARNING level.
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    study = optuna.create_study(direction="minimize", sampler=sampler)
    last_error: list[BaseException] = []
    best: dict[str, Any] = {"value": np.inf, "prediction": None}

    def objective(trial: optuna.Trial) -> float:
        params = suggest_params(trial, space)
        try:
            model = make_model(**params).fit(X_fit, y_fit, **(fit_params or {}))
            prediction = np.asarray(model.predict(X_val), dtype=float)
            value = mean_absolute_error(y_val, prediction)
            if value < best["value"]:  # strictly: the first of equal trials, as optuna picks
                best["value"], best["prediction"] = value, prediction
            return value
        except catch as exc:
            last_error[:] = [exc]
            trial.set_user_attr("error", f"{type(exc).__name__}: {exc}")
            raise

    started = time.perf_counter()
    study.optimize(objective, n_trials=n_trials if space else 1, catch=catch)
    elapsed = time.perf_counter() - started
    records = [
        TrialRecord(
            number=t.number,
            params=dict(t.params),
            value=t.value,
            state=t.state.name.lower(),
            duration_s=t.duration.total_seconds() if t.duration else None,
            error=t.user_attrs.get("error"),
        )
        for t in study.trials
    ]
    completed = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    if not completed:
        cause = repr(last_error[0]) if last_error else "no trial completed"
        raise TuningFailedError(f"all {len(records)} trials failed; last error: {cause}", records)
    return TuningResult(
        best_params=dict(study.best_params),
        best_value=float(study.best_value),
        trials=records,
        elapsed_s=elapsed,
        best_prediction=best["prediction"],
    )
