"""A building's level against its yardsticks: CIBSE TM46 intensities by category or alias, a
declared size's typical level, the fleet's 1st to 99th percentile (none under five buildings),
the factor of ten either way to its edges, and the factor of 1,000 a unit mistake makes."""

from __future__ import annotations

import math

import pytest

from tasks.protocol.plausible_level import (
    MIN_FLEET,
    Yardstick,
    declared_yardstick,
    fleet_yardstick,
    history_yardstick,
    typical_intensity,
    yardstick,
)

OFFICE_500 = 95 * 500 / 8760  # 5.4224 kWh/h


@pytest.mark.parametrize(("name", "intensity"), [
    ("general office", 95.0), ("General Office", 95.0), ("  general_office ", 95.0),
    ("office", 95.0), ("OFFICE", 95.0), ("supermarket", 400.0), ("care home", 65.0),
    ("school", 40.0), ("warehouse", 35.0), ("cold storage", 145.0), ("lab", 160.0),
    ("bar, pub or licensed club", 130.0), ("pub", 130.0),
])
def test_tm46_intensities_by_category_or_alias(name, intensity):
    assert typical_intensity(name) == intensity


@pytest.mark.parametrize("name", [None, "", "spaceport", "offices"])
def test_a_type_tm46_does_not_know_has_no_intensity(name):
    assert typical_intensity(name) is None


def test_a_declared_size_gives_its_typical_level():
    declared = declared_yardstick("general office", 500)
    assert declared.low == declared.high == pytest.approx(OFFICE_500)
    assert declared.source == "its declared 500 m2 of general office (CIBSE TM46: 95 kWh/m2/year)"
    assert declared_yardstick("school", 1200).low == pytest.approx(40 * 1200 / 8760)  # 5.479


@pytest.mark.parametrize(("kind", "area"), [
    ("office", None), ("office", 0.0), ("office", -10.0), ("office", math.nan), (None, 500.0),
    ("spaceport", 500.0)])
def test_without_a_known_type_and_a_positive_area_nothing_is_declared(kind, area):
    assert declared_yardstick(kind, area) is None


@pytest.mark.parametrize(("level", "plausible"), [
    (5.0, True), (50.0, True), (50.000001, False), (0.5, True), (0.499999, False), (0.0, False)])
def test_a_factor_of_ten_either_way_is_the_edge(level, plausible):
    assert (Yardstick(5.0, 5.0, "x").judge(level) is None) is plausible


def test_a_range_is_widened_by_ten_at_each_end():
    fleet = Yardstick(11.1, 118.9, "the fleet's 12 established buildings")
    assert fleet.judge(1.11) is None and fleet.judge(1189.0) is None
    assert fleet.judge(1189.1) is not None and fleet.judge(1.1099) is not None


def test_what_a_refusal_says_hand_computed():
    declared = declared_yardstick("general office", 500)
    assert declared.judge(5100.0) == (  # 5,100 / 5.4224 = 940.5
        "a mean of 5,100 kWh/h is 941x 5.422 kWh/h, the level of its declared 500 m2 of general "
        "office (CIBSE TM46: 95 kWh/m2/year)")
    assert declared.judge(873_000.0).startswith("a mean of 873,000 kWh/h is 161,000x")  # 873,000 x 8,760 / 47,500
    assert declared.judge(5100.0, "its forecast's mean").startswith("its forecast's mean of 5,100")
    assert Yardstick(11.1, 118.9, "the fleet").judge(0.0051) == (  # 0.0051 / 11.1
        "a mean of 0.0051 kWh/h is 0.00046x 11.1 to 118.9 kWh/h, the level of the fleet")
    assert Yardstick(0.0, 1000.0, "any site").judge(51_000.0) == (
        "a mean of 51,000 kWh/h is 51x up to 1,000 kWh/h, the level of any site")
    assert Yardstick(5.0, 5.0, "x").judge(math.nan) == "a mean of nan kWh/h is no level"
    assert Yardstick(5.0, 5.0, "x").judge(math.inf) == "a mean of inf kWh/h is no level"


def test_the_words_of_a_yardsticks_level():
    assert Yardstick(5.42237, 5.42237, "x").typical() == "5.422 kWh/h"
    assert Yardstick(11.1, 118.9, "x").typical() == "11.1 to 118.9 kWh/h"
    assert Yardstick(0.0, 1000.0, "x").typical() == "up to 1,000 kWh/h"
    assert Yardstick(12_500.0, 48_000.0, "x").typical() == "12,500 to 48,000 kWh/h"
    assert Yardstick(9999.6, 9999.6, "x").typical() == "10,000 kWh/h"  # 4 figures, no 1e+04


@pytest.mark.parametrize(("level", "factor"), [
    (5100.0, 1e-3),   # Wh read as kWh: 5.1 is plausible
    (0.0051, 1e3),    # MWh read as kWh: 5.1 is plausible
    (5.1, None),      # plausible already
    (510.0, None),    # 94x: neither 0.51 nor 510,000 is plausible
])
def test_the_factor_of_a_unit_mistake(level, factor):
    assert declared_yardstick("general office", 500).unit_slip(level) == factor


def test_the_fleets_range_is_its_1st_to_99th_percentile():
    fleet = fleet_yardstick([10.0, 20.0, 30.0, 40.0, 50.0])
    # numpy's linear interpolation: rank 0.04 and 3.96 of 0..4
    assert (fleet.low, fleet.high) == pytest.approx((10.4, 49.6))
    assert fleet.source == "the fleet's 5 established buildings"
    twelve = fleet_yardstick([10.0 * i for i in range(12, 0, -1)])
    assert (twelve.low, twelve.high) == pytest.approx((11.1, 118.9))


@pytest.mark.parametrize("levels", [
    [], [10.0] * (MIN_FLEET - 1), [10.0, 20.0, 30.0, 40.0, 0.0], [10.0, 20.0, 30.0, 40.0, math.nan],
    [10.0, 20.0, 30.0, 40.0, -5.0]])
def test_fewer_than_five_positive_levels_are_no_fleet(levels):
    assert fleet_yardstick(levels) is None


def test_a_new_building_is_judged_by_its_declared_size_else_the_fleet():
    fleet = fleet_yardstick([10.0, 20.0, 30.0, 40.0, 50.0])
    assert yardstick("office", 500.0, fleet).low == pytest.approx(OFFICE_500)
    assert yardstick("office", None, fleet) is fleet
    assert yardstick("spaceport", 500.0, fleet) is fleet
    assert yardstick(None, None, None) is None


@pytest.mark.parametrize("level", [None, 0.0, -1.0, math.nan])
def test_no_history_without_a_positive_level(level):
    assert history_yardstick(level) is None
    assert history_yardstick(12.0).source == "its own usable history"


def test_a_meter_a_thousand_times_too_high_beside_a_campus_building_is_not_plausible():
    """Issue 60's probe: twelve Cambridge buildings of 1.6 to 873 kWh/h (2019's means), a new
    3.58 kWh/h office's Wh read as kWh. Against the 1st-99th percentile alone (ten times 868)
    it passed; no further than ten times the median (33.4) from it, it is 10.7x 334."""
    fleet = fleet_yardstick([1.6, 1.9, 11.4, 13.9, 20.3, 24.4, 42.4, 103.7, 149.6, 450.1, 848.5,
                             872.8])
    assert fleet.high == pytest.approx(334.0)
    assert fleet.judge(3580.0) is not None
    assert fleet.judge(3.58) is None and fleet.judge(872.8) is None  # its own buildings pass
