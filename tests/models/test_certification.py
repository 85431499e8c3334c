"""Stability certification: the MILP against exhaustive enumeration, sampling and its own rows.

The enumeration below restates the network from the estimator's attributes (gates, weights,
standardisation) and solves one LP per pair of activation regions, independently of the MILP
code; the sampling evaluates ``predict`` itself.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest
from scipy.optimize import linprog

from wadiro_models import SCNN, WaDiRoSCNN, certify_stability
from wadiro_models.certification._certificate import _network
from wadiro_models.certification._domain import _domain
from wadiro_models.certification._milp import _build_milp
from wadiro_models.exceptions import InvalidInputError

UCI = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "uci"


def _toy(d: int, n: int = 120, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2.0, 3.0, size=(n, d)) * np.arange(1, d + 1)  # unequal feature scales
    y = np.sin(X[:, 0]) + 0.3 * X[:, -1] ** 2 + 0.1 * rng.normal(size=n)
    return X, y


def _units(model) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, float]:
    """(gates, values) as affine maps of raw x: g = x @ G + g0, h = x @ H + h0; y scale."""
    s = model.standardization_
    S, U = model.gates_, (model.nu_ - model.omega_).T
    G, H = S[:-1] / s.x_scale[:, None], U[:-1] / s.x_scale[:, None]
    g0 = S[-1] - (s.x_mean / s.x_scale) @ S[:-1]
    h0 = U[-1] - (s.x_mean / s.x_scale) @ U[:-1]
    return G, g0, H, h0, s.y_scale


def _enumerate(model, lower, upper, eps, norm) -> float:
    """max over every pair of activation patterns of an LP in (x, x'[, a]) (closed regions)."""
    G, g0, H, h0, scale = _units(model)
    d, P = G.shape
    eps = np.broadcast_to(np.asarray(eps, float), (d,))
    n = 2 * d + (d if norm == "1" else 0)
    bounds = [(lo, hi) for lo, hi in zip(lower, upper, strict=True)] * 2
    if norm == "1":
        bounds += [(0, None)] * d
    rows, rhs = [], []
    for k in range(d):  # the perturbation set
        diff = np.zeros(n)
        diff[d + k], diff[k] = 1.0, -1.0
        if norm == "inf":
            rows += [diff, -diff]
            rhs += [eps[k], eps[k]]
        else:
            a = np.zeros(n)
            a[2 * d + k] = -1.0
            rows += [diff + a, -diff + a]
            rhs += [0.0, 0.0]
    if norm == "1":
        total = np.zeros(n)
        total[2 * d:] = 1.0 / eps
        rows.append(total)
        rhs.append(1.0)
    best = -np.inf
    for gamma in itertools.product((0, 1), repeat=P):
        for eta in itertools.product((0, 1), repeat=P):
            A, b = list(rows), list(rhs)
            for i in range(P):
                for offset, on in ((0, gamma[i]), (d, eta[i])):
                    row = np.zeros(n)
                    row[offset:offset + d] = G[:, i]
                    sign = -1.0 if on else 1.0  # on: g >= 0, i.e. -g <= 0
                    A.append(sign * row)
                    b.append(-sign * g0[i])
            c = np.zeros(n)  # minimise -(sum eta h(x') - sum gamma h(x))
            const = 0.0
            for i in range(P):
                c[d:2 * d] -= eta[i] * H[:, i]
                c[:d] += gamma[i] * H[:, i]
                const += (gamma[i] - eta[i]) * h0[i]
            result = linprog(c, A_ub=np.array(A), b_ub=np.array(b), bounds=bounds,
                             method="highs")
            if result.status == 0:
                best = max(best, -(result.fun + const))
    return best * scale


LARGEST = pytest.mark.slow  # the largest networks: minutes of MILPs on a busy 2-core machine


@pytest.mark.parametrize(("d", "max_neurons", "norm"), [
    (2, 6, "inf"), (2, 10, "1"), (3, 8, "inf"), pytest.param(3, 10, "1", marks=LARGEST),
])
def test_milp_equals_exhaustive_enumeration_of_region_pairs(d, max_neurons, norm):
    X, y = _toy(d)
    model = WaDiRoSCNN(radius=1e-3, max_neurons=max_neurons).fit(X, y)
    assert model.n_gates_ <= 5
    lower, upper = X.min(axis=0), X.max(axis=0)
    eps = 0.05 * (upper - lower)
    certificate = certify_stability(model, (lower, upper), eps, norm)
    expected = _enumerate(model, lower, upper, eps, norm)
    assert certificate.status == "optimal"
    assert certificate.l_eps == pytest.approx(expected, rel=1e-6, abs=1e-8)
    # the supremum is approached by actual points: the witness gets within a hair of it
    assert certificate.lower == pytest.approx(expected, rel=1e-5, abs=1e-7)


def test_every_region_is_reachable_not_only_the_all_active_one():
    """The published code's reversed x/A inequalities leave only the all-active region: a
    network whose largest change is a gate switching off would be under-certified there."""
    X, y = _toy(2, seed=3)
    model = SCNN(max_neurons=6).fit(X, y)
    lower, upper = X.min(axis=0), X.max(axis=0)
    eps = 0.05 * (upper - lower)
    certificate = certify_stability(model, (lower, upper), eps, "inf")
    G, g0, *_ = _units(model)
    x, xp = certificate.x, certificate.x_perturbed
    patterns = np.vstack([x @ G + g0 >= 0, xp @ G + g0 >= 0])
    assert not patterns.all(), "the worst case found lies outside the all-active region"


def test_the_mapped_relu_network_equals_enumeration():
    X, y = _toy(2, seed=1)
    model = SCNN(max_neurons=4).fit(X, y)  # two gates, at most four ReLU neurons
    relu = model.to_relu_network()
    assert relu.n_hidden <= 4
    lower, upper = X.min(axis=0), X.max(axis=0)
    eps = 0.1 * (upper - lower)
    certificate = certify_stability(model, (lower, upper), eps, "inf", form="relu")

    class AsGated:  # the ReLU network as units gated by themselves, value w2 * z
        standardization_ = type("S", (), {"x_scale": np.ones(2), "x_mean": np.zeros(2),
                                          "y_scale": 1.0})()
        gates_ = np.vstack([relu.W1, relu.b1])
        nu_ = (np.vstack([relu.W1, relu.b1]) * relu.w2).T
        omega_ = np.zeros_like(nu_)

    assert certificate.l_eps == pytest.approx(
        _enumerate(AsGated, lower, upper, eps, "inf"), rel=1e-6, abs=1e-8)


@pytest.mark.parametrize(("d", "max_neurons", "norm"), [
    (2, 6, "inf"), (2, 10, "1"), (3, 8, "inf"), pytest.param(3, 10, "1", marks=LARGEST),
    (3, 10, "2"),
])
def test_the_unit_bound_is_never_below_the_exact_value(d, max_neurons, norm):
    """The per-unit bound against the exact supremum (enumeration for the box and l1 ball, the
    converged MILP for l2) on small networks, fitted by both estimators."""
    X, y = _toy(d, seed=d)
    lower, upper = X.min(axis=0), X.max(axis=0)
    eps = 0.05 * (upper - lower)
    for model in (WaDiRoSCNN(radius=1e-3, max_neurons=max_neurons).fit(X, y),
                  SCNN(max_neurons=max_neurons).fit(X, y)):
        exact = (certify_stability(model, (lower, upper), eps, norm).l_eps if norm == "2"
                 else _enumerate(model, lower, upper, eps, norm))
        bound = certify_stability(model, (lower, upper), eps, norm, method="unit_bounds")
        assert bound.status == "unit_bounds" and bound.method == "unit_bounds"
        assert bound.l_eps >= exact * (1 - 1e-9) - 1e-12
        assert bound.lower <= exact * (1 + 1e-9) + 1e-12  # attained by a pair of points


def test_the_unit_bound_bounds_dense_sampling_on_a_real_fitted_model():
    model, X = _uci_model(max_neurons=30)
    lower, upper = X.min(axis=0), X.max(axis=0)
    eps = 0.02 * (upper - lower)
    bound = certify_stability(model, None, eps, "inf", method="unit_bounds")
    milp = certify_stability(model, None, eps, "inf", node_limit=100)
    sampled = _sampled_deviation(model, lower, upper, eps, "inf", 50_000,
                                 np.random.default_rng(2))
    assert bound.l_eps >= sampled * (1 - 1e-9)
    assert bound.l_eps >= milp.lower


def _uci_model(max_neurons: int = 10, **kwargs):
    path = UCI / "ENB2012_data.csv"
    if not path.is_file():
        pytest.skip(f"UCI energy data not present at {path}")
    data = np.loadtxt(path, delimiter=",")
    X, y = data[:, :8], data[:, 8]
    return WaDiRoSCNN(max_neurons=max_neurons, **kwargs).fit(X, y), X


def _sampled_deviation(model, lower, upper, eps, norm, n, rng) -> float:
    """Largest |f(x) - f(x + e)| over random pairs and pairs straddling gate hyperplanes."""
    d = lower.size
    G, g0, *_ = _units(model)
    x = rng.uniform(lower, upper, size=(n, d))
    near = []
    for i in range(G.shape[1]):  # points on each gate's hyperplane
        p = rng.uniform(lower, upper, size=(n // 10, d))
        step = (p @ G[:, i] + g0[i]) / (G[:, i] @ G[:, i])
        near.append(np.clip(p - step[:, None] * G[:, i], lower, upper))
    x = np.vstack([x, *near])
    if norm == "inf":
        e = rng.uniform(-1, 1, size=x.shape) * eps
        e[: len(e) // 2] = np.sign(e[: len(e) // 2]) * eps  # box vertices
    else:
        k = rng.integers(0, d, size=len(x))
        e = np.zeros_like(x)
        e[np.arange(len(x)), k] = rng.choice([-1, 1], size=len(x)) * eps[k] * rng.uniform(
            0.5, 1, size=len(x))
    a = np.clip(x - e / 2, lower, upper)
    b = np.clip(a + e, lower, upper)
    return float(np.max(np.abs(model.predict(b) - model.predict(a))))


@pytest.mark.parametrize("norm", ["inf", "1"])
def test_never_below_dense_sampling_on_a_real_fitted_model(norm):
    model, X = _uci_model(max_neurons=10)
    lower, upper = X.min(axis=0), X.max(axis=0)
    eps = 0.02 * (upper - lower)
    certificate = certify_stability(model, None, eps, norm, time_limit=60)
    sampled = _sampled_deviation(model, lower, upper, eps, norm, 100_000,
                                 np.random.default_rng(0))
    assert certificate.l_eps >= sampled * (1 - 1e-9)
    assert certificate.lower <= certificate.l_eps
    assert certificate.lower >= 0.5 * sampled  # the witness search is not idle


def test_a_stopped_search_still_bounds_every_sampled_deviation():
    model, X = _uci_model(max_neurons=30)
    lower, upper = X.min(axis=0), X.max(axis=0)
    eps = 0.02 * (upper - lower)
    certificate = certify_stability(model, None, eps, "inf", time_limit=0.5)
    assert certificate.status in ("time_limit", "optimal")
    assert certificate.solve_time < 10
    sampled = _sampled_deviation(model, lower, upper, eps, "inf", 50_000,
                                 np.random.default_rng(1))
    assert certificate.lower <= certificate.l_eps
    assert certificate.l_eps >= sampled * (1 - 1e-9)


def test_a_node_limit_gives_the_same_bound_every_time():
    model, X = _uci_model(max_neurons=30)
    eps = 0.02 * (X.max(axis=0) - X.min(axis=0))
    first = certify_stability(model, None, eps, "inf", node_limit=5)
    second = certify_stability(model, None, eps, "inf", node_limit=5)
    assert first.status in ("node_limit", "optimal")
    assert (first.l_eps, first.lower, first.status) == (second.l_eps, second.lower, second.status)
    sampled = _sampled_deviation(model, X.min(axis=0), X.max(axis=0), eps, "inf", 20_000,
                                 np.random.default_rng(2))
    assert first.l_eps >= sampled * (1 - 1e-9)


def test_grows_monotonically_with_eps():
    model, X = _uci_model(max_neurons=8)
    width = X.max(axis=0) - X.min(axis=0)
    values = [certify_stability(model, None, f * width, "inf").l_eps
              for f in (0.0, 0.001, 0.01, 0.05, 0.2)]
    assert all(b >= a * (1 - 1e-7) - 1e-9 for a, b in zip(values, values[1:], strict=False))
    assert values[0] == pytest.approx(0.0, abs=1e-9)


def test_relu_form_tends_to_zero_while_the_gated_form_keeps_its_jumps():
    model, X = _uci_model(max_neurons=8)
    width = X.max(axis=0) - X.min(axis=0)
    relu = model.to_relu_network()
    # Lipschitz constant of the ReLU network for l_inf perturbations (per unit of eps)
    lipschitz = float(np.sum(np.abs(relu.w2) * (np.abs(relu.W1) * width[:, None]).sum(axis=0)))
    relu_values, gated_values = [], []
    for f in (1e-2, 1e-3, 1e-4, 1e-5):
        relu_values.append(certify_stability(model, None, f * width, "inf", form="relu").l_eps)
        gated_values.append(certify_stability(model, None, f * width, "inf").l_eps)
        assert relu_values[-1] <= lipschitz * f * (1 + 1e-6) + 1e-9
    assert relu_values == sorted(relu_values, reverse=True)
    assert relu_values[-1] < 1e-3 * relu_values[0] * 100
    # the gated form jumps on gate hyperplanes: its L_eps does not vanish with eps
    assert gated_values[-1] > 100 * relu_values[-1]


@pytest.mark.parametrize("norm", ["inf", "1", "2"])
@pytest.mark.parametrize("form", ["gated", "relu"])
def test_the_big_m_rows_never_cut_off_a_feasible_point(norm, form):
    X, y = _toy(3, n=200, seed=4)
    model = WaDiRoSCNN(radius=1e-3, max_neurons=16).fit(X, y)
    lower, upper = X.min(axis=0), X.max(axis=0)
    eps = np.array([0.3, 0.0, 1.0])  # the middle feature held fixed
    net = _network(model, form)
    problem = _build_milp(net, _domain(net, (lower, upper), eps, norm))
    constraint = problem.constraints()[0]
    rng = np.random.default_rng(0)
    n = 3000
    x = rng.uniform(lower, upper, size=(n, 3))
    x[:300] = rng.choice([0, 1], size=(300, 3)) * (upper - lower) + lower  # box corners
    # points exactly on gate hyperplanes (active there, by the estimator's convention)
    for i in range(net.n_units):
        a, a0 = net.A[:, i], net.a0[i]
        j = slice(300 + 20 * i, 320 + 20 * i)
        x[j] -= ((x[j] @ a + a0) / (a @ a))[:, None] * a
    x = np.clip(x, lower, upper)
    direction = rng.uniform(-1, 1, size=(n, 3)) * eps
    if norm == "1":
        direction /= np.maximum(np.sum(np.abs(direction) / np.where(eps > 0, eps, 1), axis=1,
                                       keepdims=True), 1.0)
    elif norm == "2":
        direction /= np.maximum(np.linalg.norm(direction / np.where(eps > 0, eps, 1), axis=1,
                                               keepdims=True), 1.0)
    xp = np.clip(x + direction, lower, upper)
    for k in range(n):
        v = problem.point(x[k], xp[k])
        assert np.all(v >= problem.bounds.lb - 1e-9) and np.all(v <= problem.bounds.ub + 1e-9)
        rows = constraint.A @ v
        assert np.all(rows >= constraint.lb - 1e-7), k
        assert np.all(rows <= constraint.ub + 1e-7), k
        # and the objective is the true deviation (off the hyperplanes, where rounding in
        # the internal units may pick the other, equally admitted, activation)
        if np.min(np.abs(net.gates(np.vstack([x[k], xp[k]])))) > 1e-9:
            assert -(problem.c @ v) * net.scale == pytest.approx(
                net.predict(xp[k])[0] - net.predict(x[k])[0], abs=1e-7)


def test_forms_reproduce_predict():
    X, y = _toy(3)
    model = WaDiRoSCNN(max_neurons=12).fit(X, y)
    np.testing.assert_allclose(_network(model, "gated").predict(X), model.predict(X), atol=1e-10)
    relu = model.to_relu_network()
    np.testing.assert_allclose(_network(model, "relu").predict(X), relu.predict(X), atol=1e-10)
    np.testing.assert_allclose(_network(relu, "gated").predict(X), relu.predict(X), atol=1e-10)


def test_the_witness_attains_lower_and_respects_domain_and_ball():
    X, y = _toy(3)
    model = WaDiRoSCNN(max_neurons=10).fit(X, y)
    lower, upper = X.min(axis=0), X.max(axis=0)
    eps = np.array([0.5, 0.0, 2.0])
    for norm in ("inf", "1", "2"):
        c = certify_stability(model, (lower, upper), eps, norm)
        assert c.status == "optimal"
        assert np.all(c.x >= lower) and np.all(c.x <= upper)
        assert np.all(c.x_perturbed >= lower) and np.all(c.x_perturbed <= upper)
        e = c.x_perturbed - c.x
        assert e[1] == 0.0
        size = {"inf": np.max(np.abs(e[[0, 2]]) / eps[[0, 2]]),
                "1": np.sum(np.abs(e[[0, 2]]) / eps[[0, 2]]),
                "2": np.linalg.norm(e[[0, 2]] / eps[[0, 2]])}[norm]
        assert size <= 1 + 1e-9
        deviation = abs(model.predict(c.x_perturbed[None])[0] - model.predict(c.x[None])[0])
        assert deviation == pytest.approx(c.lower, rel=1e-12, abs=1e-12)
        assert c.gap >= -1e-9 and c.relative_gap <= 1e-4


def test_the_l2_ball_lies_between_its_inscribed_and_enclosing_boxes():
    X, y = _toy(3)
    model = WaDiRoSCNN(max_neurons=10).fit(X, y)
    eps = np.array([0.5, 1.0, 2.0])
    ball = certify_stability(model, None, eps, "2")
    outer = certify_stability(model, None, eps, "inf")
    inner = certify_stability(model, None, eps / np.sqrt(3), "inf")
    assert ball.status == "optimal" and ball.n_cuts > 0
    assert inner.l_eps * (1 - 1e-6) <= ball.l_eps <= outer.l_eps * (1 + 1e-6)


def test_bad_inputs_are_refused():
    X, y = _toy(2)
    model = SCNN(max_neurons=4).fit(X, y)
    with pytest.raises(InvalidInputError):
        certify_stability(model, (X.max(axis=0), X.min(axis=0)), 0.1)
    with pytest.raises(InvalidInputError):
        certify_stability(model, None, -0.1)
    with pytest.raises(InvalidInputError):
        certify_stability(model, None, 0.1, norm="3")
    with pytest.raises(InvalidInputError):
        certify_stability(model, (np.full(2, -np.inf), np.zeros(2)), 0.1)
    with pytest.raises(InvalidInputError):
        certify_stability(SCNN(), None, 0.1)
    with pytest.raises(InvalidInputError):
        certify_stability(model.to_relu_network(), None, 0.1)
