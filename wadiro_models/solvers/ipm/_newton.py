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

Cost at the pipeline's sizes (N ~ 2,000, P <= 20) is numpy calls and passes over the
``~N (2P + 2)`` rows as much as flops, so: the pair and cone Gram blocks come from one matrix
product (precomputed scatter indices put them into ``S``); ``v``'s gate blocks are solved
through their Cholesky factors laid out as one block-diagonal triangular matrix (two BLAS
``trsv`` calls per solve; ``Z = B^{-1} [H h g]`` by batched LU, as the Schur complement
``B - H Z`` cancels heavily near the optimum); a solve returns ``G dx`` from the product that
gives ``dx``'s ``t``; and an unrefined Newton step lets ``G^T`` carry the output shift of the
``t`` elimination inside its own product (``folded``) and reads ``W^{-1} ds + W dz = q``
from ``ds`` without forming ``W^{-2} bz - W^{-1} q`` twice.
"""

from __future__ import annotations

import numpy as np
from scipy.linalg.blas import dsyr, dtrsv
from scipy.linalg.lapack import dpotrf

from ._cones import NTScaling
from ._lifted import LiftedProgram
from ._options import IpmOptions


class NewtonSystemError(ArithmeticError):
    """The reduced Newton matrix could not be factorised."""


class _Workspace:
    """Buffers and index maps of one :class:`LiftedProgram` that every Newton matrix reuses:
    the rows of the one product that forms the weighted Gram blocks (gate pairs, then the
    cones' ``w_nu + w_om`` and ``w_nu - w_om``), and where its entries go in ``S``."""

    def __init__(self, lifted: LiftedProgram) -> None:
        lay = lifted.layout
        P, d1, N = lay.n_gates, lay.n_cols, lay.n_samples
        nl = lay.n_lifted
        self.nk = nk = nl + lay.n_bias + 1
        n_sym = lifted.XX_sym.shape[1]
        self.pairs = 0 if lifted.pair_masks is None else lifted.pair_masks.shape[0]
        n_out = lifted.XX_output.shape[0] if self.pairs else N
        # the bound points' columns of the cone rows stay zero
        self.rows = np.zeros((self.pairs + 2 * P, n_out))
        self.product = np.empty((self.pairs + 2 * P, n_sym))
        kk, ll = np.divmod(np.arange(d1 * d1), d1)
        if self.pairs:
            iu, ju = lifted.gate_pairs
            row = (iu[:, None] * d1 + kk[None, :]) * nk
            self.pair_dst = (row + ju[:, None] * d1 + ll[None, :]).ravel()
            self.pair_src = (np.arange(self.pairs)[:, None] * n_sym
                             + lifted.sym_index[None, :]).ravel()
        g = np.arange(P)
        self.diag_dst = ((g[:, None] * d1 + kk[None, :]) * nk
                         + g[:, None] * d1 + ll[None, :]).ravel()
        self.diag_idx = np.arange(nk) * (nk + 1)
        # the same blocks in an nl x nl matrix (the gate blocks' block-diagonal factor)
        self.gate_dst = ((g[:, None] * d1 + kk[None, :]) * nl
                         + g[:, None] * d1 + ll[None, :]).ravel()
        self.block_diag = np.arange(d1) * (d1 + 1)  # diagonal of a flattened d1 x d1 block


def _workspace(lifted: LiftedProgram) -> _Workspace:
    ws = getattr(lifted, "_newton_workspace", None)
    if ws is None:
        ws = _Workspace(lifted)
        lifted._newton_workspace = ws
    return ws


class NormalEquations:
    """``H = G^T W^{-2} G`` for one scaling, factorised once and solved many times."""

    def __init__(
        self, lifted: LiftedProgram, scaling: NTScaling, regularisation: float = 1e-13
    ) -> None:
        self.lifted = lifted
        self.refine = True  # whether callers refine solves against the exact operator
        lay = lifted.layout
        P, d1, N = lay.n_gates, lay.n_cols, lay.n_samples
        w = scaling.lp_weights
        blk = lifted.block
        ws = _workspace(lifted)

        # 1. residual slacks t, bounds and ramps -> weights M on y_hat
        w_hi, w_lo = w[blk("res_hi")], w[blk("res_lo")]
        self.t_diag = w_hi + w_lo
        self.t_cross = w_lo - w_hi
        self.t_ratio = self.t_cross / self.t_diag
        m = w_hi * w_lo
        m *= 4.0
        m /= self.t_diag
        if lifted.lower_idx.size:
            m[lifted.lower_sel] += w[blk("lower")]
        if lifted.upper_idx.size:
            m[lifted.upper_sel] += w[blk("upper")]
        w_ramp = w[blk("ramp_hi")] + w[blk("ramp_lo")]
        m_B = None
        if lifted.n_bound:  # the bound points' rows: weights on y_hat_B
            m_B = np.zeros(lifted.n_bound)
            m_B[lifted.bound_lower_idx] += w[blk("bound_lo")]
            m_B[lifted.bound_upper_idx] += w[blk("bound_up")]
        nk = ws.nk
        nl = lay.n_lifted
        S = np.zeros((nk, nk))
        S_flat = S.ravel()
        K_ub = lifted.output_adjoint(m)
        K_bb = m.sum()
        if m_B is not None:
            K_ub += lifted.bound_output_adjoint(m_B)
            K_bb += m_B.sum()

        # 2. one product gives the output block's gate-pair blocks (no ramps) and the
        # per-gate blocks of the two cones
        w_cones = lifted.cone_rows(w)
        w_nu, w_om = w_cones[0], w_cones[1]
        rows, pairs = ws.rows, ws.pairs
        np.add(w_nu, w_om, out=rows[pairs : pairs + P, :N])
        np.subtract(w_nu, w_om, out=rows[pairs + P :, :N])
        if pairs:
            out_rows = rows[:pairs]
            np.multiply(lifted.pair_masks[:, :N], m, out=out_rows[:, :N])
            if m_B is not None:
                np.multiply(lifted.pair_masks[:, N:], m_B, out=out_rows[:, N:])
            np.matmul(rows, lifted.XX_output, out=ws.product)
            S_flat[ws.pair_dst] = ws.product.ravel()[ws.pair_src]
            cone_grams = ws.product[pairs:]
        else:
            cone_grams = rows @ lifted.XX_sym
            _weighted_gram_lifted(lifted, m, w_ramp, S[:nl, :nl], m_B)
        grams = cone_grams[:, lifted.sym_index].reshape(2, P, d1, d1)
        gram_sum, gram_dif = grams[0], grams[1]

        # 3. the dual-norm rows
        wh, wl = w[blk("norm_hi")], w[blk("norm_lo")]
        diag_beta = wh + wl  # H[e, e]
        cross_beta = wl - wh  # H[e, tau]
        h_tt = diag_beta.sum()
        self.rho = 0.0
        if lifted.l1:
            h_tt += w[blk("norm_one")][0]
        else:
            inv_b2 = scaling.beta**-2
            diag_beta += inv_b2
            h_tt -= inv_b2
            a = scaling.soc_rank_one
            a_tau, a_beta = a[0], a[1:-1]
            self.rho = 2.0 * inv_b2

        d_nu, d_om = diag_beta[:nl].reshape(P, d1), diag_beta[nl : 2 * nl].reshape(P, d1)
        B = gram_sum * 0.25
        B.reshape(P, d1 * d1)[:, ws.block_diag] += (d_nu + d_om) * 0.25
        H_uv = gram_dif * 0.25
        H_uv.reshape(P, d1 * d1)[:, ws.block_diag] += (d_nu - d_om) * 0.25
        e_nu, e_om = cross_beta[:nl].reshape(P, d1), cross_beta[nl : 2 * nl].reshape(P, d1)
        h_u_tau = (e_nu - e_om).ravel() * 0.5
        n_extra = 2 if self.rho else 1
        # eliminate v gate by gate: Z_i = B_i^{-1} [H_vu,i  h_v_tau,i  (g_v,i)]; H_vu = H_uv
        rhs = np.empty((P, d1, d1 + n_extra))
        rhs[:, :, :d1] = H_uv
        rhs[:, :, d1] = (e_nu + e_om) * 0.5  # h_v_tau
        if self.rho:
            a_nu, a_om = a_beta[:nl].reshape(P, d1), a_beta[nl : 2 * nl].reshape(P, d1)
            g_u = (a_nu - a_om).ravel() * 0.5
            rhs[:, :, d1 + 1] = (a_nu + a_om) * 0.5  # g_v
        self.blocks = _GateBlocks(B, ws)
        Z = self.blocks.solve_many(rhs)
        self.Z = Z
        # (H_uv,i; h_v_tau,i^T; g_v,i^T) B_i^{-1} r_v,i in one product per solve
        self.HR = np.ascontiguousarray(rhs.transpose(0, 2, 1))
        self.n_kept = nk
        self.n_extra = n_extra
        S_flat[ws.diag_dst] += (B - H_uv @ Z[:, :, :d1]).ravel()
        HZ = H_uv @ Z[:, :, d1:]  # (P, d1, n_extra)
        h_v_tau = rhs[:, :, d1]
        col_tau = h_u_tau - HZ[:, :, 0].ravel()
        S[:nl, -1] = col_tau
        S[-1, :nl] = col_tau
        S[-1, -1] = h_tt - np.vdot(h_v_tau, Z[:, :, d1])
        if lay.n_bias:
            S[:nl, nl] = K_ub
            S[nl, :nl] = K_ub
            S[nl, nl] = K_bb + diag_beta[nl * 2]
            S[nl, -1] = S[-1, nl] = cross_beta[nl * 2]
        if self.rho:
            g_v = rhs[:, :, d1 + 1]
            g_hat = np.empty(nk)
            g_hat[:nl] = g_u - HZ[:, :, 1].ravel()
            if lay.n_bias:
                g_hat[nl] = a_beta[nl * 2]
            g_hat[-1] = a_tau - np.vdot(h_v_tau, Z[:, :, d1 + 1])
            self.border = 1.0 / self.rho + np.vdot(g_v, Z[:, :, d1 + 1])
            self.g_hat = g_hat
            # S += g_hat g_hat^T / border on the triangle the factorisation reads (the
            # C-ordered upper triangle is the Fortran-ordered lower triangle of S.T)
            dsyr(1.0 / self.border, g_hat, lower=1, a=S.T, overwrite_a=1)
        self._factorise(S, regularisation, ws.diag_idx)

    def _factorise(self, S: np.ndarray, regularisation: float, diag_idx: np.ndarray) -> None:
        S_flat = S.ravel()
        diag = S_flat[diag_idx]
        if not np.all(np.isfinite(S)) or np.any(diag <= 0):
            raise NewtonSystemError("reduced Newton matrix has a non-positive diagonal")
        self.col_scale = 1.0 / np.sqrt(diag)
        S *= self.col_scale[:, None]
        S *= self.col_scale
        reg = regularisation
        # the C-ordered upper triangle of S is the Fortran-ordered lower triangle of S.T:
        # LAPACK reads that without a transposing copy (S = L L^T, L lower)
        St = S.T
        for _ in range(6):
            S_flat[diag_idx] = 1.0 + reg
            factor, info = dpotrf(St, lower=1, clean=0)
            if info == 0:
                self.factor = factor
                return
            reg = max(reg * 100.0, 1e-12)
        raise NewtonSystemError("reduced Newton matrix is not positive definite")

    def output_shift(self, r_t: np.ndarray) -> np.ndarray:
        """What eliminating ``t`` adds to the right-hand side of ``y_hat``: ``X_hat^T``,
        ``-X_hat^T`` and ``1^T`` of it go onto nu, omega and b (see :meth:`solve`)."""
        y_hat_adj = np.multiply(self.t_ratio, r_t)
        np.negative(y_hat_adj, out=y_hat_adj)
        return y_hat_adj

    def solve(self, r: np.ndarray, gx: np.ndarray | None = None,
              folded: bool = False) -> np.ndarray:
        """Solve ``H dx = r`` (approximately; refine against the exact operator). With
        ``gx``, also write ``G dx`` there (sharing the product that gives ``dx``'s ``t``).
        ``folded``: ``r`` already carries :meth:`output_shift` of its ``t`` part on nu,
        omega and b (as ``G^T`` can add it within its own product)."""
        lifted = self.lifted
        lay = lifted.layout
        P, d1, nl = lay.n_gates, lay.n_cols, lay.n_lifted
        s_t = lifted._s_t
        r_t = r[s_t]
        if not folded:
            y_hat_adj = self.output_shift(r_t)
        r_nu, r_om = r[:nl], r[nl : 2 * nl]
        r_v = np.add(r_nu, r_om).reshape(P, d1)
        r_v *= 0.5
        pv = self.blocks.solve_one(r_v)
        rk = np.empty(self.n_kept)
        r_u = np.subtract(r_nu, r_om, out=rk[:nl])
        r_u *= 0.5
        if not folded:
            r_u += lifted.output_adjoint(y_hat_adj)
        E = np.matmul(self.HR, pv[:, :, None])[:, :, 0]  # (H_uv pv, h_v_tau . pv, g_v . pv)
        r_u -= E[:, :d1].ravel()
        if lay.n_bias:
            rk[nl] = r[lifted._s_b.start]
            if not folded:
                rk[nl] += y_hat_adj.sum()
        rk[-1] = r[lifted._i_tau] - E[:, d1].sum()
        if self.rho:
            gp = E[:, d1 + 1].sum()
            rk -= self.g_hat * (gp / self.border)
        rk *= self.col_scale
        k = dtrsv(self.factor, rk, lower=1, overwrite_x=1)
        k = dtrsv(self.factor, k, lower=1, trans=1, overwrite_x=1)
        k *= self.col_scale
        u = k[:nl]
        # v_i = B_i^{-1} r_v,i - Z_i (u_i, tau, zeta)
        c = np.empty((P, d1 + self.n_extra))
        c[:, :d1] = u.reshape(P, d1)
        c[:, d1] = k[-1]
        if self.rho:
            c[:, d1 + 1] = (self.g_hat @ k + gp) / self.border
        v = pv.ravel() - np.matmul(self.Z, c[:, :, None]).ravel()
        dx = np.empty(lay.size)
        nu, om = dx[:nl], dx[nl : 2 * nl]
        np.add(u, v, out=nu)
        nu *= 0.5
        np.subtract(v, u, out=om)
        om *= 0.5
        s_b = lifted._s_b
        dx[s_b] = k[nl : nl + lay.n_bias]
        dx[lifted._i_tau] = k[-1]
        if gx is None:
            y_hat = lifted.output(u, dx[s_b])
        else:
            y_hat = lifted.G_gates(dx[: 2 * nl], gx)
            if lay.n_bias:
                y_hat += dx[s_b.start]
        t = dx[s_t]
        np.multiply(self.t_cross, y_hat, out=t)
        np.subtract(r_t, t, out=t)
        t /= self.t_diag
        if gx is not None:
            lifted.G_rest(dx, y_hat, gx)
        return dx


class _GateBlocks:
    """The symmetric positive definite gate blocks ``B_i``, ready for batched solves.

    Each block is scaled to unit diagonal and nudged by ``regularisation``: near the optimum
    an inactive gate's block can be numerically singular, and the caller's iterative
    refinement absorbs the perturbation. Single right-hand sides go through the blocks'
    Cholesky factors, laid out as one block-diagonal triangular matrix (two BLAS calls);
    where a block is too close to singular for Cholesky, through batched LU solves.
    """

    def __init__(self, B: np.ndarray, ws: _Workspace, regularisation: float = 1e-14) -> None:
        P, d1, _ = B.shape
        diag = B.reshape(P, d1 * d1)[:, ws.block_diag]
        if not np.all(np.isfinite(B)) or np.any(diag <= 0):
            raise NewtonSystemError(
                "a gate block of the Newton matrix has a non-positive diagonal"
            )
        self.scale = 1.0 / np.sqrt(diag)
        Bs = B * self.scale[:, :, None]
        Bs *= self.scale[:, None, :]
        Bs.reshape(P, d1 * d1)[:, ws.block_diag] += regularisation
        self.Bs = Bs
        self.factor = None
        try:
            chol = np.linalg.cholesky(Bs)  # lower
        except np.linalg.LinAlgError:
            return
        # the C-ordered upper block-diagonal L^T is the Fortran-ordered lower L
        upper = np.zeros((P * d1, P * d1))
        upper.ravel()[ws.gate_dst] = chol.transpose(0, 2, 1).ravel()
        self.factor = upper.T

    def solve_many(self, rhs: np.ndarray) -> np.ndarray:
        """``B_i^{-1} rhs_i`` for a ``(P, d1, k)`` right-hand side (LU, batched)."""
        try:
            out = np.linalg.solve(self.Bs, rhs * self.scale[:, :, None])
        except np.linalg.LinAlgError as exc:
            raise NewtonSystemError(f"singular gate block: {exc}") from exc
        out *= self.scale[:, :, None]
        return out

    def solve_one(self, r: np.ndarray) -> np.ndarray:
        """``B_i^{-1} r_i`` for a ``(P, d1)`` right-hand side."""
        if self.factor is None:
            return self.solve_many(r[:, :, None])[:, :, 0]
        x = (r * self.scale).ravel()
        x = dtrsv(self.factor, x, lower=1, overwrite_x=1)
        x = dtrsv(self.factor, x, lower=1, trans=1, overwrite_x=1)
        x = x.reshape(r.shape)
        x *= self.scale
        return x


def _weighted_gram_lifted(
    lifted: LiftedProgram, m: np.ndarray, w_ramp: np.ndarray, out: np.ndarray,
    m_B: np.ndarray | None = None,
) -> None:
    """Write ``X_hat^T (diag(m) + Delta^T diag(w_ramp) Delta) X_hat + X_hat_B^T diag(m_B)
    X_hat_B`` into ``out`` (``(P (d+1), P (d+1))``), the output block with ramp rows (without
    them :class:`NormalEquations` forms it from the gate-pair masks). ``m_B`` (the bound
    points' weights) is ``None`` when there are no bound points."""
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
    out[...] = gram


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
    Returns ``dx, ds, dz`` and the scaled ``W^{-1} ds, W dz`` (their sum is ``q``; without
    refinement the first is computed as ``W^{-1} ds``, with it the second as ``W dz``).
    """
    # with offset = W^{-2} bz - W^{-1} q, kept negated (one pass fewer)
    if q is not None:
        neg_offset = scaling.apply_inverse(q)
        if bz is not None:
            neg_offset -= scaling.apply_inverse_squared(bz)
    else:
        neg_offset = scaling.apply_inverse_squared(bz)
        np.negative(neg_offset, out=neg_offset)
    folded = not normal.refine
    shift = None
    if folded:  # the t part of the right-hand side, for the shift G^T folds in
        blk = lifted.block
        r_t = neg_offset[blk("res_hi")] + neg_offset[blk("res_lo")]
        if bx is not None:
            r_t += bx[lifted._s_t]
        shift = normal.output_shift(r_t)
    rhs = lifted.GT(neg_offset, shift=shift)
    np.negative(rhs, out=rhs)
    if bx is not None:
        rhs += bx

    def dual_step(gdx: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
        dz = scaling.apply_inverse_squared(gdx)
        dz += neg_offset
        resid = lifted.GT(dz)
        np.negative(resid, out=resid)
        if bx is not None:
            resid += bx
        return dz, resid, float(np.linalg.norm(resid))

    gdx = np.empty(lifted.cones.size)
    dx = normal.solve(rhs, gdx, folded)
    if not normal.refine:  # far from the optimum an unrefined direction is good enough
        del neg_offset, rhs  # (free them before the four vectors below)
        # ds from the primal equation, then W^{-1} ds + W dz = q read the other way round:
        # W^{-1} ds, W dz = q - W^{-1} ds and dz = W^{-1} (W dz); the same dz as
        # W^{-2} (G dx - bz) + W^{-1} q, in fewer passes over the rows
        ds = np.negative(gdx, out=gdx) if bz is None else np.subtract(bz, gdx, out=gdx)
        ds_t = scaling.apply_inverse(ds)
        dz_t = np.negative(ds_t) if q is None else np.subtract(q, ds_t)
        dz = scaling.apply_inverse(dz_t)
        return dx, ds, dz, ds_t, dz_t
    else:
        dz, resid, size = dual_step(gdx)
        target = opts.refine_tol * max(1.0, np.linalg.norm(rhs))
        for _ in range(opts.refine):  # refine while it pays
            if size <= target:
                break
            cand_gdx = np.empty_like(gdx)
            candidate = normal.solve(resid, cand_gdx)
            candidate += dx
            cand_gdx += gdx
            cand_dz, cand_resid, cand_size = dual_step(cand_gdx)
            if cand_size >= 0.5 * size:
                if cand_size < size:
                    dx, gdx, dz = candidate, cand_gdx, cand_dz
                break
            dx, gdx, dz, resid, size = candidate, cand_gdx, cand_dz, cand_resid, cand_size
    # ds from the primal equation itself: going through W^2 would put the scaling's
    # rounding (large near the cone's boundary) into the primal residual
    ds = np.negative(gdx, out=gdx) if bz is None else np.subtract(bz, gdx, out=gdx)
    dz_t = scaling.apply(dz)
    ds_t = np.negative(dz_t) if q is None else np.subtract(q, dz_t)
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
