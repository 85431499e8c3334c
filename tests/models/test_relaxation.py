"""A fit without physical constraints serves a constrained fit only when it solves its program.

If the unconstrained optimum meets the bounds, it is feasible for the constrained program and
no point of that smaller set can do better, so it is an optimum there too: the constrained fit
taken from it must have the same objective as one solved from scratch (to solver tolerance).
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.models.lifted_regression import TIGHT
from wadiro_models import SCNN, WaDiRoSCNN


def _data(seed: int = 0, n: int = 150) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, size=(n, 3))
    y = 30 + 8 * np.sin(X[:, 0]) + 3 * X[:, 1] + rng.standard_normal(n)
    return X, y


def _tight(**params: object) -> WaDiRoSCNN:
    return WaDiRoSCNN(**{"max_neurons": 10, "solver": "clarabel", "solver_options": TIGHT,
                         **params})


@pytest.mark.parametrize("wasserstein", ["l1", "l2"])
def test_a_relaxation_that_meets_the_bound_is_the_constrained_optimum(wasserstein):
    X, y = _data()
    free = _tight(radius=0.05, wasserstein=wasserstein).fit(X, y)
    assert free.predict(X).min() > 0  # the bound y_hat >= 0 does not bite
    shared = _tight(radius=0.05, wasserstein=wasserstein, lower_bound=0.0).fit(
        X, y, relaxation=free)
    solved = _tight(radius=0.05, wasserstein=wasserstein, lower_bound=0.0).fit(X, y)
    assert shared.solver_info_.get("relaxation") is True
    assert shared.solver_name_ == "clarabel+relaxation" and shared.solve_time_ == 0.0
    assert "relaxation" not in solved.solver_info_
    np.testing.assert_allclose(shared.objective_, solved.objective_, rtol=1e-7)
    np.testing.assert_array_equal(shared.predict(X), free.predict(X))
    assert shared.physically_constrained_ and not free.physically_constrained_


def test_a_relaxation_that_breaks_the_bound_is_solved_again():
    X, y = _data(1)
    floor = np.quantile(y, 0.4)
    free = _tight(radius=0.05).fit(X, y)
    assert free.predict(X).min() < floor
    constrained = _tight(radius=0.05, lower_bound=floor).fit(X, y, relaxation=free)
    solved = _tight(radius=0.05, lower_bound=floor).fit(X, y)
    assert "relaxation" not in constrained.solver_info_
    assert constrained.predict(X).min() >= floor
    np.testing.assert_allclose(constrained.objective_, solved.objective_, rtol=1e-9)
    assert constrained.objective_ > free.objective_


@pytest.mark.parametrize("change", [
    {"radius": 0.2},                 # another objective
    {"max_neurons": 14},             # other gates
    {"random_state": 3},             # other gates
    {"wasserstein": "l2"},           # another dual norm
    {"fit_intercept": False},
])
def test_only_the_same_program_serves_as_relaxation(change):
    X, y = _data()
    free = _tight(radius=0.05).fit(X, y)
    params = {"radius": 0.05, **change}
    other = _tight(lower_bound=0.0, **params).fit(X, y, relaxation=free)
    assert "relaxation" not in other.solver_info_


def test_a_fit_to_other_data_or_a_constrained_fit_is_no_relaxation():
    X, y = _data()
    shifted = _tight(radius=0.05).fit(X, y + 1e-3)
    assert "relaxation" not in _tight(radius=0.05, lower_bound=0.0).fit(
        X, y, relaxation=shifted).solver_info_
    bounded = _tight(radius=0.05, upper_bound=1e6).fit(X, y)
    assert "relaxation" not in _tight(radius=0.05, lower_bound=0.0).fit(
        X, y, relaxation=bounded).solver_info_
    plain = SCNN(max_neurons=10).fit(X, y)  # another estimator class
    assert "relaxation" not in _tight(radius=0.05, lower_bound=0.0).fit(
        X, y, relaxation=plain).solver_info_


def test_bound_points_are_checked_too():
    X, y = _data()
    free = _tight(radius=0.05).fit(X, y)
    far = X[:5] + 40.0  # far outside the data: the free network goes where it likes there
    needed = free.predict(far).max() + 1.0
    pinned = _tight(radius=0.05).fit(X, y, bound_X=far, bound_lower=needed, relaxation=free)
    assert "relaxation" not in pinned.solver_info_
    assert pinned.predict(far).min() >= needed - 1e-6
