"""Structure-exploiting primal-dual interior-point solver for the WaDiRo-SCNN program.

The program (see :mod:`wadiro_models._program`) is written, times ``N``, as the cone program
(variables and rows in :mod:`wadiro_models._ipm_lifted`)::

    minimise   sum_j t_j + N radius tau
    s.t.       t_j >= |yl_j - y_j|,     yl = F (nu - omega) + b,    F = [D_1 X, ..., D_P X]
               (2 D_i - 1) * (X nu_i) >= 0,   (2 D_i - 1) * (X omega_i) >= 0
               lower <= yl <= upper,    |yl_j - yl_{j-1}| <= ramp_j
               l1:  tau >= 1, tau >= |e_k|      for every e_k in (nu, omega, b)
               l2:  tau >= ||(nu, omega, b, 1)||_2   (and the implied tau >= |e_k|)

i.e. ``min c^T x  s.t.  G x + s = h, s in K`` with ``K`` an orthant (l1: an LP) or an
orthant times one second-order cone (l2: an SOCP). Its dual is
``max -h^T z  s.t.  G^T z + c = 0, z in K``.

The method (:mod:`wadiro_models._ipm_iterations`) is a primal-dual path-following method
with Nesterov-Todd scaling, Mehrotra's predictor-corrector and Gondzio's correctors, in a
homogeneous self-dual embedding (l1) or from an infeasible start (l2), both from the
least-squares points. Each step solves, with ``W`` the scaling and ``lambda = W z``::

    G^T dz = bx,    G dx + ds = bz,    lambda o (W dz + W^{-1} ds) = r_c

by the normal equations ``G^T W^{-2} G dx = ...``, which :mod:`wadiro_models._ipm_newton`
reduces to one dense Cholesky of size ``P (d+1) + 2`` (the expensive part is one matrix
product forming the weighted Gram blocks of the lifted features). Every solve is refined against the exact
structured operator. BLAS runs on one thread inside the solver.

The answer is checked independently before it is returned: the program's own objective at
the weights, the largest constraint violation, the primal and dual residuals and the
duality gap. Anything unsupported (radius 0, penalties) or not accurate enough goes to the
reference path (cvxpy + Clarabel) and the result says so (``solver="ipm->clarabel"``, the
reason in ``info["fallback_reason"]``).
"""

from __future__ import annotations

import time

import numpy as np
from threadpoolctl import threadpool_limits

from ._ipm_iterations import IpmOptions, IpmState, homogeneous, infeasible_start
from ._ipm_lifted import LiftedProgram
from ._ipm_newton import NewtonSystemError
from ._program import ScnnProgram, ScnnSolution, max_constraint_violation, objective_value

__all__ = ["IpmOptions", "solve_ipm", "unsupported_reason"]


def unsupported_reason(program: ScnnProgram) -> str | None:
    """Why the fast path cannot solve ``program`` (``None`` when it can)."""
    if getattr(program, "has_penalty", False):
        return "penalised programs (lasso/ridge) are not supported by the ipm path"
    if not program.radius > 0:
        return "radius 0 leaves nu + omega unbounded; the ipm path needs radius > 0"
    if program.wasserstein not in ("l1", "l2"):
        return f"unknown Wasserstein norm {program.wasserstein!r}"
    if program.n_samples < 2 or program.n_gates < 1:
        return "program has fewer than 2 samples or no gate"
    return None


_METHODS = {"auto": None, "hsd": homogeneous, "infeasible": infeasible_start}


def solve_ipm(
    program: ScnnProgram, *, warm_start: ScnnSolution | None = None, **options: object
) -> ScnnSolution:
    """Solve ``program`` with the structured interior-point method.

    ``warm_start`` is accepted for the solver protocol and ignored: interior-point methods
    gain little from a start near the optimum of a different program. ``options`` are the
    fields of :class:`IpmOptions`.
    """
    del warm_start
    opts = IpmOptions(**options)  # type: ignore[arg-type]
    if opts.method not in _METHODS:
        raise ValueError(f"unknown ipm method {opts.method!r}; expected one of {sorted(_METHODS)}")
    started = time.perf_counter()
    reason = unsupported_reason(program)
    if reason is not None:
        return _fall_back(program, reason, started, opts)
    try:
        with threadpool_limits(limits=1, user_api="blas"):
            lifted = LiftedProgram(program)
            method = opts.method
            if method == "auto":  # measured: see _ipm_iterations
                method = "hsd" if lifted.l1 else "infeasible"
            state = _METHODS[method](lifted, opts)
    except (NewtonSystemError, FloatingPointError, np.linalg.LinAlgError) as exc:
        return _fall_back(program, f"numerical failure: {exc}", started, opts)
    solution = _checked_solution(program, lifted, state, opts, started)
    solution.info["method"] = method
    if solution.ok:
        return solution
    return _fall_back(program, solution.info["check"], started, opts, attempt=solution)


def _checked_solution(
    program: ScnnProgram,
    lifted: LiftedProgram,
    state: IpmState,
    opts: IpmOptions,
    started: float,
) -> ScnnSolution:
    """Turn the final iterate into weights and check them independently of the solver."""
    nu, omega, b = lifted.weights(state.x)
    objective = objective_value(program, nu, omega, b)
    dual_bound = float(-lifted.h @ state.z) / program.n_samples
    rel_gap = (objective - dual_bound) / max(abs(objective), 1e-12)
    violation = max_constraint_violation(program, nu, omega, b)
    info = {
        "message": state.message,
        "dual_bound": dual_bound,
        "max_constraint_violation": violation,
        "ipm_gap": state.gap,
    }
    problems = []
    worst_residual = max(state.primal_residual, state.dual_residual)
    if not worst_residual <= opts.accept_residual:
        problems.append(f"{state.message}; residual {worst_residual:.1e}")
    if not np.isfinite(objective) or abs(rel_gap) > opts.accept_gap:
        problems.append(f"relative gap {rel_gap:.2e} to the dual bound exceeds {opts.accept_gap}")
    if not violation <= opts.accept_violation:
        problems.append(f"constraint violation {violation:.2e} exceeds {opts.accept_violation}")
    status = "optimal" if not problems else "optimal_inaccurate"
    if problems:
        info["check"] = "; ".join(problems)
    return ScnnSolution(
        nu=nu,
        omega=omega,
        b=b,
        objective=objective,
        status=status,
        solver="ipm",
        solve_time=time.perf_counter() - started,
        iterations=state.iterations,
        primal_residual=state.primal_residual,
        dual_residual=state.dual_residual,
        duality_gap=rel_gap,
        info=info,
    )


def _fall_back(
    program: ScnnProgram,
    reason: str,
    started: float,
    opts: IpmOptions,
    attempt: ScnnSolution | None = None,
) -> ScnnSolution:
    """Solve with the reference path and record why; without fallback return the attempt."""
    if not opts.fallback:
        if attempt is not None:
            return attempt
        nan = np.full((program.n_gates, program.X.shape[1]), np.nan)
        return ScnnSolution(
            nu=nan, omega=nan.copy(), b=float("nan"), objective=float("nan"),
            status="failed", solver="ipm", solve_time=time.perf_counter() - started,
            info={"fallback_reason": reason},
        )
    from ._cvxpy_solver import solve_clarabel

    reference = solve_clarabel(program)
    reference.solver = "ipm->clarabel"
    reference.info["fallback_reason"] = reason
    if attempt is not None:
        reference.info["ipm_attempt"] = {
            "iterations": attempt.iterations,
            "objective": attempt.objective,
            "duality_gap": attempt.duality_gap,
        }
    reference.solve_time = time.perf_counter() - started
    return reference
