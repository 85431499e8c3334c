"""The forecasting protocol for one (building, target week): a pure DataFrame-in, records-out core.

window -> features -> tuning split -> TPE per model -> refit on the 12 weeks -> forecast W with
intervals -> score -> choose the forecast to publish. Nothing here touches storage or Prefect;
:mod:`~tasks.protocol.batch` runs it over a batch of buildings and
:mod:`~tasks.warehouse.results` turns its output into warehouse rows.

Every model is tuned and refitted on its own (under ``scnn_tuning="joint"`` the SCNN family's
two networks share a study, each taking its own best trial: :mod:`~.fitting`): a model that fails
(every trial failed, a solver error in the refit) records its status and error, and the other
models go on. Each learned
model also forecasts the validation week from the weeks before it (the best tuning trial does
exactly that); those errors calibrate its intervals and let the publication step compare it
with seasonal naive using only what is known when the forecast is issued. Under
``--tuning reuse`` that validation forecast is, when it exists, the one the model actually
issued for that week a week ago with the same hyperparameters and protocol
(:class:`IssuedForecast`): a second fit is then not needed, and the errors are those of real
issued forecasts (with the weather the model had then, forecast weather in the live loop).

What a learned model predicts (the load, or a correction to a persistence forecast) and how
the constrained network keeps its floor are the business of :mod:`~.fitting`. Stability
certificates are computed for every SCNN-family fit (``certify="all"``), for the published
forecast only (``"published"``), or not at all.
"""

from __future__ import annotations

import functools
import time
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import date, timedelta
from typing import Any

import numpy as np
import pandas as pd

from tasks.protocol.certification import certify_fit
from tasks.protocol.config import ForecastConfig, base_members
from tasks.protocol.features import (
    CHANGE_SUFFIX,
    ISSUED_BASE,
    LABEL,
    TS,
    WEATHER_COLUMNS,
    build_features,
)
from tasks.protocol.fitting import RELAXATION_OF, Fitter, WindowPart, base_name
from tasks.protocol.intervals import Intervals, age_weights, conformal_intervals
from tasks.protocol.models import MODELS
from tasks.protocol.publication import (
    Candidate,
    Publication,
    choose_publication,
    member_problem,
    publish_certified,
)
from tasks.protocol.scoring import Scores, mean_absolute, score_forecast
from tasks.protocol.seeding import stable_seed
from tasks.protocol.track_record import TrackRecord, adapted_levels, recent_errors, track_ratio
from tasks.protocol.tuning import TrialRecord, TuningFailedError, tune_together
from tasks.protocol.windows import (
    MIN_VALIDATION_HOURS,
    Window,
    WindowBounds,
    build_window,
    window_load_range,
)


@dataclass(frozen=True)
class StoredParams:
    """Best hyperparameters found for a (building, model) by the tuning of ``tuned_week``."""

    params: dict[str, Any]
    tuned_week: date


@dataclass(frozen=True)
class IssuedForecast:
    """A model's forecast of an earlier week as it was issued: its hyperparameters and its
    hourly load forecast, ``y_hat[i]`` for the hour starting ``hours[i]`` (microseconds since
    the epoch, ascending). Plain arrays: a batch's jobs carry one per model to a worker
    process, where a series with a time-zone-aware index costs far more to send."""

    params: dict[str, Any]
    hours: np.ndarray
    y_hat: np.ndarray
    level_shift: float = 0.0
    """kWh the model's level correction added to every hour of it (:attr:`ModelOutcome.
    level_shift`): the model's own forecast was ``y_hat - level_shift``."""

    @classmethod
    def from_series(cls, params: dict[str, Any], y_hat: pd.Series,
                    level_shift: float = 0.0) -> IssuedForecast:
        """From a forecast indexed by its hours."""
        y_hat = y_hat.sort_index()
        return cls(params, epoch_us(y_hat.index), y_hat.to_numpy(dtype=np.float64),
                   level_shift)

    def at(self, ts: pd.DatetimeIndex) -> np.ndarray:
        """The forecast at the hours ``ts``; NaN at an hour it does not cover."""
        wanted = epoch_us(ts)
        if not len(self.hours):
            return np.full(len(wanted), np.nan)
        found = np.searchsorted(self.hours, wanted).clip(max=len(self.hours) - 1)
        return np.where(self.hours[found] == wanted, self.y_hat[found], np.nan)


