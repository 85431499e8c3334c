"""Gates, scaling, constraint parsing and the ReLU map, each against hand-computed values."""

from __future__ import annotations

import numpy as np
import pytest

from wadiro_models import InfeasibleConstraintsError, InvalidInputError, physical_limits
from wadiro_models._gates import augment, distinct_gates, n_gate_samples
from wadiro_models._relu_network import relu_network
from wadiro_models._scaling import Standardization


def test_gate_count_is_half_the_neurons_rounded_up():
    assert [n_gate_samples(m) for m in (1, 2, 10, 11, 70)] == [1, 1, 5, 6, 35]


def test_distinct_gates_drop_duplicate_and_all_zero_patterns_in_draw_order():
    X_aug = augment(np.array([[-1.0], [0.5], [2.0]]))
    gates = np.array([
        [1.0, 2.0, 0.0, -1.0, 1.0],   # slope row
        [0.0, 0.0, -1.0, 0.0, -1.0],  # bias row
    ])
    # patterns: [0,1,1], [0,1,1] (duplicate), [0,0,0] (all zero), [1,0,0], [0,0,1]
    kept, D = distinct_gates(X_aug, gates)
    np.testing.assert_array_equal(kept, gates[:, [0, 3, 4]])
    np.testing.assert_array_equal(D.astype(int), [[0, 1, 0], [1, 0, 0], [1, 0, 1]])


def test_standardisation_round_trip_and_limit_conversion():
    X = np.array([[1.0, 5.0], [3.0, 5.0], [5.0, 5.0]])
    y = np.array([10.0, 20.0, 30.0])
    s = Standardization.fit(X, y)
    np.testing.assert_allclose(s.x_scale, [np.std([1, 3, 5]), 1.0])  # constant column kept
    np.testing.assert_allclose(s.transform_X(X)[:, 1], 0.0)
    np.testing.assert_allclose(s.inverse_y(s.transform_y(y)), y)
    sigma = np.std(y)
    assert s.level(0.0) == pytest.approx(-20.0 / sigma)
    assert s.step(4.0) == pytest.approx(4.0 / sigma)
    assert s.level(-np.inf) == -np.inf


def test_physical_limits_broadcast_and_validate():
    limits = physical_limits(0.0, [1.0, np.inf, 3.0], 2.0, 3)
    np.testing.assert_array_equal(limits.lower, [0, 0, 0])
    np.testing.assert_array_equal(limits.ramp, [2, 2])
    assert physical_limits(None, np.inf, None, 3).empty
    excess, where = limits.max_violation(np.array([0.5, 7.0, 2.5]))
    # |7.0 - 0.5| = 6.5 exceeds the ramp 2 by 4.5 on the step into sample 1
    assert excess == pytest.approx(4.5) and where == "ramp at sample 1"
    with pytest.raises(InfeasibleConstraintsError, match="sample 2"):
        physical_limits([0, 0, 5], 4.0, None, 3)
    with pytest.raises(InvalidInputError, match="ramp must be a scalar or have shape"):
        physical_limits(None, None, [1.0, 1.0, 1.0], 3)


def test_relu_map_of_hand_made_weights():
    """nu_1 = (3, 4, 0): norm 5 -> input weights nu/sqrt(5), output weight +sqrt(5)."""
    nu = np.array([[3.0, 4.0, 0.0], [0.0, 0.0, 0.0]])
    omega = np.array([[0.0, 0.0, 0.0], [0.0, 1.0, -1.0]])
    identity = Standardization(np.zeros(2), np.ones(2), 0.0, 1.0)
    net = relu_network(nu, omega, 0.5, identity)
    assert net.n_hidden == 2  # two zero neurons dropped
    np.testing.assert_allclose(net.W1[:, 0], [3 / np.sqrt(5), 4 / np.sqrt(5)])
    np.testing.assert_allclose(net.w2, [np.sqrt(5), -np.sqrt(np.sqrt(2))])
    x = np.array([[1.0, 2.0], [-2.0, 0.5]])
    expected = np.maximum(x @ [3, 4], 0) - np.maximum(x @ [0, 1] - 1, 0) + 0.5
    np.testing.assert_allclose(net(x), expected)
