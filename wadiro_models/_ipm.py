"""Structure-exploiting primal-dual interior-point solver for the WaDiRo-SCNN program.

The program (see :mod:`wadiro_models._program`) is written, times ``N``, as the cone program
(variables and rows in :mod:`wadiro_models._ipm_lifted`)::

    minimise   sum_j t_j + N radius tau
    s.t.       t_j >= |yl_j - y_j|,     yl = F (nu - omega) + b,    F = [D_1 X, ..., D_P X]
               (2 D_i - 1) * (X nu_i) >= 0,   (2 D_i - 1) * (X omega_i) >= 0
               lower <= yl <= upper,    |yl_j - yl_{j-1}| <= ramp_j
               l1:  tau >= 1, tau >= |e_k|      for every e_k in (nu, omega, b)
               l2:  tau >= ||(nu, omega, b, 1)||_2

i.e. ``min c^T x  s.t.  G x + s = h, s in K`` with ``K`` an orthant (l1: an LP) or an
orthant times one second-order cone (l2: an SOCP). Its dual is
``max -h^T z  s.t.  G^T z + c = 0, z in K``.

The method is an infeasible-start primal-dual path-following method with Nesterov-Todd
scaling and Mehrotra's predictor-corrector (as in CVXOPT's ``coneqp``), started from the
least-squares points. Each step solves, with ``W`` the scaling and ``lambda = W z``::

    G^T dz = -r_d,    G dx + ds = -r_p,    lambda o (W dz + W^{-1} ds) = r_c

by the normal equations ``G^T W^{-2} G dx = ...``, which :mod:`wadiro_models._ipm_newton`
reduces to one dense Cholesky of size ``P (d+1) + 2`` (the expensive part is a single
``syrk`` of the weighted lifted features). Every solve is refined against the exact
structured operator. BLAS runs on one thread inside the solver.

The answer is checked independently before it is returned: the program's own objective at
the weights, the largest constraint violation, the primal and dual residuals and the
duality gap. Anything unsupported (radius 0, penalties) or not accurate enough goes to the
reference path (cvxpy + Clarabel) and the result says so (``solver="ipm->clarabel"``, the
reason in ``info["fallback_reason"]``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
from threadpoolctl import threadpool_limits

from ._ipm_cones import ConeSet, NTScaling
from ._ipm_lifted import LiftedProgram
from ._ipm_newton import NewtonSystemError, NormalEquations
from ._program import ScnnProgram, ScnnSolution, objective_value, predictions


@dataclass(frozen=True)
class IpmOptions:
    """Tolerances and limits of the interior-point method.

    ``feastol`` bounds the relative primal and dual residuals, ``reltol`` the relative
    duality gap at which the method stops. The returned weights must pass an independent
    check (else fallback): residuals at most ``accept_residual``, relative gap between the
    program's objective at the weights and the dual bound at most ``accept_gap``, largest
    constraint violation at most ``accept_violation``. A run that stalls just short of
    ``feastol`` is accepted when it passes that check.
    """

    feastol: float = 1e-8
    reltol: float = 1e-9
    max_iter: int = 80
    step: float = 0.99
    refine: int = 4
    refine_tol: float = 1e-13
    correctors: int = 2
    gondzio_a: float = 1.5
    gondzio_b: float = 0.1
    gondzio_band: float = 10.0
    gondzio_cap: float = 10.0
    separate_steps: bool = True
    method: str = "auto"
    hsd_sigma: str = "alpha"
    accept_gap: float = 1e-7
    accept_residual: float = 1e-7
    accept_violation: float = 1e-8
    fallback: bool = True
    verbose: bool = False


@dataclass
class _IpmState:
    x: np.ndarray
    s: np.ndarray
    z: np.ndarray
    iterations: int = 0
    primal_residual: float = np.inf
    dual_residual: float = np.inf
    gap: float = np.inf
    converged: bool = False
    message: str = ""
    history: list[tuple[float, float, float, float]] = field(default_factory=list)


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
    started = time.perf_counter()
    reason = unsupported_reason(program)
    if reason is not None:
        return _fall_back(program, reason, started, opts)
    try:
        with threadpool_limits(limits=1, user_api="blas"):
            lifted = LiftedProgram(program)
            method = opts.method
            if method == "auto":
                method = "hsd" if lifted.l1 else "infeasible"
            state = (_homogeneous if method == "hsd" else _interior_point)(lifted, opts)
    except (NewtonSystemError, FloatingPointError, np.linalg.LinAlgError) as exc:
        return _fall_back(program, f"numerical failure: {exc}", started, opts)
    solution = _checked_solution(program, lifted, state, opts, started)
    if solution.ok:
        return solution
    return _fall_back(program, solution.info["check"], started, opts, attempt=solution)


def _starting_point(
    lifted: LiftedProgram, opts: IpmOptions
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Least-squares points ``min ||s|| s.t. Gx + s = h`` and ``min ||z|| s.t.
    G^T z + c = 0``, shifted into the cone's interior."""
    cones, G, GT = lifted.cones, lifted.G, lifted.GT
    e = cones.identity()
    ident = NTScaling.identity(cones)
    normal = NormalEquations(lifted, ident)
    x = _refined_solve(normal, ident, lifted, GT(lifted.h), opts.refine)
    s = lifted.h - G(x)
    z = G(_refined_solve(normal, ident, lifted, -lifted.c, opts.refine))
    for v in (s, z):
        shortfall = -cones.min_eig(v)
        if shortfall >= -1e-8 * max(1.0, np.linalg.norm(v)):
            v += (1.0 + max(shortfall, 0.0)) * e
    return x, s, z


