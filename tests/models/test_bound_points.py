"""Bound points: physical bounds imposed on inputs that are not training samples (e.g. the week
to forecast). Checked against what ``predict`` returns there, against the tight reference
solver, and against the program without them."""

from __future__ import annotations

import numpy as np
import pytest

from wadiro_models import (
    SCNN,
    InfeasibleConstraintsError,
    InvalidInputError,
    ScnnProgram,
    WaDiRoSCNN,
    max_constraint_violation,
    objective_value,
    solve_clarabel,
    solve_ipm,
)
from wadiro_models._gates import activation_patterns, augment
from wadiro_models._program import bound_predictions
from wadiro_models.solvers.ipm._cones import NTScaling
from wadiro_models.solvers.ipm._lifted import LiftedProgram
from wadiro_models.solvers.ipm._newton import NormalEquations

TIGHT = {"tol_gap_abs": 1e-10, "tol_gap_rel": 1e-10, "tol_feas": 1e-10}


def data(n: int = 150, m: int = 60, seed: int = 0):
    """A load-like target (small at 'night', so an unconstrained fit dips below 0) and
    bound points drawn wider than the training inputs, where extrapolation goes negative."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 3))
    y = np.maximum(0.0, np.sin(2 * X[:, 0]) + X[:, 1] * X[:, 2]) + 0.05 * rng.random(n)
    X_bound = 1.8 * rng.standard_normal((m, 3))
    return X, y, X_bound


def interior_point(cones, rng: np.random.Generator) -> np.ndarray:
    v = rng.random(cones.size) + 0.1
    if cones.n_soc:
        soc = rng.standard_normal(cones.n_soc)
        soc[0] = np.linalg.norm(soc[1:]) + 0.1 + rng.random()
        v[cones.n_lp:] = soc
    return v


def dense(operator, n_in: int) -> np.ndarray:
    return np.column_stack([operator(col) for col in np.eye(n_in)])


def bounded_program(wasserstein: str = "l1", *, fit_intercept: bool = True, ramp: bool = False,
                    upper: bool = False, seed: int = 0) -> ScnnProgram:
    X, y, X_bound = data(seed=seed)
    rng = np.random.default_rng(seed + 100)
    model = WaDiRoSCNN(radius=0.02, max_neurons=12, wasserstein=wasserstein,
                       fit_intercept=fit_intercept, lower_bound=0.0,
                       ramp=np.where(rng.random(X.shape[0] - 1) < 0.7, 0.5, np.inf)
                       if ramp else None, random_state=seed)
    lower = np.where(rng.random(X_bound.shape[0]) < 0.8, 0.05, -np.inf)
    upper_B = np.where(rng.random(X_bound.shape[0]) < 0.5, 1.0, np.inf) if upper else None
    return model.build_program(X, y, bound_X=X_bound, bound_lower=lower, bound_upper=upper_B)


# -- the estimators ----------------------------------------------------------------------------


@pytest.mark.parametrize("solver", ["ipm", "clarabel"])
@pytest.mark.parametrize("wasserstein", ["l1", "l2"])
@pytest.mark.parametrize("fit_intercept", [True, False])
def test_predictions_honour_the_bounds_at_every_bound_point(solver, wasserstein, fit_intercept):
    X, y, X_bound = data()
    params = {"radius": 0.01, "max_neurons": 16, "wasserstein": wasserstein,
              "fit_intercept": fit_intercept, "lower_bound": 0.0, "solver": solver}
    free = WaDiRoSCNN(**params).fit(X, y)
    assert np.count_nonzero(free.predict(X_bound) < 0) > 0  # the bound points need it
    model = WaDiRoSCNN(**params).fit(X, y, bound_X=X_bound, bound_lower=0.0)
    assert model.solver_name_ == solver and model.solver_status_ == "optimal"
    assert model.predict(X_bound).min() >= 0.0
    assert model.predict(X).min() >= 0.0
    # the training rows' cones are unchanged, so the fit only gets worse on its objective
    assert model.objective_ >= free.objective_ - 1e-9


@pytest.mark.parametrize("wasserstein", ["l1", "l2"])
def test_per_point_lower_bounds_keep_a_residual_forecast_nonnegative(wasserstein):
    """The residual road: fit r = y - persistence with r >= -persistence, so that the
    forecast persistence + r is never negative, in training and at the bound points."""
    rng = np.random.default_rng(4)
    X, y, X_bound = data(seed=4)
    persistence = np.maximum(0.0, y + 0.3 * rng.standard_normal(y.size))
    persistence_B = np.maximum(0.0, 0.5 + 0.5 * rng.standard_normal(X_bound.shape[0]))
    model = WaDiRoSCNN(radius=0.005, max_neurons=16, wasserstein=wasserstein,
                       lower_bound=-persistence, solver="ipm")
    model.fit(X, y - persistence, bound_X=X_bound, bound_lower=-persistence_B)
    assert model.solver_name_ == "ipm"
    forecast = persistence_B + model.predict(X_bound)
    assert forecast.min() >= 0.0
    assert np.isclose(forecast.min(), 0.0, atol=1e-4)  # the bound is active somewhere
    assert (persistence + model.predict(X)).min() >= 0.0


def test_upper_bounds_at_bound_points_hold_too():
    X, y, X_bound = data(seed=2)
    free = WaDiRoSCNN(max_neurons=16, radius=0.005, solver="ipm").fit(X, y)
    cap = 1.2
    assert free.predict(X_bound).max() > cap
    model = WaDiRoSCNN(max_neurons=16, radius=0.005, solver="ipm").fit(
        X, y, bound_X=X_bound, bound_upper=cap
    )
    assert model.predict(X_bound).max() <= cap


def test_scnn_takes_bound_points_too():
    X, y, X_bound = data(seed=1)
    model = SCNN(max_neurons=12, lower_bound=0.0).fit(X, y, bound_X=X_bound, bound_lower=0.0)
    assert model.predict(X_bound).min() >= 0.0
    lasso = SCNN(max_neurons=12, regularizer="lasso", lambda_reg=1e-3)
    assert lasso.fit(X, y, bound_X=X_bound, bound_lower=0.0).predict(X_bound).min() >= 0.0


def test_build_program_maps_the_points_as_predict_does():
    X, y, X_bound = data()
    model = WaDiRoSCNN(max_neurons=12, lower_bound=0.0, constraint_margin=1e-6)
    lower = np.linspace(0.0, 0.1, X_bound.shape[0])
    program = model.build_program(X, y, bound_X=X_bound, bound_lower=lower)
    model.fit(X, y, bound_X=X_bound, bound_lower=lower)
    scaling = model.standardization_
    X_aug = augment(scaling.transform_X(X_bound))
    np.testing.assert_array_equal(program.bound_X, X_aug)
    np.testing.assert_array_equal(program.bound_patterns, activation_patterns(X_aug, model.gates_))
    np.testing.assert_allclose(
        program.bound_lower, (lower - scaling.y_mean) / scaling.y_scale + 1e-6
    )
    assert program.bound_upper is None and program.has_physical_constraints
    # the program's y_hat_B is what predict returns there
    y_hat_B = bound_predictions(program, model.nu_, model.omega_, model.intercept_)
    np.testing.assert_allclose(scaling.inverse_y(y_hat_B), model.predict(X_bound), rtol=1e-12)


@pytest.mark.parametrize("solver", ["ipm", "clarabel"])
def test_contradictory_bound_points_are_reported_as_infeasible(solver):
    """Two copies of one input, one that must predict >= 5 and one <= 3: no network can."""
    X, y, X_bound = data()
    twice = np.vstack([X_bound[:1], X_bound[:1]])
    model = WaDiRoSCNN(max_neurons=10, solver=solver)
    with pytest.raises(InfeasibleConstraintsError, match="bound points"):
        model.fit(X, y, bound_X=twice, bound_lower=[5.0, -np.inf], bound_upper=[np.inf, 3.0])


def test_bound_points_that_contradict_the_training_bounds_are_infeasible():
    X, y, _ = data()
    model = WaDiRoSCNN(max_neurons=10, upper_bound=2.0, solver="ipm")
    with pytest.raises(InfeasibleConstraintsError):
        model.fit(X, y, bound_X=X[:3], bound_lower=2.5)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"bound_lower": 0.0}, InvalidInputError, "without bound_X"),
        ({"bound_X": "X_bound"}, InvalidInputError, "without bound_lower or bound_upper"),
        ({"bound_X": "narrow", "bound_lower": 0.0}, InvalidInputError, "2 features"),
        ({"bound_X": "nan", "bound_lower": 0.0}, InvalidInputError, "NaN"),
        ({"bound_X": "X_bound", "bound_lower": np.zeros(3)}, InvalidInputError,
         r"bound_lower must .* shape \(60,\)"),
        ({"bound_X": "X_bound", "bound_lower": np.nan}, InvalidInputError, "NaN"),
        ({"bound_X": "X_bound", "bound_lower": 1.0, "bound_upper": 0.5},
         InfeasibleConstraintsError, "above bound_upper .* bound point 0"),
        ({"bound_X": "X_bound", "bound_lower": np.inf}, InfeasibleConstraintsError, r"\+inf"),
    ],
    ids=["lower-alone", "points-alone", "features", "nan-point", "shape", "nan-bound",
         "crossed", "inf"],
)
def test_bad_bound_points_raise_typed_errors(kwargs, error, match):
    X, y, X_bound = data()
    points = {"X_bound": X_bound, "narrow": X_bound[:, :2],
              "nan": np.where(np.eye(60, 3, dtype=bool), np.nan, X_bound)}
    kwargs = {k: points[v] if isinstance(v, str) else v for k, v in kwargs.items()}
    with pytest.raises(error, match=match):
        WaDiRoSCNN(max_neurons=6).fit(X, y, **kwargs)
    with pytest.raises(error, match=match):
        WaDiRoSCNN(max_neurons=6).build_program(X, y, **kwargs)


def test_a_program_refuses_inconsistent_bound_points():
    program = bounded_program()
    with pytest.raises(InvalidInputError, match="bound_patterns has shape"):
        ScnnProgram(X=program.X, y=program.y, patterns=program.patterns, radius=0.1,
                    bound_X=program.bound_X, bound_patterns=program.bound_patterns[:, :1],
                    bound_lower=program.bound_lower)
    with pytest.raises(InvalidInputError, match="without bound points"):
        ScnnProgram(X=program.X, y=program.y, patterns=program.patterns, radius=0.1,
                    bound_lower=program.bound_lower)


# -- no bound points: nothing changes ----------------------------------------------------------


@pytest.mark.parametrize("solver", ["ipm", "clarabel"])
@pytest.mark.parametrize("wasserstein", ["l1", "l2"])
def test_absent_or_unbounded_points_give_exactly_the_fit_without_them(solver, wasserstein):
    X, y, X_bound = data()
    params = {"max_neurons": 12, "wasserstein": wasserstein, "lower_bound": 0.0,
              "solver": solver}
    plain = WaDiRoSCNN(**params).fit(X, y)
    for points in ({"bound_X": X_bound[:0], "bound_lower": 0.0},
                   {"bound_X": X_bound, "bound_lower": -np.inf, "bound_upper": np.inf}):
        program = WaDiRoSCNN(**params).build_program(X, y, **points)
        assert not program.has_bound_points and program.bound_X is None
        other = WaDiRoSCNN(**params).fit(X, y, **points)
        assert other.objective_ == plain.objective_
        np.testing.assert_array_equal(other.nu_, plain.nu_)
        np.testing.assert_array_equal(other.predict(X_bound), plain.predict(X_bound))


def test_the_lifted_program_without_bound_points_has_no_bound_rows():
    X, y, _ = data()
    lifted = LiftedProgram(WaDiRoSCNN(max_neurons=12).build_program(X, y))
    assert lifted.n_bound == 0 and lifted.XX_output is lifted.XX_sym
    assert lifted.block("bound_lo").start == lifted.block("bound_lo").stop
    assert lifted.pair_masks.shape[1] == X.shape[0]


# -- the interior-point algebra with bound rows ------------------------------------------------


@pytest.mark.parametrize("wasserstein", ["l1", "l2"])
@pytest.mark.parametrize("ramp", [False, True])
def test_G_transpose_is_the_adjoint_of_G_with_bound_rows(wasserstein, ramp):
    program = bounded_program(wasserstein, ramp=ramp, upper=True)
    lifted = LiftedProgram(program)
    assert lifted.n_bound > 0
    rng = np.random.default_rng(3)
    x, z = rng.standard_normal(lifted.layout.size), rng.standard_normal(lifted.cones.size)
    assert np.isclose(z @ lifted.G(x), x @ lifted.GT(z), rtol=1e-12)


def test_bound_rows_of_G_are_the_predictions_at_the_bound_points():
    program = bounded_program(upper=True)
    lifted = LiftedProgram(program)
    lay = lifted.layout
    rng = np.random.default_rng(5)
    nu, omega = rng.standard_normal((2, program.n_gates, program.n_cols))
    x = np.zeros(lay.size)
    x[lay.nu], x[lay.omega], x[lay.b] = nu.ravel(), omega.ravel(), 0.3
    s = lifted.h - lifted.G(x)
    y_hat_B = bound_predictions(program, nu, omega, 0.3)
    lower_idx = np.flatnonzero(np.isfinite(program.bound_lower))
    upper_idx = np.flatnonzero(np.isfinite(program.bound_upper))
    np.testing.assert_allclose(s[lifted.block("bound_lo")],
                               y_hat_B[lower_idx] - program.bound_lower[lower_idx])
    np.testing.assert_allclose(s[lifted.block("bound_up")],
                               program.bound_upper[upper_idx] - y_hat_B[upper_idx])


@pytest.mark.parametrize("wasserstein", ["l1", "l2"])
@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("ramp", [False, True])
def test_reduced_newton_solve_with_bound_rows_matches_the_dense_normal_equations(
    wasserstein, fit_intercept, ramp
):
    """Both ways of forming the output block (pair masks without ramps, lifted features
    with them) against G^T W^{-2} G assembled densely."""
    program = bounded_program(wasserstein, fit_intercept=fit_intercept, ramp=ramp, upper=True)
    lifted = LiftedProgram(program)
    assert (lifted.pair_masks is None) == ramp
    rng = np.random.default_rng(4)
    cones = lifted.cones
    scaling = cones.nt_scaling(interior_point(cones, rng), interior_point(cones, rng))
    G = dense(lifted.G, lifted.layout.size)
    Winv = dense(scaling.apply_inverse, cones.size)
    H = G.T @ Winv @ Winv @ G
    r = rng.standard_normal(lifted.layout.size)
    expected = np.linalg.solve(H, r)
    got = NormalEquations(lifted, scaling).solve(r)
    np.testing.assert_allclose(got, expected, rtol=1e-7, atol=1e-9 * np.abs(expected).max())
    ident = NormalEquations(lifted, NTScaling.identity(cones))
    np.testing.assert_allclose(G.T @ G @ ident.solve(r), r, atol=1e-8)


# -- both solvers reach the same optimum -------------------------------------------------------

CASES = [{}, {"upper": True}, {"fit_intercept": False}, {"ramp": True}]


@pytest.mark.parametrize("wasserstein", ["l1", "l2"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: ",".join(c) or "lower")
@pytest.mark.parametrize("seed", [0, 1])
def test_ipm_reaches_the_tight_reference_with_bound_points(wasserstein, case, seed):
    program = bounded_program(wasserstein, seed=seed, **case)
    fast = solve_ipm(program, fallback=False)
    reference = solve_clarabel(program, **TIGHT)
    assert reference.status == "optimal"
    assert fast.status == "optimal" and fast.solver == "ipm", fast.info
    assert fast.objective == objective_value(program, fast.nu, fast.omega, fast.b)
    gap = abs(fast.objective - reference.objective) / abs(reference.objective)
    assert gap <= 1e-6
    assert max_constraint_violation(program, fast.nu, fast.omega, fast.b) <= 1e-7
    assert max_constraint_violation(program, reference.nu, reference.omega, reference.b) <= 1e-7
    # the bound points change the optimum (else this would test nothing)
    free = solve_clarabel(
        ScnnProgram(X=program.X, y=program.y, patterns=program.patterns,
                    radius=program.radius, wasserstein=program.wasserstein,
                    fit_intercept=program.fit_intercept, lower=program.lower,
                    upper=program.upper, ramp=program.ramp), **TIGHT)
    assert reference.objective > free.objective + 1e-6


@pytest.mark.parametrize("wasserstein", ["l1", "l2"])
def test_the_direct_formulation_imposes_the_same_bound_rows(wasserstein):
    program = bounded_program(wasserstein, upper=True)
    auxiliary = solve_clarabel(program, **TIGHT)
    direct = solve_clarabel(program, formulation="direct", **TIGHT)
    assert auxiliary.ok and direct.ok
    assert direct.objective == pytest.approx(auxiliary.objective, rel=1e-7)
    assert max_constraint_violation(program, direct.nu, direct.omega, direct.b) <= 1e-8


def test_infeasible_bound_points_end_in_the_reference_status():
    program = bounded_program()
    twice = np.vstack([program.bound_X[:1], program.bound_X[:1]])
    contradictory = ScnnProgram(
        X=program.X, y=program.y, patterns=program.patterns, radius=0.1,
        bound_X=twice, bound_patterns=np.vstack([program.bound_patterns[:1]] * 2),
        bound_lower=np.array([1.0, -np.inf]), bound_upper=np.array([np.inf, 0.0]),
    )
    solution = solve_ipm(contradictory, max_iter=30)
    assert solution.solver == "ipm->clarabel"
    assert solution.status == "infeasible"
