"""Stability certification (paper, Section 6): the largest output change under a small input
perturbation, as an exact mixed-integer linear program solved by HiGHS (``scipy.optimize.milp``).

For a fitted network f (:mod:`wadiro_models._gated`), a box domain X and a perturbation set
E = {e : ||e / rho||_p <= 1} (``rho`` the per-feature radius; a feature with radius 0 is held
fixed)::

    L_eps = sup { |f(x + e) - f(x)| : x in X, x + e in X, e in E }

E is symmetric (e in E <=> -e in E), so swapping x and x + e shows that
L_eps = sup f(x + e) - f(x): one MILP, no binary for the absolute value.

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

``lower`` is the largest deviation |f(x) - f(x')| evaluated with the model's own convention at
an actual pair of points (the witness ``x``, ``x_perturbed``): the MILP's point moved a
little into its region pair's interior, where the closure's value is approached.

The l2 ball is handled by outer approximation: the MILP is solved with linear cuts tangent to
the ball, adding the cut at each solution's perturbation until it lies in the ball (up to a
relative tolerance); every intermediate optimum is a certified upper bound.

The search can be stopped by a time limit or a node limit (branch-and-bound nodes per solve);
``l_eps`` is then HiGHS's dual bound, still certified. A node limit gives the same numbers on
every run. The MILP is exact but grows hard quickly: networks of 5 gates are solved in a
fraction of a second, networks of 15 to 35 gates on 8 features leave a gap after a minute
(README, "Guarantees of a fit").
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, linprog, milp
from scipy.sparse import coo_matrix

from ._gated import GatedNetwork, gated_form, relu_form
from ._relu_network import ReluNetwork
from .exceptions import InvalidInputError

Norm = Literal["inf", "1", "2"]
Form = Literal["gated", "relu"]

_MIP_REL_GAP = 1e-6
_L2_TOLERANCE = 1e-6  # relative excess of a perturbation over the l2 ball accepted as inside
_L2_MAX_CUTS = 200
_NUDGES = (1e-9, 1e-7, 1e-5, 1e-3, 1e-2, 0.1, 0.5, 1.0)


@dataclass(frozen=True)
class StabilityCertificate:
    """The result of :func:`certify_stability`, in the units of y.

    Attributes
    ----------
    l_eps : float
        Certified upper bound on L_eps: the MILP's optimum when ``status == "optimal"``,
        otherwise the solver's best bound when it stopped.
    lower : float
        The largest deviation |f(x) - f(x_perturbed)| found at an actual pair of points.
    status : {"optimal", "time_limit", "node_limit", "cut_limit"}
        ``"optimal"``: ``l_eps`` is L_eps (to a relative gap of 1e-6, and, for l2, a relative
        ball tolerance of 1e-6); ``"time_limit"`` / ``"node_limit"``: the time or node limit
        stopped the search and ``l_eps`` is only an upper bound; ``"cut_limit"``: the l2 outer
        approximation used its cuts before converging (``l_eps`` an upper bound).
    solve_time : float
        Wall-clock seconds spent building and solving.
    form : {"gated", "relu"}
    norm : {"inf", "1", "2"}
    x, x_perturbed : ndarray of shape (n_features,) or None
        The witness pair attaining ``lower`` (features' units).
    n_units : int
        Gated units of the network (gates, or hidden ReLU neurons).
    n_binaries : int
        Binary variables left after fixing the units whose gate has one sign on the domain.
    node_count : int
        Branch-and-bound nodes (summed over the l2 cuts' solves).
    n_cuts : int
        Tangent cuts added for the l2 ball (0 for the other norms).
    method : {"milp", "unit_bounds"}
        How ``l_eps`` was bounded (see :func:`certify_stability`).
    """

    l_eps: float
    lower: float
    status: str
    solve_time: float
    form: str
    norm: str
    x: np.ndarray | None = None
    x_perturbed: np.ndarray | None = None
    n_units: int = 0
    n_binaries: int = 0
    node_count: int = 0
    n_cuts: int = 0
    method: str = "milp"

    @property
    def gap(self) -> float:
        """``l_eps - lower`` (0 up to round-off when the supremum is attained)."""
        return float(self.l_eps - self.lower)

    @property
    def relative_gap(self) -> float:
        return float(self.gap / self.l_eps) if self.l_eps > 0 else 0.0


@dataclass(frozen=True)
class _Domain:
    """The box and the perturbation radii, and the map to internal units z = (x - c) / r."""

    lower: np.ndarray
    upper: np.ndarray
    radius: np.ndarray  # per-feature rho, features' units; 0 = fixed
    norm: str

    @property
    def center(self) -> np.ndarray:
        return (self.lower + self.upper) / 2

    @property
    def half_width(self) -> np.ndarray:
        half = (self.upper - self.lower) / 2
        return np.where(half > 0, half, 1.0)

    @property
    def z_lower(self) -> np.ndarray:
        return np.where(self.upper > self.lower, -1.0, 0.0)

    @property
    def z_upper(self) -> np.ndarray:
        return np.where(self.upper > self.lower, 1.0, 0.0)

    @property
    def z_radius(self) -> np.ndarray:
        """rho in internal units; 0 where the feature is fixed or the domain has no width."""
        return np.where(self.upper > self.lower, self.radius / self.half_width, 0.0)

    def to_original(self, z: np.ndarray) -> np.ndarray:
        return np.clip(self.center + self.half_width * z, self.lower, self.upper)


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
    """Per-unit constants of the MILP in internal units (see the module docstring)."""

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


@dataclass
class _StabilityMilp:
    """The MILP of the module docstring, and the maps between its variables and points."""

    units: _UnitBounds
    dom: _Domain
    n_vars: int
    ix: np.ndarray  # variable indices of x, x', |x' - x| (l1/l2), gamma, eta, t, t'
    ixp: np.ndarray
    iabs: np.ndarray | None
    igam: np.ndarray
    ieta: np.ndarray
    it: np.ndarray
    itp: np.ndarray
    il11: np.ndarray
    il01: np.ndarray
    il10: np.ndarray
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


def _build_milp(net: GatedNetwork, dom: _Domain) -> _StabilityMilp:
    units = _unit_bounds(net, dom)
    d, P = net.n_features, net.n_units
    zr = dom.z_radius
    moving = zr > 0
    n_moving = int(moving.sum())
    use_abs = dom.norm in ("1", "2") and n_moving > 0
    next_index = 0

    def take(n: int) -> np.ndarray:
        nonlocal next_index
        idx = np.arange(next_index, next_index + n)
        next_index += n
        return idx

    ix, ixp = take(d), take(d)
    iabs = take(n_moving) if use_abs else None
    igam, ieta, it, itp = take(P), take(P), take(P), take(P)
    # the pattern pair of each unit, (gamma, eta) = (1, 1), (0, 1), (1, 0): lambda11, 01, 10
    il11, il01, il10 = take(P), take(P), take(P)
    n_vars = next_index

    lb = np.full(n_vars, -np.inf)
    ub = np.full(n_vars, np.inf)
    lb[ix], ub[ix] = dom.z_lower, dom.z_upper
    lb[ixp], ub[ixp] = dom.z_lower, dom.z_upper
    if iabs is not None:
        lb[iabs], ub[iabs] = 0.0, 2.0
    for gam in (igam, ieta):
        lb[gam] = np.where(units.always_on, 1.0, 0.0)
        ub[gam] = np.where(units.always_off, 0.0, 1.0)
    for t in (it, itp):  # t is 0 or a value of the unit where its gate is >= 0
        lb[t] = np.where(units.always_off, 0.0, np.minimum(units.h_on_lo, 0.0))
        ub[t] = np.where(units.always_off, 0.0, np.maximum(units.h_on_hi, 0.0))
    for lam in (il11, il01, il10):
        lb[lam], ub[lam] = 0.0, 1.0
    fixed = units.always_on | units.always_off
    ub[il11] = np.where(units.always_off, 0.0, 1.0)
    lb[il11] = np.where(units.always_on, 1.0, 0.0)
    ub[il01] = np.where(fixed, 0.0, 1.0)
    ub[il10] = np.where(fixed, 0.0, 1.0)
    integrality = np.zeros(n_vars, dtype=int)
    integrality[igam] = integrality[ieta] = 1

    rows = _Rows()
    # the perturbation set
    k_abs = 0
    for k in range(d):
        if not moving[k]:
            rows.add({int(ixp[k]): 1.0, int(ix[k]): -1.0}, 0.0, 0.0)
            continue
        if dom.norm in ("inf", "2"):  # l2: the enclosing box is a valid first cut
            rows.add({int(ixp[k]): 1.0, int(ix[k]): -1.0}, -zr[k], zr[k])
        if use_abs:
            a = int(iabs[k_abs])
            rows.add({a: 1.0, int(ixp[k]): -1.0, int(ix[k]): 1.0}, 0.0, np.inf)
            rows.add({a: 1.0, int(ixp[k]): 1.0, int(ix[k]): -1.0}, 0.0, np.inf)
            k_abs += 1
    if use_abs:
        # l1: sum |e_k| / rho_k <= 1; l2: the same sum <= sqrt(m) holds on the ball
        limit = 1.0 if dom.norm == "1" else float(np.sqrt(n_moving))
        rows.add({int(a): 1.0 / zr[moving][j] for j, a in enumerate(iabs)}, -np.inf, limit)

    # the units, for both points
    A, W = units.A, units.W
    for xs, gam, t in ((ix, igam, it), (ixp, ieta, itp)):
        for i in range(P):
            gate = [(int(xs[k]), A[k, i]) for k in range(d)]
            value = [(int(xs[k]), -W[k, i]) for k in range(d)]
            g_i, t_i = int(gam[i]), int(t[i])
            if units.always_off[i] or units.always_on[i]:
                # gamma is fixed; t = h where always on (t = 0 by its bounds where always off)
                if units.always_on[i]:
                    rows.add([(t_i, 1.0), *value], units.w0[i], units.w0[i])
                continue
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

    # each unit's change t' - t, bounded per pattern pair: both on, W^T e <= |W|_E; a flip
    # 0 -> 1 needs 0 <= g(x') <= Delta (Delta = the most e can move the gate), where
    # h(x') <= Uh01; a flip 1 -> 0 needs 0 <= g(x) <= Delta, where -h(x) <= Uh10
    flips = _flip_bounds(units, dom)
    for i in np.flatnonzero(~(units.always_on | units.always_off)):
        l11, l01, l10 = int(il11[i]), int(il01[i]), int(il10[i])
        rows.add({l10: 1.0, l11: 1.0, int(igam[i]): -1.0}, 0.0, 0.0)
        rows.add({l01: 1.0, l11: 1.0, int(ieta[i]): -1.0}, 0.0, 0.0)
        rows.add({l01: 1.0, l10: 1.0, l11: 1.0}, -np.inf, 1.0)
        rows.add({int(itp[i]): 1.0, int(it[i]): -1.0, l11: -flips.both[i],
                  l01: -flips.up[i], l10: -flips.down[i]}, -np.inf, 0.0)
        delta, lg, ug = flips.reach[i], units.g_lo[i], units.g_hi[i]
        for xs, lam in ((ix, l10), (ixp, l01)):  # the flipping side lies in the slab
            gate = [(int(xs[k]), A[k, i]) for k in range(d)]
            if ug > delta:
                rows.add([*gate, (lam, ug - delta)], -np.inf, ug - units.a0[i])
        for xs, lam in ((ixp, l10), (ix, l01)):  # the other side within Delta below 0
            gate = [(int(xs[k]), A[k, i]) for k in range(d)]
            if lg < -delta:
                rows.add([*gate, (lam, lg + delta)], lg - units.a0[i], np.inf)

    c = np.zeros(n_vars)
    c[it], c[itp] = 1.0, -1.0  # minimise sum t - sum t'
    return _StabilityMilp(
        units=units, dom=dom, n_vars=n_vars, ix=ix, ixp=ixp, iabs=iabs, igam=igam, ieta=ieta,
        it=it, itp=itp, il11=il11, il01=il01, il10=il10, c=c, bounds=Bounds(lb, ub),
        integrality=integrality, rows=rows,
        perturbed=moving,
    )


def _strict_point(
    problem: _StabilityMilp, gamma: np.ndarray, eta: np.ndarray
) -> tuple[np.ndarray, np.ndarray] | None:
    """A point of the region pair (gamma, eta) with every inactive gate strictly negative.

    Maximises the margin tau (<= 1) of the pattern's gate inequalities over the same x, x'
    and perturbation constraints (for l2, over the box inscribed in the ball). Returns (z, z')
    in internal units, or None when the pair has no such point (a boundary-only pattern).
    """
    u, dom = problem.units, problem.dom
    d = dom.lower.size
    n = problem.n_vars + 1
    tau = n - 1
    on_x = set(problem.ix.tolist()) | set(problem.ixp.tolist())
    if problem.iabs is not None:
        on_x |= set(problem.iabs.tolist())
    base = problem.rows
    by_row: dict[int, list[tuple[int, float]]] = {}
    for r, col, val in zip(base.rows, base.cols, base.vals, strict=True):
        by_row.setdefault(r, []).append((col, val))
    rows = _Rows()
    for r, items in by_row.items():  # the perturbation rows only
        if all(col in on_x for col, _ in items):
            rows.add(items, base.lb[r], base.ub[r])
    for xs, pattern in ((problem.ix, gamma), (problem.ixp, eta)):
        for i in range(u.A.shape[1]):
            if u.always_on[i] or u.always_off[i]:
                continue
            gate = [(int(xs[k]), u.A[k, i]) for k in range(d)]
            if pattern[i] > 0.5:  # g >= tau
                rows.add([*gate, (tau, -1.0)], -u.a0[i], np.inf)
            else:  # g <= -tau
                rows.add([*gate, (tau, 1.0)], -np.inf, -u.a0[i])
    if dom.norm == "2":
        zr, m = dom.z_radius, np.sqrt(max(problem.perturbed.sum(), 1))
        for k in np.flatnonzero(problem.perturbed):
            rows.add({int(problem.ixp[k]): 1.0, int(problem.ix[k]): -1.0}, -zr[k] / m, zr[k] / m)
    lb = np.append(problem.bounds.lb, -np.inf)
    ub = np.append(problem.bounds.ub, 1.0)
    keep = np.zeros(n, dtype=bool)
    keep[problem.ix] = keep[problem.ixp] = True
    if problem.iabs is not None:
        keep[problem.iabs] = True
    keep[tau] = True
    lb = np.where(keep, lb, 0.0)  # gamma, eta, t, t' play no part here
    ub = np.where(keep, ub, 0.0)
    c = np.zeros(n)
    c[tau] = -1.0
    result = milp(c, constraints=[rows.constraint(n)], bounds=Bounds(lb, ub))
    if result.x is None or result.status != 0 or -result.fun <= 0:
        return None
    return result.x[problem.ix], result.x[problem.ixp]


def _l2_excess(problem: _StabilityMilp, z: np.ndarray, zp: np.ndarray) -> float:
    """||(z' - z) / rho_z||_2 over the moving features (1 on the sphere)."""
    moving = problem.perturbed
    if not moving.any():
        return 0.0
    return float(np.linalg.norm((zp - z)[moving] / problem.dom.z_radius[moving]))


def _project_into(problem: _StabilityMilp, z: np.ndarray, zp: np.ndarray) -> np.ndarray:
    """z' moved towards z until z' - z lies in E (for l2 only; other sets are exact)."""
    if problem.dom.norm != "2":
        return zp
    size = _l2_excess(problem, z, zp)
    return z + (zp - z) / size if size > 1 else zp


def _witness(
    net: GatedNetwork, problem: _StabilityMilp, solution: np.ndarray
) -> tuple[float, np.ndarray, np.ndarray]:
    """The largest |f(x') - f(x)| at actual points near the MILP's solution."""
    dom = problem.dom
    z, zp = solution[problem.ix], solution[problem.ixp]
    candidates = [(z, _project_into(problem, z, zp))]
    strict = _strict_point(problem, solution[problem.igam], solution[problem.ieta])
    if strict is not None:
        for t in _NUDGES:
            qz = (1 - t) * z + t * strict[0]
            qzp = (1 - t) * zp + t * strict[1]
            candidates.append((qz, _project_into(problem, qz, qzp)))
    best = (-np.inf, None, None)
    for cz, czp in candidates:
        x, xp = dom.to_original(cz), dom.to_original(czp)
        xp = np.where(problem.perturbed, xp, x)
        deviation = float(abs(net.predict(xp)[0] - net.predict(x)[0]))
        if deviation > best[0]:
            best = (deviation, x, xp)
    return best


def _perturbation_directions(dom: _Domain, rng: np.random.Generator, n: int) -> np.ndarray:
    """``n`` perturbations on the boundary of E (features' units)."""
    rho = dom.radius * (dom.upper > dom.lower)
    moving = np.flatnonzero(rho > 0)
    e = np.zeros((n, rho.size))
    if moving.size == 0:
        return e
    if dom.norm == "inf":  # vertices of the box
        e[:, moving] = rng.choice([-1.0, 1.0], size=(n, moving.size)) * rho[moving]
    elif dom.norm == "1":  # vertices of the l1 ball
        k = rng.choice(moving, size=n)
        e[np.arange(n), k] = rng.choice([-1.0, 1.0], size=n) * rho[k]
    else:  # points of the sphere
        v = rng.standard_normal((n, moving.size))
        e[:, moving] = v / np.linalg.norm(v, axis=1, keepdims=True) * rho[moving]
    return e


def _sampled_lower(
    net: GatedNetwork, dom: _Domain, seed: int = 0, n: int = 128
) -> tuple[float, np.ndarray, np.ndarray]:
    """The largest deviation over random pairs, and over pairs straddling each gate's
    hyperplane (where the gated form jumps); a cheap floor before the MILP runs."""
    rng = np.random.default_rng(seed)
    lo, hi = dom.lower, dom.upper
    points = [rng.uniform(lo, hi, size=(n, lo.size))]
    base = rng.uniform(lo, hi, size=(n, lo.size))
    norms = np.sum(net.A**2, axis=0)
    for i in np.flatnonzero(norms > 0):  # project onto each gate's hyperplane
        step = (base @ net.A[:, i] + net.a0[i]) / norms[i]
        points.append(np.clip(base - step[:, None] * net.A[:, i], lo, hi))
    x = np.vstack(points)
    e = _perturbation_directions(dom, rng, x.shape[0])
    best = (0.0, x[0], x[0])
    for start in (x - e / 2, x):  # straddling the point, and starting at it
        a = np.clip(start, lo, hi)
        b = np.clip(a + e, lo, hi)  # clipping shrinks e componentwise: it stays in E
        dev = np.abs(net.predict(b) - net.predict(a))
        j = int(np.argmax(dev))
        if dev[j] > best[0]:
            best = (float(dev[j]), a[j], b[j])
    return best


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
    flips = _flip_bounds(units, dom)
    change = np.where(units.always_off, 0.0, flips.both)
    flippable = ~(units.always_on | units.always_off)
    change[flippable] = np.maximum.reduce([flips.both[flippable], flips.up[flippable],
                                           flips.down[flippable]])
    return float(np.sum(np.maximum(change, 0.0)))


def _solve(problem: _StabilityMilp, time_limit: float | None, node_limit: int | None):
    options = {"mip_rel_gap": _MIP_REL_GAP, "disp": False}
    if time_limit is not None:
        options["time_limit"] = max(float(time_limit), 1e-3)
    if node_limit is not None:
        options["node_limit"] = int(node_limit)
    return milp(problem.c, integrality=problem.integrality, bounds=problem.bounds,
                constraints=problem.constraints(), options=options)


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


def _domain(net: GatedNetwork, domain, eps, norm: str) -> _Domain:
    d = net.n_features
    try:
        lower, upper = (np.asarray(bound, dtype=float) for bound in domain)
    except (TypeError, ValueError):
        raise InvalidInputError("domain must be a pair (lower, upper) of per-feature bounds")
    lower, upper = np.broadcast_to(lower, (d,)).copy(), np.broadcast_to(upper, (d,)).copy()
    radius = np.broadcast_to(np.asarray(eps, dtype=float), (d,)).copy()
    if not (np.isfinite(lower).all() and np.isfinite(upper).all()):
        raise InvalidInputError("the domain must be a bounded box (finite bounds)")
    if (upper < lower).any():
        raise InvalidInputError("every domain upper bound must be >= its lower bound")
    if not np.isfinite(radius).all() or (radius < 0).any():
        raise InvalidInputError("eps must be finite and >= 0 (0 holds a feature fixed)")
    if norm not in ("inf", "1", "2"):
        raise InvalidInputError(f"norm must be 'inf', '1' or '2', not {norm!r}")
    return _Domain(lower, upper, radius, norm)


def _network(model, form: str) -> GatedNetwork:
    if isinstance(model, GatedNetwork):
        return model
    if isinstance(model, ReluNetwork):
        return relu_form(model)
    if not hasattr(model, "gates_"):
        raise InvalidInputError(
            "certify_stability needs a fitted WaDiRoSCNN or SCNN, or a ReluNetwork"
        )
    if form == "relu":
        return relu_form(model.to_relu_network())
    if form != "gated":
        raise InvalidInputError(f"form must be 'gated' or 'relu', not {form!r}")
    return gated_form(model)


def certify_stability(
    model,
    domain=None,
    eps: float | np.ndarray = 0.0,
    norm: Norm = "inf",
    time_limit: float | None = None,
    *,
    node_limit: int | None = None,
    form: Form = "gated",
    method: str = "milp",
) -> StabilityCertificate:
    """Certify L_eps = sup |f(x + e) - f(x)| over x, x + e in ``domain`` and e in the ball.

    Solved exactly as a mixed-integer linear program with HiGHS; how every activation region
    is covered, how the big-M constants are derived and how gate boundaries are treated is in
    the module docstring of :mod:`wadiro_models._certification`. In short: the gated form
    jumps on gate hyperplanes, L_eps is then a supremum approached from the inactive side
    (it does not vanish as eps -> 0), and the certificate is that supremum; the ReLU form is
    continuous.

    Parameters
    ----------
    model : fitted WaDiRoSCNN or SCNN, or ReluNetwork
        The network to certify. A ``ReluNetwork`` (``model.to_relu_network()``) is always
        certified in its ReLU form.
    domain : pair of array-like of shape (n_features,), or None
        Per-feature lower and upper bounds of X in the units of the features the model was
        fitted on. None: the training data's range (``feature_min_``, ``feature_max_``).
    eps : float or array-like of shape (n_features,)
        Perturbation radius in the same units, one for all features or one per feature; E is
        ``{e : ||e / eps||_norm <= 1}`` with e_k = 0 where eps_k = 0 (the feature is held
        fixed). A scalar eps with ``norm="1"`` is the ball sum |e_k| <= eps.
    norm : {"inf", "1", "2"}, default="inf"
        The perturbation set: a box, an l1 ball or an l2 ball (outer approximation by tangent
        cuts, see the module docstring).
    time_limit : float, default=None
        Seconds for the solver. When it stops the search, ``status`` is ``"time_limit"``,
        ``l_eps`` the certified upper bound and ``lower`` the best deviation found.
    node_limit : int, default=None
        Branch-and-bound nodes per MILP solve. Unlike a time limit, a node limit gives the
        same certificate on every run; when it stops the search, ``status`` is
        ``"node_limit"`` and ``l_eps`` the certified upper bound.
    form : {"gated", "relu"}, default="gated"
        Certify the network as ``predict`` computes it (gated by the stored gates), or its
        mapped ReLU network (``to_relu_network()``, continuous).
    method : {"milp", "unit_bounds"}, default="milp"
        ``"milp"``: the exact MILP (above). ``"unit_bounds"``: the sum over units of each
        unit's largest possible change (from the MILP's own per-unit constants, a few small
        LPs): a true upper bound, never below the MILP's, computed in milliseconds rather than
        seconds, but looser because it lets every unit take its worst case at its own point;
        ``status`` is then ``"unit_bounds"``, and time and node limits do not apply.

    Returns
    -------
    certificate : StabilityCertificate
        ``l_eps`` (upper bound), ``lower`` (attained), ``status``, ``solve_time``, the gap
        and the witness pair, in the units of y.
    """
    started = time.perf_counter()
    net = _network(model, form)
    if domain is None:
        if not hasattr(model, "feature_min_"):
            raise InvalidInputError("give a domain: this model does not store its training range")
        domain = (model.feature_min_, model.feature_max_)
    dom = _domain(net, domain, eps, norm)
    if not np.any(dom.z_radius > 0):  # nothing moves: f(x + 0) = f(x)
        point = dom.center
        return StabilityCertificate(
            l_eps=0.0, lower=0.0, status="optimal", solve_time=time.perf_counter() - started,
            form="relu" if net.continuous else "gated", norm=norm, x=point, x_perturbed=point,
            n_units=net.n_units,
        )
    if method == "unit_bounds":
        bound = _unit_sum_bound(_unit_bounds(net, dom), dom)
        lower, x, xp = _sampled_lower(net, dom)
        return StabilityCertificate(
            l_eps=float(max(bound * net.scale, lower)), lower=float(lower), status="unit_bounds",
            solve_time=time.perf_counter() - started, form="relu" if net.continuous else "gated",
            norm=norm, x=x, x_perturbed=xp, n_units=net.n_units, method=method,
        )
    if method != "milp":
        raise InvalidInputError(f"method must be 'milp' or 'unit_bounds', not {method!r}")
    problem = _build_milp(net, dom)
    n_binaries = int(np.sum(problem.bounds.ub[problem.igam] > problem.bounds.lb[problem.igam])
                     + np.sum(problem.bounds.ub[problem.ieta] > problem.bounds.lb[problem.ieta]))
    node_count, status = 0, "optimal"
    best_bound = _trivial_bound(problem.units)
    lower, x, xp = _sampled_lower(net, dom)
    while True:
        remaining = None if time_limit is None else time_limit - (time.perf_counter() - started)
        if remaining is not None and remaining <= 0:
            status = "time_limit"
            break
        result = _solve(problem, remaining, node_limit)
        node_count += int(getattr(result, "mip_node_count", 0) or 0)
        stopped = result.status == 1 or (result.status == 4 and "limit" in result.message)
        if result.status not in (0, 1) and not stopped:
            raise RuntimeError(f"stability MILP failed: {result.message}")
        dual = result.mip_dual_bound if result.mip_dual_bound is not None else result.fun
        if dual is not None and np.isfinite(dual):
            # every solve's bound is valid (each outer approximation contains the ball)
            best_bound = min(best_bound, -float(dual))
        if result.x is not None:
            found, wx, wxp = _witness(net, problem, result.x)
            if found > lower:
                lower, x, xp = found, wx, wxp
        if stopped:
            out_of_time = time_limit is not None and time.perf_counter() - started >= time_limit
            status = "time_limit" if out_of_time or node_limit is None else "node_limit"
            break
        z, zp = result.x[problem.ix], result.x[problem.ixp]
        if norm != "2" or _l2_excess(problem, z, zp) <= 1 + _L2_TOLERANCE:
            break
        if len(problem.cuts) >= _L2_MAX_CUTS:
            status = "cut_limit"
            break
        _add_l2_cut(problem, z, zp)
    # an attained deviation is a floor for L_eps: it absorbs the solver's round-off
    l_eps = max(best_bound * net.scale, lower)
    return StabilityCertificate(
        l_eps=float(l_eps),
        lower=float(lower), status=status, solve_time=time.perf_counter() - started,
        form="relu" if net.continuous else "gated", norm=norm, x=x, x_perturbed=xp,
        n_units=net.n_units, n_binaries=n_binaries, node_count=node_count,
        n_cuts=len(problem.cuts),
    )
