"""A model whose final fit serves several weeks (``refit_weeks``): the weeks after a fit forecast
with it from their own inputs, it is made again when it no longer serves, and the warehouse
keeps it between runs.

Checked against the fitted estimator itself (its prediction on the week's own features, built
here from the stored readings), against the same weeks run one run at a time through the
warehouse, and against the dates by hand.
"""

from dataclasses import replace
from datetime import date, timedelta

import numpy as np
import pandas as pd
import pytest
from wadiro_fleet.tasks.ingest.synthetic_fleet import FleetSpec, ingest_synthetic
from wadiro_fleet.tasks.protocol.batch import run_jobs
from wadiro_fleet.tasks.protocol.config import PAPER, ForecastConfig
from wadiro_fleet.tasks.protocol.features import TS, build_features
from wadiro_fleet.tasks.protocol.forecasting import StoredFit
from wadiro_fleet.tasks.warehouse.batches import load_jobs
from wadiro_fleet.tasks.warehouse.connection import connect
from wadiro_fleet.tasks.warehouse.pending import load_staged, stage_results
from wadiro_fleet.tasks.warehouse.results import load_stored_fits, write_results
from wadiro_fleet.tasks.warehouse.runs import record_run_start
from wadiro_fleet.tasks.warehouse.schema import ensure_schema

FIRST = date(2024, 3, 4)
WEEKS = [FIRST + timedelta(weeks=k) for k in range(5)]
BUILDING = "synthetic_b00000"
LAGS = {"feature_set": "off_day_lags", "history_weeks": 6, "target": "load"}


def _config(refit_weeks: int = 3, **lags) -> ForecastConfig:
    return ForecastConfig(models=("gbr_lags", "seasonal_naive"), tuning="reuse",
                          model_inputs={"gbr_lags": {**LAGS, **lags, "refit_weeks": refit_weeks}})


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory):
    path = tmp_path_factory.mktemp("refit") / "w.duckdb"
    ingest_synthetic(path, FleetSpec(buildings=2, start=date(2024, 1, 1), weeks=15, seed=8))
    with connect(path) as con:
        ensure_schema(con)
    return path


@pytest.fixture(scope="module")
def weekly(warehouse):
    """The five weeks in one job, fitted every third week."""
    config = _config()
    [job] = load_jobs(warehouse, [BUILDING], WEEKS, config)
    return job, run_jobs([job], config)


def _gbr(result):
    return next(o for o in result.outcomes if o.model == "gbr_lags")


def test_the_paper_fits_every_model_for_every_window():
    assert PAPER.refit_models == ()
    assert PAPER.refit_weeks_of("wadiro_pcscnn") == 1


def test_a_fit_serves_its_weeks_by_hand():
    fit = StoredFit(b"", {"max_iter": 50}, ("a", "b"), None, FIRST)
    served = [fit.serves(FIRST + timedelta(weeks=k), 3, {"max_iter": 50}, ["a", "b"], None)
              for k in range(-1, 5)]
    assert served == [False, False, True, True, False, False]  # W+1 and W+2, not W itself
    week = FIRST + timedelta(weeks=1)
    assert not fit.serves(week, 3, {"max_iter": 60}, ["a", "b"], None)  # tuned again
    assert not fit.serves(week, 3, {"max_iter": 50}, ["b", "a"], None)  # other features
    assert not fit.serves(week, 3, {"max_iter": 50}, ["a", "b"], "gbr")  # another base
    assert not fit.serves(week, 1, {"max_iter": 50}, ["a", "b"], None)  # fitted every week


def test_a_fit_serves_its_weeks_then_is_made_again(weekly):
    _, results = weekly
    outcomes = [_gbr(r) for r in results]
    assert all(o.status == "ok" for o in outcomes)
    assert [o.fitted_week for o in outcomes] == [WEEKS[0]] * 3 + [WEEKS[3]] * 2
    assert [o.fit_time_s == 0 for o in outcomes] == [False, True, True, False, True]
    assert [sorted(r.fits) for r in results] == [["gbr_lags"], [], [], ["gbr_lags"], []]
    assert all(r.fits["gbr_lags"].fitted_week == r.week for r in results if r.fits)
    # a week that reuses a fit still validates on last week's forecast and scores its own
    assert all(o.validation_source == "issued" for o in outcomes[1:])
    assert all(np.all(o.y_hat >= 0) for o in outcomes)


