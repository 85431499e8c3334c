"""Reference solver: the training program of :mod:`wadiro_models._program`, written in cvxpy
and solved by Clarabel.

The problem is built from matrix expressions only (no Python loop over samples or gates): the
gate cones are two (N, P) elementwise constraints ``(2 D - 1) * (X nu^T) >= 0`` (and omega),
and ``y_hat = X_hat u + b`` with ``u = vec(nu - omega)`` and ``y_hat`` as auxiliary variables
of their own (see :func:`build_problem`). The dual norm bounds (vec nu, vec omega, b, 1), which
has the same norm as beta. Clarabel settings (e.g. ``tol_gap_abs=1e-10``) pass straight through.
Bound points add one-sided rows ``X_hat_B u + b >= lower_B`` (and ``<= upper_B``) on their
lifted features ``X_hat_B = [D_B,1 * X_B, ..., D_B,P * X_B]``, only where a bound is finite.

``formulation="direct"`` writes the same program without the auxiliary variables
(``y_hat = X_hat vec(nu) - X_hat vec(omega) + b`` inside the objective and the bounds). It has
the same optimum but puts every dense lifted row into the problem twice, which Clarabel pays
for in its factorisation; it is kept so that benchmarks can compare against the program as it
is usually first written.

The problem is rebuilt on every call. A DPP variant with the radius as a ``cp.Parameter``
would save only the compile step, and only when the same data and patterns are re-solved with
another radius, which a tuner rarely does (max_neurons changes the patterns); not worth a
cache of compiled problems.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass

import cvxpy as cp
import numpy as np

from .._program import (
    ScnnProgram,
    ScnnSolution,
    lifted_features,
    lifted_rows,
    max_constraint_violation,
    objective_value,
)

# cvxpy status -> the library's status vocabulary (wadiro_models._status)
_STATUS = {
    cp.OPTIMAL: "optimal",
    cp.OPTIMAL_INACCURATE: "optimal_inaccurate",
    cp.INFEASIBLE: "infeasible",
    cp.INFEASIBLE_INACCURATE: "infeasible",
    cp.UNBOUNDED: "unbounded",
    cp.UNBOUNDED_INACCURATE: "unbounded",
}


@dataclass(frozen=True)
class _Variables:
    nu: cp.Variable
    omega: cp.Variable
    b: cp.Variable | None


def _dual_norm(program: ScnnProgram, v: _Variables) -> cp.Expression:
    parts = [cp.vec(v.nu, order="C"), cp.vec(v.omega, order="C")]
    if v.b is not None:
        parts.append(cp.reshape(v.b, (1,), order="C"))
    parts.append(np.ones(1))
    beta = cp.hstack(parts)
    return cp.norm(beta, "inf") if program.wasserstein == "l1" else cp.norm(beta, 2)


def _penalty(program: ScnnProgram, v: _Variables) -> cp.Expression:
    if program.regularizer == "lasso":
        return cp.sum(cp.abs(v.nu)) + cp.sum(cp.abs(v.omega))
    return cp.sum_squares(v.nu) + cp.sum_squares(v.omega)


def _cone_constraints(program: ScnnProgram, v: _Variables) -> list[cp.Constraint]:
    sign = 2.0 * program.patterns - 1.0
    return [
        cp.multiply(sign, program.X @ v.nu.T) >= 0,
        cp.multiply(sign, program.X @ v.omega.T) >= 0,
    ]


def _finite_rows(values: np.ndarray | None) -> np.ndarray:
    """Where an optional bound vector is finite (nowhere when it is None)."""
    return np.zeros(0, dtype=int) if values is None else np.flatnonzero(np.isfinite(values))


def _physical_constraints(program: ScnnProgram, y_hat: cp.Expression) -> list[cp.Constraint]:
    constraints: list[cp.Constraint] = []
    for values, lower in ((program.lower, True), (program.upper, False)):
        idx = _finite_rows(values)
        if idx.size:
            constraints.append(y_hat[idx] >= values[idx] if lower else y_hat[idx] <= values[idx])
    idx = _finite_rows(program.ramp)
    if idx.size:
        step = y_hat[1:] - y_hat[:-1]
        constraints.append(cp.abs(step[idx]) <= program.ramp[idx])
    return constraints


def _bound_point_constraints(
    program: ScnnProgram, u: cp.Expression, b: cp.Variable | None
) -> list[cp.Constraint]:
    """``lower_B <= y_hat_B <= upper_B`` with ``y_hat_B = X_hat_B u + b``, finite entries only
    (``u = vec(nu - omega)``, or that difference itself in the direct formulation)."""
    if not program.has_bound_points:
        return []
    constraints: list[cp.Constraint] = []
    for values, lower in ((program.bound_lower, True), (program.bound_upper, False)):
        idx = _finite_rows(values)
        if idx.size:
            y_hat_B = lifted_rows(program.bound_X[idx], program.bound_patterns[idx]) @ u
            if b is not None:
                y_hat_B = y_hat_B + b
            constraints.append(y_hat_B >= values[idx] if lower else y_hat_B <= values[idx])
    return constraints


FORMULATIONS = ("auxiliary", "direct")


def build_problem(
    program: ScnnProgram, formulation: str = "auxiliary"
) -> tuple[cp.Problem, _Variables]:
    """Assemble the cvxpy problem of ``program`` (one place, from the pieces above)."""
    if formulation not in FORMULATIONS:
        raise ValueError(f"unknown formulation {formulation!r}; expected one of {FORMULATIONS}")
    P, d1 = program.n_gates, program.n_cols
    v = _Variables(
        nu=cp.Variable((P, d1), name="nu"),
        omega=cp.Variable((P, d1), name="omega"),
        b=cp.Variable(name="b") if program.fit_intercept else None,
    )
    X_hat = lifted_features(program)
    if formulation == "direct":
        y_hat = X_hat @ cp.vec(v.nu, order="C") - X_hat @ cp.vec(v.omega, order="C")
        if v.b is not None:
            y_hat = y_hat + v.b
        definitions = []
        u: cp.Expression = cp.vec(v.nu, order="C") - cp.vec(v.omega, order="C")
    else:
        # u = vec(nu - omega) and y_hat as variables of their own: each dense lifted row
        # then touches P(d+1) variables once instead of 2P(d+1) twice (inside both sides of
        # |.|), so the matrix Clarabel factorises has far fewer nonzeros.
        u = cp.Variable(P * d1, name="u")
        y_hat = cp.Variable(program.n_samples, name="y_hat")
        fitted = X_hat @ u
        if v.b is not None:
            fitted = fitted + v.b
        definitions = [u == cp.vec(v.nu - v.omega, order="C"), y_hat == fitted]
    objective = cp.sum(cp.abs(y_hat - program.y)) / program.n_samples
    if program.radius > 0:
        objective = objective + program.radius * _dual_norm(program, v)
    if program.has_penalty:
        objective = objective + program.lambda_reg * _penalty(program, v)
    constraints = (
        definitions + _cone_constraints(program, v) + _physical_constraints(program, y_hat)
        + _bound_point_constraints(program, u, v.b)
    )
    return cp.Problem(cp.Minimize(objective), constraints), v


@dataclass(frozen=True)
class ClarabelRun:
    """The outcome of one Clarabel solve of a cvxpy problem, in the library's vocabulary."""

    status: str
    iterations: int | None
    info: dict


