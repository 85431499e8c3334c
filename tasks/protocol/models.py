"""Every model the pipeline can run, in one registry: the library's estimators and the
seasonal-naive floor.

A learned model is an estimator constructor from :mod:`wadiro_models`, its search space and
the constructor arguments the pipeline fixes (not tuned). The persistence forecasts have no
estimator. ``seasonal_naive`` repeats the load of the same local hour one week earlier
(:func:`~wadiro_fleet.tasks.protocol.weeks.same_local_hour_weeks_before`), or two, three or four
weeks earlier where that reading is missing: "same as last week", the bar every model must
clear. ``day_type_naive`` repeats the same hour of the latest earlier day of the same type
(workday, weekend, holiday or closure day: :mod:`~wadiro_fleet.tasks.protocol.day_types`), so a
bank holiday is forecast from a Sunday and the Monday after it from the Monday before.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from wadiro_fleet.tasks.errors import PipelineError
from wadiro_fleet.tasks.protocol.features import DAY_TYPE_PERSISTENCE, PERSISTENCE

from wadiro_models import MODELS as ESTIMATORS
from wadiro_models import SEARCH_SPACES

SEASONAL_NAIVE = "seasonal_naive"
DAY_TYPE_NAIVE = "day_type_naive"


class UnknownModelNameError(PipelineError, ValueError):
    """A model name that the pipeline's registry does not know."""


@dataclass(frozen=True)
class ModelSpec:
    """How the pipeline makes one model's forecast.

    ``estimator`` builds an unfitted scikit-learn estimator from keyword arguments; ``options``
    are fixed arguments given to every instance and ``search_space`` the tuned ones. A model
    without an estimator is a persistence forecast: the window's column ``persistence``.
    """

    name: str
    estimator: Callable[..., Any] | None = None
    search_space: Mapping[str, Any] = field(default_factory=dict)
    options: Mapping[str, Any] = field(default_factory=dict)
    persistence: str | None = None
    load_floor: float | None = None
    """The lowest load the model may forecast, enforced inside its training program (``None``:
    no such guarantee)."""

    @property
    def is_learned(self) -> bool:
        return self.estimator is not None


FIXED_OPTIONS: Mapping[str, Mapping[str, Any]] = {
    "wadiro_pcscnn": {"solver": "ipm"},
    "wadiro_scnn": {"solver": "ipm"},
}
"""Constructor arguments the pipeline fixes: the fast solver for the SCNN family."""

LOAD_FLOORS: Mapping[str, float] = {"wadiro_pcscnn": 0.0}
"""Models whose training program guarantees a minimum load (the library's physics-constrained
network: ``lower_bound=0``)."""

MODELS: Mapping[str, ModelSpec] = MappingProxyType({
    **{
        name: ModelSpec(name, estimator=constructor, search_space=SEARCH_SPACES[name],
                        options=MappingProxyType(dict(FIXED_OPTIONS.get(name, {}))),
                        load_floor=LOAD_FLOORS.get(name))
        for name, constructor in ESTIMATORS.items()
    },
    SEASONAL_NAIVE: ModelSpec(SEASONAL_NAIVE, persistence=PERSISTENCE),
    DAY_TYPE_NAIVE: ModelSpec(DAY_TYPE_NAIVE, persistence=DAY_TYPE_PERSISTENCE),
})
"""Every model the pipeline knows, by name, in the order runs list them."""

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


__all__ = [
    "DAY_TYPE_NAIVE",
    "FIXED_OPTIONS",
    "MODELS",
    "MODEL_NAMES",
    "SEASONAL_NAIVE",
    "ModelSpec",
    "UnknownModelNameError",
    "check_model_names",
]
