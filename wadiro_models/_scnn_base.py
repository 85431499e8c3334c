"""What the convex-network estimators share: data -> program -> solver -> fitted network.

Subclasses say only which objective terms they use (:meth:`_objective_terms`); gates,
standardisation, physical constraints, the program (:meth:`build_program`), solver dispatch
and status checks live here once.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from sklearn.base import _fit_context
from sklearn.utils.validation import check_is_fitted

from ._bound_points import BoundPoints, bound_points
from ._constraints import PhysicalLimits, physical_limits
from ._gates import activation_patterns, augment, distinct_gates, n_gate_samples, sample_gates
from ._out_of_sample import out_of_sample_bound
from ._program import (
    ScnnProgram,
    ScnnSolution,
    bound_predictions,
    objective_value,
    physical_violation,
    predictions,
)
from ._relu_network import ReluNetwork, relu_network
from ._scaling import Standardization
from ._status import check_solution
from ._validation import FITTED_ATTRIBUTES_DOC, Regressor, training_data
from .exceptions import InsufficientDataError, SolverError
from .solvers import configured_solver

# A fitted point may break a stated constraint by at most this much (program units) before
# the fit is rejected; the default margin keeps real violations at zero.
_VIOLATION_TOLERANCE = 1e-6


@dataclass(frozen=True)
class _Training:
    """The program ``fit`` solves and what it needs to map the solution back."""

    program: ScnnProgram
    gates: np.ndarray  # (d + 1, P) kept gate vectors
    scaling: Standardization
    limits: PhysicalLimits  # in the units of y
    points: BoundPoints | None = None  # bound points, in the units of X and y


class ConvexNetworkRegressor(Regressor):
    """Base of :class:`WaDiRoSCNN` and :class:`SCNN` (not meant to be used directly)."""

    def _objective_terms(self) -> dict:
        """ScnnProgram fields that define the objective (radius, wasserstein, penalty)."""
        raise NotImplementedError

    # ------------------------------------------------------------------ fit
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(
        self,
        X: object,
        y: object,
        *,
        bound_X: object = None,
        bound_lower: object = None,
        bound_upper: object = None,
        relaxation: ConvexNetworkRegressor | None = None,
    ) -> ConvexNetworkRegressor:
        """Draw the gates, build the training program and solve it.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training data.
        y : array-like of shape (n_samples,)
            Target values.
        bound_X : array-like of shape (n_bound_points, n_features), default=None
            Bound points: inputs that are not training samples (e.g. the week to forecast)
            where ``bound_lower <= predict(bound_X) <= bound_upper`` must hold. They enter
            the program as constraints only (no loss term, no gate cone), mapped exactly as
            ``predict`` maps its input.
        bound_lower : float or array-like of shape (n_bound_points,), default=None
            Lower bound on the predictions at ``bound_X``, in the units of y (``-inf``
            where absent).
        bound_upper : float or array-like of shape (n_bound_points,), default=None
            Upper bound on the predictions at ``bound_X``, in the units of y (``inf``
            where absent).
        relaxation : fitted estimator of the same class, default=None
            The same network fitted to the same data without physical constraints (same
            gates, objective terms and scaling). When its weights already meet this
            estimator's bounds and ramps (tightened by ``constraint_margin``), they are an
            optimum of this program too, since they minimise the same objective over a larger
            set, and they are taken without solving (``solver_info_["relaxation"]`` is True).
            Otherwise, or when it is not such a fit, the program is solved as usual.

        Returns
        -------
        self : object
            Fitted estimator.
        """
        return self._timed_fit(X, y, bound_X=bound_X, bound_lower=bound_lower,
                               bound_upper=bound_upper, relaxation=relaxation)

    def _fit(self, X: np.ndarray, y: np.ndarray, *, relaxation: ConvexNetworkRegressor | None,
             **bounds: object) -> None:
        training = self._training(X, y, **bounds)
        program, scaling = training.program, training.scaling
        solution = None
        if relaxation is not None:
            solution = self._solution_of_relaxation(relaxation, training)
        if solution is None:
            solution = configured_solver(self.solver, self.solver_options)(program)
        check_solution(
            solution,
            accept_inaccurate=self.accept_inaccurate,
            constrained=program.has_physical_constraints,
        )
        self._check_constraints(training, solution)

        self.standardization_ = scaling
        self.gates_ = training.gates
        self.n_gates_ = program.n_gates
        self.nu_ = solution.nu
        self.omega_ = solution.omega
        self.intercept_ = float(solution.b)
        self.objective_ = float(solution.objective)
        self.solver_status_ = solution.status
        self.solver_name_ = solution.solver
        self.solve_time_ = float(solution.solve_time)
        self.n_iter_ = solution.iterations
        self.solver_info_ = dict(solution.info)
        self.feature_min_, self.feature_max_ = X.min(axis=0), X.max(axis=0)
        self.target_min_, self.target_max_ = float(y.min()), float(y.max())
        residual = predictions(program, solution.nu, solution.omega, solution.b) - program.y
        self.training_loss_ = float(np.mean(np.abs(residual)))
        self.n_samples_fit_ = int(X.shape[0])
        self.physically_constrained_ = bool(program.has_physical_constraints)

    def _solution_of_relaxation(
        self, relaxation: ConvexNetworkRegressor, training: _Training
    ) -> ScnnSolution | None:
        """``relaxation``'s weights as this program's solution, when they solve it (see
        ``fit``); None when they do not, or when it is not this program's relaxation."""
        program, scaling = training.program, training.scaling
        if type(relaxation) is not type(self) or not hasattr(relaxation, "nu_"):
            return None
        if (relaxation.physically_constrained_ or relaxation.solver_status_ != "optimal"
                or relaxation._objective_terms() != self._objective_terms()
                or relaxation.fit_intercept != self.fit_intercept
                or not np.array_equal(relaxation.gates_, training.gates)):
            return None
        same_scaling = all(np.array_equal(theirs, ours) for theirs, ours in zip(
            vars(relaxation.standardization_).values(), vars(scaling).values(), strict=True))
        nu, omega, b = relaxation.nu_, relaxation.omega_, relaxation.intercept_
        if not same_scaling or relaxation.n_samples_fit_ != program.n_samples:
            return None
        objective = objective_value(program, nu, omega, b)
        if not np.isclose(objective, relaxation.objective_, rtol=1e-9, atol=1e-12):
            return None  # other data, whatever the scaling says
        if physical_violation(program, nu, omega, b) > 0.0:
            return None
        return ScnnSolution(
            nu=nu.copy(), omega=omega.copy(), b=b, objective=objective, status="optimal",
            solver=f"{relaxation.solver_name_}+relaxation", solve_time=0.0, iterations=0,
            info={**relaxation.solver_info_, "relaxation": True},
        )

    def build_program(
        self,
        X: object,
        y: object,
        *,
        bound_X: object = None,
        bound_lower: object = None,
        bound_upper: object = None,
    ) -> ScnnProgram:
        """The training program that ``fit(X, y, **bound_points)`` solves, without solving it.

        The data are standardised when ``standardize`` is True, the gates are drawn from
        ``random_state`` and filtered exactly as in ``fit``, the bounds and ramps are in
        program units (tightened by ``constraint_margin``), and the objective terms are this
        estimator's. The estimator itself is left unchanged.

        Parameters
        ----------
        X, y, bound_X, bound_lower, bound_upper
            Training data, target values, bound points and their bounds, as in :meth:`fit`.

        Returns
        -------
        program : ScnnProgram
            The program in program units. It is the one ``fit`` solves when
            ``random_state`` is an int; with None or a ``RandomState`` instance each call
            draws new gates.
        """
        self._validate_params()
        X, y = training_data(self, X, y)
        return self._training(X, y, bound_X=bound_X, bound_lower=bound_lower,
                              bound_upper=bound_upper).program

    def _training(self, X: np.ndarray, y: np.ndarray, **bounds: object) -> _Training:
        """The program of validated (X, y) and the bound points (``bound_X``, ``bound_lower``,
        ``bound_upper`` of ``fit``), the kept gates and the unit conversions."""
        points = bound_points(**bounds, n_features=X.shape[1])
        limits = physical_limits(self.lower_bound, self.upper_bound, self.ramp, X.shape[0])
        scaling = Standardization.fit(X, y, self.standardize)
        X_aug = augment(scaling.transform_X(X))
        drawn = sample_gates(X_aug.shape[1], n_gate_samples(self.max_neurons), self.random_state)
        gates, patterns = distinct_gates(X_aug, drawn)
        if gates.shape[1] == 0:
            raise InsufficientDataError(
                f"none of the {drawn.shape[1]} sampled gates activates any of the "
                f"{X.shape[0]} samples; increase max_neurons or change random_state"
            )
        bounds = limits.to_program_units(scaling, self.constraint_margin)
        at_points = (points.to_program_units(scaling, gates, self.constraint_margin)
                     if points is not None else {})
        program = ScnnProgram(
            X=X_aug,
            y=scaling.transform_y(y),
            patterns=patterns,
            fit_intercept=self.fit_intercept,
            lower=bounds.lower,
            upper=bounds.upper,
            ramp=bounds.ramp,
            **self._objective_terms(),
            **at_points,
        )
        return _Training(program, gates, scaling, limits, points)

    @staticmethod
    def _check_constraints(training: _Training, solution: ScnnSolution) -> None:
        """Raise SolverError if ``solution`` breaks the training bounds and ramps, then the
        bounds at the bound points, by more than the tolerance (checked in the units of y)."""
        program, scaling = training.program, training.scaling
        checks = []
        if not training.limits.empty:
            checks.append((training.limits, predictions))
        if training.points is not None and program.has_bound_points:
            checks.append((training.points, bound_predictions))
        for constraints, predict in checks:
            y_hat = predict(program, solution.nu, solution.omega, solution.b)
            excess, where = constraints.max_violation(scaling.inverse_y(y_hat))
            if excess > _VIOLATION_TOLERANCE * scaling.y_scale:
                raise SolverError(
                    f"solver {solution.solver!r} returned weights that break the {where} by "
                    f"{excess:.3g} (units of y)",
                    status=solution.status,
                )

    # -------------------------------------------------------------- predict
    def _predict(self, X: np.ndarray) -> np.ndarray:
        """sum_i 1[x_aug^T s_i >= 0] x_aug^T (nu_i - omega_i) + b, in the units of y."""
        X_aug = augment(self.standardization_.transform_X(X))
        patterns = activation_patterns(X_aug, self.gates_)
        gated = np.einsum("np,np->n", patterns, X_aug @ (self.nu_ - self.omega_).T)
        return self.standardization_.inverse_y(gated + self.intercept_)

    # the function of _out_of_sample, which takes the fitted model first, as a method
    out_of_sample_bound = out_of_sample_bound

    def to_relu_network(self, *, rtol: float = 1e-10) -> ReluNetwork:
        """The equivalent non-convex ReLU network (eq. map1/map2), zero neurons dropped.

        It reproduces :meth:`predict` wherever the stored gates' activations agree with the
        signs of the fitted neurons, in particular on every training sample.
        """
        check_is_fitted(self)
        return relu_network(
            self.nu_, self.omega_, self.intercept_, self.standardization_, rtol=rtol
        )


# Docstring sections for the parameters and attributes of ConvexNetworkRegressor: WaDiRoSCNN
# and SCNN build their class docstrings from them.
MAX_NEURONS_DOC = """\
    max_neurons : int, default=30
        Hidden units: ``ceil(max_neurons / 2)`` Gaussian gates are drawn and each kept gate
        gives a nu- and an omega-neuron (an odd value rounds up by one unit). Gates with
        duplicate or all-zero patterns on the training data are dropped.
"""

PARAMETERS_DOC = """\
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
        path; ``"ipm"``: the structured interior-point method, which hands penalised or
        radius-0 programs to the reference path).

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
"""

ATTRIBUTES_DOC = """\
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

    physically_constrained_ : bool
        Whether the program solved had bounds, ramps or bound points (a fit without them can
        serve as the ``relaxation`` of a constrained fit).

""" + FITTED_ATTRIBUTES_DOC
