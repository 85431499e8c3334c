"""The check before a bid: a forecast's level against the building's history, declared size or
fleet, an order of magnitude either way (hand-computed levels)."""

from __future__ import annotations

from datetime import date

import numpy as np
import pandas as pd
import pytest

from tasks.protocol.bid_check import NEW_BUILDING_HOURS, bid_problem, history_level
from tasks.protocol.plausible_level import Yardstick, declared_yardstick, fleet_yardstick

WEEK = date(2024, 4, 22)  # a Monday; Europe/London is on summer time (UTC+1)
ZONE = "Europe/London"


def _hours(kwh: np.ndarray) -> pd.DataFrame:
    """``kwh`` for the hours ending at the week's first hour (UTC)."""
    end = pd.Timestamp("2024-04-21 23:00", tz="UTC")
    ts = pd.date_range(end=end - pd.Timedelta(hours=1), periods=kwh.size, freq="h")
    return pd.DataFrame({"ts": ts, "kwh": kwh})


def test_the_history_level_is_the_median_of_its_days_means():
    # 12 weeks at 68 kWh/h, the last two of them stored 1,000 times too high
    kwh = np.full(12 * 168, 68.0)
    kwh[-2 * 168:] *= 1000
    level, hours = history_level(_hours(kwh), WEEK, ZONE, 12)
    assert (level, hours) == (68.0, 12 * 168)


def test_days_with_too_few_readings_do_not_count():
    kwh = np.full(3 * 24, np.nan)
    kwh[:24] = 10.0   # one whole day at 10
    kwh[24:30] = 500.0  # six readings of the next day
    level, hours = history_level(_hours(kwh), WEEK, ZONE, 12)
    assert (level, hours) == (10.0, 30)


def test_a_week_of_zeros_after_a_normal_history_is_held():
    why = bid_problem(np.zeros(168), history=68.0, history_hours=NEW_BUILDING_HOURS,
                      declared=None, fleet=None)
    assert why == ("its forecast's mean of 0 kWh/h is 0x 68 kWh/h, the level of its own "
                   "usable history")


def test_a_forecast_within_ten_times_its_history_is_bid():
    for level in (6.9, 68.0, 679.0):
        assert bid_problem(np.full(168, level), history=68.0, history_hours=NEW_BUILDING_HOURS,
                           declared=None, fleet=None) is None
    assert bid_problem(np.full(168, 681.0), history=68.0, history_hours=NEW_BUILDING_HOURS,
                       declared=None, fleet=None) is not None


def test_a_new_building_is_judged_against_the_fleet_unless_it_declared_its_size():
    fleet = fleet_yardstick([1.0, 2.0, 5.0, 20.0, 300.0])
    # np.quantile's linear rule: 1st percentile 1.04, 99th 288.8; ten times that is 2,888
    assert (fleet.low, fleet.high) == pytest.approx((1.04, 288.8))
    wh_register = np.full(168, 5100.0)  # a 5.1 kWh/h meter's Wh stored as kWh
    young = {"history": 5100.0, "history_hours": NEW_BUILDING_HOURS - 1}
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
    assert bid_problem(np.full(168, 5100.0), history=5100.0, history_hours=12 * 168,
                       declared=office, fleet=None) is not None


def test_nothing_known_nothing_judged():
    assert bid_problem(np.full(168, 1e6), history=None, history_hours=0, declared=None,
                       fleet=None) is None
    assert bid_problem(None, history=1.0, history_hours=10_000, declared=None,
                       fleet=Yardstick(1.0, 1.0, "x")) is None
    assert fleet_yardstick([1.0, 2.0, 3.0, 4.0]) is None  # fewer than five buildings
    assert declared_yardstick("data centre", 500) is None  # not a TM46 category
