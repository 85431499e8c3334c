"""Behaviour of WaDiRoSCNN: constraints, limits, gates, the ReLU map, standardisation, errors."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from tests.models.lifted_regression import TIGHT
from wadiro_models import (
    SCNN,
    InaccurateSolutionWarning,
    InfeasibleConstraintsError,
    InsufficientDataError,
    InvalidInputError,
    ScnnSolution,
    SolverError,
    SolverNotAvailableError,
    WaDiRoSCNN,
)
from wadiro_models._gates import activation_patterns, augment
from wadiro_models.solvers import SOLVERS, SolverEntry, solve_clarabel


def _data(seed: int = 0, n: int = 120, d: int = 3) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, size=(n, d)) * [1.0, 10.0, 0.1] + [0.0, 50.0, -3.0]
    y = 20 + 8 * np.sin(X[:, 0]) + 0.3 * (X[:, 1] - 50) + rng.standard_normal(n)
    return X, y


# ---------------------------------------------------------------- physical constraints
@pytest.mark.parametrize("wasserstein", ["l1", "l2"])
def test_bounds_and_ramp_hold_on_every_training_sample(wasserstein):
    X, y = _data()
    rng = np.random.default_rng(1)
    lower = np.quantile(y, 0.3) + rng.uniform(-0.5, 0.5, size=len(y))
    upper = np.quantile(y, 0.8)
    ramp = 0.5 * np.std(np.diff(y))
    model = WaDiRoSCNN(
        radius=0.01, max_neurons=12, wasserstein=wasserstein,
        lower_bound=lower, upper_bound=upper, ramp=ramp,
    ).fit(X, y)
    y_hat = model.predict(X)
    assert np.all(y_hat >= lower)
    assert np.all(y_hat <= upper)
    assert np.all(np.abs(np.diff(y_hat)) <= ramp)
    # and they bite: the unconstrained fit breaks each of them
    free = WaDiRoSCNN(radius=0.01, max_neurons=12, wasserstein=wasserstein).fit(X, y).predict(X)
    assert np.any(free < lower) and np.any(free > upper)
    assert np.any(np.abs(np.diff(free)) > ramp)


def test_standardisation_converts_constraints_exactly():
    """standardize=True equals standardize=False on pre-standardised data and bounds."""
    X, y = _data(2)
    lower, ramp = np.quantile(y, 0.25), 2.0
    mean_x, std_x, mean_y, std_y = X.mean(0), X.std(0), y.mean(), y.std()
    inside = WaDiRoSCNN(
        radius=0.05, max_neurons=10, lower_bound=lower, ramp=ramp, constraint_margin=0.0,
        solver_options=TIGHT,
    ).fit(X, y)
    outside = WaDiRoSCNN(
        radius=0.05, max_neurons=10, lower_bound=(lower - mean_y) / std_y, ramp=ramp / std_y,
        standardize=False, constraint_margin=0.0, solver_options=TIGHT,
    ).fit((X - mean_x) / std_x, (y - mean_y) / std_y)
    assert inside.objective_ == pytest.approx(outside.objective_, rel=1e-7)
    np.testing.assert_allclose(inside.gates_, outside.gates_)
    np.testing.assert_allclose(
        inside.predict(X), mean_y + std_y * outside.predict((X - mean_x) / std_x),
        rtol=1e-5, atol=1e-5 * std_y,
    )


def test_infeasible_constraints_raise_before_or_after_solving():
    X, y = _data()
    with pytest.raises(InfeasibleConstraintsError, match="above upper_bound .* sample 0"):
        WaDiRoSCNN(lower_bound=5.0, upper_bound=4.0).fit(X, y)
    with pytest.raises(InfeasibleConstraintsError, match="ramp"):
        WaDiRoSCNN(ramp=-1.0).fit(X, y)
    # each bound is satisfiable alone, but no prediction can jump 10 units within a ramp of 1
    lower = np.where(np.arange(len(y)) % 2 == 0, 10.0, -np.inf)
    upper = np.where(np.arange(len(y)) % 2 == 1, 0.0, np.inf)
    with pytest.raises(InfeasibleConstraintsError, match="physical constraints"):
        WaDiRoSCNN(max_neurons=6, lower_bound=lower, upper_bound=upper, ramp=1.0).fit(X, y)


# ------------------------------------------------------------------- radius and SCNN
def test_radius_to_zero_matches_unregularised_scnn():
    """0 <= V(r) - V(0) <= r * ||beta_0||_inf, so V(r) -> V(0) = the SCNN optimum."""
    X, y = _data(3)
    base = SCNN(max_neurons=10, solver_options=TIGHT).fit(X, y)
    beta0 = np.concatenate([base.nu_.ravel(), base.omega_.ravel(), [base.intercept_, 1.0]])
    previous = np.inf
    for radius in [1e-1, 1e-3, 1e-6, 1e-9]:
        model = WaDiRoSCNN(radius=radius, max_neurons=10, solver_options=TIGHT).fit(X, y)
        np.testing.assert_array_equal(model.gates_, base.gates_)
        excess = model.objective_ - base.objective_
        assert -1e-9 <= excess <= radius * np.max(np.abs(beta0)) + 1e-9
        assert model.objective_ <= previous + 1e-12
        previous = model.objective_
    assert model.objective_ == pytest.approx(base.objective_, rel=1e-6)
    zero = WaDiRoSCNN(radius=0.0, max_neurons=10, solver_options=TIGHT).fit(X, y)
    assert zero.objective_ == pytest.approx(base.objective_, rel=1e-8)


def test_larger_radius_shrinks_the_weights():
    X, y = _data(4)
    norms = []
    for radius in [1e-3, 1e-1, 1.0]:
        model = WaDiRoSCNN(radius=radius, max_neurons=10).fit(X, y)
        norms.append(max(np.abs(model.nu_).max(), np.abs(model.omega_).max()))
    assert norms[0] > norms[1] > norms[2]


def test_joint_l1_ball_leaves_weights_up_to_one_unregularised():
    """beta's -1 floors ||beta||_inf at 1: while the fit's weights stay within 1, a larger
    radius changes neither them nor anything but the objective's constant term."""
    X, y = _data(4)
    fits = [WaDiRoSCNN(radius=r, max_neurons=10, solver_options=TIGHT).fit(X, y)
            for r in (2.0, 20.0)]
    assert max(np.abs(fits[0].nu_).max(), np.abs(fits[0].omega_).max()) < 1.0
    np.testing.assert_allclose(fits[0].predict(X), fits[1].predict(X), atol=1e-6)
    assert fits[1].objective_ - fits[0].objective_ == pytest.approx(18.0, rel=1e-6)


