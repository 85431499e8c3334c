"""The interior-point Newton system ``H dx = r`` with ``H = G^T W^{-2} G`` (rows of ``G`` in
:mod:`._lifted`), solved through the program's structure with one dense Cholesky of size
``P (d+1) + 2``, and the Newton step built on it.

Reduction, in order (``x = (nu, omega, b, t, tau)``, weights ``w = z / s`` per orthant row):

1. ``t`` appears only in the two residual rows of each sample, so its block of ``H`` is
   diagonal: eliminating it leaves the per-sample weight ``m = 4 w_hi w_lo / (w_hi + w_lo)``
   on ``y_hat = X_hat u + b``. Bounds add their weights to ``m``; ramps add
   ``Delta^T w_r Delta``. The output part of ``H`` is ``K = [X_hat 1]^T M [X_hat 1]``.
   Without ramps its gate block ``ij`` is ``X^T diag(m D_i D_j) X``: one product of the
   fixed ``D_i D_j`` indicators (``i <= j``) with the distinct entries of ``m_j x_j x_j^T``,
   cheaper than forming ``X_hat^T M X_hat``. Bound points have no ``t``: the weights of
   their bound rows are their ``m_B`` directly, and they add ``[X_hat_B 1]^T M_B
   [X_hat_B 1]`` to ``K``, i.e. ``M`` more rows of the same product (their pair masks and
   distinct entries are appended to the samples'), so ``H`` keeps its size and structure.
2. Change variables ``u = nu - omega``, ``v = nu + omega`` (``nu = (u+v)/2``,
   ``omega = (v-u)/2``). ``K`` only involves ``u``; the gate cones give per-gate blocks
   ``X^T diag(w_nu,i +- w_om,i) X / 4``, so the ``v`` block of ``H`` is block diagonal
   (``P`` square blocks ``B_i`` of size ``d+1``) and ``v`` is eliminated gate by gate.
3. What is left is dense in ``k = (u, b, tau)``. The norm's orthant rows only touch the
   diagonal and the ``tau`` row. For l2 the second-order cone adds
   ``beta^{-2} (2 a a^T - J)``: its diagonal goes with everything else and the rank-one
   ``2 beta^{-2} a a^T`` is carried by a border variable ``zeta = rho a^T x`` that is
   eliminated last (a positive rank-one update of the reduced matrix, so the final matrix
   stays positive definite).

The reduced matrix is symmetrically scaled to unit diagonal and slightly regularised before
its Cholesky, so its solves are approximate: :func:`newton_step` and :func:`refined_solve`
refine them against the exact structured operator.
"""

from __future__ import annotations

import numpy as np
from scipy.linalg.lapack import dpotrf, dpotrs

from ._cones import NTScaling
from ._lifted import LiftedProgram
from ._options import IpmOptions


class NewtonSystemError(ArithmeticError):
    """The reduced Newton matrix could not be factorised."""


