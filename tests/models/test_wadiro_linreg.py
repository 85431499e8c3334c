"""WaDiRo linear regression against independent formulations; its solver outcomes go through
the status check of the convex networks."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import linprog
from sklearn.linear_model import QuantileRegressor

import wadiro_models._wadiro_linreg as linreg_module
from tests.models.lifted_regression import TIGHT
from wadiro_models import (
    InaccurateSolutionWarning,
    InvalidInputError,
    SolverError,
    WaDiRoLinearRegression,
)
from wadiro_models._wadiro_linreg import solve_linear


def _data(seed: int = 0, n: int = 80) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3)) * [1.0, 5.0, 0.2] + [0.0, 10.0, 1.0]
    y = X @ [2.0, -0.5, 3.0] + 4.0 + rng.standard_t(2, size=n)
    return X, y


def _l1_lp(X: np.ndarray, y: np.ndarray, radius: float) -> float:
    """min radius*a + mean(c) s.t. |w_k|, |b| <= a, a >= 1, |X w + b - y| <= c (HiGHS)."""
    n, d = X.shape
    k = d + 1
    Xb = np.hstack([X, np.ones((n, 1))])
    cost = np.concatenate([np.zeros(k), [radius], np.full(n, 1.0 / n)])
    eye, ones = np.eye(k), np.ones((k, 1))
    A = np.vstack([
        np.hstack([eye, -ones, np.zeros((k, n))]),
        np.hstack([-eye, -ones, np.zeros((k, n))]),
        np.hstack([Xb, np.zeros((n, 1)), -np.eye(n)]),
        np.hstack([-Xb, np.zeros((n, 1)), -np.eye(n)]),
    ])
    b = np.concatenate([np.zeros(2 * k), y, -y])
    bounds = [(None, None)] * k + [(1.0, None)] + [(0.0, None)] * n
    res = linprog(cost, A_ub=A, b_ub=b, bounds=bounds, method="highs")
    assert res.status == 0
    return float(res.fun)


SOLVERS = ["clarabel", "clarabel-direct"]


@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize("radius", [1e-3, 0.1, 1.0])
def test_l1_optimum_equals_explicit_lp(radius, solver):
    X, y = _data()
    model = WaDiRoLinearRegression(radius=radius, standardize=False, solver=solver,
                                   solver_options=TIGHT).fit(X, y)
    assert model.objective_ == pytest.approx(_l1_lp(X, y, radius), rel=1e-6)
    assert model.solver_name_ == solver


@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("radius", [1e-3, 0.3, 3.0])
def test_the_direct_l2_program_is_the_cvxpy_one(radius, fit_intercept):
    """The SOCP written as matrices has cvxpy's optimum and weights (two formulations)."""
    X, y = _data(2)
    fits = [WaDiRoLinearRegression(radius=radius, wasserstein="l2", fit_intercept=fit_intercept,
                                   solver=solver, solver_options=TIGHT).fit(X, y)
            for solver in SOLVERS]
    assert fits[1].objective_ == pytest.approx(fits[0].objective_, rel=1e-8)
    np.testing.assert_allclose(fits[1].coef_, fits[0].coef_, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize("wasserstein", ["l1", "l2"])
def test_small_radius_is_least_absolute_deviations(wasserstein, solver):
    """radius -> 0 leaves the l1 loss: the median regression (independent HiGHS solve)."""
    X, y = _data(1)
    model = WaDiRoLinearRegression(radius=1e-9, wasserstein=wasserstein, solver=solver,
                                   solver_options=TIGHT)
    lad = QuantileRegressor(quantile=0.5, alpha=0.0, solver="highs").fit(X, y)
    ours = np.mean(np.abs(model.fit(X, y).predict(X) - y))
    theirs = np.mean(np.abs(lad.predict(X) - y))
    assert ours == pytest.approx(theirs, rel=1e-6)


def test_coefficients_are_reported_in_original_units():
    X, y = _data(2)
    model = WaDiRoLinearRegression(radius=0.01).fit(X, y)
    np.testing.assert_allclose(X @ model.coef_ + model.intercept_, model.predict(X))
    raw = WaDiRoLinearRegression(radius=1e-9, standardize=False).fit(X, y)
    scaled = WaDiRoLinearRegression(radius=1e-9, standardize=True).fit(X, y)
    np.testing.assert_allclose(raw.coef_, scaled.coef_, rtol=1e-3, atol=1e-3)


def test_dual_norm_of_the_solution_decreases_with_the_radius():
    """For min f + r g, g(x*(r)) is nonincreasing in r; g = ||(w, b, -1)||_2 in program units."""
    X, y = _data(3)
    mx, sx, my, sy = X.mean(0), X.std(0), y.mean(), y.std()
    sizes = []
    for radius in (1e-3, 0.5, 2.0, 5.0):
        model = WaDiRoLinearRegression(radius=radius, wasserstein="l2", solver_options=TIGHT)
        model.fit(X, y)
        w = model.coef_ * sx / sy
        b = (model.intercept_ - my) / sy + (mx / sx) @ w
        sizes.append(np.sqrt(w @ w + b * b + 1.0))
    assert all(a >= b - 1e-7 for a, b in zip(sizes, sizes[1:]))
    assert sizes[-1] < sizes[0] - 0.1


def test_bad_input_is_rejected():
    with pytest.raises(InvalidInputError, match="NaN"):
        WaDiRoLinearRegression().fit(np.array([[1.0], [np.nan], [2.0]]), np.ones(3))


# ------------------------------------------------ the status check shared with the networks
def test_solver_stopping_early_raises_the_shared_solver_error():
    X, y = _data()
    with pytest.raises(SolverError, match="solver 'clarabel' returned status 'failed'") as info:
        WaDiRoLinearRegression(solver_options={"max_iter": 1}).fit(X, y)
    assert info.value.status == "failed"


def _inaccurate(*args, **kwargs):
    solution = solve_linear(*args, **kwargs)
    solution.status = "optimal_inaccurate"
    return solution


def test_inaccurate_status_raises_unless_accepted_like_the_networks(monkeypatch):
    X, y = _data()
    exact = WaDiRoLinearRegression().fit(X, y)
    monkeypatch.setattr(linreg_module, "solve_linear", _inaccurate)
    with pytest.raises(SolverError, match="optimal_inaccurate.*accept_inaccurate=True"):
        WaDiRoLinearRegression().fit(X, y)
    with pytest.warns(InaccurateSolutionWarning) as record:
        model = WaDiRoLinearRegression(accept_inaccurate=True).fit(X, y)
    assert record[0].filename == __file__  # the warning points at the caller of fit
    assert model.solver_status_ == "optimal_inaccurate" and model.solver_name_ == "clarabel"
    assert model.objective_ == exact.objective_  # the weights are kept as the solver gave them


def _no_point(*args, **kwargs):
    solution = solve_linear(*args, **kwargs)
    solution.coef = np.full_like(solution.coef, np.nan)
    return solution


def test_optimal_status_without_finite_weights_is_rejected(monkeypatch):
    monkeypatch.setattr(linreg_module, "solve_linear", _no_point)
    X, y = _data()
    with pytest.raises(SolverError, match="non-finite weights") as info:
        WaDiRoLinearRegression().fit(X, y)
    assert info.value.status == "failed"
