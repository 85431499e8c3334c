"""Every model of the library, one entry each: its estimator, its search space, the constructor
arguments that make it the model it is, and those that compute the same program with less work.

A new model is one estimator class plus one entry here; the pipeline builds its own registry
from these entries. An entry names its estimator's class and imports it when a model is made, so
reading the registry (the model names, the search spaces) costs no import of scikit-learn, SciPy
or cvxpy.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from .exceptions import UnknownModelError
from .search_spaces import (
    GBR_SPACE,
    GP_SPACE,
    LINREG_SPACE,
    SCNN_SPACE,
    SVR_SPACE,
    Distribution,
)

if TYPE_CHECKING:
    from sklearn.base import BaseEstimator


@dataclass(frozen=True)
class ModelEntry:
    """One model: ``estimator(**fixed, **params)`` with ``params`` drawn from
    ``search_space``; adding ``fast`` solves the same program with less work (a faster solver,
    the same optimum). ``location`` is the estimator class's ``module:Class`` in this
    package."""

    location: str
    search_space: Mapping[str, Distribution]
    fixed: Mapping[str, Any] = field(default_factory=dict)
    fast: Mapping[str, Any] = field(default_factory=dict)
    projected_floor: float | None = None
    """The physical floor a model that cannot hold it inside its fit has its forecasts
    projected onto (the trees; the constrained network's is its fixed ``lower_bound``)."""

    @property
    def estimator(self) -> type[BaseEstimator]:
        """The estimator class (imported on first use)."""
        module, _, name = self.location.partition(":")
        return getattr(importlib.import_module(module, __package__), name)

    def make(self, **params: object) -> BaseEstimator:
        return self.estimator(**{**self.fixed, **params})


REGISTRY: MappingProxyType[str, ModelEntry] = MappingProxyType({
    # the physics-constrained network of the paper: consumption is never negative
    "wadiro_pcscnn": ModelEntry("._wadiro_scnn:WaDiRoSCNN", SCNN_SPACE,
                                fixed={"lower_bound": 0.0}, fast={"solver": "ipm"}),
    "wadiro_scnn": ModelEntry("._wadiro_scnn:WaDiRoSCNN", SCNN_SPACE, fast={"solver": "ipm"}),
    "gp": ModelEntry("._baselines:GaussianProcessBaseline", GP_SPACE,
                     fast={"method": "cholesky"}),
    "svr": ModelEntry("._baselines:LinearSVRBaseline", SVR_SPACE, fast={"solver": "auto"}),
    "wadiro_linreg": ModelEntry("._wadiro_linreg:WaDiRoLinearRegression", LINREG_SPACE,
                                fast={"solver": "clarabel-direct"}),
    # beyond the paper: the practitioner's gradient boosting, its forecasts projected on y >= 0
    # (fast: LightGBM grows the trees, on scikit-learn's bins)
    "gbr": ModelEntry("._boosting:GradientBoostingModel", GBR_SPACE, projected_floor=0.0,
                      fast={"engine": "lightgbm"}),
    # the same trees as a practitioner first runs them: scikit-learn's default settings
    # (the absolute loss), nothing tuned
    "gbr_lags": ModelEntry("._boosting:GradientBoostingModel", {}, projected_floor=0.0,
                           fast={"engine": "lightgbm"}),
})
"""Model name -> its entry, in the order runs list the models."""

SEARCH_SPACES: MappingProxyType[str, Mapping[str, Distribution]] = MappingProxyType(
    {name: entry.search_space for name, entry in REGISTRY.items()})
"""Model name -> search space (the paper's Table "Hyperparameters of the building
experiment"; the gradient boosting's is this library's own)."""


def estimator_modules() -> tuple[str, ...]:
    """The modules that define the registry's estimators, by absolute name: what a process
    that forks workers imports once, beforehand, so that no worker imports them itself."""
    modules = (entry.location.partition(":")[0] for entry in REGISTRY.values())
    return tuple(dict.fromkeys(importlib.util.resolve_name(m, __package__) for m in modules))


def make_model(name: str, **params: object) -> BaseEstimator:
    """A new, unfitted estimator for model ``name`` with ``params`` set."""
    try:
        entry = REGISTRY[name]
    except KeyError:
        raise UnknownModelError(
            f"unknown model {name!r}; known models: {', '.join(sorted(REGISTRY))}"
        ) from None
    return entry.make(**params)
