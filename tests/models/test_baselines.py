"""The GP and linear SVR baselines follow the paper's definitions."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.gaussian_process.kernels import RBF, ExpSineSquared, WhiteKernel
from sklearn.svm import LinearSVR

from wadiro_models import GaussianProcessBaseline, LinearSVRBaseline, SolverError


def _data(seed: int = 0, n: int = 150) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 10, size=(n, 2))
    return X, 3 * np.sin(X[:, 0]) + X[:, 1] + 0.1 * rng.standard_normal(n)


def test_gp_kernel_is_rbf_plus_exp_sine_plus_white_and_kept_as_given():
    X, y = _data()
    model = GaussianProcessBaseline(
        length_scale=2.0, periodicity=6.0, length_scale_sine=3.0, noise_level=1.5
    ).fit(X, y)
    (rbf_plus_sine, white) = model.kernel_.k1, model.kernel_.k2
    rbf, sine = rbf_plus_sine.k1, rbf_plus_sine.k2
    assert isinstance(rbf, RBF) and isinstance(sine, ExpSineSquared)
    assert isinstance(white, WhiteKernel)
    # no optimiser: the fitted kernel keeps the tuned hyperparameters exactly
    fitted = (rbf.length_scale, sine.periodicity, sine.length_scale, white.noise_level)
    np.testing.assert_allclose(fitted, (2.0, 6.0, 3.0, 1.5), rtol=1e-12)


@pytest.mark.parametrize("method", ["sklearn", "cholesky"])
def test_gp_posterior_mean_matches_the_closed_form(method):
    """mean(x*) = k(x*, X) (K + noise I)^-1 y on standardised data, computed here by hand."""
    X, y = _data(1, n=60)
    model = GaussianProcessBaseline(length_scale=3.0, periodicity=20.0, length_scale_sine=30.0,
                                    noise_level=1.2, method=method).fit(X, y)
    mx, sx, my, sy = X.mean(0), X.std(0), y.mean(), y.std()
    Xs, ys = (X - mx) / sx, (y - my) / sy
    smooth = RBF(3.0) + ExpSineSquared(30.0, 20.0)
    K = smooth(Xs) + 1.2 * np.eye(len(X))
    X_new = np.random.default_rng(2).uniform(0, 10, size=(7, 2))
    mean = smooth((X_new - mx) / sx, Xs) @ np.linalg.solve(K, ys)
    np.testing.assert_allclose(model.predict(X_new), my + sy * mean, rtol=1e-8)


def test_gp_on_every_other_row_is_the_gp_of_those_rows():
    X, y = _data(4, n=201)
    X_new = np.random.default_rng(5).uniform(0, 10, size=(9, 2))
    params = {"length_scale": 2.0, "periodicity": 6.0, "length_scale_sine": 3.0,
              "noise_level": 0.8}
    thinned = GaussianProcessBaseline(**params, method="cholesky", sample_every=2).fit(X, y)
    rows = np.arange(200, -1, -2)[::-1]  # 0, 2, ..., 200: the last row and every second before
    alone = GaussianProcessBaseline(**params).fit(X[rows], y[rows])
    np.testing.assert_allclose(thinned.predict(X_new), alone.predict(X_new), rtol=1e-9)
    assert thinned.X_train_.shape == (101, 2)


@pytest.mark.parametrize("method", ["sklearn", "cholesky"])
def test_gp_with_an_indefinite_kernel_raises_a_solver_error(method):
    # ExpSineSquared is not positive definite on several features; with little noise the
    # kernel matrix has negative eigenvalues and no Cholesky factor.
    X = np.random.default_rng(3).normal(size=(300, 4))
    y = X.sum(axis=1)
    model = GaussianProcessBaseline(length_scale=1.0, periodicity=1.0, length_scale_sine=1.0,
                                    noise_level=1.0, method=method)
    with pytest.raises(SolverError, match="not positive definite") as info:
        model.fit(X, y)
    assert info.value.status == "failed"


@pytest.mark.parametrize(("loss", "sk_loss"), [("l1", "epsilon_insensitive"),
                                               ("l2", "squared_epsilon_insensitive")])
@pytest.mark.parametrize("fit_intercept", [True, False])
def test_linear_svr_is_sklearn_linear_svr_on_standardised_data(loss, sk_loss, fit_intercept):
    X, y = _data(4)
    model = LinearSVRBaseline(C=2.0, loss=loss, fit_intercept=fit_intercept).fit(X, y)
    mx, sx, my, sy = X.mean(0), X.std(0), y.mean(), y.std()
    reference = LinearSVR(C=2.0, loss=sk_loss, fit_intercept=fit_intercept, epsilon=0.0,
                          dual=True if loss == "l1" else "auto", max_iter=10_000,
                          random_state=0).fit((X - mx) / sx, (y - my) / sy)
    expected = my + sy * reference.predict((X - mx) / sx)
    np.testing.assert_allclose(model.predict(X), expected, rtol=1e-9, atol=1e-9)
    assert model.solver_status_ in {"optimal", "max_iter"}
    assert model.fit_time_ > 0


def test_linear_svr_records_non_convergence_instead_of_warning():
    X, y = _data(5)
    model = LinearSVRBaseline(C=1e3, max_iter=2).fit(X, y)
    assert model.solver_status_ == "max_iter"


def test_linear_svr_passes_other_warnings_to_the_caller_of_fit(monkeypatch):
    """A warning of liblinear's fit other than its ConvergenceWarning is re-emitted, pointing
    at the line that called fit (its stacklevel counts the frames between them)."""
    import warnings

    import wadiro_models._baselines as baselines

    class _Warning(LinearSVR):
        def fit(self, X, y):
            warnings.warn("something else", UserWarning, stacklevel=1)
            return super().fit(X, y)

    monkeypatch.setattr(baselines, "LinearSVR", _Warning)
    X, y = _data(5)
    with pytest.warns(UserWarning, match="something else") as record:
        LinearSVRBaseline().fit(X, y)
    assert [w.filename for w in record] == [__file__]


def test_svr_fits_on_concurrent_threads_reproduce_a_lone_fit():
    """liblinear's random generator is process-wide: concurrent fits must not disturb it."""
    from concurrent.futures import ThreadPoolExecutor

    rng = np.random.default_rng(0)
    X = rng.normal(size=(2000, 8))
    y = X @ rng.normal(size=8) + rng.normal(size=2000)
    alone = LinearSVRBaseline(C=3.0).fit(X, y).coef_
    with ThreadPoolExecutor(8) as pool:
        together = list(pool.map(lambda _: LinearSVRBaseline(C=3.0).fit(X, y).coef_, range(8)))
    for coef in together:
        np.testing.assert_array_equal(coef, alone)


