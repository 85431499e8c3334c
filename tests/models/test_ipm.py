"""The structured interior-point solver: its algebra piece by piece, then its answers against
the cvxpy + Clarabel reference solved to tight tolerances, then its fallbacks."""

from __future__ import annotations

import importlib.util
from datetime import date
from pathlib import Path

import numpy as np
import pytest

from wadiro_models import (
    ScnnProgram,
    WaDiRoSCNN,
    max_constraint_violation,
    objective_value,
    solve_clarabel,
    solve_ipm,
)
from wadiro_models.solvers.ipm._cones import ConeSet, NTScaling
from wadiro_models.solvers.ipm._lifted import LiftedProgram
from wadiro_models.solvers.ipm._newton import NormalEquations

TIGHT = {"tol_gap_abs": 1e-10, "tol_gap_rel": 1e-10, "tol_feas": 1e-10}


def random_program(
    n: int = 60,
    d: int = 3,
    gates: int = 4,
    seed: int = 0,
    wasserstein: str = "l1",
    radius: float = 0.05,
    nonnegative: bool = False,
    ramp: bool = False,
    upper: bool = False,
    fit_intercept: bool = True,
) -> ScnnProgram:
    """The program WaDiRoSCNN's fit would solve on a small random data set (``gates`` gate
    draws); bounds and ramps, where asked for, are in the units of y and tight enough to
    bite on most seeds."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    y = np.sin(2 * X[:, 0]) + X[:, 1] * X[:, 2 % d] + 0.3 * rng.standard_normal(n)
    model = WaDiRoSCNN(
        radius=radius,
        max_neurons=2 * gates,
        wasserstein=wasserstein,
        fit_intercept=fit_intercept,
        # a floor inside the range of y, as y_hat >= 0 is for a load that is sometimes small
        lower_bound=np.quantile(y, 0.4) if nonnegative else None,
        upper_bound=np.where(rng.random(n) < 0.5, np.quantile(y, 0.6), np.inf)
        if upper else None,
        ramp=np.where(rng.random(n - 1) < 0.7, 0.6, np.inf) if ramp else None,
        random_state=seed,
    )
    return model.build_program(X, y)


def interior_point(cones: ConeSet, rng: np.random.Generator) -> np.ndarray:
    v = rng.random(cones.size) + 0.1
    if cones.n_soc:
        soc = rng.standard_normal(cones.n_soc)
        soc[0] = np.linalg.norm(soc[1:]) + 0.1 + rng.random()
        v[cones.n_lp :] = soc
    return v


def dense(operator, n_in: int) -> np.ndarray:
    return np.column_stack([operator(col) for col in np.eye(n_in)])


# -- cone algebra ------------------------------------------------------------------------------


@pytest.mark.parametrize("n_soc", [0, 6])
def test_nt_scaling_maps_z_and_s_to_the_same_point(n_soc: int) -> None:
    rng = np.random.default_rng(1)
    cones = ConeSet(5, n_soc)
    s, z = interior_point(cones, rng), interior_point(cones, rng)
    W = cones.nt_scaling(s, z)
    Wm, Wi = dense(W.apply, cones.size), dense(W.apply_inverse, cones.size)
    np.testing.assert_allclose(Wm @ Wi, np.eye(cones.size), atol=1e-12)
    np.testing.assert_allclose(Wm @ z, W.lam, atol=1e-12)
    np.testing.assert_allclose(Wi @ s, W.lam, atol=1e-12)
    np.testing.assert_allclose(Wm, Wm.T, atol=1e-12)
    if n_soc:  # the closed form the Newton system uses: W^{-2} = beta^-2 (2 a a^T - J)
        J = np.diag([1.0] + [-1.0] * (n_soc - 1))
        a = W.soc_rank_one
        np.testing.assert_allclose(
            (Wi @ Wi)[5:, 5:], W.beta**-2 * (2 * np.outer(a, a) - J), atol=1e-12
        )


def test_jordan_division_inverts_the_product_and_steps_stop_on_the_boundary() -> None:
    rng = np.random.default_rng(2)
    cones = ConeSet(4, 5)
    lam, r = interior_point(cones, rng), rng.standard_normal(cones.size)
    np.testing.assert_allclose(cones.product(lam, cones.divide(lam, r)), r, atol=1e-12)
    x, dx = interior_point(cones, rng), rng.standard_normal(cones.size) * 5
    alpha = cones.max_step(x, dx)
    assert np.isfinite(alpha) and alpha > 0
    assert abs(cones.min_eig(x + alpha * dx)) < 1e-10
    assert cones.min_eig(x + 0.999 * alpha * dx) > 0
    assert cones.max_step(x, np.abs(dx) * cones.identity()) == np.inf


# -- the lifted cone program -------------------------------------------------------------------


@pytest.mark.parametrize("wasserstein", ["l1", "l2"])
def test_G_transpose_is_the_adjoint_of_G(wasserstein: str) -> None:
    program = random_program(n=25, wasserstein=wasserstein, nonnegative=True, ramp=True,
                             upper=True)
    lifted = LiftedProgram(program)
    rng = np.random.default_rng(3)
    x, z = rng.standard_normal(lifted.layout.size), rng.standard_normal(lifted.cones.size)
    assert np.isclose(z @ lifted.G(x), x @ lifted.GT(z), rtol=1e-12)


@pytest.mark.parametrize("wasserstein", ["l1", "l2"])
def test_feasible_cone_point_reproduces_the_program_objective(wasserstein: str) -> None:
    """Weights with t = |residual| and tau = dual norm give s = h - Gx in K and c^T x / N
    equal to the program's own objective."""
    program = random_program(wasserstein=wasserstein, radius=0.3)
    lifted = LiftedProgram(program)
    lay = lifted.layout
    nu = np.zeros((program.n_gates, program.X.shape[1]))
    omega = nu.copy()
    b = 0.2
    x = np.zeros(lay.size)
    x[lay.b] = b
    residual = b - program.y
    x[lay.t] = np.abs(residual)
    beta = np.concatenate([nu.ravel(), omega.ravel(), [b, 1.0]])
    x[lay.tau] = np.max(np.abs(beta)) if wasserstein == "l1" else np.linalg.norm(beta)
    s = lifted.h - lifted.G(x)
    assert lifted.cones.min_eig(s) >= -1e-12
    assert np.isclose(lifted.c @ x / program.n_samples, objective_value(program, nu, omega, b))


