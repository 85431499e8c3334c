"""Hyperparameter search spaces as plain data (paper, Table "Hyperparameters of the
building experiment"), for a tuner to read: estimator parameter name -> distribution. Which model
uses which space is its entry in :mod:`registry`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any


@dataclass(frozen=True)
class LogUniform:
    """A real drawn uniformly in log space on [low, high] (both > 0)."""

    low: float
    high: float

    def __post_init__(self) -> None:
        if not 0 < self.low < self.high:
            raise ValueError(f"LogUniform needs 0 < low < high, got [{self.low}, {self.high}]")


@dataclass(frozen=True)
class IntUniform:
    """An integer drawn uniformly from {low, ..., high} (both included)."""

    low: int
    high: int

    def __post_init__(self) -> None:
        if not self.low <= self.high:
            raise ValueError(f"IntUniform needs low <= high, got [{self.low}, {self.high}]")


@dataclass(frozen=True)
class Categorical:
    """One of a fixed tuple of choices."""

    choices: tuple[Any, ...]

    def __post_init__(self) -> None:
        if len(self.choices) == 0:
            raise ValueError("Categorical needs at least one choice")


Distribution = LogUniform | IntUniform | Categorical

_RADIUS = LogUniform(math.exp(-6), math.exp(1))
_WASSERSTEIN = Categorical(("l1", "l2"))
_GP_SCALE = LogUniform(math.exp(0.1), math.exp(5))

SCNN_SPACE: MappingProxyType[str, Distribution] = MappingProxyType(
    {"radius": _RADIUS, "max_neurons": IntUniform(10, 70), "wasserstein": _WASSERSTEIN})
LINREG_SPACE: MappingProxyType[str, Distribution] = MappingProxyType(
    {"radius": _RADIUS, "wasserstein": _WASSERSTEIN})
SVR_SPACE: MappingProxyType[str, Distribution] = MappingProxyType({
    "C": LogUniform(math.exp(0.1), math.exp(7)),
    "fit_intercept": Categorical((True, False)),
    "loss": Categorical(("l1", "l2")),
})
GBR_SPACE: MappingProxyType[str, Distribution] = MappingProxyType({
    "learning_rate": LogUniform(0.02, 0.3),
    "max_leaf_nodes": IntUniform(8, 64),
    "min_samples_leaf": IntUniform(5, 100),
    "l2_regularization": LogUniform(1e-3, 10.0),
})
"""Not in the paper: the gradient boosting's shrinkage, tree size and leaf regularisation
(the number of trees is fixed, so a fit's cost is)."""
GP_SPACE: MappingProxyType[str, Distribution] = MappingProxyType({
    "length_scale": _GP_SCALE,
    "periodicity": _GP_SCALE,
    "length_scale_sine": _GP_SCALE,
    "noise_level": LogUniform(math.exp(0.001), math.exp(2)),
})
