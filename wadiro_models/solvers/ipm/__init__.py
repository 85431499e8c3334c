"""Structure-exploiting primal-dual interior-point solver for the training program.

The program of :mod:`wadiro_models._program` is solved, times ``N``, in the conic standard form
``min c^T x  s.t.  G x + s = h, s in K`` with ``x = (nu, omega, b, t, tau)``: ``t_j`` bounds
``|y_hat_j - y_j|`` and ``tau`` bounds ``||beta||_*`` (the paper's ``c_j`` and ``a``), so
``c^T x = sum_j t_j + N radius tau``. ``K`` is an orthant (l1: an LP) or an orthant times one
second-order cone (l2: an SOCP); :mod:`._lifted` lists the rows of ``G x + s = h``. The dual
is ``max -h^T z  s.t.  G^T z + c = 0, z in K``.

The method (:mod:`._iterations`) is a primal-dual path-following method with Nesterov-Todd
scaling (:mod:`._cones`), Mehrotra's predictor-corrector and Gondzio's correctors, in a
homogeneous self-dual embedding (l1) or from an infeasible start (l2), both from the
least-squares points. Each step solves, with ``W`` the scaling and ``lambda = W z``::

    G^T dz = bx,    G dx + ds = bz,    lambda o (W dz + W^{-1} ds) = r_c

by the normal equations ``G^T W^{-2} G dx = ...``, which :mod:`._newton` reduces to one dense
Cholesky of size ``P (d+1) + 2`` (the expensive part is one matrix product forming the
weighted Gram blocks of the lifted features X_hat). Every solve is refined against the exact
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