class NormalEquations:
    """``H = G^T W^{-2} G`` for one scaling, factorised once and solved many times."""

    def __init__(
        self, lifted: LiftedProgram, scaling: NTScaling, regularisation: float = 1e-13
    ) -> None:
        self.lifted = lifted
        self.refine = True  # whether callers refine solves against the exact operator
        lay = lifted.layout
        P, d1 = lay.n_gates, lay.n_cols
        w = scaling.lp_weights
        blk = lifted.block

        # 1. residual slacks t, bounds and ramps -> weights M on y_hat
        w_hi, w_lo = w[blk("res_hi")], w[blk("res_lo")]
        self.t_diag = w_hi + w_lo
        self.t_cross = w_lo - w_hi
        m = 4.0 * w_hi * w_lo / self.t_diag
        m[lifted.lower_idx] += w[blk("lower")]
        m[lifted.upper_idx] += w[blk("upper")]
        w_ramp = w[blk("ramp_hi")] + w[blk("ramp_lo")]
        m_B = None
        if lifted.n_bound:  # the bound points' rows: weights on y_hat_B
            m_B = np.zeros(lifted.n_bound)
            m_B[lifted.bound_lower_idx] += w[blk("bound_lo")]
            m_B[lifted.bound_upper_idx] += w[blk("bound_up")]
        nk = lay.n_lifted + lay.n_bias + 1
        nl = lay.n_lifted
        S = np.zeros((nk, nk))
        S_gates = S[:nl, :nl].reshape(P, d1, P, d1)  # a view: S_gates[i, :, j, :] is block ij
        _weighted_gram(lifted, m, w_ramp, S_gates, m_B)
        K_ub = lifted.output_adjoint(m)
        K_bb = m.sum()
        if m_B is not None:
            K_ub += lifted.bound_output_adjoint(m_B)
            K_bb += m_B.sum()

        # 2. per-gate blocks of the two cones
        w_cones = lifted.cone_rows(w)
        w_nu, w_om = w_cones[:, 0, :], w_cones[:, 1, :]
        sum_dif = np.concatenate([w_nu + w_om, w_nu - w_om], axis=1)
        grams = (sum_dif.T @ lifted.XX_sym)[:, lifted.sym_index].reshape(2, P, d1, d1)
        gram_sum, gram_dif = grams[0], grams[1]

        # 3. the dual-norm rows
        n_beta = lay.beta.stop
        diag_beta, cross_beta = np.zeros(n_beta), np.zeros(n_beta)  # H[e, e], H[e, tau]
        h_tt = 0.0
        self.rho = 0.0
        a_beta, a_tau = np.zeros(n_beta), 0.0
        wh, wl = w[blk("norm_hi")], w[blk("norm_lo")]
        diag_beta += wh + wl
        cross_beta += wl - wh
        h_tt += diag_beta.sum()
        if lifted.l1:
            h_tt += w[blk("norm_one")][0]
        else:
            inv_b2 = scaling.beta**-2
            diag_beta += inv_b2
            h_tt -= inv_b2
            a = scaling.soc_rank_one
            a_tau, a_beta = a[0], a[1:-1]
            self.rho = 2.0 * inv_b2

        d_nu, d_om = diag_beta[lay.nu].reshape(P, d1), diag_beta[lay.omega].reshape(P, d1)
        B = gram_sum / 4.0
        B[:, np.arange(d1), np.arange(d1)] += (d_nu + d_om) / 4.0
        H_uv = gram_dif / 4.0
        H_uv[:, np.arange(d1), np.arange(d1)] += (d_nu - d_om) / 4.0
        e_nu, e_om = cross_beta[lay.nu].reshape(P, d1), cross_beta[lay.omega].reshape(P, d1)
        h_u_tau = (e_nu - e_om).ravel() / 2.0
        self.h_v_tau = (e_nu + e_om) / 2.0
        a_nu, a_om = a_beta[lay.nu].reshape(P, d1), a_beta[lay.omega].reshape(P, d1)
        g_u = (a_nu - a_om).ravel() / 2.0
        self.g_v = (a_nu + a_om) / 2.0

        # eliminate v gate by gate: Z_i = B_i^{-1} [H_vu,i  h_v_tau,i  g_v,i]
        self.H_uv = H_uv
        rhs = np.concatenate([H_uv, self.h_v_tau[:, :, None], self.g_v[:, :, None]], axis=2)
        self.blocks = _GateBlocks(B)
        Z = self.blocks.solve(rhs)
        self.Z = Z
        self.n_kept = nk
        gates = np.arange(P)
        S_gates[gates, :, gates, :] += B - H_uv @ Z[:, :, :d1]
        col_tau = h_u_tau - np.einsum("ikl,il->ik", H_uv, Z[:, :, d1]).ravel()
        S[:nl, -1] = col_tau
        S[-1, :nl] = col_tau
        S[-1, -1] = h_tt - np.einsum("ik,ik->", self.h_v_tau, Z[:, :, d1])
        if lay.n_bias:
            S[:nl, nl] = K_ub
            S[nl, :nl] = K_ub
            S[nl, nl] = K_bb + diag_beta[lay.b][0]
            S[nl, -1] = S[-1, nl] = cross_beta[lay.b][0]
        if self.rho:
            g_hat = np.empty(nk)
            g_hat[:nl] = g_u - np.einsum("ikl,il->ik", H_uv, Z[:, :, d1 + 1]).ravel()
            if lay.n_bias:
                g_hat[nl] = a_beta[lay.b][0]
            g_hat[-1] = a_tau - np.einsum("ik,ik->", self.h_v_tau, Z[:, :, d1 + 1])
            self.border = 1.0 / self.rho + np.einsum("ik,ik->", self.g_v, Z[:, :, d1 + 1])
            self.g_hat = g_hat
            S += np.outer(g_hat, g_hat) / self.border
        self._factorise(S, regularisation)

    def _factorise(self, S: np.ndarray, regularisation: float) -> None:
        diag = np.diag(S).copy()
        if not np.all(np.isfinite(S)) or np.any(diag <= 0):
            raise NewtonSystemError("reduced Newton matrix has a non-positive diagonal")
        self.col_scale = 1.0 / np.sqrt(diag)
        S *= self.col_scale[:, None]
        S *= self.col_scale[None, :]
        idx = np.arange(S.shape[0])
        reg = regularisation
        for _ in range(6):
            S[idx, idx] = 1.0 + reg
            factor, info = dpotrf(S, lower=0, clean=0)  # upper Cholesky factor (LAPACK)
            if info == 0:
                self.factor = factor
                return
            reg = max(reg * 100.0, 1e-12)
        raise NewtonSystemError("reduced Newton matrix is not positive definite")

    def solve(self, r: np.ndarray) -> np.ndarray:
        """Solve ``H dx = r`` (approximately; refine against the exact operator)."""
        lifted = self.lifted
        lay = lifted.layout
        P, d1, nl = lay.n_gates, lay.n_cols, lay.n_lifted
        r_t = r[lay.t]
        y_hat_adj = -(self.t_cross / self.t_diag) * r_t
        lifted_q = lifted.output_adjoint(y_hat_adj)
        r_nu, r_om = r[lay.nu], r[lay.omega]
        r_u = (r_nu - r_om) / 2.0 + lifted_q
        r_v = ((r_nu + r_om) / 2.0).reshape(P, d1)
        pv = self.blocks.solve(r_v)
        rk = np.empty(self.n_kept)
        rk[:nl] = r_u - np.einsum("ikl,il->ik", self.H_uv, pv).ravel()
        if lay.n_bias:
            rk[nl] = r[lay.b][0] + y_hat_adj.sum()
        rk[-1] = r[lay.tau] - np.einsum("ik,ik->", self.h_v_tau, pv)
        if self.rho:
            gp = np.einsum("ik,ik->", self.g_v, pv)
            rk -= self.g_hat * (gp / self.border)
        k, info = dpotrs(self.factor, self.col_scale * rk, lower=0)
        if info != 0:
            raise NewtonSystemError(f"Cholesky solve failed (LAPACK info {info})")
        k *= self.col_scale
        u = k[:nl].reshape(P, d1)
        Z = self.Z
        v = pv - np.einsum("ikl,il->ik", Z[:, :, :d1], u) - Z[:, :, d1] * k[-1]
        if self.rho:
            zeta = (self.g_hat @ k + gp) / self.border
            v -= Z[:, :, d1 + 1] * zeta
        dx = np.empty(lay.size)
        u, v = u.ravel(), v.ravel()
        dx[lay.nu] = (u + v) / 2.0
        dx[lay.omega] = (v - u) / 2.0
        dx[lay.b] = k[nl : nl + lay.n_bias]
        dx[lay.tau] = k[-1]
        y_hat = lifted.output(u, dx[lay.b])
        dx[lay.t] = (r_t - self.t_cross * y_hat) / self.t_diag
        return dx