def epoch_us(ts: Any) -> np.ndarray:
    """Time-zone-aware instants as integer microseconds since the epoch (DuckDB's resolution)."""
    return pd.DatetimeIndex(ts).tz_convert("UTC").as_unit("us").asi8


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
    validation_errors: pd.Series | None = None
    """Actual minus forecast of the validation week by UTC hour (kWh; the validation forecast
    is the actual minus these): what the intervals and a combination of models are made of."""
    level_shift: float = 0.0
    """kWh added to every hour of the forecast by the model's level correction (a share of the
    median of ``validation_errors``, which are the model's own, before any shift)."""
    base: str | None = None
    """What a residual target corrected: a base model's issued forecasts or a persistence
    forecast, by model name (None: the load itself was the target)."""
    members: tuple[str, ...] = ()
    """A combination's members that week (the models it combined)."""
    recent: IssuedForecast | None = None
    """A base model's out-of-sample forecasts of its history's last weeks, made in this run
    where its record of issued forecasts does not cover a stacked model's window
    (:data:`BASE_WEEKS`)."""
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
    left_out: dict[str, str] = field(default_factory=dict)
    """Weather inputs the window left out of this week's features, each with why
    (:attr:`~tasks.protocol.windows.Window.left_out`)."""
    compute_time_s: float | None = None
    """CPU seconds of the thread that ran the protocol for this building-week (features, every
    model's tuning, fits, certificates, scoring); None when it failed before running."""

    @property
    def n_failed_models(self) -> int:
        return sum(o.status != "ok" for o in self.outcomes)


def _errors(validation: WindowPart, forecast: np.ndarray) -> pd.Series:
    """Validation errors (kWh, actual minus forecast) by UTC hour, where the forecast exists."""
    errors = pd.Series(validation.load - np.asarray(forecast, dtype=float), index=validation.ts)
    return errors[np.isfinite(errors.to_numpy())]


def _issued_errors(issued: IssuedForecast | None, params: Mapping[str, Any],
                   validation: WindowPart) -> pd.Series | None:
    """Validation errors of the forecast issued for the validation week (the model's own, its
    level shift taken back out), when it was made with ``params`` and covers enough of the
    week's rows; else None (the model is fitted again)."""
    if issued is None or dict(issued.params) != dict(params) or not len(validation.load):
        return None
    y_hat = issued.at(validation.ts)
    if np.isfinite(y_hat).sum() < ISSUED_MIN_SHARE * len(y_hat):
        return None
    return _errors(validation, y_hat - issued.level_shift)


def _quantiles(name: str, y_hat: np.ndarray, errors: np.ndarray, errors_ts: Any,
               target_ts: Any, record: TrackRecord | None, config: ForecastConfig,
               floor: float = 0.0) -> Intervals:
    """A model's quantiles of the target week: weighted split-conformal from its validation
    week's ``errors`` (at the UTC hours ``errors_ts``) pooled with its errors in its last
    ``config.quantile_record_weeks`` scored weeks (a week's sample misses the tails of the next),
    an error weighing less the older it is (``config.quantile_halflife_weeks``: a changed
    building's quantiles follow it) and each level shifted by ``config.quantile_adaptation_gain``
    of what it missed (:mod:`~tasks.protocol.intervals`)."""
    hours, past = recent_errors(name, record, config.quantile_record_weeks)
    calibration = np.concatenate([np.asarray(errors, dtype=float), past])
    calibration_ts = pd.DatetimeIndex(errors_ts).append(pd.DatetimeIndex(
        pd.to_datetime(hours, unit="us", utc=True)))
    target_ts = pd.DatetimeIndex(target_ts)
    weights = (age_weights(calibration_ts, target_ts.min(), config.quantile_halflife_weeks)
               if len(target_ts) else None)
    return conformal_intervals(
        y_hat, calibration, floor=floor, scale=config.quantile_scale,
        levels=adapted_levels(name, record, gain=config.quantile_adaptation_gain),
        calibration_ts=calibration_ts, target_ts=target_ts, weights=weights)


def _persistence_outcome(name: str, window: Window, record: TrackRecord | None,
                         config: ForecastConfig) -> ModelOutcome:
    """A persistence forecast (seasonal naive, day-type naive), its quantiles from its
    validation week and record (:func:`_quantiles`)."""
    column = MODELS[name].persistence
    _, y_test = window.xy("test")
    y_hat = window.test[column].to_numpy(dtype=np.float64)
    if not np.isfinite(y_hat).any():
        return ModelOutcome(model=name, status="failed", n_train=len(window.train),
                            error="no load at the same hours in the last four weeks")
    calibration = window.validation if len(window.validation) else window.history
    errors = (calibration[LABEL] - calibration[column]).to_numpy(dtype=np.float64)
    intervals = _quantiles(name, y_hat, errors, calibration[TS], window.test[TS], record, config)
    scored = np.isfinite(errors)
    return ModelOutcome(
        model=name, status="ok", params={}, tuned_week=window.week, y_hat=y_hat,
        intervals=intervals, scores=score_forecast(y_test, y_hat, intervals=intervals),
        validation_mae=mean_absolute(errors[scored]),
        validation_errors=pd.Series(errors[scored],
                                    index=pd.DatetimeIndex(calibration[TS])[scored]),
        n_train=len(window.train),
    )


