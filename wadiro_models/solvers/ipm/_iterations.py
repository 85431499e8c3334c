"""The interior-point iterations on the cone program of :mod:`._lifted`.

Two variants share the Newton machinery of :mod:`._newton`: the homogeneous self-dual
embedding (variables ``x, s, z, tau, kappa``; Clarabel's and CVXOPT ``conelp``'s approach) and
an infeasible-start path-following method with separate primal and dual step lengths (CVXOPT
``coneqp``'s approach). Both use Nesterov-Todd scaling, Mehrotra's predictor-corrector and
Gondzio's centrality correctors on the orthant rows. The embedding is the default on the l1
program (an LP); on the l2 program the single large second-order cone slows it down, so the
infeasible-start variant is the default there.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.linalg.blas import daxpy

from ._cones import ConeSet, NTScaling
from ._lifted import LiftedProgram
from ._newton import NewtonSystemError, NormalEquations, newton_step, refined_solve
from ._options import IpmOptions


@dataclass
class IpmState:
    x: np.ndarray
    s: np.ndarray
    z: np.ndarray
    iterations: int = 0
    primal_residual: float = np.inf
    dual_residual: float = np.inf
    gap: float = np.inf
    message: str = ""
    best_merit: float = np.inf

    def observe(
        self, it: int,
        point: tuple[np.ndarray, np.ndarray, np.ndarray] | Callable[..., None],
        pres: float, dres: float, rel_gap: float, opts: IpmOptions,
    ) -> bool:
        """Record iterate ``it`` if it is the best seen (not merely the last one); True when
        the iterations should stop: converged, or residuals grown far past the best iterate.
        ``point`` is ``(x, s, z)`` or a function writing them into three given arrays (only
        called when the iterate is kept)."""
        merit = max(pres, dres, rel_gap)
        if merit < self.best_merit:
            self.best_merit = merit
            if callable(point):  # writes the point into the arrays it is given
                point(self.x, self.s, self.z)
            else:
                self.x[:], self.s[:], self.z[:] = point
            self.iterations = it
            self.primal_residual, self.dual_residual, self.gap = pres, dres, rel_gap
        if pres <= opts.feastol and dres <= opts.feastol and rel_gap <= opts.reltol:
            self.message = "converged"
            return True
        if it > 5 and merit > 1e3 * self.best_merit:
            self.message = (f"stopped at iteration {it}: residuals grew far past the best "
                            f"iterate (merit {self.best_merit:.1e} at {self.iterations})")
            return True
        return False

    def stop(self, message: str) -> IpmState:
        """The best iterate, with why the iterations stopped."""
        self.message = message
        return self


def starting_point(
    lifted: LiftedProgram, opts: IpmOptions
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Least-squares points ``min ||s|| s.t. Gx + s = h`` and ``min ||z|| s.t.
    G^T z + c = 0``, shifted into the cone's interior."""
    cones, G, GT = lifted.cones, lifted.G, lifted.GT
    e = cones.identity()
    ident = NTScaling.identity(cones)
    normal = NormalEquations(lifted, ident)
    x = refined_solve(normal, ident, lifted, GT(lifted.h), opts.refine)
    s = lifted.h - G(x)
    z = G(refined_solve(normal, ident, lifted, -lifted.c, opts.refine))
    for v in (s, z):
        shortfall = -cones.min_eig(v)
        if shortfall >= -1e-8 * max(1.0, np.linalg.norm(v)):
            v += (1.0 + max(shortfall, 0.0)) * e
    return x, s, z


