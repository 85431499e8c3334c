"""``benchmarks/ensemble_replay.py`` against combinations worked out by hand: one building, three
weeks, two members with constant errors, so each week's weights follow from its record alone."""

from __future__ import annotations

import importlib.util
import sys
from datetime import date, timedelta
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

BENCHMARK = Path(__file__).resolve().parents[2] / "benchmarks" / "ensemble_replay.py"
HOURS = 24
ACTUAL, NAIVE, GBR, LAGS = 10.0, 12.0, 11.0, 8.0
"""Every hour: gbr is 1 kWh off (half seasonal naive's error), gbr_lags 2 (as much)."""


def _benchmark():
    sys.path.insert(0, str(BENCHMARK.parent))
    spec = importlib.util.spec_from_file_location("ensemble_replay", BENCHMARK)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up while made
    spec.loader.exec_module(module)
    return module


def _rows() -> pd.DataFrame:
    rows = []
    for k in range(3):
        week = date(2017, 1, 2) + timedelta(weeks=k)
        ts = pd.date_range(pd.Timestamp(week, tz="UTC"), periods=HOURS, freq="h")
        errors = pd.Series(1.0, index=ts - pd.Timedelta(weeks=1))
        for model, value, validation_mae in (("seasonal_naive", NAIVE, 2.0),
                                             ("gbr", GBR, 1.0), ("gbr_lags", LAGS, 4.0),
                                             ("ensemble", 9.5, 1.5)):
            rows.append({"year": 2017, "mode": "monday", "phase": 0,
                         "building_id": "b", "week": week, "model": model,
                         "mae": abs(value - ACTUAL), "y_hat": np.full(HOURS, value),
                         "ts": ts.to_numpy(), "actual": np.full(HOURS, ACTUAL),
                         "validation_mae": validation_mae, "validation_errors": errors})
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def bench():
    return _benchmark()


def _replayed(bench, variant) -> list[float]:
    from tasks.protocol.config import ForecastConfig
    lines = bench.replay(_rows(), [variant], ForecastConfig())
    return lines.sort_values("week")[variant.name].tolist()


def test_weights_come_from_the_record_of_earlier_weeks(bench):
    """Weeks 1-2 have fewer than two recorded weeks: equal weights, forecast 9.5. Week 3: the
    record's ratios 0.5 and 1.0 to the power -4 weigh gbr 16 to 1: forecast 184 / 17."""
    replayed = _replayed(bench, bench.Variant("deployed", members=("gbr", "gbr_lags")))
    assert replayed == pytest.approx([0.5, 0.5, abs(184 / 17 - ACTUAL)])


def test_power_and_validation_week_variants(bench):
    """Power 2 weighs gbr 4 to 1 in week 3 (forecast 10.4). With the validation week in the
    record (gbr 1/2, gbr_lags 4/2 of seasonal naive's validation MAE): weeks 1-2 are weighed by
    it alone (0.5^-4 = 16 against 2^-4), week 3 by the mean of two recorded weeks and it
    (0.5 against 4/3)."""
    power_2 = _replayed(bench, bench.Variant("p2", power=2, members=("gbr", "gbr_lags")))
    assert power_2[2] == pytest.approx(abs((4 * GBR + LAGS) / 5 - ACTUAL))
    joined = _replayed(bench, bench.Variant("v", validation=True, members=("gbr", "gbr_lags")))
    first = (16 * GBR + LAGS / 16) / (16 + 1 / 16)
    third = (16 * GBR + (4 / 3) ** -4 * LAGS) / (16 + (4 / 3) ** -4)
    assert joined == pytest.approx([abs(first - ACTUAL)] * 2 + [abs(third - ACTUAL)])


def test_summary_is_relative_to_seasonal_naive_and_the_best_single_model(bench):
    variant = bench.Variant("deployed", members=("gbr", "gbr_lags"))
    from tasks.protocol.config import ForecastConfig
    table = bench.summary(bench.replay(_rows(), [variant], ForecastConfig()), [variant])
    ratio = (0.5 + 0.5 + abs(184 / 17 - ACTUAL)) / (3 * 2.0)
    assert table.loc["deployed", "2017 monday"] == f"{ratio:.3f} ({ratio / 0.5:.3f})"
    assert table.loc["best single model", "2017 monday"] == "gbr 0.500"


def test_variants_parse_from_the_command_line(bench):
    variant = bench.parse_variant("mine: power=2; record=4; members=gbr, wadiro_pcscnn; "
                                  "validation")
    assert variant == bench.Variant("mine", power=2.0, record_weeks=4,
                                    members=("gbr", "wadiro_pcscnn"), validation=True)
    with pytest.raises(Exception, match="expected power"):
        bench.parse_variant("bad: powr=2")


def test_stacked_weights_solve_the_least_absolute_error(bench):
    """gbr at 11 and gbr_lags at 8 against 10 every hour: 2/3 and 1/3 make the combination
    exact; a member equal to the actuals takes all the weight."""
    forecasts = np.column_stack([np.full(HOURS, GBR), np.full(HOURS, LAGS)])
    assert bench.stacked_weights(forecasts, np.full(HOURS, ACTUAL)) == pytest.approx(
        [2 / 3, 1 / 3], abs=1e-7)
    actual = np.linspace(5.0, 15.0, HOURS)
    exact = bench.stacked_weights(np.column_stack([actual + 1.0, actual]), actual)
    assert exact == pytest.approx([0.0, 1.0], abs=1e-7)


def test_stacked_variant_fits_the_weights_on_the_record_hours(bench):
    """Weeks 1-2 have fewer than two recorded weeks: the deployed (equal) weights. Week 3 is
    weighed 2/3 : 1/3 from weeks 1-2's hours (an exact forecast); half stacked, the mean of
    that and the deployed 16:1."""
    members = ("gbr", "gbr_lags")
    stacked = _replayed(bench, bench.Variant("s", stacked=1.0, members=members))
    assert stacked == pytest.approx([0.5, 0.5, 0.0], abs=1e-6)
    half = _replayed(bench, bench.Variant("h", stacked=0.5, members=members))
    assert half == pytest.approx([0.5, 0.5, 0.5 * abs(184 / 17 - ACTUAL)], abs=1e-6)
    assert bench.parse_variant("s: stacked") == bench.Variant("s", stacked=1.0)
    with pytest.raises(Exception, match="in \\(0, 1\\]"):
        bench.parse_variant("s: stacked=2")


def test_a_model_of_another_run_joins_under_its_own_name(bench):
    """A member run alone (gbr_lags' forecasts under the name linreg52) joins the run's
    building-weeks and combines as one of its models; a name the run has is refused."""
    rows = _rows()
    other = rows[rows["model"] == "gbr_lags"].copy()
    other.loc[other["week"] == other["week"].max(), "week"] = date(2018, 1, 1)  # not in the run
    joined = bench.join_model(rows, other, "gbr_lags", "linreg52")
    assert sorted(joined.loc[joined["model"] == "linreg52", "week"]) == sorted(
        rows["week"].unique())[:2]
    from tasks.protocol.config import ForecastConfig
    variant = bench.Variant("v", members=("gbr", "linreg52"))
    lines = bench.replay(joined, [variant], ForecastConfig()).sort_values("week")
    assert lines["v"].tolist()[:2] == pytest.approx([0.5, 0.5])
    with pytest.raises(ValueError, match="already has a model named 'gbr'"):
        bench.join_model(rows, other, "gbr_lags", "gbr")
    with pytest.raises(ValueError, match="no model 'svr'"):
        bench.join_model(rows, other, "svr", "svr2")
