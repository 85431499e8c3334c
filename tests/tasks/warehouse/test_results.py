"""The per-(building, week) protocol and its idempotent warehouse writes, on a synthetic fleet."""

import math
from datetime import date, timedelta

import duckdb
import numpy as np
import pandas as pd
import pytest
from pydantic import ValidationError

from tasks.ingest.synthetic_fleet import FleetSpec, ingest_synthetic
from tasks.protocol.config import ForecastConfig
from tasks.protocol.forecasting import StoredParams, epoch_us, forecast_building_week
from tasks.protocol.intervals import QUANTILES, quantile_suffix
from tasks.warehouse.batches import load_jobs
from tasks.warehouse.connection import connect
from tasks.warehouse.results import load_stored_params, result_tables, write_results
from tasks.warehouse.schema import ensure_schema

WEEK = date(2024, 3, 25)  # the week of the spring clock change in Europe/London
FAST = ("svr", "wadiro_linreg", "seasonal_naive")


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory):
    path = tmp_path_factory.mktemp("wh") / "w.duckdb"
    ingest_synthetic(path, FleetSpec(buildings=2, start=date(2024, 1, 1), weeks=14, seed=3))
    with connect(path) as con:
        ensure_schema(con)
    return path


def _run(warehouse, building_id, config, stored=None, week=WEEK):
    [job] = load_jobs(warehouse, [building_id], [week], config)
    info = job.info
    return forecast_building_week(
        job.hours, building_id=building_id, timezone=info.timezone,
        holiday_country=info.holiday_country, holiday_subdiv=info.holiday_subdiv,
        week=week, config=config, stored_params=stored,
    )


def test_protocol_outputs(warehouse):
    config = ForecastConfig(models=FAST, trials=3)
    res = _run(warehouse, "synthetic_b00000", config)
    assert res.status == "ok"
    assert len(res.test_ts) == 167  # spring-forward week: one local hour fewer
    assert [o.model for o in res.outcomes] == list(FAST)
    for out in res.outcomes:
        assert out.status == "ok", out.error
        assert out.y_hat.shape == (167,)
        assert out.scores.n_hours <= 167
    svr = res.outcomes[0]
    assert len(svr.trials) == 3 and svr.tuned_week == WEEK


def test_compute_time_is_the_protocols_cpu_and_is_stored(warehouse):
    """``compute_time_s`` is this thread's CPU for the building-week: positive, never more than
    the CPU and the wall time around the call, and written to ``window_status``."""
    import time

    config = ForecastConfig(models=("svr", "seasonal_naive"), trials=3)
    cpu0, wall0 = time.thread_time(), time.perf_counter()
    res = _run(warehouse, "synthetic_b00000", config)
    cpu, wall = time.thread_time() - cpu0, time.perf_counter() - wall0
    assert 0 < res.compute_time_s <= min(cpu, wall) + 1e-3
    with connect(":memory:") as con:
        ensure_schema(con)
        write_results(con, [res], run_id="timed", models=config.models)
        stored = con.execute("SELECT compute_time_s FROM window_status").fetchone()[0]
    assert stored == pytest.approx(res.compute_time_s)


def test_rerun_reproduces_tuning(warehouse):
    config = ForecastConfig(models=("svr",), trials=4)
    a = _run(warehouse, "synthetic_b00001", config).outcomes[0]
    b = _run(warehouse, "synthetic_b00001", config).outcomes[0]
    assert a.params == b.params
    np.testing.assert_array_equal(a.y_hat, b.y_hat)


def test_reuse_skips_tuning_and_expires(warehouse):
    config = ForecastConfig(models=("svr",), trials=3, tuning="reuse", reuse_max_age_weeks=2)
    fresh = StoredParams({"C": 2.0, "fit_intercept": True, "loss": "l1"}, WEEK - timedelta(weeks=1))
    out = _run(warehouse, "synthetic_b00000", config, {"svr": fresh}).outcomes[0]
    assert out.trials == [] and out.params["C"] == 2.0 and out.tuned_week == fresh.tuned_week
    stale = StoredParams(fresh.params, WEEK - timedelta(weeks=3))
    out = _run(warehouse, "synthetic_b00000", config, {"svr": stale}).outcomes[0]
    assert len(out.trials) == 3 and out.tuned_week == WEEK