def homogeneous(lifted: LiftedProgram, opts: IpmOptions) -> IpmState:
    """Homogeneous self-dual variant: (x, s, z, tau, kappa) with G^T z + c tau = 0,
    G x + s = h tau, c^T x + h^T z + kappa = 0; the answer is x / tau."""
    cones, G, GT, c, h = lifted.cones, lifted.G, lifted.GT, lifted.c, lifted.h
    h_norm, c_norm = max(1.0, np.linalg.norm(h)), max(1.0, np.linalg.norm(c))
    x, s, z = starting_point(lifted, opts)
    tau, kappa = 1.0, 1.0
    state = IpmState(x.copy(), s.copy(), z.copy())
    degree = cones.degree + 1
    with np.errstate(all="raise"):
        for it in range(opts.max_iter + 1):
            r_x = GT(z)
            r_x += c * tau
            r_z = G(x)
            r_z += s
            daxpy(h, r_z, a=-tau)  # r_z -= tau h, in place
            r_t = kappa + c @ x + h @ z
            pcost, dcost = float(c @ x) / tau, float(-h @ z) / tau
            pres = np.linalg.norm(r_z) / tau / h_norm
            dres = np.linalg.norm(r_x) / tau / c_norm
            gap = float(s @ z) / tau**2
            rel_gap = gap / max(1.0, abs(pcost), abs(dcost))
            merit = max(pres, dres, rel_gap)
            def scaled(x_out: np.ndarray, s_out: np.ndarray, z_out: np.ndarray) -> None:
                np.divide(x, tau, out=x_out)
                np.divide(s, tau, out=s_out)
                np.divide(z, tau, out=z_out)

            if state.observe(it, scaled, pres, dres, rel_gap, opts):
                return state
            if it == opts.max_iter:
                break
            mu = (float(s @ z) + tau * kappa) / degree
            scaling = cones.nt_scaling(s, z)
            lam = scaling.lam
            try:
                normal = NormalEquations(lifted, scaling)
            except NewtonSystemError as exc:
                return state.stop(f"{exc} at iteration {it}")
            normal.refine = merit < opts.refine_below
            # the tau column: one extra solve per factorisation
            dx2, ds2, dz2, ds2_t, dz2_t = newton_step(lifted, normal, scaling, -c, h, None, opts)
            if normal.refine:  # (unrefined, newton_step's W^{-1} ds is this already)
                ds2_t = scaling.apply_inverse(ds2)
            denom = c @ dx2 + h @ dz2 - kappa / tau

            def direction(eta: float, q: np.ndarray, r_tk: float) -> tuple:
                bx, bz = (-eta * r_x, -eta * r_z) if eta else (None, None)
                dx1, ds1, dz1, ds1_t, dz1_t = newton_step(lifted, normal, scaling, bx, bz, q, opts)
                dtau = (-eta * r_t - c @ dx1 - h @ dz1 - r_tk / tau) / denom
                dkappa = (r_tk - kappa * dtau) / tau
                for part, column in ((dx1, dx2), (ds1, ds2), (dz1, dz2), (ds1_t, ds2_t),
                                     (dz1_t, dz2_t)):
                    daxpy(column, part, a=dtau)  # part += dtau * column, in place
                return dx1, ds1, dz1, dtau, dkappa, ds1_t, dz1_t

            def step(d: tuple) -> float:
                a = min(1.0, cones.max_step(s, d[1], scaling.s_inv),
                        cones.max_step(z, d[2], scaling.z_inv))
                if d[3] < 0:
                    a = min(a, -tau / d[3])
                if d[4] < 0:
                    a = min(a, -kappa / d[4])
                return a

            aff = direction(1.0, -lam, -tau * kappa)
            a_aff = step(aff)
            sigma = (1.0 - a_aff) ** 3
            r_c = _combined_rhs(cones, lam, aff[5], aff[6], sigma * mu)
            r_tk = -tau * kappa - aff[3] * aff[4] + sigma * mu
            comb = direction(1.0 - sigma, cones.divide(lam, r_c), r_tk)
            comb, alpha = centrality_correctors(
                cones, lam, comb, step, lambda q: direction(0.0, q, 0.0), sigma * mu, opts
            )
            alpha = min(1.0, opts.step * alpha)
            if opts.verbose:
                print(f"{it:3d} pc {pcost:.8e} dc {dcost:.8e} gap {rel_gap:.1e} "
                      f"pres {pres:.1e} dres {dres:.1e} step {alpha:.3f} sigma {sigma:.1e} "
                      f"tau {tau:.2e} kappa {kappa:.2e}")
            if alpha < 1e-10:
                return state.stop(f"step length collapsed at iteration {it}")
            daxpy(comb[0], x, a=alpha)  # x += alpha dx, in place
            daxpy(comb[1], s, a=alpha)
            daxpy(comb[2], z, a=alpha)
            tau += alpha * comb[3]
            kappa += alpha * comb[4]
    return state.stop(f"no convergence in {it} iterations (best merit {state.best_merit:.1e})")


