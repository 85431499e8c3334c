"""The protocol over a batch of buildings: each building's hours and target weeks in, one
result per (building, week) out.

A batch carries its data (read from the warehouse by the run) and returns plain results:
nothing here opens the warehouse, so it runs the same on a thread, a process or a remote Dask
worker without a shared disk.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field, replace
from datetime import date, timedelta

import numpy as np
import pandas as pd
from threadpoolctl import threadpool_limits

from tasks.protocol.bid_check import bid_problem, history_range
from tasks.protocol.config import ForecastConfig
from tasks.protocol.features import LABEL, TS
from tasks.protocol.forecasting import (
    BuildingWeekResult,
    IssuedForecast,
    StoredParams,
    epoch_us,
    forecast_building_week,
)
from tasks.protocol.plausible_level import Yardstick, declared_yardstick
from tasks.protocol.publication import HELD, HELD_PREFIX
from tasks.protocol.track_record import WeekScore, week_scores
from tasks.protocol.weeks import local_midnight_utc
from wadiro_models.registry import estimator_modules

LOADED_ON_FIRST_USE = ("sklearn.exceptions", "wadiro_models.certification", *estimator_modules(),
                       "holidays.countries")
"""What a batch imports when it first needs it: the estimators and the certificates (loaded by
name, so that the run's own process, which imports this module for its types, does not import
scikit-learn, SciPy or cvxpy) and every country's holiday calendar (the ``holidays`` package
loads them all at its first look-up). A process that forks workers imports them once first."""


@dataclass(frozen=True)
class BuildingInfo:
    """What the protocol needs to know about a building (a row of the ``buildings`` table)."""

    building_id: str
    site_id: str
    timezone: str
    holiday_country: str
    holiday_subdiv: str | None
    building_type: str | None
    source: str
    floor_area_m2: float | None = None
    """Its declared floor area (m2; ``None``: not declared), with ``building_type`` what its
    forecast is judged against before it is bid (:mod:`~tasks.protocol.bid_check`)."""


@dataclass(frozen=True)
class BuildingJob:
    """One building's share of a run: its hours, its target weeks, its stored tuning."""

    info: BuildingInfo
    hours: pd.DataFrame
    weeks: tuple[date, ...]
    stored_params: dict[str, StoredParams] = field(default_factory=dict)
    track_record: dict[date, dict[str, WeekScore]] = field(default_factory=dict)
    """The building's earlier scored weeks: target week -> model -> MAE and coverage."""
    issued: dict[str, IssuedForecast] = field(default_factory=dict)
    """Each model's forecast issued for the week before the first target week (read under
    ``tuning="reuse"``, where it can stand in for the validation fit)."""
    issued_history: dict[str, IssuedForecast] = field(default_factory=dict)
    """Per base model of the run (a model others are stacked on), its forecasts as issued for
    the weeks before the first target week, by hour."""
    flagged_hours: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    """The hours (epoch microseconds, UTC) of ``hours`` whose reading an ingest flagged as
    implausible and no operator accepted: missing (NaN) in ``hours`` already; counted here
    so that the building-week's record and publication can say so."""
    recent_forecasts: dict[tuple[date, str], tuple[np.ndarray, np.ndarray]] = field(
        default_factory=dict)
    """(target week, model) -> the model's stored forecast of that week before the first
    target week (hours in epoch microseconds, ``y_hat``): with ``hours``, its recent errors,
    which calibrate its quantiles beside its validation week."""
    fleet: Yardstick | None = None
    """The fleet's levels (read only when the building is new before the first target week):
    what a new building's forecast is judged against when it declared no size."""


def failed_results(
    building_id: str, weeks: tuple[date, ...] | list[date], error: BaseException
) -> list[BuildingWeekResult]:
    """One ``failed`` result per week, carrying the error as the reason."""
    reason = f"{type(error).__name__}: {error}"
    empty = pd.Series([], dtype="datetime64[ns, UTC]")
    return [
        BuildingWeekResult(building_id=building_id, week=week, status="failed", reason=reason,
                           coverage={}, test_ts=empty)
        for week in weeks
    ]