def test_a_reused_fit_forecasts_from_the_weeks_own_inputs(weekly):
    """Week 2's forecast is week 1's fitted trees applied to week 2's features, built here from
    the building's readings; it is not week 1's forecast again."""
    job, results = weekly
    fit = results[0].fits["gbr_lags"]
    info = job.info
    features = build_features(job.hours, timezone=info.timezone,
                              holiday_country=info.holiday_country,
                              holiday_subdiv=info.holiday_subdiv, feature_set="off_day_lags")
    week = features.set_index(TS).loc[results[1].test_ts]
    expected = np.fmax(fit.estimator().predict(week[list(fit.columns)].to_numpy()), 0.0)
    reused = _gbr(results[1])
    np.testing.assert_allclose(reused.y_hat, expected, rtol=1e-12)
    assert not np.allclose(reused.y_hat, _gbr(results[0]).y_hat)


def test_fitting_every_week_refits_every_week(warehouse):
    config = _config(refit_weeks=1)
    [job] = load_jobs(warehouse, [BUILDING], WEEKS[:2], config)
    results = run_jobs([job], config)
    assert [_gbr(r).fitted_week for r in results] == WEEKS[:2]
    assert all(not r.fits for r in results)  # nothing to keep for later weeks


def _run_one_week_at_a_time(warehouse, config, weeks, run_prefix):
    for k, week in enumerate(weeks):
        [job] = load_jobs(warehouse, [BUILDING], [week], config)
        [result] = run_jobs([job], config)
        with connect(warehouse) as con:
            run_id = f"{run_prefix}-{k}"
            record_run_start(con, run_id=run_id, flow="weekly", parameters=config.as_record(),
                             code_version="test")
            write_results(con, [result], run_id=run_id, models=config.models)
        yield result


def test_runs_one_week_at_a_time_forecast_as_one_run_does(warehouse, weekly, tmp_path):
    """Through the warehouse, each week its own run: the same fits serve the same weeks and the
    forecasts are the same as those of the five weeks in one job."""
    _, together = weekly
    copy = tmp_path / "w.duckdb"
    copy.write_bytes(warehouse.read_bytes())
    apart = list(_run_one_week_at_a_time(copy, _config(), WEEKS, "week"))
    assert [_gbr(r).fitted_week for r in apart] == [_gbr(r).fitted_week for r in together]
    for one, other in zip(apart, together, strict=True):
        np.testing.assert_allclose(_gbr(one).y_hat, _gbr(other).y_hat, rtol=1e-12)
    with connect(copy, read_only=True) as con:  # one fit kept per building and model: the latest
        kept = con.execute("SELECT building_id, model, target_week FROM fitted_models").fetchall()
    assert kept == [(BUILDING, "gbr_lags", WEEKS[3])]


def test_the_warehouse_gives_back_fits_of_the_same_protocol_while_they_serve(warehouse, tmp_path):
    copy = tmp_path / "w.duckdb"
    copy.write_bytes(warehouse.read_bytes())
    config = _config()
    [written] = _run_one_week_at_a_time(copy, config, WEEKS[:1], "first")
    with connect(copy) as con:
        found = load_stored_fits(con, [BUILDING], config, WEEKS[1])[BUILDING]["gbr_lags"]
        made = written.fits["gbr_lags"]
        assert (found.fitted_week, found.params, found.columns) == (
            made.fitted_week, made.params, made.columns)
        X = np.random.default_rng(0).normal(size=(5, len(made.columns)))
        np.testing.assert_array_equal(found.estimator().predict(X), made.estimator().predict(X))
        assert BUILDING in load_stored_fits(con, [BUILDING], config, WEEKS[2])
        assert load_stored_fits(con, [BUILDING], config, WEEKS[3]) == {}  # no longer serves
        assert load_stored_fits(con, [BUILDING], config, WEEKS[0]) == {}  # not before it
        other = _config(fit_sample_every=3)  # another protocol: its fits are not these
        assert load_stored_fits(con, [BUILDING], other, WEEKS[1]) == {}
        # the week written again replaces its fit, never adds a second
        record_run_start(con, run_id="again", flow="weekly", parameters=config.as_record(),
                         code_version="test")
        write_results(con, [written], run_id="again", models=config.models)
        assert con.execute("SELECT count(*), any_value(run_id) FROM fitted_models"
                           ).fetchone() == (1, "again")