def _homogeneous(lifted: LiftedProgram, opts: IpmOptions) -> _IpmState:
    """Homogeneous self-dual variant: (x, s, z, tau, kappa) with G^T z + c tau = 0,
    G x + s = h tau, c^T x + h^T z + kappa = 0; the answer is x / tau."""
    cones, G, GT, c, h = lifted.cones, lifted.G, lifted.GT, lifted.c, lifted.h
    e = cones.identity()
    h_norm, c_norm = max(1.0, np.linalg.norm(h)), max(1.0, np.linalg.norm(c))
    x, s, z = _starting_point(lifted, opts)
    tau, kappa = 1.0, 1.0
    state = _IpmState(x.copy(), s.copy(), z.copy())
    best_merit = np.inf
    degree = cones.degree + 1
    with np.errstate(all="raise"):
        for it in range(opts.max_iter + 1):
            r_x = GT(z) + c * tau
            r_z = G(x) + s - h * tau
            r_t = kappa + c @ x + h @ z
            pcost, dcost = float(c @ x) / tau, float(-h @ z) / tau
            pres = np.linalg.norm(r_z) / tau / h_norm
            dres = np.linalg.norm(r_x) / tau / c_norm
            gap = float(s @ z) / tau**2
            rel_gap = gap / max(1.0, abs(pcost), abs(dcost))
            merit = max(pres, dres, rel_gap)
            if merit < best_merit:
                best_merit = merit
                state.x[:], state.s[:], state.z[:] = x / tau, s / tau, z / tau
                state.iterations = it
                state.primal_residual, state.dual_residual, state.gap = pres, dres, rel_gap
            if pres <= opts.feastol and dres <= opts.feastol and rel_gap <= opts.reltol:
                state.converged, state.message = True, "converged"
                return state
            if it == opts.max_iter or (it > 5 and merit > 1e3 * best_merit):
                break
            mu = (float(s @ z) + tau * kappa) / degree
            scaling = cones.nt_scaling(s, z)
            lam = scaling.lam
            try:
                normal = NormalEquations(lifted, scaling)
            except NewtonSystemError as exc:
                state.message = f"{exc} at iteration {it}"
                return state
            # the tau column: one extra solve per factorisation
            dx2, ds2, dz2, _, _ = _newton(lifted, normal, scaling, -c, h, np.zeros(cones.size), opts)
            denom = c @ dx2 + h @ dz2 - kappa / tau

            def direction(eta: float, q: np.ndarray, r_tk: float) -> tuple:
                dx1, ds1, dz1, ds1_t, dz1_t = _newton(
                    lifted, normal, scaling, -eta * r_x, -eta * r_z, q, opts
                )
                dtau = (-eta * r_t - c @ dx1 - h @ dz1 - r_tk / tau) / denom
                dkappa = (r_tk - kappa * dtau) / tau
                ds_t = ds1_t + dtau * scaling.apply_inverse(ds2)
                dz_t = dz1_t + dtau * scaling.apply(dz2)
                return dx1 + dtau * dx2, ds1 + dtau * ds2, dz1 + dtau * dz2, dtau, dkappa, ds_t, dz_t

            def step(d: tuple) -> float:
                a = min(1.0, cones.max_step(s, d[1]), cones.max_step(z, d[2]))
                if d[3] < 0:
                    a = min(a, -tau / d[3])
                if d[4] < 0:
                    a = min(a, -kappa / d[4])
                return a

            aff = direction(1.0, -lam, -tau * kappa)
            a_aff = step(aff)
            if opts.hsd_sigma == "gap":
                pred = ((s + a_aff * aff[1]) @ (z + a_aff * aff[2])
                        + (tau + a_aff * aff[3]) * (kappa + a_aff * aff[4]))
                sigma = float(np.clip(pred / (mu * degree), 0.0, 1.0)) ** 3
            else:
                sigma = (1.0 - a_aff) ** 3
            r_c = -cones.product(lam, lam) - cones.product(aff[5], aff[6]) + sigma * mu * e
            r_tk = -tau * kappa - aff[3] * aff[4] + sigma * mu
            comb = direction(1.0 - sigma, cones.divide(lam, r_c), r_tk)
            alpha = step(comb)
            k = cones.n_lp
            for _ in range(opts.correctors):  # Gondzio's centrality correctors (orthant rows)
                if alpha >= 0.99:
                    break
                trial = min(1.0, opts.gondzio_a * alpha + opts.gondzio_b)
                v = (lam[:k] + trial * comb[5][:k]) * (lam[:k] + trial * comb[6][:k])
                target, band = sigma * mu, opts.gondzio_band
                r = np.zeros(cones.size)
                r[:k] = np.clip(v, target / band, band * target) - v
                np.maximum(r[:k], -opts.gondzio_cap * target, out=r[:k])
                corr = direction(0.0, cones.divide(lam, r), 0.0)
                candidate = tuple(a + b for a, b in zip(comb, corr))
                new_alpha = step(candidate)
                if new_alpha < 1.01 * alpha:
                    break
                comb, alpha = candidate, new_alpha
            alpha = min(1.0, opts.step * alpha)
            if opts.verbose:
                print(f"{it:3d} pc {pcost:.8e} dc {dcost:.8e} gap {rel_gap:.1e} "
                      f"pres {pres:.1e} dres {dres:.1e} step {alpha:.3f} sigma {sigma:.1e} "
                      f"tau {tau:.2e} kappa {kappa:.2e}")
            if alpha < 1e-10:
                state.message = f"step length collapsed at iteration {it}"
                return state
            x = x + alpha * comb[0]
            s = s + alpha * comb[1]
            z = z + alpha * comb[2]
            tau += alpha * comb[3]
            kappa += alpha * comb[4]
    state.message = f"no convergence in {it} iterations (best merit {best_merit:.1e})"
    return state