def _tuning_groups(names: list[str], config: ForecastConfig,
                   stored: Mapping[str, StoredParams]) -> list[tuple[str, ...]]:
    """The studies to run: one per model needing tuning, the SCNN family's two networks in one
    study under joint tuning (the constrained one, the product's, guiding it)."""
    needing = [n for n in names if config.tuning != "reuse" or stored.get(n) is None]
    groups = [(n,) for n in needing]
    if config.scnn_tuning == "joint":
        for model, relaxed in RELAXATION_OF.items():
            if model in names and relaxed in names and (model in needing or relaxed in needing):
                groups = [g for g in groups if g[0] not in (model, relaxed)]
                groups.append((model, relaxed))
    return groups


def _tune_group(group: tuple[str, ...], fitter: Fitter, building_id: str,
                outcomes: Mapping[str, ModelOutcome],
                earlier: Mapping[str, StoredParams]) -> dict[str, pd.Series]:
    """Tune ``group`` on the fit weeks against the validation week, warm-started from the
    models' ``earlier`` tunings when the run says so; fill each model's tuning fields and
    return each tuned model's validation errors (kWh)."""
    validation = fitter.parts["validation"]
    spent: dict[str, float] = dict.fromkeys(group, 0.0)

    def evaluate(params: dict[str, Any]) -> dict[str, np.ndarray | BaseException]:
        out: dict[str, np.ndarray | BaseException] = {}
        for name in fitter.fit_order(list(group)):
            started = time.thread_time()
            try:
                model = fitter.fit(name, "fit", params, forecasts="validation",
                                   sample_every=fitter.config.tuning_sample_every, trial=True)
                out[name] = fitter.predict(name, model, "validation")
            except Exception as exc:  # noqa: BLE001 - a failed trial is recorded, tuning goes on
                out[name] = exc
            spent[name] += time.thread_time() - started
        return out

    study = group[0] if len(group) == 1 else "scnn_family"
    started = time.thread_time()
    try:
        start_from = [earlier[m].params for m in group if m in earlier]
        results = tune_together(
            evaluate, group, fitter.config.search_space(group[0]), validation.target,
            n_trials=fitter.config.trials, seed=stable_seed(building_id, fitter.window.week, study),
            start_from=start_from if fitter.config.warm_start else ())
    except TuningFailedError as exc:  # the only model of its study
        results = {group[0]: exc}
    overhead = time.thread_time() - started - sum(spent.values())
    errors = {}
    for model, result in results.items():
        outcome = outcomes[model]
        outcome.tuning_time_s = spent[model] + (overhead if model == group[0] else 0.0)
        if isinstance(result, TuningFailedError):
            outcome.trials, outcome.error = result.trials, f"tuning failed: {result}"
            continue
        outcome.trials = result.trials
        outcome.params, outcome.tuned_week = result.best_params, fitter.window.week
        outcome.validation_source = "tuning"
        errors[model] = _errors(validation, validation.to_load(result.best_prediction))
    return errors


def _reused_errors(name: str, fitter: Fitter, stored: StoredParams,
                   issued: IssuedForecast | None, outcome: ModelOutcome) -> pd.Series:
    """Validation errors of a model refitted with stored hyperparameters: those of the forecast
    it issued for the validation week when it may stand in, else of a fit on the fit weeks."""
    validation = fitter.parts["validation"]
    outcome.params, outcome.tuned_week = dict(stored.params), stored.tuned_week
    errors = _issued_errors(issued, outcome.params, validation)
    outcome.validation_source = "issued"
    if errors is None:
        model = fitter.fit(name, "fit", outcome.params, forecasts="validation",
                           sample_every=fitter.config.fit_sample_every)
        errors = _errors(validation, validation.to_load(fitter.predict(name, model, "validation")))
        outcome.validation_source = "refit"
    return errors