class _GateBlocks:
    """The symmetric positive definite gate blocks ``B_i``, ready for batched solves.

    Each block is scaled to unit diagonal and nudged by ``regularisation``: near the optimum
    an inactive gate's block can be numerically singular, and the caller's iterative
    refinement absorbs the perturbation.
    """

    def __init__(self, B: np.ndarray, regularisation: float = 1e-14) -> None:
        diag = np.einsum("ikk->ik", B)
        if not np.all(np.isfinite(B)) or np.any(diag <= 0):
            raise NewtonSystemError("a gate block of the Newton matrix has a non-positive diagonal")
        self.scale = 1.0 / np.sqrt(diag)
        self.Bs = B * self.scale[:, :, None] * self.scale[:, None, :]
        idx = np.arange(B.shape[1])
        self.Bs[:, idx, idx] += regularisation

    def solve(self, rhs: np.ndarray) -> np.ndarray:
        """``B_i^{-1} rhs_i`` for a (P, d1, k) or (P, d1) right-hand side."""
        vector = rhs.ndim == 2
        r = rhs[:, :, None] if vector else rhs
        try:
            out = np.linalg.solve(self.Bs, r * self.scale[:, :, None])
        except np.linalg.LinAlgError as exc:
            raise NewtonSystemError(f"singular gate block: {exc}") from exc
        out *= self.scale[:, :, None]
        return out[:, :, 0] if vector else out


