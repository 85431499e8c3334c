"""A building's recent record: how each model did in the target weeks before this one.

Known when a week's forecast is issued (those weeks are over), it serves twice: the
publication step weighs each model's recent MAE against seasonal naive's, its hourly errors
calibrate the model's quantiles (:func:`recent_errors`), and where a run asks for it
(``quantile_adaptation_gain``) each quantile adapts its level to what it held (adaptive
conformal inference, after Gibbs and Candes 2021): at a gain of 1 a model whose 90 % quantile
had only 84 % of the hours at or below it in its last weeks uses the 96 % quantile of its
calibration errors this week, and one whose 10 % quantile held 16 % uses the 4 %. A week scored
before quantiles were (only its intervals' coverage is known)
counts for the levels that bound an interval, its missed coverage split evenly between the
two tails.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import date

import numpy as np

from tasks.protocol.intervals import BANDS, QUANTILES, nested_quantiles
from tasks.protocol.models import SEASONAL_NAIVE

RECORD_WEEKS = 8
"""How many earlier scored weeks of a building the intervals' adaptation counts (and, unless a
run says otherwise, the publication step)."""

MIN_RECORD_WEEKS = 2
"""Fewer earlier weeks than this are not a record."""

LEVEL_RANGE = (0.005, 0.995)
"""The adapted quantile levels stay within these (and on their nominal level's side of the
median)."""


@dataclass(frozen=True)
class WeekScore:
    """One model's MAE in one earlier week, its intervals' coverage there per level and the
    share of hours at or below each of its quantiles."""

    mae: float
    coverage: Mapping[float, float] = field(default_factory=dict)
    below: Mapping[float, float] = field(default_factory=dict)
    hours: np.ndarray | None = None
    """The week's scored hours (epoch microseconds, UTC), with ``errors``."""
    errors: np.ndarray | None = None
    """Actual minus the forecast as issued, per hour of ``hours`` (float32): with the
    validation week's errors, what the model's next quantiles are calibrated on
    (:func:`recent_errors`)."""

    def held(self, level: float) -> float | None:
        """The share of hours at or below the quantile at ``level``; for a week scored before
        quantiles were, read from the coverage of the interval it bounds (module docstring)."""
        if level in self.below:
            return self.below[level]
        for band, (low, high) in BANDS.items():
            if level in (low, high) and band in self.coverage:
                missed = (1.0 - self.coverage[band]) / 2
                return missed if level == low else 1.0 - missed
        return None


TrackRecord = Mapping[date, Mapping[str, WeekScore]]
"""Earlier target week -> model -> how it did."""


def _recent(record: TrackRecord, weeks: int = RECORD_WEEKS) -> list[Mapping[str, WeekScore]]:
    return [scores for _, scores in sorted(record.items())[-weeks:]]


def track_ratio(model: str, record: TrackRecord,
                weeks: int = RECORD_WEEKS) -> tuple[float, int] | None:
    """Mean of ``model``'s MAE relative to seasonal naive over the building's last ``weeks``
    scored weeks, and their number; ``None`` when too few."""
    ratios = [
        scores[model].mae / scores[SEASONAL_NAIVE].mae
        for scores in _recent(record, weeks)
        if model in scores and SEASONAL_NAIVE in scores and scores[SEASONAL_NAIVE].mae
        and np.isfinite(scores[model].mae)
    ]
    if len(ratios) < MIN_RECORD_WEEKS:
        return None
    return float(np.mean(ratios)), len(ratios)


def adapted_levels(model: str, record: TrackRecord | None,
                   levels: Iterable[float] = QUANTILES, gain: float = 1.0) -> dict[float, float]:
    """Per nominal quantile level, the level to use this week: the nominal one plus ``gain``
    times what ``model``'s quantile fell short of holding in its recent weeks (minus what it
    held too many), kept on its side of the median and never below a lower level's (each level
    adapts on its own record, so after a step a lower level can have risen past a higher one:
    :func:`~tasks.protocol.intervals.nested_quantiles`)."""
    adapted = {}
    for level in levels:
        seen = [held for scores in _recent(record or {}) if model in scores
                for held in [scores[model].held(level)] if held is not None] if gain else []
        shift = gain * (level - float(np.mean(seen))) if len(seen) >= MIN_RECORD_WEEKS else 0.0
        low, high = LEVEL_RANGE
        if level < 0.5:
            high = 0.5
        elif level > 0.5:
            low = 0.5
        adapted[level] = float(np.clip(level + shift, low, high))
    return nested_quantiles(adapted)


def recent_errors(model: str, record: TrackRecord | None,
                  weeks: int = RECORD_WEEKS) -> tuple[np.ndarray, np.ndarray]:
    """``model``'s hourly errors (actual minus its forecast as issued) in its last ``weeks``
    scored weeks with errors kept, and their hours (epoch microseconds); empty arrays for none
    (or ``weeks`` 0)."""
    kept = [scores[model] for scores in _recent(record or {}, weeks) if weeks > 0
            and model in scores and scores[model].errors is not None]
    if not kept:
        return np.empty(0, np.int64), np.empty(0)
    return (np.concatenate([w.hours for w in kept]),
            np.concatenate([w.errors for w in kept]).astype(np.float64))


def week_scores(outcomes: Iterable[object], hours: np.ndarray | None = None,
                actual: np.ndarray | None = None) -> dict[str, WeekScore]:
    """What a finished week adds to the record: each scored model's MAE, coverage and
    quantiles' calibration, and with the week's ``hours`` (epoch microseconds) and their
    ``actual`` load its hourly errors (the scored hours only)."""
    scored = None if actual is None else np.isfinite(actual)
    record = {}
    for o in outcomes:
        if o.status != "ok" or o.scores is None or o.scores.mae is None:
            continue
        errors = None
        if scored is not None and o.y_hat is not None and len(o.y_hat) == len(actual):
            keep = scored & np.isfinite(o.y_hat)
            errors = (actual[keep] - np.asarray(o.y_hat)[keep]).astype(np.float32)
        record[o.model] = WeekScore(
            o.scores.mae, dict(o.scores.interval_coverage), dict(o.scores.quantile_below),
            None if errors is None else np.asarray(hours)[keep], errors)
    return record