def _forecast(name: str, fitter: Fitter, errors: pd.Series, outcome: ModelOutcome,
              record: TrackRecord | None) -> Any:
    """Refit on the whole history, forecast the target week with intervals, score; returns the
    fitted model."""
    train, test = fitter.parts["train"], fitter.parts["test"]
    started = time.thread_time()
    model = fitter.fit(name, "train", outcome.params, forecasts="test",
                       sample_every=fitter.config.fit_sample_every)
    outcome.fit_time_s = time.thread_time() - started
    outcome.validation_errors = errors
    outcome.validation_mae = mean_absolute(errors)
    outcome.y_hat = test.to_load(fitter.predict(name, model, "test"))
    floor = MODELS[name].load_floor
    share = fitter.config.level_correction_of(name)
    if share and len(errors):
        outcome.level_shift = share * float(np.median(errors.to_numpy()))
        outcome.y_hat = outcome.y_hat + outcome.level_shift
        if floor is not None:
            outcome.y_hat = np.fmax(outcome.y_hat, floor)  # the floor holds after the shift
    outcome.intervals = _quantiles(name, outcome.y_hat, errors.to_numpy() - outcome.level_shift,
                                   errors.index, test.ts, record, fitter.config,
                                   floor=0.0 if floor is None else floor)
    # a model projected onto its floor breaks it on no training row: no need to predict them
    outcome.scores = score_forecast(
        test.load, outcome.y_hat,
        train_prediction=None if fitter.projects(name) else train.to_load(
            fitter.predict(name, model, "train")),
        intervals=outcome.intervals,
    )
    # solver facts an estimator exposes (the SCNN family); None for the baselines
    outcome.solver = getattr(model, "solver_name_", None)
    outcome.solver_status = getattr(model, "solver_status_", None)
    objective = getattr(model, "objective_", None)
    outcome.objective = None if objective is None else float(objective)
    outcome.status = "ok"
    return model


def _learned_outcomes(
    names: list[str], window: Window, config: ForecastConfig, building_id: str,
    stored: Mapping[str, StoredParams], record: TrackRecord | None,
    issued: Mapping[str, IssuedForecast], earlier: Mapping[str, StoredParams],
    in_run_base: frozenset[str] = frozenset(),
) -> tuple[dict[str, ModelOutcome], dict[str, Any]]:
    """Every learned model's outcome, and the fitted models (for certificates). ``stored`` is
    the tuning to reuse; ``earlier`` every model's latest tuning, however old (a warm start);
    a base model among ``in_run_base`` also forecasts its history's last weeks out of sample
    (:attr:`ModelOutcome.recent`)."""
    fitter = Fitter(window, config)
    n_train = len(fitter.parts["train"].target)
    outcomes = {n: ModelOutcome(model=n, status="failed", n_train=n_train,
                                base=base_name(config)) for n in names}
    errors: dict[str, pd.Series] = {}
    groups = _tuning_groups(names, config, stored)
    for group in groups:
        errors.update(_tune_group(group, fitter, building_id, outcomes, earlier))
    tuned = {n for group in groups for n in group}
    for name in fitter.fit_order([n for n in names if n not in tuned]):
        try:
            errors[name] = _reused_errors(name, fitter, stored[name], issued.get(name),
                                          outcomes[name])
        except Exception as exc:  # noqa: BLE001 - recorded, the other models go on
            outcomes[name].error = f"{type(exc).__name__}: {exc}"
    fitted: dict[str, Any] = {}
    for name in fitter.fit_order([n for n in names if n in errors]):
        try:
            fitted[name] = _forecast(name, fitter, errors[name], outcomes[name], record)
            made = (fitter.out_of_sample(name, outcomes[name].params, BASE_WEEKS)
                    if name in in_run_base else None)
            if made is not None:
                outcomes[name].recent = IssuedForecast({}, epoch_us(made[0]), made[1])
        except Exception as exc:  # noqa: BLE001 - recorded, the other models go on
            outcomes[name].error = f"{type(exc).__name__}: {exc}"  # its status stays failed
    return outcomes, fitted


def _certify(outcome: ModelOutcome, model: Any, window: Window, config: ForecastConfig) -> None:
    """Record ``model``'s stability certificate and out-of-sample bound (SCNN family only)."""
    if config.certify_nodes == 0:
        return
    certificate = certify_fit(model, window.feature_columns, config.perturbation,
                              config.certify_nodes, config.certificate)
    if certificate is not None:
        outcome.l_eps, outcome.l_eps_lower = certificate.l_eps, certificate.l_eps_lower
        outcome.l_eps_status = certificate.l_eps_status
        outcome.oos_bound_kwh = certificate.oos_bound_kwh
        outcome.certify_time_s = certificate.certify_time_s


@dataclass(frozen=True)
class _Week:
    """What the publication step knows of the target week: its forecastable hours and the
    largest share of its hours any weather input the models read had filled in."""

    forecastable: np.ndarray
    weather_filled: float
    weather_read: bool


def _week(window: Window) -> _Week:
    hours = window.coverage["test"].hours
    filled = max(window.test_weather_filled.values(), default=0)
    return _Week(
        forecastable=window.test[list(window.feature_columns)].notna().all(axis=1).to_numpy(),
        weather_filled=filled / hours if hours else 0.0,
        weather_read=any(column in WEATHER_COLUMNS or column.endswith(CHANGE_SUFFIX)
                         for column in window.feature_columns),
    )


