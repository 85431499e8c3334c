"""Structure-exploiting primal-dual interior-point solver for the WaDiRo-SCNN program.

The program (see :mod:`wadiro_models._program`) is written, times ``N``, as the cone program
(variables and rows in :mod:`wadiro_models.solvers.ipm._lifted`)::

    minimise   sum_j t_j + N radius tau
    s.t.       t_j >= |yl_j - y_j|,     yl = F (nu - omega) + b,    F = [D_1 X, ..., D_P X]
               (2 D_i - 1) * (X nu_i) >= 0,   (2 D_i - 1) * (X omega_i) >= 0
               lower <= yl <= upper,    |yl_j - yl_{j-1}| <= ramp_j
               l1:  tau >= 1, tau >= |e_k|      for every e_k in (nu, omega, b)
               l2:  tau >= ||(nu, omega, b, 1)||_2   (and the implied tau >= |e_k|)

i.e. ``min c^T x  s.t.  G x + s = h, s in K`` with ``K`` an orthant (l1: an LP) or an
orthant times one second-order cone (l2: an SOCP). Its dual is
``max -h^T z  s.t.  G^T z + c = 0, z in K``.

The method (:mod:`wadiro_models.solvers.ipm._iterations`) is a primal-dual path-following method
with Nesterov-Todd scaling, Mehrotra's predictor-corrector and Gondzio's correctors, in a
homogeneous self-dual embedding (l1) or from an infeasible start (l2), both from the
least-squares points. Each step solves, with ``W`` the scaling and ``lambda = W z``::

    G^T dz = bx,    G dx + ds = bz,    lambda o (W dz + W^{-1} ds) = r_c

by the normal equations ``G^T W^{-2} G dx = ...``, which :mod:`wadiro_models.solvers.ipm._newton`
reduces to one dense Cholesky of size ``P (d+1) + 2`` (the expensive part is one matrix
product forming the weighted Gram blocks of the lifted features). Every solve is refined against the exact
structured operator. BLAS runs on one thread inside the solver.

The answer is checked independently before it is returned: the program's own objective at
the weights, the largest constraint violation, the primal and dual residuals and the
duality gap. Anything unsupported (radius 0, penalties) or not accurate enough goes to the
reference path (cvxpy + Clarabel) and the result says so (``solver="ipm->clarabel"``, the
reason in ``info["fallback_reason"]``).
"""

from ._options import IpmOptions
from ._solve import solve_ipm, unsupported_reason

__all__ = ["IpmOptions", "solve_ipm", "unsupported_reason"]
