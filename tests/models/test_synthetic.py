"""The synthetic outlier benchmark's data: functions, the sliced Wasserstein distance, the
outlier generator (against a direct restatement of Section 7) and the corruption table."""

from __future__ import annotations

import numpy as np
import pytest

from wadiro_models.synthetic import (
    BENCHMARK_FUNCTIONS,
    make_outlier_experiment,
    sliced_wasserstein,
    sliced_wasserstein_outliers,
)


@pytest.mark.parametrize(("name", "point", "value"), [
    ("McCormick", [-0.54719, -1.54719], -1.9133),
    ("Ackley", [0.0, 0.0, 0.0, 0.0], 0.0),
    ("PGP", [0.5, 0.25], (np.log(3.0) - 8.693) / 2.427),  # x1 = 0, x2 = -1: a b = 1 * 3
    ("Keane", [1.60086, 0.468498], -0.364980),  # the two-dimensional minimum
])
def test_functions_take_their_known_values(name, point, value):
    f = BENCHMARK_FUNCTIONS[name]
    assert f.function(np.array([point]))[0] == pytest.approx(value, abs=1e-4)


def test_sliced_wasserstein_of_a_shift():
    rng = np.random.default_rng(0)
    U = rng.normal(size=(400, 3))
    assert sliced_wasserstein(U, U.copy()) == 0.0
    v = np.array([1.0, -2.0, 0.5])
    # every projection moves by theta^T v, so SW_2^2 is the mean of (theta^T v)^2
    theta = np.random.default_rng(0).standard_normal((3, 2000))
    theta /= np.linalg.norm(theta, axis=0)
    expected = np.sqrt(np.mean((v @ theta) ** 2))
    assert sliced_wasserstein(U + v, U, n_projections=2000) == pytest.approx(expected, rel=1e-9)
    assert expected == pytest.approx(np.linalg.norm(v) / np.sqrt(3), rel=0.05)


def _direct(signal, n_outliers, f, rng, threshold, seed=42):
    """Section 7 as written: compare whole samples with the distance itself."""
    current, outliers = signal.copy(), []
    for _ in range(n_outliers):
        x_clean, y_clean = f.sample(1, rng)
        reference = np.vstack([current, np.r_[x_clean[0], y_clean]])
        k = 1.0
        while True:
            x = rng.uniform(f.low, f.high, size=f.dimension)
            candidate = np.r_[x, rng.uniform(-2.0 * k, 2.0 * k)]
            trial = np.vstack([current, candidate])
            if sliced_wasserstein(trial, reference, seed=seed) >= threshold:
                break
            k *= 1.5
        outliers.append(candidate)
        current = trial
    return np.array(outliers)


@pytest.mark.parametrize("name", ["McCormick", "Keane"])
def test_the_fast_generator_is_the_papers_procedure(name):
    f = BENCHMARK_FUNCTIONS[name]
    X, y = f.sample(150, np.random.default_rng(1))
    signal = np.column_stack([X, y])
    fast = sliced_wasserstein_outliers(signal, 12, f, np.random.default_rng(7), threshold=0.05)
    slow = _direct(signal, 12, f, np.random.default_rng(7), threshold=0.05)
    np.testing.assert_allclose(fast, slow)


@pytest.mark.parametrize("experiment", ["A", "B", "C"])
def test_the_corruption_table(experiment):
    data = make_outlier_experiment("PGP", experiment, n_samples=300, seed=3)
    n_train, n_val, n_test = 180, 60, 60
    share = {"A": 0.4, "B": 0.1, "C": 0.4}[experiment]
    assert len(data.y_test) == n_test
    np.testing.assert_array_equal(data.y_test, BENCHMARK_FUNCTIONS["PGP"](data.X_test))
    if experiment == "A":
        assert (data.n_outliers_train, data.n_outliers_val) == (round(0.4 * n_train), 0)
    else:
        total = round(share * (n_train + n_val))
        assert data.n_outliers_train + data.n_outliers_val == total
        assert data.n_outliers_val > 0
    assert len(data.y_train) == n_train + data.n_outliers_train
    assert len(data.y_val) == n_val + data.n_outliers_val
    # noise on the clean training part: close to, but not equal to, the function
    clean = BENCHMARK_FUNCTIONS["PGP"](data.X_train[:n_train])
    residual = data.y_train[:n_train] - clean
    assert 0 < np.median(np.abs(residual)) < 0.5
