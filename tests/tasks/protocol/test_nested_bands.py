"""The published quantiles never cross and the bands are nested whatever the adaptation is
fed: in every hour each quantile <= the next level's, the lower ones <= the forecast <= the
upper ones, none below the floor; so 95 % lower <= 80 % lower <= forecast <= 80 % upper <=
95 % upper."""

from __future__ import annotations

from datetime import date, timedelta

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tasks.protocol.intervals import QUANTILES, conformal_intervals, nested_quantiles
from tasks.protocol.track_record import WeekScore, adapted_levels

shares = st.floats(0.0, 1.0, allow_nan=False)
week_scores = st.tuples(
    st.dictionaries(st.sampled_from([0.80, 0.95]), shares),
    st.dictionaries(st.sampled_from(QUANTILES), shares))


def _record(weeks: list[tuple[dict[float, float], dict[float, float]]]) -> dict:
    start = date(2024, 1, 1)
    return {start + timedelta(weeks=i): {"m": WeekScore(1.0, coverage, below)}
            for i, (coverage, below) in enumerate(weeks)}


def _assert_nested(y_hat: np.ndarray, intervals, floor: float) -> None:
    finite = np.isfinite(y_hat)
    quantiles = [intervals.quantiles[level][finite] for level in QUANTILES]
    for lower, higher in zip(quantiles, quantiles[1:], strict=False):
        assert np.all(lower <= higher)
    assert np.all(quantiles[0] >= floor)
    above = finite & (y_hat >= floor)  # a forecast below the floor lifts its lower quantiles
    for level in QUANTILES:
        q = intervals.quantiles[level]
        assert np.all(q[above] <= y_hat[above]) if level < 0.5 else True
        assert np.all(q[finite] >= y_hat[finite]) if level > 0.5 else True
    lo80, hi80 = intervals.bounds(0.80)
    lo95, hi95 = intervals.bounds(0.95)
    assert np.all(lo95[finite] <= lo80[finite])
    assert np.all(lo80[finite] <= y_hat[finite])
    assert np.all(y_hat[finite] <= hi80[finite])
    assert np.all(hi80[finite] <= hi95[finite])


def test_a_step_that_moved_the_lower_levels_past_the_median_cannot_cross_them():
    # after a 1.5x step the 25 % quantile held none of two weeks' hours and the median 90 %:
    # alone, the 25 % level adapts up to 0.5 (its side's limit) and the median down to 0.1
    record = _record([({}, {0.25: 0.0, 0.50: 0.9}), ({}, {0.25: 0.0, 0.50: 0.9})])
    levels = adapted_levels("m", record)
    assert levels[0.25] == 0.5 and levels[0.5] == 0.5 and levels[0.1] == 0.1
    assert list(levels.values()) == sorted(levels.values())
    intervals = conformal_intervals(np.full(3, 500.0), np.arange(-50.0, 50.0), levels=levels)
    _assert_nested(np.full(3, 500.0), intervals, 0.0)


def test_a_week_scored_before_quantiles_adapts_the_band_levels_from_its_coverage():
    # an 80 % band that covered 60 %: 20 % of the hours fell below it and 20 % above
    week = WeekScore(1.0, {0.80: 0.60})
    assert week.held(0.10) == 0.2 and week.held(0.90) == 0.8 and week.held(0.25) is None
    levels = adapted_levels("m", _record([({0.80: 0.60}, {}), ({0.80: 0.60}, {})]))
    assert levels[0.90] == 0.995  # 0.9 + 0.1, kept in its range
    assert levels[0.10] == 0.05  # 0.1 - 0.1, but never below the 5 % level's


def test_levels_asked_out_of_order_are_nested():
    assert nested_quantiles({0.95: 0.90, 0.80: 0.97}) == {0.80: 0.97, 0.95: 0.97}
    assert nested_quantiles({0.80: 0.70, 0.95: 0.99}) == {0.80: 0.70, 0.95: 0.99}


def test_a_negative_forecast_keeps_its_lower_bounds_at_or_below_it():
    intervals = conformal_intervals(np.array([-3.0, 10.0]), np.arange(-20.0, 20.0), floor=0.0)
    _assert_nested(np.array([-3.0, 10.0]), intervals, 0.0)
    assert intervals.bounds(0.80)[0][1] == max(10.0 - 17.0, 0.0)
    assert intervals.bounds(0.80)[0][0] == -3.0  # at most the forecast, below the floor


@settings(max_examples=300, deadline=None)
@given(
    weeks=st.lists(week_scores, max_size=10),
    errors=st.lists(st.floats(-1e4, 1e4, allow_nan=False), min_size=24, max_size=200),
    y_hat=st.lists(st.floats(-50.0, 1e4, allow_nan=False), min_size=1, max_size=48),
    floor=st.sampled_from([0.0, 1.0, 5.0]),
)
def test_quantiles_and_bands_are_nested_for_any_record_and_errors(weeks, errors, y_hat, floor):
    y_hat = np.asarray(y_hat)
    intervals = conformal_intervals(y_hat, np.asarray(errors),
                                    levels=adapted_levels("m", _record(weeks)), floor=floor)
    _assert_nested(y_hat, intervals, floor)
