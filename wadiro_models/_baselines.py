"""The paper's baselines behind the same contract as the convex networks.

Both standardise X and y inside ``fit`` (like every model here), take the hyperparameter
names of the paper's Table "Hyperparameters of the building experiment", and expose
``solver_status_`` and ``fit_time_`` so the pipeline can record every model alike.
"""

from __future__ import annotations

import threading
import warnings
from numbers import Integral, Real

import numpy as np
from scipy.linalg import cho_solve, cholesky
from scipy.spatial.distance import cdist
from sklearn.exceptions import ConvergenceWarning
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import RBF, ExpSineSquared, Kernel, WhiteKernel
from sklearn.svm import LinearSVR
from sklearn.utils._param_validation import Interval, StrOptions

from ._scaling import Standardization
from ._validation import FITTED_ATTRIBUTES_DOC, Regressor, estimator_parameters, parameter
from .exceptions import SolverError


@estimator_parameters
class GaussianProcessBaseline(Regressor):
    __doc__ = f"""Gaussian process, kernel RBF + ExpSineSquared + WhiteKernel (paper, Appendix C).

    The hyperparameters come from tuning, so by default the kernel is used as given
    (``optimize=False``: no marginal-likelihood optimiser, no restarts); fitting is then one
    Cholesky factorisation of the N x N kernel matrix. The defaults lie inside the paper's
    search space.

    ExpSineSquared is positive definite only for one-dimensional inputs; on several features
    (as in the paper) the kernel matrix can be indefinite when the white noise does not
    dominate the negative eigenvalues. Such hyperparameters raise :class:`SolverError`
    (status ``"failed"``) naming the kernel, so a tuner can discard the trial.

    Parameters
    ----------
    length_scale : float, default=10.0
        Length scale of the RBF kernel.

    periodicity : float, default=10.0
        Period of the exp-sine-squared kernel.

    length_scale_sine : float, default=10.0
        Length scale of the exp-sine-squared kernel.

    noise_level : float, default=1.0
        Variance of the white-noise kernel.

    optimize : bool, default=False
        Let scikit-learn optimise the kernel hyperparameters (L-BFGS-B).

    n_restarts_optimizer : int, default=0
        Optimiser restarts when ``optimize`` is True.

    standardize : bool, default=True
        Standardise X and y inside ``fit`` (undone in ``predict``).

    random_state : int, RandomState instance or None, default=0
        Seed of the optimiser restarts.

    method : {{"sklearn", "cholesky"}}, default="sklearn"
        How a fit without optimiser is computed: by scikit-learn's
        ``GaussianProcessRegressor`` (which factorises the kernel matrix twice, once for its
        log-marginal likelihood), or by one Cholesky factorisation of the same kernel matrix,
        evaluated from one table of pairwise distances (the same model up to rounding, about
        half the work). ``optimize=True`` always uses scikit-learn.

    sample_every : int, default=1
        Fit on every ``sample_every``-th row of X, counted back from the last (the work grows
        with the cube of the rows; an hourly series thinned to every second hour keeps every
        day and week of the window).

    Attributes
    ----------
    gp_ : GaussianProcessRegressor or None
        The fitted scikit-learn model, on standardised data (None with ``method="cholesky"``).

    X_train_ : ndarray of shape (n_fitted, n_features_in_)
        The rows fitted on, standardised.

    dual_coef_ : ndarray of shape (n_fitted,)
        K^-1 y of the rows fitted on: the mean prediction at x is k(x, X_train_) @ dual_coef_.

    kernel_ : Kernel
        The kernel after fitting (equal to :meth:`kernel` unless ``optimize``).

    standardization_ : Standardization
        Means and scales of X and y.

    solver_status_ : str
        ``"optimal"`` (a failed factorisation raises instead).

{FITTED_ATTRIBUTES_DOC}
    Examples
    --------
    Both methods fit the same model:

    >>> import numpy as np
    >>> from wadiro_models import GaussianProcessBaseline
    >>> X = np.linspace(0.0, 6.0, 30).reshape(-1, 1)
    >>> y = np.sin(X[:, 0])
    >>> gp = GaussianProcessBaseline(length_scale=1.0, noise_level=1e-2).fit(X, y)
    >>> fast = GaussianProcessBaseline(length_scale=1.0, noise_level=1e-2,
    ...                                method="cholesky").fit(X, y)
    >>> bool(np.allclose(gp.predict(X), fast.predict(X)))
    True
    >>> bool(np.abs(gp.predict(X) - y).max() < 0.1)
    True
    """

    length_scale: float = parameter(10.0, [Interval(Real, 0, None, closed="neither")])
    periodicity: float = parameter(10.0, [Interval(Real, 0, None, closed="neither")])
    length_scale_sine: float = parameter(10.0, [Interval(Real, 0, None, closed="neither")])
    noise_level: float = parameter(1.0, [Interval(Real, 0, None, closed="neither")])
    optimize: bool = parameter(False, ["boolean"])
    n_restarts_optimizer: int = parameter(0, [Interval(Integral, 0, None, closed="left")])
    standardize: bool = parameter(True, ["boolean"])
    random_state: object = parameter(0, ["random_state"])
    method: str = parameter("sklearn", [StrOptions({"sklearn", "cholesky"})])
    sample_every: int = parameter(1, [Interval(Integral, 1, None, closed="left")])

    def kernel(self) -> Kernel:
        """The paper's kernel with this estimator's hyperparameters."""
        return (
            RBF(length_scale=self.length_scale)
            + ExpSineSquared(length_scale=self.length_scale_sine, periodicity=self.periodicity)
            + WhiteKernel(noise_level=self.noise_level)
        )

    def _fit(self, X: np.ndarray, y: np.ndarray) -> None:
        if self.sample_every > 1:
            X, y = X[::-1][::self.sample_every][::-1], y[::-1][::self.sample_every][::-1]
        scaling = Standardization.fit(X, y, self.standardize)
        X_std, y_std = scaling.transform_X(X), scaling.transform_y(y)
        try:
            if self.method == "cholesky" and not self.optimize:
                self.gp_, self.kernel_ = None, self.kernel()
                self.dual_coef_ = self._cholesky_fit(X_std, y_std)
            else:
                gp = GaussianProcessRegressor(
                    kernel=self.kernel(),
                    optimizer="fmin_l_bfgs_b" if self.optimize else None,
                    n_restarts_optimizer=self.n_restarts_optimizer if self.optimize else 0,
                    random_state=self.random_state,
                )
                gp.fit(X_std, y_std)
                self.gp_, self.kernel_, self.dual_coef_ = gp, gp.kernel_, gp.alpha_
        except np.linalg.LinAlgError as exc:
            raise SolverError(
                f"Gaussian process kernel {self.kernel()} gives a kernel matrix that is not "
                f"positive definite on these {X.shape[0]} samples ({exc})",
                status="failed",
            ) from exc
        self.X_train_ = X_std
        self.standardization_ = scaling
        self.solver_status_ = "optimal"

    def _kernel_matrix(self, A: np.ndarray, B: np.ndarray) -> np.ndarray:
        """RBF + ExpSineSquared between the rows of A and B, from one distance table (the
        white noise, which only the training matrix's diagonal holds, is added by the caller).
        """
        squared = cdist(A, B, metric="sqeuclidean")
        K = np.exp(squared * (-0.5 / self.length_scale**2))
        sine = np.sin(np.sqrt(squared) * (np.pi / self.periodicity))
        K += np.exp(sine**2 * (-2.0 / self.length_scale_sine**2))
        return K

    def _cholesky_fit(self, X: np.ndarray, y: np.ndarray) -> np.ndarray:
        K = self._kernel_matrix(X, X)
        K[np.diag_indices_from(K)] += self.noise_level + _GP_JITTER
        factor = cholesky(K, lower=True, check_finite=False, overwrite_a=True)
        return cho_solve((factor, True), y, check_finite=False)

    def _predict(self, X: np.ndarray) -> np.ndarray:
        scaling = self.standardization_
        X_std = scaling.transform_X(X)
        if self.gp_ is not None:
            return scaling.inverse_y(self.gp_.predict(X_std))
        return scaling.inverse_y(self._kernel_matrix(X_std, self.X_train_) @ self.dual_coef_)