def run_batch(jobs: list[BuildingJob], config: ForecastConfig, label: str = "", *,
              sent_back: bool = True) -> list[BuildingWeekResult]:
    """The protocol for every (building, week) of a batch, the run's compute step (``label``
    names the batch in an orchestrator's task runs); a failure is recorded, not raised.

    A building's weeks run in order: each week's scores join its track record for the
    publication step of the weeks after it (they are over by then), and under
    ``tuning="reuse"`` each week's fresh tuning is what the weeks after it reuse, and each
    week's forecasts are the issued forecasts the next week validates on, exactly as if the
    weeks had run one run at a time.

    BLAS is pinned to one thread: parallelism comes from running batches side by side, and
    two BLAS threads per solve were measured to be much slower on small machines. Both this and
    the warning filter are set for the whole worker process, not in a context manager: with the
    threads runner, concurrent contexts would restore each other's settings mid-run.

    Results ``sent_back`` to the run's process keep the validation errors of their published
    model only (portfolios sum them): the others are read by the protocol alone (intervals,
    the ensemble), and are most of what sending a result back would cost.
    """
    del label
    results = []
    # Imported here, in the worker: the run's own process imports this module for its types and
    # should not pay for scikit-learn. Convergence is recorded per fit
    # (``model_fits.solver_status``): no console noise.
    from sklearn.exceptions import ConvergenceWarning

    warnings.filterwarnings("ignore", category=ConvergenceWarning)
    threadpool_limits(limits=1)
    for job in jobs:
        stored = dict(job.stored_params)
        issued = {min(job.weeks, default=None): job.issued}  # by the week that validates on it
        history = dict(job.issued_history)
        load = pd.Series(job.hours[LABEL].to_numpy(np.float64),
                         index=epoch_us(job.hours[TS])) if len(job.hours) else pd.Series()
        record = _with_errors(job.track_record, job.recent_forecasts, load)
        for week in sorted(job.weeks):
            try:
                result = forecast_building_week(
                    job.hours, building_id=job.info.building_id,
                    timezone=job.info.timezone, holiday_country=job.info.holiday_country,
                    holiday_subdiv=job.info.holiday_subdiv, week=week, config=config,
                    stored_params=stored, track_record=record, issued=issued.get(week),
                    issued_history=history,
                )
            except Exception as exc:  # noqa: BLE001 - recorded per building-week
                results += failed_results(job.info.building_id, [week], exc)
                continue
            _count_flagged(result, job, config)
            _hold_implausible(result, job, config)
            results.append(result)
            # Once this week is over its scores and errors are known: the next weeks may use them.
            hours = epoch_us(result.test_ts)
            record[week] = week_scores(result.outcomes, hours,
                                       load.reindex(hours).to_numpy(np.float64))
            # ... and a tuning done this week is the one the next weeks reuse.
            stored.update({o.model: StoredParams(o.params, week) for o in result.outcomes
                           if o.status == "ok" and o.tuned_week == week and o.trials})
            # ... and its forecasts are what the next week's validation week was issued (not
            # when the week left a weather input out: its models are not the usual ones).
            issued[week + timedelta(weeks=1)] = {
                o.model: IssuedForecast(dict(o.params), hours, np.asarray(o.y_hat, np.float64),
                                        o.level_shift)
                for o in result.outcomes
                if o.status == "ok" and o.params is not None and not result.left_out}
            # ... and a base model's forecast of it is what the models stacked on it correct.
            for model in config.base_models:
                made = next((o for o in result.outcomes if o.model == model
                             and o.status == "ok"), None)
                if made is not None:
                    history[model] = _appended(history.get(model), hours, made.y_hat)
    for result in results if sent_back else ():
        published = result.publication.model if result.publication is not None else None
        for outcome in result.outcomes:
            if outcome.model != published:
                outcome.validation_errors = None
    return results