def _candidate(outcome: ModelOutcome, week: _Week) -> Candidate:
    return Candidate(
        model=outcome.model, y_hat=outcome.y_hat, validation_mae=outcome.validation_mae,
        solver_status=outcome.solver_status,
        failed=outcome.error if outcome.status != "ok" else None,
        l_eps=outcome.l_eps, l_eps_status=outcome.l_eps_status,
        reads_weather=week.weather_read and MODELS[outcome.model].is_learned)


MIN_LEARNED_MEMBERS = 2
"""A combination is formed only from at least this many trusted learned members: with fewer it
would be a persistence forecast (or one model) under another name."""


def ensemble_weights(members: Sequence[str], record: TrackRecord | None,
                     config: ForecastConfig) -> np.ndarray:
    """Each member's weight in the ensemble, summing to 1: equal under ``median`` (which takes
    no weights), else its mean MAE relative to seasonal naive over the building's last
    ``ensemble_record_weeks`` scored weeks to the power ``-ensemble_power`` (1.0 for a member
    without two such weeks), normalised. Learned from the building's record of issued
    forecasts, known when the week is issued."""
    if config.ensemble_method == "median":
        return np.full(len(members), 1.0 / len(members))
    tracks = (track_ratio(m, record or {}, config.ensemble_record_weeks) for m in members)
    return inverse_error_weights([t[0] if t is not None else 1.0 for t in tracks],
                                 config.ensemble_power)


def inverse_error_weights(ratios: Sequence[float], power: float) -> np.ndarray:
    """Weights summing to 1 from each member's error ratio (floored at 1e-3) to ``-power``."""
    weights = np.maximum(np.asarray(ratios, dtype=float), 1e-3) ** -power
    return weights / weights.sum()


def combine_members(forecasts: np.ndarray, weights: np.ndarray, method: str) -> np.ndarray:
    """The hourly combination of ``forecasts`` (members x hours; NaN: a member without that
    hour): their median, or their weighted mean over the members that forecast the hour."""
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # an hour no member forecasts: NaN
        if method == "median":
            return np.nanmedian(forecasts, axis=0)
        present = np.isfinite(forecasts)
        weighted = np.where(present, forecasts, 0.0) * weights[:, None]
        return weighted.sum(axis=0) / np.where(present, weights[:, None], 0.0).sum(axis=0)


def _ensemble_outcome(name: str, window: Window, week: _Week, outcomes: list[ModelOutcome],
                      config: ForecastConfig, record: TrackRecord | None) -> ModelOutcome:
    """The hourly combination (:data:`~tasks.protocol.config.ForecastConfig.
    ensemble_method`) of the run's ensemble members that can be trusted this week (the
    publication's checks, negative hours aside: the combination is clipped at zero), and of
    their validation forecasts, which calibrate its intervals. It needs at least
    :data:`MIN_LEARNED_MEMBERS` trusted learned members, and fails when its forecast is a
    persistence member's own (then that persistence forecast stands for itself)."""
    members = [o for o in outcomes if o.model in config.members
               and member_problem(_candidate(o, week), week.forecastable,
                                  week.weather_filled) is None
               and o.validation_errors is not None]
    outcome = ModelOutcome(model=name, status="failed", n_train=len(window.train),
                           members=tuple(o.model for o in members))
    learned = [o.model for o in members if MODELS[o.model].is_learned]
    if len(learned) < MIN_LEARNED_MEMBERS:
        outcome.error = (f"fewer than {MIN_LEARNED_MEMBERS} trusted learned members to "
                         f"combine ({', '.join(learned) or 'none'})")
        return outcome
    weights = ensemble_weights([o.model for o in members], record, config)
    y_hat = np.fmax(combine_members(np.vstack([o.y_hat for o in members]), weights,
                                    config.ensemble_method), 0.0)
    for member in members:
        if MODELS[member.model].persistence is not None and np.array_equal(
                y_hat[week.forecastable], member.y_hat[week.forecastable], equal_nan=True):
            outcome.error = f"its forecast is {member.model}'s own"
            return outcome
    actual = window.history.set_index(TS)[LABEL].astype(float)
    forecasts = pd.concat([actual.reindex(o.validation_errors.index) - o.validation_errors
                           for o in members], axis=1)
    combined = combine_members(forecasts.to_numpy().T, weights, config.ensemble_method)
    errors = (actual.reindex(forecasts.index) - combined).dropna()
    _, y_test = window.xy("test")
    outcome.intervals = _quantiles(name, y_hat, errors.to_numpy(), errors.index,
                                   window.test[TS], record, config)
    outcome.scores = score_forecast(y_test, y_hat, intervals=outcome.intervals)
    outcome.y_hat, outcome.validation_errors = y_hat, errors
    outcome.validation_mae = mean_absolute(errors)
    outcome.params, outcome.tuned_week, outcome.status = {}, window.week, "ok"
    outcome.solver = ("median of " + ", ".join(o.model for o in members)
                      if config.ensemble_method == "median" else "weighted mean of " + ", ".join(
                          f"{o.model} {w:.2f}" for o, w in zip(members, weights, strict=True)))
    return outcome


