"""The public builder returns the program that fit solves: fit's weights evaluate to fit's
objective on it, its pieces match an independent recomputation, and the other solver
reaches the same optimum on it."""

from __future__ import annotations

import numpy as np
import pytest

from tests.models.lifted_regression import TIGHT
from wadiro_models import (
    SCNN,
    InvalidInputError,
    WaDiRoSCNN,
    max_constraint_violation,
    objective_value,
    solve_clarabel,
    solve_ipm,
)


def _data(seed: int = 0, n: int = 90) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, size=(n, 3)) * [1.0, 10.0, 0.5] + [0.0, 40.0, 1.0]
    y = 10 + 3 * np.sin(X[:, 0]) + 0.2 * (X[:, 1] - 40) + rng.standard_normal(n)
    return X, y


@pytest.mark.parametrize(
    ("solver", "other"), [("clarabel", "ipm"), ("ipm", "clarabel")], ids=["clarabel", "ipm"]
)
@pytest.mark.parametrize("wasserstein", ["l1", "l2"])
def test_builder_gives_the_program_fit_solves(solver, other, wasserstein):
    X, y = _data()
    lower = np.quantile(y, 0.2)
    model = WaDiRoSCNN(
        radius=0.02, max_neurons=12, wasserstein=wasserstein, lower_bound=lower, ramp=4.0,
        solver=solver, solver_options=TIGHT if solver == "clarabel" else None, random_state=5,
    )
    program = model.build_program(X, y)
    assert not hasattr(model, "n_features_in_")  # building leaves the estimator unfitted
    model.fit(X, y)

    # fit's weights give fit's objective on the built program, exactly
    assert model.objective_ == objective_value(program, model.nu_, model.omega_,
                                               model.intercept_)
    assert max_constraint_violation(program, model.nu_, model.omega_, model.intercept_) <= 1e-8
    # the same data, patterns and bounds, recomputed here from the definitions
    mean_x, std_x, mean_y, std_y = X.mean(0), X.std(0), y.mean(), y.std()
    X_std = np.hstack([(X - mean_x) / std_x, np.ones((len(X), 1))])
    np.testing.assert_allclose(program.X, X_std, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(program.y, (y - mean_y) / std_y, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(program.patterns, X_std @ model.gates_ >= 0)
    margin = model.constraint_margin
    np.testing.assert_allclose(program.lower, (lower - mean_y) / std_y + margin, rtol=1e-12)
    np.testing.assert_allclose(program.ramp, 4.0 / std_y - margin, rtol=1e-12)
    assert program.radius == 0.02 and program.wasserstein == wasserstein
    assert program.n_gates == model.n_gates_

    # the other solver, handed the built program, reaches the same optimum
    if other == "ipm":
        again = solve_ipm(program, fallback=False)
    else:
        again = solve_clarabel(program, **TIGHT)
    assert again.ok and again.solver == other
    assert again.objective == pytest.approx(model.objective_, rel=1e-6)


def test_penalised_builder_matches_fit_and_the_direct_formulation():
    X, y = _data(1)
    model = SCNN(max_neurons=10, regularizer="lasso", lambda_reg=1e-2, solver_options=TIGHT)
    program = model.build_program(X, y)
    assert program.radius == 0.0 and program.regularizer == "lasso"
    assert program.lambda_reg == 1e-2
    model.fit(X, y)
    assert model.objective_ == objective_value(program, model.nu_, model.omega_,
                                               model.intercept_)
    direct = solve_clarabel(program, formulation="direct", **TIGHT)
    assert direct.ok and direct.objective == pytest.approx(model.objective_, rel=1e-6)


def test_builder_draws_the_same_gates_as_fit_and_validates_like_fit():
    X, y = _data(2)
    model = WaDiRoSCNN(max_neurons=20, random_state=11)
    first, second = model.build_program(X, y), model.build_program(X, y)
    np.testing.assert_array_equal(first.patterns, second.patterns)
    model.fit(X, y)
    np.testing.assert_array_equal(first.patterns, model.build_program(X, y).patterns)
    X_bad = X.copy()
    X_bad[3, 1] = np.nan
    with pytest.raises(InvalidInputError, match="NaN"):
        model.build_program(X_bad, y)
    with pytest.raises(ValueError, match="max_neurons"):
        WaDiRoSCNN(max_neurons=0).build_program(X, y)
