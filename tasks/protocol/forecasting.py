"""The forecasting protocol for one (building, target week): a pure DataFrame-in, records-out core.

window -> features -> tuning split -> TPE per model -> refit on the 12 weeks -> forecast W with
intervals -> score -> choose the forecast to publish. Nothing here touches storage or Prefect;
:mod:`~wadiro_fleet.tasks.protocol.batch` runs it over a batch of buildings and
:mod:`~wadiro_fleet.tasks.warehouse.results` turns its output into warehouse rows.

Every model is tuned and refitted in isolation: a model that fails (every trial failed, a solver
error in the refit) records its status and error, and the other models go on. Each learned
model also forecasts the validation week from the weeks before it (the best tuning trial does
exactly that); those errors calibrate its intervals and let the publication step compare it
with seasonal naive using only what is known when the forecast is issued. Under
``--tuning reuse`` that validation forecast is, when it exists, the one the model actually
issued for that week a week ago with the same hyperparameters and protocol
(:class:`IssuedForecast`): a second fit is then not needed, and the errors are those of real
issued forecasts (with the weather the model had then, forecast weather in the live loop).

A learned model predicts either the load itself (``target="load"``, the paper) or the
correction to the persistence forecast (``target="residual"``: load = persistence + r). A
model with a physical floor (``wadiro_pcscnn``: no negative load) then gets the per-sample
lower bound ``r >= floor - persistence``; with ``bound_target_week`` the same floor also holds
at the inputs of the week it forecasts (the validation week while tuning, the target week in the
refit), inside its training program, so its forecasts never go below zero.
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
from wadiro_fleet.tasks.protocol.features import (
    LABEL,
    PERSISTENCE,
    TS,
    WEATHER_COLUMNS,
    build_features,
)
from wadiro_fleet.tasks.protocol.intervals import LEVELS, Intervals, conformal_intervals
from wadiro_fleet.tasks.protocol.models import MODELS, ModelSpec
from wadiro_fleet.tasks.protocol.publication import Candidate, Publication, choose_publication
from wadiro_fleet.tasks.protocol.scoring import Scores, score_forecast
from wadiro_fleet.tasks.protocol.seeding import stable_seed
from wadiro_fleet.tasks.protocol.track_record import TrackRecord, adapted_levels
from wadiro_fleet.tasks.protocol.tuning import TrialRecord, TuningFailedError, tune
from wadiro_fleet.tasks.protocol.windows import Window, WindowBounds, build_window


@dataclass(frozen=True)
class StoredParams:
    """Best hyperparameters found for a (building, model) by the tuning of ``tuned_week``."""

    params: dict[str, Any]
    tuned_week: date


@dataclass(frozen=True)
class IssuedForecast:
    """A model's forecast of an earlier week as it was issued: its hyperparameters and its
    hourly load forecast indexed by UTC hour."""

    params: dict[str, Any]
    y_hat: pd.Series


ISSUED_MIN_SHARE = 0.9
"""An issued forecast serves as the validation forecast only when it covers at least this share
of the validation week's usable hours."""

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
    intervals: Intervals = field(default_factory=Intervals)
    scores: Scores | None = None
    validation_mae: float | None = None
    validation_source: str | None = None
    """Where the validation forecast came from: ``tuning`` (the best trial), ``refit`` (a fit on
    the weeks before the validation week) or ``issued`` (the forecast issued for it a week ago)."""
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
    coverage: dict[str, int | str | None]
    """``window_status`` columns: hour counts, and which weather the target week used."""
    test_ts: pd.Series
    outcomes: list[ModelOutcome] = field(default_factory=list)
    publication: Publication | None = None
    compute_time_s: float | None = None
    """CPU seconds of the thread that ran the protocol for this building-week (features, every
    model's tuning, fits, certificates, scoring); None when it failed before running."""

    @property
    def n_failed_models(self) -> int:
        return sum(o.status != "ok" for o in self.outcomes)


@dataclass(frozen=True)
class _Part:
    """A window part as a learned model sees it: load = ``base`` + the model's target."""

    X: np.ndarray
    target: np.ndarray
    base: np.ndarray
    load: np.ndarray
    ts: pd.DatetimeIndex

    def to_load(self, prediction: np.ndarray) -> np.ndarray:
        return self.base + np.asarray(prediction, dtype=float)


def _part(window: Window, name: str, target: str) -> _Part:
    """Rows of part ``name`` in the target's units. For the residual target, history rows
    without a persistence value are left out; test rows are all kept (their forecast is NaN)."""
    X, load = window.xy(name)
    frame = getattr(window, name)
    ts = pd.DatetimeIndex(frame[TS])
    if target == "load":
        return _Part(X, load, np.zeros(len(load)), load, ts)
    base = frame[PERSISTENCE].to_numpy(dtype=np.float64)
    keep = np.isfinite(base) if name != "test" else np.ones(len(base), dtype=bool)
    return _Part(X[keep], (load - base)[keep], base[keep], load[keep], ts[keep])


