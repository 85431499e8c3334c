"""Every model of the library, one entry each: its estimator, its search space, the constructor
arguments that make it the model it is, and those that compute the same program with less work.

A new model is one estimator class plus one entry here; the pipeline builds its own registry
from these entries.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from sklearn.base import BaseEstimator

from ._baselines import GaussianProcessBaseline, LinearSVRBaseline
from ._wadiro_linreg import WaDiRoLinearRegression
from ._wadiro_scnn import WaDiRoSCNN
from .exceptions import UnknownModelError
from .search_spaces import GP_SPACE, LINREG_SPACE, SCNN_SPACE, SVR_SPACE, Distribution


@dataclass(frozen=True)
class ModelEntry:
    """One model: ``estimator(**fixed, **params)`` with ``params`` drawn from
    ``search_space``; adding ``fast`` solves the same program with less work (a faster solver,
    the same optimum)."""

    estimator: Callable[..., BaseEstimator]
    search_space: Mapping[str, Distribution]
    fixed: Mapping[str, Any] = field(default_factory=dict)
    fast: Mapping[str, Any] = field(default_factory=dict)

    def make(self, **params: object) -> BaseEstimator:
        return self.estimator(**{**self.fixed, **params})


REGISTRY: MappingProxyType[str, ModelEntry] = MappingProxyType({
    # the physics-constrained network of the paper: consumption is never negative
    "wadiro_pcscnn": ModelEntry(WaDiRoSCNN, SCNN_SPACE, fixed={"lower_bound": 0.0},
                                fast={"solver": "ipm"}),
    "wadiro_scnn": ModelEntry(WaDiRoSCNN, SCNN_SPACE, fast={"solver": "ipm"}),
    "gp": ModelEntry(GaussianProcessBaseline, GP_SPACE, fast={"method": "cholesky"}),
    "svr": ModelEntry(LinearSVRBaseline, SVR_SPACE, fast={"solver": "auto"}),
    "wadiro_linreg": ModelEntry(WaDiRoLinearRegression, LINREG_SPACE,
                                fast={"solver": "clarabel-direct"}),
})
"""Model name -> its entry, in the order runs list the models."""

SEARCH_SPACES: MappingProxyType[str, Mapping[str, Distribution]] = MappingProxyType(
    {name: entry.search_space for name, entry in REGISTRY.items()})
"""Model name -> search space (the paper's Table "Hyperparameters of the building
experiment")."""


def make_model(name: str, **params: object) -> BaseEstimator:
    """A new, unfitted estimator for model ``name`` with ``params`` set."""
    try:
        entry = REGISTRY[name]
    except KeyError:
        raise UnknownModelError(
            f"unknown model {name!r}; known models: {', '.join(sorted(REGISTRY))}"
        ) from None
    return entry.make(**params)


__all__ = ["REGISTRY", "SEARCH_SPACES", "ModelEntry", "make_model"]
