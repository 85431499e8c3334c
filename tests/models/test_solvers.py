"""Solver registry and the reference solver's own reporting."""

from __future__ import annotations

import numpy as np
import pytest

from wadiro_models import (
    SCNN,
    ScnnProgram,
    SolverNotAvailableError,
    WaDiRoSCNN,
    get_solver,
    max_constraint_violation,
    objective_value,
    solve_clarabel,
)
from wadiro_models.solvers import SOLVERS, configured_solver


def _program(model: type = WaDiRoSCNN, **params) -> ScnnProgram:
    """A small program exactly as ``model(max_neurons=10, **params)`` would fit it."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 2))
    y = np.abs(X[:, 0]) + 0.1 * rng.normal(size=60)
    return model(max_neurons=10, **params).build_program(X, y)


def test_registry_resolves_the_reference_solver_lazily():
    assert get_solver("clarabel") is solve_clarabel
    with pytest.raises(SolverNotAvailableError, match="known solvers: clarabel, ipm"):
        get_solver("gurobi")


def test_options_are_forwarded_to_clarabel():
    program = _program()
    stopped = configured_solver("clarabel", {"max_iter": 1})(program)
    assert stopped.status == "failed" and np.isnan(stopped.objective)
    full = configured_solver("clarabel", None)(program)
    assert full.ok and full.iterations > 1


def test_solution_reports_its_own_objective_and_feasibility():
    program = _program(lower_bound=0.2, ramp=1.0)
    assert program.lower is not None and program.ramp is not None
    solution = solve_clarabel(program)
    assert solution.ok and solution.solver == "clarabel"
    assert solution.objective == objective_value(program, solution.nu, solution.omega, solution.b)
    assert solution.objective == pytest.approx(solution.info["reported_objective"], rel=1e-6)
    assert max_constraint_violation(program, solution.nu, solution.omega, solution.b) < 1e-7


@pytest.mark.parametrize("regularizer", ["lasso", "ridge"])
@pytest.mark.parametrize("solver", sorted(SOLVERS))
def test_every_registered_solver_solves_a_penalised_program(solver, regularizer):
    """What lets the registry hold no per-solver feature flags: each solver reaches the
    reference optimum of a lasso/ridge program (``ipm`` by handing it to the reference)."""
    program = _program(SCNN, regularizer=regularizer, lambda_reg=0.05)
    reference = solve_clarabel(program)
    solution = configured_solver(solver)(program)
    assert solution.ok and reference.ok
    assert solution.objective == pytest.approx(reference.objective, rel=1e-6)
    assert objective_value(program, solution.nu, solution.omega, solution.b) == pytest.approx(
        reference.objective, rel=1e-6)


TIGHT = {"tol_gap_abs": 1e-10, "tol_gap_rel": 1e-10, "tol_feas": 1e-10}


@pytest.mark.parametrize(
    ("model", "params"),
    [
        (WaDiRoSCNN, {"wasserstein": "l1"}),
        (WaDiRoSCNN, {"wasserstein": "l2", "lower_bound": 0.2, "ramp": 1.0}),
        (SCNN, {"regularizer": "ridge", "lambda_reg": 0.1}),
    ],
    ids=["l1", "l2-bounds-ramps", "ridge"],
)
def test_direct_and_auxiliary_formulations_reach_the_same_optimum(model, params):
    program = _program(model, **params)
    auxiliary = solve_clarabel(program, **TIGHT)
    direct = solve_clarabel(program, formulation="direct", **TIGHT)
    assert auxiliary.ok and direct.ok
    assert direct.info["formulation"] == "direct"
    assert direct.objective == pytest.approx(auxiliary.objective, rel=1e-7)
    assert max_constraint_violation(program, direct.nu, direct.omega, direct.b) < 1e-8


def test_unknown_formulation_is_refused():
    with pytest.raises(ValueError, match="unknown formulation 'sparse'"):
        solve_clarabel(_program(), formulation="sparse")
