"""How a learned model is fitted on the parts of a window, in the units of its target.

A learned model predicts either the load itself (``target="load"``, the paper) or the
correction to a persistence forecast (``target="residual"``: load = base + r, the base being last
week's load or the holiday-aware persistence, ``--persistence``). A model with a physical floor
(``wadiro_pcscnn``: no negative load) gets the per-sample lower bound ``r >= floor - base`` on its
training rows, inside its program (the paper). Beyond its training rows the floor holds as the run
says (``target_week_floor``): ``projection`` projects every forecast onto it (the forecast of an
hour is ``max(floor, base + r)``: zero negative hours by construction, and no training row
moved); ``program`` adds the inputs of the week being forecast to the program as bound points
(its forecasts meet the floor, but a holiday week's unusual inputs can bend the whole fit);
``none`` leaves them alone (the paper).

Over the holiday-aware persistence (``persistence="day_type"``), a residual model's correction is
not applied on hours unlike last week (a holiday, a closure day, the workday after one: their day
type differs from the same hour a week earlier): it was learned on ordinary hours, and on 70 real
holiday and ordinary building-weeks of 2019 applying it there made every model worse than the
persistence forecast alone. Those hours get the persistence forecast (r = 0).

Under ``scnn_tuning="joint"`` a :class:`Fitter` shares work between the SCNN family's two
networks: a fit of the unconstrained network whose weights already meet the constrained one's
bounds is an optimum of the constrained program too (same objective, smaller feasible set), so
the constrained network takes it instead of solving again
(:meth:`wadiro_models.WaDiRoSCNN.fit`'s ``relaxation``).

Tuning's trials may fit every n-th hour of the fit weeks (``tuning_sample_every``): a trial only
ranks hyperparameters, and is scored on the whole validation week. The final fit may do the same
(``fit_sample_every``; the deployed protocol fits every second hour, as its hyperparameters were
tuned): its forecast still covers every hour, and a model with a floor keeps it on every training
row (the rows left out are bound points of its program). Sampling bounds a fit's cost by a full
history's, and no more (:func:`thinning`): a part with fewer usable hours than its weeks hold (a
new building, the archive's first year, gaps) is sampled less thinly.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import numpy as np
import pandas as pd

from tasks.protocol.config import ForecastConfig
from tasks.protocol.features import (
    DAY_TYPE_PERSISTENCE,
    ISSUED_BASE,
    PERSISTENCE,
    TS,
    UNLIKE_LAST_WEEK,
)
from tasks.protocol.models import MODELS
from tasks.protocol.weeks import local_midnight_utc
from tasks.protocol.windows import PARTS, Window

FORECAST_PARTS = ("validation", "test")
"""The parts a model forecasts (the others it is fitted on)."""

RELAXATION_OF: Mapping[str, str] = {"wadiro_pcscnn": "wadiro_scnn"}
"""Under joint SCNN tuning: model -> the model whose fit with the same hyperparameters is its
program's relaxation."""


@dataclass(frozen=True)
class WindowPart:
    """A window part as a learned model sees it: load = ``base`` + the model's target."""

    X: np.ndarray
    target: np.ndarray
    base: np.ndarray
    load: np.ndarray
    ts: pd.DatetimeIndex
    keep_base: np.ndarray
    """Rows whose forecast is the base itself, whatever the model predicts (hours unlike last
    week under the holiday-aware persistence; none otherwise)."""

    def to_load(self, prediction: np.ndarray) -> np.ndarray:
        return self.base + np.asarray(prediction, dtype=float)


def thinning(n_rows: int, part_hours: int, sample_every: int) -> int:
    """The step a fit on ``n_rows`` rows of a part spanning ``part_hours`` hours takes when the
    run fits every ``sample_every``-th hour: at most that, and no sparser than keeps as many rows
    as the whole part thinned would give. Thinning bounds a fit's cost by the cost of a full
    history; a short history (a new building, the archive's first year, a part with gaps) is
    fitted on more of its hours instead of on a handful."""
    if sample_every <= 1 or n_rows <= 0:
        return 1
    full_rows = math.ceil(part_hours / sample_every)
    return max(1, min(sample_every, math.ceil(n_rows / max(full_rows, 1))))


