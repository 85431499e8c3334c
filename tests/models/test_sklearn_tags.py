"""The estimators' scikit-learn tags (``sklearn.utils.get_tags``) are true to what fit and
predict do: each tag is checked against the estimator's behaviour on data that it names."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import is_regressor
from sklearn.exceptions import NotFittedError
from sklearn.utils import get_tags

from wadiro_models import (
    SCNN,
    GaussianProcessBaseline,
    GradientBoostingModel,
    LinearSVRBaseline,
    WaDiRoLinearRegression,
    WaDiRoSCNN,
)

ESTIMATORS = [
    WaDiRoSCNN(max_neurons=6),
    WaDiRoSCNN(max_neurons=6, lower_bound=-10.0),
    SCNN(max_neurons=6, regularizer="ridge"),
    WaDiRoLinearRegression(),
    GaussianProcessBaseline(),
    LinearSVRBaseline(),
    GradientBoostingModel(max_iter=5, min_samples_leaf=2),
]


def _data(n: int = 30) -> tuple[np.ndarray, np.ndarray]:
    """Features and target of both signs."""
    rng = np.random.default_rng(0)
    X = rng.uniform(-2.0, 2.0, size=(n, 2))
    return X, X[:, 0] - np.abs(X[:, 1])


def _accepts(call) -> bool:
    """Whether ``call()`` runs and returns finite numbers (an error means refused)."""
    try:
        result = call()
    except (ValueError, TypeError):  # InvalidInputError is a ValueError
        return False
    return result is None or bool(np.all(np.isfinite(result)))


@pytest.mark.parametrize("estimator", ESTIMATORS, ids=repr)
def test_every_estimator_is_a_single_output_regressor_that_needs_y_and_a_fit(estimator):
    tags = get_tags(estimator)
    assert tags.estimator_type == "regressor" and is_regressor(estimator)
    assert tags.regressor_tags is not None and tags.requires_fit
    X, y = _data()
    with pytest.raises(NotFittedError):
        estimator.predict(X)
    assert _accepts(lambda: estimator.fit(X, None)) is (not tags.target_tags.required)
    two_targets = np.column_stack([y, 2 * y])
    assert _accepts(lambda: estimator.fit(X, two_targets).predict(X)) is (
        tags.target_tags.multi_output)
    assert _accepts(lambda: estimator.fit(X, y).predict(X)) is tags.target_tags.single_output


@pytest.mark.parametrize("estimator", ESTIMATORS, ids=repr)
def test_the_input_tags_say_what_fit_and_predict_accept(estimator):
    tags = get_tags(estimator).input_tags
    X, y = _data()
    with_nan = X.copy()
    with_nan[3, 1] = np.nan
    assert _accepts(lambda: estimator.fit(with_nan, y).predict(with_nan)) is tags.allow_nan
    fitted = estimator.fit(X, y)
    assert _accepts(lambda: fitted.predict(with_nan)) is tags.allow_nan
    assert _accepts(lambda: estimator.fit(sp.csr_matrix(X), y).predict(X)) is tags.sparse
    assert _accepts(lambda: estimator.fit(X[:, 0], y)) is tags.one_d_array
    # both signs of X and y are accepted, as positive_only=False says
    assert not tags.positive_only and not get_tags(estimator).target_tags.positive_only
    assert _accepts(lambda: estimator.fit(X, y).predict(X))
    assert (X < 0).any() and (y < 0).any()


def test_only_the_gradient_boosting_takes_missing_inputs_as_its_trees_do():
    """Its trees take NaN, and so does the model (a load lag missing over a gap in the
    readings); every other model of the library refuses it."""
    from sklearn.ensemble import HistGradientBoostingRegressor

    assert get_tags(HistGradientBoostingRegressor()).input_tags.allow_nan
    assert get_tags(GradientBoostingModel()).input_tags.allow_nan
    assert [type(e).__name__ for e in ESTIMATORS if get_tags(e).input_tags.allow_nan] == [
        "GradientBoostingModel"]
