"""The gradient-boosting model: the library's contract, its floor, and the trees it wraps."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.ensemble import HistGradientBoostingRegressor

from wadiro_models import GradientBoostingModel, InvalidInputError, make_model
from wadiro_models._boosting import AbsoluteError, _trees_loss
from wadiro_models.search_spaces import GBR_SPACE, IntUniform, LogUniform


def _data(n=400, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4))
    y = 2.0 * X[:, 0] + np.sin(3 * X[:, 1]) + 0.1 * rng.normal(size=n)
    return X, y


def test_predictions_are_scikit_learns_trees_without_early_stopping():
    X, y = _data()
    model = GradientBoostingModel(learning_rate=0.2, max_leaf_nodes=15).fit(X, y)
    trees = HistGradientBoostingRegressor(
        loss="absolute_error", learning_rate=0.2, max_leaf_nodes=15, early_stopping=False,
        random_state=0).fit(X, y)
    np.testing.assert_array_equal(model.predict(X), trees.predict(X))
    assert model.model_.n_iter_ == 100  # every iteration, whatever the sample size
    assert model.solver_status_ == "optimal" and model.fit_time_ > 0


def test_a_leafs_median_is_numpys_to_the_bit():
    """The trees' leaves are set to their residuals' median by a partition (the fit's faster
    absolute loss): the value ``np.median`` gives, odd and even sizes, ties, any order."""
    loss = _trees_loss("absolute_error")
    rng = np.random.default_rng(1)
    for size in [*range(1, 40), 255, 4096]:
        for values in (rng.normal(size=size) * 1e3, rng.integers(-3, 3, size).astype(float),
                       np.full(size, 0.1) + rng.normal(size=size) * 1e-12):
            assert loss.fit_intercept_only(values) == np.median(values), size
    weights = rng.random(10)  # weighted leaves are scikit-learn's own percentile
    values = rng.normal(size=10)
    assert loss.fit_intercept_only(values, weights) == AbsoluteError().fit_intercept_only(
        values, weights)


def test_the_floor_holds_on_every_prediction_and_only_moves_those_below_it():
    X, y = _data()
    free = GradientBoostingModel().fit(X, y).predict(X)
    assert (free < 0).any()  # the data go below zero, so the floor has work to do
    floored = GradientBoostingModel(lower_bound=0.0).fit(X, y).predict(X)
    np.testing.assert_array_equal(floored, np.maximum(free, 0.0))


def test_a_fit_is_reproducible():
    X, y = _data(seed=3)
    first = GradientBoostingModel(max_leaf_nodes=8).fit(X, y).predict(X)
    again = make_model("gbr", max_leaf_nodes=8).fit(X, y).predict(X)
    np.testing.assert_array_equal(first, again)


def test_bad_input_is_refused_with_the_librarys_error():
    X, y = _data()
    X[3, 1] = np.inf
    with pytest.raises(InvalidInputError):
        GradientBoostingModel().fit(X, y)
    X[3, 1] = 0.0
    y[5] = np.nan  # a missing target is not a missing input
    with pytest.raises(InvalidInputError):
        GradientBoostingModel().fit(X, y)


def test_a_missing_input_takes_the_branch_scikit_learns_trees_learned_for_it():
    X, y = _data(seed=5)
    X[::7, 1] = np.nan  # one input missing on a seventh of the rows, as a lag over a gap
    ours = GradientBoostingModel(max_leaf_nodes=8).fit(X, y)
    trees = HistGradientBoostingRegressor(loss="absolute_error", max_leaf_nodes=8,
                                          early_stopping=False, random_state=0).fit(X, y)
    asked = X.copy()
    asked[1::5, 0] = np.nan  # and missing where it never was in training
    np.testing.assert_array_equal(ours.predict(asked), trees.predict(asked))
    assert np.isfinite(ours.predict(asked)).all()


def test_its_search_space_is_its_own_parameters_around_scikit_learns_defaults():
    params = GradientBoostingModel().get_params()
    assert set(GBR_SPACE) <= set(params)
    for name, dist in GBR_SPACE.items():
        assert isinstance(dist, (LogUniform, IntUniform))
        if name != "l2_regularization":  # 0 by default, a log-uniform range above it
            assert dist.low <= params[name] <= dist.high, name


# --- the LightGBM engine -----------------------------------------------------------------------

def test_bins_are_scikit_learns_thresholds():
    """Few distinct values: the midpoints between them; many: the inner quantiles; a missing
    value is ignored; a constant input has one bin. Checked against the thresholds scikit-learn's
    own trees bin with."""
    from sklearn.ensemble._hist_gradient_boosting.binning import _BinMapper

    from wadiro_models._boosting import bin_thresholds

    rng = np.random.default_rng(4)
    X = np.column_stack([rng.normal(size=3000), rng.integers(0, 24, 3000).astype(float),
                         np.where(rng.random(3000) < 0.1, np.nan, rng.exponential(size=3000)),
                         np.ones(3000), np.repeat(rng.normal(size=600), 5)])
    reference = _BinMapper(n_bins=256, random_state=0).fit(X).bin_thresholds_
    for j in range(X.shape[1]):
        np.testing.assert_array_equal(bin_thresholds(X[:, j], 255), reference[j])
    np.testing.assert_array_equal(bin_thresholds(np.array([1.0, 3.0, 3.0, 6.0]), 255), [2.0, 4.5])
    assert bin_thresholds(np.array([np.nan, 2.0, 2.0]), 255).size == 0


def test_a_value_goes_to_the_bin_between_its_thresholds_and_a_missing_one_stays_missing():
    from wadiro_models._boosting import to_bins

    X = np.array([[0.5, 1.0], [2.0, np.nan], [2.5, 7.0], [9.0, -1.0]])
    binned = to_bins(X, [np.array([1.0, 2.0, 3.0]), np.array([0.0])])
    # bin i holds the values above threshold i-1 and up to threshold i
    np.testing.assert_array_equal(binned, [[0.0, 1.0], [1.0, np.nan], [2.0, 1.0], [3.0, 0.0]])


def test_lightgbm_grows_trees_as_good_as_scikit_learns_and_as_reproducible():
    X, y = _data(n=2000, seed=6)
    X[::9, 2] = np.nan
    test_X, test_y = _data(n=1000, seed=7)
    ours = GradientBoostingModel(engine="lightgbm").fit(X, y)
    reference = GradientBoostingModel().fit(X, y)
    mae = np.abs(ours.predict(test_X) - test_y).mean()
    assert mae < 1.05 * np.abs(reference.predict(test_X) - test_y).mean()
    assert mae < 0.2 * np.abs(test_y - np.median(y)).mean()  # it learned the signal
    assert ours.model_.n_estimators == 100 and len(ours.bin_thresholds_) == 4
    np.testing.assert_array_equal(
        ours.predict(test_X), GradientBoostingModel(engine="lightgbm").fit(X, y).predict(test_X))


def test_lightgbm_takes_the_settings_and_holds_the_floor():
    X, y = _data(seed=8)
    model = GradientBoostingModel(engine="lightgbm", max_iter=7, max_leaf_nodes=4,
                                  min_samples_leaf=30, lower_bound=0.0).fit(X, y)
    dumped = model.model_.booster_.dump_model()["tree_info"]
    assert len(dumped) == 7 and all(tree["num_leaves"] <= 4 for tree in dumped)
    assert (model.predict(X) >= 0.0).all() and (model.predict(X) == 0.0).any()
    squared = GradientBoostingModel(engine="lightgbm", loss="squared_error").fit(X, y)
    assert squared.model_.objective == "l2"
    with pytest.raises(ValueError, match="engine"):
        GradientBoostingModel(engine="xgboost").fit(X, y)