def test_seasonal_naive_is_the_same_local_hour_last_week(warehouse):
    """In the week of the spring clock change: 168 h back before the change, 167 h after it
    (the same London wall-clock hour), checked against the stored readings."""
    res = _run(warehouse, "synthetic_b00000", ForecastConfig(models=("seasonal_naive",)))
    y_hat = res.outcomes[0].y_hat
    change = pd.Timestamp("2024-03-31 01:00Z")
    checked = {168: 0, 167: 0}
    with duckdb.connect(str(warehouse), read_only=True) as con:
        con.execute("SET TimeZone='UTC'")
        for i, ts in enumerate(res.test_ts):
            lag = 168 if ts < change else 167
            last_week = con.execute(
                "SELECT kwh FROM meter_readings WHERE building_id = ? AND ts = ?",
                ["synthetic_b00000", (ts - pd.Timedelta(hours=lag)).to_pydatetime()],
            ).fetchone()[0]
            if last_week is not None:
                assert y_hat[i] == pytest.approx(last_week)
                checked[lag] += 1
    assert checked[168] > 100 and checked[167] > 15


def test_a_week_without_history_still_gets_last_weeks_load(warehouse):
    """The fleet starts on 2024-01-01: the second week has too little history for the learned
    models, but last week's load exists, so seasonal naive is forecast and published."""
    res = _run(warehouse, "synthetic_b00000", ForecastConfig(models=FAST), week=date(2024, 1, 8))
    assert res.status == "insufficient_data" and "fit weeks have 0 usable hours" in res.reason
    assert [o.model for o in res.outcomes] == ["seasonal_naive"] and res.outcomes[0].status == "ok"
    assert res.publication.model == "seasonal_naive"
    # the first week has no earlier load at all: nothing is published, and the reason says so
    first = _run(warehouse, "synthetic_b00000", ForecastConfig(models=FAST), week=date(2024, 1, 1))
    assert first.publication is None
    assert first.outcomes[0].status == "failed" and "no load" in first.outcomes[0].error


def test_unknown_model_name_and_feature_set():
    with pytest.raises(ValidationError, match="unknown model.*nope"):
        ForecastConfig(models=("svr", "nope"))
    with pytest.raises(ValidationError, match="unknown feature set 'bogus'"):
        ForecastConfig(feature_set="bogus")
    with pytest.raises(ValidationError, match="no model selected"):
        ForecastConfig(models=())


def _table_rows(con, table):
    cols = [c for c in con.execute(f"SELECT * FROM {table} LIMIT 0").df().columns if c != "run_id"]
    return con.execute(f"SELECT {', '.join(cols)} FROM {table} ORDER BY ALL").fetchall()


def test_writes_replace_and_never_duplicate(warehouse):
    config = ForecastConfig(models=FAST, trials=2)
    results = [_run(warehouse, b, config) for b in ("synthetic_b00000", "synthetic_b00001")]
    with connect(warehouse) as con:
        write_results(con, results, run_id="r1", models=config.models)
        first = {t: _table_rows(con, t) for t in ("forecasts", "scores", "tuning_trials", "model_fits", "window_status")}
        write_results(con, results, run_id="r2", models=config.models)
        second = {t: _table_rows(con, t) for t in first}
        assert first == second
        assert len(first["forecasts"]) == 2 * 3 * 167
        assert con.execute("SELECT count(DISTINCT run_id) FROM forecasts").fetchone()[0] == 1
        # a rerun with a model that now fails to produce anything removes its stale rows
        only_naive = [
            type(r)(r.building_id, r.week, r.status, r.reason, r.coverage, r.test_ts,
                    [o for o in r.outcomes if o.model == "seasonal_naive"])
            for r in results
        ]
        write_results(con, only_naive, run_id="r3", models=config.models)
        models = {r[0] for r in con.execute("SELECT DISTINCT model FROM forecasts").fetchall()}
        assert models == {"seasonal_naive"}
        # the leaderboard view answers
        assert con.execute("SELECT count(*) FROM leaderboard").fetchone()[0] == 1


