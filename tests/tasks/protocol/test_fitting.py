"""How learned models forecast a window's parts: the holiday-aware base kept where the week is
unlike the last, on a real Easter week."""

from __future__ import annotations

from datetime import date

import numpy as np
import pandas as pd
import pytest
from wadiro_fleet.tasks.ingest.cambridge import ingest_cambridge
from wadiro_fleet.tasks.protocol.config import ForecastConfig
from wadiro_fleet.tasks.protocol.features import build_features
from wadiro_fleet.tasks.protocol.fitting import Fitter
from wadiro_fleet.tasks.protocol.models import MODELS
from wadiro_fleet.tasks.protocol.windows import build_window
from wadiro_fleet.tasks.warehouse.batches import load_jobs

BUILDING = "UCam_Building_b0"
EASTER_WEEK = date(2019, 4, 22)  # Easter Monday
LINREG = {"radius": 0.01, "wasserstein": "l1"}


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory, cambridge_archive):
    path = tmp_path_factory.mktemp("fitting") / "w.duckdb"
    ingest_cambridge(path, cambridge_archive, [BUILDING], date(2019, 1, 1), date(2019, 4, 30))
    return path


def _fitter(warehouse, **config) -> Fitter:
    config = ForecastConfig(**config)
    [job] = load_jobs(warehouse, [BUILDING], [EASTER_WEEK], config)
    info = job.info
    features = build_features(job.hours, timezone=info.timezone,
                              holiday_country=info.holiday_country,
                              holiday_subdiv=info.holiday_subdiv,
                              feature_set=config.feature_set)
    window = build_window(features, EASTER_WEEK, info.timezone, feature_set=config.feature_set)
    return Fitter(window, config)


def _test_forecast(warehouse, **config):
    fitter = _fitter(warehouse, **config)
    model = fitter.fit("wadiro_linreg", "train", LINREG, forecasts="test")
    test = fitter.parts["test"]
    local = test.ts.tz_convert("Europe/London")
    return test, fitter.predict("wadiro_linreg", model, "test"), local


def test_the_correction_is_not_applied_on_hours_unlike_last_week(warehouse):
    test, correction, local = _test_forecast(warehouse)
    # Easter Monday, and the Friday whose day a week earlier was Good Friday
    unlike = np.isin(local.day_of_week, [0, 4])
    assert np.array_equal(test.keep_base, unlike) and unlike.sum() == 48
    assert np.all(correction[unlike] == 0.0)  # the day-type persistence itself
    assert np.count_nonzero(correction[~unlike]) > 100  # the rest of the week is corrected
    forecast = test.to_load(correction)
    assert np.allclose(forecast[unlike], test.base[unlike])


def test_over_last_weeks_load_every_hour_is_corrected(warehouse):
    test, correction, _ = _test_forecast(warehouse, persistence="last_week")
    assert not test.keep_base.any()
    assert np.count_nonzero(correction) > 150
    assert pd.Series(correction).notna().all()


def test_a_tuning_trial_fits_every_second_hour_counted_back_from_the_latest(warehouse):
    fitter = _fitter(warehouse)
    config = fitter.config
    rows = fitter.parts["fit"]
    trial = fitter.fit("wadiro_linreg", "fit", LINREG, forecasts="validation", sample_every=2)
    full = fitter.fit("wadiro_linreg", "fit", LINREG, forecasts="validation")
    # the same program on the rows picked by hand: the latest hour, and every second before it
    picked = np.arange(len(rows.target))[::-1][::2][::-1]
    assert picked[-1] == len(rows.target) - 1 and len(picked) == (len(rows.target) + 1) // 2
    direct = MODELS["wadiro_linreg"].estimator(
        **config.model_options["wadiro_linreg"], **LINREG).fit(rows.X[picked],
                                                                rows.target[picked])
    np.testing.assert_allclose(trial.coef_, direct.coef_, rtol=1e-6, atol=1e-9)
    assert not np.allclose(trial.coef_, full.coef_)  # the final fit sees every hour
    # the constrained network's floor holds on the rows its trial was fitted on
    pcscnn = fitter.fit("wadiro_pcscnn", "fit", {"radius": 0.01, "max_neurons": 10},
                        forecasts="validation", sample_every=2)
    floor = fitter.floor("wadiro_pcscnn", "fit")[picked]
    assert np.all(pcscnn.predict(rows.X[picked]) >= floor - 1e-6)