def _interior_point(lifted: LiftedProgram, opts: IpmOptions) -> _IpmState:
    cones, G, GT, c, h = lifted.cones, lifted.G, lifted.GT, lifted.c, lifted.h
    e = cones.identity()
    h_norm, c_norm = max(1.0, np.linalg.norm(h)), max(1.0, np.linalg.norm(c))

    x, s, z = _starting_point(lifted, opts)
    state = _IpmState(x.copy(), s.copy(), z.copy())
    best_merit = np.inf
    separate = opts.separate_steps

    with np.errstate(all="raise"):
        for it in range(opts.max_iter + 1):
            r_p = G(x) + s - h
            r_d = GT(z) + c
            gap = float(s @ z)
            pcost, dcost = float(c @ x), float(-h @ z)
            pres = np.linalg.norm(r_p) / h_norm
            dres = np.linalg.norm(r_d) / c_norm
            rel_gap = gap / max(1.0, abs(pcost), abs(dcost))
            merit = max(pres, dres, rel_gap)
            if merit < best_merit:  # keep the best iterate seen, not merely the last one
                best_merit = merit
                state.x[:], state.s[:], state.z[:] = x, s, z
                state.iterations = it
                state.primal_residual, state.dual_residual, state.gap = pres, dres, rel_gap
            if pres <= opts.feastol and dres <= opts.feastol and rel_gap <= opts.reltol:
                state.converged = True
                state.message = "converged"
                return state
            if it == opts.max_iter or (it > 5 and merit > 1e3 * best_merit):
                break

            scaling = cones.nt_scaling(s, z)
            lam = scaling.lam
            mu = gap / cones.degree
            try:
                normal = NormalEquations(lifted, scaling)
            except NewtonSystemError as exc:  # keep the best iterate; the check decides
                state.message = f"{exc} at iteration {it}"
                return state

            # predictor (affine scaling) direction: r_c = -lambda o lambda, so q = -lambda
            dx, ds, dz, ds_t, dz_t = _newton(lifted, normal, scaling, -r_d, -r_p, -lam, opts)
            a_p, a_d = _step_lengths(cones, s, z, ds, dz, separate)
            sigma = float(np.clip(((s + a_p * ds) @ (z + a_d * dz)) / gap, 0.0, 1.0)) ** 3

            # combined corrector
            r_c = -cones.product(lam, lam) - cones.product(ds_t, dz_t) + sigma * mu * e
            q = cones.divide(lam, r_c)
            direction = _newton(lifted, normal, scaling, -r_d, -r_p, q, opts)
            direction = _centrality_correctors(
                lifted, normal, scaling, s, z, direction, sigma * mu, opts
            )
            dx, ds, dz = direction[:3]
            a_p, a_d = _step_lengths(cones, s, z, ds, dz, separate)
            a_p, a_d = min(1.0, opts.step * a_p), min(1.0, opts.step * a_d)
            if opts.verbose:
                print(f"{it:3d} pc {pcost:.8e} dc {dcost:.8e} gap {rel_gap:.1e} "
                      f"pres {pres:.1e} dres {dres:.1e} step {a_p:.3f} {a_d:.3f} "
                      f"sigma {sigma:.1e}")
            if min(a_p, a_d) < 1e-10:
                state.message = f"step length collapsed at iteration {it}"
                return state
            x += a_p * dx
            s += a_p * ds
            z += a_d * dz
            if cones.min_eig(s) <= 0 or cones.min_eig(z) <= 0:
                state.message = f"iterate left the cone at iteration {it}"
                return state
    state.message = f"no convergence in {it} iterations (best merit {best_merit:.1e})"
    return state