@pytest.mark.parametrize("wasserstein", ["l1", "l2"])
@pytest.mark.parametrize("fit_intercept", [True, False])
def test_reduced_newton_solve_matches_the_dense_normal_equations(
    wasserstein: str, fit_intercept: bool
) -> None:
    """Assemble G explicitly (N = 30, P = 3), form G^T W^{-2} G densely at a random interior
    scaling and compare with the structured reduction (t, v and the SOC border eliminated)."""
    program = random_program(n=30, gates=3, wasserstein=wasserstein, nonnegative=True,
                             ramp=True, upper=True, fit_intercept=fit_intercept)
    lifted = LiftedProgram(program)
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


def test_identity_scaling_gives_the_least_squares_normal_matrix() -> None:
    program = random_program(n=20, gates=2, wasserstein="l2")
    lifted = LiftedProgram(program)
    G = dense(lifted.G, lifted.layout.size)
    r = np.random.default_rng(5).standard_normal(lifted.layout.size)
    normal = NormalEquations(lifted, NTScaling.identity(lifted.cones))
    np.testing.assert_allclose(G.T @ G @ normal.solve(r), r, atol=1e-9)


# -- answers against the reference -------------------------------------------------------------

CASES = [
    {},
    {"nonnegative": True},
    {"ramp": True, "nonnegative": True},
    {"upper": True},
    {"fit_intercept": False},
    {"radius": 1.5},
    {"radius": 1e-3, "gates": 8, "n": 120},
]


