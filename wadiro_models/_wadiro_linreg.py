"""Wasserstein distributionally robust linear regression (l1 loss).

The linear counterpart of WaDiRo-SCNN (Chen & Paschalidis; paper, Section 3): with
beta = (w, b, -1) and the samples z_j = (x_j, 1, y_j)::

    minimise  radius * ||beta||_*  +  (1/N) sum_j |x_j^T w + b - y_j|

``||.||_*`` is l_inf for ``wasserstein="l1"`` and l2 for ``"l2"``; b is left out of beta
when ``fit_intercept`` is False. Solved by cvxpy + Clarabel, and checked by the same status
check as the convex networks (:mod:`wadiro_models._status`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from numbers import Real

import clarabel
import cvxpy as cp
import numpy as np
import scipy.sparse as sp
from sklearn.utils._param_validation import Interval, StrOptions

from ._scaling import Standardization
from ._status import check_solution
from ._validation import FITTED_ATTRIBUTES_DOC, Regressor, estimator_parameters, parameter
from .solvers._clarabel import run_clarabel


@dataclass
class LinearSolution:
    """The solver's answer in program units: ``y_hat = X w + b`` on the standardised data."""

    coef: np.ndarray
    intercept: float
    objective: float
    status: str
    solver: str
    iterations: int | None = None
    info: dict = field(default_factory=dict)

    @property
    def finite(self) -> bool:
        return bool(np.isfinite(self.coef).all() and np.isfinite(self.intercept))


def solve_linear(
    X: np.ndarray,
    y: np.ndarray,
    *,
    radius: float,
    wasserstein: str,
    fit_intercept: bool,
    settings: dict,
) -> LinearSolution:
    """Solve the module's program on (X, y) with Clarabel; a failure is a status, not raised."""
    n, d = X.shape
    w = cp.Variable(d)
    b = cp.Variable() if fit_intercept else None
    fitted = X @ w + b if b is not None else X @ w
    parts = [w] + ([cp.reshape(b, (1,), order="C")] if b is not None else []) + [np.ones(1)]
    dual_norm = cp.norm(cp.hstack(parts), "inf" if wasserstein == "l1" else 2)
    objective = cp.sum(cp.abs(fitted - y)) / n + radius * dual_norm
    problem = cp.Problem(cp.Minimize(objective))
    run = run_clarabel(problem, settings)
    if run.status in ("optimal", "optimal_inaccurate") and w.value is not None:
        coef = np.asarray(w.value, dtype=float)
        intercept = float(b.value) if b is not None else 0.0
        value = float(problem.value)
    else:
        coef, intercept, value = np.full(d, np.nan), float("nan"), float("nan")
    return LinearSolution(coef, intercept, value, run.status, "clarabel", run.iterations,
                          run.info)


_CLARABEL_STATUS = {
    "Solved": "optimal",
    "AlmostSolved": "optimal_inaccurate",
    "PrimalInfeasible": "infeasible",
    "AlmostPrimalInfeasible": "infeasible",
    "DualInfeasible": "unbounded",
    "AlmostDualInfeasible": "unbounded",
}


def solve_linear_direct(
    X: np.ndarray,
    y: np.ndarray,
    *,
    radius: float,
    wasserstein: str,
    fit_intercept: bool,
    settings: dict,
) -> LinearSolution:
    """The program of :func:`solve_linear`, handed to Clarabel as matrices (no cvxpy compile,
    which costs more than the solve at this size). Variables ``z = (w, b, t, s)``: ``t_j``
    bounds ``|x_j^T w + b - y_j|`` and ``s`` the dual norm of ``(w, b, -1)``::

        minimise (1/N) sum_j t_j + radius s
        s.t.     x_j^T w + b - t_j <= y_j,   -x_j^T w - b - t_j <= -y_j
                 l1: |w_k| <= s, |b| <= s, 1 <= s      l2: ||(w, b, 1)||_2 <= s
    """
    n, d = X.shape
    nb = 1 if fit_intercept else 0
    m = d + nb  # w and b
    cols = m + n + 1
    fitted = sp.hstack([sp.csc_matrix(X), sp.csc_matrix(np.ones((n, nb)))])
    eye_n = sp.identity(n, format="csc")
    absolute = sp.vstack([sp.hstack([fitted, -eye_n, sp.csc_matrix((n, 1))]),
                          sp.hstack([-fitted, -eye_n, sp.csc_matrix((n, 1))])])
    rhs = [y, -y]
    s_col = sp.csc_matrix(np.ones((1, 1)))
    if wasserstein == "l1":
        eye_m = sp.identity(m, format="csc")
        minus_s = sp.csc_matrix(-np.ones((m, 1)))
        norm = sp.vstack([sp.hstack([eye_m, sp.csc_matrix((m, n)), minus_s]),
                          sp.hstack([-eye_m, sp.csc_matrix((m, n)), minus_s]),
                          sp.hstack([sp.csc_matrix((1, m + n)), -s_col])])
        rhs += [np.zeros(2 * m), [-1.0]]
        cones = [clarabel.NonnegativeConeT(2 * n + 2 * m + 1)]
    else:
        norm = sp.vstack([sp.hstack([sp.csc_matrix((1, m + n)), -s_col]),
                          sp.hstack([-sp.identity(m, format="csc"), sp.csc_matrix((m, n + 1))]),
                          sp.csc_matrix((1, cols))])
        rhs += [np.zeros(1 + m), [1.0]]
        cones = [clarabel.NonnegativeConeT(2 * n), clarabel.SecondOrderConeT(m + 2)]
    A = sp.vstack([absolute, norm]).tocsc()
    q = np.concatenate([np.zeros(m), np.full(n, 1.0 / n), [radius]])
    options = clarabel.DefaultSettings()
    options.verbose = False
    for key, value in settings.items():
        setattr(options, key, value)
    solution = clarabel.DefaultSolver(sp.csc_matrix((cols, cols)), q, A,
                                      np.concatenate(rhs), cones, options).solve()
    status = _CLARABEL_STATUS.get(str(solution.status), "failed")
    z = np.asarray(solution.x, dtype=float)
    if status in ("optimal", "optimal_inaccurate") and np.isfinite(z).all():
        coef, intercept = z[:d], float(z[d]) if fit_intercept else 0.0
        beta = np.concatenate([coef, [intercept] if fit_intercept else [], [1.0]])
        dual = np.max(np.abs(beta)) if wasserstein == "l1" else np.linalg.norm(beta)
        value = float(np.mean(np.abs(X @ coef + intercept - y)) + radius * dual)
    else:
        coef, intercept, value = np.full(d, np.nan), float("nan"), float("nan")
    return LinearSolution(coef, intercept, value, status, "clarabel-direct",
                          int(solution.iterations), {"clarabel_status": str(solution.status)})


