"""Hyperparameter search with optuna's TPE on the sliding-window split.

Fit on weeks 1-11 of the history, score MAE (in kWh) on week 12, ``n_trials`` trials seeded from
(building, week, model) so that a rerun reproduces the same trials. A trial whose fit fails (a
solver error, an infeasible constraint set) is recorded as failed and the search goes on; only
when every trial fails does tuning fail.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import optuna

from tasks.protocol.scoring import mean_absolute
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


def _inside(point: Mapping[str, Any], space: Mapping[str, Any]) -> bool:
    """Whether ``point`` is a point of ``space`` (a stored tuning of another space is not)."""
    if set(point) != set(space):
        return False
    for name, dist in space.items():
        value = point[name]
        if isinstance(dist, Categorical):
            if value not in dist.choices:
                return False
        elif not dist.low <= value <= dist.high:
            return False
    return True


def tune_together(
    evaluate: Callable[[dict[str, Any]], Mapping[str, np.ndarray | BaseException]],
    models: tuple[str, ...],
    space: Mapping[str, Any],
    y_val: np.ndarray,
    *,
    n_trials: int,
    seed: int,
    start_from: Sequence[Mapping[str, Any]] = (),
) -> dict[str, TuningResult | TuningFailedError]:
    """One seeded TPE study over ``space`` that tunes several models on the same trials.

    ``evaluate(params)`` fits every model of ``models`` with ``params`` and returns each one's
    validation predictions, or the exception that stopped it on that trial. The sampler is guided
    by the first model's validation MAE; every model then takes its own best trial, so a model is
    never worse on validation than it would be on the first model's choice. A model whose every
    trial failed gets a :class:`TuningFailedError` instead of a result (raised when it is the only
    model).

    ``start_from`` warm-starts the study: those points (e.g. the best hyperparameters of an
    earlier, overlapping window) are its first trials, sampled ones fill the rest of the
    ``n_trials``, and the sampler's random start-up is shortened by as many (it already has
    points to model).
    """
    if n_trials < 1:
        raise ValueError(f"n_trials must be >= 1, got {n_trials}")
    scored = np.isfinite(y_val)  # hours without an actual are left out of the MAE
    if not scored.any():
        raise ValueError("y_val has no actual to score a trial on")
    primary = models[0]
    seeds = [dict(point) for point in start_from if _inside(point, space)][:n_trials]
    sampler = optuna.samplers.TPESampler(
        seed=seed, n_startup_trials=max(0, min(N_STARTUP_TRIALS, n_trials) - len(seeds))
    )
    # Failed trials are recorded in the results (state "fail"); optuna would also log each one
    # with its traceback at WARNING level.
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    study = optuna.create_study(direction="minimize", sampler=sampler)
    last_error: list[BaseException] = []
    values: dict[str, list[float | None]] = {m: [] for m in models}
    errors: dict[str, list[str | None]] = {m: [] for m in models}
    best: dict[str, tuple[float, np.ndarray | None, int]] = {m: (np.inf, None, -1) for m in models}

    def objective(trial: optuna.Trial) -> float:
        params = suggest_params(trial, space)
        try:
            predictions: Mapping[str, Any] = evaluate(params)
        except Exception as exc:
            predictions = dict.fromkeys(models, exc)
        for model in models:
            prediction = predictions.get(model)
            if prediction is None or isinstance(prediction, BaseException):
                values[model].append(None)
                errors[model].append(None if prediction is None
                                     else f"{type(prediction).__name__}: {prediction}")
                continue
            prediction = np.asarray(prediction, dtype=float)
            value = mean_absolute(prediction[scored] - y_val[scored])
            values[model].append(value)
            errors[model].append(None)
            if value < best[model][0]:  # strictly: the first of equal trials, as optuna picks
                best[model] = (value, prediction, trial.number)
        if values[primary][-1] is None:
            failure = predictions.get(primary)
            error = failure if isinstance(failure, Exception) else RuntimeError(
                f"{primary} returned no prediction for {params}")
            last_error[:] = [error]
            trial.set_user_attr("error", f"{type(error).__name__}: {error}")
            raise error
        return values[primary][-1]

    for point in seeds if space else ():
        study.enqueue_trial(point, skip_if_exists=True)
    study.optimize(objective, n_trials=n_trials if space else 1, catch=(Exception,))
    results: dict[str, TuningResult | TuningFailedError] = {}
    for model in models:
        records = [
            TrialRecord(
                number=t.number,
                params=dict(t.params),
                value=values[model][k],
                state="complete" if values[model][k] is not None else "fail",
                duration_s=t.duration.total_seconds() if t.duration else None,
                error=errors[model][k],
            )
            for k, t in enumerate(study.trials)
        ]
        value, prediction, number = best[model]
        if number < 0:
            cause = repr(last_error[0]) if last_error else "no trial completed"
            results[model] = TuningFailedError(
                f"all {len(records)} trials failed; last error: {cause}", records)
            continue
        results[model] = TuningResult(
            best_params=dict(study.trials[number].params),
            best_value=float(value),
            trials=records,
            best_prediction=prediction,
        )
    failed = results[primary]
    if isinstance(failed, TuningFailedError) and len(models) == 1:
        raise failed
    return results
