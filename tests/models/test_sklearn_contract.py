"""scikit-learn's estimator contract for every estimator of the library."""

from __future__ import annotations

from sklearn.utils.estimator_checks import parametrize_with_checks

from wadiro_models import (
    SCNN,
    GaussianProcessBaseline,
    LinearSVRBaseline,
    WaDiRoLinearRegression,
    WaDiRoSCNN,
)

ESTIMATORS = [
    WaDiRoSCNN(max_neurons=10),
    WaDiRoSCNN(max_neurons=10, wasserstein="l2", lower_bound=-10.0),
    SCNN(max_neurons=10),
    SCNN(max_neurons=10, regularizer="lasso", lambda_reg=1e-3),
    WaDiRoLinearRegression(),
    GaussianProcessBaseline(),
    LinearSVRBaseline(),
]


@parametrize_with_checks(ESTIMATORS)
def test_sklearn_compatible_estimator(estimator, check):
    check(estimator)