_SOLVERS = ("clarabel", "clarabel-direct")


@estimator_parameters
class WaDiRoLinearRegression(Regressor):
    __doc__ = f"""Wasserstein DRO linear regression, l1 loss (program in the module docstring).

    Parameters
    ----------
    radius : float, default=1e-2
        Radius of the Wasserstein ball (>= 0).

    wasserstein : {{"l1", "l2"}}, default="l1"
        Ground norm of the Wasserstein metric; the program is an LP for ``"l1"`` and an
        SOCP for ``"l2"``.

    fit_intercept : bool, default=True
        Learn the bias b (else b = 0 and it is left out of beta).

    standardize : bool, default=True
        Standardise X and y inside ``fit``; the coefficients are reported in the original
        units either way.

    solver : {{"clarabel", "clarabel-direct"}}, default="clarabel"
        ``"clarabel"`` writes the program in cvxpy, which compiles it for Clarabel;
        ``"clarabel-direct"`` gives Clarabel the program's matrices itself (the same program,
        several times faster at a building window's size, where compiling costs more than
        solving).

    solver_options : dict, default=None
        Clarabel settings (passed through cvxpy, or set on Clarabel's settings directly).

    accept_inaccurate : bool, default=False
        Keep a fit whose solver status is ``"optimal_inaccurate"`` (with an
        :class:`~wadiro_models.InaccurateSolutionWarning`) instead of raising
        :class:`~wadiro_models.SolverError`.

    Attributes
    ----------
    coef_ : ndarray of shape (n_features_in_,)
        Coefficients in the original units of X and y.

    intercept_ : float
        Intercept in the original units of y.

    objective_ : float
        Optimal value of the program, in program units.

    solver_status_ : str
        ``"optimal"``, or ``"optimal_inaccurate"`` when accepted.

    solver_name_ : str
        The solver that produced the fit (``"clarabel"`` or ``"clarabel-direct"``).

    n_iter_ : int or None
        Solver iterations, where the solver reports them.

{FITTED_ATTRIBUTES_DOC}
    See Also
    --------
    WaDiRoSCNN : The convex-network counterpart.

    Examples
    --------
    On an exact line the l1 loss recovers it; the coefficients are in the data's units.

    >>> import numpy as np
    >>> from wadiro_models import WaDiRoLinearRegression
    >>> X = np.linspace(0.0, 1.0, 20).reshape(-1, 1)
    >>> y = 2.0 * X[:, 0] + 1.0
    >>> model = WaDiRoLinearRegression(solver="clarabel-direct").fit(X, y)
    >>> print(np.round(model.coef_, 2), round(model.intercept_, 2))
    [2.] 1.0
    """

    radius: float = parameter(1e-2, [Interval(Real, 0, None, closed="left")])
    wasserstein: str = parameter("l1", [StrOptions({"l1", "l2"})])
    fit_intercept: bool = parameter(True, ["boolean"])
    standardize: bool = parameter(True, ["boolean"])
    solver: str = parameter("clarabel", [StrOptions(set(_SOLVERS))])
    solver_options: dict | None = parameter(None, [None, dict])
    accept_inaccurate: bool = parameter(False, ["boolean"])

    def _fit(self, X: np.ndarray, y: np.ndarray) -> None:
        scaling = Standardization.fit(X, y, self.standardize)
        solve = solve_linear if self.solver == "clarabel" else solve_linear_direct
        solution = solve(
            scaling.transform_X(X),
            scaling.transform_y(y),
            radius=self.radius,
            wasserstein=self.wasserstein,
            fit_intercept=self.fit_intercept,
            settings=self.solver_options or {},
        )
        check_solution(solution, accept_inaccurate=self.accept_inaccurate, constrained=False)
        self.coef_, self.intercept_ = scaling.linear_to_original(
            solution.coef, solution.intercept
        )
        self.objective_ = float(solution.objective)
        self.solver_status_ = solution.status
        self.solver_name_ = solution.solver
        self.n_iter_ = solution.iterations
