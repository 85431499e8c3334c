"""The ensemble is the hourly median of its trusted members, and is judged like any model."""

from __future__ import annotations

from datetime import date

import numpy as np
import pandas as pd
import pytest
from pydantic import ValidationError
from wadiro_fleet.tasks.ingest.synthetic_fleet import FleetSpec, ingest_synthetic
from wadiro_fleet.tasks.protocol.config import ForecastConfig
from wadiro_fleet.tasks.protocol.features import WEATHER_COLUMNS
from wadiro_fleet.tasks.protocol.forecasting import forecast_building_week
from wadiro_fleet.tasks.warehouse.batches import load_jobs

WEEK = date(2024, 4, 8)
BUILDING = "synthetic_b00001"
MEMBERS = ("svr", "wadiro_linreg", "seasonal_naive", "day_type_naive")
CONFIG = ForecastConfig(models=(*MEMBERS, "ensemble"), ensemble_members=MEMBERS, trials=2)


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    path = tmp_path_factory.mktemp("ensemble") / "w.duckdb"
    ingest_synthetic(path, FleetSpec(buildings=2, start=date(2024, 1, 1), weeks=15, seed=3))
    [job] = load_jobs(path, [BUILDING], [WEEK], CONFIG)
    return job


def _run(job, hours=None):
    info = job.info
    return forecast_building_week(
        job.hours if hours is None else hours, building_id=BUILDING, timezone=info.timezone,
        holiday_country=info.holiday_country, holiday_subdiv=info.holiday_subdiv, week=WEEK,
        config=CONFIG)


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


def test_members_reading_filled_in_weather_are_left_out(job):
    hours = job.hours.copy()
    start = pd.Timestamp(WEEK, tz="Europe/London").tz_convert("UTC") + pd.Timedelta(hours=20)
    gap = (hours["ts"] >= start) & (hours["ts"] < start + pd.Timedelta(hours=70))
    hours.loc[gap, list(WEATHER_COLUMNS)] = np.nan
    outcomes = {o.model: o for o in _run(job, hours).outcomes}
    ensemble = outcomes["ensemble"]
    assert ensemble.solver == "median of seasonal_naive, day_type_naive"
    persistence = np.vstack([outcomes["seasonal_naive"].y_hat, outcomes["day_type_naive"].y_hat])
    np.testing.assert_array_equal(ensemble.y_hat, np.maximum(persistence.mean(axis=0), 0.0))


def test_an_ensemble_needs_two_members_in_the_run():
    with pytest.raises(ValidationError, match="at least two of its members"):
        ForecastConfig(models=("svr", "ensemble"), ensemble_members=("svr", "gp"))
    with pytest.raises(ValidationError, match="member of itself"):
        ForecastConfig(ensemble_members=("svr", "ensemble"))
    assert ForecastConfig(models=("svr", "gp", "ensemble")).members == ("gp", "svr")