def _svr_objective(X, y, coef, intercept, C, loss, fit_intercept):
    """The primal objective liblinear minimises, on standardised data."""
    mx, sx, my, sy = X.mean(0), X.std(0), y.mean(), y.std()
    Xs, ys = (X - mx) / sx, (y - my) / sy
    w = coef * sx / sy  # back to standardised units
    b = (intercept - my + (mx * coef).sum()) / sy
    r = np.abs(ys - Xs @ w - b)
    penalty = 0.5 * (w @ w + (b * b if fit_intercept else 0.0))
    return penalty + C * np.sum(r if loss == "l1" else r**2)


@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize(("loss", "C"), [("l1", 0.5), ("l1", 50.0), ("l2", 5.0)])
def test_linear_svr_primal_by_clarabel_is_optimal(loss, C, fit_intercept):
    """The primal QP's optimum is no worse than a long liblinear run, and equals it where that
    converges (l2)."""
    X, y = _data(6, n=300)
    exact = LinearSVRBaseline(C=C, loss=loss, fit_intercept=fit_intercept,
                              solver="clarabel").fit(X, y)
    long = LinearSVRBaseline(C=C, loss=loss, fit_intercept=fit_intercept, max_iter=200_000,
                             tol=1e-10).fit(X, y)
    ours = _svr_objective(X, y, exact.coef_, exact.intercept_, C, loss, fit_intercept)
    theirs = _svr_objective(X, y, long.coef_, long.intercept_, C, loss, fit_intercept)
    assert exact.solver_status_ == "optimal" and exact.svr_ is None
    assert ours <= theirs * (1 + 1e-7)
    if long.solver_status_ == "optimal":
        assert ours == pytest.approx(theirs, rel=1e-5)
    auto = LinearSVRBaseline(C=C, loss=loss, fit_intercept=fit_intercept, solver="auto")
    assert (auto.fit(X, y).svr_ is None) == (loss == "l1")