def test_stored_params_pick_latest_own_tuning(warehouse):
    config = ForecastConfig(models=("svr",), trials=2)
    res = _run(warehouse, "synthetic_b00000", config)
    with connect(warehouse) as con:
        write_results(con, [res], run_id="r4", models=config.models)
        stored = load_stored_params(con, ["synthetic_b00000"], ["svr"], WEEK + timedelta(weeks=1))
        assert stored["synthetic_b00000"]["svr"].params == res.outcomes[0].params
        assert load_stored_params(con, ["synthetic_b00000"], ["svr"], WEEK) == {}


def test_rescore_fills_in_actuals_that_arrived_later(warehouse, tmp_path):
    """A live forecast (no actuals yet) is scored once its week's readings are stored."""
    import shutil

    from tasks.warehouse.rescoring import rescore_forecasts

    path = tmp_path / "live.duckdb"
    shutil.copy(warehouse, path)
    config = ForecastConfig(models=("svr",), trials=2)
    res = _run(path, "synthetic_b00000", config)
    expected = res.outcomes[0].scores
    start, end = res.test_ts.min().to_pydatetime(), res.test_ts.max().to_pydatetime()
    where = "building_id = 'synthetic_b00000' AND ts BETWEEN ? AND ?"
    with connect(path) as con:  # pretend the week had not happened yet when it was forecast
        con.execute(f"CREATE TABLE held AS SELECT * FROM meter_readings WHERE {where}", [start, end])
        con.execute(f"UPDATE meter_readings SET kwh = NULL WHERE {where}", [start, end])
    live = _run(path, "synthetic_b00000", config)
    assert live.outcomes[0].scores.n_hours == 0
    with connect(path) as con:
        write_results(con, [live], run_id="live", models=config.models)
        con.execute(f"DELETE FROM meter_readings WHERE {where}", [start, end])
        con.execute("INSERT INTO meter_readings SELECT * FROM held")
        assert rescore_forecasts(con, WEEK) == 1
        assert rescore_forecasts(con, WEEK) == 0  # nothing new the second time
        mae, rmse, n = con.execute("SELECT mae, rmse, n_hours FROM scores WHERE model = 'svr' "
                                   "AND building_id = 'synthetic_b00000'").fetchone()
        quantiles = con.execute("SELECT * FROM scores WHERE model = 'svr' AND building_id = "
                                "'synthetic_b00000'").df().iloc[0]
    np.testing.assert_array_equal(live.outcomes[0].y_hat, res.outcomes[0].y_hat)
    assert n == expected.n_hours
    assert mae == pytest.approx(expected.mae) and rmse == pytest.approx(expected.rmse)
    # the quantiles' calibration and pinball loss, rescored in SQL, are Python's
    assert set(expected.pinball) == set(QUANTILES)
    for level in QUANTILES:
        suffix = quantile_suffix(level)
        assert quantiles[f"below_{suffix}"] == pytest.approx(expected.quantile_below[level])
        assert quantiles[f"pinball_{suffix}"] == pytest.approx(expected.pinball[level])
    assert quantiles["pinball_mean"] == pytest.approx(expected.pinball_mean)


