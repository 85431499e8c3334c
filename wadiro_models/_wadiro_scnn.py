"""WaDiRo-SCNN: the Wasserstein distributionally robust shallow convex network."""

from __future__ import annotations

from numbers import Real

from sklearn.utils._param_validation import Interval, StrOptions

from ._scnn_base import ConvexNetworkRegressor


class WaDiRoSCNN(ConvexNetworkRegressor):
    """Shallow convex ReLU network trained by Wasserstein DRO (paper, Proposition 1).

    ``fit`` solves the training program of :mod:`wadiro_models._program` (Wasserstein term
    ``radius * ||beta||_*`` plus the mean absolute error, gate cones, optional bounds and
    ramps) on the standardised data, with the gates drawn from ``random_state``.

    Parameters
    ----------
    radius : radius of the Wasserstein ball (>= 0; 0 is the unregularised network).
    max_neurons : hidden units; ``ceil(max_neurons / 2)`` Gaussian gates are drawn and each
        kept gate gives a nu- and an omega-neuron (an odd value rounds up by one unit).
        Gates with duplicate or all-zero patterns on the training data are dropped.
    wasserstein : ground norm of the Wasserstein metric, ``"l1"`` or ``"l2"``.
    lower_bound, upper_bound : hard bounds on the training predictions, in the units of y;
        a scalar or one value per training sample (``-inf``/``inf`` where absent).
    ramp : hard limit on |y_hat_j - y_hat_{j-1}| between consecutive training rows, in the
        units of y; a scalar or an array of length ``n_samples - 1``.
    fit_intercept : learn the output bias b (else b = 0 and it is left out of beta). b lives
        in program units: with ``standardize=True`` the mean of y is restored either way.
    standardize : standardise X per column and y inside ``fit`` (undone in ``predict``;
        the constraints are converted exactly). With ``False``, ``objective_`` is the
        program's value on the data as given.
    random_state : seed of the Gaussian gates S ~ N(0, I).
    solver : a name from the solver registry (``"clarabel"`` reference path, ``"ipm"``).
    solver_options : keyword arguments for the solver (for Clarabel its settings, e.g.
        ``{"tol_gap_abs": 1e-10, "tol_gap_rel": 1e-10, "tol_feas": 1e-10}``).
    accept_inaccurate : keep a fit whose solver status is ``"optimal_inaccurate"`` (with an
        :class:`InaccurateSolutionWarning`) instead of raising :class:`SolverError`.
    constraint_margin : the bounds and ramps are imposed this much tighter, in program units
        (standardised y), so that solver round-off never appears as a violation; 0 gives
        the exact program. ``objective_`` is the value of the program actually solved.

    Attributes
    ----------
    gates_ : (n_features + 1, P) kept gate vectors; the last row multiplies the bias column.
    n_gates_ : P.
    nu_, omega_ : (P, n_features + 1) convex weights in program units.
    intercept_ : b in program units.
    standardization_ : the means and scales used in program units.
    objective_ : optimal value of the training program (program units).
    solver_status_, solver_name_, solve_time_, n_iter_, solver_info_ : what the solver said.
    fit_time_ : seconds spent in ``fit``.
    """

    _parameter_constraints: dict = {
        **ConvexNetworkRegressor._parameter_constraints,
        "radius": [Interval(Real, 0, None, closed="left")],
        "wasserstein": [StrOptions({"l1", "l2"})],
    }

    def __init__(
        self,
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
