"""The published bands are nested whatever the adaptation is fed: 95 % lower <= 80 % lower <=
forecast <= 80 % upper <= 95 % upper in every hour."""

from __future__ import annotations

from datetime import date, timedelta

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tasks.protocol.intervals import LEVELS, conformal_intervals, nested_quantiles
from tasks.protocol.track_record import WeekScore, adapted_levels

coverages = st.floats(0.0, 1.0, allow_nan=False)
week_scores = st.fixed_dictionaries({0.80: coverages, 0.95: coverages})


def _record(weeks: list[dict[float, float]]) -> dict:
    start = date(2024, 1, 1)
    return {start + timedelta(weeks=i): {"m": WeekScore(1.0, coverage)}
            for i, coverage in enumerate(weeks)}


def _assert_nested(y_hat: np.ndarray, intervals) -> None:
    lo80, hi80 = intervals.bounds(0.80)
    lo95, hi95 = intervals.bounds(0.95)
    finite = np.isfinite(y_hat)
    assert np.all(lo95[finite] <= lo80[finite])
    assert np.all(lo80[finite] <= y_hat[finite])
    assert np.all(y_hat[finite] <= hi80[finite])
    assert np.all(hi80[finite] <= hi95[finite])


def test_a_step_that_missed_the_80_level_more_cannot_widen_it_past_the_95():
    # after a 1.5x step the 80 % band covered 10 % and 20 % of two weeks' hours, the 95 % band
    # 97 % and 95 %: alone, the 80 % level adapts to 0.99 and the 95 % one stays at 0.94
    record = _record([{0.80: 0.10, 0.95: 0.97}, {0.80: 0.20, 0.95: 0.95}])
    levels = adapted_levels("m", record, LEVELS)
    assert levels == {0.80: 0.99, 0.95: 0.99}
    errors = np.arange(1.0, 101.0)  # |errors| 1..100: the q-quantile is ceil(101 q)-th
    intervals = conformal_intervals(np.full(168, 500.0), errors, levels=levels)
    lo80, hi80 = intervals.bounds(0.80)
    lo95, hi95 = intervals.bounds(0.95)
    assert hi80[0] == hi95[0] == 600.0 and lo80[0] == lo95[0] == 400.0


def test_quantiles_asked_out_of_order_are_nested():
    assert nested_quantiles({0.95: 0.90, 0.80: 0.97}) == {0.80: 0.97, 0.95: 0.97}
    assert nested_quantiles({0.80: 0.70, 0.95: 0.99}) == {0.80: 0.70, 0.95: 0.99}


def test_a_negative_forecast_keeps_its_lower_bounds_at_or_below_it():
    intervals = conformal_intervals(np.array([-3.0, 10.0]), np.arange(1.0, 40.0), floor=0.0)
    _assert_nested(np.array([-3.0, 10.0]), intervals)
    assert intervals.bounds(0.80)[0][1] == max(10.0 - 32.0, 0.0)


@settings(max_examples=300, deadline=None)
@given(
    weeks=st.lists(week_scores, max_size=10),
    errors=st.lists(st.floats(-1e4, 1e4, allow_nan=False), min_size=24, max_size=200),
    y_hat=st.lists(st.floats(-50.0, 1e4, allow_nan=False), min_size=1, max_size=48),
    floor=st.sampled_from([0.0, 1.0, 5.0]),
)
def test_bands_are_nested_for_any_record_and_errors(weeks, errors, y_hat, floor):
    y_hat = np.asarray(y_hat)
    intervals = conformal_intervals(y_hat, np.asarray(errors),
                                    levels=adapted_levels("m", _record(weeks), LEVELS),
                                    floor=floor)
    _assert_nested(y_hat, intervals)
