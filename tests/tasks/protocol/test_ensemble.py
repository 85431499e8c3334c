"""The ensemble is the hourly median of its trusted members, and is judged like any model."""

from __future__ import annotations

from datetime import date, timedelta

import numpy as np
import pandas as pd
import pytest
from pydantic import ValidationError

from tasks.ingest.synthetic_fleet import FleetSpec, ingest_synthetic
from tasks.protocol.config import ForecastConfig
from tasks.protocol.features import WEATHER_COLUMNS
from tasks.protocol.forecasting import forecast_building_week
from tasks.protocol.track_record import WeekScore
from tasks.warehouse.batches import load_jobs

WEEK = date(2024, 4, 8)
BUILDING = "synthetic_b00001"
MEMBERS = ("svr", "wadiro_linreg", "seasonal_naive", "day_type_naive")
CONFIG = ForecastConfig(models=(*MEMBERS, "ensemble"), ensemble_members=MEMBERS, trials=2,
                        ensemble_method="median")


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    path = tmp_path_factory.mktemp("ensemble") / "w.duckdb"
    ingest_synthetic(path, FleetSpec(buildings=2, start=date(2024, 1, 1), weeks=15, seed=3))
    [job] = load_jobs(path, [BUILDING], [WEEK], CONFIG)
    return job


def _run(job, hours=None, config=CONFIG, record=None):
    info = job.info
    return forecast_building_week(
        job.hours if hours is None else hours, building_id=BUILDING, timezone=info.timezone,
        holiday_country=info.holiday_country, holiday_subdiv=info.holiday_subdiv, week=WEEK,
        config=config, track_record=record)


def test_the_ensemble_is_the_clipped_hourly_median_of_its_members(job):
    result = _run(job)
    outcomes = {o.model: o for o in result.outcomes}
    ensemble = outcomes["ensemble"]
    assert ensemble.status == "ok"
    members = np.vstack([outcomes[m].y_hat for m in MEMBERS])
    np.testing.assert_array_equal(ensemble.y_hat, np.maximum(np.median(members, axis=0), 0.0))
    # its validation forecast is the median of the members' validation forecasts: rebuilt here
    # from each member's own validation errors and the stored readings
    actual = job.hours.set_index("ts")["kwh"]
    forecasts = pd.concat([actual.reindex(outcomes[m].validation_errors.index)
                           - outcomes[m].validation_errors for m in MEMBERS], axis=1)
    errors = (actual.reindex(forecasts.index) - forecasts.median(axis=1)).dropna()
    assert ensemble.validation_mae == pytest.approx(np.mean(np.abs(errors)), rel=1e-12)
    scored = np.isfinite(result.test_ts.map(actual).to_numpy(dtype=float))
    assert ensemble.scores.n_hours == scored.sum()
    lower, upper = ensemble.intervals.bounds(0.8)
    assert np.all(lower <= ensemble.y_hat) and np.all(ensemble.y_hat <= upper)


def test_inverse_error_weights_come_from_each_members_record(job):
    """Weights by hand: each member's mean MAE ratio to seasonal naive over its last weeks,
    to the power -4, normalised; a member without two weeks of record weighs as a ratio of 1."""
    config = CONFIG.model_copy(update={"ensemble_method": "inverse_error"})
    weeks = [WEEK - timedelta(weeks=k) for k in (3, 2, 1)]
    ratios = {"svr": (0.8, 0.6, 0.7), "wadiro_linreg": (0.9, 1.1, 1.0)}
    record = {w: {"seasonal_naive": WeekScore(10.0),
                  **{m: WeekScore(10.0 * r[i]) for m, r in ratios.items()}}
              for i, w in enumerate(weeks)}
    result = _run(job, config=config, record=record)
    outcomes = {o.model: o for o in result.outcomes}
    raw = np.array([0.7 ** -4, 1.0 ** -4, 1.0, 1.0])  # svr, linreg, both persistence
    weights = raw / raw.sum()
    members = np.vstack([outcomes[m].y_hat for m in MEMBERS])
    np.testing.assert_allclose(outcomes["ensemble"].y_hat,
                               np.maximum(weights @ members, 0.0), rtol=1e-12)
    assert outcomes["ensemble"].solver.startswith("weighted mean of svr 0.58, wadiro_linreg 0.14,")
    assert result.publication.model == "ensemble"  # published whenever trusted and better
    assert result.publication.reason.startswith("the combination, expected")


def test_without_two_trusted_learned_members_persistence_is_published_by_its_own_name(job):
    """The week's weather gone for 70 hours: the learned models cannot run, so the ensemble
    would be a median of the two persistence forecasts. It is not formed; the forecast
    published is a persistence forecast, named as such, with its own expected ratio, and the
    building-week is counted as degraded."""
    hours = job.hours.copy()
    start = pd.Timestamp(WEEK, tz="Europe/London").tz_convert("UTC") + pd.Timedelta(hours=20)
    gap = (hours["ts"] >= start) & (hours["ts"] < start + pd.Timedelta(hours=70))
    hours.loc[gap, list(WEATHER_COLUMNS)] = np.nan
    result = _run(job, hours)
    outcomes = {o.model: o for o in result.outcomes}
    ensemble = outcomes["ensemble"]
    assert ensemble.status == "failed" and ensemble.y_hat is None
    assert "fewer than 2 trusted learned members to combine (none)" in ensemble.error
    published = result.publication
    assert published.model in ("seasonal_naive", "day_type_naive")
    assert published.outcome == "degraded" and published.ensemble_members == ()
    naive = outcomes["seasonal_naive"].validation_mae
    own = outcomes[published.model].validation_mae / naive
    assert published.expected_ratio == pytest.approx(own if own < 1 else 1.0)


def test_one_trusted_learned_member_is_not_a_combination(job):
    config = CONFIG.model_copy(update={"models": ("svr", "seasonal_naive", "day_type_naive",
                                                  "ensemble")})
    info = job.info
    result = forecast_building_week(
        job.hours, building_id=BUILDING, timezone=info.timezone,
        holiday_country=info.holiday_country, holiday_subdiv=info.holiday_subdiv, week=WEEK,
        config=config)
    ensemble = next(o for o in result.outcomes if o.model == "ensemble")
    assert ensemble.status == "failed" and "(svr)" in ensemble.error
    assert result.publication.model != "ensemble"


def test_a_published_ensemble_names_its_members(job):
    result = _run(job)
    if result.publication.model == "ensemble":
        assert result.publication.outcome == "learned"
    assert result.publication.ensemble_members == MEMBERS


def test_an_ensemble_needs_two_members_in_the_run():
    with pytest.raises(ValidationError, match="at least two of its members"):
        ForecastConfig(models=("svr", "ensemble"), ensemble_members=("svr", "gp"))
    with pytest.raises(ValidationError, match="member of itself"):
        ForecastConfig(ensemble_members=("svr", "ensemble"))
    assert ForecastConfig(models=("svr", "gp", "ensemble"),
                          ensemble_members=("gp", "svr")).members == ("gp", "svr")
    assert ForecastConfig(models=("gbr", "svr", "wadiro_linreg", "ensemble")).members == (
        "gbr", "wadiro_linreg")  # the deployed members the run has
