"""A model fitted on its own inputs (``ForecastConfig.model_inputs``): the deployed gradient
boosting on a year of history, the networks stacked on its issued forecasts, and the level
correction, checked against what the configuration says and against a second run without it."""

from __future__ import annotations

from datetime import date, timedelta

import numpy as np
import pandas as pd
import pytest

from tasks.protocol.config import ForecastConfig, ModelInputs
from tasks.protocol.forecasting import IssuedForecast, StoredParams, forecast_building_week

WEEK = date(2024, 6, 3)
MODELS = ("gbr", "wadiro_linreg", "seasonal_naive")


def test_the_deployed_gradient_boosting_reads_a_year_and_the_networks_correct_it():
    config = ForecastConfig()
    gbr = config.inputs("gbr")
    assert (gbr.feature_set, gbr.history_weeks, gbr.target) == ("year", 52, "load")
    network = config.inputs("wadiro_pcscnn")
    assert (network.base_model, network.feature_set) == ("gbr+gbr_lags", "paper")
    assert config.base_models == ("gbr", "gbr_lags")  # the mean of the two boostings
    assert config.correction_rate_of("wadiro_pcscnn") == config.correction_rate_of(
        "wadiro_scnn") == 0.5  # half their correction of the boosting, as a learning rate
    assert config.correction_rate_of("wadiro_linreg") == 1.0
    lags = config.inputs("gbr_lags")  # the untuned trees: nothing to search, a year of lags
    assert (lags.feature_set, lags.history_weeks, lags.target) == ("off_day_lags", 52, "load")
    assert config.search_space("gbr_lags") == {} and "gbr_lags" in config.members
    assert config.inputs("wadiro_linreg") is config  # the paper's models keep the run's inputs
    groups = [models for _, models in config.input_groups(list(config.models))]
    stacked = next(i for i, g in enumerate(groups) if "wadiro_pcscnn" in g)
    assert groups.index(["gbr"]) < stacked and groups.index(["gbr_lags"]) < stacked
    # a base's models that are not in the run leave it
    one = ForecastConfig(models=("gbr", "wadiro_pcscnn", "seasonal_naive"), ensemble_members=())
    assert one.inputs("wadiro_pcscnn").base_model == "gbr" and one.base_models == ("gbr",)
    # without the base model in the run, the networks correct the persistence forecast
    alone = ForecastConfig(models=("wadiro_pcscnn", "seasonal_naive"), ensemble_members=())
    assert alone.inputs("wadiro_pcscnn").base_model is None


def test_a_model_keeps_its_own_tuning_budget_and_sampling():
    config = ForecastConfig(models=MODELS, ensemble_members=(), model_inputs={
        "gbr": ModelInputs(trials=3, tuning_sample_every=4, fit_sample_every=3)})
    gbr = config.inputs("gbr")
    assert (gbr.trials, gbr.tuning_sample_every, gbr.fit_sample_every) == (3, 4, 3)
    assert config.inputs("wadiro_linreg").trials == config.trials
    assert sorted(map(sorted, (m for _, m in config.input_groups(["gbr", "wadiro_linreg"])))) \
        == [["gbr"], ["wadiro_linreg"]]


def _building(weeks: int = 60, seed: int = 0) -> pd.DataFrame:
    """Hourly load with a daily and weekly shape, weather, and a level step 3 weeks before the
    target week."""
    rng = np.random.default_rng(seed)
    ts = pd.date_range(pd.Timestamp(WEEK, tz="UTC") - pd.Timedelta(weeks=weeks),
                       pd.Timestamp(WEEK, tz="UTC") + pd.Timedelta(weeks=1), freq="h",
                       inclusive="left")
    hour, weekday = ts.hour.to_numpy(), ts.dayofweek.to_numpy()
    temperature = 12 + 8 * np.sin(2 * np.pi * np.arange(len(ts)) / (24 * 365)) \
        + rng.normal(0, 1, len(ts))
    load = 50 + 30 * ((hour >= 8) & (hour < 18) & (weekday < 5)) + 0.8 * temperature
    load = load + np.where(ts >= pd.Timestamp(WEEK, tz="UTC") - pd.Timedelta(weeks=3), 15, 0)
    return pd.DataFrame({
        "ts": ts, "kwh": load + rng.normal(0, 2, len(ts)), "temperature_c": temperature,
        "irradiance_wm2": np.clip(400 * np.sin(np.pi * (hour - 6) / 12), 0, None),
        "wind_speed_ms": 3 + rng.normal(0, 0.5, len(ts)),
        "humidity_pct": 70 + rng.normal(0, 3, len(ts))})


def _forecast(frame: pd.DataFrame, config: ForecastConfig):
    result = forecast_building_week(
        frame, building_id="b", timezone="UTC", holiday_country="GB", holiday_subdiv="ENG",
        week=WEEK, config=config)
    return {o.model: o for o in result.outcomes}