def _svr_primal(X: np.ndarray, y: np.ndarray, *, C: float, loss: str, epsilon: float,
                fit_intercept: bool) -> tuple[np.ndarray, float, str, int]:
    """The linear SVR's primal as a quadratic program for Clarabel, variables
    ``z = (w, b, r)``: minimise ``1/2 ||(w, b)||^2 + C sum_j f(r_j)`` subject to
    ``r_j >= y_j - x_j^T w - b - epsilon``, ``r_j >= x_j^T w + b - y_j - epsilon``,
    ``r_j >= 0``, with ``f(r) = r`` (l1) or ``r^2`` (l2)."""
    import clarabel
    import scipy.sparse as sp

    n, d = X.shape
    m = d + (1 if fit_intercept else 0)
    design = sp.hstack([sp.csc_matrix(X), sp.csc_matrix(np.ones((n, m - d)))])
    eye = sp.identity(n, format="csc")
    A = sp.vstack([sp.hstack([-design, -eye]), sp.hstack([design, -eye]),
                   sp.hstack([sp.csc_matrix((n, m)), -eye])]).tocsc()
    rhs = np.concatenate([epsilon - y, epsilon + y, np.zeros(n)])
    quadratic = np.concatenate([np.ones(m), np.full(n, 2.0 * C if loss == "l2" else 0.0)])
    linear = np.concatenate([np.zeros(m), np.full(n, 0.0 if loss == "l2" else C)])
    settings = clarabel.DefaultSettings()
    settings.verbose = False
    solution = clarabel.DefaultSolver(sp.diags(quadratic, format="csc"), linear, A, rhs,
                                      [clarabel.NonnegativeConeT(3 * n)], settings).solve()
    status = {"Solved": "optimal", "AlmostSolved": "optimal_inaccurate"}.get(
        str(solution.status), "failed")
    z = np.asarray(solution.x, dtype=float)
    intercept = float(z[d]) if fit_intercept else 0.0
    return z[:d], intercept, status, int(solution.iterations)


