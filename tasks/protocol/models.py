"""Every model the pipeline can run, in one registry: the library's estimators and the
seasonal-naive floor.

A learned model is an estimator constructor from :mod:`wadiro_models`, its search space and
the constructor arguments the pipeline fixes (not tuned). The persistence forecasts have no
estimator. ``seasonal_naive`` repeats the load of the same local hour one week earlier
(:func:`~tasks.protocol.weeks.same_local_hour_weeks_before`), or two, three or four
weeks earlier where that reading is missing: "same as last week", the bar every model must
clear. ``day_type_naive`` repeats the same hour of the latest earlier day of the same type
(workday, weekend, holiday or closure day: :mod:`~tasks.protocol.day_types`), so a
bank holiday is forecast from a Sunday and the Monday after it from the Monday before.
``ensemble`` combines the forecasts of other models: the hourly median of those the run names
(``ensemble_members``) that can be trusted that week.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from types import MappingProxyType
from typing import Any

from tasks.errors import PipelineError
from tasks.protocol.features import DAY_TYPE_PERSISTENCE, PERSISTENCE
from wadiro_models import REGISTRY, ModelEntry

SEASONAL_NAIVE = "seasonal_naive"
DAY_TYPE_NAIVE = "day_type_naive"
ENSEMBLE = "ensemble"
BOOSTING_MODELS = ("gbr", "gbr_lags")
"""The library's models beyond the paper's comparison (gradient boosting: tuned, and at its
defaults)."""


class UnknownModelNameError(PipelineError, ValueError):
    """A model name that the pipeline's registry does not know."""


@dataclass(frozen=True)
class ModelSpec:
    """How the pipeline makes one model's forecast.

    ``estimator`` builds an unfitted scikit-learn estimator from keyword arguments and
    ``search_space`` gives the tuned ones; ``fast_options`` solve the same program with less
    work (which protocol uses them is :mod:`~tasks.protocol.config`'s business).
    A model without an estimator is a persistence forecast: the window's column
    ``persistence``.
    """

    name: str
    estimator: Callable[..., Any] | None = None
    search_space: Mapping[str, Any] = field(default_factory=dict)
    fast_options: Mapping[str, Any] = field(default_factory=dict)
    persistence: str | None = None
    combination: bool = False
    """A combination of other models' forecasts (no estimator, no column of its own)."""
    load_floor: float | None = None
    """The lowest load the model may forecast (``None``: no such guarantee): the library
    entry's fixed ``lower_bound``, enforced inside its training program, or its
    ``projected_floor``, onto which its forecasts are projected."""
    floor_in_program: bool = False
    """Whether :attr:`load_floor` is a constraint of the model's training program (the
    constrained network) rather than a projection of its forecasts (trees)."""

    @property
    def is_learned(self) -> bool:
        return self.estimator is not None

    @cached_property
    def allows_missing(self) -> bool:
        """Whether the estimator takes missing inputs (its scikit-learn tag ``allow_nan``): its
        own window keeps hours with a load lag missing over a gap in the readings instead of
        dropping them, and forecasts every hour of the target week. Read when first asked (in
        a worker), so that making the registry imports no model library."""
        if self.estimator is None:
            return False
        from sklearn.utils import get_tags

        return bool(get_tags(self.estimator()).input_tags.allow_nan)


def _learned(name: str, entry: ModelEntry) -> ModelSpec:
    fixed = dict(entry.fixed)
    floor = fixed.pop("lower_bound", None)  # the pipeline sets it per row (residual target)
    in_program = floor is not None
    if floor is None:
        floor = entry.projected_floor
    return ModelSpec(name, estimator=replace(entry, fixed=fixed).make,
                     search_space=entry.search_space,
                     fast_options=MappingProxyType(dict(entry.fast)),
                     load_floor=None if floor is None else float(floor),
                     floor_in_program=in_program)


MODELS: Mapping[str, ModelSpec] = MappingProxyType({
    **{name: _learned(name, entry) for name, entry in REGISTRY.items()},
    SEASONAL_NAIVE: ModelSpec(SEASONAL_NAIVE, persistence=PERSISTENCE),
    DAY_TYPE_NAIVE: ModelSpec(DAY_TYPE_NAIVE, persistence=DAY_TYPE_PERSISTENCE),
    ENSEMBLE: ModelSpec(ENSEMBLE, combination=True, load_floor=0.0),
})
"""Every model the pipeline knows, by name, in the order runs list them: the library's
(:data:`wadiro_models.REGISTRY`) and the persistence forecasts."""

MODEL_NAMES: tuple[str, ...] = tuple(MODELS)


def check_model_names(models: Sequence[str]) -> tuple[str, ...]:
    """``models`` without repeats, each checked to be in :data:`MODELS`."""
    if isinstance(models, str):
        raise TypeError("models must be a sequence of names, not one string")
    unknown = [m for m in models if m not in MODELS]
    if unknown:
        raise UnknownModelNameError(
            f"unknown model(s) {unknown}; known models: {', '.join(MODEL_NAMES)}"
        )
    if not models:
        raise UnknownModelNameError("no model selected")
    return tuple(dict.fromkeys(models))