def _model_window(hours: pd.DataFrame, week: date, config: ForecastConfig,
                  calendar: Mapping[str, Any], built: dict[tuple, pd.DataFrame],
                  like: ForecastConfig | None = None,
                  base: IssuedForecast | None = None, missing_load_ok: bool = False) -> Window:
    """The window of ``week`` as ``config`` fits its models: its features and weeks of history,
    and, when a residual target corrects a base model, that model's forecasts as issued
    (``base``, by hour). A window of more history than the run's (``like``) asks of it only the
    run's fit hours, so a building with less history than that still feeds a model that trains
    on a longer one. ``built`` keeps the features already built this building-week by feature
    set and history, so models that differ only in their base, trials or sampling share them.
    ``missing_load_ok``: the window's models take missing inputs, so a load lag missing over a
    gap in the readings costs them nothing (:func:`build_window`)."""
    key = (config.feature_set, config.history_weeks, config.closure_periods)
    if key not in built:
        built[key] = build_features(
            _window_hours(hours, week, calendar["timezone"], config), **calendar,
            feature_set=config.feature_set, closure_periods=config.closure_periods)
    features = built[key]
    if base is not None:
        features = features.assign(**{ISSUED_BASE: base.at(features[TS])})
    fit_share = 0.5
    if like is not None and config.history_weeks > like.history_weeks:
        fit_share *= (like.history_weeks - 1) / (config.history_weeks - 1)
    return build_window(features, week, calendar["timezone"], feature_set=config.feature_set,
                        history_weeks=config.history_weeks, min_fit_fraction=fit_share,
                        missing_load_ok=missing_load_ok)


BASE_WEEKS = 4
"""Where a base model's issued forecasts do not cover a stacked model's window
(:data:`MIN_BASE_HOURS`: a new building, a backfill of weeks apart, a run's first weeks), the
base model forecasts the last 4 weeks of its history out of sample in the run itself, from a fit
on the weeks before them (:meth:`~.fitting.Fitter.out_of_sample`), and the stacked model corrects
those: on 10 buildings' every 4th Monday of 2016 / 2017 (cold, docs/benchmarks.md) the
constrained network 1.020 / 0.891 (the persistence forecast corrected) -> 0.934 / 0.679, against
0.954 / 0.676 with the last 12 weeks."""

MIN_BASE_HOURS = {"fit": 168, "validation": MIN_VALIDATION_HOURS}
"""A model stacked on a base model's issued forecasts needs them for at least this many usable
hours of its fit weeks (a week of the base's errors to learn a correction from) and of its
validation week (to tune on, as a window needs); with fewer the base's forecasts made in the run
stand in (:data:`BASE_WEEKS`), and without those (a base model that failed, a history shorter
than four weeks) it corrects the persistence forecast that week."""


def _window_groups(config: ForecastConfig, learned: list[str]
                   ) -> list[tuple[ForecastConfig, list[str], bool]]:
    """The run's learned models by the window they are fitted on: their inputs (base models
    before their users, :meth:`ForecastConfig.input_groups`), and, on a window of their own,
    whether they take missing inputs (:attr:`ModelSpec.allows_missing`)."""
    groups = []
    for inputs, models in config.input_groups(learned):
        split = {False: models} if inputs is config else {
            ok: [m for m in models if MODELS[m].allows_missing is ok] for ok in (True, False)}
        groups.extend((inputs, names, ok) for ok, names in split.items() if names)
    return groups


def _issued_base(base: str, outcomes: Mapping[str, ModelOutcome],
                 issued_history: Mapping[str, IssuedForecast],
                 test_ts: pd.Series) -> IssuedForecast | None:
    """The base's forecasts by hour: as issued for the history's weeks, and its forecast of the
    target week as it is issued now; a base of several models (``gbr+gbr_lags``) is their mean
    at the hours all of them forecast. None when one of them has no forecast this week."""
    members = [_issued_member(model, outcomes, issued_history, test_ts)
               for model in base_members(base)]
    if any(member is None for member in members):
        return None
    if len(members) == 1:
        return members[0]
    hours = functools.reduce(np.intersect1d, [member.hours for member in members])
    return IssuedForecast({}, hours, np.mean(
        [member.y_hat[np.searchsorted(member.hours, hours)] for member in members], axis=0))


