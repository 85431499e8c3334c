"""Physical constraints on the predictions (paper, Section 5): bounds and ramp limits.

Given in the units of y, per training sample (a scalar applies to every sample); validated
here so that a bad or contradictory specification fails before any solver runs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._scaling import Standardization
from .exceptions import InfeasibleConstraintsError, InvalidInputError


@dataclass(frozen=True)
class PhysicalLimits:
    """lower/upper: (N,) with -inf/+inf where absent; ramp: (N-1,) with +inf where absent.
    A field is ``None`` when that kind of constraint is not used at all."""

    lower: np.ndarray | None = None
    upper: np.ndarray | None = None
    ramp: np.ndarray | None = None

    @property
    def empty(self) -> bool:
        return self.lower is None and self.upper is None and self.ramp is None

    def to_program_units(self, scaling: Standardization, margin: float = 0.0) -> PhysicalLimits:
        """Convert to standardised units, tightened by ``margin`` (program units).

        The margin keeps solver round-off (~1e-9) from showing up as a violation; a ramp
        tighter than the margin is kept at 0 rather than made negative.
        """
        return PhysicalLimits(
            lower=None if self.lower is None else scaling.level(self.lower) + margin,
            upper=None if self.upper is None else scaling.level(self.upper) - margin,
            ramp=None if self.ramp is None else np.maximum(scaling.step(self.ramp) - margin, 0.0),
        )

    def max_violation(self, y_hat: np.ndarray) -> tuple[float, str]:
        """Largest violation by ``y_hat`` (same units) and where it happens (0 if none)."""
        worst, where = 0.0, ""
        checks = []
        if self.lower is not None:
            checks.append(("lower_bound", self.lower - y_hat, 0))
        if self.upper is not None:
            checks.append(("upper_bound", y_hat - self.upper, 0))
        if self.ramp is not None and y_hat.size > 1:
            checks.append(("ramp", np.abs(np.diff(y_hat)) - self.ramp, 1))
        for name, excess, offset in checks:
            j = int(np.argmax(excess))
            if excess[j] > worst:
                worst, where = float(excess[j]), f"{name} at sample {j + offset}"
        return worst, where


def _per_sample(value: object, name: str, length: int, fill: float) -> np.ndarray | None:
    if value is None:
        return None
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(f"{name} must be a number or an array of numbers: {exc}") from exc
    if arr.ndim == 0:
        arr = np.full(length, float(arr))
    elif arr.ndim != 1 or arr.shape[0] != length:
        raise InvalidInputError(
            f"{name} must be a scalar or have shape ({length},), got shape {arr.shape}"
        )
    if np.isnan(arr).any():
        j = int(np.flatnonzero(np.isnan(arr))[0])
        raise InvalidInputError(f"{name} is NaN at sample {j}")
    if np.all(arr == fill):
        return None
    return arr.copy()


def check_bound_pair(
    lower: np.ndarray | None, upper: np.ndarray | None, names: tuple[str, str], at: str
) -> None:
    """Raise :class:`InfeasibleConstraintsError` where the bounds ``names`` admit no value at
    some entry (``at`` names one): a lower bound ``+inf``, an upper ``-inf``, or lower > upper."""
    if lower is not None and np.isposinf(lower).any():
        raise InfeasibleConstraintsError(f"{names[0]} is +inf at some {at}")
    if upper is not None and np.isneginf(upper).any():
        raise InfeasibleConstraintsError(f"{names[1]} is -inf at some {at}")
    if lower is not None and upper is not None and (lower > upper).any():
        j = int(np.flatnonzero(lower > upper)[0])
        raise InfeasibleConstraintsError(
            f"{names[0]} {lower[j]:g} is above {names[1]} {upper[j]:g} at {at} {j}"
        )


def physical_limits(
    lower_bound: object, upper_bound: object, ramp: object, n_samples: int
) -> PhysicalLimits:
    """Validate and broadcast the constraint parameters of an estimator to arrays."""
    lower = _per_sample(lower_bound, "lower_bound", n_samples, -np.inf)
    upper = _per_sample(upper_bound, "upper_bound", n_samples, np.inf)
    steps = _per_sample(ramp, "ramp", max(n_samples - 1, 0), np.inf)
    check_bound_pair(lower, upper, ("lower_bound", "upper_bound"), "sample")
    if steps is not None and (steps < 0).any():
        j = int(np.flatnonzero(steps < 0)[0])
        raise InfeasibleConstraintsError(f"ramp limit is negative ({steps[j]:g}) at step {j}")
    return PhysicalLimits(lower=lower, upper=upper, ramp=steps)
