"""Gradient-boosted regression trees behind the same contract as the convex networks.

The practitioner's peer (scikit-learn's histogram gradient boosting, absolute loss) as a model of
the library: the pipeline tunes, fits, checks and publishes it like the paper's models. Trees
cannot hold a hard bound inside their fit as the convex programs do; the physical floor
(``lower_bound``) is kept by projecting every prediction onto it, so no forecast is ever below
it. Unlike the paper's models nothing is standardised: trees are invariant to monotone
transformations of each feature, and the absolute loss to a shift of the target. A missing input
(NaN in X) is taken as the trees take it, down the branch their training learned for it: a load
lag missing for one hour does not cost the hour (its scikit-learn tag ``allow_nan``).

Two engines grow the same kind of trees: scikit-learn's (the reference) and LightGBM's, about a
third of the CPU on the pipeline's windows (most of a scikit-learn fit there is per-node Python).
Both split on the same candidate thresholds: the LightGBM engine is given each input as its bin
under scikit-learn's rule (every distinct value its own bin when there are at most ``max_bins``,
else ``max_bins`` bins between quantiles): with its own binning of the same data LightGBM forecast
0.5-0.7 % worse, with these bins 0.2-0.4 % better than scikit-learn's trees (10 buildings of
2017-2018, the development years; ``docs/benchmarks.md``, decision log).
"""

from __future__ import annotations

from numbers import Integral, Real

import lightgbm
import numpy as np
from sklearn.ensemble import HistGradientBoostingRegressor
from sklearn.utils._param_validation import Interval, StrOptions

from ._validation import FITTED_ATTRIBUTES_DOC, Regressor, estimator_parameters, parameter

try:  # scikit-learn's absolute loss, whose instance its trees accept as their loss
    from sklearn._loss.loss import AbsoluteError
except ImportError:  # pragma: no cover -- a scikit-learn without it: the trees' own loss
    AbsoluteError = None


if AbsoluteError is not None:

    class _AbsoluteErrorByPartition(AbsoluteError):
        """scikit-learn's absolute loss, the median of a leaf's residuals taken by one
        partition instead of ``np.median``. After each tree the absolute loss sets every leaf
        to its residuals' median, one leaf at a time; on the pipeline's windows (a few
        thousand rows, 31 leaves, 100 trees) ``np.median``'s own overhead is a sixth of a fit.
        The same values: a middle element, or the mean of the middle two, as ``np.median``
        computes it (``tests/models/test_boosting.py``)."""

        def fit_intercept_only(self, y_true: np.ndarray,
                               sample_weight: np.ndarray | None = None) -> np.ndarray:
            if sample_weight is not None or y_true.ndim != 1 or not y_true.size:
                return super().fit_intercept_only(y_true, sample_weight)
            middle = y_true.size // 2
            if y_true.size % 2:
                return np.partition(y_true, middle)[middle]
            low, high = np.partition(y_true, (middle - 1, middle))[middle - 1:middle + 1]
            return (low + high) / 2.0


def bin_thresholds(column: np.ndarray, max_bins: int) -> np.ndarray:
    """The thresholds that cut one input's finite values into at most ``max_bins`` bins: the
    midpoints between consecutive distinct values when there are at most ``max_bins`` of them,
    else the ``max_bins - 1`` inner quantiles (the averaged inverse of the empirical
    distribution) with repeats dropped. No finite value: no threshold (one bin)."""
    values = column[np.isfinite(column)]
    distinct = np.unique(values)
    if distinct.size <= max_bins:
        return (distinct[:-1] + distinct[1:]) / 2.0
    inner = np.linspace(0.0, 100.0, max_bins + 1)[1:-1]
    return np.unique(np.percentile(values, inner, method="averaged_inverted_cdf"))


def to_bins(X: np.ndarray, thresholds: list[np.ndarray]) -> np.ndarray:
    """Each input's bin number (how many of its thresholds lie below the value); NaN stays NaN,
    so the trees still learn a branch for a missing input."""
    binned = np.empty_like(X, dtype=np.float64)
    for j, cuts in enumerate(thresholds):
        binned[:, j] = np.searchsorted(cuts, X[:, j], side="left")
    binned[np.isnan(X)] = np.nan
    return binned


_LIGHTGBM_OBJECTIVES = {"absolute_error": "l1", "squared_error": "l2"}


def _trees_loss(loss: str) -> object:
    """The loss the trees are given for ``loss``."""
    if loss == "absolute_error" and AbsoluteError is not None:
        return _AbsoluteErrorByPartition()
    return loss


