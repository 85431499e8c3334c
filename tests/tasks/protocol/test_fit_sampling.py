"""A model's final fit and its refit for the validation week use every n-th hour
(``fit_sample_every``), counted back from the latest; the forecast still covers every hour.

Checked against the estimator fitted by hand on the rows picked by hand, on a synthetic
building (no file of ``../shared``).
"""

from datetime import date, timedelta

import numpy as np
import pandas as pd
import pytest

from tasks.ingest.synthetic_fleet import FleetSpec, ingest_synthetic
from tasks.protocol.config import ForecastConfig
from tasks.protocol.features import build_features
from tasks.protocol.fitting import thinning, window_part
from tasks.protocol.forecasting import StoredParams, forecast_building_week
from tasks.protocol.models import MODELS
from tasks.protocol.windows import build_window
from tasks.warehouse.batches import load_jobs

WEEK = date(2024, 4, 8)
BUILDING = "synthetic_b00001"
LINREG = {"radius": 0.01, "wasserstein": "l1"}
GP = {"length_scale": 2.85, "periodicity": 17.4, "length_scale_sine": 1.53, "noise_level": 4.4}


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    path = tmp_path_factory.mktemp("fit-sampling") / "w.duckdb"
    ingest_synthetic(path, FleetSpec(buildings=2, start=date(2024, 1, 1), weeks=15, seed=11))
    [job] = load_jobs(path, [BUILDING], [WEEK], _config(1))
    return job


def _config(every: int | None, model: str = "wadiro_linreg") -> ForecastConfig:
    sampling = {} if every is None else {"fit_sample_every": every}
    return ForecastConfig(models=(model, "seasonal_naive"), ensemble_members=(), tuning="reuse",
                          **sampling)


def _linreg(job, every: int | None, model: str = "wadiro_linreg", params=LINREG):
    config = _config(every, model)
    result = forecast_building_week(
        job.hours, building_id=BUILDING, timezone=job.info.timezone,
        holiday_country=job.info.holiday_country, holiday_subdiv=job.info.holiday_subdiv,
        week=WEEK, config=config,
        stored_params={model: StoredParams(params, WEEK - timedelta(weeks=1))})
    return next(o for o in result.outcomes if o.model == model)


