"""The forecasting protocol for one (building, target week): a pure DataFrame-in, records-out core.

window -> features -> tuning split -> TPE per model -> refit on the 12 weeks -> forecast W ->
score. Nothing here touches storage or Prefect; :mod:`~wadiro_fleet.tasks.protocol.batch` runs
it over a batch of buildings and :mod:`~wadiro_fleet.tasks.warehouse.results` turns its output
into warehouse rows.

Every model is tuned and refitted in isolation: a model that fails (every trial failed, a solver
error in the refit) records its status and error, and the other models go on.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import Any

import numpy as np
import pandas as pd
from wadiro_fleet.tasks.protocol.certification import certify_fit
from wadiro_fleet.tasks.protocol.config import ForecastConfig
from wadiro_fleet.tasks.protocol.features import TS, build_features
from wadiro_fleet.tasks.protocol.models import MODELS
from wadiro_fleet.tasks.protocol.scoring import Scores, score_forecast
from wadiro_fleet.tasks.protocol.seeding import stable_seed
from wadiro_fleet.tasks.protocol.tuning import TrialRecord, TuningFailedError, tune
from wadiro_fleet.tasks.protocol.windows import Window, build_window


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
    l_eps: float | None = None  # stability certificate (kWh) and out-of-sample bound
    l_eps_lower: float | None = None
    l_eps_status: str | None = None
    oos_bound_kwh: float | None = None
    certify_time_s: float | None = None


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
    spec = MODELS[name]
    if not spec.is_learned:
        y_hat = spec.forecast(window)
        return ModelOutcome(
            model=name, status="ok", params={}, tuned_week=window.week, y_hat=y_hat,
            scores=score_forecast(y_test, y_hat), n_train=len(y_train),
        )

    options = dict(config.model_options.get(name, {}))

    def make_model(**params: Any) -> Any:
        return spec.estimator(**{**options, **params})

    outcome = ModelOutcome(model=name, status="failed", n_train=len(y_train))
    try:
        if stored is not None and config.tuning == "reuse":
            outcome.params, outcome.tuned_week = dict(stored.params), stored.tuned_week
        else:
            X_fit, y_fit = window.xy("fit")
            X_val, y_val = window.xy("validation")
            result = tune(
                make_model, spec.search_space, X_fit, y_fit, X_val, y_val,
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
        certificate = None if config.certify_nodes == 0 else certify_fit(
            model, window.feature_columns, config.perturbation_radii, config.certify_nodes)
        if certificate is not None:  # the SCNN family's guarantees
            outcome.l_eps, outcome.l_eps_lower = certificate.l_eps, certificate.l_eps_lower
            outcome.l_eps_status = certificate.l_eps_status
            outcome.oos_bound_kwh = certificate.oos_bound_kwh
            outcome.certify_time_s = certificate.certify_time_s
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

    ``hours`` is the building's hourly frame (:func:`~wadiro_fleet.tasks.warehouse.hours.load_many_building_hours`)
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