@estimator_parameters
class GradientBoostingModel(Regressor):
    __doc__ = f"""Histogram gradient-boosted trees (scikit-learn's
    ``HistGradientBoostingRegressor``) with an optional physical floor on every prediction.

    Parameters
    ----------
    learning_rate : float, default=0.1
        Shrinkage of each tree's contribution.

    max_iter : int, default=100
        Boosting iterations (trees); no early stopping, so a fit is reproducible and its cost
        known.

    max_leaf_nodes : int, default=31
        Leaves per tree.

    min_samples_leaf : int, default=20
        Fewest samples in a leaf.

    l2_regularization : float, default=0.0
        L2 penalty on the leaf values.

    max_bins : int, default=255
        Histogram bins per feature (at most 255).

    loss : {{"absolute_error", "squared_error"}}, default="absolute_error"
        The loss the trees minimise; absolute error, as the forecasts are scored by MAE.

    lower_bound : float or None, default=None
        The physical floor: every prediction is projected onto ``y >= lower_bound`` (None: no
        floor).

    random_state : int, default=0
        Seed of the binning subsample (reproducible fits).

    engine : {{"sklearn", "lightgbm"}}, default="sklearn"
        Which library grows the trees: scikit-learn's ``HistGradientBoostingRegressor``, or
        LightGBM (one thread, deterministic) on the inputs binned by scikit-learn's rule
        (:func:`bin_thresholds`). The same settings mean the same kind of trees; their splits
        differ a little, their CPU by about three times.

    Attributes
    ----------
    model_ : HistGradientBoostingRegressor or lightgbm.LGBMRegressor
        The fitted trees.

    bin_thresholds_ : list of ndarray
        Per input, the thresholds of its bins (``engine="lightgbm"`` only).

    n_iter_ : int
        Trees fitted (``max_iter``: no early stopping).

    solver_status_ : str
        ``"optimal"`` (the trees are fitted to their last iteration).

{FITTED_ATTRIBUTES_DOC}
    Examples
    --------
    >>> import numpy as np
    >>> from wadiro_models import GradientBoostingModel
    >>> X = np.arange(100, dtype=float).reshape(-1, 1)
    >>> y = np.sin(X[:, 0] / 10.0)
    >>> model = GradientBoostingModel(max_iter=10, lower_bound=0.0).fit(X, y)
    >>> bool((model.predict(X) >= 0.0).all())
    True
    """

    # the trees send a missing input down the branch its training learned for it
    _allow_nan = True

    learning_rate: float = parameter(0.1, [Interval(Real, 0, None, closed="neither")])
    max_iter: int = parameter(100, [Interval(Integral, 1, None, closed="left")])
    max_leaf_nodes: int = parameter(31, [Interval(Integral, 2, None, closed="left")])
    min_samples_leaf: int = parameter(20, [Interval(Integral, 1, None, closed="left")])
    l2_regularization: float = parameter(0.0, [Interval(Real, 0, None, closed="left")])
    max_bins: int = parameter(255, [Interval(Integral, 2, 255, closed="both")])
    loss: str = parameter("absolute_error", [StrOptions({"absolute_error", "squared_error"})])
    lower_bound: float | None = parameter(None, [Real, None])
    random_state: int = parameter(0, [Interval(Integral, 0, None, closed="left")])
    engine: str = parameter("sklearn", [StrOptions({"sklearn", "lightgbm"})])

    def _fit(self, X: np.ndarray, y: np.ndarray) -> None:
        if self.engine == "lightgbm":
            self.bin_thresholds_ = [bin_thresholds(X[:, j], self.max_bins)
                                    for j in range(X.shape[1])]
            self.model_ = lightgbm.LGBMRegressor(
                objective=_LIGHTGBM_OBJECTIVES[self.loss], learning_rate=self.learning_rate,
                n_estimators=self.max_iter, num_leaves=self.max_leaf_nodes,
                min_child_samples=self.min_samples_leaf, reg_lambda=self.l2_regularization,
                # every bin number its own LightGBM bin: the splits are the thresholds above
                max_bin=self.max_bins + 1, min_data_in_bin=1, feature_pre_filter=False,
                random_state=self.random_state, n_jobs=1, deterministic=True,
                force_row_wise=True, verbose=-1,
            ).fit(to_bins(X, self.bin_thresholds_), y)
            self.n_iter_ = self.model_.booster_.current_iteration()
        else:
            self.model_ = HistGradientBoostingRegressor(
                loss=_trees_loss(self.loss), learning_rate=self.learning_rate,
                max_iter=self.max_iter, max_leaf_nodes=self.max_leaf_nodes,
                min_samples_leaf=self.min_samples_leaf,
                l2_regularization=self.l2_regularization, max_bins=self.max_bins,
                early_stopping=False, random_state=self.random_state,
            ).fit(X, y)
            self.n_iter_ = self.model_.n_iter_
        self.solver_status_ = "optimal"

    def _predict(self, X: np.ndarray) -> np.ndarray:
        if self.engine == "lightgbm":
            X = to_bins(X, self.bin_thresholds_)
        prediction = np.asarray(self.model_.predict(X), dtype=np.float64)
        if self.lower_bound is not None:
            prediction = np.maximum(prediction, self.lower_bound)
        return prediction