# ------------------------------------------------------------------ gates and predict
def test_gates_are_distinct_nonzero_and_used_by_predict():
    X, y = _data(5)
    model = WaDiRoSCNN(max_neurons=21, random_state=7).fit(X, y)
    assert model.gates_.shape == (X.shape[1] + 1, model.n_gates_)
    assert 1 <= model.n_gates_ <= 11  # ceil(21 / 2)
    X_aug = augment(model.standardization_.transform_X(X))
    D = activation_patterns(X_aug, model.gates_)
    assert D.any(axis=0).all()
    assert len({col.tobytes() for col in D.T}) == D.shape[1]
    # predict = sum_i D_i X (nu_i - omega_i) + b computed here by an explicit loop
    by_hand = np.full(len(X), model.intercept_)
    for i in range(model.n_gates_):
        by_hand += D[:, i] * (X_aug @ (model.nu_[i] - model.omega_[i]))
    np.testing.assert_allclose(model.predict(X), model.standardization_.inverse_y(by_hand))


def test_random_state_fixes_the_gates():
    X, y = _data(6)
    a = WaDiRoSCNN(max_neurons=10, random_state=3).fit(X, y)
    b = WaDiRoSCNN(max_neurons=10, random_state=3).fit(X, y)
    c = WaDiRoSCNN(max_neurons=10, random_state=4).fit(X, y)
    np.testing.assert_array_equal(a.gates_, b.gates_)
    np.testing.assert_array_equal(a.predict(X), b.predict(X))
    assert a.gates_.shape != c.gates_.shape or not np.allclose(a.gates_, c.gates_)


def test_without_intercept_the_output_bias_is_zero():
    X, y = _data(7)
    model = WaDiRoSCNN(max_neurons=8, fit_intercept=False).fit(X, y)
    assert model.intercept_ == 0.0


def test_objective_is_the_program_value_on_raw_data_without_standardisation():
    X, y = _data(8)
    model = WaDiRoSCNN(radius=0.02, max_neurons=8, standardize=False).fit(X, y)
    beta = np.concatenate([model.nu_.ravel(), model.omega_.ravel(), [model.intercept_, 1.0]])
    direct = 0.02 * np.max(np.abs(beta)) + np.mean(np.abs(model.predict(X) - y))
    assert model.objective_ == pytest.approx(direct, rel=1e-12)


