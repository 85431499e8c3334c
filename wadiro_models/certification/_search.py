"""The MILP's search: solved by HiGHS, with the l2 ball's cuts, until optimal or out of
limits; every solve's dual bound is kept as a certified upper bound, every solution's
witness as a floor."""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
from scipy.optimize import OptimizeResult

from .._gated import GatedNetwork
from ._bounds import _trivial_bound
from ._domain import _Domain
from ._milp import (
    _L2_MAX_CUTS,
    _L2_TOLERANCE,
    _add_l2_cut,
    _build_milp,
    _l2_excess,
    _solve,
    _StabilityMilp,
)
from ._witness import _sampled_lower, _witness


@dataclass(frozen=True)
class _Bound:
    """What a method found: the fields of a :class:`StabilityCertificate` that it decides
    (in the units of y)."""

    l_eps: float
    lower: float
    status: str
    x: np.ndarray | None
    x_perturbed: np.ndarray | None
    n_binaries: int = 0
    node_count: int = 0
    n_cuts: int = 0
    method: str = "milp"


@dataclass
class _Best:
    """The search so far: the smallest certified bound (internal units), the largest attained
    deviation and its witness pair, and the branch-and-bound nodes spent."""

    bound: float
    lower: float
    x: np.ndarray
    x_perturbed: np.ndarray
    node_count: int = 0

    def take(self, net: GatedNetwork, problem: _StabilityMilp, result: OptimizeResult) -> None:
        """Keep what one solve adds: its nodes, its dual bound, its solution's deviation."""
        self.node_count += int(getattr(result, "mip_node_count", 0) or 0)
        dual = result.mip_dual_bound if result.mip_dual_bound is not None else result.fun
        if dual is not None and np.isfinite(dual):
            # every solve's bound is valid (each outer approximation contains the ball)
            self.bound = min(self.bound, -float(dual))
        if result.x is not None:
            found, x, x_perturbed = _witness(net, problem, result.x)
            if found > self.lower:
                self.lower, self.x, self.x_perturbed = found, x, x_perturbed


def _stopped_by_a_limit(result: OptimizeResult) -> bool:
    """Whether HiGHS stopped on a time or node limit; raises if it failed otherwise."""
    stopped = result.status == 1 or (result.status == 4 and "limit" in result.message)
    if result.status not in (0, 1) and not stopped:
        raise RuntimeError(f"stability MILP failed: {result.message}")
    return stopped


def _n_binaries(problem: _StabilityMilp) -> int:
    """The activations (gamma, eta) not fixed by their bounds."""
    lb, ub = problem.bounds.lb, problem.bounds.ub
    return int(np.sum(ub[problem.igam] > lb[problem.igam])
               + np.sum(ub[problem.ieta] > lb[problem.ieta]))


def _after_optimum(problem: _StabilityMilp, solution: np.ndarray) -> str | None:
    """The status once a solve reached its optimum: ``"optimal"`` when its perturbation lies
    in the ball (always, but for l2), ``"cut_limit"`` when the l2 cuts are used up, None
    after adding the tangent cut at it (solve again)."""
    z, zp = solution[problem.ix], solution[problem.ixp]
    if problem.dom.norm != "2" or _l2_excess(problem, z, zp) <= 1 + _L2_TOLERANCE:
        return "optimal"
    if len(problem.cuts) >= _L2_MAX_CUTS:
        return "cut_limit"
    _add_l2_cut(problem, z, zp)
    return None


def _seconds_left(started: float, time_limit: float | None) -> float | None:
    return None if time_limit is None else time_limit - (time.perf_counter() - started)


def _by_milp(
    net: GatedNetwork,
    dom: _Domain,
    started: float,
    time_limit: float | None,
    node_limit: int | None,
) -> _Bound:
    """L_eps by the exact MILP, the time limit counted from ``started``."""
    problem = _build_milp(net, dom)
    n_binaries = _n_binaries(problem)
    best = _Best(_trivial_bound(problem.units), *_sampled_lower(net, dom))
    status = None
    while status is None:
        remaining = _seconds_left(started, time_limit)
        if remaining is not None and remaining <= 0:
            status = "time_limit"
            break
        result = _solve(problem, remaining, node_limit)
        stopped = _stopped_by_a_limit(result)
        best.take(net, problem, result)
        if stopped:
            out_of_time = time_limit is not None and time.perf_counter() - started >= time_limit
            status = "time_limit" if out_of_time or node_limit is None else "node_limit"
        else:
            status = _after_optimum(problem, result.x)
    # an attained deviation is a floor for L_eps: it absorbs the solver's round-off
    return _Bound(
        l_eps=max(best.bound * net.scale, best.lower), lower=best.lower, status=status,
        x=best.x, x_perturbed=best.x_perturbed, n_binaries=n_binaries,
        node_count=best.node_count, n_cuts=len(problem.cuts),
    )
