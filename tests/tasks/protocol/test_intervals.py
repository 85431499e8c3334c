"""Split-conformal quantiles and intervals: ranks by hand, pinball by hand, and calibration on
seeded synthetic series."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tasks.protocol.intervals import (
    QUANTILES,
    age_weights,
    conformal_intervals,
    coverage,
    error_quantile,
    hour_of_day_scales,
    pinball_loss,
    quantile_name,
    share_below,
)


def test_a_quantile_is_the_conformal_rank_of_the_signed_errors_rounded_away_from_the_median():
    errors = np.arange(-20.0, 20.0)  # n = 40, the k-th smallest is k - 21
    # above the median ceil(41 tau): 0.9 -> 37, 0.975 -> 40; below floor(41 tau): 0.1 -> 4,
    # 0.025 -> 1; the median is the errors' own
    assert error_quantile(errors, 0.90, 0.90) == 16.0
    assert error_quantile(errors, 0.975, 0.975) == 19.0
    assert error_quantile(errors, 0.10, 0.10) == -17.0
    assert error_quantile(errors, 0.025, 0.025) == -20.0
    assert error_quantile(errors, 0.50, 0.50) == -0.5
    out = conformal_intervals(np.array([100.0]), errors[::-1])  # any order
    assert {level: float(q[0]) for level, q in out.quantiles.items()} == {
        0.025: 80.0, 0.05: 81.0, 0.10: 83.0, 0.25: 89.0, 0.50: 99.5, 0.75: 110.0, 0.90: 116.0,
        0.95: 118.0, 0.975: 119.0}
    # the bands are the quantile pairs
    assert [float(b[0]) for b in out.bounds(0.80)] == [83.0, 116.0]
    assert [float(b[0]) for b in out.bounds(0.95)] == [80.0, 119.0]
    assert conformal_intervals(np.array([1.0]), errors[:20]).quantiles == {}  # too few


def test_weighted_conformal_quantiles_by_hand_and_equal_weights_are_the_plain_ranks():
    """Errors 1, 2, 3, 4 weighing 0.5, 0.5, 1, 1 (total 3, with the target hour's 1: 4): the 75 %
    level is the first error whose cumulative weight reaches 3 (4), the 40 % level the mirror
    image (from the top 1, 2, 2.5, 3 reaches 0.6 x 4 = 2.4 at the third from the top: 2), the
    median the first to reach half of 3 (3)."""
    errors, weights = np.array([1.0, 2.0, 3.0, 4.0]), np.array([0.5, 0.5, 1.0, 1.0])
    assert error_quantile(errors, 0.75, 0.75, weights) == 4.0
    assert error_quantile(errors, 0.60, 0.60, weights) == 4.0  # cumulative 2 < 2.4 <= 3
    assert error_quantile(errors, 0.40, 0.40, weights) == 2.0
    assert error_quantile(errors, 0.25, 0.25, weights) == 1.0
    assert error_quantile(errors, 0.50, 0.50, weights) == 3.0
    assert error_quantile(errors, 0.50, 0.50, np.ones(4)) == 2.5  # evenly split: between
    rng = np.random.default_rng(5)
    for n in (24, 25, 40, 167, 1000):
        sample = np.sort(rng.normal(size=n))
        for level in QUANTILES:
            assert error_quantile(sample, level, level, np.ones(n)) == error_quantile(
                sample, level, level), (n, level)


def test_age_weights_halve_every_half_life_from_the_week_before_the_target():
    target = pd.Timestamp("2024-03-04", tz="UTC")
    ts = pd.DatetimeIndex([target - pd.Timedelta(hours=1), target - pd.Timedelta(days=6),
                           target - pd.Timedelta(weeks=8, hours=1),
                           target - pd.Timedelta(weeks=16, hours=1)])
    assert age_weights(ts, target, 8.0).tolist() == [1.0, 1.0, 0.5, 0.25]
    assert age_weights(ts, target, None) is None


def test_recent_weeks_weighted_more_follow_errors_that_grow():
    """Errors whose spread grows week by week (1 sixteen weeks back, 3 in the week before):
    the target week's (spread 3) 90 % quantile holds far fewer than 90 % of its hours when the
    16 weeks weigh the same, nearer 90 % when an error's weight halves every 4 weeks of age
    (200 draws, seeded)."""
    rng = np.random.default_rng(17)
    target = pd.Timestamp("2024-03-04", tz="UTC")
    ts = pd.date_range(target - pd.Timedelta(weeks=16), target, freq="h", inclusive="left")
    age = np.ceil((target - ts) / pd.Timedelta(weeks=1)).to_numpy()
    spread = 1.0 + 2.0 * (16 - age) / 15
    held = {"equal": [], "weighted": []}
    for _ in range(200):
        calibration = spread * rng.normal(size=ts.size)
        actual = 3.0 * rng.normal(size=168)
        for name, weights in (("equal", None), ("weighted", age_weights(ts, target, 4.0))):
            out = conformal_intervals(np.zeros(168), calibration, floor=-np.inf,
                                      weights=weights)
            held[name].append(share_below(actual, out.quantiles[0.9]))
    assert np.mean(held["equal"]) < 0.82
    assert np.mean(held["weighted"]) > np.mean(held["equal"]) + 0.03
    assert np.mean(held["weighted"]) == pytest.approx(0.9, abs=0.05)


def test_quantiles_never_go_below_the_floor_nor_cross_the_forecast():
    errors = np.where(np.arange(50) % 2, -2.0, 2.0)
    out = conformal_intervals(np.array([0.5, 5.0]), errors)
    lower, upper = out.bounds(0.8)
    np.testing.assert_array_equal(lower, [0.0, 3.0])
    np.testing.assert_array_equal(upper, [2.5, 7.0])
    # a model that always fell short by 2: its lower levels sit at the forecast, not above it
    out = conformal_intervals(np.array([5.0]), np.full(50, 2.0))
    assert out.quantiles[0.025][0] == out.quantiles[0.25][0] == 5.0
    assert out.quantiles[0.5][0] == out.quantiles[0.975][0] == 7.0


def test_pinball_and_share_below_by_hand():
    y = np.array([10.0, 0.0, np.nan])
    q = np.array([8.0, 2.0, 5.0])
    # 0.9 * (10 - 8) = 1.8 above; (1 - 0.9) * (2 - 0) = 0.2 below; the missing hour left out
    assert pinball_loss(y, q, 0.9) == pytest.approx(1.0)
    assert pinball_loss(y, q, 0.1) == pytest.approx((0.1 * 2 + 0.9 * 2) / 2)
    assert share_below(y, q) == 0.5
    assert pinball_loss(np.array([np.nan]), np.array([1.0]), 0.5) is None
    assert share_below(np.array([np.nan]), np.array([1.0])) is None


def test_quantile_columns_are_named_by_percent():
    assert [quantile_name(level) for level in QUANTILES] == [
        "y_q2_5", "y_q5", "y_q10", "y_q25", "y_q50", "y_q75", "y_q90", "y_q95", "y_q97_5"]
    assert quantile_name(0.025, ".") == "y_q2.5"


@pytest.mark.parametrize("noise", ["normal", "laplace", "gamma"])
def test_calibration_on_a_seeded_synthetic_series_is_close_to_nominal(noise):
    """A week of calibration errors, then the next week, 400 times over: each quantile holds
    its level of the hours on average, and the 80 % and 95 % intervals cover 80 % and 95 %,
    for skewed errors too (gamma: a long upper tail)."""
    rng = np.random.default_rng(7)

    def draw(size):
        if noise == "gamma":
            return rng.gamma(1.5, 1.0, size) - 1.5
        return getattr(rng, noise)(0.0, 1.0, size)

    covered = {0.8: [], 0.95: []}
    held = {level: [] for level in QUANTILES}
    for _ in range(400):
        signal = 10 + 5 * np.sin(np.arange(168) * 2 * np.pi / 24)
        calibration = draw(168)
        actual = signal + draw(168)
        out = conformal_intervals(signal, calibration, floor=-np.inf)
        for level in covered:
            covered[level].append(coverage(actual, *out.bounds(level))[0])
        for level in QUANTILES:
            held[level].append(share_below(actual, out.quantiles[level]))
    assert np.mean(covered[0.8]) == pytest.approx(0.80, abs=0.015)
    assert np.mean(covered[0.95]) == pytest.approx(0.95, abs=0.01)
    for level in QUANTILES:
        assert np.mean(held[level]) == pytest.approx(level, abs=0.012), level


def test_hour_of_day_scaling_calibrates_the_day_and_the_night_each():
    """Errors three times as large by day as at night: ranked as they are, the quantiles are
    too narrow by day and too wide at night; ranked relative to their hour of the day's size,
    each level holds its share in both (400 weeks, seeded)."""
    rng = np.random.default_rng(11)
    ts = pd.date_range("2024-03-04", periods=168, freq="h", tz="UTC")
    day = (ts.hour >= 8) & (ts.hour < 18)
    size = np.where(day, 3.0, 1.0)
    held = {scale: {part: [] for part in ("day", "night")} for scale in ("constant", "hour_of_day")}
    for _ in range(400):
        calibration = size * rng.normal(0.0, 1.0, 168)
        actual = 50.0 + size * rng.normal(0.0, 1.0, 168)
        for scale in held:
            out = conformal_intervals(np.full(168, 50.0), calibration, floor=-np.inf,
                                      scale=scale, calibration_ts=ts,
                                      target_ts=ts + pd.Timedelta(weeks=1))
            for part, mask in (("day", day), ("night", ~day)):
                held[scale][part].append(share_below(actual[mask], out.quantiles[0.9][mask]))
    assert np.mean(held["hour_of_day"]["day"]) == pytest.approx(0.9, abs=0.02)
    assert np.mean(held["hour_of_day"]["night"]) == pytest.approx(0.9, abs=0.02)
    assert np.mean(held["constant"]["day"]) < 0.85 < 0.97 < np.mean(held["constant"]["night"])
    # the scales by hand: a week of errors 2 at 10:00 UTC and 1 elsewhere
    errors = np.where(ts.hour == 10, 2.0, 1.0)
    own, target = hour_of_day_scales(errors, ts, ts[:3])
    assert own[10] == pytest.approx((1 + 2 + 1) / 3) and own[0] == 1.0
