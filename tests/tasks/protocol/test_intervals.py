"""Split-conformal intervals: the half width by hand, and coverage on seeded synthetic series."""

from __future__ import annotations

import numpy as np
import pytest

from tasks.protocol.intervals import conformal_intervals, coverage, half_width


def test_half_width_is_the_conformal_rank_of_the_absolute_errors():
    errors = np.arange(1.0, 41.0) * np.where(np.arange(40) % 2, -1.0, 1.0)  # |e| = 1 ... 40
    # n = 40: rank ceil(41 * 0.8) = 33 and ceil(41 * 0.95) = 39
    assert half_width(errors, 0.80) == 33.0
    assert half_width(errors, 0.95) == 39.0
    assert half_width(errors[:10], 0.80) is None  # too few to rank
    assert half_width(np.r_[errors, np.nan], 0.80) == 33.0  # missing errors are left out


def test_bounds_never_go_below_the_floor():
    out = conformal_intervals(np.array([0.5, 5.0]), np.full(50, 2.0))
    lower, upper = out.bounds(0.8)
    np.testing.assert_array_equal(lower, [0.0, 3.0])
    np.testing.assert_array_equal(upper, [2.5, 7.0])


@pytest.mark.parametrize("noise", ["normal", "laplace"])
def test_coverage_on_a_seeded_synthetic_series_is_close_to_nominal(noise):
    """A week of calibration errors, then the next week, 400 times over: the 80 % and 95 %
    intervals cover 80 % and 95 % of the hours on average (conformal guarantees at least that,
    and at most that plus 1/(n+1))."""
    rng = np.random.default_rng(7)
    draw = getattr(rng, noise)
    covered = {0.8: [], 0.95: []}
    for _ in range(400):
        signal = 10 + 5 * np.sin(np.arange(168) * 2 * np.pi / 24)
        calibration = draw(0.0, 1.0, 168)
        actual = signal + draw(0.0, 1.0, 168)
        out = conformal_intervals(signal, calibration, floor=-np.inf)
        for level in covered:
            covered[level].append(coverage(actual, *out.bounds(level))[0])
    assert np.mean(covered[0.8]) == pytest.approx(0.80, abs=0.015)
    assert np.mean(covered[0.95]) == pytest.approx(0.95, abs=0.01)
