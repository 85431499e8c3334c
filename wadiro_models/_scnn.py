"""SCNN: the plain and the lasso/ridge-regularised shallow convex network (l1 loss)."""

from __future__ import annotations

from numbers import Real

from sklearn.utils._param_validation import Interval, StrOptions

from ._scnn_base import ATTRIBUTES_DOC, MAX_NEURONS_DOC, PARAMETERS_DOC, ConvexNetworkRegressor
from ._validation import estimator_parameters


@estimator_parameters
class SCNN(ConvexNetworkRegressor):
    __doc__ = f"""Shallow convex ReLU network of the paper's comparisons (Lemma 1 and its remark).

    ``fit`` solves the training program of :mod:`wadiro_models._program` with ``radius = 0``
    and the optional penalty ``lambda_reg * r(vec nu, vec omega)`` (same gates, cones and
    physical constraints as :class:`WaDiRoSCNN`, bound points included);
    :meth:`build_program` returns that program without solving it. The paper writes the loss
    as a sum; with the mean used here, ``lambda_reg`` equals the paper's lambda divided by N.

    Parameters
    ----------
{MAX_NEURONS_DOC}
    regularizer : {{"lasso", "ridge"}} or None, default=None
        Penalty on (vec nu, vec omega): the l1 norm for ``"lasso"``, the squared l2 norm
        for ``"ridge"``, none for None (b is never penalised). Every registered solver
        solves it (``"ipm"`` by handing it to the reference path).

    lambda_reg : float, default=1e-3
        Weight of the penalty (ignored when ``regularizer`` is None).

{PARAMETERS_DOC}
    Attributes
    ----------
{ATTRIBUTES_DOC}
    See Also
    --------
    WaDiRoSCNN : The same network trained by Wasserstein DRO.

    Examples
    --------
    A stronger lasso penalty gives smaller weights:

    >>> import numpy as np
    >>> from wadiro_models import SCNN
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(-1, 1, size=(40, 2))
    >>> y = np.abs(X[:, 0]) + 0.1 * rng.normal(size=40)
    >>> weak = SCNN(max_neurons=8, regularizer="lasso", lambda_reg=1e-3).fit(X, y)
    >>> strong = SCNN(max_neurons=8, regularizer="lasso", lambda_reg=1e-1).fit(X, y)
    >>> l1_norm = lambda model: np.abs(model.nu_).sum() + np.abs(model.omega_).sum()
    >>> bool(l1_norm(strong) < l1_norm(weak))
    True
    >>> weak.predict(X[:3]).shape
    (3,)
    """

    _parameter_constraints = {
        **ConvexNetworkRegressor._parameter_constraints,
        "regularizer": [None, StrOptions({"lasso", "ridge"})],
        "lambda_reg": [Interval(Real, 0, None, closed="left")],
    }

    max_neurons: int = 30
    regularizer: str | None = None
    lambda_reg: float = 1e-3
    lower_bound: object = None
    upper_bound: object = None
    ramp: object = None
    fit_intercept: bool = True
    standardize: bool = True
    random_state: object = 0
    solver: str = "clarabel"
    solver_options: dict | None = None
    accept_inaccurate: bool = False
    constraint_margin: float = 1e-6

    def _objective_terms(self) -> dict:
        return {
            "radius": 0.0,
            "regularizer": self.regularizer,
            "lambda_reg": float(self.lambda_reg) if self.regularizer is not None else 0.0,
        }
