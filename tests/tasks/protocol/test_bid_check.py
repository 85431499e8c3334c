"""The check before a bid: a forecast's level against the building's history, declared size or
fleet, an order of magnitude either way (hand-computed levels)."""

from __future__ import annotations

from datetime import date

import numpy as np
import pandas as pd
import pytest

from tasks.protocol.bid_check import NEW_BUILDING_HOURS, bid_problem, history_range
from tasks.protocol.plausible_level import Yardstick, declared_yardstick, fleet_yardstick

WEEK = date(2024, 4, 22)  # a Monday; Europe/London is on summer time (UTC+1)
ZONE = "Europe/London"


def _hours(kwh: np.ndarray) -> pd.DataFrame:
    """``kwh`` for the hours just before the week (its first hour is 23:00 UTC, midnight in
    London), so that each 24 of them is one local day."""
    start = pd.Timestamp("2024-04-21 23:00", tz="UTC")
    ts = pd.date_range(end=start - pd.Timedelta(hours=1), periods=kwh.size, freq="h")
    return pd.DataFrame({"ts": ts, "kwh": kwh})


def test_the_history_range_is_its_days_5_and_95_percent_quantiles():
    # 12 weeks (84 days): 80 days at 68 kWh/h, the last four 1,000 times too high
    kwh = np.full(12 * 168, 68.0)
    kwh[-4 * 24:] *= 1000
    history, hours = history_range(_hours(kwh), WEEK, ZONE, 12)
    # np.quantile's linear rule over 84 day means: the 95 % one is at position 0.95 x 83 =
    # 78.85 (from 0), between two days at 68: four days stored wrong do not move it ...
    assert hours == 12 * 168 and (history.low, history.high) == (68.0, 68.0)
    assert bid_problem(np.full(168, 68_000.0), history=history, history_hours=hours,
                       declared=None, fleet=None) is not None
    # ... six do (positions 78 to 83)
    kwh[-6 * 24:] = 68_000.0
    assert history_range(_hours(kwh), WEEK, ZONE, 12)[0].high == 68_000.0
    assert history.source == "its own usable history (its days' 5% to 95% quantiles)"


def test_days_with_too_few_readings_do_not_count():
    kwh = np.full(3 * 24, np.nan)
    kwh[:24] = 10.0   # one whole day at 10
    kwh[24:30] = 500.0  # six readings of the next day
    history, hours = history_range(_hours(kwh), WEEK, ZONE, 12)
    assert (history.low, history.high, hours) == (10.0, 10.0, 30)


def _history(low: float, high: float):
    return {"history": Yardstick(low, high, "its own usable history"),
            "history_hours": NEW_BUILDING_HOURS}


def test_a_week_of_zeros_after_a_normal_history_is_held():
    why = bid_problem(np.zeros(168), **_history(60.0, 75.0), declared=None, fleet=None)
    assert why == ("its forecast's mean of 0 kWh/h is 0x 60 to 75 kWh/h, the level of its own "
                   "usable history")


def test_a_forecast_within_ten_times_its_history_is_bid():
    for level in (6.01, 68.0, 749.0):
        assert bid_problem(np.full(168, level), **_history(60.0, 75.0), declared=None,
                           fleet=None) is None
    for level in (5.99, 751.0):
        assert bid_problem(np.full(168, level), **_history(60.0, 75.0), declared=None,
                           fleet=None) is not None


def test_a_buildings_own_seasons_are_not_held():
    """A term after a quiet summer: the summer days at 0.5 kWh/h, term days at 9 in the same
    history; a forecast of 6 is within ten times of the range, not of the median day."""
    kwh = np.r_[np.full(70 * 24, 0.5), np.full(14 * 24, 9.0)]
    history, hours = history_range(_hours(kwh), WEEK, ZONE, 12)
    assert bid_problem(np.full(168, 6.0), history=history, history_hours=hours,
                       declared=None, fleet=None) is None
    assert bid_problem(np.full(168, 91.0), history=history, history_hours=hours,
                       declared=None, fleet=None) is not None


def test_a_new_building_is_judged_against_the_fleet_unless_it_declared_its_size():
    fleet = fleet_yardstick([1.0, 2.0, 5.0, 20.0, 300.0])
    # np.quantile's linear rule: 1st percentile 1.04, 99th 288.8, but no further than ten times
    # the median (5): 1.04 to 50, plausible from 0.104 to 500
    assert (fleet.low, fleet.high) == pytest.approx((1.04, 50.0))
    wh_register = np.full(168, 5100.0)  # a 5.1 kWh/h meter's Wh stored as kWh
    young = {"history": Yardstick(5100.0, 5100.0, "x"), "history_hours": NEW_BUILDING_HOURS - 1}
    assert "the fleet's 5 established buildings" in bid_problem(
        wh_register, **young, declared=None, fleet=fleet)
    # declared: a 500 m2 general office, 95 kWh/m2/year: 5.42 kWh/h
    office = declared_yardstick("General_Office", 500)
    assert office.low == pytest.approx(95 * 500 / 8760)
    assert "941x 5.422 kWh/h" in bid_problem(wh_register, **young, declared=office, fleet=None)
    assert bid_problem(np.full(168, 5.1), **young, declared=office, fleet=fleet) is None


def test_a_declared_size_judges_a_building_with_history_too():
    office = declared_yardstick("office", 500)  # an everyday name of TM46's general office
    # its history agrees with a forecast stored a thousand times too high
    assert bid_problem(np.full(168, 5100.0), history=Yardstick(5000.0, 5200.0, "x"),
                       history_hours=12 * 168, declared=office, fleet=None) is not None


def test_nothing_known_nothing_judged():
    assert bid_problem(np.full(168, 1e6), history=None, history_hours=0, declared=None,
                       fleet=None) is None
    assert bid_problem(None, history=Yardstick(1.0, 1.0, "x"), history_hours=10_000,
                       declared=None, fleet=Yardstick(1.0, 1.0, "x")) is None
    assert fleet_yardstick([1.0, 2.0, 3.0, 4.0]) is None  # fewer than five buildings
    assert declared_yardstick("data centre", 500) is None  # not a TM46 category
