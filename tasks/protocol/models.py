"""Every model the pipeline can run, in one registry: the library's estimators and the
seasonal-naive floor.

A learned model is an estimator constructor from :mod:`wadiro_models`, its search space and
the constructor arguments the pipeline fixes (not tuned). ``seasonal_naive`` has no estimator:
it repeats the load of the same local hour one week earlier
(:func:`~wadiro_fleet.tasks.protocol.weeks.same_local_hour_weeks_before`), two weeks earlier
where that reading is missing. It is the bar every learned model must clear.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np
import pandas as pd
from wadiro_fleet.tasks.errors import PipelineError
from wadiro_fleet.tasks.protocol.features import LABEL, TS
from wadiro_fleet.tasks.protocol.weeks import (
    resolve_timezone,
    same_local_hour_weeks_before,
)
from wadiro_fleet.tasks.protocol.windows import Window

from wadiro_models import MODELS as ESTIMATORS
from wadiro_models import SEARCH_SPACES

SEASONAL_NAIVE = "seasonal_naive"


class UnknownModelNameError(PipelineError, ValueError):
    """A model name that the pipeline's registry does not know."""


def seasonal_naive(window: Window) -> np.ndarray:
    """The load of the same local hour one week before each test hour, else two weeks before.

    Only the window's usable history is read (hours with a reading and every feature). Hours
    whose reading is missing both times get no forecast (NaN, stored as NULL).
    """
    history = window.train.set_index(TS)[LABEL]
    local = pd.DatetimeIndex(window.test[TS]).tz_convert(resolve_timezone(window.timezone))
    last_week, two_weeks = (
        history.reindex(same_local_hour_weeks_before(local, weeks)).to_numpy()
        for weeks in (1, 2)
    )
    return np.where(np.isnan(last_week), two_weeks, last_week)


@dataclass(frozen=True)
class ModelSpec:
    """How the pipeline makes one model's forecast.

    ``estimator`` builds an unfitted scikit-learn estimator from keyword arguments; ``options``
    are fixed arguments given to every instance and ``search_space`` the tuned ones. A model
    without an estimator is a persistence forecast computed from the window by ``forecast``.
    """

    name: str
    estimator: Callable[..., Any] | None = None
    search_space: Mapping[str, Any] = field(default_factory=dict)
    options: Mapping[str, Any] = field(default_factory=dict)
    forecast: Callable[[Window], np.ndarray] | None = None

    @property
    def is_learned(self) -> bool:
        return self.estimator is not None


FIXED_OPTIONS: Mapping[str, Mapping[str, Any]] = {
    "wadiro_pcscnn": {"solver": "ipm"},
    "wadiro_scnn": {"solver": "ipm"},
}
"""Constructor arguments the pipeline fixes: the fast solver for the SCNN family."""

MODELS: Mapping[str, ModelSpec] = MappingProxyType({
    **{
        name: ModelSpec(name, estimator=constructor, search_space=SEARCH_SPACES[name],
                        options=MappingProxyType(dict(FIXED_OPTIONS.get(name, {}))))
        for name, constructor in ESTIMATORS.items()
    },
    SEASONAL_NAIVE: ModelSpec(SEASONAL_NAIVE, forecast=seasonal_naive),
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
    "FIXED_OPTIONS",
    "MODELS",
    "MODEL_NAMES",
    "SEASONAL_NAIVE",
    "ModelSpec",
    "UnknownModelNameError",
    "check_model_names",
    "seasonal_naive",
]
