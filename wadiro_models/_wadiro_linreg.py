"""Wasserstein distributionally robust linear regression (l1 loss).

The linear counterpart of WaDiRo-SCNN (Chen & Paschalidis; paper, Section 3): with
beta = (w, b, -1) and the samples z_j = (x_j, 1, y_j)::

    minimise  radius * ||beta||_*  +  (1/N) sum_j |x_j^T w + b - y_j|

``||.||_*`` is l_inf for ``wasserstein="l1"`` and l2 for ``"l2"``; b is left out of beta
when ``fit_intercept`` is False. Solved by cvxpy + Clarabel.
"""

from __future__ import annotations

import time
import warnings
from numbers import Real

import cvxpy as cp
import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from ._scaling import Standardization
from ._validation import fit_data, predict_data
from .exceptions import InaccurateSolutionWarning, SolverError


class WaDiRoLinearRegression(RegressorMixin, BaseEstimator):
    """Wasserstein DRO linear regression with the l1 loss.

    Parameters
    ----------
    radius : radius of the Wasserstein ball (>= 0).
    wasserstein : ground norm of the Wasserstein metric, ``"l1"`` or ``"l2"``.
    fit_intercept : learn the bias b.
    standardize : standardise X and y inside ``fit`` (coefficients are reported in the
        original units).
    solver_options : Clarabel settings passed through cvxpy.
    accept_inaccurate : keep an ``optimal_inaccurate`` solve (with a warning).

    Attributes
    ----------
    coef_, intercept_ : the fitted model in the original units of X and y.
    objective_ : optimal value of the program (program units).
    solver_status_, fit_time_ : solver status and seconds spent in ``fit``.
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
        Xs, ys = scaling.transform_X(X), scaling.transform_y(y)
        n, d = Xs.shape

        w = cp.Variable(d)
        b = cp.Variable() if self.fit_intercept else None
        fitted = Xs @ w + b if b is not None else Xs @ w
        parts = [w] + ([cp.reshape(b, (1,), order="C")] if b is not None else []) + [np.ones(1)]
        dual_norm = cp.norm(cp.hstack(parts), "inf" if self.wasserstein == "l1" else 2)
        objective = cp.sum(cp.abs(fitted - ys)) / n + self.radius * dual_norm
        problem = cp.Problem(cp.Minimize(objective))
        try:
            problem.solve(solver=cp.CLARABEL, **(self.solver_options or {}))
        except cp.error.SolverError as exc:
            raise SolverError(f"Clarabel failed: {exc}", status="failed") from exc
        status = problem.status
        if status == cp.OPTIMAL_INACCURATE and self.accept_inaccurate:
            warnings.warn(
                "Clarabel stopped at reduced accuracy (optimal_inaccurate); accepted",
                InaccurateSolutionWarning,
                stacklevel=2,
            )
        elif status != cp.OPTIMAL or w.value is None:
            raise SolverError(f"Clarabel returned status {status!r}", status=str(status))

        w_std = np.asarray(w.value, dtype=float)
        b_std = float(b.value) if b is not None else 0.0
        self.coef_, self.intercept_ = scaling.linear_to_original(w_std, b_std)
        self.objective_ = float(problem.value)
        self.solver_status_ = "optimal" if status == cp.OPTIMAL else "optimal_inaccurate"
        self.fit_time_ = time.perf_counter() - started
        return self

    def predict(self, X: object) -> np.ndarray:
        check_is_fitted(self)
        return predict_data(self, X) @ self.coef_ + self.intercept_
