"""The training program (:mod:`wadiro_models._program`) in the conic standard form the
interior-point solver works on::

    minimise   c^T x    subject to    G x + s = h,    s in K

with the variables ``x = (nu, omega, b, t, tau)``: ``vec nu``, ``vec omega`` of size
``P (d+1)`` each (gate-major), the output bias ``b`` (absent without intercept), the residual
bounds ``t`` (``N``) and the dual-norm epigraph ``tau``. The objective is the program's
objective times ``N``: ``c^T x = sum_j t_j + N radius tau``. With
``y_hat = X_hat vec(nu - omega) + b``, the rows of ``G x + s = h`` (every ``s`` block
nonnegative, except the last one for l2) are::

    res_hi    s = y - y_hat + t                   >= 0     t_j >= y_hat_j - y_j
    res_lo    s = y_hat - y + t                   >= 0     t_j >= y_j - y_hat_j
    cones     s = (2 D_i - 1) * (X nu_i)          >= 0     per sample: P nu rows, then
              s = (2 D_i - 1) * (X omega_i)       >= 0     P omega rows (an N x 2P block)
    lower     s = y_hat - lower                   >= 0     finite entries only
    upper     s = upper - y_hat                   >= 0
    ramp_hi   s = ramp - (y_hat_j - y_hat_{j-1})  >= 0     finite entries only
    ramp_lo   s = ramp + (y_hat_j - y_hat_{j-1})  >= 0
    bound_lo  s = y_hat_B - lower_B               >= 0     bound points, finite entries only
    bound_up  s = upper_B - y_hat_B               >= 0
    l1 norm   s = tau - 1, tau - e, tau + e       >= 0     e = (vec nu, vec omega, b) entrywise
    l2 norm   s = tau - e, tau + e                >= 0     implied by the cone, see below
              s = (tau, e, 1)                     in SOC   the constant 1 is beta's -1

(omega's sign in beta does not matter for either norm). The gate cone rows are stored
gate-major as one ``2P x N`` block (the nu rows of gate 0 for every sample, ..., then the omega
rows) so that ``G`` and ``G^T`` touch them with one matrix product each and every elementwise
operation on them runs along the samples (numpy is slow on short inner axes).
``y_hat_B = X_hat_B vec(nu - omega) + b`` is the output at the bound points (only those with a
finite bound are kept); their rows touch no ``t`` and no cone, so they enter the Newton system
exactly as extra rows of the output block (see :mod:`._newton`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..._program import ScnnProgram, lifted_features, lifted_rows
from ._cones import ConeSet


@dataclass(frozen=True)
class Layout:
    """Offsets of the variable blocks inside the flat ``x``."""

    n_gates: int
    n_cols: int  # d + 1
    n_bias: int  # 1 with an intercept, else 0
    n_samples: int

    @property
    def n_lifted(self) -> int:
        return self.n_gates * self.n_cols

    @property
    def nu(self) -> slice:
        return slice(0, self.n_lifted)

    @property
    def omega(self) -> slice:
        return slice(self.n_lifted, 2 * self.n_lifted)

    @property
    def b(self) -> slice:
        return slice(2 * self.n_lifted, 2 * self.n_lifted + self.n_bias)

    @property
    def beta(self) -> slice:
        """(nu, omega, b): the entries bounded by the dual norm."""
        return slice(0, 2 * self.n_lifted + self.n_bias)

    @property
    def t(self) -> slice:
        start = 2 * self.n_lifted + self.n_bias
        return slice(start, start + self.n_samples)

    @property
    def tau(self) -> int:
        return 2 * self.n_lifted + self.n_bias + self.n_samples

    @property
    def size(self) -> int:
        return self.tau + 1


class LiftedProgram:
    """Structured products with ``G`` and ``G^T`` for one :class:`ScnnProgram`.

    Nothing of size ``rows x columns`` is ever stored except the lifted features ``X_hat``,
    which only the Newton matrix reads, and only when there are ramp rows (built on first
    use). ``G`` and ``GT`` return new arrays; the solver's own calls pass ``out`` (and
    reuse scratch buffers held here, so they are not reentrant).
    """

    def __init__(self, program: ScnnProgram) -> None:
        X = np.ascontiguousarray(program.X, dtype=float)
        D = np.asarray(program.patterns, dtype=bool)
        N, d1 = X.shape
        P = D.shape[1]
        self.program = program
        self.X = X
        self.XT = np.ascontiguousarray(X.T)  # (d1, N)
        self.D = D.astype(float)  # (N, P)
        self.DT = np.ascontiguousarray(self.D.T)  # (P, N)
        # -(2 D - 1): the cone rows are s = -G x; gate-major like the rows, (2P, N)
        signs = np.where(D.T, -1.0, 1.0)
        self.neg_signs = np.ascontiguousarray(np.vstack([signs, signs]))
        self._X_hat = None
        self.y = np.asarray(program.y, dtype=float)
        self.layout = Layout(P, d1, 1 if program.fit_intercept else 0, N)
        self.l1 = program.wasserstein == "l1"
        self.lower_idx, self.lower = _finite(program.lower, N)
        self.upper_idx, self.upper = _finite(program.upper, N)
        self.ramp_idx, self.ramp = _finite(program.ramp, N - 1)
        # index lists covering every sample are plain slices (no gather/scatter)
        self.lower_sel = _selector(self.lower_idx, N)
        self.upper_sel = _selector(self.upper_idx, N)
        self._bound_points(program)
        self._blocks = self._row_blocks()
        # For the Newton matrix's output block X_hat^T M X_hat (without ramp rows): per gate
        # pair i <= j the indicator D_i D_j, and the distinct entries of x_j x_j^T, so that its
        # blocks are one matrix product pair_masks @ (M XX_sym), with fewer products than
        # X_hat^T (M X_hat) itself (only the distinct entries of each symmetric block).
        a, b = np.triu_indices(d1)
        self.XX_sym = X[:, a] * X[:, b]  # (N, d1 (d1 + 1) / 2)
        sym = np.zeros((d1, d1), dtype=int)
        sym[a, b] = sym[b, a] = np.arange(a.size)
        self.sym_index = sym.ravel()  # full d1 x d1 entry -> column of XX_sym
        self.gate_pairs = np.triu_indices(P)
        self.pair_masks = None
        # the rows of the output block: the training samples, then the bound points
        self.XX_output = self.XX_sym
        output_D = D
        if self.n_bound:
            XB = self.bound_X
            self.XX_output = np.vstack([self.XX_sym, XB[:, a] * XB[:, b]])
            output_D = np.vstack([D, self.bound_D.astype(bool)])
        if self.ramp_idx.size == 0:
            iu, ju = self.gate_pairs
            self.pair_masks = np.ascontiguousarray(
                (output_D[:, iu] & output_D[:, ju]).T, dtype=float
            )
        self.bound_X_hat = None  # the bound points' lifted features, for the ramp path only
        if self.n_bound and self.pair_masks is None:
            self.bound_X_hat = lifted_rows(self.bound_X, self.bound_D)
        n_beta = self.layout.beta.stop
        n_lp = self._blocks["norm_lo"].stop
        self.cones = ConeSet(n_lp, 0 if self.l1 else n_beta + 2)
        self.c = np.zeros(self.layout.size)
        self.c[self.layout.t] = 1.0
        self.c[self.layout.tau] = N * float(program.radius)
        self.h = self._offsets()
        # plain ints and slices for the hot paths (the Layout properties build new slices)
        lay = self.layout
        self._n2 = 2 * lay.n_lifted
        self._s_b, self._s_t, self._i_tau = lay.b, lay.t, lay.tau
        self._n_beta = n_beta
        self._scratch_pn = np.empty((P, N))
        self._scratch_3pn = np.empty((3 * P, N))
        self._scratch_3pd = np.empty((3 * P, d1))

    @property
    def X_hat(self) -> np.ndarray:
        """X_hat, ``(N, P (d+1))`` (built on first use: only the ramp path reads it)."""
        if self._X_hat is None:
            self._X_hat = lifted_features(self.program)
        return self._X_hat

    def _bound_points(self, program: ScnnProgram) -> None:
        """Keep the bound points with a finite bound; index their finite bounds."""
        M = program.n_bound_points if program.has_bound_points else 0
        lower_idx, lower = _finite(program.bound_lower, M)
        upper_idx, upper = _finite(program.bound_upper, M)
        kept = np.union1d(lower_idx, upper_idx)  # sorted
        self.n_bound = int(kept.size)
        self.bound_X = np.zeros((0, self.X.shape[1]))
        self.bound_D = np.zeros((0, self.D.shape[1]))
        if self.n_bound:
            self.bound_X = np.ascontiguousarray(program.bound_X[kept], dtype=float)
            self.bound_D = np.asarray(program.bound_patterns, dtype=bool)[kept].astype(float)
        # positions of the finite bounds among the kept points
        self.bound_lower_idx = np.searchsorted(kept, lower_idx)
        self.bound_upper_idx = np.searchsorted(kept, upper_idx)
        self.bound_lower, self.bound_upper = lower, upper

    # -- row layout -------------------------------------------------------------------------
    def _row_blocks(self) -> dict[str, slice]:
        lay = self.layout
        N, n_gate_rows = lay.n_samples, lay.n_samples * lay.n_gates
        sizes = [
            ("res_hi", N),
            ("res_lo", N),
            ("cones", 2 * n_gate_rows),
            ("lower", self.lower_idx.size),
            ("upper", self.upper_idx.size),
            ("ramp_hi", self.ramp_idx.size),
            ("ramp_lo", self.ramp_idx.size),
            ("bound_lo", self.bound_lower_idx.size),
            ("bound_up", self.bound_upper_idx.size),
        ]
        n_beta = lay.beta.stop
        if self.l1:
            sizes += [("norm_one", 1)]
        # For l2 the rows tau >= |e_k| are implied by the cone (and strictly inactive at the
        # optimum, since the 1 in beta keeps tau > |e_k|); kept, they centre the iterates much
        # better than the single second-order cone does on its own.
        sizes += [("norm_hi", n_beta), ("norm_lo", n_beta)]
        if not self.l1:
            sizes += [("soc", n_beta + 2)]
        blocks, start = {}, 0
        for name, size in sizes:
            blocks[name] = slice(start, start + size)
            start += size
        return blocks

    def block(self, name: str) -> slice:
        return self._blocks[name]

    def _offsets(self) -> np.ndarray:
        h = np.zeros(self.cones.size)
        blk = self._blocks
        h[blk["res_hi"]] = self.y
        h[blk["res_lo"]] = -self.y
        h[blk["lower"]] = -self.lower
        h[blk["upper"]] = self.upper
        h[blk["ramp_hi"]] = self.ramp
        h[blk["ramp_lo"]] = self.ramp
        h[blk["bound_lo"]] = -self.bound_lower
        h[blk["bound_up"]] = self.bound_upper
        if self.l1:
            h[blk["norm_one"]] = -1.0
        else:
            h[blk["soc"].stop - 1] = 1.0
        return h

    # -- output map y_hat = X_hat u + b and its adjoint ----------------------------------------
    # X_hat is never streamed for products: X_hat u = colsum(D^T * (U X^T)) and
    # X_hat^T q = (D^T * q) X read only X (N x (d+1)) and D, which stay in cache.
    def output(self, u: np.ndarray, b: np.ndarray) -> np.ndarray:
        lay = self.layout
        gated = u.reshape(lay.n_gates, lay.n_cols) @ self.XT  # (P, N)
        gated *= self.DT
        y_hat = np.add.reduce(gated, axis=0)
        if b.size:
            y_hat += b[0]
        return y_hat

    def output_adjoint(self, q: np.ndarray) -> np.ndarray:
        """``X_hat^T q``, gate-major."""
        return (np.multiply(self.DT, q, out=self._scratch_pn) @ self.X).ravel()

    def bound_output(self, u: np.ndarray, b: np.ndarray) -> np.ndarray:
        """``y_hat_B = X_hat_B u + b`` at the kept bound points."""
        lay = self.layout
        gated = self.bound_X @ u.reshape(lay.n_gates, lay.n_cols).T
        y_hat_B = np.einsum("mp,mp->m", self.bound_D, gated)
        if b.size:
            y_hat_B += b[0]
        return y_hat_B

    def bound_output_adjoint(self, q: np.ndarray) -> np.ndarray:
        """``X_hat_B^T q``, gate-major."""
        return (self.bound_D.T @ (q[:, None] * self.bound_X)).ravel()

    def bound_rows_adjoint(self, z: np.ndarray) -> np.ndarray:
        """The bound points' rows of ``z`` mapped onto ``y_hat_B`` (``d y_hat_B`` per row)."""
        q = np.zeros(self.n_bound)
        q[self.bound_lower_idx] -= z[self._blocks["bound_lo"]]
        q[self.bound_upper_idx] += z[self._blocks["bound_up"]]
        return q

    def ramp_diff(self, y_hat: np.ndarray) -> np.ndarray:
        k = self.ramp_idx
        return y_hat[k + 1] - y_hat[k]

    def ramp_diff_adjoint(self, r: np.ndarray) -> np.ndarray:
        out = np.zeros(self.layout.n_samples)
        k = self.ramp_idx
        out[k + 1] += r
        out[k] -= r
        return out

    def cone_rows(self, v: np.ndarray) -> np.ndarray:
        """The gate cone rows of a row vector as a ``(2, P, N)`` view (nu, then omega)."""
        lay = self.layout
        return v[self._blocks["cones"]].reshape(2, lay.n_gates, lay.n_samples)

    # -- G and G^T --------------------------------------------------------------------------
    def G(self, x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """``G x`` (into ``out`` when given)."""
        if out is None:
            out = np.empty(self.cones.size)
        y_hat = self.G_gates(x[: self._n2], out)
        if self.layout.n_bias:
            y_hat += x[self._s_b.start]
        self.G_rest(x, y_hat, out)
        return out

    def G_gates(self, weights: np.ndarray, out: np.ndarray) -> np.ndarray:
        """First half of ``G x`` from ``(vec nu, vec omega)`` alone: the cone rows, written
        into ``out``, and ``X_hat (nu - omega)``, returned (without ``b``)."""
        lay = self.layout
        P = lay.n_gates
        cones = out[self._blocks["cones"]].reshape(2 * P, lay.n_samples)
        np.matmul(weights.reshape(2 * P, lay.n_cols), self.XT, out=cones)
        diff = np.subtract(cones[:P], cones[P:], out=self._scratch_pn)
        diff *= self.DT
        y_hat = np.add.reduce(diff, axis=0)
        cones *= self.neg_signs
        return y_hat

    def G_rest(self, x: np.ndarray, y_hat: np.ndarray, out: np.ndarray) -> None:
        """Second half of ``G x``: every row but the cones', given ``y_hat`` (that of
        :meth:`G_gates` plus ``b``)."""
        blk = self._blocks
        t, tau = x[self._s_t], x[self._i_tau]
        np.subtract(y_hat, t, out=out[blk["res_hi"]])
        res_lo = out[blk["res_lo"]]
        np.add(y_hat, t, out=res_lo)
        np.negative(res_lo, out=res_lo)
        if self.lower_idx.size:
            np.negative(y_hat[self.lower_sel], out=out[blk["lower"]])
        if self.upper_idx.size:
            out[blk["upper"]] = y_hat[self.upper_sel]
        if self.ramp_idx.size:
            dy = self.ramp_diff(y_hat)
            out[blk["ramp_hi"]] = dy
            np.negative(dy, out=out[blk["ramp_lo"]])
        if self.n_bound:
            lay = self.layout
            y_hat_B = self.bound_output(x[lay.nu] - x[lay.omega], x[lay.b])
            out[blk["bound_lo"]] = -y_hat_B[self.bound_lower_idx]
            out[blk["bound_up"]] = y_hat_B[self.bound_upper_idx]
        e = x[: self._n_beta]
        np.subtract(e, tau, out=out[blk["norm_hi"]])
        norm_lo = out[blk["norm_lo"]]
        np.add(e, tau, out=norm_lo)
        np.negative(norm_lo, out=norm_lo)
        if self.l1:
            out[blk["norm_one"]] = -tau
        else:
            soc = blk["soc"]
            out[soc.start] = -tau
            np.negative(e, out=out[soc.start + 1 : soc.stop - 1])
            out[soc.stop - 1] = 0.0

    def GT(self, z: np.ndarray, out: np.ndarray | None = None,
           shift: np.ndarray | None = None) -> np.ndarray:
        """``G^T z`` (into ``out`` when given). With ``shift`` (one entry per sample), less
        ``X_hat^T shift`` on nu, plus it on omega and less ``sum(shift)`` on b: what the
        Newton solve would otherwise add to its right-hand side with a product of its own."""
        lay, blk = self.layout, self._blocks
        N, P = lay.n_samples, lay.n_gates
        if out is None:
            out = np.empty(lay.size)
        z_hi, z_lo = z[blk["res_hi"]], z[blk["res_lo"]]
        q = z_hi - z_lo
        if shift is not None:
            q -= shift
        if self.lower_idx.size:
            q[self.lower_sel] -= z[blk["lower"]]
        if self.upper_idx.size:
            q[self.upper_sel] += z[blk["upper"]]
        if self.ramp_idx.size:
            q += self.ramp_diff_adjoint(z[blk["ramp_hi"]] - z[blk["ramp_lo"]])
        # one product of X with (signs * z_cones, D q) gives nu's and omega's parts
        coef = self._scratch_3pn
        np.multiply(z[blk["cones"]].reshape(2 * P, N), self.neg_signs, out=coef[: 2 * P])
        np.multiply(self.DT, q, out=coef[2 * P :])
        prod = np.matmul(coef, self.X, out=self._scratch_3pd)
        n2, nl = self._n2, lay.n_lifted
        np.add(prod[:P], prod[2 * P :], out=out[:nl].reshape(P, lay.n_cols))
        np.subtract(prod[P : 2 * P], prod[2 * P :], out=out[nl:n2].reshape(P, lay.n_cols))
        if lay.n_bias:
            bias = q.sum()
        if self.n_bound:
            q_B = self.bound_rows_adjoint(z)
            lifted_q = self.bound_output_adjoint(q_B)
            out[: lay.n_lifted] += lifted_q
            out[lay.n_lifted : n2] -= lifted_q
            if lay.n_bias:
                bias += q_B.sum()
        if lay.n_bias:
            out[self._s_b.start] = bias
        t = out[self._s_t]
        np.add(z_hi, z_lo, out=t)
        np.negative(t, out=t)
        zh, zl = z[blk["norm_hi"]], z[blk["norm_lo"]]
        n_beta = self._n_beta
        out[:n_beta] += zh
        out[:n_beta] -= zl
        tau = -(zh.sum() + zl.sum())
        if self.l1:
            tau -= z[blk["norm_one"]][0]
        else:
            soc = blk["soc"]
            out[:n_beta] -= z[soc.start + 1 : soc.stop - 1]
            tau -= z[soc.start]
        out[self._i_tau] = tau
        return out

    # -- back to the program's variables ------------------------------------------------------
    def weights(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
        lay = self.layout
        shape = (lay.n_gates, lay.n_cols)
        b = float(x[lay.b][0]) if lay.n_bias else 0.0
        return x[lay.nu].reshape(shape).copy(), x[lay.omega].reshape(shape).copy(), b


def _selector(idx: np.ndarray, n: int) -> np.ndarray | slice:
    """``idx`` (sorted, distinct) as a slice when it lists all of ``0 .. n-1``."""
    if idx.size == n:
        return slice(None)
    return idx


def _finite(values: np.ndarray | None, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Indices and values of the finite entries of an optional bound vector."""
    if values is None:
        return np.zeros(0, dtype=int), np.zeros(0)
    v = np.asarray(values, dtype=float)
    if v.shape != (n,):
        raise ValueError(f"bound vector has shape {v.shape}, expected ({n},)")
    idx = np.flatnonzero(np.isfinite(v))
    return idx, v[idx]