@pytest.mark.parametrize("wasserstein", ["l1", "l2"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: ",".join(c) or "plain")
@pytest.mark.parametrize("seed", [0, 1])
def test_same_optimum_as_the_tight_reference(wasserstein: str, case: dict, seed: int) -> None:
    program = random_program(seed=seed, wasserstein=wasserstein, **case)
    fast = solve_ipm(program, fallback=False)
    reference = solve_clarabel(program, **TIGHT)
    assert reference.status == "optimal"
    assert fast.status == "optimal" and fast.solver == "ipm", fast.info
    gap = abs(fast.objective - reference.objective) / abs(reference.objective)
    assert gap <= 1e-6
    assert max_constraint_violation(program, fast.nu, fast.omega, fast.b) <= 1e-7
    # the reported quantities are the program's own, not the solver's
    assert fast.objective == objective_value(program, fast.nu, fast.omega, fast.b)
    assert fast.primal_residual <= 1e-7 and fast.dual_residual <= 1e-7
    assert abs(fast.duality_gap) <= 1e-7
    if not program.fit_intercept:
        assert fast.b == 0.0


@pytest.mark.parametrize("wasserstein", ["l1", "l2"])
@pytest.mark.parametrize("method", ["hsd", "infeasible"])
def test_both_iteration_schemes_reach_the_reference(wasserstein: str, method: str) -> None:
    program = random_program(n=150, gates=6, seed=11, wasserstein=wasserstein,
                             nonnegative=True, ramp=True)
    fast = solve_ipm(program, fallback=False, method=method)
    reference = solve_clarabel(program, **TIGHT)
    assert fast.ok and fast.info["method"] == method, fast.info
    assert abs(fast.objective - reference.objective) <= 1e-6 * abs(reference.objective)


def test_unknown_method_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown ipm method"):
        solve_ipm(random_program(), method="simplex")


def test_solution_is_optimal_for_a_larger_program() -> None:
    """N = 400, 10 gates, y_hat >= 0: the weights are feasible and no worse than the
    tight reference, and the reference's objective is no worse than the dual bound."""
    program = random_program(n=400, d=4, gates=10, nonnegative=True, radius=0.02, seed=7)
    fast = solve_ipm(program, fallback=False)
    reference = solve_clarabel(program, **TIGHT)
    assert fast.ok
    assert fast.objective <= reference.objective * (1 + 1e-7)
    assert reference.objective >= fast.info["dual_bound"] * (1 - 1e-7)


# -- fallbacks ---------------------------------------------------------------------------------


def test_radius_zero_falls_back_to_the_reference_and_says_why() -> None:
    program = random_program(radius=0.0)
    solution = solve_ipm(program)
    assert solution.solver == "ipm->clarabel"
    assert "radius" in solution.info["fallback_reason"]
    reference = solve_clarabel(program)
    assert np.isclose(solution.objective, reference.objective, rtol=1e-6)


def test_a_run_that_cannot_converge_is_never_returned_as_optimal() -> None:
    program = random_program(wasserstein="l2", nonnegative=True)
    stopped = solve_ipm(program, max_iter=3, fallback=False)
    assert stopped.status == "optimal_inaccurate" and stopped.solver == "ipm"
    assert "check" in stopped.info
    rescued = solve_ipm(program, max_iter=3)
    assert rescued.solver == "ipm->clarabel" and rescued.status == "optimal"
    assert "residual" in rescued.info["fallback_reason"]
    assert rescued.info["ipm_attempt"]["iterations"] == 3


def test_infeasible_constraints_end_in_the_reference_status() -> None:
    program = random_program(n=30)
    contradictory = ScnnProgram(
        X=program.X, y=program.y, patterns=program.patterns, radius=0.1,
        lower=np.full(30, 1.0), upper=np.full(30, 0.0),
    )
    solution = solve_ipm(contradictory, max_iter=30)
    assert solution.solver == "ipm->clarabel"
    assert solution.status == "infeasible"


def test_warm_start_is_accepted_and_changes_nothing() -> None:
    program = random_program(seed=3)
    cold = solve_ipm(program)
    warm = solve_ipm(program, warm_start=cold)
    np.testing.assert_array_equal(warm.nu, cold.nu)


# -- real windows of the Cambridge archive -----------------------------------------------------


def _benchmark_module():
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "solver_speed.py"
    spec = importlib.util.spec_from_file_location("solver_speed", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def _check_real_window(archive: Path, building: str, week: date, neurons: int,
                       wasserstein: str, nonnegative: bool) -> None:
    bench = _benchmark_module()
    X_raw, y_raw = bench.real_window(building, week, archive=archive)
    program = bench.window_program(X_raw, y_raw, max_neurons=neurons, wasserstein=wasserstein,
                                   nonnegative=nonnegative)
    fast = solve_ipm(program, fallback=False)
    reference = solve_clarabel(program, **TIGHT)
    assert fast.ok and fast.solver == "ipm", fast.info
    assert abs(fast.objective - reference.objective) / abs(reference.objective) <= 1e-6
    assert max_constraint_violation(program, fast.nu, fast.omega, fast.b) <= 1e-7


@pytest.mark.parametrize("wasserstein", ["l1", "l2"])
@pytest.mark.parametrize("nonnegative", [True, False])
def test_real_window_matches_the_tight_reference(
    cambridge_archive: Path, wasserstein: str, nonnegative: bool
) -> None:
    _check_real_window(cambridge_archive, "UCam_Building_b1", date(2019, 3, 4), 20,
                       wasserstein, nonnegative)


@pytest.mark.slow
@pytest.mark.parametrize("wasserstein", ["l1", "l2"])
@pytest.mark.parametrize(
    ("building", "week"),
    [("UCam_Building_b0", date(2019, 6, 3)), ("UCam_Building_b20", date(2019, 10, 7)),
     ("UCam_Building_b70", date(2019, 1, 21))],
)
def test_other_real_windows_match_the_tight_reference(
    cambridge_archive: Path, building: str, week: date, wasserstein: str
) -> None:
    _check_real_window(cambridge_archive, building, week, 40, wasserstein, True)