_GP_JITTER = 1e-10
"""What scikit-learn's ``GaussianProcessRegressor`` adds to the kernel matrix's diagonal
(its ``alpha``)."""


_SVR_LOSS = {"l1": "epsilon_insensitive", "l2": "squared_epsilon_insensitive"}


_LIBLINEAR_LOCK = threading.Lock()


@estimator_parameters
class LinearSVRBaseline(Regressor):
    __doc__ = f"""Linear support vector regression (scikit-learn ``LinearSVR``), paper's baseline.

    Parameters
    ----------
    C : float, default=1.0
        Inverse regularisation strength.

    loss : {{"l1", "l2"}}, default="l1"
        ``"l1"`` is the epsilon-insensitive loss, ``"l2"`` the squared epsilon-insensitive
        loss.

    fit_intercept : bool, default=True
        Learn the bias.

    epsilon : float, default=0.0
        Half-width of the insensitive tube, in standardised units of y.

    standardize : bool, default=True
        Standardise X and y inside ``fit``; the coefficients are reported in the original
        units either way.

    max_iter : int, default=10_000
        Iteration limit of liblinear.

    tol : float, default=1e-4
        Stopping tolerance of liblinear.

    random_state : int, RandomState instance or None, default=0
        Seed of liblinear's coordinate order.

    solver : {{"liblinear", "clarabel", "auto"}}, default="liblinear"
        ``"liblinear"``: scikit-learn's ``LinearSVR`` (dual coordinate descent, which needs
        many passes for the l1 loss at a large C and may stop at ``max_iter``).
        ``"clarabel"``: the same program, in the primal, solved to optimality as a quadratic
        program by Clarabel: minimise ``1/2 ||(w, b)||^2 + C sum_j loss(r_j)`` with
        ``r_j = max(|y_j - x_j^T w - b| - epsilon, 0)`` and ``loss(r) = r`` (l1) or ``r^2``
        (l2); the bias is regularised as liblinear regularises it (``intercept_scaling=1``).
        ``"auto"``: Clarabel for the l1 loss, liblinear (whose primal solver converges in a
        few steps) for the l2 loss.

    Attributes
    ----------
    svr_ : LinearSVR or None
        The fitted scikit-learn model, on standardised data (None with ``solver="clarabel"``).

    coef_ : ndarray of shape (n_features_in_,)
        Coefficients in the original units of X and y.

    intercept_ : float
        Intercept in the original units of y.

    solver_status_ : str
        ``"optimal"``, or ``"max_iter"`` when liblinear stopped on its iteration limit (its
        :class:`~sklearn.exceptions.ConvergenceWarning` is recorded here, not re-emitted).

    n_iter_ : int
        Iterations liblinear ran.

{FITTED_ATTRIBUTES_DOC}
    Examples
    --------
    >>> import numpy as np
    >>> from wadiro_models import LinearSVRBaseline
    >>> X = np.linspace(-1.0, 1.0, 30).reshape(-1, 1)
    >>> y = 3.0 * X[:, 0] - 1.0
    >>> model = LinearSVRBaseline(C=10.0, solver="clarabel").fit(X, y)
    >>> print(np.round(model.coef_, 2), round(model.intercept_, 2))
    [3.] -1.0
    >>> model.solver_status_
    'optimal'
    """

    C: float = parameter(1.0, [Interval(Real, 0, None, closed="neither")])
    loss: str = parameter("l1", [StrOptions(set(_SVR_LOSS))])
    fit_intercept: bool = parameter(True, ["boolean"])
    epsilon: float = parameter(0.0, [Interval(Real, 0, None, closed="left")])
    standardize: bool = parameter(True, ["boolean"])
    max_iter: int = parameter(10_000, [Interval(Integral, 1, None, closed="left")])
    tol: float = parameter(1e-4, [Interval(Real, 0, None, closed="neither")])
    random_state: object = parameter(0, ["random_state"])
    solver: str = parameter("liblinear", [StrOptions({"liblinear", "clarabel", "auto"})])

    def _fit(self, X: np.ndarray, y: np.ndarray) -> None:
        # LinearSVR would take a sparse X; fit_data refused it (and NaN), as every model here
        scaling = Standardization.fit(X, y, self.standardize)
        X_std, y_std = scaling.transform_X(X), scaling.transform_y(y)
        if self.solver == "clarabel" or (self.solver == "auto" and self.loss == "l1"):
            coef, intercept, status, iterations = _svr_primal(
                X_std, y_std, C=self.C, loss=self.loss, epsilon=self.epsilon,
                fit_intercept=self.fit_intercept)
            if status != "optimal":
                raise SolverError(f"Clarabel could not solve the SVR program ({status})",
                                  status="failed")
            self.svr_ = None
        else:
            svr = LinearSVR(
                C=self.C,
                loss=_SVR_LOSS[self.loss],
                fit_intercept=self.fit_intercept,
                epsilon=self.epsilon,
                dual=True if self.loss == "l1" else "auto",
                max_iter=self.max_iter,
                tol=self.tol,
                random_state=self.random_state,
            )
            # liblinear draws from the C library's process-wide random generator, so two fits
            # on different threads would disturb each other's results; catch_warnings is
            # process-wide too. One fit at a time per process keeps every fit reproducible.
            with _LIBLINEAR_LOCK, warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", ConvergenceWarning)
                svr.fit(X_std, y_std)
            converged = True
            for caught_warning in caught:
                if issubclass(caught_warning.category, ConvergenceWarning):
                    converged = False
                else:
                    # stacklevel: past _fit, _timed_fit, fit and _fit_context's wrapper, to the
                    # caller of fit
                    warnings.warn(caught_warning.message, caught_warning.category, stacklevel=5)
            self.svr_ = svr
            coef, intercept = svr.coef_.ravel(), float(np.ravel(svr.intercept_)[0])
            status, iterations = "optimal" if converged else "max_iter", int(svr.n_iter_)
        self.coef_, self.intercept_ = scaling.linear_to_original(coef, intercept)
        self.solver_status_, self.n_iter_ = status, iterations
