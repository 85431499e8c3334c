"""Prediction intervals by split conformal prediction.

A model fitted on the history's first weeks forecasts its last week (the validation week); the
absolute errors there calibrate the target week's intervals: for a level 1 - alpha the half
width is the ceil((n + 1)(1 - alpha))-th smallest of the n absolute errors. Under
exchangeability of the two weeks' errors this covers at least 1 - alpha of the target week's
hours on average. Lower bounds never go below the physical floor (no negative energy).

The levels are nested by construction: a wider level never uses a lower quantile of the errors
than a narrower one (whatever quantiles an adaptation asks for, :func:`nested_quantiles`), so
in every hour the 95 % lower bound <= the 80 % lower bound <= the forecast <= the 80 % upper
bound <= the 95 % upper bound.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

LEVELS: tuple[float, ...] = (0.80, 0.95)
"""Interval levels published with every forecast."""

MIN_CALIBRATION = 24
"""Fewer calibration errors than this give no interval (too few to rank)."""


def half_width(errors: np.ndarray, level: float) -> float | None:
    """The split-conformal half width for ``level`` from absolute calibration errors."""
    errors = np.sort(np.abs(np.asarray(errors, dtype=float)[np.isfinite(errors)]))
    n = errors.size
    if n < MIN_CALIBRATION:
        return None
    rank = math.ceil((n + 1) * level)
    return float(errors[min(rank, n) - 1])


@dataclass(frozen=True)
class Intervals:
    """Lower and upper bounds per level, each an array like the forecast."""

    lower: dict[float, np.ndarray] = field(default_factory=dict)
    upper: dict[float, np.ndarray] = field(default_factory=dict)

    def bounds(self, level: float) -> tuple[np.ndarray, np.ndarray] | None:
        if level not in self.lower:
            return None
        return self.lower[level], self.upper[level]


def nested_quantiles(used: Mapping[float, float]) -> dict[float, float]:
    """Per nominal level, the quantile level to use, made non-decreasing in the nominal level:
    a wider level takes at least a narrower one's quantile (an 80 % level adapted up to 0.99
    after missed weeks lifts the 95 % level's to 0.99 too), so its band is never the narrower."""
    nested, highest = {}, 0.0
    for level in sorted(used):
        highest = max(highest, float(used[level]))
        nested[level] = highest
    return nested


def conformal_intervals(
    y_hat: np.ndarray, calibration_errors: np.ndarray, *,
    levels: Sequence[float] | Mapping[float, float] = LEVELS, floor: float = 0.0,
) -> Intervals:
    """Symmetric intervals around ``y_hat`` at each level, clipped below at ``floor``, nested
    (module docstring).

    ``levels`` may map each nominal level to the quantile level actually used (adapted to the
    coverage seen in earlier weeks); the intervals are keyed by the nominal level. A lower
    bound is never above the forecast, even where a forecast below ``floor`` (a model without
    one, forecasting a negative hour) leaves the floor above it.
    """
    y_hat = np.asarray(y_hat, dtype=float)
    used = levels if isinstance(levels, Mapping) else {level: level for level in levels}
    out = Intervals()
    for level, quantile in nested_quantiles(used).items():
        width = half_width(calibration_errors, quantile)
        if width is None:
            continue
        out.lower[level] = np.fmin(np.maximum(y_hat - width, floor), y_hat)
        out.upper[level] = np.maximum(y_hat + width, floor)
    return out


def coverage(
    y_true: np.ndarray, lower: np.ndarray, upper: np.ndarray,
) -> tuple[float, float] | None:
    """Share of hours with an actual inside ``[lower, upper]`` and the mean width, over the
    hours where the actual and the bounds exist (``None`` when there is none)."""
    y_true = np.asarray(y_true, dtype=float)
    mask = np.isfinite(y_true) & np.isfinite(lower) & np.isfinite(upper)
    if not mask.any():
        return None
    inside = (y_true[mask] >= lower[mask]) & (y_true[mask] <= upper[mask])
    return float(inside.mean()), float(np.mean(upper[mask] - lower[mask]))
