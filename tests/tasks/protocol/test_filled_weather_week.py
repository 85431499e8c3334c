"""A target week whose weather is mostly filled in is published from last week's load.

Real data (building b0, the week of 2019-03-18), with the weather of 60 of the week's hours
removed, as when a weather feed stops for two and a half days: the window fills them from the
profile of the days before, and the models reading weather would forecast from guesses.
"""

from __future__ import annotations

from datetime import date

import numpy as np
import pandas as pd
import pytest
from wadiro_fleet.tasks.ingest.cambridge import ingest_cambridge
from wadiro_fleet.tasks.protocol.config import ForecastConfig
from wadiro_fleet.tasks.protocol.features import WEATHER_COLUMNS
from wadiro_fleet.tasks.protocol.forecasting import forecast_building_week
from wadiro_fleet.tasks.warehouse.batches import load_jobs

BUILDING = "UCam_Building_b0"
WEEK = date(2019, 3, 18)
CONFIG = ForecastConfig(models=("wadiro_linreg", "svr", "seasonal_naive"), trials=3)


@pytest.fixture(scope="module")
def job(tmp_path_factory, cambridge_archive):
    path = tmp_path_factory.mktemp("filled") / "w.duckdb"
    ingest_cambridge(path, cambridge_archive, [BUILDING], date(2018, 11, 1), date(2019, 3, 26))
    [job] = load_jobs(path, [BUILDING], [WEEK], CONFIG)
    return job


def _run(job, hours):
    info = job.info
    return forecast_building_week(
        hours, building_id=BUILDING, timezone=info.timezone,
        holiday_country=info.holiday_country, holiday_subdiv=info.holiday_subdiv, week=WEEK,
        config=CONFIG)


def test_with_its_weather_a_learned_model_is_published(job):
    result = _run(job, job.hours)
    assert result.publication.model in ("wadiro_linreg", "svr")


def test_with_most_of_its_weather_filled_in_last_weeks_load_is_published(job):
    hours = job.hours.copy()
    start = pd.Timestamp(WEEK, tz="Europe/London").tz_convert("UTC") + pd.Timedelta(hours=30)
    gap = (hours["ts"] >= start) & (hours["ts"] < start + pd.Timedelta(hours=60))
    hours.loc[gap, list(WEATHER_COLUMNS)] = np.nan
    result = _run(job, hours)
    assert result.status == "ok" and "weather filled for 60" in result.reason
    assert result.publication.model == "seasonal_naive"
    assert "weather is 36% filled in" in result.publication.reason
    learned = [o for o in result.outcomes if o.model in ("wadiro_linreg", "svr")]
    assert all(o.status == "ok" for o in learned)  # forecast and scored, just not published