def infeasible_start(lifted: LiftedProgram, opts: IpmOptions) -> IpmState:
    """Infeasible-start path following: the residuals ``G^T z + c`` and ``G x + s - h`` shrink
    with the steps; primal and dual step lengths may differ."""
    cones, G, GT, c, h = lifted.cones, lifted.G, lifted.GT, lifted.c, lifted.h
    h_norm, c_norm = max(1.0, np.linalg.norm(h)), max(1.0, np.linalg.norm(c))

    x, s, z = starting_point(lifted, opts)
    state = IpmState(x.copy(), s.copy(), z.copy())
    separate = opts.separate_steps

    with np.errstate(all="raise"):
        for it in range(opts.max_iter + 1):
            r_p = G(x)
            r_p += s
            r_p -= h
            r_d = GT(z)
            r_d += c
            gap = float(s @ z)
            pcost, dcost = float(c @ x), float(-h @ z)
            pres = np.linalg.norm(r_p) / h_norm
            dres = np.linalg.norm(r_d) / c_norm
            rel_gap = gap / max(1.0, abs(pcost), abs(dcost))
            merit = max(pres, dres, rel_gap)
            if state.observe(it, (x, s, z), pres, dres, rel_gap, opts):
                return state
            if it == opts.max_iter:
                break

            scaling = cones.nt_scaling(s, z)
            lam = scaling.lam
            mu = gap / cones.degree
            try:
                normal = NormalEquations(lifted, scaling)
            except NewtonSystemError as exc:  # keep the best iterate; the check decides
                return state.stop(f"{exc} at iteration {it}")
            normal.refine = merit < opts.refine_below
            neg_r_p = np.negative(r_p, out=r_p)  # r_p itself is not needed any more
            neg_r_d = np.negative(r_d, out=r_d)

            # predictor (affine scaling) direction: r_c = -lambda o lambda, so q = -lambda
            dx, ds, dz, ds_t, dz_t = newton_step(lifted, normal, scaling, neg_r_d, neg_r_p,
                                                 np.negative(lam), opts)
            a_p, a_d = _step_lengths(cones, s, z, ds, dz, separate, scaling)
            sigma = float(np.clip(((s + a_p * ds) @ (z + a_d * dz)) / gap, 0.0, 1.0)) ** 3

            # combined corrector
            r_c = _combined_rhs(cones, lam, ds_t, dz_t, sigma * mu)
            q = cones.divide(lam, r_c)
            direction = newton_step(lifted, normal, scaling, neg_r_d, neg_r_p, q, opts)
            lengths: dict[int, tuple[float, float]] = {}  # by id(ds) of a kept direction

            def step_of(d: tuple) -> float:
                a = _step_lengths(cones, s, z, d[1], d[2], separate, scaling)
                lengths[id(d[1])] = a
                return min(a)

            direction, _ = centrality_correctors(
                cones,
                lam,
                direction,
                step_of,
                lambda q: newton_step(lifted, normal, scaling, None, None, q, opts),
                sigma * mu,
                opts,
            )
            dx, ds, dz = direction[:3]
            a_p, a_d = lengths[id(ds)]  # the correctors measured the direction they kept
            a_p, a_d = min(1.0, opts.step * a_p), min(1.0, opts.step * a_d)
            if opts.verbose:
                print(f"{it:3d} pc {pcost:.8e} dc {dcost:.8e} gap {rel_gap:.1e} "
                      f"pres {pres:.1e} dres {dres:.1e} step {a_p:.3f} {a_d:.3f} "
                      f"sigma {sigma:.1e}")
            if min(a_p, a_d) < 1e-10:
                return state.stop(f"step length collapsed at iteration {it}")
            daxpy(dx, x, a=a_p)
            daxpy(ds, s, a=a_p)
            daxpy(dz, z, a=a_d)
            if cones.min_eig(s) <= 0 or cones.min_eig(z) <= 0:
                return state.stop(f"iterate left the cone at iteration {it}")
    return state.stop(f"no convergence in {it} iterations (best merit {state.best_merit:.1e})")