def _weighted_gram(
    lifted: LiftedProgram, m: np.ndarray, w_ramp: np.ndarray, out: np.ndarray,
    m_B: np.ndarray | None = None,
) -> None:
    """Write ``X_hat^T (diag(m) + Delta^T diag(w_ramp) Delta) X_hat + X_hat_B^T diag(m_B)
    X_hat_B`` into ``out`` (``(P, d1, P, d1)``, block ``ij`` at ``out[i, :, j, :]``); at
    least the blocks ``i <= j`` are written, which is all the upper-triangle Cholesky reads.
    ``m_B`` (the bound points' weights) is ``None`` when there are no bound points."""
    P, d1 = lifted.layout.n_gates, lifted.layout.n_cols
    if lifted.pair_masks is not None:  # no ramps: block ij = X^T diag(m D_i D_j) X
        weights = m if m_B is None else np.concatenate([m, m_B])
        pair_grams = lifted.pair_masks @ (lifted.XX_output * weights[:, None])
        iu, ju = lifted.gate_pairs
        out[iu, :, ju, :] = pair_grams[:, lifted.sym_index].reshape(-1, d1, d1)
        return
    X_hat = lifted.X_hat
    k = lifted.ramp_idx
    steps = (X_hat[k + 1] - X_hat[k]) * w_ramp[:, None]
    weighted = X_hat * m[:, None]
    weighted[k + 1] += steps
    weighted[k] -= steps
    gram = X_hat.T @ weighted
    if m_B is not None:
        X_hat_B = lifted.bound_X_hat
        gram += X_hat_B.T @ (X_hat_B * m_B[:, None])
    out[...] = gram.reshape(P, d1, P, d1)


def newton_step(
    lifted: LiftedProgram,
    normal: NormalEquations,
    scaling: NTScaling,
    bx: np.ndarray | None,
    bz: np.ndarray | None,
    q: np.ndarray | None,
    opts: IpmOptions,
) -> tuple[np.ndarray, ...]:
    """Solve ``G^T dz = bx, G dx + ds = bz, W dz + W^{-1} ds = q`` (``None``: zero).

    Eliminating ``ds = W q - W^2 dz`` gives ``dz = W^{-2} (G dx - bz) + W^{-1} q`` and the
    normal equations ``G^T W^{-2} G dx = bx + G^T (W^{-2} bz - W^{-1} q)``; the solve is
    refined against the exact operator while that pays, and ``ds = bz - G dx``.
    Returns ``dx, ds, dz`` and the scaled ``W^{-1} ds, W dz``.
    """
    # with offset = W^{-2} bz - W^{-1} q, kept negated (one pass fewer)
    if q is not None:
        neg_offset = scaling.apply_inverse(q)
        if bz is not None:
            neg_offset -= scaling.apply_inverse_squared(bz)
    else:
        neg_offset = np.negative(scaling.apply_inverse_squared(bz))
    rhs = np.negative(lifted.GT(neg_offset))
    if bx is not None:
        rhs += bx

    def dual_step(dx: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
        gdx = lifted.G(dx)
        dz = scaling.apply_inverse_squared(gdx)
        dz += neg_offset
        resid = np.negative(lifted.GT(dz))
        if bx is not None:
            resid += bx
        return gdx, dz, resid, float(np.linalg.norm(resid))

    dx = normal.solve(rhs)
    if not normal.refine:  # far from the optimum an unrefined direction is good enough
        gdx = lifted.G(dx)
        dz = scaling.apply_inverse_squared(gdx)
        dz += neg_offset
    else:
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
    ds = np.negative(gdx, out=gdx) if bz is None else np.subtract(bz, gdx, out=gdx)
    dz_t = scaling.apply(dz)
    ds_t = np.negative(dz_t) if q is None else q - dz_t
    return dx, ds, dz, ds_t, dz_t


def refined_solve(
    normal: NormalEquations, scaling: NTScaling, lifted: LiftedProgram, r: np.ndarray,
    steps: int,
) -> np.ndarray:
    """Solve ``G^T W^{-2} G x = r`` with ``steps`` refinement steps against the exact
    operator."""
    x = normal.solve(r)
    for _ in range(steps):
        x += normal.solve(r - lifted.GT(scaling.apply_inverse_squared(lifted.G(x))))
    return x
