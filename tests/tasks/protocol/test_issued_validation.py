"""Under --tuning reuse, last week's issued forecast stands in for the validation fit.

Checked against hand-made forecasts (actuals + a constant: the validation MAE is that constant),
against the week's own stored readings, and through the warehouse: only a forecast made with the
same hyperparameters and protocol counts.
"""

from datetime import date, timedelta

import numpy as np
import pandas as pd
import pytest

from tasks.ingest.synthetic_fleet import FleetSpec, ingest_synthetic
from tasks.protocol.batch import run_batch
from tasks.protocol.config import ForecastConfig
from tasks.protocol.forecasting import (
    IssuedForecast,
    StoredParams,
    forecast_building_week,
)
from tasks.warehouse.batches import load_jobs
from tasks.warehouse.connection import connect
from tasks.warehouse.results import load_issued_forecasts, write_results
from tasks.warehouse.runs import record_run_start

WEEK = date(2024, 4, 8)
BUILDING = "synthetic_b00000"
SVR = {"C": 3.0, "fit_intercept": True, "loss": "l1"}
MODELS = ("svr", "wadiro_linreg", "seasonal_naive")
LINREG = {"radius": 0.01, "wasserstein": "l1"}


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory):
    path = tmp_path_factory.mktemp("issued") / "w.duckdb"
    ingest_synthetic(path, FleetSpec(buildings=2, start=date(2024, 1, 1), weeks=15, seed=5))
    return path


def _config(**overrides):
    return ForecastConfig(models=MODELS, tuning="reuse", trials=2, **overrides)


def _stored(week=WEEK):
    tuned = week - timedelta(weeks=2)
    return {"svr": StoredParams(SVR, tuned), "wadiro_linreg": StoredParams(LINREG, tuned)}


def _validation_actuals(warehouse, week=WEEK):
    """The validation week's stored readings, by UTC hour (read straight from the table)."""
    with connect(warehouse, read_only=True) as con:
        frame = con.execute(
            "SELECT ts, kwh FROM meter_readings WHERE building_id = ? AND ts >= ? AND ts < ? "
            "ORDER BY ts",
            [BUILDING, pd.Timestamp(week - timedelta(weeks=1), tz="Europe/London"),
             pd.Timestamp(week, tz="Europe/London")]).df()
    return pd.Series(frame["kwh"].to_numpy(), index=pd.DatetimeIndex(frame["ts"]).tz_convert("UTC"))


def _run(warehouse, issued, config=None, week=WEEK):
    config = config or _config()
    [job] = load_jobs(warehouse, [BUILDING], [week], config)
    return forecast_building_week(
        job.hours, building_id=BUILDING, timezone=job.info.timezone,
        holiday_country=job.info.holiday_country, holiday_subdiv=job.info.holiday_subdiv,
        week=week, config=config, stored_params=_stored(week), issued=issued)


def _outcome(result, model):
    return next(o for o in result.outcomes if o.model == model)


def test_an_issued_forecast_with_the_same_params_is_the_validation_forecast(warehouse):
    actuals = _validation_actuals(warehouse)
    issued = {"svr": IssuedForecast.from_series(dict(SVR), actuals + 1.5)}
    result = _run(warehouse, issued)
    svr = _outcome(result, "svr")
    assert svr.status == "ok" and svr.validation_source == "issued"
    assert svr.validation_mae == pytest.approx(1.5)
    # every validation error is -1.5 (it forecast 1.5 too much): every quantile is the forecast
    # less 1.5 (above the floor 0), and those above the median are held at the forecast
    lo, hi = svr.intervals.bounds(0.8)
    inside = lo > 0
    np.testing.assert_allclose((svr.y_hat - lo)[inside], 1.5)
    np.testing.assert_allclose(hi, svr.y_hat)
    np.testing.assert_allclose(svr.intervals.quantiles[0.5][inside], (svr.y_hat - 1.5)[inside])
    # a model without an issued forecast is fitted on the weeks before the validation week
    assert _outcome(result, "wadiro_linreg").validation_source == "refit"