def test_rescore_of_some_buildings_touches_only_theirs_and_agrees_with_a_full_rescore(
    warehouse, tmp_path
):
    """Rescoring by building (as a run does after each batch) updates exactly the scores a
    rescore of the whole table updates for those buildings, and no other building's."""
    import shutil

    from tasks.warehouse.rescoring import rescore_forecasts

    config = ForecastConfig(models=("wadiro_linreg", "seasonal_naive"), trials=2)
    ids = ("synthetic_b00000", "synthetic_b00001")
    results = [_run(warehouse, b, config) for b in ids]
    paths = [tmp_path / "some.duckdb", tmp_path / "all.duckdb"]
    for path in paths:
        shutil.copy(warehouse, path)
        with connect(path) as con:
            write_results(con, results, run_id="r", models=config.models)
            con.execute("UPDATE meter_readings SET kwh = kwh * 1.5 WHERE ts >= ?",
                        [results[0].test_ts.min().to_pydatetime()])
    scores = "SELECT building_id, model, target_week, mae, rmse, n_hours FROM scores"

    def by_building(con):
        rows = {}
        for building, *rest in con.execute(scores).fetchall():
            rows.setdefault(building, set()).add(tuple(rest))
        return rows

    with connect(paths[0]) as con:
        before = by_building(con)
        some_updated = rescore_forecasts(con, WEEK, buildings=[ids[0]])
        some = by_building(con)
    with connect(paths[1]) as con:
        all_updated = rescore_forecasts(con, WEEK)
        full = by_building(con)
    assert some[ids[0]] == full[ids[0]] != before[ids[0]]  # as a full rescore ...
    assert some_updated == len(full[ids[0]] - before[ids[0]]) >= 2
    assert some[ids[1]] == before[ids[1]] != full[ids[1]]  # ... the other building untouched
    assert all_updated == some_updated + len(full[ids[1]] - before[ids[1]])


def test_rescoring_every_building_in_passes_agrees_with_one_pass(warehouse, tmp_path,
                                                                  monkeypatch):
    """The fleet's rescoring, a pass per building (as a large fleet's takes them,
    ``RESCORE_BUILDINGS`` at a time), updates the same scores to the same numbers as one pass
    over both, and leaves the connection's memory limit as it found it."""
    import shutil

    from tasks.warehouse import rescoring

    config = ForecastConfig(models=("wadiro_linreg", "seasonal_naive"), trials=2)
    results = [_run(warehouse, b, config) for b in ("synthetic_b00000", "synthetic_b00001")]
    scores = "SELECT building_id, model, target_week, mae, rmse, n_hours FROM scores ORDER BY ALL"
    found = []
    for per in (1, 2):
        path = tmp_path / f"per-{per}.duckdb"
        shutil.copy(warehouse, path)
        monkeypatch.setattr(rescoring, "RESCORE_BUILDINGS", per)
        with connect(path) as con:
            write_results(con, results, run_id="r", models=config.models)
            con.execute("UPDATE meter_readings SET kwh = kwh * 1.5 WHERE ts >= ?",
                        [results[0].test_ts.min().to_pydatetime()])
            limit = con.execute("SELECT current_setting('memory_limit')").fetchone()[0]
            found.append((rescoring.rescore_forecasts(con, WEEK), con.execute(scores).fetchall()))
            assert con.execute("SELECT current_setting('memory_limit')").fetchone()[0] == limit
    (passes, by_passes), (one_pass, by_one) = found
    assert passes == one_pass >= 4
    assert by_passes == by_one  # every digit: each mean sums exactly


