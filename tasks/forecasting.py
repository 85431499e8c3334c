"""The forecasting protocol for one (building, target week): a pure DataFrame-in, records-out core.

window -> features -> tuning split -> TPE per model -> refit on the 12 weeks -> forecast W ->
score. Nothing here touches storage or Prefect; :mod:`tasks.pipeline_tasks` wraps it and
:mod:`tasks.results` turns its output into warehouse rows.

Every model is tuned and refitted in isolation: a model that fails (every trial failed, a solver
error in the refit) records its status and error, and the other models go on.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import Any, Literal

import numpy as np
import pandas as pd

from tasks.features import DEFAULT_FEATURE_SET, LABEL, TS, build_features
from tasks.scoring import Scores, score_forecast
from tasks.seeding import stable_seed
from tasks.tuning import TrialRecord, TuningFailedError, tune
from tasks.windows import Window, build_window
from wadiro_models import MODELS, SEARCH_SPACES

SEASONAL_NAIVE = "seasonal_naive"
MODEL_NAMES: tuple[str, ...] = (*MODELS, SEASONAL_NAIVE)
"""Every model the pipeline can run: the library's registry plus the seasonal-naive floor."""

TuningMode = Literal["per-window", "reuse"]

DEFAULT_MODEL_OPTIONS: Mapping[str, Mapping[str, Any]] = {
    "wadiro_pcscnn": {"solver": "ipm"},
    "wadiro_scnn": {"solver": "ipm"},
}
"""Fixed constructor arguments per model, not tuned: the fast solver for the SCNN family."""


class UnknownModelNameError(ValueError):
    """A model name that neither the library's registry nor the pipeline knows."""


def check_model_names(models: Sequence[str]) -> tuple[str, ...]:
    unknown = [m for m in models if m not in MODEL_NAMES]
    if unknown:
        raise UnknownModelNameError(
            f"unknown model(s) {unknown}; known models: {', '.join(MODEL_NAMES)}"
        )
    if not models:
        raise UnknownModelNameError("no model selected")
    return tuple(dict.fromkeys(models))


@dataclass(frozen=True)
class ForecastConfig:
    """Every choice of a run that changes its results (recorded in the ``runs`` table)."""

    models: tuple[str, ...] = MODEL_NAMES
    trials: int = 15
    feature_set: str = DEFAULT_FEATURE_SET
    tuning: TuningMode = "per-window"
    reuse_max_age_weeks: int = 8
    history_weeks: int = 12
    model_options: Mapping[str, Mapping[str, Any]] = field(
        default_factory=lambda: dict(DEFAULT_MODEL_OPTIONS)
    )
    search_spaces: Mapping[str, Mapping[str, Any]] = field(
        default_factory=lambda: dict(SEARCH_SPACES)
    )

    def __post_init__(self) -> None:
        object.__setattr__(self, "models", check_model_names(self.models))
        if self.trials < 1:
            raise ValueError(f"trials must be >= 1, got {self.trials}")
        if self.tuning not in ("per-window", "reuse"):
            raise ValueError(f"tuning must be 'per-window' or 'reuse', got {self.tuning!r}")

    def as_record(self) -> dict[str, Any]:
        """JSON-ready parameters for the ``runs`` table."""
        return {
            "models": list(self.models),
            "trials": self.trials,
            "feature_set": self.feature_set,
            "tuning": self.tuning,
            "reuse_max_age_weeks": self.reuse_max_age_weeks,
            "history_weeks": self.history_weeks,
            "model_options": {k: dict(v) for k, v in self.model_options.items()},
            "search_spaces": {
                m: {p: repr(d) for p, d in space.items()} for m, space in self.search_spaces.items()
            },
        }


@dataclass(frozen=True)
class StoredParams:
    """Best hyperparameters found for a (building, model) by the tuning of ``tuned_week``."""

    params: dict[str, Any]
    tuned_week: date


@dataclass
class ModelOutcome:
    """One model's result for one (building, week)."""

    model: str
    status: str  # "ok" | "failed"
    error: str | None = None
    params: dict[str, Any] | None = None
    tuned_week: date | None = None
    trials: list[TrialRecord] = field(default_factory=list)
    y_hat: np.ndarray | None = None
    scores: Scores | None = None
    solver: str | None = None
    solver_status: str | None = None
    objective: float | None = None
    fit_time_s: float | None = None
    tuning_time_s: float | None = None
    n_train: int = 0


@dataclass
class BuildingWeekResult:
    """Everything the protocol produced for one (building, target week)."""

    building_id: str
    week: date
    status: str
    reason: str
    coverage: dict[str, int]
    test_ts: pd.Series
    outcomes: list[ModelOutcome] = field(default_factory=list)

    @property
    def n_failed_models(self) -> int:
        return sum(o.status != "ok" for o in self.outcomes)


