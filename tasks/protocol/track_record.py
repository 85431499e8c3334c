"""A building's recent record: how each model did in the target weeks before this one.

Known when a week's forecast is issued (those weeks are over), it serves twice: the
publication step weighs each model's recent MAE against seasonal naive's, and each model's
intervals adapt their level to the coverage they missed (adaptive conformal inference, after
Gibbs and Candes 2021): a model whose 80 % intervals covered only 72 % of the hours in its last
weeks uses the 88 % quantile of its validation errors this week, and one that over-covered
narrows them, so coverage tracks the nominal level when the weeks are not exchangeable.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import date

import numpy as np

from tasks.protocol.intervals import nested_quantiles
from tasks.protocol.models import SEASONAL_NAIVE

RECORD_WEEKS = 8
"""How many earlier scored weeks of a building the intervals' adaptation counts (and, unless a
run says otherwise, the publication step)."""

MIN_RECORD_WEEKS = 2
"""Fewer earlier weeks than this are not a record."""

LEVEL_RANGE = (0.5, 0.99)
"""The adapted interval levels stay within these."""


@dataclass(frozen=True)
class WeekScore:
    """One model's MAE in one earlier week, and its intervals' coverage there per level."""

    mae: float
    coverage: Mapping[float, float] = field(default_factory=dict)


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
                   levels: Iterable[float]) -> dict[float, float]:
    """Per nominal interval level, the level to use this week: the nominal one plus the mean
    coverage ``model`` missed in its recent weeks (minus what it over-covered), never below a
    narrower level's (each level adapts on its own record, so after a step the 80 % level can
    have missed more than the 95 % one: :func:`~tasks.protocol.intervals.nested_quantiles`)."""
    adapted = {}
    for level in levels:
        seen = [scores[model].coverage[level] for scores in _recent(record or {})
                if model in scores and level in scores[model].coverage]
        shift = level - float(np.mean(seen)) if len(seen) >= MIN_RECORD_WEEKS else 0.0
        adapted[level] = float(np.clip(level + shift, *LEVEL_RANGE))
    return nested_quantiles(adapted)


def week_scores(outcomes: Iterable[object]) -> dict[str, WeekScore]:
    """What a finished week adds to the record: each scored model's MAE and coverage."""
    return {
        o.model: WeekScore(o.scores.mae, dict(o.scores.interval_coverage))
        for o in outcomes
        if o.status == "ok" and o.scores is not None and o.scores.mae is not None
    }