def test_rescored_scores_do_not_depend_on_the_tables_physical_order(warehouse, tmp_path):
    """The same forecasts and readings stored in opposite row orders (as two runs store them
    when their batches finish in different orders) rescore to the same numbers, every digit,
    and the MAE is the hourly absolute errors' exact mean (``math.fsum``) to 1e-15."""
    import shutil

    from tasks.warehouse.rescoring import rescore_forecasts

    config = ForecastConfig(models=("wadiro_linreg", "seasonal_naive"), trials=2)
    results = [_run(warehouse, b, config) for b in ("synthetic_b00000", "synthetic_b00001")]
    scores = ("SELECT building_id, model, mae, rmse, coverage_80, width_95 FROM scores "
              "WHERE target_week = ? ORDER BY ALL")
    found = []
    for order in ("ASC", "DESC"):
        path = tmp_path / f"{order}.duckdb"
        shutil.copy(warehouse, path)
        with connect(path) as con:
            write_results(con, results, run_id="r", models=config.models)
            con.execute("UPDATE meter_readings SET kwh = kwh * 1.37 + 0.1 WHERE ts >= ?",
                        [results[0].test_ts.min().to_pydatetime()])
            for table in ("forecasts", "meter_readings"):
                con.execute(f"CREATE TEMP TABLE held AS SELECT * FROM {table} "
                            f"ORDER BY building_id {order}, ts {order}")
                con.execute(f"DELETE FROM {table}")
                con.execute(f"INSERT INTO {table} SELECT * FROM held")
                con.execute("DROP TABLE held")
            assert rescore_forecasts(con, WEEK) >= 4
            found.append(con.execute(scores, [WEEK]).fetchall())
            hourly = con.execute(
                "SELECT abs(f.y_hat - m.kwh) FROM forecasts f JOIN meter_readings m "
                "USING (building_id, ts) WHERE f.building_id = 'synthetic_b00001' AND "
                "f.model = 'wadiro_linreg' AND f.target_week = ? AND m.kwh IS NOT NULL",
                [WEEK]).fetchall()
    ascending, descending = found
    assert ascending == descending
    mae = next(row[2] for row in ascending if row[:2] == ("synthetic_b00001", "wadiro_linreg"))
    exact = math.fsum(error for (error,) in hourly) / len(hourly)  # correctly rounded sum
    assert mae == pytest.approx(exact, rel=1e-15, abs=0)


def test_a_forecast_wildly_off_is_rescored_without_overflow(warehouse, tmp_path):
    """An hour 1e12 kWh off (a broken model, a unit mistake) does not overflow the exact sums:
    it is scored as :data:`~tasks.warehouse.rescoring.EXACT_BOUND` off, and the hours without a
    reading stay out of every mean."""
    import shutil

    from tasks.warehouse.rescoring import EXACT_BOUND, rescore_forecasts

    config = ForecastConfig(models=("seasonal_naive",), trials=2)
    result = _run(warehouse, "synthetic_b00000", config)
    path = tmp_path / "off.duckdb"
    shutil.copy(warehouse, path)
    first, last = result.test_ts.min().to_pydatetime(), result.test_ts.max().to_pydatetime()
    ours = "building_id = 'synthetic_b00000' AND model = 'seasonal_naive' AND target_week = ?"
    with connect(path) as con:  # (other tests may have written to the module's warehouse)
        write_results(con, [result], run_id="r", models=config.models)
        con.execute(f"UPDATE forecasts SET y_hat = 1e12 WHERE {ours} AND ts = ?", [WEEK, first])
        con.execute("UPDATE meter_readings SET kwh = NULL WHERE building_id = 'synthetic_b00000' "
                    "AND ts = ?", [last])
        assert rescore_forecasts(con, WEEK) >= 1
        mae, rmse, n = con.execute(f"SELECT mae, rmse, n_hours FROM scores WHERE {ours}",
                                   [WEEK]).fetchone()
        errors = con.execute(
            "SELECT least(abs(f.y_hat - m.kwh), ?) FROM forecasts f JOIN meter_readings m "
            f"USING (building_id, ts) WHERE m.kwh IS NOT NULL AND {ours}",
            [EXACT_BOUND, WEEK]).fetchall()
    assert n == len(errors) == result.outcomes[0].scores.n_hours - 1
    assert mae == pytest.approx(math.fsum(e for (e,) in errors) / n, rel=1e-12)
    assert rmse == pytest.approx(math.sqrt(math.fsum(e * e for (e,) in errors) / n), rel=1e-12)


