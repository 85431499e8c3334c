"""How learned models forecast a window's parts: the holiday-aware base kept where the week is
unlike the last, on a real Easter week."""

from __future__ import annotations

from datetime import date

import numpy as np
import pandas as pd
import pytest

from tasks.ingest.cambridge_archive import ingest_cambridge
from tasks.protocol.config import ForecastConfig
from tasks.protocol.features import build_features
from tasks.protocol.fitting import Fitter, WindowPart
from tasks.protocol.models import MODELS
from tasks.protocol.windows import build_window
from tasks.warehouse.batches import load_jobs

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
    assert not np.allclose(trial.coef_, full.coef_)  # unsampled, the fit sees every hour
    # the constrained network's floor holds on the rows its trial was fitted on
    pcscnn = fitter.fit("wadiro_pcscnn", "fit", {"radius": 0.01, "max_neurons": 10},
                        forecasts="validation", sample_every=2, trial=True)
    floor = fitter.floor("wadiro_pcscnn", "fit")[picked]
    assert np.all(pcscnn.predict(rows.X[picked]) >= floor - 1e-6)


def test_a_sampled_final_fit_keeps_the_floor_on_every_training_row(warehouse):
    fitter = _fitter(warehouse)
    rows = fitter.parts["train"]
    picked = np.arange(len(rows.target))[::-1][::2][::-1]
    left = np.setdiff1d(np.arange(len(rows.target)), picked)
    # a base that puts the floor (load >= 0, so r >= -base) 5 kWh above the target on the
    # rows the fit leaves out: only bounding them there can keep it
    base = rows.base.copy()
    base[left] = -rows.target[left] - 5.0
    fitter.parts["train"] = WindowPart(rows.X, rows.target, base, rows.load, rows.ts,
                                       rows.keep_base)
    floor = fitter.floor("wadiro_pcscnn", "train")
    assert np.all(floor[left] > rows.target[left])
    params = {"radius": 0.01, "max_neurons": 10}
    final = fitter.fit("wadiro_pcscnn", "train", params, forecasts="test", sample_every=2)
    assert final.n_samples_fit_ == len(picked)
    assert np.all(final.predict(rows.X) >= floor - 1e-6)  # the rows it left out too
    # the same program built by hand: every second row fitted, the others bound points
    direct = MODELS["wadiro_pcscnn"].estimator(
        **fitter.config.model_options["wadiro_pcscnn"], **params,
        lower_bound=floor[picked]).fit(rows.X[picked], rows.target[picked],
                                       bound_X=rows.X[left], bound_lower=floor[left])
    np.testing.assert_allclose(final.objective_, direct.objective_, rtol=1e-7)
    np.testing.assert_allclose(final.predict(rows.X), direct.predict(rows.X), atol=1e-4)
    # a tuning trial is bounded on the rows it fits only
    trial = fitter.fit("wadiro_pcscnn", "train", params, forecasts="test", sample_every=2,
                       trial=True)
    assert np.all(trial.predict(rows.X[picked]) >= floor[picked] - 1e-6)
    assert np.any(trial.predict(rows.X[left]) < floor[left] - 1.0)


def test_a_correction_rate_forecasts_that_share_of_the_correction_and_keeps_the_floor(warehouse):
    rate = {"wadiro_pcscnn": {"correction_rate": 0.5}, "wadiro_linreg": {"correction_rate": 0.5}}
    whole, half = _fitter(warehouse), _fitter(warehouse, model_inputs=rate)
    params = {"radius": 0.01, "max_neurons": 10}
    for part, forecasts in (("fit", "validation"), ("train", "test")):
        fitted = whole.fit("wadiro_pcscnn", part, params, forecasts=forecasts)
        rows = whole.parts[forecasts]
        raw = np.where(rows.keep_base, 0.0, fitted.predict(rows.X))
        floor = whole.floor("wadiro_pcscnn", forecasts)
        # the forecast part: the base plus half the network's correction, then the floor
        np.testing.assert_allclose(half.predict("wadiro_pcscnn", fitted, forecasts),
                                   np.fmax(0.5 * raw, floor), rtol=0, atol=1e-9)
        assert np.all(rows.to_load(half.predict("wadiro_pcscnn", fitted, forecasts)) >= -1e-9)
        # the rows it was fitted on are predicted as fitted
        np.testing.assert_allclose(half.predict("wadiro_pcscnn", fitted, part),
                                   whole.predict("wadiro_pcscnn", fitted, part))
    # a model fitted on the load itself forecasts all of it: the rate shrinks corrections only
    load = _fitter(warehouse, target="load", model_inputs=rate)
    fitted = load.fit("wadiro_linreg", "train", LINREG, forecasts="test")
    np.testing.assert_allclose(load.predict("wadiro_linreg", fitted, "test"),
                               fitted.predict(load.parts["test"].X))
    with pytest.raises(ValueError, match="correction_rate"):
        ForecastConfig(model_inputs={"wadiro_linreg": {"correction_rate": 0.0}})


def test_half_the_correction_is_the_program_solved_for_half_the_residual(warehouse):
    """The network standardises its target, so fitting the constrained program to half the
    residual, the floor halved alike, is the same program: its forecast is half the network's
    correction, which is what a correction rate of 0.5 publishes."""
    fitter = _fitter(warehouse)
    rows, test = fitter.parts["train"], fitter.parts["test"]
    params = {"radius": 1.5, "max_neurons": 10}
    whole = fitter.fit("wadiro_pcscnn", "train", params, forecasts="test")
    options = {**fitter.config.model_options["wadiro_pcscnn"], **params}
    floor = fitter.floor("wadiro_pcscnn", "train")
    half = MODELS["wadiro_pcscnn"].estimator(**options, lower_bound=0.5 * floor).fit(
        rows.X, 0.5 * rows.target)
    scale = np.abs(rows.target).mean()
    np.testing.assert_allclose(half.predict(test.X), 0.5 * whole.predict(test.X),
                               rtol=0, atol=1e-4 * scale)
    assert np.all(rows.base + half.predict(rows.X) >= -1e-6)  # the floor: no negative load
