"""Wasserstein distributionally robust linear regression (l1 loss).

The linear counterpart of WaDiRo-SCNN (Chen & Paschalidis; paper, Section 3): with
beta = (w, b, -1) and the samples z_j = (x_j, 1, y_j)::

    minimise  radius * ||beta||_*  +  (1/N) sum_j |x_j^T w + b - y_j|

``||.||_*`` is l_inf for ``wasserstein="l1"`` and l2 for ``"l2"``; b is left out of beta
when ``fit_intercept`` is False. Solved by cvxpy + Clarabel, and checked by the same status
check as the convex networks (:mod:`wadiro_models._status`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from numbers import Real

import cvxpy as cp
import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from ._scaling import Standardization
from ._status import check_solution
from ._validation import fit_data, predict_data
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


class WaDiRoLinearRegression(RegressorMixin, BaseEstimator):
    """Wasserstein DRO linear regression with the l1 loss (program in the module docstring).

    Parameters
    ----------
    radius : float, default=1e-2
        Radius of the Wasserstein ball (>= 0).

    wasserstein : {"l1", "l2"}, default="l1"
        Ground norm of the Wasserstein metric; the program is an LP for ``"l1"`` and an
        SOCP for ``"l2"``.

    fit_intercept : bool, default=True
        Learn the bias b (else b = 0 and it is left out of beta).

    standardize : bool, default=True
        Standardise X and y inside ``fit``; the coefficients are reported in the original
        units either way.

    solver_options : dict, default=None
        Clarabel settings, passed through cvxpy.

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
        The solver that produced the fit (``"clarabel"``).

    n_iter_ : int or None
        Solver iterations, where the solver reports them.

    fit_time_ : float
        Seconds spent in ``fit``.

    n_features_in_ : int
        Number of features seen during ``fit``.

    feature_names_in_ : ndarray of shape (n_features_in_,)
        Names of features seen during ``fit``; defined only when X has feature names that
        are all strings.

    See Also
    --------
    WaDiRoSCNN : The convex-network counterpart.
    """

    _parameter_constraints: dict = {
        "radius": [Interval(Real, 0, None, closed="left")],
        "wasserstein": [StrOptions({"l1", "l2"})],
        "fit_intercept": ["boolean"],
        "standardize": ["boolean"],
        "solver_options": [None, dict],
        "accept_inaccurate": ["boolean"],
    }

    def __init__(
        self,
        *,
        radius: float = 1e-2,
        wasserstein: str = "l1",
        fit_intercept: bool = True,
        standardize: bool = True,
        solver_options: dict | None = None,
        accept_inaccurate: bool = False,
    ) -> None:
        self.radius = radius
        self.wasserstein = wasserstein
        self.fit_intercept = fit_intercept
        self.standardize = standardize
        self.solver_options = solver_options
        self.accept_inaccurate = accept_inaccurate

    def fit(self, X: object, y: object) -> WaDiRoLinearRegression:
        self._validate_params()
        started = time.perf_counter()
        X, y = fit_data(self, X, y)
        scaling = Standardization.fit(X, y, self.standardize)
        solution = solve_linear(
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
        self.fit_time_ = time.perf_counter() - started
        return self

    def predict(self, X: object) -> np.ndarray:
        check_is_fitted(self)
        return predict_data(self, X) @ self.coef_ + self.intercept_
