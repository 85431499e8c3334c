"""Cone algebra for the interior-point solver: a nonnegative orthant plus at most one
second-order cone, with Nesterov-Todd scaling.

A vector in the product cone is one flat array; its first ``n_lp`` entries live in the
orthant and the trailing ``n_soc`` entries (possibly none) form one second-order cone
``{(x0, x1): x0 >= ||x1||}``. The Jordan product, its identity ``e`` and the scaling
``W`` follow the usual conventions (Vandenberghe, "The CVXOPT linear and quadratic cone
program solvers", 2010)::

    orthant:  u o v = u * v,                     e = 1,        W = diag(sqrt(s / z))
    SOC:      u o v = (u^T v, u0 v1 + v0 u1),    e = (1, 0),   W = beta (2 w w^T - J)

with ``J = diag(1, -1, ..., -1)``, ``w^T J w = 1`` and ``W z = W^{-1} s = lambda``. For the
SOC, ``W^{-2} = beta^{-2} (2 a a^T - J)`` with ``a = (Jw) o (Jw) = (||w||^2, -2 w0 w1)``,
the form the Newton system uses (diagonal plus one positive rank-one term): ``w o w`` is
the scaling point of ``W^2`` and ``(Jw) o (Jw)`` its inverse.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class ConeSet:
    """Sizes of the product cone: ``n_lp`` orthant rows then one SOC of ``n_soc`` rows."""

    n_lp: int
    n_soc: int = 0

    @property
    def size(self) -> int:
        return self.n_lp + self.n_soc

    @property
    def degree(self) -> int:
        """Barrier degree (the ``m`` in ``mu = s^T z / m``)."""
        return self.n_lp + (1 if self.n_soc else 0)

    def identity(self) -> np.ndarray:
        e = np.ones(self.size)
        if self.n_soc:
            e[self.n_lp + 1 :] = 0.0
        return e

    def min_eig(self, x: np.ndarray) -> float:
        """Smallest 'eigenvalue': negative iff ``x`` lies outside the cone."""
        lo = float(np.min(x[: self.n_lp])) if self.n_lp else np.inf
        if self.n_soc:
            xs = x[self.n_lp :]
            lo = min(lo, float(xs[0] - np.linalg.norm(xs[1:])))
        return lo

    def product(self, u: np.ndarray, v: np.ndarray) -> np.ndarray:
        out = u * v
        if self.n_soc:
            k = self.n_lp
            us, vs = u[k:], v[k:]
            out[k] = us @ vs
            out[k + 1 :] = us[0] * vs[1:] + vs[0] * us[1:]
        return out

    def divide(self, lam: np.ndarray, r: np.ndarray) -> np.ndarray:
        """Solve ``lam o q = r`` for ``q`` (``lam`` in the cone's interior)."""
        q = r / lam
        if self.n_soc:
            k = self.n_lp
            l0, l1 = lam[k], lam[k + 1 :]
            r0, r1 = r[k], r[k + 1 :]
            det = (l0 - np.linalg.norm(l1)) * (l0 + np.linalg.norm(l1))
            q0 = (l0 * r0 - l1 @ r1) / det
            q[k] = q0
            q[k + 1 :] = (r1 - q0 * l1) / l0
        return q

    def max_step(self, x: np.ndarray, dx: np.ndarray, x_inv: np.ndarray | None = None) -> float:
        """Largest ``alpha`` with ``x + alpha dx`` in the cone (``inf`` if unbounded);
        ``x_inv``, where given, is ``1 / x`` on the orthant (a product is cheaper than a
        quotient)."""
        alpha = np.inf
        if self.n_lp:
            # x > 0, so the blocking ratio is the most negative dx / x
            k = self.n_lp
            ratio = dx[:k] / x[:k] if x_inv is None else dx[:k] * x_inv
            worst = float(np.min(ratio))
            if worst < 0:
                alpha = -1.0 / worst
        if self.n_soc:
            alpha = min(alpha, _soc_max_step(x[self.n_lp :], dx[self.n_lp :]))
        return alpha

    def nt_scaling(self, s: np.ndarray, z: np.ndarray) -> NTScaling:
        return NTScaling.from_points(self, s, z)


def _soc_max_step(x: np.ndarray, d: np.ndarray) -> float:
    """Smallest positive root of ``(x0 + a d0)^2 - ||x1 + a d1||^2`` (inf if none)."""
    a = d[0] ** 2 - d[1:] @ d[1:]
    b = x[0] * d[0] - x[1:] @ d[1:]
    c = max(_jdet(x), 0.0)
    if a == 0.0:
        return -c / (2.0 * b) if b < 0 else np.inf
    disc = b * b - a * c
    if disc < 0:
        return np.inf
    q = -(b + np.copysign(np.sqrt(disc), b))
    # f(0) = c > 0, so the feasible set is [0, smallest positive root]; with no positive
    # root x + a d never reaches the boundary (it cannot jump to the opposite cone).
    roots = [r for r in (q / a, c / q if q != 0 else np.inf) if r > 0]
    return float(min(roots)) if roots else np.inf


@dataclass(frozen=True)
class NTScaling:
    """Nesterov-Todd scaling of a primal-dual pair ``(s, z)`` in the product cone."""

    cones: ConeSet
    w_lp: np.ndarray  # sqrt(s / z) on the orthant
    beta: float  # SOC scale (1.0 when there is no SOC)
    w_soc: np.ndarray  # SOC scaling point, w^T J w = 1 (empty when there is no SOC)
    lam: np.ndarray  # W z = W^{-1} s
    w_lp_inv: np.ndarray  # 1 / w_lp
    lp_weights: np.ndarray  # diagonal of W^{-2} on the orthant: z / s
    # 1 / s and 1 / z on the orthant (for the step lengths), when built from points
    s_inv: np.ndarray | None = None
    z_inv: np.ndarray | None = None

    @classmethod
    def identity(cls, cones: ConeSet) -> NTScaling:
        w_soc = np.zeros(cones.n_soc)
        if cones.n_soc:
            w_soc[0] = 1.0
        ones = np.ones(cones.n_lp)
        return cls(cones, ones, 1.0, w_soc, cones.identity(), ones.copy(), ones.copy())

    @classmethod
    def from_points(cls, cones: ConeSet, s: np.ndarray, z: np.ndarray) -> NTScaling:
        k = cones.n_lp
        # two quotients and one square root per row (numpy's sqrt and divisions are slow;
        # products are not): 1 / s, 1 / z, z / s, sqrt(z / s), lambda = s sqrt(z / s) =
        # sqrt(s z) and sqrt(s / z) = lambda / z
        s_inv = np.divide(1.0, s[:k])
        z_inv = np.divide(1.0, z[:k])
        lp_weights = z[:k] * s_inv
        w_lp_inv = np.sqrt(lp_weights)
        lam = np.empty(cones.size)
        np.multiply(s[:k], w_lp_inv, out=lam[:k])
        w_lp = lam[:k] * z_inv
        beta, w_soc = 1.0, np.zeros(cones.n_soc)
        if cones.n_soc:
            ss, zs = s[k:], z[k:]
            s_det = _jdet(ss)
            z_det = _jdet(zs)
            s_bar = ss / np.sqrt(s_det)
            z_bar = zs / np.sqrt(z_det)
            gamma = np.sqrt(0.5 * (1.0 + s_bar @ z_bar))
            # u = (s_bar + J z_bar) / (2 gamma) is the NT point of W^2 = beta^2 (2 u u^T - J);
            # W itself uses its Jordan square root w (w o w = u)
            u = s_bar.copy()
            u[0] += z_bar[0]
            u[1:] -= z_bar[1:]
            u /= 2.0 * gamma
            w_soc = u.copy()
            w_soc[0] += 1.0
            w_soc /= np.sqrt(2.0 * (u[0] + 1.0))
            beta = float((s_det / z_det) ** 0.25)
        scaling = cls(cones, w_lp, beta, w_soc, lam, w_lp_inv, lp_weights, s_inv, z_inv)
        if cones.n_soc:
            lam[k:] = scaling.apply(z)[k:]
        return scaling

    def apply(self, v: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """``W v`` (into ``out`` when given; ``out`` may be ``v``)."""
        return self._orthant_then_soc(v, self.w_lp, self.w_soc, self.beta, out)

    def apply_inverse(self, v: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """``W^{-1} v`` with ``W^{-1} = beta^{-1} (2 (Jw)(Jw)^T - J)``."""
        if not self.cones.n_soc:
            return self._orthant_then_soc(v, self.w_lp_inv, self.w_soc, 1.0, out)
        jw = self.w_soc.copy()
        jw[1:] *= -1.0
        return self._orthant_then_soc(v, self.w_lp_inv, jw, 1.0 / self.beta, out)

    def apply_inverse_squared(self, v: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """``W^{-2} v`` in one pass (orthant: ``z / s``; SOC: ``beta^-2 (2 a a^T - J)``)."""
        a = self.soc_rank_one if self.cones.n_soc else self.w_soc
        return self._orthant_then_soc(v, self.lp_weights, a, self.beta**-2, out)

    def _orthant_then_soc(
        self, v: np.ndarray, diag: np.ndarray, a: np.ndarray, scale: float, out: np.ndarray | None
    ) -> np.ndarray:
        """``diag * v`` on the orthant and ``scale (2 a a^T - J) v`` on the SOC."""
        k = self.cones.n_lp
        if out is None:
            out = np.empty_like(v)
        np.multiply(v[:k], diag, out=out[:k])
        if self.cones.n_soc:
            vs = v[k:]
            soc = (2.0 * (a @ vs)) * a
            soc[0] -= vs[0]
            soc[1:] += vs[1:]
            np.multiply(soc, scale, out=out[k:])
        return out

    @property
    def soc_rank_one(self) -> np.ndarray:
        """``a`` in ``W^{-2} = beta^{-2} (2 a a^T - J)`` on the SOC block."""
        w = self.w_soc
        a = -2.0 * w[0] * w
        a[0] = w @ w
        return a


def _jdet(x: np.ndarray) -> float:
    """``x^T J x`` computed as a product to limit cancellation."""
    n1 = np.linalg.norm(x[1:])
    return float((x[0] - n1) * (x[0] + n1))