def _issued_member(model: str, outcomes: Mapping[str, ModelOutcome],
                   issued_history: Mapping[str, IssuedForecast],
                   test_ts: pd.Series) -> IssuedForecast | None:
    """``model``'s forecasts by hour: as issued for the history's weeks, and its forecast of
    the target week as it is issued now (None when it has none this week)."""
    current = outcomes.get(model)
    if current is None or current.status != "ok" or current.y_hat is None:
        return None
    now = IssuedForecast.from_series({}, pd.Series(current.y_hat,
                                                   index=pd.DatetimeIndex(test_ts)))
    before = current.recent or issued_history.get(model)
    if before is None:
        return now
    keep = before.hours < now.hours.min() if len(now.hours) else np.ones(len(before.hours), bool)
    return IssuedForecast({}, np.concatenate([before.hours[keep], now.hours]),
                          np.concatenate([before.y_hat[keep], now.y_hat]))


def _record_covers(issued: IssuedForecast | None, bounds: WindowBounds) -> bool:
    """Whether a base model's issued forecasts cover the hours of a window (``bounds``) that a
    model stacked on it needs (:data:`MIN_BASE_HOURS`)."""
    return issued is not None and all(
        np.count_nonzero((issued.hours >= epoch_us([start])[0])
                         & (issued.hours < epoch_us([end])[0])) >= need
        for start, end, need in ((*bounds.part(part), need)
                                 for part, need in MIN_BASE_HOURS.items()))


def _base_covers(window: Window) -> bool:
    """Whether the issued base covers enough of the window's history (:data:`MIN_BASE_HOURS`)."""
    return all(
        ISSUED_BASE in (rows := getattr(window, part)).columns
        and int(np.isfinite(rows[ISSUED_BASE].to_numpy(dtype=float)).sum()) >= need
        for part, need in MIN_BASE_HOURS.items())


def _window_hours(hours: pd.DataFrame, week: date, timezone: str,
                  config: ForecastConfig) -> pd.DataFrame:
    """The rows of ``hours`` the window and its features read (a backfill's frame spans every
    week of the batch; building features over all of it for each week would cost weeks
    squared)."""
    start, end = window_load_range(week, timezone, history_weeks=config.history_weeks,
                                   feature_set=config.feature_set)
    ts = pd.DatetimeIndex(hours[TS]) if TS in hours.columns else None
    if ts is None or ts.tz is None:
        return hours  # build_features names what is wrong with it
    slack = pd.Timedelta(days=1)
    keep = (ts >= start - slack) & (ts < end + slack)
    return hours if keep.all() else hours.loc[keep]


WEATHER_KIND = "weather_kind"
"""The hourly frame's column saying where an hour's weather came from (``observed`` or
``forecast``; :mod:`~tasks.warehouse.hours`)."""


