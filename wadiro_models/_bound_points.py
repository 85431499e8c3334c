"""Bound points: inputs beyond the training set where the physical bounds must hold too.

A forecast's inputs (the calendar and weather of the week to forecast) are known when it is
issued, so ``y_hat >= 0`` can be imposed on them inside the training program, not just on
the training samples. :func:`bound_points` validates what ``fit`` receives (the points in the
units of X, the bounds in the units of y); :meth:`BoundPoints.to_program_units` maps them
exactly as ``predict`` maps its input (the training standardisation, the kept gates), so the
program's ``y_hat_B`` is what ``predict`` returns there.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from sklearn.utils.validation import check_array

from ._constraints import _per_sample, check_bound_pair
from ._gates import activation_patterns, augment
from ._scaling import Standardization
from .exceptions import InvalidInputError


@dataclass(frozen=True)
class BoundPoints:
    """M points (M, d) in the units of X and their bounds (M,) in the units of y, ``-inf`` /
    ``+inf`` where absent; a bound is ``None`` when it is absent at every point."""

    X: np.ndarray
    lower: np.ndarray | None = None
    upper: np.ndarray | None = None

    @property
    def empty(self) -> bool:
        return self.X.shape[0] == 0 or (self.lower is None and self.upper is None)

    def to_program_units(
        self, scaling: Standardization, gates: np.ndarray, margin: float = 0.0
    ) -> dict:
        """The :class:`~wadiro_models.ScnnProgram` fields of these points (standardised,
        augmented, patterns under ``gates``), the bounds tightened by ``margin``; ``{}`` when
        there is nothing to impose."""
        if self.empty:
            return {}
        X_aug = augment(scaling.transform_X(self.X))
        return {
            "bound_X": X_aug,
            "bound_patterns": activation_patterns(X_aug, gates),
            "bound_lower": None if self.lower is None else scaling.level(self.lower) + margin,
            "bound_upper": None if self.upper is None else scaling.level(self.upper) - margin,
        }

    def max_violation(self, y_hat: np.ndarray) -> tuple[float, str]:
        """Largest violation by ``y_hat`` at the points (units of y) and where (0 if none)."""
        worst, where = 0.0, ""
        for name, excess in (
            ("bound_lower", None if self.lower is None else self.lower - y_hat),
            ("bound_upper", None if self.upper is None else y_hat - self.upper),
        ):
            if excess is None or excess.size == 0:
                continue
            k = int(np.argmax(excess))
            if excess[k] > worst:
                worst, where = float(excess[k]), f"{name} at bound point {k}"
        return worst, where


def bound_points(
    bound_X: object, bound_lower: object, bound_upper: object, n_features: int
) -> BoundPoints | None:
    """Validate the bound-point arguments of ``fit``; ``None`` when none are given.

    ``bound_X`` is array-like (M, n_features), finite; the bounds are scalars or (M,) arrays
    (``-inf`` / ``+inf`` where absent). A bound without points, or points without a bound,
    raise :class:`InvalidInputError`; a lower bound above the upper one at some point, or
    ``+inf`` / ``-inf`` bounds, :class:`InfeasibleConstraintsError`.
    """
    if bound_X is None:
        if bound_lower is not None or bound_upper is not None:
            raise InvalidInputError("bound_lower/bound_upper given without bound_X")
        return None
    if bound_lower is None and bound_upper is None:
        raise InvalidInputError("bound_X given without bound_lower or bound_upper")
    try:
        X = check_array(bound_X, dtype=np.float64, ensure_min_samples=0,
                        input_name="bound_X")
    except ValueError as exc:
        raise InvalidInputError(str(exc)) from exc
    if X.shape[1] != n_features:
        raise InvalidInputError(
            f"bound_X has {X.shape[1]} features, but the training data have {n_features}"
        )
    M = X.shape[0]
    lower = _per_sample(bound_lower, "bound_lower", M, -np.inf)
    upper = _per_sample(bound_upper, "bound_upper", M, np.inf)
    check_bound_pair(lower, upper, ("bound_lower", "bound_upper"), "bound point")
    return BoundPoints(X, lower, upper)
