"""``solve_ipm``: run the interior-point iterations, check the answer independently of them,
and fall back to the reference path when it is not good enough."""

from __future__ import annotations

import time

import numpy as np
from threadpoolctl import threadpool_limits

from ..._program import ScnnProgram, ScnnSolution, max_constraint_violation, objective_value
from .._clarabel import solve_clarabel
from ._iterations import IpmState, homogeneous, infeasible_start
from ._lifted import LiftedProgram
from ._newton import NewtonSystemError
from ._options import IpmOptions


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
            if method == "auto":  # why these two: see _iterations
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
        return ScnnSolution.without_point(
            program, status="failed", solver="ipm", solve_time=time.perf_counter() - started,
            info={"fallback_reason": reason},
        )
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
