"""Forecast quantiles and prediction intervals by split conformal prediction.

A model fitted on the history's first weeks forecasts its last week (the validation week); its
signed errors there (actual minus forecast) calibrate the target week's quantiles: for a level
tau the forecast plus the k-th smallest of the n errors, k = ceil((n + 1) tau) above the median
and floor((n + 1) tau) below it (the median itself: the errors' median). Under exchangeability of
the two weeks' errors an upper level then holds at least tau of the target week's hours at or
below it and a lower level at most tau, so the band between two of them (the 80 % band: the 10
and 90 % quantiles; the 95 % band: 2.5 and 97.5 %) covers at least its level on average. Errors
need not be symmetric: a building whose load overshoots more than it falls short gets a longer
upper tail. The protocol pools the validation week's errors with the model's own errors of its
last scored weeks, weighs each by its age (weighted conformal prediction, Barber et al. 2023:
:func:`age_weights`, :func:`error_quantile`) and ranks them relative to their hour of the day's
typical size (:func:`~tasks.protocol.forecasting._quantiles`, :data:`QuantileScale`).

The quantiles never cross, by construction: the levels actually used (where a run adapts them to
what each level held in earlier weeks, :mod:`~tasks.protocol.track_record`) are made
non-decreasing first, and
the order statistics of one sample are then non-decreasing too; a level below the median is
never above the forecast and one above it never below (a monotone clip), and none is below the
physical floor (no negative energy). So in every hour the 95 % lower bound <= the 80 % lower
bound <= the forecast <= the 80 % upper bound <= the 95 % upper bound.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import pandas as pd

QUANTILES: tuple[float, ...] = (0.025, 0.05, 0.10, 0.25, 0.50, 0.75, 0.90, 0.95, 0.975)
"""Quantile levels published with every forecast (a distribution an operator bids from)."""

BANDS: dict[float, tuple[float, float]] = {0.80: (0.10, 0.90), 0.95: (0.025, 0.975)}
"""Each published interval level and the pair of quantile levels that bound it."""

LEVELS: tuple[float, ...] = tuple(BANDS)
"""Interval levels published with every forecast."""

MIN_CALIBRATION = 24
"""Fewer calibration errors than this give no quantile (too few to rank)."""

QuantileScale = Literal["constant", "hour_of_day"]
"""How the calibration errors are scaled before they are ranked: ``constant`` (not at all: every
hour of the target week gets the same offsets from its forecast) or ``hour_of_day`` (each error
divided by its hour of the day's typical size, the quantiles multiplied back by the target
hour's: wide in the hours a building's load varies, narrow at night; normalized conformal
prediction, Papadopoulos et al. 2008, Lei et al. 2018)."""

SCALE_NEIGHBOURS = 1
"""An hour of the day's typical error size is the mean absolute error of it and this many hours
on each side (over the calibration week's days): 21 errors from a week."""

SCALE_FLOOR = 0.25
"""No hour's typical error size is below this share of the mean absolute error (a night whose
errors were all tiny in one week is not certain the next)."""


def quantile_suffix(level: float, sep: str = "_") -> str:
    """A quantile level's name in columns: ``q2_5`` for 0.025 in the warehouse (``sep="."``:
    ``q2.5``, as an export names it), ``q10`` for 0.10."""
    return "q" + f"{100 * level:.10g}".replace(".", sep)


def quantile_name(level: float, sep: str = "_") -> str:
    """A quantile level's forecast column: ``y_q2_5`` (``y_q2.5`` in an export), ``y_q10``."""
    return "y_" + quantile_suffix(level, sep)


QUANTILE_COLUMNS: tuple[str, ...] = tuple(quantile_name(level) for level in QUANTILES)
"""The warehouse's quantile columns, lowest level first."""


RANK_TOLERANCE = 1e-9
"""Cumulative weights equal to a level's share up to rounding reach it (equal weights of 1
then give exactly the unweighted ranks)."""


def error_quantile(sorted_errors: np.ndarray, level: float, side: float,
                   weights: np.ndarray | None = None) -> float:
    """The conformal quantile of signed errors (sorted, finite, at least one) at ``level``,
    conservative on ``side``'s side of the median (``side``: the nominal level, which decides
    whether the rank is rounded up or down; module docstring).

    With ``weights`` (one per error, in the errors' order, positive; the target hour weighs 1)
    it is the weighted conformal quantile (Barber et al. 2023): above the median the smallest
    error whose cumulative weight reaches ``level`` of the total plus the target's, below it
    the mirror image; equal weights of 1 give the ranks above."""
    n = sorted_errors.size
    if weights is None:
        if side == 0.5:
            return float(np.median(sorted_errors))
        rank = math.ceil((n + 1) * level) if side > 0.5 else math.floor((n + 1) * level)
        return float(sorted_errors[min(max(rank, 1), n) - 1])
    weights = np.asarray(weights, dtype=float)
    if side == 0.5:  # the weighted median (between two errors that split the weight evenly)
        cumulative = np.cumsum(weights)
        half = cumulative[-1] / 2
        index = min(int(np.searchsorted(cumulative, half - RANK_TOLERANCE)), n - 1)
        if abs(cumulative[index] - half) <= RANK_TOLERANCE and index + 1 < n:
            return float((sorted_errors[index] + sorted_errors[index + 1]) / 2)
        return float(sorted_errors[index])
    total = float(weights.sum()) + 1.0
    if side > 0.5:
        cumulative = np.cumsum(weights)
        index = int(np.searchsorted(cumulative, level * total - RANK_TOLERANCE))
        return float(sorted_errors[min(index, n - 1)])
    from_top = np.cumsum(weights[::-1])
    index = int(np.searchsorted(from_top, (1.0 - level) * total - RANK_TOLERANCE))
    return float(sorted_errors[max(n - 1 - index, 0)])


def age_weights(calibration_ts: pd.DatetimeIndex, target_start: pd.Timestamp,
                halflife_weeks: float | None) -> np.ndarray | None:
    """Each calibration error's weight by its age: an error of the week just before the target
    week (the validation week, the latest scored week) weighs 1, one a week older
    ``0.5 ** (1 / halflife_weeks)``, and so on (the target hour itself weighs 1). ``None``
    (equal weights) without a half-life (``None`` or 0)."""
    if not halflife_weeks:
        return None
    age = np.ceil((target_start - pd.DatetimeIndex(calibration_ts)) / pd.Timedelta(weeks=1))
    return 0.5 ** (np.maximum(np.asarray(age, dtype=float) - 1.0, 0.0) / halflife_weeks)


@dataclass(frozen=True)
class Intervals:
    """A forecast's quantiles per level and its intervals' lower and upper bounds per interval
    level (each an array like the forecast; an interval's bounds are two of the quantiles)."""

    lower: dict[float, np.ndarray] = field(default_factory=dict)
    upper: dict[float, np.ndarray] = field(default_factory=dict)
    quantiles: dict[float, np.ndarray] = field(default_factory=dict)

    def bounds(self, level: float) -> tuple[np.ndarray, np.ndarray] | None:
        if level not in self.lower:
            return None
        return self.lower[level], self.upper[level]


def nested_quantiles(used: Mapping[float, float]) -> dict[float, float]:
    """Per nominal level, the level to use, made non-decreasing in the nominal level: a higher
    level takes at least a lower one's (a 10 % level adapted up to 0.30 after weeks below it
    lifts the 25 % level's to 0.30 too), so their quantiles never cross."""
    nested, highest = {}, 0.0
    for level in sorted(used):
        highest = max(highest, float(used[level]))
        nested[level] = highest
    return nested


def hour_of_day_scales(errors: np.ndarray, calibration_ts: pd.DatetimeIndex,
                       target_ts: pd.DatetimeIndex) -> tuple[np.ndarray, np.ndarray]:
    """Each calibration hour's and each target hour's typical error size: the mean absolute
    calibration error of its UTC hour of the day and :data:`SCALE_NEIGHBOURS` hours on each
    side, at least :data:`SCALE_FLOOR` of the mean absolute error (positive: never 0)."""
    magnitude = np.abs(np.asarray(errors, dtype=float))
    finite = np.isfinite(magnitude)
    hours = np.asarray(calibration_ts.hour)
    total = np.bincount(hours[finite], magnitude[finite], minlength=24)
    count = np.bincount(hours[finite], minlength=24).astype(float)
    window = np.arange(-SCALE_NEIGHBOURS, SCALE_NEIGHBOURS + 1)
    near_total = sum(np.roll(total, k) for k in window)
    near_count = sum(np.roll(count, k) for k in window)
    overall = float(magnitude[finite].mean()) if finite.any() else 0.0
    typical = np.where(near_count > 0, near_total / np.maximum(near_count, 1), overall)
    typical = np.maximum(typical, max(SCALE_FLOOR * overall, np.finfo(float).tiny))
    return typical[hours], typical[np.asarray(target_ts.hour)]


def conformal_intervals(
    y_hat: np.ndarray, calibration_errors: np.ndarray, *,
    levels: Iterable[float] | Mapping[float, float] = QUANTILES, floor: float = 0.0,
    scale: QuantileScale = "constant", calibration_ts: pd.DatetimeIndex | None = None,
    target_ts: pd.DatetimeIndex | None = None, weights: np.ndarray | None = None,
) -> Intervals:
    """The quantiles of the forecast ``y_hat`` at each level (``calibration_errors``: actual
    minus forecast in the validation week), clipped below at ``floor``, non-crossing and each
    on its side of the forecast (module docstring), and the intervals they bound (:data:`BANDS`,
    where both levels are given).

    ``levels`` may map each nominal level to the level actually used (adapted to what it held
    in earlier weeks); everything is keyed by the nominal level. With fewer than
    :data:`MIN_CALIBRATION` finite errors there is none. ``scale`` ``hour_of_day`` (with the
    errors' UTC hours ``calibration_ts`` and the forecast's ``target_ts``) ranks the errors
    relative to their hour of the day's typical size (:data:`QuantileScale`). ``weights`` (one
    per calibration error, :func:`age_weights`) makes the quantiles weighted conformal ones
    (:func:`error_quantile`).
    """
    y_hat = np.asarray(y_hat, dtype=float)
    used = levels if isinstance(levels, Mapping) else {level: level for level in levels}
    errors = np.asarray(calibration_errors, dtype=float)
    size = np.ones_like(y_hat)
    if scale == "hour_of_day" and calibration_ts is not None and target_ts is not None:
        own, size = hour_of_day_scales(errors, pd.DatetimeIndex(calibration_ts),
                                       pd.DatetimeIndex(target_ts))
        errors = errors / own
    finite = np.isfinite(errors)
    errors = errors[finite]
    order = np.argsort(errors, kind="stable")
    errors = errors[order]
    if weights is not None:
        weights = np.asarray(weights, dtype=float)[finite][order]
    out = Intervals()
    if errors.size < MIN_CALIBRATION:
        return out
    for level, quantile in nested_quantiles(used).items():
        value = y_hat + size * error_quantile(errors, quantile, level, weights)
        if level < 0.5:
            value = np.fmin(value, y_hat)
        elif level > 0.5:
            value = np.fmax(value, y_hat)
        out.quantiles[level] = np.maximum(value, floor)
    for band, (low, high) in BANDS.items():
        if low in out.quantiles and high in out.quantiles:
            # a forecast below ``floor`` (a model without one) keeps its lower bound at most it
            out.lower[band] = np.fmin(out.quantiles[low], y_hat)
            out.upper[band] = out.quantiles[high]
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


def pinball_loss(y_true: np.ndarray, quantile: np.ndarray, level: float) -> float | None:
    """Mean pinball (quantile) loss of ``quantile`` at ``level`` against the actuals, over the
    hours where both exist (``None`` when there is none): ``level * (y - q)`` where the actual
    is above the quantile, ``(1 - level) * (q - y)`` where below. Averaged over a grid of levels
    it estimates half the CRPS of the forecast distribution."""
    y_true, quantile = np.asarray(y_true, dtype=float), np.asarray(quantile, dtype=float)
    mask = np.isfinite(y_true) & np.isfinite(quantile)
    if not mask.any():
        return None
    diff = y_true[mask] - quantile[mask]
    return float(np.mean(np.maximum(level * diff, (level - 1.0) * diff)))


def share_below(y_true: np.ndarray, quantile: np.ndarray) -> float | None:
    """Share of hours whose actual is at or below ``quantile`` (a calibrated level ``tau``
    holds ``tau`` of them), over the hours where both exist (``None`` when there is none)."""
    y_true, quantile = np.asarray(y_true, dtype=float), np.asarray(quantile, dtype=float)
    mask = np.isfinite(y_true) & np.isfinite(quantile)
    if not mask.any():
        return None
    return float(np.mean(y_true[mask] <= quantile[mask]))