def test_other_params_or_too_few_hours_mean_a_refit(warehouse):
    actuals = _validation_actuals(warehouse)
    other = IssuedForecast.from_series({**SVR, "C": 30.0}, actuals + 1.5)
    refit = _outcome(_run(warehouse, {"svr": other}), "svr")
    assert refit.validation_source == "refit" and refit.validation_mae != pytest.approx(1.5)
    # the forecast of the same fit, but of under 90 % of the validation week's hours
    partial = actuals + 1.5
    partial.iloc[: len(partial) // 5] = np.nan
    short = _outcome(_run(warehouse, {"svr": IssuedForecast.from_series(dict(SVR), partial)}),
                     "svr")
    assert short.validation_source == "refit"
    assert short.validation_mae == pytest.approx(
        _outcome(_run(warehouse, {}), "svr").validation_mae)


def test_per_window_tuning_validates_on_its_best_trial(warehouse):
    actuals = _validation_actuals(warehouse)
    config = ForecastConfig(models=("svr",), trials=2, tuning="per-window")
    issued = {"svr": IssuedForecast.from_series(dict(SVR), actuals)}
    svr = _outcome(_run(warehouse, issued, config), "svr")
    assert svr.validation_source == "tuning" and svr.validation_mae > 0


def test_consecutive_weeks_validate_on_the_forecast_issued_the_week_before(warehouse):
    """run_batch over two weeks: the second week's validation errors are the first week's
    forecast against the readings stored for it."""
    first = WEEK - timedelta(weeks=1)
    config = _config()
    [job] = load_jobs(warehouse, [BUILDING], [first, WEEK], config)
    job = type(job)(info=job.info, hours=job.hours, weeks=job.weeks, stored_params=_stored(first))
    week1, week2 = run_batch([job], config, sent_back=False)
    actuals = _validation_actuals(warehouse)
    for model in ("svr", "wadiro_linreg"):
        assert _outcome(week1, model).validation_source == "refit"
        later = _outcome(week2, model)
        assert later.validation_source == "issued"
        issued = pd.Series(_outcome(week1, model).y_hat, index=pd.DatetimeIndex(week1.test_ts))
        errors = (actuals - issued.reindex(actuals.index)).dropna()
        # the validation week's usable rows: those with a reading and last week's load
        assert later.validation_mae == pytest.approx(errors.abs().mean(), rel=0.02)


def test_the_warehouse_gives_back_forecasts_of_the_same_protocol_only(warehouse):
    config = _config()
    first = WEEK - timedelta(weeks=1)
    [job] = load_jobs(warehouse, [BUILDING], [first], config)
    job = type(job)(info=job.info, hours=job.hours, weeks=job.weeks, stored_params=_stored(first))
    [result] = run_batch([job], config, sent_back=False)
    with connect(warehouse) as con:
        record_run_start(con, run_id="week-1", flow="weekly", parameters=config.as_record(),
                         code_version="test")
        write_results(con, [result], run_id="week-1", models=config.models)
        issued = load_issued_forecasts(con, [BUILDING], first, config)[BUILDING]
        assert set(issued) == {"svr", "wadiro_linreg", "seasonal_naive"}
        svr = _outcome(result, "svr")
        assert issued["svr"].params == svr.params
        np.testing.assert_allclose(issued["svr"].y_hat, svr.y_hat)
        hours = pd.DatetimeIndex(result.test_ts).tz_convert("UTC")
        assert (pd.to_datetime(issued["svr"].hours, unit="us", utc=True) == hours).all()
        # another feature set, target or solver option: not this configuration's forecast
        for other in (_config(feature_set="paper"), _config(target="load"),
                      _config(history_weeks=10)):
            assert load_issued_forecasts(con, [BUILDING], first, other) == {}
    # load_jobs reads them under reuse only, for the week before its first week
    [reused] = load_jobs(warehouse, [BUILDING], [WEEK], config)
    assert set(reused.issued) == set(issued)
    [tuned] = load_jobs(warehouse, [BUILDING], [WEEK],
                        ForecastConfig(models=MODELS, tuning="per-window"))
    assert tuned.issued == {}


def test_an_issued_forecast_is_read_at_the_hours_asked_in_any_zone():
    utc = pd.date_range("2024-04-01 00:00", periods=4, freq="h", tz="UTC")
    issued = IssuedForecast.from_series({}, pd.Series([1.0, 2.0, np.nan, 4.0], index=utc)[::-1])
    asked = pd.DatetimeIndex(["2024-03-31 23:00", "2024-04-01 01:00", "2024-04-01 02:00",
                              "2024-04-01 03:00", "2024-04-01 05:00"], tz="UTC")
    np.testing.assert_array_equal(issued.at(asked.tz_convert("Europe/Berlin")),
                                  [np.nan, 2.0, np.nan, 4.0, np.nan])
    assert np.isnan(IssuedForecast({}, np.array([], np.int64), np.array([])).at(asked)).all()