def test_a_fit_staged_beside_a_locked_warehouse_loads_as_written(warehouse, weekly, tmp_path):
    """A run that could not write stages its results as Parquet files: the fit's bytes come
    back whole when they are loaded."""
    copy = tmp_path / "w.duckdb"
    copy.write_bytes(warehouse.read_bytes())
    _, results = weekly
    config = _config()
    with connect(copy) as con:
        record_run_start(con, run_id="staged", flow="weekly", parameters=config.as_record(),
                         code_version="test")
    stage_results(copy, "staged", results[:1], config.models)
    with connect(copy) as con:
        load_staged(con, copy, "staged")
        found = load_stored_fits(con, [BUILDING], config, WEEKS[1])[BUILDING]["gbr_lags"]
    X = np.random.default_rng(1).normal(size=(5, len(found.columns)))
    np.testing.assert_array_equal(found.estimator().predict(X),
                                  results[0].fits["gbr_lags"].estimator().predict(X))


def test_a_fit_that_cannot_be_unpacked_is_made_again(warehouse, weekly):
    """A stored fit written by another library version, or damaged: the week fits the model
    again instead of failing."""
    job, results = weekly
    good = results[0].fits["gbr_lags"]
    damaged = replace(good, packed=good.packed[: len(good.packed) // 2])
    config = _config()
    [again] = run_jobs([replace(job, weeks=(WEEKS[1],), stored_fits={"gbr_lags": damaged})],
                       config)
    [served] = run_jobs([replace(job, weeks=(WEEKS[1],), stored_fits={"gbr_lags": good})],
                        config)
    assert (_gbr(again).status, _gbr(again).fitted_week) == ("ok", WEEKS[1])
    assert again.fits["gbr_lags"].fitted_week == WEEKS[1]
    assert _gbr(served).fitted_week == WEEKS[0]


def test_a_week_without_a_weather_input_fits_apart_and_keeps_the_usual_fit(weekly):
    """Weeks whose window leaves a weather input out (the second, blanked here, and the third,
    which validates on it) fit their own model without it, and that fit is not kept: the week
    after them forecasts with the usual fit again."""
    job, _ = weekly
    hours = job.hours.copy()
    second = (hours["ts"] >= pd.Timestamp(WEEKS[1], tz="Europe/London")) & (
        hours["ts"] < pd.Timestamp(WEEKS[2], tz="Europe/London"))
    hours.loc[second, "wind_speed_ms"] = np.nan
    results = run_jobs([replace(job, hours=hours, weeks=tuple(WEEKS[:4]))],
                       _config(refit_weeks=4))
    assert [bool(r.left_out) for r in results] == [False, True, True, False]
    assert [_gbr(r).fitted_week for r in results] == [WEEKS[0], WEEKS[1], WEEKS[2], WEEKS[0]]
    assert [sorted(r.fits) for r in results] == [["gbr_lags"], [], [], []]


def test_a_model_still_gathering_its_history_is_fitted_every_week(warehouse):
    """Fitted on 14 weeks, on readings from 2024-01-01: a fit serves later weeks only once at
    least three quarters of its history's hours (1,764) were fitted on."""
    config = _config(history_weeks=14)
    weeks = [FIRST + timedelta(weeks=k) for k in range(6)]
    [job] = load_jobs(warehouse, [BUILDING], weeks, config)
    results = run_jobs([job], config)
    fitted_on = [_gbr(r).n_train for r in results]
    assert fitted_on[1] < 0.75 * 14 * 168 <= fitted_on[2]  # the weeks grow by 168 hours
    assert [_gbr(r).fitted_week for r in results] == [*weeks[:3], weeks[2], weeks[2], weeks[5]]
    assert [bool(r.fits) for r in results] == [False, False, True, False, False, True]