def _every(n_rows: int, n: int) -> np.ndarray:
    """Positions of every ``n``-th of ``n_rows`` rows, counted back from the latest."""
    return np.arange(n_rows - 1, -1, -max(n, 1))[::-1]


def _rows(rows: WindowPart, keep: np.ndarray) -> WindowPart:
    return WindowPart(rows.X[keep], rows.target[keep], rows.base[keep], rows.load[keep],
                      rows.ts[keep], rows.keep_base[keep])


def base_column(config: ForecastConfig) -> str:
    """The window column a residual target corrects: a model's issued forecasts when the run
    names a base model, else the persistence forecast it names."""
    if config.base_model is not None:
        return ISSUED_BASE
    return DAY_TYPE_PERSISTENCE if config.persistence == "day_type" else PERSISTENCE


def base_name(config: ForecastConfig) -> str | None:
    """What a residual target corrects, by model name (None: the load is the target)."""
    if config.target == "load":
        return None
    if config.base_model is not None:
        return config.base_model
    return "day_type_naive" if config.persistence == "day_type" else "seasonal_naive"


def window_part(window: Window, name: str, config: ForecastConfig) -> WindowPart:
    """Rows of part ``name`` in the target's units. For the residual target, history rows
    without a base value are left out; test rows are all kept (their forecast is NaN)."""
    X, load = window.xy(name)
    frame = getattr(window, name)
    ts = pd.DatetimeIndex(frame[TS])
    if config.target == "load":
        return WindowPart(X, load, np.zeros(len(load)), load, ts, np.zeros(len(load), bool))
    base = frame[base_column(config)].to_numpy(dtype=np.float64)
    unlike = np.zeros(len(base), dtype=bool)
    if (config.base_model is None and config.persistence == "day_type"
            and UNLIKE_LAST_WEEK in frame.columns):
        unlike = frame[UNLIKE_LAST_WEEK].to_numpy() == 1.0
    keep = np.isfinite(base) if name != "test" else np.ones(len(base), dtype=bool)
    return WindowPart(X[keep], (load - base)[keep], base[keep], load[keep], ts[keep],
                      unlike[keep])


