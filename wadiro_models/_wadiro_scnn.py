"""WaDiRo-SCNN: the Wasserstein distributionally robust shallow convex network."""

from __future__ import annotations

from numbers import Integral, Real

from sklearn.utils._param_validation import Interval, StrOptions

from ._scnn_base import ATTRIBUTES_DOC, MAX_NEURONS_DOC, PARAMETERS_DOC, ConvexNetworkRegressor
from ._validation import estimator_parameters, parameter


@estimator_parameters
class WaDiRoSCNN(ConvexNetworkRegressor):
    __doc__ = f"""Shallow convex ReLU network trained by Wasserstein DRO (paper, Proposition 1).

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

{MAX_NEURONS_DOC}
    wasserstein : {{"l1", "l2"}}, default="l1"
        Ground norm of the Wasserstein metric; the program is an LP for ``"l1"`` and an
        SOCP for ``"l2"``.

{PARAMETERS_DOC}
    Attributes
    ----------
{ATTRIBUTES_DOC}
    See Also
    --------
    SCNN : The same network without the Wasserstein term, optionally lasso/ridge penalised.
    WaDiRoLinearRegression : The linear counterpart.

    Examples
    --------
    The physics-constrained network: ``lower_bound=0.0`` holds every training prediction at
    or above 0, and the equivalent ReLU network reproduces ``predict``.

    >>> import numpy as np
    >>> from wadiro_models import WaDiRoSCNN
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(-1, 1, size=(40, 2))
    >>> y = np.abs(X[:, 0]) + 0.1 * rng.normal(size=40)
    >>> model = WaDiRoSCNN(max_neurons=8, lower_bound=0.0).fit(X, y)
    >>> model.solver_status_
    'optimal'
    >>> bool((model.predict(X) >= 0.0).all())
    True
    >>> bool(np.allclose(model.to_relu_network().predict(X), model.predict(X)))
    True
    """

    radius: float = parameter(1e-2, [Interval(Real, 0, None, closed="left")])
    max_neurons: int = parameter(30, [Interval(Integral, 1, None, closed="left")])
    wasserstein: str = parameter("l1", [StrOptions({"l1", "l2"})])
    lower_bound: object = parameter(None, [None, Real, "array-like"])
    upper_bound: object = parameter(None, [None, Real, "array-like"])
    ramp: object = parameter(None, [None, Real, "array-like"])
    fit_intercept: bool = parameter(True, ["boolean"])
    standardize: bool = parameter(True, ["boolean"])
    random_state: object = parameter(0, ["random_state"])
    solver: str = parameter("clarabel", [str])  # a name in solvers.SOLVERS: checked there
    solver_options: dict | None = parameter(None, [None, dict])
    accept_inaccurate: bool = parameter(False, ["boolean"])
    constraint_margin: float = parameter(1e-6, [Interval(Real, 0, None, closed="left")])

    def _objective_terms(self) -> dict:
        return {"radius": float(self.radius), "wasserstein": self.wasserstein}
