"""Per-unit constants over the domain (internal units): the MILP's big-M constants and flip
bounds (:mod:`._milp`), and the trivial and unit-sum bounds (``method="unit_bounds"``)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import linprog

from .._gated import GatedNetwork
from ._domain import _Domain


def _extreme_on_halfspace(
    w: np.ndarray, w0: float, a: np.ndarray, a0: float, lo: np.ndarray, hi: np.ndarray
) -> float:
    """max w^T x + w0 over {lo <= x <= hi, a^T x + a0 >= 0}; -inf if that set is empty.

    LP duality: the maximum is min over lambda >= 0 of
    phi(lambda) = w0 + lambda a0 + sum_k max((w_k + lambda a_k) lo_k, (w_k + lambda a_k) hi_k),
    a convex piecewise-linear function whose kinks are where w_k + lambda a_k = 0. Its minimum is
    at lambda = 0 or at a kink, or it decreases without end when the set is empty.
    """

    def phi(lam: float) -> float:
        c = w + lam * a
        return float(w0 + lam * a0 + np.sum(np.maximum(c * lo, c * hi)))

    slope_at_infinity = a0 + np.sum(np.maximum(a * lo, a * hi))  # max of the gate on the box
    if slope_at_infinity < 0:
        return -np.inf
    with np.errstate(divide="ignore", invalid="ignore"):
        kinks = -w / a
    candidates = [0.0, *kinks[np.isfinite(kinks) & (kinks > 0)]]
    return min(phi(lam) for lam in candidates)


@dataclass(frozen=True)
class _UnitBounds:
    """Per-unit constants of the MILP in internal units (see :mod:`._milp`)."""

    A: np.ndarray  # (d, P) gates
    a0: np.ndarray
    W: np.ndarray  # (d, P) values
    w0: np.ndarray
    g_lo: np.ndarray
    g_hi: np.ndarray
    h_on_lo: np.ndarray  # range of h where the gate is >= 0
    h_on_hi: np.ndarray
    h_off_lo: np.ndarray  # range of h where the gate is <= 0
    h_off_hi: np.ndarray

    @property
    def always_on(self) -> np.ndarray:
        return self.g_lo >= 0

    @property
    def always_off(self) -> np.ndarray:
        return self.g_hi < 0


def _unit_bounds(net: GatedNetwork, dom: _Domain) -> _UnitBounds:
    c, r = dom.center, dom.half_width
    A = net.A * r[:, None]
    a0 = net.a0 + c @ net.A
    W = net.W * r[:, None]
    w0 = net.w0 + c @ net.W
    lo, hi = dom.z_lower, dom.z_upper
    g_lo = a0 + np.minimum(A * lo[:, None], A * hi[:, None]).sum(axis=0)
    g_hi = a0 + np.maximum(A * lo[:, None], A * hi[:, None]).sum(axis=0)
    P = net.n_units
    on_lo, on_hi, off_lo, off_hi = (np.zeros(P) for _ in range(4))
    for i in range(P):
        a, b, w, v = A[:, i], a0[i], W[:, i], w0[i]
        if g_hi[i] >= 0:  # the region g >= 0 meets the box
            on_hi[i] = _extreme_on_halfspace(w, v, a, b, lo, hi)
            on_lo[i] = -_extreme_on_halfspace(-w, -v, a, b, lo, hi)
        if g_lo[i] < 0:  # the region g <= 0 meets the box
            off_hi[i] = _extreme_on_halfspace(w, v, -a, -b, lo, hi)
            off_lo[i] = -_extreme_on_halfspace(-w, -v, -a, -b, lo, hi)
    return _UnitBounds(A, a0, W, w0, g_lo, g_hi, on_lo, on_hi, off_lo, off_hi)


@dataclass(frozen=True)
class _FlipBounds:
    """Per unit: reach (max of a^T e over E), and upper bounds on t' - t by pattern pair."""

    reach: np.ndarray
    both: np.ndarray
    up: np.ndarray
    down: np.ndarray


def _dual_norm(M: np.ndarray, dom: _Domain) -> np.ndarray:
    """max over e in E (internal units) of M[:, i]^T e, for every column i."""
    scaled = np.abs(M) * dom.z_radius[:, None]
    if dom.norm == "inf":
        return scaled.sum(axis=0)
    if dom.norm == "1":
        return scaled.max(axis=0, initial=0.0)
    return np.sqrt((scaled**2).sum(axis=0))


def _max_on_slab(w, w0, a, a0, width, lo, hi) -> float:
    """max w^T x + w0 over {lo <= x <= hi, 0 <= a^T x + a0 <= width} (-inf if empty)."""
    A_ub = np.vstack([a, -a])
    b_ub = np.array([width - a0, a0])
    result = linprog(-w, A_ub=A_ub, b_ub=b_ub, bounds=np.column_stack([lo, hi]),
                     method="highs")
    if result.status != 0:
        return -np.inf
    return float(-result.fun + w0)


def _flip_bounds(units: _UnitBounds, dom: _Domain) -> _FlipBounds:
    reach = _dual_norm(units.A, dom)
    both = _dual_norm(units.W, dom)
    P = units.A.shape[1]
    up, down = np.zeros(P), np.zeros(P)
    lo, hi = dom.z_lower, dom.z_upper
    for i in np.flatnonzero(~(units.always_on | units.always_off)):
        a, a0, w, w0 = units.A[:, i], units.a0[i], units.W[:, i], units.w0[i]
        up[i] = max(_max_on_slab(w, w0, a, a0, reach[i], lo, hi), 0.0)
        down[i] = max(_max_on_slab(-w, -w0, a, a0, reach[i], lo, hi), 0.0)
    return _FlipBounds(reach, both, up, down)


def _trivial_bound(units: _UnitBounds) -> float:
    """max f - min f over the box, unit by unit: the bound before any solve (internal units)."""
    on = ~units.always_off
    top = np.where(on, np.maximum(units.h_on_hi, 0.0), 0.0)
    bottom = np.where(on, np.minimum(units.h_on_lo, 0.0), 0.0)
    return float(np.sum(top - bottom))


def _unit_sum_bound(units: _UnitBounds, dom: _Domain) -> float:
    """The sum over units of the most each unit's output can change (internal units): both
    active, switching on with x' in its gate's slab, or switching off with x in it. A valid
    upper bound on L_eps (each term bounds its unit's change whatever the others do), without
    the MILP that couples the units through their shared x."""
    flips = _flip_bounds(units, dom)  # up and down are 0 where a unit cannot flip
    change = np.where(units.always_off, 0.0, np.maximum.reduce([flips.both, flips.up, flips.down]))
    return float(np.sum(np.maximum(change, 0.0)))