def seasonal_naive(window: Window) -> np.ndarray:
    """Last week's value at the same UTC hour (168 h earlier), else two weeks earlier.

    Hours whose reading is missing both times get no forecast (NaN, stored as NULL).
    """
    history = window.train.set_index(TS)[LABEL]
    test_ts = window.test[TS]
    y_hat = history.reindex(test_ts - pd.Timedelta(hours=168)).to_numpy()
    older = history.reindex(test_ts - pd.Timedelta(hours=336)).to_numpy()
    return np.where(np.isnan(y_hat), older, y_hat)


def _fit_info(model: Any) -> dict[str, Any]:
    """Solver facts an estimator exposes (the SCNN family); empty for the baselines."""
    return {
        "solver": getattr(model, "solver_name_", None),
        "solver_status": getattr(model, "solver_status_", None),
        "objective": getattr(model, "objective_", None),
    }


def _run_model(
    name: str,
    window: Window,
    config: ForecastConfig,
    building_id: str,
    stored: StoredParams | None,
) -> ModelOutcome:
    X_train, y_train = window.xy("train")
    X_test, y_test = window.xy("test")
    if name == SEASONAL_NAIVE:
        y_hat = seasonal_naive(window)
        return ModelOutcome(
            model=name, status="ok", params={}, tuned_week=window.week, y_hat=y_hat,
            scores=score_forecast(y_test, y_hat), n_train=len(y_train),
        )

    options = dict(config.model_options.get(name, {}))

    def make_model(**params: Any) -> Any:
        return MODELS[name](**{**options, **params})

    outcome = ModelOutcome(model=name, status="failed", n_train=len(y_train))
    try:
        if stored is not None and config.tuning == "reuse":
            outcome.params, outcome.tuned_week = dict(stored.params), stored.tuned_week
        else:
            X_fit, y_fit = window.xy("fit")
            X_val, y_val = window.xy("validation")
            result = tune(
                make_model, config.search_spaces[name], X_fit, y_fit, X_val, y_val,
                n_trials=config.trials, seed=stable_seed(building_id, window.week, name),
            )
            outcome.trials, outcome.tuning_time_s = result.trials, result.elapsed_s
            outcome.params, outcome.tuned_week = result.best_params, window.week
        started = time.perf_counter()
        model = make_model(**outcome.params).fit(X_train, y_train)
        outcome.fit_time_s = time.perf_counter() - started
        outcome.y_hat = np.asarray(model.predict(X_test), dtype=float)
        train_prediction = np.asarray(model.predict(X_train), dtype=float)
        outcome.scores = score_forecast(y_test, outcome.y_hat, train_prediction=train_prediction)
        info = _fit_info(model)
        outcome.solver, outcome.solver_status = info["solver"], info["solver_status"]
        outcome.objective = None if info["objective"] is None else float(info["objective"])
        outcome.status = "ok"
    except TuningFailedError as exc:
        outcome.trials = exc.trials
        outcome.error = f"tuning failed: {exc}"
    except Exception as exc:  # noqa: BLE001 - any model failure is recorded, the run goes on
        outcome.error = f"{type(exc).__name__}: {exc}"
    return outcome


def forecast_building_week(
    hours: pd.DataFrame,
    *,
    building_id: str,
    timezone: str,
    holiday_country: str,
    holiday_subdiv: str | None,
    week: date,
    config: ForecastConfig,
    stored_params: Mapping[str, StoredParams] | None = None,
) -> BuildingWeekResult:
    """Run the protocol for one building and target week on its hourly frame.

    ``hours`` is the building's hourly frame (:func:`tasks.building_frame.load_building_hours`)
    covering at least the window and the feature set's lookback. ``stored_params`` holds the
    latest tuning results per model for ``--tuning reuse``; entries older than
    ``config.reuse_max_age_weeks`` are ignored (the model is tuned again).
    """
    features = build_features(
        hours, timezone=timezone, holiday_country=holiday_country,
        holiday_subdiv=holiday_subdiv, feature_set=config.feature_set,
    )
    window = build_window(
        features, week, timezone, feature_set=config.feature_set,
        history_weeks=config.history_weeks,
    )
    coverage = {
        "n_train_hours": window.coverage["train"].hours,
        "n_train_labelled": window.coverage["train"].labelled,
        "n_test_hours": window.coverage["test"].hours,
        "n_test_labelled": window.coverage["test"].labelled,
    }
    result = BuildingWeekResult(
        building_id=building_id, week=window.week, status=str(window.status),
        reason=window.reason, coverage=coverage, test_ts=window.test[TS],
    )
    if window.ok:
        max_age = timedelta(weeks=config.reuse_max_age_weeks)
        for name in config.models:
            stored = (stored_params or {}).get(name)
            if stored is not None and window.week - stored.tuned_week > max_age:
                stored = None
            result.outcomes.append(_run_model(name, window, config, building_id, stored))
    return result