# ------------------------------------------------------------------------ ReLU network
@pytest.mark.parametrize("wasserstein", ["l1", "l2"])
def test_relu_network_reproduces_gated_predictions_on_training_data(wasserstein):
    X, y = _data(9)
    model = WaDiRoSCNN(radius=1e-3, max_neurons=16, wasserstein=wasserstein,
                       lower_bound=15.0, solver_options=TIGHT).fit(X, y)
    network = model.to_relu_network()
    assert network.W1.shape == (X.shape[1], network.n_hidden)
    assert network.b1.shape == network.w2.shape == (network.n_hidden,)
    assert 0 < network.n_hidden <= 2 * model.n_gates_
    gated = model.predict(X)
    np.testing.assert_allclose(network(X), gated, rtol=1e-6, atol=1e-6 * np.ptp(y))
    # the map of eq. (map1): each neuron's output weight is +-sqrt of its input weight norm
    scale = model.standardization_
    recovered = network.W1 * scale.x_scale[:, None]
    hidden_bias = network.b1 + (scale.x_mean / scale.x_scale) @ recovered
    norms = np.linalg.norm(np.vstack([recovered, hidden_bias]), axis=0)
    np.testing.assert_allclose(np.abs(network.w2) / scale.y_scale, norms, rtol=1e-9)


# ------------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    ("X", "y", "error", "match"),
    [
        (np.array([[0.0, np.nan], [1.0, 2.0], [2.0, 1.0]]), np.ones(3), InvalidInputError, "NaN"),
        (np.ones((3, 2)), np.array([1.0, np.inf, 2.0]), InvalidInputError, "infinity"),
        (np.ones((4, 2)), np.ones(3), InvalidInputError, "inconsistent numbers of samples"),
        (np.ones((1, 2)), np.ones(1), InsufficientDataError, "n_samples=1"),
    ],
)
def test_bad_data_raises_typed_errors(X, y, error, match):
    with pytest.raises(error, match=match):
        WaDiRoSCNN().fit(X, y)


def test_bad_constraint_arrays_raise():
    X, y = _data()
    with pytest.raises(InvalidInputError, match=r"lower_bound must .* shape \(120,\)"):
        WaDiRoSCNN(lower_bound=np.zeros(5)).fit(X, y)
    with pytest.raises(InvalidInputError, match="upper_bound is NaN at sample 3"):
        WaDiRoSCNN(upper_bound=np.where(np.arange(120) == 3, np.nan, 1e3)).fit(X, y)


def test_unknown_or_missing_solver_raises(monkeypatch):
    X, y = _data()
    with pytest.raises(SolverNotAvailableError, match="unknown solver 'nope'"):
        WaDiRoSCNN(solver="nope").fit(X, y)
    monkeypatch.setitem(SOLVERS, "ghost", SolverEntry("wadiro_models._no_such_module:solve"))
    with pytest.raises(SolverNotAvailableError, match="cannot be imported"):
        WaDiRoSCNN(solver="ghost").fit(X, y)


def test_solver_stopping_early_raises_solver_error():
    X, y = _data()
    with pytest.raises(SolverError, match="returned status") as info:
        WaDiRoSCNN(max_neurons=10, solver_options={"max_iter": 2}).fit(X, y)
    assert info.value.status == "failed"
    assert not hasattr(WaDiRoSCNN(), "nu_")


def _inaccurate_solver(program, *, warm_start=None):
    solution = solve_clarabel(program)
    return ScnnSolution(**{**solution.__dict__, "status": "optimal_inaccurate"})


def test_inaccurate_status_raises_unless_accepted(monkeypatch):
    monkeypatch.setitem(SOLVERS, "sloppy", SolverEntry(f"{__name__}:_inaccurate_solver"))
    X, y = _data()
    with pytest.raises(SolverError, match="optimal_inaccurate.*accept_inaccurate=True"):
        WaDiRoSCNN(max_neurons=6, solver="sloppy").fit(X, y)
    with pytest.warns(InaccurateSolutionWarning) as record:
        model = WaDiRoSCNN(max_neurons=6, solver="sloppy", accept_inaccurate=True).fit(X, y)
    assert record[0].filename == __file__  # the warning points at the caller of fit
    assert model.solver_status_ == "optimal_inaccurate"


def _violating_solver(program, *, warm_start=None):
    solution = solve_clarabel(program)
    return ScnnSolution(**{**solution.__dict__, "b": solution.b - 1.0})


def test_weights_breaking_a_bound_are_rejected(monkeypatch):
    monkeypatch.setitem(SOLVERS, "liar", SolverEntry(f"{__name__}:_violating_solver"))
    X, y = _data()
    with pytest.raises(SolverError, match="lower_bound at sample"):
        WaDiRoSCNN(max_neurons=6, solver="liar", lower_bound=np.median(y)).fit(X, y)


def test_no_warning_on_a_clean_fit():
    X, y = _data()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        WaDiRoSCNN(max_neurons=6).fit(X, y)