def run_clarabel(problem: cp.Problem, settings: dict) -> ClarabelRun:
    """Solve a cvxpy ``problem`` with Clarabel ``settings``; a crash is status ``"failed"``
    (never raised). The variables' values are left on the problem."""
    info: dict = {}
    try:
        with warnings.catch_warnings():
            # the status is reported in the solution; cvxpy's generic warning adds nothing
            warnings.filterwarnings("ignore", message="Solution may be inaccurate")
            problem.solve(solver=cp.CLARABEL, **settings)
        status = _STATUS.get(problem.status, "failed")
        info["cvxpy_status"] = problem.status
    except cp.error.SolverError as exc:
        status = "failed"
        info["error"] = str(exc)
    stats = problem.solver_stats if problem.status is not None else None
    iterations = getattr(stats, "num_iters", None) if stats is not None else None
    if stats is not None and getattr(stats, "solve_time", None) is not None:
        info["clarabel_time"] = float(stats.solve_time)
    return ClarabelRun(status, iterations, info)


def solve_clarabel(
    program: ScnnProgram,
    *,
    warm_start: ScnnSolution | None = None,
    formulation: str = "auxiliary",
    **settings: object,
) -> ScnnSolution:
    """Solve ``program`` with cvxpy + Clarabel; ``settings`` go to Clarabel unchanged.

    Clarabel has no warm start, so ``warm_start`` is accepted and ignored. A solver crash is
    reported as status ``"failed"`` (never raised), so the caller decides what to do.
    ``formulation`` picks how the program is written (see the module docstring).
    """
    del warm_start
    started = time.perf_counter()
    problem, v = build_problem(program, formulation)
    run = run_clarabel(problem, settings)
    elapsed = time.perf_counter() - started
    info: dict = {
        "backend": "cvxpy+clarabel",
        "formulation": formulation,
        "settings": dict(settings),
        **run.info,
    }
    outcome = {"status": run.status, "solver": "clarabel", "solve_time": elapsed,
               "iterations": run.iterations, "info": info}
    if run.status not in ("optimal", "optimal_inaccurate") or v.nu.value is None:
        return ScnnSolution.without_point(program, **outcome)
    nu, omega = np.asarray(v.nu.value), np.asarray(v.omega.value)
    b = float(v.b.value) if v.b is not None else 0.0
    objective = objective_value(program, nu, omega, b)
    info["reported_objective"] = float(problem.value)
    violation = max_constraint_violation(program, nu, omega, b)
    info["max_constraint_violation"] = violation
    scale = max(1.0, float(np.max(np.abs(program.y))) if program.n_samples else 1.0)
    return ScnnSolution(nu=nu, omega=omega, b=b, objective=objective,
                        primal_residual=max(violation, 0.0) / scale, **outcome)
