"""SCNN: the plain and the lasso/ridge-regularised shallow convex network (l1 loss)."""

from __future__ import annotations

from numbers import Integral, Real

from sklearn.utils._param_validation import Interval, StrOptions

from ._scnn_base import ATTRIBUTES_DOC, MAX_NEURONS_DOC, PARAMETERS_DOC, ConvexNetworkRegressor
from ._validation import estimator_parameters, parameter


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

    max_neurons: int = parameter(30, [Interval(Integral, 1, None, closed="left")])
    regularizer: str | None = parameter(None, [None, StrOptions({"lasso", "ridge"})])
    lambda_reg: float = parameter(1e-3, [Interval(Real, 0, None, closed="left")])
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
        return {
            "radius": 0.0,
            "regularizer": self.regularizer,
            "lambda_reg": float(self.lambda_reg) if self.regularizer is not None else 0.0,
        }
