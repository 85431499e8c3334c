"""Scores of one forecast: errors where actuals exist, and physical-constraint violations.

A violation is an hour with ``y_hat < -VIOLATION_TOLERANCE_KWH``. The tolerance only absorbs the
solver's feasibility tolerance (an interior-point solution of the constrained model may sit at
-1e-10 kWh on an active bound); it is far below any meter's resolution.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike

from tasks.protocol.intervals import Intervals, coverage, pinball_loss, share_below

VIOLATION_TOLERANCE_KWH = 1e-6
"""y_hat below -tolerance is a violation of y_hat >= 0 (absorbs solver feasibility tolerance)."""


@dataclass(frozen=True)
class Scores:
    mae: float | None
    rmse: float | None
    n_hours: int
    n_violations: int
    n_train_violations: int
    mean_actual: float | None
    interval_coverage: dict[float, float] = field(default_factory=dict)
    """Per interval level: the share of scored hours whose actual lies inside the interval."""
    interval_width: dict[float, float] = field(default_factory=dict)
    """Per interval level: the mean width of the interval over the scored hours."""
    quantile_below: dict[float, float] = field(default_factory=dict)
    """Per quantile level: the share of scored hours whose actual is at or below the quantile
    (its calibration: a level tau should hold tau of them)."""
    pinball: dict[float, float] = field(default_factory=dict)
    """Per quantile level: the mean pinball loss over the scored hours (kWh)."""

    @property
    def pinball_mean(self) -> float | None:
        """The mean of the levels' pinball losses: the forecast distribution's score (an
        estimate of half its CRPS on the levels' grid); ``None`` without quantiles."""
        return float(np.mean(list(self.pinball.values()))) if self.pinball else None


def count_violations(y_hat: np.ndarray, lower: float = 0.0) -> int:
    """Hours whose prediction breaks ``y_hat >= lower`` beyond the tolerance (NaN never counts)."""
    y_hat = np.asarray(y_hat, dtype=float)
    return int(np.sum(y_hat < lower - VIOLATION_TOLERANCE_KWH))


def mean_absolute(errors: ArrayLike) -> float | None:
    """The mean absolute error of ``errors`` (``None`` when there are none): the one MAE of
    scoring, tuning and the validation record. The caller leaves out the hours without an
    actual; a NaN left in (a forecast missing at a scored hour) makes the result NaN."""
    return float(np.mean(np.abs(np.asarray(errors, dtype=float)))) if len(errors) else None


def score_forecast(
    y_true: np.ndarray, y_hat: np.ndarray, *, train_prediction: np.ndarray | None = None,
    intervals: Intervals | None = None,
) -> Scores:
    """MAE and RMSE over the hours where both the actual and the forecast exist, and the
    coverage and width of each prediction interval, and each quantile's calibration and
    pinball loss.

    Missing actuals are excluded, never treated as zero. With no scorable hour the errors are
    ``None`` and ``n_hours`` is 0, so a week without actuals (a live forecast) still records its
    violations.
    """
    y_true = np.asarray(y_true, dtype=float)
    y_hat = np.asarray(y_hat, dtype=float)
    if y_true.shape != y_hat.shape:
        raise ValueError(f"y_true has shape {y_true.shape} but y_hat has {y_hat.shape}")
    mask = np.isfinite(y_true) & np.isfinite(y_hat)
    n = int(mask.sum())
    error = y_hat[mask] - y_true[mask]
    covered, width = {}, {}
    for level, lower in (intervals.lower if intervals else {}).items():
        scored = coverage(y_true, lower, intervals.upper[level])
        if scored is not None:
            covered[level], width[level] = scored
    below, pinball = {}, {}
    for level, quantile in (intervals.quantiles if intervals else {}).items():
        share = share_below(y_true, quantile)
        if share is not None:
            below[level], pinball[level] = share, pinball_loss(y_true, quantile, level)
    return Scores(
        mae=mean_absolute(error),
        rmse=float(np.sqrt(np.mean(error**2))) if n else None,
        n_hours=n,
        n_violations=count_violations(y_hat),
        n_train_violations=0 if train_prediction is None else count_violations(train_prediction),
        mean_actual=float(np.mean(y_true[mask])) if n else None,
        interval_coverage=covered,
        interval_width=width,
        quantile_below=below,
        pinball=pinball,
    )
