"""What a forecasting run computes: every choice that changes its numbers, with its default.

:class:`ForecastConfig` is the one place these defaults are said, each in its field. A run's
settings hold it beside where and how the run goes (``flows.settings``), the
command line builds its options from its fields, and the ``runs`` table records it.

Two protocols are named (``protocol``), and a field left out takes its value from the chosen one
(:data:`PROTOCOLS`, preset configurations: :data:`DEPLOYED`, every field at its default, and
:data:`PAPER`):

* ``deployed`` (the default): the configuration that won ``benchmarks/forecast_quality.py``
  at the cost ``benchmarks/fleet_cost.py`` measures (README): the ``recent_change`` features, a
  residual target over the holiday-aware persistence forecast, the constrained network's
  forecast projected onto its floor, the SCNN family tuned in one study with at most 30 hidden
  units (on 50 real windows as accurate as up to 70, at half the CPU), 8 trials, tuning
  reused for up to ``reuse_max_age_weeks`` and warm-started from the last one, faster solvers
  for the baselines, the published forecast certified by the per-unit bound;
* ``paper``: the paper's own protocol, exactly as it ran before the deployed one existed: its
  eight features, the load as target, the physical bound on the training rows only, every
  model tuned on its own in every window (15 trials) and every SCNN-family fit certified by
  the exact MILP.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from types import MappingProxyType
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from tasks.protocol.certification import DEFAULT_PERTURBATION
from tasks.protocol.comma_lists import CommaList
from tasks.protocol.day_types import (
    DEFAULT_CLOSURE_PERIODS,
    parse_closure_periods,
)
from tasks.protocol.features import (
    FEATURE_SETS,
    FEATURES,
    get_feature_set,
)
from tasks.protocol.intervals import QuantileScale
from tasks.protocol.models import (
    BOOSTING_MODELS,
    DAY_TYPE_NAIVE,
    ENSEMBLE,
    MODEL_NAMES,
    MODELS,
    SEASONAL_NAIVE,
    check_model_names,
)
from wadiro_models.search_spaces import IntUniform

TuningMode = Literal["per-window", "reuse"]
Target = Literal["load", "residual"]
Protocol = Literal["deployed", "paper"]
Persistence = Literal["last_week", "day_type"]
TargetWeekFloor = Literal["projection", "program", "none"]
CertifyScope = Literal["published", "all", "none"]
CertificateKind = Literal["unit_bounds", "milp"]
PublicationWeighting = Literal["record", "validation"]
PublicationPolicy = Literal["choose", "combination"]
EnsembleMethod = Literal["median", "inverse_error"]
ScnnTuning = Literal["joint", "separate"]


def parse_perturbation(value: Mapping[str, Any] | Sequence[str]) -> dict[str, float]:
    """``{"temperature_c": 1}`` or ``["temperature_c=1", ...]`` (the command line's form) ->
    ``{"temperature_c": 1.0}``, names and radii checked."""
    if isinstance(value, str):
        raise ValueError("perturbation must be FEATURE=RADIUS pairs, not one string")
    pairs = (value.items() if isinstance(value, Mapping)
             else (str(item).partition("=")[::2] for item in value))
    radii: dict[str, float] = {}
    for name, given in pairs:
        name = str(name).strip()
        if name not in FEATURES:
            raise ValueError(f"perturbation {name!r}: expected FEATURE=RADIUS with FEATURE one "
                             f"of {sorted(FEATURES)}")
        try:
            radius = float(given)
        except ValueError:
            raise ValueError(f"perturbation {name}={given!r}: the radius is not a number") from None
        if not radius >= 0 or radius == float("inf"):
            raise ValueError(f"perturbation {name}={given!r}: the radius must be finite and >= 0")
        radii[name] = radius
    return radii


BASE_JOIN = "+"
"""Joins the models whose mean is a stacked model's base (``gbr+gbr_lags``)."""


def base_members(base: str) -> tuple[str, ...]:
    """The models whose issued forecasts, averaged hour by hour, make the base ``base``."""
    return tuple(name.strip() for name in base.split(BASE_JOIN))


def _feature_set_name(name: str) -> str:
    """A feature set's name as registered, a field's ``ValueError`` when there is none."""
    try:
        return get_feature_set(name).name
    except LookupError as exc:
        raise ValueError(str(exc)) from None


def _model_options(fast: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Per model: its fast solver options when it is among ``fast``."""
    return {name: dict(MODELS[name].fast_options) for name in fast if MODELS[name].fast_options}


PAPER_MODELS = tuple(name for name in MODEL_NAMES
                     if name not in (DAY_TYPE_NAIVE, ENSEMBLE, *BOOSTING_MODELS))
"""The paper's comparison: its five learned models and seasonal naive."""

DEPLOYED_INPUTS: Mapping[str, Mapping[str, Any]] = MappingProxyType({
    "gbr": MappingProxyType({"feature_set": "year", "history_weeks": 52, "target": "load",
                             "level_correction": 0.25, "trials": 6,
                             "tuning_sample_every": 4, "fit_sample_every": 3}),
    "gbr_lags": MappingProxyType({"feature_set": "off_day_lags", "history_weeks": 52,
                                  "target": "load", "tuning_sample_every": 4}),
    **{name: MappingProxyType({"base_model": f"gbr{BASE_JOIN}gbr_lags", "feature_set": "paper",
                               "search_bounds": {"radius": (1.0, 20.1)},
                               "correction_rate": 0.5})
       for name in ("wadiro_pcscnn", "wadiro_scnn")},
    "gp": MappingProxyType({"tuning_sample_every": 4, "fit_sample_every": 4}),
})
"""The deployed protocol's models beyond the paper's: gradient boosting fits a year of history (the
paper's models keep its 12 weeks) on the ``year`` features, the load itself as target, and moves
its forecast by a quarter of its median error on the validation week (trained on a year, it follows
a building's level shifts late). The two networks correct the mean of the two gradient boostings'
issued forecasts (a residual over what a year of history knows; on 2016-2018, 20 buildings, the
constrained network 0.884 / 0.744 / 0.702 -> 0.842 / 0.706 / 0.670 against ``gbr``'s alone, the
published forecast 0.821 / 0.686 / 0.661 -> 0.819 / 0.685 / 0.659) instead of the holiday-aware
persistence, with their Wasserstein radius searched on [1, 20.1] instead of the paper's [e^-6,
e^1] (a correction of an already good forecast needs the strongest regularisation: on 2018, 10
buildings, the constrained
network 0.724 -> 0.714 of seasonal naive's MAE, the published forecast 0.658 -> 0.653), on the
paper's eight features (the correction of a forecast that already knows the load's history needs no
lags: on 2016-2018 the constrained network 0.923 / 0.763 / 0.778 -> 0.936 / 0.736 / 0.765, the
published 0.810 / 0.666 / 0.730 -> 0.812 / 0.663 / 0.727, at fewer features' cost), and they
forecast half their correction (``correction_rate``, gradient boosting's learning rate: a
correction fitted on 12 weeks of another model's errors is partly noise; on 2016-2018 the
constrained network 0.936 / 0.736 / 0.765 -> 0.908 / 0.715 / 0.752, the published forecast 0.812 /
0.663 / 0.727 -> 0.811 / 0.663 / 0.727). The gradient boosting's six trials fit every fourth hour
of its year and its final fit every third (a year sampled thinly still holds more hours than 12
weeks): on the same buildings and year it forecast as well (0.683 -> 0.682) at about half the CPU.
The GP, whose work grows with the cube of its rows, fits every fourth hour of its window in its
trials and its final fit: half the hours the run's other models fit (every second), as accurate on
50 real windows at a fifth of the CPU (its final fit on every second hour was measured and left
out). ``gbr_lags``, the same trees at scikit-learn's default settings (nothing to tune; the
absolute loss) on the paper's inputs and the load one and two weeks back, also fits a year, the
load as target: a second view of the building for the combination. Both boostings (and the run's
``recent_change`` features) flag the closure periods' weekdays as off days, as the day types do
(``is_off_day``; ``off_day_lags`` is ``paper_lags`` so flagged): on 2016-2018, 20 buildings,
``gbr_lags`` 0.889 / 0.778 / 0.745 -> 0.875 / 0.754 / 0.713 and the published forecast 0.825 /
0.689 / 0.672 -> 0.821 / 0.686 / 0.661. Each choice was measured on the
development years 2016-2018 (docs/benchmarks.md)."""

ENSEMBLE_MEMBERS = (*BOOSTING_MODELS, "wadiro_pcscnn", "wadiro_linreg")
"""The deployed protocol's combination: the two gradient boostings, the constrained network
stacked on them (its unconstrained twin, nearly the same forecast, would count it twice) and
the linear regression over the holiday-aware persistence, weighted by their records (inverse
error). On the development years 2017-2018 (20 buildings x 52 weeks each,
docs/benchmarks.md) the three members but ``gbr_lags`` made 0.692 and 0.689 of seasonal naive's
MAE against 0.732 and 0.713 for ``gbr`` alone; adding the SVR, the GP or a persistence forecast
made it worse (0.698-0.705), and so did a median. Adding ``gbr_lags`` lowered the published
forecast's error by 1.0-2.3 % on 2016-2018 (10 buildings each, docs/benchmarks.md)."""

DEPLOYED_MODELS = tuple(name for name in MODEL_NAMES if name in (
    *ENSEMBLE_MEMBERS, "wadiro_scnn", SEASONAL_NAIVE, DAY_TYPE_NAIVE, ENSEMBLE))
"""The deployed protocol's models (in the registry's order): the combination's members, the
network's unconstrained twin (whose fit serves the constrained one when it meets the floor: the
pair costs about one), both persistence forecasts and the combination. The SVR and the GP added
nothing to the published forecast on the development years and left it; the paper's protocol
keeps them."""

DEPLOYED_OPTIONS: Mapping[str, Any] = MappingProxyType(_model_options(
    [name for name, spec in MODELS.items() if spec.is_learned]))
"""The deployed protocol's model options: every model's fast solver (the same program with less
work: one factorisation for the GP, the SVR's l1 program solved exactly, the linear program
handed to Clarabel as matrices, the structured interior point for the networks; for the
gradient boostings, LightGBM's trees on scikit-learn's bins). Which hours a
model is fitted on is the protocol's (``tuning_sample_every``, ``fit_sample_every`` and
:data:`DEPLOYED_INPUTS`), never an estimator's option."""

PAPER_OPTIONS: Mapping[str, Any] = MappingProxyType(_model_options(
    ["wadiro_pcscnn", "wadiro_scnn"]))
"""The paper's protocol as it ran: the networks with the structured interior point (the same
optimum as cvxpy + Clarabel), the baselines as scikit-learn and cvxpy solve them."""

def _copy(value: Any) -> Any:
    """A preset's value as a fresh plain object (mappings become dicts), so no run shares it."""
    if isinstance(value, Mapping):
        return {k: _copy(v) for k, v in value.items()}
    return value


PAPER_VALUES: Mapping[str, Any] = MappingProxyType({
    "models": PAPER_MODELS,
    "ensemble_members": (),
    "trials": 15,
    "tuning_sample_every": 1,
    "fit_sample_every": 1,
    "max_neurons": 70,
    "tuning": "per-window",
    "warm_start": False,
    "feature_set": "paper",
    "target": "load",
    "persistence": "last_week",
    "target_week_floor": "none",
    "scnn_tuning": "separate",
    "certify": "all",
    "certificate": "milp",
    "publication_weighting": "validation",
    "record_weeks": 8,
    "ensemble_method": "median",
    "publication": "choose",
    "model_options": PAPER_OPTIONS,
    "model_inputs": MappingProxyType({}),
})
"""Where the paper's protocol differs from the deployed one (the fields' own defaults): the
:data:`PAPER` preset, and what a run of ``protocol="paper"`` takes for the fields it leaves
out."""


class ModelInputs(BaseModel):
    """What one model is fitted on when it differs from the run's: its own feature set, weeks of
    history and target (``None``: the run's). A model beyond the paper's may train on a longer
    history where that was measured to pay (the paper's models keep the run's 12 weeks).
    ``base_model`` names a model whose forecasts, as issued a week ahead, a residual target
    corrects instead of a persistence forecast (when that model is in the run), or several
    joined by ``+`` (``gbr+gbr_lags``), whose forecasts' mean hour by hour is the base (those of
    them in the run).
    ``search_bounds`` narrows or moves the range of a tuned hyperparameter (``{"radius": (lo,
    hi)}``; the distribution keeps its kind).
    ``level_correction`` (0 to 1, default 0) moves the model's forecast of every hour by that
    share of its median error on the validation week (actual minus forecast, known when the
    forecast is issued): a model slow to follow a building's level shifts follows them.
    ``correction_rate`` (above 0 to 1, default 1) is the share of its learned correction a
    residual model forecasts: the base plus that share of the correction, as gradient boosting
    adds each stage at its learning rate (a correction fitted on 12 weeks of another model's
    errors is partly noise; the floor still holds, the forecast lying between the base and the
    whole correction). For the networks, which standardise their target, this is the same
    program solved for that share of the residual, its floor scaled alike: the forecast is
    still the WaDiRo program's solution. A model fitted on the load forecasts all of it.
    ``trials``, ``tuning_sample_every`` and ``fit_sample_every``: the model's own tuning
    budget and hour sampling (a model fitted on a year of history can sample its hours more
    thinly than one fitted on 12 weeks and see as many of them)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    feature_set: str | None = None
    history_weeks: int | None = Field(None, ge=2)
    target: Target | None = None
    base_model: str | None = None
    trials: int | None = Field(None, ge=1)
    tuning_sample_every: int | None = Field(None, ge=1)
    fit_sample_every: int | None = Field(None, ge=1)
    level_correction: float | None = Field(None, ge=0, le=1)
    correction_rate: float | None = Field(None, gt=0, le=1)
    search_bounds: dict[str, tuple[float, float]] = Field(default_factory=dict)

    @field_validator("feature_set")
    @classmethod
    def _known_feature_set(cls, value: str | None) -> str | None:
        return None if value is None else _feature_set_name(value)


class ForecastConfig(BaseModel):
    """Every choice of a run that changes its results (recorded in the ``runs`` table)."""

    model_config = ConfigDict(frozen=True, extra="forbid", validate_default=True)

    protocol: Protocol = Field(
        "deployed",
        description="Which protocol the fields left out follow: deployed (the benchmarked "
        "configuration) or paper (the paper's own protocol, exactly).",
    )
    models: CommaList = Field(
        DEPLOYED_MODELS,
        description=f"Models to run, among {', '.join(MODEL_NAMES)}.",
    )
    ensemble_members: CommaList = Field(
        ENSEMBLE_MEMBERS,
        description="The models whose forecasts the ensemble combines (those the run forecasts "
        "and that can be trusted that week, combined by --ensemble-method).",
    )
    trials: int = Field(8, ge=1,
                        description="TPE trials per model (or SCNN family) and tuning.")
    tuning_sample_every: int = Field(
        2, ge=1,
        description="Tuning's trials fit every n-th hour of the fit weeks (counted back from "
        "the latest) and are scored on the whole validation week. 1: trials fit every hour "
        "(the paper).",
    )
    fit_sample_every: int = Field(
        2, ge=1,
        description="A model's final fit, and its refit on the fit weeks for the validation "
        "week, use every n-th hour of their weeks (counted back from the latest); the forecast "
        "covers every hour. 1: every hour (the paper).",
    )
    max_neurons: int = Field(
        30, ge=10,
        description="The largest max_neurons the SCNN family's tuning tries (its search space "
        "is 10 to this; the paper's is 10 to 70).",
    )
    tuning: TuningMode = Field(
        "reuse",
        description="per-window: tune every window; reuse: refit with the latest stored "
        "hyperparameters (tune when there are none or they are too old).",
    )
    warm_start: bool = Field(
        True,
        description="Start each tuning from the model's latest earlier tuning (its best "
        "hyperparameters are the first trial), when there is one.",
    )
    feature_set: str = Field(
        "recent_change",
        description=f"Named feature set ({', '.join(FEATURE_SETS)}); paper is the paper's eight.",
    )
    target: Target = Field(
        "residual",
        description="What the learned models predict: the load itself (the paper) or the "
        "residual, the correction to a persistence forecast (--persistence).",
    )
    base_model: str | None = Field(
        None,
        description="A model whose forecasts, as they were issued a week ahead, a residual "
        "target corrects instead of the persistence forecast, or several joined by + whose "
        "mean does (per model: model_inputs).",
    )
    persistence: Persistence = Field(
        "day_type",
        description="The persistence forecast a residual target corrects: last_week (the load "
        "of the same hour last week) or day_type (the same hour of the latest earlier day of "
        "the same type: workday, weekend, or holiday / closure day).",
    )
    closure_periods: CommaList = Field(
        DEFAULT_CLOSURE_PERIODS,
        description="Annual MM-DD..MM-DD ranges whose weekdays count as holidays for the "
        "day_type persistence (the buildings run as on a Sunday then).",
    )
    target_week_floor: TargetWeekFloor = Field(
        "projection",
        description="How the constrained network's forecast keeps its floor (no negative load) "
        "beyond its training rows: projection (the forecast is projected onto the floor), "
        "program (the target week's inputs are bound inside its training program), none "
        "(the paper: training rows only).",
    )
    reuse_max_age_weeks: int = Field(
        8, ge=0, description="Oldest stored tuning that --tuning reuse accepts, in weeks."
    )
    history_weeks: int = Field(
        12, ge=2, description="Weeks of history before the target week (the last validates)."
    )
    model_options: dict[str, dict[str, Any]] = Field(
        default_factory=lambda: _copy(DEPLOYED_OPTIONS),
        description="Fixed constructor arguments per model, not tuned (e.g. the solver).",
    )
    model_inputs: dict[str, ModelInputs] = Field(
        default_factory=lambda: _copy(DEPLOYED_INPUTS),
        description="Per model, the feature set, weeks of history and target it is fitted on "
        "where they differ from the run's.",
    )
    scnn_tuning: ScnnTuning = Field(
        "joint",
        description="joint: wadiro_pcscnn and wadiro_scnn are tuned in one study over the same "
        "trials, each taking its own best, and a fit whose network already meets the physical "
        "bound serves both; separate: a study each (the paper).",
    )

    perturbation: dict[str, float] = Field(
        default_factory=lambda: dict(DEFAULT_PERTURBATION),
        description="Stability certificate of each SCNN-family fit: the input perturbation, "
        "a radius per feature in the feature's own units (an l_inf box; on the command line "
        "--perturbation.FEATURE RADIUS, e.g. --perturbation.temperature_c 0.5); features not "
        "listed (the calendar) are held fixed.",
    )
    certify: CertifyScope = Field(
        "published",
        description="Which SCNN-family fits get a stability certificate: the published one, "
        "all of them, or none.",
    )
    certificate: CertificateKind = Field(
        "unit_bounds",
        description="How a stability certificate bounds L_eps: unit_bounds (the sum of each "
        "unit's largest change: a true upper bound in milliseconds) or milp (the exact MILP, "
        "within --certify-nodes).",
    )
    certify_nodes: int = Field(
        100, ge=0, description="Branch-and-bound nodes a MILP certificate may use (past "
        "them, an upper bound is recorded; a node budget keeps reruns identical, a time limit "
        "would not); 0 turns certification off.",
    )

    ensemble_method: EnsembleMethod = Field(
        "inverse_error",
        description="How the ensemble combines its trusted members each hour: median, or "
        "inverse_error (a weighted mean, each member's weight its mean MAE relative to "
        "seasonal naive over the building's last --ensemble-record-weeks scored weeks to the "
        "power -ensemble_power; a member without two such weeks weighs as one at 1.0).",
    )
    quantile_scale: QuantileScale = Field(
        "hour_of_day",
        description="How each forecast's quantiles rank its validation week's errors: constant "
        "(as they are: the same offsets from the forecast in every hour) or hour_of_day (each "
        "relative to its hour of the day's typical error, scaled back by the target hour's).")
    quantile_record_weeks: int = Field(
        16, ge=0, le=52,
        description="Scored weeks of a model's own hourly errors pooled with its validation "
        "week's to calibrate its quantiles (0: the validation week alone).")
    quantile_halflife_weeks: float = Field(
        8.0, ge=0,
        description="The age in weeks at which a calibration error weighs half as much as one "
        "of the week just before the target (weighted conformal quantiles: recent weeks count "
        "more, so a changed building's quantiles follow it; 0: every pooled error weighs the "
        "same).")
    quantile_adaptation_gain: float = Field(
        0.0, ge=0, le=1,
        description="How much of what a quantile level missed in its last scored weeks shifts "
        "the level used this week (1: all of it, adaptive conformal inference; 0: none; a "
        "week's shares of hours are noisy, and a shifted level costs pinball loss).")
    ensemble_power: float = Field(
        4.0, gt=0, description="The power of the inverse-error weights (higher: the members "
        "with the better record weigh more).")
    ensemble_record_weeks: int = Field(
        8, ge=2, description="Scored weeks of a building the ensemble's weights are learned "
        "from.")
    publication: PublicationPolicy = Field(
        "combination",
        description="choose: publish the trusted model expected to beat seasonal naive by the "
        "most (the paper's select-check-deploy); combination: publish the ensemble whenever it "
        "is formed and expected to beat seasonal naive, else choose.",
    )
    publication_weighting: PublicationWeighting = Field(
        "record",
        description="How a model's expected error is judged for publication: record (its "
        "validation week is one more week of its record of up to 8 scored weeks) or "
        "validation (the validation week weighs as much as the whole record).",
    )
    record_weeks: int = Field(
        26, ge=2,
        description="How many earlier scored weeks of a building the publication step weighs "
        "(a longer record judges a model less by chance).",
    )
    max_l_eps: float | None = Field(
        None, gt=0, description="Publish an SCNN-family forecast only when its stability "
        "certificate L_eps (kWh) is at most this (default: no requirement).",
    )

    PROTOCOL_DEFAULTS: ClassVar[tuple[str, ...]] = tuple(PAPER_VALUES)
    """The fields whose default is the chosen protocol's (:data:`PROTOCOLS`)."""

    @model_validator(mode="before")
    @classmethod
    def _protocol_defaults(cls, data: Any) -> Any:
        """The paper's protocol gives the fields left out its values (the deployed protocol's
        are the fields' own defaults; any other value is refused by the field itself)."""
        if not isinstance(data, Mapping) or data.get("protocol") != "paper":
            return data
        return {**_copy(PAPER_VALUES), **data}

    @field_validator("closure_periods")
    @classmethod
    def _closure_periods(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(str(period) for period in parse_closure_periods(value))

    @field_validator("perturbation", mode="before")
    @classmethod
    def _feature_radii(cls, value: Mapping[str, Any] | Sequence[str]) -> dict[str, float]:
        return parse_perturbation(value)

    @field_validator("models")
    @classmethod
    def _known_models(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return check_model_names(value)

    @model_validator(mode="after")
    def _ensemble_of_run_models(self) -> ForecastConfig:
        if ENSEMBLE in self.ensemble_members:
            raise ValueError("the ensemble cannot be a member of itself")
        if ENSEMBLE in self.models and len(self.members) < 2:
            raise ValueError(
                "the ensemble needs at least two of its members (--ensemble-members: "
                f"{', '.join(self.ensemble_members) or 'none'}) among the run's models "
                f"({', '.join(self.models)})")
        return self

    @property
    def members(self) -> tuple[str, ...]:
        """The ensemble's members that this run forecasts."""
        return tuple(m for m in self.ensemble_members if m in self.models)

    _known_feature_set = field_validator("feature_set")(_feature_set_name)

    def search_space(self, model: str) -> Mapping[str, Any]:
        """``model``'s search space in this run: the paper's, with the SCNN family's
        ``max_neurons`` capped at :attr:`max_neurons` and the model's own
        :attr:`ModelInputs.search_bounds`."""
        space = dict(MODELS[model].search_space)
        if "max_neurons" in space:
            space["max_neurons"] = IntUniform(space["max_neurons"].low, self.max_neurons)
        own = self.model_inputs.get(model)
        for name, (low, high) in (own.search_bounds if own is not None else {}).items():
            if name not in space:
                raise ValueError(f"{model} has no tuned hyperparameter {name!r} to bound")
            space[name] = replace(space[name], low=type(space[name].low)(low),
                                  high=type(space[name].high)(high))
        return space

    def inputs(self, model: str) -> ForecastConfig:
        """This run as ``model`` is fitted in it: the run's feature set, history and target, or
        the model's own (:attr:`model_inputs`)."""
        own = self.model_inputs.get(model)
        if own is None:
            return self
        changes = {k: v for k, v in own.model_dump().items()  # those the run itself has
                   if v is not None and k in ForecastConfig.model_fields}
        if changes.get("base_model") is not None:  # the base's models that are in the run
            base = BASE_JOIN.join(m for m in base_members(changes["base_model"])
                                  if m in self.models)
            if base:
                changes["base_model"] = base
            else:  # none in the run: the persistence forecast is the base
                del changes["base_model"]
        changes = {k: v for k, v in changes.items() if getattr(self, k) != v}
        return self.model_copy(update=changes) if changes else self

    @property
    def base_models(self) -> tuple[str, ...]:
        """The run's models that others of the run are stacked on (:attr:`base_model`)."""
        return tuple(dict.fromkeys(
            member for b in (self.inputs(m).base_model for m in self.models) if b is not None
            for member in base_members(b)))

    def level_correction_of(self, model: str) -> float:
        """The share of its median validation-week error by which ``model``'s forecast moves
        (0: none; :attr:`ModelInputs.level_correction`)."""
        return self._own_input(model, "level_correction", 0.0)

    def correction_rate_of(self, model: str) -> float:
        """The share of its learned correction that ``model``, fitted on a residual target,
        forecasts (1: all of it; :attr:`ModelInputs.correction_rate`)."""
        return self._own_input(model, "correction_rate", 1.0)

    def _own_input(self, model: str, name: str, default: float) -> float:
        """``model``'s own :class:`ModelInputs` value ``name``, or ``default`` where it has none."""
        own = self.model_inputs.get(model)
        value = None if own is None else getattr(own, name)
        return default if value is None else value

    def input_groups(self, models: Sequence[str]) -> list[tuple[ForecastConfig, list[str]]]:
        """``models`` grouped by what they are fitted on (:meth:`inputs`), the run's own first:
        each group shares one window."""
        groups: dict[tuple, tuple[ForecastConfig, list[str]]] = {}
        for model in models:
            config = self.inputs(model)
            key = (config.feature_set, config.history_weeks, config.target, config.base_model,
                   config.trials, config.tuning_sample_every, config.fit_sample_every)
            groups.setdefault(key, (config, []))[1].append(model)
        own = (self.feature_set, self.history_weeks, self.target, self.base_model)
        bases = {member for c, _ in groups.values() if c.base_model is not None
                 for member in base_members(c.base_model)}
        return sorted(groups.values(), key=lambda group: (
            not any(m in bases for m in group[1]),  # a base model's group before those using it
            group[0].base_model is not None,
            (group[0].feature_set, group[0].history_weeks, group[0].target,
             group[0].base_model) != own))

    def load_range(self, week: Any, timezone: str) -> tuple[Any, Any]:
        """The UTC hours a window of ``week`` reads, for every model of the run: the longest
        history and lookback among them, through the end of the week."""
        from tasks.protocol.windows import window_load_range

        ranges = [window_load_range(week, timezone, history_weeks=c.history_weeks,
                                    feature_set=c.feature_set)
                  for c in {self.inputs(m) for m in self.models} | {self}]
        return min(r[0] for r in ranges), max(r[1] for r in ranges)

    def __hash__(self) -> int:  # frozen: hashable by value (the sets of :meth:`load_range`)
        return hash(self.model_dump_json())

    PROTOCOL_FIELDS: ClassVar[tuple[str, ...]] = (
        "feature_set", "target", "persistence", "closure_periods", "target_week_floor",
        "history_weeks", "fit_sample_every", "model_options", "model_inputs")
    """The fields that, with a model's hyperparameters, decide what its forecast is: a forecast
    issued under other values is not this configuration's forecast."""

    def protocol_record(self) -> dict[str, Any]:
        """:attr:`PROTOCOL_FIELDS` as they are recorded in ``runs.parameters`` (JSON values)."""
        return self.model_dump(mode="json", include=set(self.PROTOCOL_FIELDS))

    def as_record(self) -> dict[str, Any]:
        """JSON-ready parameters for the ``runs`` table, search spaces included."""
        record = self.model_dump(mode="json")
        record["search_spaces"] = {
            m: {p: repr(d) for p, d in self.search_space(m).items()} for m in self.models
        }
        return record


DEPLOYED = ForecastConfig()
"""The deployed protocol: every field at its default."""

PAPER = ForecastConfig(protocol="paper")
"""The paper's protocol, exactly as this project ran it before the deployed one existed."""

PROTOCOLS: Mapping[str, ForecastConfig] = MappingProxyType({"deployed": DEPLOYED, "paper": PAPER})
"""The named protocols as preset configurations; a run of ``protocol=NAME`` is its preset with
the fields it gives replaced."""
