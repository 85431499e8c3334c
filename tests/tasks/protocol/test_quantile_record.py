"""A model's quantiles are calibrated on its validation week pooled with its own recent errors:
the errors a finished week adds to the record, the errors a loaded record gets from the stored
forecasts and the readings, and the quantiles they give."""

from __future__ import annotations

from datetime import date, timedelta
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from tasks.protocol.batch import _with_errors
from tasks.protocol.config import ForecastConfig
from tasks.protocol.forecasting import _quantiles, epoch_us
from tasks.protocol.intervals import age_weights, conformal_intervals
from tasks.protocol.scoring import score_forecast
from tasks.protocol.track_record import WeekScore, recent_errors, week_scores

WEEK = date(2024, 3, 4)
HOURS = pd.date_range("2024-03-04", periods=168, freq="h", tz="UTC")


def _outcome(model: str, y_hat: np.ndarray, actual: np.ndarray):
    return SimpleNamespace(model=model, status="ok", y_hat=y_hat,
                           scores=score_forecast(actual, y_hat))


def test_a_finished_week_adds_its_errors_over_its_scored_hours():
    actual = np.full(168, 10.0)
    actual[5] = np.nan  # a missing reading is not an error
    y_hat = np.full(168, 8.0)
    y_hat[7] = np.nan
    record = week_scores([_outcome("gbr", y_hat, actual)], epoch_us(HOURS), actual)
    score = record["gbr"]
    assert score.errors.dtype == np.float32 and len(score.errors) == 166
    assert set(score.errors.tolist()) == {2.0}
    assert 5 not in np.searchsorted(epoch_us(HOURS), score.hours)
    # without the week's readings (a live week) only the scores are kept
    assert week_scores([_outcome("gbr", y_hat, actual)])["gbr"].errors is None


def test_recent_errors_are_the_model_s_last_weeks_with_errors():
    record = {WEEK - timedelta(weeks=k): {
        "gbr": WeekScore(1.0, hours=np.array([k], np.int64), errors=np.array([float(k)])),
        "svr": WeekScore(1.0)} for k in range(1, 11)}
    hours, errors = recent_errors("gbr", record, weeks=8)
    assert sorted(errors.tolist()) == [float(k) for k in range(1, 9)]  # the latest 8 weeks
    assert recent_errors("gbr", record, weeks=0)[1].size == 0
    assert recent_errors("svr", record)[1].size == 0  # scored before errors were kept
    assert recent_errors("gbr", None)[1].size == 0


def test_a_loaded_record_gets_its_errors_from_the_stored_forecasts_and_the_readings():
    earlier = WEEK - timedelta(weeks=1)
    hours = epoch_us(HOURS - pd.Timedelta(weeks=1))
    load = pd.Series(np.arange(168.0), index=hours)
    load.iloc[3] = np.nan  # flagged or missing: no error
    record = {earlier: {"gbr": WeekScore(1.0), "svr": WeekScore(2.0)}}
    forecasts = {(earlier, "gbr"): (hours, np.zeros(168, np.float32)),
                 (earlier - timedelta(weeks=1), "gbr"): (hours, np.zeros(168, np.float32))}
    out = _with_errors(record, forecasts, load)
    assert out[earlier]["gbr"].errors.tolist() == [v for v in range(168) if v != 3]
    assert out[earlier]["svr"].errors is None  # no stored forecast of it
    assert record[earlier]["gbr"].errors is None  # the loaded record itself is not changed
    assert set(out) == {earlier}  # a week without scores gets no entry