def _with_errors(record: dict[date, dict[str, WeekScore]],
                 forecasts: dict[tuple[date, str], tuple[np.ndarray, np.ndarray]],
                 load: pd.Series) -> dict[date, dict[str, WeekScore]]:
    """The loaded track record with each week's hourly errors (``load``, by epoch microsecond,
    minus the stored forecast of it, over the hours with a reading)."""
    out = {week: dict(scores) for week, scores in record.items()}
    week_actual: dict[date, tuple[np.ndarray, np.ndarray]] = {}  # the models share their hours
    for (week, model), (hours, y_hat) in forecasts.items():
        score = out.get(week, {}).get(model)
        if score is None:
            continue
        seen = week_actual.get(week)
        if seen is None or not np.array_equal(seen[0], hours):
            seen = week_actual[week] = (hours, load.reindex(hours).to_numpy(np.float64))
        actual = seen[1]
        keep = np.isfinite(actual) & np.isfinite(y_hat)
        out[week][model] = replace(score, hours=hours[keep],
                                   errors=(actual[keep] - y_hat[keep]).astype(np.float32))
    return out


def flagged_note(history: int, target: int) -> str:
    """What a publication's reason says of the flagged readings of its window (``""``: none)."""
    notes = []
    if history:
        notes.append(f"{history} flagged reading(s) in its history treated as missing")
    if target:
        notes.append(f"{target} flagged reading(s) of the target week left out of its scores")
    return "".join(f"; {note}" for note in notes)


def _count_flagged(result: BuildingWeekResult, job: BuildingJob, config: ForecastConfig) -> None:
    """Record in ``result`` how many of the job's flagged hours its window read (its history,
    lookback included, and its target week), and say so in its publication's reason."""
    if not job.flagged_hours.size:
        result.coverage = {**result.coverage, "n_flagged_hours": 0}
        return
    start, end = config.load_range(result.week, job.info.timezone)
    week_start = local_midnight_utc(result.week, job.info.timezone)
    us = job.flagged_hours
    history = int(((us >= start.value // 1000) & (us < week_start.value // 1000)).sum())
    target = int(((us >= week_start.value // 1000) & (us < end.value // 1000)).sum())
    result.coverage = {**result.coverage, "n_flagged_hours": history + target}
    note = flagged_note(history, target)
    if note and result.publication is not None:
        result.publication = replace(result.publication,
                                     reason=result.publication.reason + note)


def _hold_implausible(result: BuildingWeekResult, job: BuildingJob,
                      config: ForecastConfig) -> None:
    """Mark the building-week's publication held when its forecast's level is an order of
    magnitude off what is known of the building (:func:`~tasks.protocol.bid_check.
    bid_problem`), its reason first in the publication's."""
    publication = result.publication
    if publication is None:
        return
    chosen = next((o for o in result.outcomes if o.model == publication.model), None)
    if chosen is None:
        return
    history, usable = history_range(job.hours, result.week, job.info.timezone,
                                    config.history_weeks)
    why = bid_problem(chosen.y_hat, history=history, history_hours=usable,
                      declared=declared_yardstick(job.info.building_type,
                                                  job.info.floor_area_m2),
                      fleet=job.fleet)
    if why is not None:
        result.publication = replace(publication, outcome=HELD,
                                     reason=f"{HELD_PREFIX}: {why}; {publication.reason}")


def _appended(before: IssuedForecast | None, hours: np.ndarray,
              y_hat: np.ndarray) -> IssuedForecast:
    """``before``'s hours (those before ``hours``) followed by a new week's forecast."""
    y_hat = np.asarray(y_hat, np.float64)
    if before is None:
        return IssuedForecast({}, hours, y_hat)
    keep = before.hours < hours.min() if len(hours) else np.ones(len(before.hours), bool)
    return IssuedForecast({}, np.concatenate([before.hours[keep], hours]),
                          np.concatenate([before.y_hat[keep], y_hat]))
