"""Model names -> estimator constructors, so the pipeline builds every model alike.

A new model is one estimator class plus one entry here (and its search space in
:mod:`search_spaces`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from types import MappingProxyType

from sklearn.base import BaseEstimator

from ._baselines import GaussianProcessBaseline, LinearSVRBaseline
from ._wadiro_linreg import WaDiRoLinearRegression
from ._wadiro_scnn import WaDiRoSCNN
from .exceptions import UnknownModelError

MODELS: MappingProxyType[str, Callable[..., BaseEstimator]] = MappingProxyType(
    {
        # the physics-constrained network of the paper: consumption is never negative
        "wadiro_pcscnn": functools.partial(WaDiRoSCNN, lower_bound=0.0),
        "wadiro_scnn": WaDiRoSCNN,
        "gp": GaussianProcessBaseline,
        "svr": LinearSVRBaseline,
        "wadiro_linreg": WaDiRoLinearRegression,
    }
)


def make_model(name: str, **params: object) -> BaseEstimator:
    """A new, unfitted estimator for model ``name`` with ``params`` set."""
    try:
        constructor = MODELS[name]
    except KeyError:
        raise UnknownModelError(
            f"unknown model {name!r}; known models: {', '.join(sorted(MODELS))}"
        ) from None
    return constructor(**params)