def _combined_rhs(
    cones: ConeSet, lam: np.ndarray, ds_t: np.ndarray, dz_t: np.ndarray, target: float
) -> np.ndarray:
    """``-lam o lam - ds_t o dz_t + target e``, the complementarity right-hand side of the
    combined (Mehrotra) direction."""
    r = cones.product(ds_t, dz_t)
    r += cones.product(lam, lam)
    np.negative(r, out=r)
    k = cones.n_lp
    r[:k] += target
    if cones.n_soc:
        r[k] += target
    return r


def _step_lengths(
    cones: ConeSet, s: np.ndarray, z: np.ndarray, ds: np.ndarray, dz: np.ndarray, separate: bool,
    scaling: NTScaling,
) -> tuple[float, float]:
    """Largest primal and dual steps (at most 1) that stay in the cone; equal unless
    ``separate`` (the residual equations are linear, so primal and dual may move apart).
    ``scaling`` is that of ``(s, z)`` (for their reciprocals)."""
    a_p = min(1.0, cones.max_step(s, ds, scaling.s_inv))
    a_d = min(1.0, cones.max_step(z, dz, scaling.z_inv))
    if separate:
        return a_p, a_d
    a = min(a_p, a_d)
    return a, a


def centrality_correctors(
    cones: ConeSet,
    lam: np.ndarray,
    direction: tuple,
    step_of: Callable[[tuple], float],
    solve: Callable[[np.ndarray], tuple],
    target: float,
    opts: IpmOptions,
) -> tuple[tuple, float]:
    """Gondzio's multiple centrality correctors on the orthant rows.

    Look a little beyond the current step length, push the complementarity products that
    would leave ``[1/band, band] * sigma mu`` back towards that band (``solve`` maps the
    complementarity right-hand side to a correction with zero residuals), and keep the
    corrected direction while it lengthens the step. The second-order cone is left alone.
    ``direction`` ends with the scaled ``W^{-1} ds, W dz``; in the direction returned those
    two are ``None``.
    """
    k, band = cones.n_lp, opts.gondzio_band
    alpha = step_of(direction)
    pending = None  # the accepted correction's scaled parts, added only if needed
    for _ in range(opts.correctors):
        if alpha >= 0.99:
            break
        trial = min(1.0, opts.gondzio_a * alpha + opts.gondzio_b)
        ds_t, dz_t = direction[-2], direction[-1]
        if pending is not None:
            ds_t = ds_t + pending[0]
            dz_t = dz_t + pending[1]
            direction = direction[:-2] + (ds_t, dz_t)
        v = np.multiply(ds_t[:k], trial)  # (lam + trial ds_t) o (lam + trial dz_t)
        v += lam[:k]
        other = np.multiply(dz_t[:k], trial)
        other += lam[:k]
        v *= other
        r = np.empty(cones.size)
        r[k:] = 0.0
        rk = np.clip(v, target / band, band * target, out=r[:k])
        rk -= v
        np.maximum(rk, -band * target, out=rk)
        correction = solve(cones.divide(lam, r))
        candidate = tuple(a + b for a, b in zip(direction[:-2], correction[:-2], strict=True))
        new_alpha = step_of(candidate)
        if new_alpha < 1.01 * alpha:
            break
        direction, alpha = candidate + direction[-2:], new_alpha
        pending = correction[-2:]
    # the scaled parts of the result are not brought up to date: callers do not read them
    return direction[:-2] + (None, None), alpha
