import numpy as np
import pytest
from sklearn.linear_model import Ridge

from tasks.protocol.tuning import TuningFailedError, tune_together
from wadiro_models.search_spaces import Categorical, IntUniform, LogUniform


def _data(seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(120, 3))
    y = X @ np.array([1.0, -2.0, 0.5]) + 0.1 * rng.normal(size=120)
    return X[:90], y[:90], X[90:], y[90:]


SPACE = {"alpha": LogUniform(1e-4, 1e3), "fit_intercept": Categorical((True, False))}


def tune(make_model, space, X_fit, y_fit, X_val, y_val, *, n_trials, seed):
    """One estimator tuned alone: ``make_model(**params)`` fitted on the fit rows, its
    predictions of the validation rows scored (a study of one model raises when every trial
    fails)."""

    def evaluate(params):
        model = make_model(**params).fit(X_fit, y_fit)
        return {"model": np.asarray(model.predict(X_val), dtype=float)}

    return tune_together(evaluate, ("model",), space, y_val, n_trials=n_trials,
                         seed=seed)["model"]


def test_same_seed_same_trials_and_best_is_the_minimum():
    X_fit, y_fit, X_val, y_val = _data()
    a = tune(Ridge, SPACE, X_fit, y_fit, X_val, y_val, n_trials=8, seed=7)
    b = tune(Ridge, SPACE, X_fit, y_fit, X_val, y_val, n_trials=8, seed=7)
    assert [t.params for t in a.trials] == [t.params for t in b.trials]
    assert a.best_value == min(t.value for t in a.trials)
    # the best value is the validation MAE of a model refitted with the best parameters
    refit = Ridge(**a.best_params).fit(X_fit, y_fit)
    assert a.best_value == pytest.approx(np.mean(np.abs(refit.predict(X_val) - y_val)))


def test_other_seed_other_trials():
    X_fit, y_fit, X_val, y_val = _data()
    a = tune(Ridge, SPACE, X_fit, y_fit, X_val, y_val, n_trials=4, seed=1)
    b = tune(Ridge, SPACE, X_fit, y_fit, X_val, y_val, n_trials=4, seed=2)
    assert [t.params for t in a.trials] != [t.params for t in b.trials]


def test_missing_validation_labels_are_excluded():
    X_fit, y_fit, X_val, y_val = _data()
    y_val = y_val.copy()
    y_val[:5] = np.nan
    result = tune(Ridge, {"alpha": LogUniform(1e-3, 1.0)}, X_fit, y_fit, X_val, y_val,
                  n_trials=2, seed=0)
    refit = Ridge(**result.best_params).fit(X_fit, y_fit)
    assert result.best_value == pytest.approx(
        np.mean(np.abs(refit.predict(X_val)[5:] - y_val[5:])))


def test_a_validation_week_without_actuals_is_refused():
    X_fit, y_fit, X_val, y_val = _data()
    with pytest.raises(ValueError, match="no actual"):
        tune(Ridge, SPACE, X_fit, y_fit, X_val, np.full_like(y_val, np.nan), n_trials=2, seed=0)


class _Fragile(Ridge):
    """Fails for large alpha, to check that failed trials are recorded and skipped."""

    def fit(self, X, y):
        if self.alpha > 1.0:
            raise RuntimeError("solver failed")
        return super().fit(X, y)


def test_failed_trials_are_recorded_and_skipped():
    X_fit, y_fit, X_val, y_val = _data()
    result = tune(_Fragile, {"alpha": LogUniform(1e-3, 1e3)}, X_fit, y_fit, X_val, y_val,
                  n_trials=10, seed=3)
    states = {t.state for t in result.trials}
    assert states == {"complete", "fail"}
    for t in result.trials:
        assert (t.error is not None and "solver failed" in t.error) == (t.state == "fail")
    assert result.best_params["alpha"] <= 1.0


