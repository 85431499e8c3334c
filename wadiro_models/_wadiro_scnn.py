"""WaDiRo-SCNN: the Wasserstein distributionally robust shallow convex network."""

from __future__ import annotations

from numbers import Real

from sklearn.utils._param_validation import Interval, StrOptions

from ._scnn_base import ConvexNetworkRegressor


class WaDiRoSCNN(ConvexNetworkRegressor):
    """Shallow convex ReLU network trained by Wasserstein DRO (paper, Proposition 1).

    ``fit`` solves the training program of :mod:`wadiro_models._program` (Wasserstein term
    ``radius * ||beta||_*`` plus the mean absolute error, gate cones, optional bounds and
    ramps) on the standardised data, with the gates drawn from ``random_state``;
    :meth:`build_program` returns that program without solving it. Both also take bound
    points (``bound_X`` with ``bound_lower``/``bound_upper``): inputs beyond the training
    set, such as the week to forecast, where the prediction must respect bounds too.

    Parameters
    ----------
    radius : float, default=1e-2
        Radius of the Wasserstein ball (>= 0; 0 gives the unregularised network).

    max_neurons : int, default=30
        Hidden units: ``ceil(max_neurons / 2)`` Gaussian gates are drawn and each kept gate
        gives a nu- and an omega-neuron (an odd value rounds up by one unit). Gates with
        duplicate or all-zero patterns on the training data are dropped.

    wasserstein : {"l1", "l2"}, default="l1"
        Ground norm of the Wasserstein metric; the program is an LP for ``"l1"`` and an
        SOCP for ``"l2"``.

    lower_bound : float or array-like of shape (n_samples,), default=None
        Hard lower bound on the training predictions, in the units of y (``-inf`` where
        absent).

    upper_bound : float or array-like of shape (n_samples,), default=None
        Hard upper bound on the training predictions, in the units of y (``inf`` where
        absent).

    ramp : float or array-like of shape (n_samples - 1,), default=None
        Hard limit on ``|y_hat_j - y_hat_{j-1}|`` between consecutive training rows, in the
        units of y (``inf`` where absent).

    fit_intercept : bool, default=True
        Learn the output bias b (else b = 0 and it is left out of beta). b lives in program
        units: with ``standardize=True`` the mean of y is restored either way.

    standardize : bool, default=True
        Standardise X per column and y inside ``fit`` (undone in ``predict``; the
        constraints are converted exactly). With False, ``objective_`` is the program's
        value on the data as given.

    random_state : int, RandomState instance or None, default=0
        Seed of the Gaussian gates ``S ~ N(0, I)``. An int gives the same gates in every
        ``fit`` and :meth:`build_program`.

    solver : str, default="clarabel"
        A name from the solver registry (``"clarabel"``: the cvxpy + Clarabel reference
        path; ``"ipm"``: the structured interior-point method).

    solver_options : dict, default=None
        Keyword arguments for the solver (for Clarabel its settings, e.g.
        ``{"tol_gap_abs": 1e-10, "tol_gap_rel": 1e-10, "tol_feas": 1e-10}``; for
        ``"ipm"`` the fields of :class:`~wadiro_models.IpmOptions`).

    accept_inaccurate : bool, default=False
        Keep a fit whose solver status is ``"optimal_inaccurate"`` (with an
        :class:`~wadiro_models.InaccurateSolutionWarning`) instead of raising
        :class:`~wadiro_models.SolverError`.

    constraint_margin : float, default=1e-6
        The bounds and ramps are imposed this much tighter, in program units (standardised
        y), so that solver round-off never appears as a violation; 0 gives the exact
        program. ``objective_`` is the value of the program actually solved.

    Attributes
    ----------
    gates_ : ndarray of shape (n_features_in_ + 1, n_gates_)
        Kept gate vectors; the last row multiplies the bias column.

    n_gates_ : int
        Number of kept gates (P).

    nu_ : ndarray of shape (n_gates_, n_features_in_ + 1)
        Weights of the nu-neurons, in program units.

    omega_ : ndarray of shape (n_gates_, n_features_in_ + 1)
        Weights of the omega-neurons, in program units.

    intercept_ : float
        Output bias b, in program units.

    standardization_ : Standardization
        Means and scales that map the data to program units.

    objective_ : float
        Optimal value of the training program, in program units.

    solver_status_ : str
        ``"optimal"``, or ``"optimal_inaccurate"`` when accepted.

    solver_name_ : str
        The solver path that produced the weights (``"clarabel"``, ``"ipm"``, or
        ``"ipm->clarabel"`` after a fallback).

    solve_time_ : float
        Seconds spent in the solver.

    n_iter_ : int or None
        Solver iterations, where the solver reports them.

    solver_info_ : dict
        What else the solver reported (residuals, fallback reason, ...).

    fit_time_ : float
        Seconds spent in ``fit``.

    physically_constrained_ : bool
        Whether the program solved had bounds, ramps or bound points (a fit without them can
        serve as the ``relaxation`` of a constrained fit).

    n_features_in_ : int
        Number of features seen during ``fit``.

    feature_names_in_ : ndarray of shape (n_features_in_,)
        Names of features seen during ``fit``; defined only when X has feature names that
        are all strings.

    See Also
    --------
    SCNN : The same network without the Wasserstein term, optionally lasso/ridge penalised.
    WaDiRoLinearRegression : The linear counterpart.
    """

    _parameter_constraints: dict = {
        **ConvexNetworkRegressor._parameter_constraints,
        "radius": [Interval(Real, 0, None, closed="left")],
        "wasserstein": [StrOptions({"l1", "l2"})],
    }

    def __init__(
        self,
        *,
        radius: float = 1e-2,
        max_neurons: int = 30,
        wasserstein: str = "l1",
        lower_bound: object = None,
        upper_bound: object = None,
        ramp: object = None,
        fit_intercept: bool = True,
        standardize: bool = True,
        random_state: object = 0,
        solver: str = "clarabel",
        solver_options: dict | None = None,
        accept_inaccurate: bool = False,
        constraint_margin: float = 1e-6,
    ) -> None:
        self.radius = radius
        self.max_neurons = max_neurons
        self.wasserstein = wasserstein
        self.lower_bound = lower_bound
        self.upper_bound = upper_bound
        self.ramp = ramp
        self.fit_intercept = fit_intercept
        self.standardize = standardize
        self.random_state = random_state
        self.solver = solver
        self.solver_options = solver_options
        self.accept_inaccurate = accept_inaccurate
        self.constraint_margin = constraint_margin

    def _objective_terms(self) -> dict:
        return {"radius": float(self.radius), "wasserstein": self.wasserstein}
