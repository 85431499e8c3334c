"""Which forecast of a building-week is published: the paper's select-check-deploy loop.

Only what is known when the forecast is issued decides: each model's error on the validation
week (forecast from the weeks before it: by tuning, a refit, or the forecast issued a week
earlier under tuning reuse), its record on this building's earlier
weeks, its solver status, whether its forecast is physically sane (complete, never
negative) and whether the weather it reads was forecast or mostly filled in (the window leaves
out every weather input missing for more than
:data:`~tasks.protocol.windows.MAX_FILLED_WEATHER_SHARE` of the target week's hours,
so no input a model reads is more guessed than that; a model reading more filled-in weather is
not trusted). A model is published only when it is expected to beat the persistence forecast
(``seasonal_naive``, last week's load); otherwise seasonal naive is published, and so whenever
every other model failed.

Every choice carries its reason and its :attr:`Publication.outcome`, so that a week in which
no learned forecast could be trusted is never counted as a healthy one: ``learned`` (a learned
model, or a combination of at least two), ``persistence`` (a persistence forecast chosen over
trusted learned models that were not expected to beat it) or ``degraded`` (a persistence
forecast because no learned forecast could be trusted or run that week). A fourth,
``held``, is set after the choice (:mod:`~tasks.protocol.bid_check`): whatever was chosen, its
level is an order of magnitude off what is known of the building, so it is stored but never
bid (left out of every portfolio and export, and the run exits non-zero).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

import numpy as np

from tasks.protocol.models import MODELS, SEASONAL_NAIVE
from tasks.protocol.scoring import count_violations
from tasks.protocol.track_record import RECORD_WEEKS, TrackRecord, track_ratio
from tasks.protocol.windows import MAX_FILLED_WEATHER_SHARE

LEARNED = "learned"
PERSISTENCE = "persistence"
DEGRADED = "degraded"
HELD = "held"
HELD_PREFIX = "held out of every bid"
"""How a held publication's reason begins."""
OUTCOMES = (LEARNED, PERSISTENCE, DEGRADED, HELD)
"""What kind of forecast a building-week published (:attr:`Publication.outcome`)."""


@dataclass(frozen=True)
class Candidate:
    """What is known of one model's forecast when it is issued."""

    model: str
    y_hat: np.ndarray | None
    validation_mae: float | None
    solver_status: str | None = None
    failed: str | None = None
    """Why the model produced nothing (``None`` when it did)."""
    l_eps: float | None = None
    l_eps_status: str | None = None
    """Its stability certificate (kWh) and status; ``None`` for models that have none."""
    reads_weather: bool = False
    """Whether its forecast depends on the target week's weather."""

    @property
    def learned(self) -> bool:
        """Whether it is a learned forecast: a fitted model, or a combination (one is formed
        only of at least two trusted learned members)."""
        spec = MODELS.get(self.model)
        return spec is not None and (spec.is_learned or spec.combination)


@dataclass(frozen=True)
class Publication:
    """The forecast published for a building-week, and why."""

    model: str
    reason: str
    expected_ratio: float | None = None
    """The published model's expected MAE relative to seasonal naive (1.0 for seasonal naive)."""
    outcome: str = LEARNED
    """One of :data:`OUTCOMES` (module docstring)."""
    ensemble_members: tuple[str, ...] = ()
    """The models the week's ensemble combined (empty: no ensemble that week)."""


def member_problem(candidate: Candidate, forecastable: np.ndarray,
                   weather_filled: float = 0.0) -> str | None:
    """Why a model's forecast cannot go into a combination this week (``None`` when it can):
    the checks of publication, but for negative hours, which the combination's floor clips."""
    return _problem(candidate, forecastable, None, weather_filled, allow_negative=True)


def _problem(candidate: Candidate, forecastable: np.ndarray,
             max_l_eps: float | None = None, weather_filled: float = 0.0,
             allow_negative: bool = False) -> str | None:
    """Why a candidate cannot be trusted this week (``None`` when it can)."""
    if candidate.failed is not None or candidate.y_hat is None:
        return f"failed ({candidate.failed})"
    if candidate.reads_weather and weather_filled > MAX_FILLED_WEATHER_SHARE:
        return f"the target week's weather is {weather_filled:.0%} filled in"
    if max_l_eps is not None and candidate.l_eps_status is not None:
        if candidate.l_eps is None:
            return f"no stability certificate ({candidate.l_eps_status})"
        if candidate.l_eps > max_l_eps:
            return f"L_eps {candidate.l_eps:.3g} kWh above {max_l_eps:g}"
    if candidate.solver_status not in (None, "optimal"):
        return f"solver status {candidate.solver_status}"
    if not np.isfinite(candidate.y_hat[forecastable]).all():
        return "incomplete forecast"
    if not allow_negative and count_violations(candidate.y_hat):
        return "negative forecasts"
    if candidate.validation_mae is None:
        return "no validation error"
    return None