def target_week_weather_sources(
    hours: pd.DataFrame, bounds: WindowBounds, inputs: tuple[str, ...] = WEATHER_COLUMNS,
) -> dict[str, int | str | None]:
    """Which weather the target week's hours used: hours with every weather input of
    ``inputs`` (those the window kept) stored whose row is an observation, those whose row is a
    forecast, and the week's source, ``observed``, ``forecast``, ``mixed`` or None (neither:
    every hour was filled or is missing).

    Counts are None when the frame does not say where its weather came from.
    """
    if WEATHER_KIND not in hours.columns:
        return {"n_test_weather_observed": None, "n_test_weather_forecast": None,
                "weather_source": None}
    ts = pd.DatetimeIndex(hours[TS]).tz_convert("UTC")
    start, end = bounds.part("test")
    in_test = (ts >= start) & (ts < end)
    present = hours[list(inputs)].notna().all(axis=1).to_numpy()
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
    issued_history: Mapping[str, IssuedForecast] | None = None,
) -> BuildingWeekResult:
    """Run the protocol for one building and target week on its hourly frame.

    ``hours`` is the building's hourly frame
    (:func:`~tasks.warehouse.hours.load_building_hours_by_id`) covering at least the
    window and the feature set's lookback. ``stored_params`` holds the
    latest tuning results per model: ``--tuning reuse`` refits with them; entries older than
    ``config.reuse_max_age_weeks`` are not reused (the model is tuned again, starting from them
    when ``config.warm_start``). ``track_record`` is
    how the models did in the building's earlier weeks: the publication step weighs it, and
    the intervals adapt their level to the coverage it shows. ``issued`` holds each model's
    forecast issued for the week before ``week`` (the validation week); under ``--tuning
    reuse`` it replaces the validation fit where its hyperparameters are the ones reused.
    ``issued_history`` holds, per base model (:attr:`ForecastConfig.base_model`), its forecasts
    as issued for the weeks of the history: what the models stacked on it correct. Where they
    cover less than a week of the fit weeks and the validation week (a new building, a backfill
    of weeks apart), the base model's out-of-sample forecasts of the last weeks, made in this
    run, stand in (:data:`BASE_WEEKS`).

    When the window cannot feed the learned models (too little history, no weather), only the
    persistence models run, so the week still gets a forecast whenever last week's load exists.
    """
    started = time.thread_time()  # this thread's CPU: right under the threads runner too
    calendar = {"timezone": timezone, "holiday_country": holiday_country,
                "holiday_subdiv": holiday_subdiv}
    built: dict[tuple, pd.DataFrame] = {}
    window = _model_window(hours, week, config, calendar, built)
    coverage = {
        "n_train_hours": window.coverage["train"].hours,
        "n_train_labelled": window.coverage["train"].labelled,
        "n_test_hours": window.coverage["test"].hours,
        "n_test_labelled": window.coverage["test"].labelled,
        **target_week_weather_sources(
            hours, window.bounds,
            tuple(c for c in window.feature_columns if c in WEATHER_COLUMNS) or WEATHER_COLUMNS),
    }
    result = BuildingWeekResult(
        building_id=building_id, week=window.week, status=str(window.status),
        reason=window.reason, coverage=coverage, test_ts=window.test[TS],
        left_out=dict(window.left_out),
    )
    max_age = timedelta(weeks=config.reuse_max_age_weeks)
    earlier = {name: params for name, params in (stored_params or {}).items()
               if params is not None and params.tuned_week < window.week}
    stored = {name: params for name, params in earlier.items()
              if window.week - params.tuned_week <= max_age}
    learned = [n for n in config.models if MODELS[n].is_learned] if window.ok else []
    in_run_base = frozenset(m for m in config.base_models
                            if not _record_covers((issued_history or {}).get(m), window.bounds))
    outcomes: dict[str, ModelOutcome] = {}
    fitted: dict[str, tuple[Any, Window]] = {}
    for inputs, models, missing_ok in _window_groups(config, learned):
        base = None
        if inputs.base_model is not None:
            base = _issued_base(inputs.base_model, outcomes, issued_history or {},
                                window.test[TS])
            if base is None:  # no forecast of it this week: the persistence forecast is the base
                inputs = inputs.model_copy(update={"base_model": None})
        own = window if inputs is config else _model_window(
            hours, week, inputs, calendar, built, like=config, base=base,
            missing_load_ok=missing_ok)
        if not own.ok:  # said, not dropped: a model asked for that could not run
            outcomes.update({name: ModelOutcome(
                model=name, status="failed", n_train=len(own.train),
                error=f"its own window ({inputs.history_weeks} weeks, feature set "
                      f"{inputs.feature_set}) cannot be used: {own.reason}")
                for name in models})
            continue
        if base is not None and not _base_covers(own):
            inputs = inputs.model_copy(update={"base_model": None})
        # a forecast issued with every input is not the forecast of a model without some
        standing_in = {} if own.left_out else (issued or {})
        done, models_fitted = _learned_outcomes(models, own, inputs, building_id, stored,
                                                track_record, standing_in, earlier, in_run_base)
        outcomes.update(done)
        fitted.update({name: (model, own) for name, model in models_fitted.items()})
    for name in config.models:
        if MODELS[name].is_learned:
            if name in outcomes:
                result.outcomes.append(outcomes[name])
        elif MODELS[name].persistence is not None:
            result.outcomes.append(_persistence_outcome(name, window, track_record, config))
    week_known = _week(window)
    for name in config.models:  # combinations, once what they combine is known
        if MODELS[name].combination:
            result.outcomes.append(_ensemble_outcome(name, window, week_known, result.outcomes,
                                                     config, track_record))
    if config.certify == "all":
        for name, (model, own) in fitted.items():
            _certify(outcomes[name], model, own, config)

    combination = next((n for n in config.models if MODELS[n].combination), None)

    def choose() -> Publication | None:
        return choose_publication(
            [_candidate(o, week_known) for o in result.outcomes], week_known.forecastable,
            track_record, config.max_l_eps, week_known.weather_filled,
            config.publication_weighting, config.record_weeks,
            learned_in_run=any(MODELS[n].is_learned for n in config.models),
            prefer=combination if config.publication == "combination" else None)

    if config.certify == "published" and config.certify_nodes > 0:
        result.publication = publish_certified(
            choose, lambda name: _certify(outcomes[name], *fitted[name], config),
            certifiable={name for name, (model, _) in fitted.items()
                         if hasattr(model, "gates_")},
            required=config.max_l_eps is not None)
    else:
        result.publication = choose()
    combined = next((o.members for o in result.outcomes
                     if MODELS[o.model].combination and o.status == "ok"), ())
    if result.publication is not None and combined:
        result.publication = replace(result.publication, ensemble_members=combined)
    result.compute_time_s = time.thread_time() - started
    return result
