"""The estimator's optimum equals Lemma 1's lifted linear regression, solved separately."""

from __future__ import annotations

import numpy as np
import pytest

from tests.models.lifted_regression import TIGHT, solve_lifted_cvxpy, solve_lifted_l1_lp
from wadiro_models import WaDiRoSCNN
from wadiro_models._gates import activation_patterns, augment


def _problem(seed: int, n: int = 40, d: int = 3) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, size=(n, d))
    y = np.sin(2 * X[:, 0]) + X[:, 1] * X[:, 2] + 0.2 * rng.standard_normal(n)
    y[rng.integers(0, n, size=3)] += 4.0  # a few outliers
    return X, y


def _fit(X, y, **params) -> tuple[WaDiRoSCNN, np.ndarray, np.ndarray]:
    model = WaDiRoSCNN(
        max_neurons=12, standardize=False, constraint_margin=0.0, solver_options=TIGHT, **params
    ).fit(X, y)
    X_aug = augment(X)
    return model, X_aug, activation_patterns(X_aug, model.gates_).astype(float)


def _rel_gap(a: float, b: float) -> float:
    return abs(a - b) / max(1.0, abs(b))


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("radius", [1e-3, 0.05, 0.5])
def test_l1_optimum_equals_lifted_lp_solved_by_highs(seed, radius):
    X, y = _problem(seed)
    model, X_aug, D = _fit(X, y, radius=radius, wasserstein="l1")
    reference = solve_lifted_l1_lp(X_aug, y, D, radius)
    assert _rel_gap(model.objective_, reference) <= 1e-6


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("radius", [1e-3, 0.05, 0.5])
def test_l2_optimum_equals_lifted_socp(seed, radius):
    X, y = _problem(seed)
    model, X_aug, D = _fit(X, y, radius=radius, wasserstein="l2")
    reference = solve_lifted_cvxpy(X_aug, y, D, radius, "l2")
    assert _rel_gap(model.objective_, reference) <= 1e-6


@pytest.mark.parametrize("wasserstein", ["l1", "l2"])
def test_bounded_optimum_equals_lifted_formulation(wasserstein):
    X, y = _problem(3)
    rng = np.random.default_rng(3)
    lower = np.full(len(y), -0.5) + 0.1 * rng.standard_normal(len(y))
    upper = np.full(len(y), 1.5)
    upper[::7] = np.inf
    model, X_aug, D = _fit(
        X, y, radius=0.02, wasserstein=wasserstein, lower_bound=lower, upper_bound=upper
    )
    if wasserstein == "l1":
        reference = solve_lifted_l1_lp(X_aug, y, D, 0.02, lower=lower, upper=upper)
    else:
        reference = solve_lifted_cvxpy(X_aug, y, D, 0.02, "l2", lower=lower, upper=upper)
    assert _rel_gap(model.objective_, reference) <= 1e-6
    # the bounds bite: the unconstrained optimum is strictly lower
    free, _, _ = _fit(X, y, radius=0.02, wasserstein=wasserstein)
    assert free.objective_ < model.objective_ - 1e-4


def test_ramp_limited_optimum_equals_lifted_lp():
    X, y = _problem(4)
    model, X_aug, D = _fit(X, y, radius=0.01, wasserstein="l1", ramp=0.8, lower_bound=-1.0)
    reference = solve_lifted_l1_lp(
        X_aug, y, D, 0.01, lower=np.full(len(y), -1.0), ramp=np.full(len(y) - 1, 0.8)
    )
    assert _rel_gap(model.objective_, reference) <= 1e-6