def test_a_week_with_a_weather_gap_still_publishes(warehouse):
    """58 hours of the target week's temperature and irradiance missing (more than a quarter
    of the week): both are left out, the models run on the wind and the calendar, and a forecast
    is published; the window's row says what was left out."""
    config = ForecastConfig(models=FAST, trials=2)
    [job] = load_jobs(warehouse, ["synthetic_b00001"], [WEEK], config)
    hours = job.hours.copy()
    gap = (hours["ts"] >= pd.Timestamp("2024-03-26 10:00Z")) & (hours["ts"] < pd.Timestamp("2024-03-28 20:00Z"))
    hours.loc[gap, ["temperature_c", "irradiance_wm2"]] = np.nan
    res = forecast_building_week(
        hours, building_id="synthetic_b00001", timezone=job.info.timezone,
        holiday_country=job.info.holiday_country, holiday_subdiv=job.info.holiday_subdiv,
        week=WEEK, config=config,
    )
    assert res.status == "ok" and set(res.left_out) == {"temperature_c", "irradiance_wm2"}
    assert "left out: temperature_c missing for 58 of 167 target-week hours" in res.reason
    assert all(o.status == "ok" for o in res.outcomes)
    status = result_tables([res], "r")["window_status"].to_pylist()[0]
    assert status["left_out"].startswith("temperature_c missing for 58 of 167")
    assert res.publication is not None and np.isfinite(
        next(o for o in res.outcomes if o.model == res.publication.model).y_hat).all()


def test_residual_target_keeps_the_constrained_network_at_or_above_zero(warehouse):
    config = ForecastConfig(models=("wadiro_pcscnn", "seasonal_naive"), trials=2,
                            target="residual", feature_set="recent")
    res = _run(warehouse, "synthetic_b00000", config)
    network = res.outcomes[0]
    assert network.status == "ok", network.error
    assert network.scores.n_train_violations == 0
    # the bound holds at every forecast hour too: the target week's inputs are bound points
    assert np.isfinite(network.y_hat).all() and (network.y_hat >= -1e-6).all()
    assert network.scores.n_violations == 0
    assert network.validation_mae is not None and network.intervals.bounds(0.8) is not None
    lower, upper = network.intervals.bounds(0.95)
    assert (lower >= 0).all() and (upper >= lower).all()