def choose_publication(
    candidates: Sequence[Candidate],
    forecastable: np.ndarray,
    record: TrackRecord | None = None,
    max_l_eps: float | None = None,
    weather_filled: float = 0.0,
    weighting: str = "record",
    record_weeks: int = RECORD_WEEKS,
    learned_in_run: bool = True,
    prefer: str | None = None,
) -> Publication | None:
    """The forecast to publish among ``candidates`` (seasonal naive among them), or ``None``
    when not even seasonal naive has a value (last week's load is missing).

    ``forecastable`` marks the target week's hours that have every input; ``record`` is the
    building's recent record: a model's MAE relative to seasonal naive in up to
    ``record_weeks`` earlier weeks. Once it holds at least 2, a model's expected ratio is the
    mean over its validation week and those weeks (``weighting="record"``: the validation week
    is one more week of record), or the mean of its validation-week ratio and its record's mean
    (``"validation"``: the validation week weighs as much as the whole record). With
    ``max_l_eps``, a model whose stability certificate is above it (or failed) is not trusted.
    ``weather_filled`` is the largest share of the target week's hours any weather input had
    filled in. A persistence forecast published because no learned forecast could be trusted is
    ``degraded`` when the run asked for learned models (``learned_in_run``), else
    ``persistence``: a run of persistence forecasts alone is what it was asked to be.
    ``prefer`` names a model (the combination) published whenever it is trusted and expected to
    beat seasonal naive, whatever the others' expectations: on the development years always
    publishing the combination beat choosing a model per building-week.
    """
    by_model = {c.model: c for c in candidates}
    naive = by_model.get(SEASONAL_NAIVE)
    if naive is None or naive.y_hat is None or not np.isfinite(naive.y_hat).any():
        return None
    fallback = DEGRADED if learned_in_run else PERSISTENCE
    if not naive.validation_mae:
        return Publication(SEASONAL_NAIVE, "no validation week to compare the models on", 1.0,
                           fallback)
    scored: list[tuple[float, str, str]] = []
    rejected: list[str] = []
    trusted_learned = False
    for candidate in candidates:
        if candidate.model == SEASONAL_NAIVE:
            continue
        problem = _problem(candidate, forecastable, max_l_eps, weather_filled)
        if problem is not None:
            rejected.append(f"{candidate.model}: {problem}")
            continue
        trusted_learned |= candidate.learned
        ratio = candidate.validation_mae / naive.validation_mae
        why = f"validation MAE {ratio:.2f}x seasonal naive"
        track = track_ratio(candidate.model, record or {}, record_weeks)
        if track is not None:
            share = 1.0 / (track[1] + 1) if weighting == "record" else 0.5
            ratio = share * ratio + (1.0 - share) * track[0]
            why += f", {track[0]:.2f}x over the {track[1]} previous weeks"
        scored.append((ratio, candidate.model, why))
    skipped = f"; not trusted: {'; '.join(rejected)}" if rejected else ""
    preferred = next((entry for entry in scored if entry[1] == prefer), None)
    if preferred is not None and preferred[0] < 1.0:
        ratio, model, why = preferred
        return Publication(model, f"the combination, expected {ratio:.2f}x seasonal naive's "
                           f"MAE ({why}){skipped}", ratio, LEARNED)
    if not scored:
        return Publication(SEASONAL_NAIVE, f"no learned model to publish{skipped}", 1.0,
                           fallback)
    persistence = PERSISTENCE if trusted_learned else fallback
    untrusted = "" if trusted_learned else "; no learned forecast could be trusted"
    ratio, model, why = min(scored)
    if ratio >= 1.0:
        return Publication(
            SEASONAL_NAIVE, f"no model expected to beat seasonal naive (best: {model}, {why})"
            f"{untrusted}{skipped}", 1.0, persistence)
    if not by_model[model].learned:
        return Publication(model, f"expected {ratio:.2f}x seasonal naive's MAE ({why})"
                           f"{untrusted}{skipped}", ratio, persistence)
    return Publication(model, f"expected {ratio:.2f}x seasonal naive's MAE ({why}){skipped}",
                       ratio, LEARNED)


def publish_certified(
    choose: Callable[[], Publication | None], certify: Callable[[str], None],
    certifiable: Collection[str], required: bool,
) -> Publication | None:
    """The publication when only the published network is certified: choose, certify the
    chosen network (``certify(model)`` records its certificate where ``choose`` reads it). When
    a certificate is ``required`` to publish, a network it disqualifies is passed over: choose
    again, certifying each newly chosen network, until the choice stands."""
    publication = choose()
    certified: set[str] = set()
    while (publication is not None and publication.model in certifiable
           and publication.model not in certified):
        certify(publication.model)
        certified.add(publication.model)
        if not required:
            break
        publication = choose()
    return publication