def test_pooled_errors_widen_quantiles_a_calm_validation_week_made_too_narrow():
    """A validation week with errors of +-1 after weeks of +-5: alone it gives a 90 % quantile
    1 above the forecast; pooled with the model's last 8 weeks, about 5."""
    rng = np.random.default_rng(3)
    validation = pd.Series(rng.choice([-1.0, 1.0], 168), index=HOURS - pd.Timedelta(weeks=1))
    record = {}
    for k in range(2, 10):
        ts = HOURS - pd.Timedelta(weeks=k)
        record[WEEK - timedelta(weeks=k)] = {"gbr": WeekScore(
            1.0, hours=epoch_us(ts), errors=rng.choice([-5.0, 5.0], 168).astype(np.float32))}
    y_hat = np.full(168, 100.0)
    constant = ForecastConfig(quantile_scale="constant", quantile_halflife_weeks=0)
    alone = _quantiles("gbr", y_hat, validation.to_numpy(), validation.index, HOURS, {},
                       constant)
    pooled = _quantiles("gbr", y_hat, validation.to_numpy(), validation.index, HOURS, record,
                        constant)
    assert alone.quantiles[0.9][0] == pytest.approx(101.0)
    assert pooled.quantiles[0.9][0] == pytest.approx(105.0)
    # the same as ranking the pooled sample by hand
    by_hand = conformal_intervals(y_hat, np.concatenate(
        [validation.to_numpy(), *[w["gbr"].errors for w in record.values()]]), floor=0.0)
    # (the record also moved no level: its weeks carry no shares)
    np.testing.assert_array_equal(pooled.quantiles[0.9], by_hand.quantiles[0.9])
    none = ForecastConfig(quantile_scale="constant", quantile_record_weeks=0,
                          quantile_halflife_weeks=0)
    np.testing.assert_array_equal(
        _quantiles("gbr", y_hat, validation.to_numpy(), validation.index, HOURS, record,
                   none).quantiles[0.9], alone.quantiles[0.9])


def test_the_protocol_weighs_an_error_by_its_age_and_pools_its_configured_weeks():
    """A record of 16 weeks, errors of spread 6 until 12 weeks back and of spread 1 since: with
    the default half-life the recent calm weighs more and the 90 % quantile is narrower than
    with every error weighing the same, and it equals the weighted conformal quantile of the
    pooled sample by hand (age weights); a 4-week record sees only the calm."""
    rng = np.random.default_rng(8)
    validation = pd.Series(rng.normal(0.0, 1.0, 168), index=HOURS - pd.Timedelta(weeks=1))
    record = {}
    for k in range(1, 17):
        ts = HOURS - pd.Timedelta(weeks=k)
        record[WEEK - timedelta(weeks=k)] = {"gbr": WeekScore(1.0, hours=epoch_us(ts), errors=(
            rng.normal(0.0, 6.0 if k > 12 else 1.0, 168)).astype(np.float32))}
    y_hat = np.full(168, 100.0)
    config = ForecastConfig(quantile_scale="constant")
    assert config.quantile_record_weeks == 16 and config.quantile_halflife_weeks == 8.0
    weighted = _quantiles("gbr", y_hat, validation.to_numpy(), validation.index, HOURS, record,
                          config)
    equal = _quantiles("gbr", y_hat, validation.to_numpy(), validation.index, HOURS, record,
                       config.model_copy(update={"quantile_halflife_weeks": 0}))
    assert weighted.quantiles[0.975][0] < equal.quantiles[0.975][0]
    pooled_ts = validation.index.append(pd.DatetimeIndex(np.concatenate(
        [HOURS - pd.Timedelta(weeks=k) for k in range(16, 0, -1)])))
    pooled = np.concatenate([validation.to_numpy(), *[record[WEEK - timedelta(weeks=k)][
        "gbr"].errors for k in range(16, 0, -1)]])
    by_hand = conformal_intervals(y_hat, pooled, floor=0.0,
                                  weights=age_weights(pooled_ts, HOURS[0], 8.0))
    for level in (0.025, 0.5, 0.975):
        np.testing.assert_allclose(weighted.quantiles[level], by_hand.quantiles[level])
    calm = _quantiles("gbr", y_hat, validation.to_numpy(), validation.index, HOURS, record,
                      config.model_copy(update={"quantile_record_weeks": 4}))
    assert calm.quantiles[0.975][0] < weighted.quantiles[0.975][0]
