"""scikit-learn's estimator contract for every estimator of the library, and its
conventions for parameters (keyword-only, documented with their defaults)."""

from __future__ import annotations

import ast
import inspect
import re

import pytest
from sklearn.utils.estimator_checks import check_param_validation, parametrize_with_checks

from wadiro_models import (
    SCNN,
    GaussianProcessBaseline,
    GradientBoostingModel,
    LinearSVRBaseline,
    WaDiRoLinearRegression,
    WaDiRoSCNN,
    make_model,
)

ONE_PER_CLASS = [
    WaDiRoSCNN(max_neurons=10),
    SCNN(max_neurons=10),
    WaDiRoLinearRegression(),
    GaussianProcessBaseline(),
    LinearSVRBaseline(),
    GradientBoostingModel(max_iter=20, engine="lightgbm"),
]
"""A small configuration of each class, the fast tier's (the gradient boosting on LightGBM, the
deployed engine: its checks take seconds where scikit-learn's engine takes a minute)."""

OTHER_CONFIGURATIONS = [
    WaDiRoSCNN(max_neurons=10, wasserstein="l2", lower_bound=-10.0),
    SCNN(max_neurons=10, regularizer="lasso", lambda_reg=1e-3),
    GradientBoostingModel(max_iter=20),
]
"""The other configurations: the contract tier (``pytest -m contract``, in CI)."""

ESTIMATORS = ONE_PER_CLASS + OTHER_CONFIGURATIONS


@parametrize_with_checks(ONE_PER_CLASS)
def test_sklearn_compatible_estimator(estimator, check):
    check(estimator)


@pytest.mark.contract
@parametrize_with_checks(OTHER_CONFIGURATIONS)
def test_sklearn_compatible_estimator_in_its_other_configurations(estimator, check):
    check(estimator)


@pytest.mark.parametrize("estimator", [
    *ONE_PER_CLASS, *(pytest.param(e, marks=pytest.mark.contract) for e in OTHER_CONFIGURATIONS)
], ids=repr)
def test_fit_validates_every_parameter_against_its_constraints(estimator):
    """scikit-learn's own check, which parametrize_with_checks does not run: every constructor
    parameter has an entry in _parameter_constraints, and fit (through _fit_context) rejects
    a value outside it with InvalidParameterError naming the parameter."""
    check_param_validation(type(estimator).__name__, estimator)


CLASSES = sorted({type(estimator) for estimator in ESTIMATORS}, key=lambda c: c.__name__)


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_parameters_are_keyword_only_and_documented_with_their_defaults(cls):
    """Every __init__ parameter is keyword-only and appears in the numpydoc Parameters
    section as 'name : type, default=<the signature's default>'."""
    signature = inspect.signature(cls.__init__)
    params = [p for name, p in signature.parameters.items() if name != "self"]
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in params)
    with pytest.raises(TypeError):
        cls(1.0)
    section = cls.__doc__.split("Parameters\n    ----------\n")[1].split("\n    Attributes")[0]
    documented = dict(re.findall(r"^    (\w+) : .*default=(.+)$", section, flags=re.M))
    assert list(documented) == [p.name for p in params]
    for p in params:
        assert ast.literal_eval(documented[p.name]) == p.default, p.name


def test_the_physics_constrained_entry_still_builds_from_keywords():
    model = make_model("wadiro_pcscnn", radius=0.5, max_neurons=12)
    assert isinstance(model, WaDiRoSCNN) and model.lower_bound == 0.0
    assert model.get_params()["radius"] == 0.5