def _issued_errors(issued: IssuedForecast | None, params: Mapping[str, Any],
                   validation: _Part) -> np.ndarray | None:
    """Validation errors of the forecast issued for the validation week, when it was made with
    ``params`` and covers enough of the week's rows; else None (the model is fitted again)."""
    if issued is None or dict(issued.params) != dict(params) or not len(validation.load):
        return None
    y_hat = issued.y_hat.reindex(validation.ts).to_numpy(dtype=np.float64)
    found = np.isfinite(y_hat)
    if found.sum() < ISSUED_MIN_SHARE * len(y_hat):
        return None
    return (validation.load - y_hat)[found]


def _floor_params(spec: ModelSpec, part: _Part, target: str) -> dict[str, Any]:
    """Constructor arguments that keep ``spec``'s physical floor on ``part``'s rows."""
    if spec.load_floor is None or target == "load":
        return {}  # a floor on the load itself is already the estimator's own bound
    return {"lower_bound": spec.load_floor - part.base}


def _bound_points(spec: ModelSpec, part: _Part, config: ForecastConfig) -> dict[str, Any]:
    """Fit arguments that also keep ``spec``'s floor at the inputs of ``part``, the week being
    forecast (its rows are not training samples; their inputs are known when it is issued)."""
    if spec.load_floor is None or not config.bound_target_week:
        return {}
    rows = np.isfinite(part.base) & np.isfinite(part.X).all(axis=1)
    if not rows.any():
        return {}
    return {"bound_X": part.X[rows], "bound_lower": spec.load_floor - part.base[rows]}


def _fit_info(model: Any) -> dict[str, Any]:
    """Solver facts an estimator exposes (the SCNN family); empty for the baselines."""
    return {
        "solver": getattr(model, "solver_name_", None),
        "solver_status": getattr(model, "solver_status_", None),
        "objective": getattr(model, "objective_", None),
    }


def _persistence_outcome(name: str, window: Window, record: TrackRecord | None) -> ModelOutcome:
    """Seasonal naive: the persistence forecast, its intervals from its validation week."""
    _, y_test = window.xy("test")
    y_hat = window.test[PERSISTENCE].to_numpy(dtype=np.float64)
    if not np.isfinite(y_hat).any():
        return ModelOutcome(model=name, status="failed", n_train=len(window.train),
                            error="no load at the same hours in the last four weeks")
    calibration = window.validation if len(window.validation) else window.history
    errors = (calibration[LABEL] - calibration[PERSISTENCE]).to_numpy(dtype=np.float64)
    intervals = conformal_intervals(y_hat, errors, levels=adapted_levels(name, record, LEVELS))
    scored = np.isfinite(errors)
    return ModelOutcome(
        model=name, status="ok", params={}, tuned_week=window.week, y_hat=y_hat,
        intervals=intervals, scores=score_forecast(y_test, y_hat, intervals=intervals),
        validation_mae=float(np.mean(np.abs(errors[scored]))) if scored.any() else None,
        n_train=len(window.train),
    )


def _run_model(
    name: str,
    window: Window,
    config: ForecastConfig,
    building_id: str,
    stored: StoredParams | None,
    record: TrackRecord | None = None,
    issued: IssuedForecast | None = None,
) -> ModelOutcome:
    spec = MODELS[name]
    if not spec.is_learned:
        return _persistence_outcome(name, window, record)
    train, fit, validation, test = (_part(window, p, config.target)
                                    for p in ("train", "fit", "validation", "test"))
    options = dict(config.model_options.get(name, {}))

    def maker(part: _Part):  # noqa: ANN202 - an estimator factory for that part's rows
        floor = _floor_params(spec, part, config.target)
        return lambda **params: spec.estimator(**{**options, **params, **floor})

    outcome = ModelOutcome(model=name, status="failed", n_train=len(train.target))
    try:
        if stored is not None and config.tuning == "reuse":
            outcome.params, outcome.tuned_week = dict(stored.params), stored.tuned_week
            errors = _issued_errors(issued, outcome.params, validation)
            outcome.validation_source = "issued"
            if errors is None:
                fitted = maker(fit)(**outcome.params).fit(
                    fit.X, fit.target, **_bound_points(spec, validation, config))
                errors = validation.load - validation.to_load(fitted.predict(validation.X))
                outcome.validation_source = "refit"
        else:
            result = tune(
                maker(fit), spec.search_space, fit.X, fit.target, validation.X,
                validation.target, n_trials=config.trials,
                seed=stable_seed(building_id, window.week, name),
                fit_params=_bound_points(spec, validation, config),
            )
            outcome.trials, outcome.tuning_time_s = result.trials, result.elapsed_s
            outcome.params, outcome.tuned_week = result.best_params, window.week
            errors = validation.load - validation.to_load(result.best_prediction)
            outcome.validation_source = "tuning"
        outcome.validation_mae = float(np.mean(np.abs(errors)))
        started = time.perf_counter()
        model = maker(train)(**outcome.params).fit(
            train.X, train.target, **_bound_points(spec, test, config))
        outcome.fit_time_s = time.perf_counter() - started
        outcome.y_hat = test.to_load(model.predict(test.X))
        floor = 0.0 if spec.load_floor is None else spec.load_floor
        outcome.intervals = conformal_intervals(
            outcome.y_hat, errors, levels=adapted_levels(name, record, LEVELS), floor=floor)
        outcome.scores = score_forecast(
            test.load, outcome.y_hat, train_prediction=train.to_load(model.predict(train.X)),
            intervals=outcome.intervals,
        )
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