def _step_lengths(
    cones: ConeSet, s: np.ndarray, z: np.ndarray, ds: np.ndarray, dz: np.ndarray, separate: bool
) -> tuple[float, float]:
    """Largest primal and dual steps (at most 1) that stay in the cone; equal unless
    ``separate`` (the residual equations are linear, so primal and dual may move apart)."""
    a_p = min(1.0, cones.max_step(s, ds))
    a_d = min(1.0, cones.max_step(z, dz))
    if separate:
        return a_p, a_d
    a = min(a_p, a_d)
    return a, a


def _centrality_correctors(
    lifted: LiftedProgram,
    normal: NormalEquations,
    scaling: NTScaling,
    s: np.ndarray,
    z: np.ndarray,
    direction: tuple[np.ndarray, ...],
    target: float,
    opts: IpmOptions,
) -> tuple[np.ndarray, ...]:
    """Gondzio's multiple centrality correctors on the orthant rows.

    Look a little beyond the current step length, push the complementarity products that
    would leave ``[0.1, 10] * sigma mu`` back towards that band, and keep the corrected
    direction while it lengthens the step. The second-order cone row is left alone.
    """
    cones, lam = lifted.cones, scaling.lam
    k = cones.n_lp
    zero_x, zero_z = np.zeros(lifted.layout.size), np.zeros(cones.size)

    def step_of(d: tuple[np.ndarray, ...]) -> float:
        return min(1.0, cones.max_step(s, d[1]), cones.max_step(z, d[2]))

    alpha = step_of(direction)
    for _ in range(opts.correctors):
        if alpha >= 0.99:
            break
        trial = min(1.0, opts.gondzio_a * alpha + opts.gondzio_b)
        ds_t, dz_t = direction[3], direction[4]
        v = (lam[:k] + trial * ds_t[:k]) * (lam[:k] + trial * dz_t[:k])
        r = np.zeros(cones.size)
        band = opts.gondzio_band
        r[:k] = np.clip(v, target / band, band * target) - v
        np.maximum(r[:k], -opts.gondzio_cap * target, out=r[:k])
        correction = _newton(lifted, normal, scaling, zero_x, zero_z, cones.divide(lam, r), opts)
        candidate = tuple(a + b for a, b in zip(direction, correction))
        new_alpha = step_of(candidate)
        if new_alpha < 1.01 * alpha:
            break
        direction, alpha = candidate, new_alpha
    return direction