@dataclass
class Fitter:
    """Fits the learned models of one window: each model's estimator with the run's fixed
    options, its floor on the training rows and, where the run asks, at the forecast rows."""

    window: Window
    config: ForecastConfig
    parts: dict[str, WindowPart] = field(init=False)
    hours: dict[str, int] = field(init=False)
    """Hours each part spans (its rows are the usable ones): what a sampled fit thins by."""
    _relaxations: dict[tuple, Any] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        self.parts = {name: window_part(self.window, name, self.config) for name in PARTS}
        self.hours = {name: self.window.coverage[name].hours for name in PARTS}

    def floor(self, model: str, part: str) -> np.ndarray | None:
        """The lowest value of ``model``'s target on ``part``'s rows (None: no floor)."""
        load_floor = MODELS[model].load_floor
        if load_floor is None:
            return None
        return load_floor - self.parts[part].base

    def fit(self, model: str, part: str, params: Mapping[str, Any], *, forecasts: str,
            sample_every: int = 1, trial: bool = False) -> Any:
        """``model`` fitted on ``part`` with ``params``, to forecast the part ``forecasts``;
        on every ``sample_every``-th row of ``part``, counted back from its latest.

        A model with a floor keeps it on every row of ``part``: the rows a sampled fit leaves
        out enter its program as bound points, unless it is a tuning ``trial`` (which only
        ranks hyperparameters, and is bounded on the rows it fits)."""
        spec = MODELS[model]
        whole = self.parts[part]
        sample_every = thinning(len(whole.target), self.hours[part], sample_every)
        picked = _every(len(whole.target), sample_every)
        rows = whole if len(picked) == len(whole.target) else _rows(whole, picked)
        extra: dict[str, Any] = {}
        in_program = spec.load_floor is not None and spec.floor_in_program
        if in_program:  # on the load itself, or per row on a residual
            extra["lower_bound"] = (spec.load_floor if self.config.target == "load"
                                    else spec.load_floor - rows.base)
        estimator = spec.estimator(**{**self.config.model_options.get(model, {}), **params,
                                      **extra})
        fit_args = self._bound_points(model, forecasts) if in_program else {}
        if in_program and not trial and rows is not whole:
            left_out = np.setdiff1d(np.arange(len(whole.target)), picked)
            _add_bound_points(fit_args, whole.X[left_out],
                              self.floor(model, part)[left_out])
        joint = self.config.scnn_tuning == "joint"
        key = (part, sample_every, tuple(sorted(params.items())))
        if joint and model in RELAXATION_OF:
            fit_args["relaxation"] = self._relaxations.get((RELAXATION_OF[model], *key))
        fitted = estimator.fit(rows.X, rows.target, **fit_args)
        if joint and model in RELAXATION_OF.values():
            self._relaxations[(model, *key)] = fitted
        return fitted

    def out_of_sample(self, model: str, params: Mapping[str, Any],
                      weeks: int) -> tuple[pd.DatetimeIndex, np.ndarray] | None:
        """``model``'s forecasts (kWh) of the history's rows of its last ``weeks`` weeks (at most
        the later half of the weeks its rows span; at least two), fitted with ``params`` on the
        weeks before them as a final fit is (part ``before``; those weeks are part ``recent``):
        no week's forecast saw that week's load, as none issued a week ahead did. None when the
        rows span fewer than four weeks."""
        train = self.parts["train"]
        if not len(train.ts):
            return None
        weeks = min(weeks, (self.window.bounds.test_start - train.ts.min()).days // 14)
        if weeks < 2:
            return None
        cut = local_midnight_utc(self.window.week - timedelta(weeks=weeks), self.window.timezone)
        before = np.asarray(train.ts < cut)
        self.parts["before"], self.parts["recent"] = _rows(train, before), _rows(train, ~before)
        self.hours["before"] = self.hours["train"] - 168 * weeks
        fitted = self.fit(model, "before", params, forecasts="recent",
                          sample_every=self.config.fit_sample_every)
        recent = self.parts["recent"]
        return recent.ts, recent.to_load(self.predict(model, fitted, "recent"))

    def _bound_points(self, model: str, forecasts: str) -> dict[str, Any]:
        """Fit arguments that keep ``model``'s floor at the inputs of the part it forecasts, when
        the run bounds it inside the program (their inputs are known when it is issued)."""
        floor = self.floor(model, forecasts)
        fit_args: dict[str, Any] = {}
        if floor is not None and self.config.target_week_floor == "program":
            _add_bound_points(fit_args, self.parts[forecasts].X, floor)
        return fit_args

    def predict(self, model: str, fitted: Any, part: str) -> np.ndarray:
        """``fitted``'s forecast of ``part`` in target units: a residual model's correction at
        its rate (:meth:`ForecastConfig.correction_rate_of`), zero (the base) where the part
        keeps its base, projected onto ``model``'s floor when the run projects, or always for
        a model that cannot hold its floor inside its fit. The training rows are predicted as
        fitted."""
        rows = self.parts[part]
        prediction = np.asarray(fitted.predict(rows.X), dtype=float)
        if part in FORECAST_PARTS:
            if self.config.target == "residual":
                prediction = self.config.correction_rate_of(model) * prediction
            prediction = np.where(rows.keep_base, 0.0, prediction)
        if self.projects(model):
            prediction = np.fmax(prediction, self.floor(model, part))  # NaN stays NaN
        return prediction

    def projects(self, model: str) -> bool:
        """Whether :meth:`predict` projects ``model``'s predictions of every part onto its
        floor (they never fall below it there)."""
        spec = MODELS[model]
        return spec.load_floor is not None and (self.config.target_week_floor == "projection"
                                                or not spec.floor_in_program)

    def fit_order(self, models: list[str]) -> list[str]:
        """``models`` with every relaxation before the model it serves."""
        first = [m for m in models if m in RELAXATION_OF.values()]
        return first + [m for m in models if m not in first]


def _add_bound_points(fit_args: dict[str, Any], X: np.ndarray, lower: np.ndarray) -> None:
    """Add the points ``X`` with lower bounds ``lower`` to a fit's bound points."""
    keep = np.isfinite(lower) & np.isfinite(X).all(axis=1)
    if not keep.any():
        return
    X, lower = X[keep], lower[keep]
    if "bound_X" in fit_args:
        X = np.vstack([fit_args["bound_X"], X])
        lower = np.concatenate([fit_args["bound_lower"], lower])
    fit_args["bound_X"], fit_args["bound_lower"] = X, lower
