"""SCNN (plain, lasso, ridge) against the lifted regression with the paper's penalties."""

from __future__ import annotations

import numpy as np
import pytest

from tests.models.lifted_regression import TIGHT, solve_lifted_cvxpy
from wadiro_models import SCNN
from wadiro_models._gates import activation_patterns, augment


def _data(seed: int = 0, n: int = 50) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, size=(n, 2))
    return X, np.abs(X[:, 0]) - X[:, 1] ** 2 + 0.1 * rng.standard_normal(n)


@pytest.mark.parametrize(
    ("regularizer", "lambda_reg"), [(None, 0.0), ("lasso", 1e-3), ("lasso", 0.05), ("ridge", 0.01)]
)
def test_optimum_equals_lifted_regression_with_penalty(regularizer, lambda_reg):
    X, y = _data()
    model = SCNN(
        max_neurons=10, regularizer=regularizer, lambda_reg=lambda_reg, standardize=False,
        solver_options=TIGHT,
    ).fit(X, y)
    X_aug = augment(X)
    D = activation_patterns(X_aug, model.gates_).astype(float)
    reference = solve_lifted_cvxpy(
        X_aug, y, D, 0.0, "l1", regularizer=regularizer, lambda_reg=lambda_reg
    )
    assert abs(model.objective_ - reference) <= 1e-6 * max(1.0, abs(reference))


@pytest.mark.parametrize("regularizer", ["lasso", "ridge"])
def test_stronger_penalty_gives_smaller_weights_and_worse_fit(regularizer):
    X, y = _data(1)
    fits = [SCNN(max_neurons=10, regularizer=regularizer, lambda_reg=lam).fit(X, y)
            for lam in (1e-4, 1e-2, 1.0)]
    sizes = [np.abs(np.concatenate([f.nu_.ravel(), f.omega_.ravel()])).sum() for f in fits]
    errors = [np.mean(np.abs(f.predict(X) - y)) for f in fits]
    assert sizes[0] > sizes[1] > sizes[2]
    assert errors[0] <= errors[1] <= errors[2]


def test_lambda_is_ignored_without_regularizer():
    X, y = _data(2)
    a = SCNN(max_neurons=8, lambda_reg=5.0).fit(X, y)
    b = SCNN(max_neurons=8, lambda_reg=0.0).fit(X, y)
    assert a.objective_ == pytest.approx(b.objective_, rel=1e-6)


def test_physical_bounds_apply_to_scnn_too():
    X, y = _data(3)
    model = SCNN(max_neurons=10, lower_bound=-1.0, upper_bound=1.0).fit(X, y)
    y_hat = model.predict(X)
    assert y_hat.min() >= -1.0 and y_hat.max() <= 1.0