def _newton(
    lifted: LiftedProgram,
    normal: NormalEquations,
    scaling: NTScaling,
    bx: np.ndarray,
    bz: np.ndarray,
    q: np.ndarray,
    opts: IpmOptions,
) -> tuple[np.ndarray, ...]:
    """Solve ``G^T dz = bx, G dx + ds = bz, W dz + W^{-1} ds = q``.

    Eliminating ``ds = W q - W^2 dz`` gives ``dz = W^{-2} (G dx - bz) + W^{-1} q`` and the
    normal equations ``G^T W^{-2} G dx = bx + G^T (W^{-2} bz - W^{-1} q)``; the solve is
    refined against the exact operator while that pays, and ``ds = bz - G dx``.
    Returns ``dx, ds, dz`` and the scaled ``W^{-1} ds, W dz``.
    """
    offset = scaling.apply_inverse_squared(bz) - scaling.apply_inverse(q)
    rhs = bx + lifted.GT(offset)

    def dual_step(dx: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
        gdx = lifted.G(dx)
        dz = scaling.apply_inverse_squared(gdx) - offset
        resid = bx - lifted.GT(dz)
        return gdx, dz, resid, float(np.linalg.norm(resid))

    dx = normal.solve(rhs)
    gdx, dz, resid, size = dual_step(dx)
    target = opts.refine_tol * max(1.0, np.linalg.norm(rhs))
    for _ in range(opts.refine):  # refine while it pays
        if size <= target:
            break
        candidate = dx + normal.solve(resid)
        cand_gdx, cand_dz, cand_resid, cand_size = dual_step(candidate)
        if cand_size >= 0.5 * size:
            if cand_size < size:
                dx, gdx, dz = candidate, cand_gdx, cand_dz
            break
        dx, gdx, dz, resid, size = candidate, cand_gdx, cand_dz, cand_resid, cand_size
    # ds from the primal equation itself: going through W^2 would put the scaling's
    # rounding (large near the cone's boundary) into the primal residual
    ds = bz - gdx
    dz_t = scaling.apply(dz)
    return dx, ds, dz, q - dz_t, dz_t


def _refined_solve(
    normal: NormalEquations, scaling: NTScaling, lifted: LiftedProgram, r: np.ndarray, n: int
) -> np.ndarray:
    """Solve ``G^T W^{-2} G x = r`` with ``n`` refinement steps against the exact operator."""
    x = normal.solve(r)
    for _ in range(n):
        x += normal.solve(r - lifted.GT(scaling.apply_inverse_squared(lifted.G(x))))
    return x


def max_violation(program: ScnnProgram, nu: np.ndarray, omega: np.ndarray, b: float) -> float:
    """Largest violation of any constraint of ``program`` at the weights (0 when feasible)."""
    sign = np.where(program.patterns, 1.0, -1.0)
    worst = [0.0, -np.min(sign * (program.X @ nu.T)), -np.min(sign * (program.X @ omega.T))]
    y_hat = predictions(program, nu, omega, b)
    if program.lower is not None:
        worst.append(float(np.max(program.lower - y_hat)))
    if program.upper is not None:
        worst.append(float(np.max(y_hat - program.upper)))
    if program.ramp is not None:
        worst.append(float(np.max(np.abs(np.diff(y_hat)) - program.ramp)))
    return float(max(worst))


def _checked_solution(
    program: ScnnProgram,
    lifted: LiftedProgram,
    state: _IpmState,
    opts: IpmOptions,
    started: float,
) -> ScnnSolution:
    """Turn the final iterate into weights and check them independently of the solver."""
    nu, omega, b = lifted.weights(state.x)
    objective = objective_value(program, nu, omega, b)
    dual_bound = float(-lifted.h @ state.z) / program.n_samples
    rel_gap = (objective - dual_bound) / max(abs(objective), 1e-12)
    violation = max_violation(program, nu, omega, b)
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