def _by_hand(job, part: str, forecasts: str, every: int, model: str = "wadiro_linreg",
             params=LINREG, config: ForecastConfig | None = None
             ) -> tuple[np.ndarray, np.ndarray]:
    """The forecast (load) of part ``forecasts`` by the estimator fitted on every ``every``-th
    row of ``part``, picked here, and that part's actual load."""
    config = config or _config(every)
    info = job.info
    features = build_features(job.hours, timezone=info.timezone,
                              holiday_country=info.holiday_country,
                              holiday_subdiv=info.holiday_subdiv, feature_set=config.feature_set)
    window = build_window(features, WEEK, info.timezone, feature_set=config.feature_set)
    rows, target = window_part(window, part, config), window_part(window, forecasts, config)
    picked = np.arange(len(rows.target))[::-1][::every][::-1]
    assert picked[-1] == len(rows.target) - 1 and len(picked) == -(-len(rows.target) // every)
    estimator = MODELS[model].estimator(**config.model_options.get(model, {}), **params)
    estimator.fit(rows.X[picked], rows.target[picked])
    correction = np.where(target.keep_base, 0.0, estimator.predict(target.X))
    return target.base + correction, target.load


@pytest.mark.parametrize("every", [1, 2])
def test_the_final_fit_and_the_validation_refit_use_every_nth_hour(job, every):
    outcome = _linreg(job, every)
    assert outcome.status == "ok" and outcome.validation_source == "refit"
    forecast, _ = _by_hand(job, "train", "test", every)
    assert len(outcome.y_hat) == len(forecast) >= 167  # every hour of the week is forecast
    np.testing.assert_allclose(outcome.y_hat, forecast, rtol=1e-6, atol=1e-6)
    validation, actual = _by_hand(job, "fit", "validation", every)
    assert outcome.validation_mae == pytest.approx(np.nanmean(np.abs(validation - actual)),
                                                   rel=1e-6)


def test_a_sampled_fit_is_another_forecast(job):
    assert not np.allclose(_linreg(job, 2).y_hat, _linreg(job, 1).y_hat)
    # an issued forecast made with other sampling does not stand in for this one's
    assert _config(1).protocol_record()["fit_sample_every"] == 1
    assert _config(2).protocol_record() != _config(1).protocol_record()


def test_thinning_keeps_no_more_rows_than_a_full_part_thinned_and_no_fewer_than_it_can():
    assert thinning(11 * 168, 11 * 168, 2) == 2  # a full history: the run's sampling
    assert thinning(51 * 168, 51 * 168, 3) == 3
    assert thinning(15 * 168, 51 * 168, 3) == 1  # 15 of a year's weeks: every hour
    assert thinning(30 * 168, 51 * 168, 3) == 2
    assert thinning(0, 168, 2) == thinning(500, 168, 1) == 1
    for hours in (168, 11 * 168, 51 * 168 + 1):
        for every in (1, 2, 3, 4):
            cap = -(-hours // every)  # the rows a full part thinned keeps
            for n in range(1, hours + 1, 7):
                step = thinning(n, hours, every)
                assert 1 <= step <= every
                assert -(-n // step) <= cap  # never dearer than a full history
                assert step == 1 or -(-n // (step - 1)) > cap  # and as dense as that allows


def test_a_short_history_is_fitted_on_more_of_its_hours(job):
    """The load missing until ten weeks before the target week (its lags two weeks longer), a
    third of the window's history cannot be fitted on: a fit asked to sample every fourth hour
    fits every third, no more rows than a full history sampled and not a third fewer."""
    short = job.hours.copy()
    cut = pd.Timestamp(WEEK, tz="UTC") - pd.Timedelta(weeks=10)
    short.loc[pd.DatetimeIndex(short["ts"]) < cut, "kwh"] = np.nan
    thin = type(job)(**{**vars(job), "hours": short})
    assert thinning(8 * 168, 12 * 168, 4) == thinning(7 * 168, 11 * 168, 4) == 3
    outcome = _linreg(thin, 4)
    assert outcome.status == "ok" and outcome.validation_source == "refit"
    forecast, _ = _by_hand(thin, "train", "test", 3)
    np.testing.assert_allclose(outcome.y_hat, forecast, rtol=1e-6, atol=1e-6)
    assert not np.allclose(outcome.y_hat, _by_hand(thin, "train", "test", 4)[0])
    validation, actual = _by_hand(thin, "fit", "validation", 3)
    assert outcome.validation_mae == pytest.approx(np.nanmean(np.abs(validation - actual)),
                                                   rel=1e-6)


def test_the_deployed_protocol_samples_and_the_papers_does_not():
    assert ForecastConfig().fit_sample_every == 2
    assert ForecastConfig(protocol="paper").fit_sample_every == 1


def test_the_deployed_gp_fits_every_fourth_hour_as_the_protocol_says(job):
    """The deployed GP's sampling is the protocol's alone (its estimator fits every row it is
    given): every fourth hour, counted back from the latest, in its trials and its fits -- the
    hours it fitted when its estimator halved the run's every second hour."""
    config = _config(None, "gp")
    gp = config.inputs("gp")
    assert (gp.tuning_sample_every, gp.fit_sample_every) == (4, 4)
    assert (config.tuning_sample_every, config.fit_sample_every) == (2, 2)
    assert "sample_every" not in config.model_options.get("gp", {})
    outcome = _linreg(job, None, "gp", GP)
    assert outcome.status == "ok" and outcome.validation_source == "refit"
    forecast, _ = _by_hand(job, "train", "test", 4, "gp", GP, config)
    np.testing.assert_allclose(outcome.y_hat, forecast, rtol=1e-6, atol=1e-6)
    validation, actual = _by_hand(job, "fit", "validation", 4, "gp", GP, config)
    assert outcome.validation_mae == pytest.approx(np.nanmean(np.abs(validation - actual)),
                                                   rel=1e-6)
