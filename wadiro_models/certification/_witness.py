"""``lower`` is the largest deviation |f(x) - f(x')| evaluated with the model's own convention at
an actual pair of points (the witness ``x``, ``x_perturbed``): the MILP's point moved a
little into its region pair's interior, where the closure's value is approached
(:mod:`._milp`, "Gate boundaries"); before the MILP runs, the best of sampled pairs.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import Bounds, milp

from .._gated import GatedNetwork
from ._domain import _Domain
from ._milp import _l2_excess, _Rows, _StabilityMilp

_NUDGES = (1e-9, 1e-7, 1e-5, 1e-3, 1e-2, 0.1, 0.5, 1.0)


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
    keep = np.zeros(n, dtype=bool)  # x, x', |x' - x| and tau: gamma, eta, t, t' play no part
    keep[problem.ix] = keep[problem.ixp] = keep[tau] = True
    if problem.iabs is not None:
        keep[problem.iabs] = True
    base = problem.rows
    by_row: dict[int, list[tuple[int, float]]] = {}
    for r, col, val in zip(base.rows, base.cols, base.vals, strict=True):
        by_row.setdefault(r, []).append((col, val))
    rows = _Rows()
    for r, items in by_row.items():  # the perturbation rows only
        if all(keep[col] for col, _ in items):
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
    lb = np.where(keep, lb, 0.0)
    ub = np.where(keep, ub, 0.0)
    c = np.zeros(n)
    c[tau] = -1.0
    result = milp(c, constraints=[rows.constraint(n)], bounds=Bounds(lb, ub))
    if result.x is None or result.status != 0 or -result.fun <= 0:
        return None
    return result.x[problem.ix], result.x[problem.ixp]


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