@pytest.mark.filterwarnings("ignore")
def test_the_level_correction_moves_every_hour_by_its_share_of_the_median_error():
    frame = _building()
    plain = ForecastConfig(models=("gbr", "seasonal_naive"), ensemble_members=(), trials=2,
                           model_inputs={"gbr": ModelInputs(feature_set="year",
                                                            history_weeks=52, target="load")})
    corrected = plain.model_copy(update={"model_inputs": {"gbr": ModelInputs(
        feature_set="year", history_weeks=52, target="load", level_correction=0.5)}})
    before, after = _forecast(frame, plain)["gbr"], _forecast(frame, corrected)["gbr"]
    assert before.status == after.status == "ok"
    shift = 0.5 * float(np.median(before.validation_errors.to_numpy()))
    assert abs(shift) > 0.1  # a shift to see
    assert after.level_shift == pytest.approx(shift)
    np.testing.assert_allclose(after.y_hat, np.fmax(before.y_hat + shift, 0.0))
    # the intervals are centred on the corrected forecast, the errors corrected alike
    np.testing.assert_allclose(after.validation_errors, before.validation_errors)


@pytest.mark.filterwarnings("ignore")
def test_a_model_whose_own_window_cannot_be_used_is_reported_failed_not_dropped():
    """One reading missing four weeks before a target hour leaves the load four weeks back
    missing for that hour: a model that needs every input cannot forecast the week on its own
    window (and says so), while the trees, which take missing inputs, forecast every hour."""
    frame = _building(weeks=14)
    hole = pd.Timestamp(WEEK, tz="UTC") - pd.Timedelta(weeks=4) + pd.Timedelta(hours=5)
    frame.loc[frame["ts"] == hole, "kwh"] = np.nan  # the load 4 weeks before a target hour
    year = ModelInputs(feature_set="year")
    config = ForecastConfig(models=("gbr", "wadiro_linreg", "wadiro_scnn", "seasonal_naive"),
                            ensemble_members=(), feature_set="paper", target="load", trials=2,
                            model_inputs={"gbr": year, "wadiro_linreg": year})
    outcomes = _forecast(frame, config)
    assert outcomes["wadiro_scnn"].status == "ok"  # the run's own window is fine
    assert outcomes["wadiro_linreg"].status == "failed"
    assert "its own window (12 weeks, feature set year) cannot be used: test week has every " \
        "feature for 167 of 168 hours" in outcomes["wadiro_linreg"].error
    assert outcomes["gbr"].status == "ok" and np.isfinite(outcomes["gbr"].y_hat).all()
    assert len(outcomes["gbr"].y_hat) == 168


def _stacked_on_gbr(frame: pd.DataFrame, history: dict[str, IssuedForecast] | None = None):
    config = ForecastConfig(models=("gbr", "wadiro_linreg", "seasonal_naive"),
                            ensemble_members=(), feature_set="paper", target="residual",
                            persistence="day_type", trials=2,
                            model_inputs={"gbr": ModelInputs(target="load"),
                                          "wadiro_linreg": ModelInputs(base_model="gbr")})
    result = forecast_building_week(
        frame, building_id="b", timezone="UTC", holiday_country="GB", holiday_subdiv="ENG",
        week=WEEK, config=config, issued_history=history)
    return {o.model: o for o in result.outcomes}


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize(("issued_hours", "from_record"), [
    (2 * 168, True),  # the validation week and one fit week
    (2 * 168 - 1, False),  # an hour short of a fit week of the base's errors
    (168, False),  # the validation week alone: nothing to learn a correction from
    (0, False),  # no record: a new building, a backfill's first week
])
def test_a_model_stacks_on_its_base_from_the_first_week(issued_hours, from_record):
    """A stacked model corrects its base whether or not earlier weeks were run: on the base's
    issued forecasts once a week of fit hours and the validation week have them
    (``MIN_BASE_HOURS``), and before that on the base's out-of-sample forecasts of the window's
    last weeks, made in the run (``ModelOutcome.recent``)."""
    frame = _building(weeks=14)
    issued = frame[frame["ts"] < pd.Timestamp(WEEK, tz="UTC")].tail(issued_hours)
    history = {"gbr": IssuedForecast.from_series(
        {}, pd.Series(issued["kwh"].to_numpy() + 1.0, index=pd.DatetimeIndex(issued["ts"])))}
    outcomes = _stacked_on_gbr(frame, history if issued_hours else None)
    assert outcomes["gbr"].status == outcomes["wadiro_linreg"].status == "ok"
    assert outcomes["wadiro_linreg"].base == "gbr"
    assert (outcomes["gbr"].recent is None) == from_record
    if not from_record:  # gbr's 12 weeks: a fit on the first 8, forecasts of the last 4
        recent = pd.to_datetime(outcomes["gbr"].recent.hours, unit="us", utc=True)
        assert recent.min() == pd.Timestamp(WEEK, tz="UTC") - pd.Timedelta(weeks=4)
        assert recent.max() == pd.Timestamp(WEEK, tz="UTC") - pd.Timedelta(hours=1)