def test_forecast_rows_are_each_models_values_at_its_hours():
    """Hand-made outcomes of two building-weeks in two time zones: each forecast row holds its
    model's value at its UTC hour, the bounds of its own intervals (NULL where it has none), and
    a missing value (NaN) is stored as NULL."""
    from tasks.protocol.forecasting import BuildingWeekResult, ModelOutcome
    from tasks.protocol.intervals import Intervals
    from tasks.protocol.scoring import Scores

    def outcome(model, y_hat, intervals=None):
        scores = Scores(mae=1.0, rmse=1.0, n_hours=3, n_violations=0, n_train_violations=0,
                        mean_actual=2.0)
        return ModelOutcome(model, "ok", y_hat=np.array(y_hat), intervals=intervals or Intervals(),
                            scores=scores, params={})

    with_bounds = Intervals(lower={0.8: np.array([0.5, 1.5, 2.5])},
                            upper={0.8: np.array([1.5, 2.5, 3.5])})
    hours = {"a": pd.date_range("2024-03-31 00:00", periods=3, freq="h", tz="Europe/London"),
             "b": pd.date_range("2024-04-01 00:00", periods=3, freq="h", tz="America/New_York")}
    results = [
        BuildingWeekResult("a", date(2024, 3, 25), "ok", "", {}, pd.Series(hours["a"]),
                           [outcome("svr", [1.0, np.nan, 3.0], with_bounds),
                            outcome("seasonal_naive", [4.0, 5.0, 6.0])]),
        BuildingWeekResult("b", date(2024, 4, 1), "ok", "", {}, pd.Series(hours["b"]),
                           [outcome("svr", [7.0, 8.0, 9.0])]),
    ]
    with connect(":memory:") as con:
        ensure_schema(con)
        write_results(con, results, run_id="hand", models=("svr", "seasonal_naive"))
        rows = con.execute(
            "SELECT building_id, model, target_week, epoch_us(ts), y_hat, y_lo_80, y_hi_80, "
            "y_lo_95, run_id FROM forecasts ORDER BY building_id, model, ts").fetchall()

    def us(ts):
        return int(ts.tz_convert("UTC").value // 1000)

    expected = [("a", "seasonal_naive", date(2024, 3, 25), us(t), y, None, None, None, "hand")
                for t, y in zip(hours["a"], [4.0, 5.0, 6.0])]
    expected += [("a", "svr", date(2024, 3, 25), us(t), y, lo, hi, None, "hand")
                 for t, y, lo, hi in zip(hours["a"], [1.0, None, 3.0], [0.5, 1.5, 2.5],
                                         [1.5, 2.5, 3.5])]
    expected += [("b", "svr", date(2024, 4, 1), us(t), y, None, None, None, "hand")
                 for t, y in zip(hours["b"], [7.0, 8.0, 9.0])]
    assert rows == expected


def test_a_batch_that_starts_with_a_failed_building_week_keeps_the_others_hour_counts(warehouse):
    """A failed building-week has no hour counts; the rows after it in its batch keep theirs."""
    from tasks.protocol.batch import failed_results

    config = ForecastConfig(models=("seasonal_naive",), trials=2)
    done = _run(warehouse, "synthetic_b00001", config)
    failed = failed_results("synthetic_b00000", [WEEK], ValueError("bad data"))
    with connect(":memory:") as con:
        ensure_schema(con)
        write_results(con, [*failed, done], run_id="mixed", models=config.models)
        rows = dict(con.execute(
            "SELECT building_id, n_test_hours FROM window_status ORDER BY building_id").fetchall())
    assert rows == {"synthetic_b00000": None,
                    "synthetic_b00001": done.coverage["n_test_hours"]}
    assert done.coverage["n_test_hours"] == 167


def test_a_job_s_record_carries_each_model_s_errors_of_its_stored_forecasts(warehouse,
                                                                            tmp_path):
    """The week after a written week: its job's record holds, per model, that week's hourly
    errors, the readings minus the stored forecast (what its quantiles pool with its
    validation week)."""
    import shutil

    from tasks.protocol.batch import _with_errors
    from tasks.warehouse.results import load_recent_forecasts

    path = tmp_path / "w.duckdb"
    shutil.copy(warehouse, path)
    config = ForecastConfig(models=("wadiro_linreg", "seasonal_naive"), trials=2)
    res = _run(path, "synthetic_b00000", config)
    with connect(path) as con:
        write_results(con, [res], run_id="r", models=config.models)
        recent = load_recent_forecasts(con, ["synthetic_b00000", "synthetic_b00001"],
                                       WEEK - timedelta(weeks=1), WEEK + timedelta(weeks=1))
        actual = con.execute("SELECT epoch_us(ts), kwh FROM meter_readings WHERE building_id = "
                             "'synthetic_b00000'").df().set_index("epoch_us(ts)")["kwh"]
    # (other tests of the module may have written other buildings' and models' weeks)
    assert {(WEEK, m) for m in config.models} <= set(recent["synthetic_b00000"])
    assert all(week == WEEK for week, _ in recent["synthetic_b00000"])
    [job] = load_jobs(path, ["synthetic_b00000"], [WEEK + timedelta(weeks=1)], config)
    assert {(WEEK, m) for m in config.models} <= set(job.recent_forecasts)
    load = pd.Series(job.hours["kwh"].to_numpy(float),
                     index=epoch_us(job.hours["ts"]))
    record = _with_errors(job.track_record, job.recent_forecasts, load)
    for outcome in res.outcomes:
        score = record[WEEK][outcome.model]
        forecast = pd.Series(outcome.y_hat, index=epoch_us(res.test_ts))
        expected = (actual.reindex(score.hours) - forecast.reindex(score.hours)).to_numpy()
        np.testing.assert_allclose(score.errors, expected, rtol=1e-6, atol=1e-4)
        assert len(score.errors) == outcome.scores.n_hours
