"""The out-of-sample bounds (paper, Section 4) against their definition and against test data.

Every term is recomputed here from the estimator's attributes and the raw data: the modified
samples z_hat_j are built explicitly, R by checking every corner of the box, the number of
gates active together by enumerating the vertices of the arrangement (two features).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from wadiro_models import SCNN, WaDiRoSCNN
from wadiro_models.exceptions import InvalidInputError

LOW, HIGH = np.array([-1.0, 0.0]), np.array([2.0, 4.0])
Y_LOW, Y_HIGH = -1.5, 2.5  # |f| <= 1.2 + 0.2 noise, shifted


def _target(X: np.ndarray) -> np.ndarray:
    return np.sin(2 * X[:, 0]) * np.cos(X[:, 1]) + 0.2 * X[:, 1] - 0.2


def _iid(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.uniform(LOW, HIGH, size=(n, 2))
    return X, _target(X) + rng.uniform(-0.2, 0.2, size=n)


def _program_units(model, X, y):
    s = model.standardization_
    x_aug = np.hstack([(X - s.x_mean) / s.x_scale, np.ones((len(X), 1))])
    return x_aug, (y - s.y_mean) / s.y_scale


def _modified_samples(model, X, y) -> np.ndarray:
    """z_hat_j = (vec(x d^T), vec(x d^T), 1, y) with vec gate by gate, as beta is laid out."""
    x_aug, y_std = _program_units(model, X, y)
    D = (x_aug @ model.gates_ >= 0).astype(float)
    lifted = np.hstack([D[:, [i]] * x_aug for i in range(model.n_gates_)])
    return np.hstack([lifted, lifted, np.ones((len(X), 1)), y_std[:, None]])


def _beta(model) -> np.ndarray:
    return np.concatenate([model.nu_.ravel(), -model.omega_.ravel(), [model.intercept_], [-1.0]])


def _most_active_gates(model) -> int:
    """Max number of gates with x^T s >= 0 at one point of the 2-D box: the maximum of a count
    of closed half-planes is attained at a vertex of the arrangement (lines and box edges)."""
    s = model.standardization_
    lo, hi = (LOW - s.x_mean) / s.x_scale, (HIGH - s.x_mean) / s.x_scale
    lines = [(g[:2], g[2]) for g in model.gates_.T]  # a^T x + c = 0
    lines += [(np.array([1.0, 0.0]), -v) for v in (lo[0], hi[0])]
    lines += [(np.array([0.0, 1.0]), -v) for v in (lo[1], hi[1])]
    best = 0
    for (a1, c1), (a2, c2) in itertools.combinations(lines, 2):
        M = np.vstack([a1, a2])
        if abs(np.linalg.det(M)) < 1e-12:
            continue
        x = np.linalg.solve(M, -np.array([c1, c2]))
        if np.all(x >= lo - 1e-9) and np.all(x <= hi + 1e-9):
            count = int(np.sum(np.r_[x, 1.0] @ model.gates_ >= -1e-9))
            best = max(best, count)
    return best


@pytest.mark.parametrize("norm", ["l1", "l2"])
def test_every_term_matches_its_definition(norm):
    X, y = _iid(300, seed=0)
    model = WaDiRoSCNN(radius=1e-2, max_neurons=16, wasserstein=norm).fit(X, y)
    delta = 0.1
    bound = model.out_of_sample_bound(delta, feature_bounds=(LOW, HIGH),
                                      target_bounds=(Y_LOW, Y_HIGH))
    order = 1 if norm == "l1" else 2
    z_hat = _modified_samples(model, X, y)
    beta = _beta(model)
    N, P = len(X), model.n_gates_

    # L_N: the training error is |beta^T z_hat| averaged (Lemma 1), and matches predict
    losses = np.abs(z_hat @ beta)
    np.testing.assert_allclose(losses * model.standardization_.y_scale,
                               np.abs(model.predict(X) - y), atol=1e-8)
    assert bound.training_loss == pytest.approx(losses.mean(), rel=1e-10)
    # B_*: the dual norm of beta
    dual = np.max(np.abs(beta)) if norm == "l1" else np.linalg.norm(beta)
    assert bound.weight_bound == pytest.approx(dual, rel=1e-12)
    # R: the largest ||(x, 1, 1, y)|| over the box, checked at every corner
    s = model.standardization_
    corners = []
    for cx in itertools.product(*zip(LOW, HIGH, strict=True)):
        for cy in (Y_LOW, Y_HIGH):
            x_std = (np.array(cx) - s.x_mean) / s.x_scale
            corners.append(np.r_[x_std, 1.0, 1.0, (cy - s.y_mean) / s.y_scale])
    R = max(np.linalg.norm(c, ord=order) for c in corners)
    assert bound.sample_bound == pytest.approx(R, rel=1e-12)
    # R_hat: from the most gates active together, and it bounds every modified sample
    n_active = _most_active_gates(model)
    assert bound.max_active_gates == n_active
    x_mag = np.r_[np.maximum(np.abs((LOW - s.x_mean) / s.x_scale),
                             np.abs((HIGH - s.x_mean) / s.x_scale)), 1.0]
    y_mag = max(abs((Y_LOW - s.y_mean) / s.y_scale), abs((Y_HIGH - s.y_mean) / s.y_scale))
    if norm == "l1":
        R_hat = 2 * n_active * x_mag.sum() + 1 + y_mag
    else:
        R_hat = math.sqrt(2 * n_active * np.sum(x_mag**2) + 1 + y_mag**2)
    assert bound.modified_sample_bound == pytest.approx(R_hat, rel=1e-12)
    X_new, y_new = _iid(20_000, seed=9)
    assert np.linalg.norm(_modified_samples(model, X_new, y_new), ord=order, axis=1).max() \
        <= R_hat
    # psi, and the two propositions
    psi = dual * (2 * P * R if norm == "l1" else math.sqrt(2 * P) * R)
    assert bound.psi == pytest.approx(psi, rel=1e-12)
    confidence = dual * R_hat * math.sqrt(8 * math.log(2 / delta) / N)
    assert bound.modified == pytest.approx(
        losses.mean() + 2 * dual * R_hat / math.sqrt(N) + confidence, rel=1e-10)
    assert bound.original == pytest.approx(
        losses.mean() + 2 * psi / math.sqrt(N) + confidence, rel=1e-10)
    assert bound.bound == min(bound.modified, bound.original)
    assert bound.bound_y == pytest.approx(bound.bound * s.y_scale)


@pytest.mark.parametrize("make", [
    lambda: WaDiRoSCNN(radius=1e-2, max_neurons=20, wasserstein="l1"),
    lambda: WaDiRoSCNN(radius=1e-1, max_neurons=20, wasserstein="l2"),
    lambda: SCNN(max_neurons=20),
    lambda: WaDiRoSCNN(radius=1e-3, max_neurons=40, lower_bound=-1.0),
])
def test_never_below_the_measured_test_error_on_iid_data(make):
    X, y = _iid(400, seed=1)
    model = make().fit(X, y)
    bound = model.out_of_sample_bound(0.05, feature_bounds=(LOW, HIGH),
                                      target_bounds=(Y_LOW, Y_HIGH))
    X_test, y_test = _iid(50_000, seed=2)
    # the paper's units: |beta^T z_hat| = |y_hat - y| on the standardised scale
    test_error = np.mean(np.abs(model.predict(X_test) - y_test)) / bound.y_scale
    assert test_error <= bound.modified
    assert test_error <= bound.original
    assert bound.training_loss < test_error * 3  # a sane fit: the bound is not trivially met


def test_the_tail_bound_is_a_probability_that_falls_with_zeta():
    X, y = _iid(300, seed=3)
    bound = WaDiRoSCNN(max_neurons=10).fit(X, y).out_of_sample_bound()
    excess = bound.modified - bound.training_loss
    values = [bound.exceedance_probability(excess * f) for f in (0.5, 1.01, 2, 10, 100)]
    assert values[0] == 1.0
    assert all(0 <= v <= 1 for v in values)
    assert values == sorted(values, reverse=True) and values[-1] < 0.05


def test_defaults_use_the_training_range_and_the_estimators_norm():
    X, y = _iid(200, seed=4)
    model = WaDiRoSCNN(max_neurons=10, wasserstein="l2").fit(X, y)
    default = model.out_of_sample_bound()
    explicit = model.out_of_sample_bound(
        feature_bounds=(X.min(axis=0), X.max(axis=0)), target_bounds=(y.min(), y.max()),
        norm="l2")
    assert default == explicit
    assert SCNN(max_neurons=10).fit(X, y).out_of_sample_bound().norm == "l1"


def test_bad_arguments_are_refused():
    X, y = _iid(100, seed=5)
    model = WaDiRoSCNN(max_neurons=6).fit(X, y)
    with pytest.raises(InvalidInputError):
        model.out_of_sample_bound(0.0)
    with pytest.raises(InvalidInputError):
        model.out_of_sample_bound(norm="linf")
    with pytest.raises(InvalidInputError):
        model.out_of_sample_bound(weight_bound=1e-6)
    with pytest.raises(InvalidInputError):
        model.out_of_sample_bound(target_bounds=(1.0, 0.0))
    bigger = model.out_of_sample_bound(weight_bound=1e3)
    assert bigger.weight_bound == 1e3 and bigger.modified > model.out_of_sample_bound().modified