@pytest.mark.filterwarnings("ignore")
def test_the_base_made_in_the_run_is_out_of_sample():
    """No week's out-of-sample base forecast saw that week's load: with the base's
    hyperparameters given (a reused tuning), moving every reading of one of the weeks it
    forecasts leaves that week's forecasts as they were (the base is fitted on the weeks before
    them; a later week's lags would read it, as an issued forecast's did)."""
    frame = _building(weeks=30)
    year = {"gbr": ModelInputs(target="load", feature_set="year", history_weeks=26)}
    config = ForecastConfig(models=("gbr", "wadiro_pcscnn", "seasonal_naive"),
                            ensemble_members=(), feature_set="paper", target="residual",
                            trials=2, model_inputs={**year, "wadiro_pcscnn": ModelInputs(
                                base_model="gbr")})
    start = pd.Timestamp(WEEK, tz="UTC") - pd.Timedelta(weeks=3)
    week = pd.date_range(start, periods=168, freq="h")

    def recent(load_shift: float) -> np.ndarray:
        moved = frame.assign(kwh=frame["kwh"] + np.where(
            (frame["ts"] >= start) & (frame["ts"] < start + pd.Timedelta(weeks=1)),
            load_shift, 0.0))
        result = forecast_building_week(
            moved, building_id="b", timezone="UTC", holiday_country="GB",
            holiday_subdiv="ENG", week=WEEK, config=config, stored_params={"gbr": StoredParams(
                {"learning_rate": 0.1, "max_leaf_nodes": 31, "min_samples_leaf": 20,
                 "l2_regularization": 0.0}, WEEK - timedelta(weeks=1))})
        outcomes = {o.model: o for o in result.outcomes}
        assert outcomes["wadiro_pcscnn"].base == "gbr"
        return outcomes["gbr"].recent.at(week)

    before, after = recent(0.0), recent(500.0)
    assert np.isfinite(before).all()
    np.testing.assert_array_equal(before, after)


def _issued(hours: pd.DatetimeIndex, values) -> IssuedForecast:
    return IssuedForecast.from_series({}, pd.Series(np.asarray(values, float), index=hours))


def test_a_base_of_several_models_is_their_mean_where_all_forecast():
    from tasks.protocol.forecasting import ModelOutcome, _issued_base

    history_hours = pd.date_range("2024-05-20", periods=336, freq="h", tz="UTC")
    test_ts = pd.Series(pd.date_range("2024-06-03", periods=168, freq="h", tz="UTC"))
    history = {"gbr": _issued(history_hours, np.arange(336.0)),
               "gbr_lags": _issued(history_hours[24:], np.full(312, 100.0))}
    outcomes = {name: ModelOutcome(model=name, status="ok", y_hat=np.full(168, value))
                for name, value in (("gbr", 10.0), ("gbr_lags", 30.0))}
    base = _issued_base("gbr+gbr_lags", outcomes, history, test_ts)
    at = base.at(pd.DatetimeIndex([*history_hours[[0, 23, 24, 335]], test_ts.iloc[0]]))
    # gbr_lags issued nothing for the first day: no base there; elsewhere the mean
    assert np.isnan(at[:2]).all()
    assert at[2:].tolist() == [(24 + 100) / 2, (335 + 100) / 2, (10 + 30) / 2]
    assert _issued_base("gbr", outcomes, history, test_ts).at(
        pd.DatetimeIndex([history_hours[5]])).tolist() == [5.0]
    outcomes["gbr_lags"] = ModelOutcome(model="gbr_lags", status="failed")
    assert _issued_base("gbr+gbr_lags", outcomes, history, test_ts) is None


def test_a_model_stacked_on_two_models_names_its_base():
    frame = _building(weeks=14)
    config = ForecastConfig(models=("gbr", "gbr_lags", "wadiro_linreg", "seasonal_naive"),
                            ensemble_members=(), feature_set="paper", target="residual",
                            persistence="day_type", trials=2,
                            model_inputs={"gbr": ModelInputs(target="load"),
                                          "gbr_lags": ModelInputs(target="load"),
                                          "wadiro_linreg": ModelInputs(
                                              base_model="gbr+gbr_lags")})
    issued = frame[frame["ts"] < pd.Timestamp(WEEK, tz="UTC")].tail(3 * 168)
    hours = pd.DatetimeIndex(issued["ts"])
    history = {"gbr": _issued(hours, issued["kwh"] + 1.0),
               "gbr_lags": _issued(hours, issued["kwh"] - 1.0)}
    result = forecast_building_week(
        frame, building_id="b", timezone="UTC", holiday_country="GB", holiday_subdiv="ENG",
        week=WEEK, config=config, issued_history=history)
    outcomes = {o.model: o for o in result.outcomes}
    assert outcomes["wadiro_linreg"].status == "ok", outcomes["wadiro_linreg"].error
    assert outcomes["wadiro_linreg"].base == "gbr+gbr_lags"
