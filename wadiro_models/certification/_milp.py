"""The stability MILP: its variables and rows, its solve by HiGHS, and the l2 ball's cuts.

The MILP (internal units: every feature mapped affinely onto [-1, 1] over the domain)::

    maximise   sum_i t'_i - sum_i t_i
    s.t.       x, x' in X,  x' - x in E
               for (x, gamma, t) and for (x', eta, t') alike, for every unit i:
               g_i(x) >= Lg_i (1 - gamma_i)        gamma_i = 1  =>  g_i(x) >= 0
               g_i(x) <= Ug_i gamma_i              gamma_i = 0  =>  g_i(x) <= 0
               Lh+_i gamma_i <= t_i <= Uh+_i gamma_i
               h_i(x) - Uh-_i (1 - gamma_i) <= t_i <= h_i(x) - Lh-_i (1 - gamma_i)
               gamma_i in {0, 1}

with g_i the unit's gate and h_i its value, both affine, so t_i = gamma_i h_i(x) exactly.
Every activation pattern of x and of x' is a value of (gamma, eta): every region pair is
covered (unlike the paper's published code, whose reversed x/A inequalities leave only the
all-active region feasible). The big-M constants are not one large M but each constraint's
own tight bound: [Lg_i, Ug_i] is the range of g_i over the domain box, [Lh+_i, Uh+_i] the
range of h_i over the box intersected with the half-space g_i >= 0, and [Lh-_i, Uh-_i] over
the box intersected with g_i <= 0 (each a one-dimensional LP dual, solved exactly by
:func:`_extreme_on_halfspace`). A unit whose gate has one sign on the whole domain gets a
fixed gamma.

Valid rows tighten the relaxation without cutting any feasible point (the tests check rows
at sampled points): per unit, continuous lambda11, lambda01, lambda10 mark the pattern pair
(gamma, eta) = (1, 1), (0, 1), (1, 0), and t'_i - t_i <= U11 lambda11 + U01 lambda01 + U10
lambda10, where U11 = max over E of w_i^T e (both active, the value moves by w_i^T e), and a
flip needs the flipping point in the slab 0 <= g_i <= Delta_i (Delta_i = max over E of
a_i^T e): U01 and U10 are the value's extremes over the box and that slab (an LP each), and
the slab rows themselves are added with lambda01 / lambda10 as their indicators.

**Gate boundaries.** A gate is active where g_i(x) >= 0, so the gated form f jumps where x
crosses a gate hyperplane (the value x_aug^T (nu_i - omega_i) need not vanish there) and the
supremum is in general not attained: it is approached from the inactive side. The MILP admits
either activation on the hyperplane g_i(x) = 0, i.e. it maximises over the closure of every
region pair. For every region pair that contains a point (strict inequalities on the inactive
side), the closure's maximum equals the supremum over the region, so ``l_eps`` is that
supremum; a pattern realisable only on a boundary (degenerate, e.g. two gates with the same
hyperplane) can only raise it, so ``l_eps`` stays an upper bound. Because of the jumps, L_eps
of the gated form does not tend to 0 with eps: it tends to the largest sum of jumps that one
point of the domain sits on (at eps = 0 exactly nothing moves and L_eps = 0). The ReLU form
(``form="relu"``) is continuous and its L_eps does tend to 0.

The l2 ball is handled by outer approximation: the MILP is solved with linear cuts tangent to
the ball, adding the cut at each solution's perturbation until it lies in the ball (up to a
relative tolerance); every intermediate optimum is a certified upper bound.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp
from scipy.sparse import coo_matrix

from .._gated import GatedNetwork
from ._bounds import _flip_bounds, _unit_bounds, _UnitBounds
from ._domain import _Domain

_MIP_REL_GAP = 1e-6
_L2_TOLERANCE = 1e-6  # relative excess of a perturbation over the l2 ball accepted as inside
_L2_MAX_CUTS = 200


class _Rows:
    """Sparse constraint rows lb <= A v <= ub, collected one at a time."""

    def __init__(self) -> None:
        self.rows: list[int] = []
        self.cols: list[int] = []
        self.vals: list[float] = []
        self.lb: list[float] = []
        self.ub: list[float] = []

    def add(self, coefs: dict[int, float] | list[tuple[int, float]], lb: float, ub: float) -> None:
        row = len(self.lb)
        items = coefs.items() if isinstance(coefs, dict) else coefs
        for col, val in items:
            if val != 0:
                self.rows.append(row)
                self.cols.append(col)
                self.vals.append(float(val))
        self.lb.append(lb)
        self.ub.append(ub)

    def constraint(self, n_vars: int) -> LinearConstraint:
        matrix = coo_matrix((self.vals, (self.rows, self.cols)), shape=(len(self.lb), n_vars))
        return LinearConstraint(matrix.tocsr(), np.array(self.lb), np.array(self.ub))


@dataclass(frozen=True)
class _Layout:
    """Where each variable of the MILP sits in the variable vector."""

    ix: np.ndarray  # x (internal units)
    ixp: np.ndarray  # x'
    iabs: np.ndarray | None  # |x'_k - x_k| of the moving features (l1 and l2 only)
    igam: np.ndarray  # gamma: the units' activations at x
    ieta: np.ndarray  # eta: at x'
    it: np.ndarray  # t: the units' gated values at x
    itp: np.ndarray  # t': at x'
    il11: np.ndarray  # the pattern pair of each unit, (gamma, eta) = (1, 1), (0, 1), (1, 0)
    il01: np.ndarray
    il10: np.ndarray
    n_vars: int


@dataclass(frozen=True)
class _StabilityMilp(_Layout):
    """The MILP of the module docstring (its variables where :class:`_Layout` puts them), and
    the maps between its variables and points."""

    units: _UnitBounds
    dom: _Domain
    c: np.ndarray
    bounds: Bounds
    integrality: np.ndarray
    rows: _Rows
    perturbed: np.ndarray  # features that may move
    cuts: list[np.ndarray] = field(default_factory=list)

    def constraints(self) -> list[LinearConstraint]:
        return [self.rows.constraint(self.n_vars)]

    def point(self, x: np.ndarray, x_perturbed: np.ndarray) -> np.ndarray:
        """The variable vector of a pair of points (features' units), activations included."""
        dom, u = self.dom, self.units
        z = (np.asarray(x, float) - dom.center) / dom.half_width
        zp = (np.asarray(x_perturbed, float) - dom.center) / dom.half_width
        z = np.where(dom.upper > dom.lower, z, 0.0)
        zp = np.where(dom.upper > dom.lower, zp, 0.0)
        v = np.zeros(self.n_vars)
        v[self.ix], v[self.ixp] = z, zp
        if self.iabs is not None:
            v[self.iabs] = np.abs(zp - z)[self.perturbed]
        patterns = []
        for side, gam, t in ((z, self.igam, self.it), (zp, self.ieta, self.itp)):
            active = (side @ u.A + u.a0) >= 0
            v[gam] = active
            v[t] = active * (side @ u.W + u.w0)
            patterns.append(active)
        on, on_p = patterns
        v[self.il11], v[self.il01], v[self.il10] = on & on_p, ~on & on_p, on & ~on_p
        return v


def _layout(n_features: int, n_units: int, n_abs: int | None) -> _Layout:
    """Consecutive index blocks in the order of :class:`_Layout`'s fields (``n_abs`` None:
    no |x' - x| variables)."""
    next_index = 0

    def take(n: int) -> np.ndarray:
        nonlocal next_index
        idx = np.arange(next_index, next_index + n)
        next_index += n
        return idx

    ix, ixp = take(n_features), take(n_features)
    iabs = take(n_abs) if n_abs is not None else None
    igam, ieta, it, itp = (take(n_units) for _ in range(4))
    il11, il01, il10 = (take(n_units) for _ in range(3))
    return _Layout(ix, ixp, iabs, igam, ieta, it, itp, il11, il01, il10, n_vars=next_index)


def _variable_bounds(v: _Layout, units: _UnitBounds, dom: _Domain) -> tuple[Bounds, np.ndarray]:
    """Each variable's range (its activations fixed where a gate has one sign on the domain)
    and the integrality of gamma and eta."""
    lb = np.full(v.n_vars, -np.inf)
    ub = np.full(v.n_vars, np.inf)
    lb[v.ix], ub[v.ix] = dom.z_lower, dom.z_upper
    lb[v.ixp], ub[v.ixp] = dom.z_lower, dom.z_upper
    if v.iabs is not None:
        lb[v.iabs], ub[v.iabs] = 0.0, 2.0
    for gam in (v.igam, v.ieta, v.il11):  # lambda11 (both active) is fixed where gamma and eta are
        lb[gam] = np.where(units.always_on, 1.0, 0.0)
        ub[gam] = np.where(units.always_off, 0.0, 1.0)
    for t in (v.it, v.itp):  # t is 0 or a value of the unit where its gate is >= 0
        lb[t] = np.where(units.always_off, 0.0, np.minimum(units.h_on_lo, 0.0))
        ub[t] = np.where(units.always_off, 0.0, np.maximum(units.h_on_hi, 0.0))
    fixed = units.always_on | units.always_off
    for lam in (v.il01, v.il10):
        lb[lam], ub[lam] = 0.0, np.where(fixed, 0.0, 1.0)
    integrality = np.zeros(v.n_vars, dtype=int)
    integrality[v.igam] = integrality[v.ieta] = 1
    return Bounds(lb, ub), integrality


def _add_perturbation_rows(rows: _Rows, v: _Layout, dom: _Domain) -> None:
    """x' - x in E: a held feature does not move; a box per feature (inf, and l2's first
    cut); for l1 and l2, |x' - x| and the sum of its scaled entries."""
    zr = dom.z_radius
    moving = zr > 0
    k_abs = 0
    for k in range(len(v.ix)):
        if not moving[k]:
            rows.add({int(v.ixp[k]): 1.0, int(v.ix[k]): -1.0}, 0.0, 0.0)
            continue
        if dom.norm in ("inf", "2"):  # l2: the enclosing box is a valid first cut
            rows.add({int(v.ixp[k]): 1.0, int(v.ix[k]): -1.0}, -zr[k], zr[k])
        if v.iabs is not None:
            a = int(v.iabs[k_abs])
            rows.add({a: 1.0, int(v.ixp[k]): -1.0, int(v.ix[k]): 1.0}, 0.0, np.inf)
            rows.add({a: 1.0, int(v.ixp[k]): 1.0, int(v.ix[k]): -1.0}, 0.0, np.inf)
            k_abs += 1
    if v.iabs is not None:
        # l1: sum |e_k| / rho_k <= 1; l2: the same sum <= sqrt(m) holds on the ball
        limit = 1.0 if dom.norm == "1" else float(np.sqrt(moving.sum()))
        rows.add({int(a): 1.0 / zr[moving][j] for j, a in enumerate(v.iabs)}, -np.inf, limit)


def _add_unit_rows(rows: _Rows, v: _Layout, units: _UnitBounds) -> None:
    """t_i = gamma_i h_i(x) for every unit, at x (gamma, t) and then at x' (eta, t')."""
    for xs, gam, t in ((v.ix, v.igam, v.it), (v.ixp, v.ieta, v.itp)):
        for i in range(len(gam)):
            _add_gated_value_rows(rows, units, i, xs, int(gam[i]), int(t[i]))


def _add_gated_value_rows(
    rows: _Rows, units: _UnitBounds, i: int, xs: np.ndarray, g_i: int, t_i: int
) -> None:
    """The big-M rows of the module docstring for unit ``i`` at the point ``xs``."""
    d = len(xs)
    gate = [(int(xs[k]), units.A[k, i]) for k in range(d)]
    value = [(int(xs[k]), -units.W[k, i]) for k in range(d)]
    if units.always_off[i] or units.always_on[i]:
        # gamma is fixed; t = h where always on (t = 0 by its bounds where always off)
        if units.always_on[i]:
            rows.add([(t_i, 1.0), *value], units.w0[i], units.w0[i])
        return
    lg, ug = units.g_lo[i], units.g_hi[i]
    rows.add([*gate, (g_i, lg)], lg - units.a0[i], np.inf)  # g >= Lg (1 - gamma)
    rows.add([*gate, (g_i, -ug)], -np.inf, -units.a0[i])  # g <= Ug gamma
    rows.add([(t_i, 1.0), (g_i, -units.h_on_hi[i])], -np.inf, 0.0)
    rows.add([(t_i, 1.0), (g_i, -units.h_on_lo[i])], 0.0, np.inf)
    # t <= h - Lh- (1 - gamma)  and  t >= h - Uh- (1 - gamma)
    rows.add([(t_i, 1.0), *value, (g_i, -units.h_off_lo[i])], -np.inf,
             units.w0[i] - units.h_off_lo[i])
    rows.add([(t_i, 1.0), *value, (g_i, -units.h_off_hi[i])],
             units.w0[i] - units.h_off_hi[i], np.inf)


def _add_change_rows(rows: _Rows, v: _Layout, units: _UnitBounds, dom: _Domain) -> None:
    """Each unit's change t' - t, bounded per pattern pair (the valid rows of the module
    docstring): both on, W^T e <= |W|_E; a flip 0 -> 1 needs 0 <= g(x') <= Delta (Delta = the
    most e can move the gate), where h(x') <= Uh01; a flip 1 -> 0 needs 0 <= g(x) <= Delta,
    where -h(x) <= Uh10."""
    flips = _flip_bounds(units, dom)
    for i in np.flatnonzero(~(units.always_on | units.always_off)):
        l11, l01, l10 = int(v.il11[i]), int(v.il01[i]), int(v.il10[i])
        rows.add({l10: 1.0, l11: 1.0, int(v.igam[i]): -1.0}, 0.0, 0.0)
        rows.add({l01: 1.0, l11: 1.0, int(v.ieta[i]): -1.0}, 0.0, 0.0)
        rows.add({l01: 1.0, l10: 1.0, l11: 1.0}, -np.inf, 1.0)
        rows.add({int(v.itp[i]): 1.0, int(v.it[i]): -1.0, l11: -flips.both[i],
                  l01: -flips.up[i], l10: -flips.down[i]}, -np.inf, 0.0)
        delta, lg, ug = flips.reach[i], units.g_lo[i], units.g_hi[i]
        for xs, lam in ((v.ix, l10), (v.ixp, l01)):  # the flipping side lies in the slab
            gate = [(int(xs[k]), units.A[k, i]) for k in range(len(xs))]
            if ug > delta:
                rows.add([*gate, (lam, ug - delta)], -np.inf, ug - units.a0[i])
        for xs, lam in ((v.ixp, l10), (v.ix, l01)):  # the other side within Delta below 0
            gate = [(int(xs[k]), units.A[k, i]) for k in range(len(xs))]
            if lg < -delta:
                rows.add([*gate, (lam, lg + delta)], lg - units.a0[i], np.inf)


def _build_milp(net: GatedNetwork, dom: _Domain) -> _StabilityMilp:
    """The MILP of the module docstring for ``net`` on ``dom`` (no l2 cuts yet)."""
    units = _unit_bounds(net, dom)
    moving = dom.z_radius > 0
    n_moving = int(moving.sum())
    use_abs = dom.norm in ("1", "2") and n_moving > 0
    v = _layout(net.n_features, net.n_units, n_moving if use_abs else None)
    bounds, integrality = _variable_bounds(v, units, dom)
    rows = _Rows()
    _add_perturbation_rows(rows, v, dom)
    _add_unit_rows(rows, v, units)
    _add_change_rows(rows, v, units, dom)
    c = np.zeros(v.n_vars)
    c[v.it], c[v.itp] = 1.0, -1.0  # minimise sum t - sum t'
    return _StabilityMilp(**vars(v), units=units, dom=dom, c=c, bounds=bounds,
                          integrality=integrality, rows=rows, perturbed=moving)


def _solve(problem: _StabilityMilp, time_limit: float | None, node_limit: int | None):
    options = {"mip_rel_gap": _MIP_REL_GAP, "disp": False}
    if time_limit is not None:
        options["time_limit"] = max(float(time_limit), 1e-3)
    if node_limit is not None:
        options["node_limit"] = int(node_limit)
    return milp(problem.c, integrality=problem.integrality, bounds=problem.bounds,
                constraints=problem.constraints(), options=options)


def _l2_excess(problem: _StabilityMilp, z: np.ndarray, zp: np.ndarray) -> float:
    """||(z' - z) / rho_z||_2 over the moving features (1 on the sphere)."""
    moving = problem.perturbed
    if not moving.any():
        return 0.0
    return float(np.linalg.norm((zp - z)[moving] / problem.dom.z_radius[moving]))


def _add_l2_cut(problem: _StabilityMilp, z: np.ndarray, zp: np.ndarray) -> None:
    """The tangent cut n^T ((z' - z) / rho_z) <= 1 at the solution's direction n."""
    moving = np.flatnonzero(problem.perturbed)
    zr = problem.dom.z_radius
    scaled = (zp - z)[moving] / zr[moving]
    normal = scaled / np.linalg.norm(scaled)
    coefs: dict[int, float] = {}
    for j, k in enumerate(moving):
        coefs[int(problem.ixp[k])] = normal[j] / zr[k]
        coefs[int(problem.ix[k])] = -normal[j] / zr[k]
    problem.rows.add(coefs, -np.inf, 1.0)
    problem.cuts.append(normal)