def _publish(window: Window, outcomes: list[ModelOutcome], record: TrackRecord | None,
             max_l_eps: float | None = None) -> Publication | None:
    forecastable = window.test[list(window.feature_columns)].notna().all(axis=1).to_numpy()
    candidates = [
        Candidate(model=o.model, y_hat=o.y_hat, validation_mae=o.validation_mae,
                  solver_status=o.solver_status, failed=o.error if o.status != "ok" else None,
                  l_eps=o.l_eps, l_eps_status=o.l_eps_status)
        for o in outcomes
    ]
    return choose_publication(candidates, forecastable, record, max_l_eps)


WEATHER_KIND = "weather_kind"
"""The hourly frame's column saying where an hour's weather came from (``observed`` or
``forecast``; :mod:`~wadiro_fleet.tasks.warehouse.hours`)."""


def target_week_weather_sources(hours: pd.DataFrame, bounds: WindowBounds) -> dict[str, int | str | None]:
    """Which weather the target week's hours used: hours whose stored row (every weather input
    present) is an observation, hours whose row is a forecast, and the week's source,
    ``observed``, ``forecast``, ``mixed`` or None (neither: every hour was filled or is missing).

    Counts are None when the frame does not say where its weather came from.
    """
    if WEATHER_KIND not in hours.columns:
        return {"n_test_weather_observed": None, "n_test_weather_forecast": None,
                "weather_source": None}
    ts = pd.DatetimeIndex(hours[TS]).tz_convert("UTC")
    start, end = bounds.part("test")
    in_test = (ts >= start) & (ts < end)
    present = hours[list(WEATHER_COLUMNS)].notna().all(axis=1).to_numpy()
    kind = hours[WEATHER_KIND].to_numpy()
    observed = int((in_test & present & (kind == "observed")).sum())
    forecast = int((in_test & present & (kind == "forecast")).sum())
    source = ("mixed" if observed and forecast else "observed" if observed
              else "forecast" if forecast else None)
    return {"n_test_weather_observed": observed, "n_test_weather_forecast": forecast,
            "weather_source": source}


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
    track_record: TrackRecord | None = None,
    issued: Mapping[str, IssuedForecast] | None = None,
) -> BuildingWeekResult:
    """Run the protocol for one building and target week on its hourly frame.

    ``hours`` is the building's hourly frame (:func:`~wadiro_fleet.tasks.warehouse.hours.load_many_building_hours`)
    covering at least the window and the feature set's lookback. ``stored_params`` holds the
    latest tuning results per model for ``--tuning reuse``; entries older than
    ``config.reuse_max_age_weeks`` are ignored (the model is tuned again). ``track_record`` is
    how the models did in the building's earlier weeks: the publication step weighs it, and
    the intervals adapt their level to the coverage it shows. ``issued`` holds each model's
    forecast issued for the week before ``week`` (the validation week); under ``--tuning
    reuse`` it replaces the validation fit where its hyperparameters are the ones reused.

    When the window cannot feed the learned models (too little history, no weather), only the
    persistence models run, so the week still gets a forecast whenever last week's load exists.
    """
    started = time.thread_time()  # this thread's CPU: right under the threads runner too
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
        **target_week_weather_sources(hours, window.bounds),
    }
    result = BuildingWeekResult(
        building_id=building_id, week=window.week, status=str(window.status),
        reason=window.reason, coverage=coverage, test_ts=window.test[TS],
    )
    max_age = timedelta(weeks=config.reuse_max_age_weeks)
    for name in config.models:
        if not (window.ok or not MODELS[name].is_learned):
            continue
        stored = (stored_params or {}).get(name)
        if stored is not None and window.week - stored.tuned_week > max_age:
            stored = None
        result.outcomes.append(_run_model(name, window, config, building_id, stored,
                                          track_record, (issued or {}).get(name)))
    result.publication = _publish(window, result.outcomes, track_record, config.max_l_eps)
    result.compute_time_s = time.thread_time() - started
    return result