def test_all_trials_failing_raises():
    X_fit, y_fit, X_val, y_val = _data()
    with pytest.raises(TuningFailedError, match="solver failed") as failure:
        tune(_Fragile, {"alpha": LogUniform(10.0, 1e3)}, X_fit, y_fit, X_val, y_val,
             n_trials=3, seed=0)
    assert [t.state for t in failure.value.trials] == ["fail"] * 3


def test_integer_dimension():
    from sklearn.neighbors import KNeighborsRegressor

    X_fit, y_fit, X_val, y_val = _data()
    result = tune(KNeighborsRegressor, {"n_neighbors": IntUniform(1, 10)}, X_fit, y_fit,
                  X_val, y_val, n_trials=5, seed=0)
    assert all(isinstance(t.params["n_neighbors"], int) for t in result.trials)


def _together(seed=5, n_trials=10):
    """Ridge (guiding) and Lasso tuned on the same trials."""
    from sklearn.linear_model import Lasso

    X_fit, y_fit, X_val, y_val = _data()
    space = {"alpha": LogUniform(1e-4, 10.0)}

    def evaluate(params):
        out = {"ridge": Ridge(**params).fit(X_fit, y_fit).predict(X_val)}
        if params["alpha"] > 3.0:
            out["lasso"] = RuntimeError("too sparse")
        else:
            out["lasso"] = Lasso(**params).fit(X_fit, y_fit).predict(X_val)
        return out

    return tune_together(evaluate, ("ridge", "lasso"), space, y_val, n_trials=n_trials,
                         seed=seed), (X_fit, y_fit, X_val, y_val, space)


def test_models_tuned_together_share_trials_and_each_takes_its_own_best():
    results, (X_fit, y_fit, X_val, y_val, space) = _together()
    ridge, lasso = results["ridge"], results["lasso"]
    assert [t.params for t in ridge.trials] == [t.params for t in lasso.trials]
    assert ridge.best_value == min(t.value for t in ridge.trials)
    done = [t for t in lasso.trials if t.value is not None]
    assert lasso.best_value == min(t.value for t in done)
    failed = [t for t in lasso.trials if t.state == "fail"]
    assert all(t.params["alpha"] > 3.0 and t.error == "RuntimeError: too sparse" for t in failed)
    # the study follows the first model: its trials are those of tuning it alone
    alone = tune(Ridge, space, X_fit, y_fit, X_val, y_val, n_trials=10, seed=5)
    assert [t.params for t in alone.trials] == [t.params for t in ridge.trials]
    assert alone.best_value == ridge.best_value


def test_a_model_failing_every_trial_of_a_joint_study_gets_the_error():
    from sklearn.linear_model import Lasso  # noqa: F401 - the helper's second model

    X_fit, y_fit, X_val, y_val = _data()

    def evaluate(params):
        return {"ridge": Ridge(**params).fit(X_fit, y_fit).predict(X_val),
                "broken": ValueError("never fits")}

    results = tune_together(evaluate, ("ridge", "broken"), {"alpha": LogUniform(1e-3, 1.0)},
                            y_val, n_trials=3, seed=0)
    assert isinstance(results["broken"], TuningFailedError)
    assert np.isfinite(results["ridge"].best_value)


def test_a_warm_start_tries_its_points_first_and_finds_the_cold_optimum_with_fewer_trials():
    X_fit, y_fit, X_val, y_val = _data()
    cold = tune(Ridge, SPACE, X_fit, y_fit, X_val, y_val, n_trials=15, seed=11)

    def evaluate(params):
        return {"ridge": Ridge(**params).fit(X_fit, y_fit).predict(X_val)}

    outside = {"alpha": 1e6, "fit_intercept": True}  # not a point of SPACE: left out
    warm = tune_together(evaluate, ("ridge",), SPACE, y_val, n_trials=4, seed=11,
                         start_from=[cold.best_params, outside])["ridge"]
    assert len(warm.trials) == 4 and warm.trials[0].params == cold.best_params
    assert warm.best_value <= cold.best_value * (1 + 1e-12)
