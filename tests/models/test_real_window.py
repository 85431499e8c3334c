"""A real 12-week Cambridge window: the physics-constrained fit never predicts negative use.

Building b7 (small loads near zero at night) with the test week starting Monday 2019-04-01:
here the unconstrained network does predict negative consumption in training, so the
constraint y_hat >= 0 has to act.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

from tests.models.cambridge_window import load_window
from wadiro_models import make_model, solve_clarabel

TIGHT = {"tol_gap_abs": 1e-10, "tol_gap_rel": 1e-10, "tol_feas": 1e-10}


@pytest.fixture(scope="module")
def window(cambridge_archive):
    return load_window(cambridge_archive, building=7, test_monday="2019-04-01")


def test_window_has_the_protocol_shape(window):
    assert window.X_train.shape == (2015, 8)  # 12 weeks minus the hour lost to BST
    assert window.X_test.shape == (168, 8)
    assert np.isfinite(window.X_train).all() and (window.y_train > 0).all()


@pytest.mark.parametrize("wasserstein", ["l1", "l2"])
def test_physics_constrained_fit_has_zero_training_violations(window, wasserstein):
    params = {"radius": 0.01, "max_neurons": 20, "wasserstein": wasserstein}
    started = time.perf_counter()
    free = make_model("wadiro_scnn", **params).fit(window.X_train, window.y_train)
    constrained = make_model("wadiro_pcscnn", **params).fit(window.X_train, window.y_train)
    elapsed = time.perf_counter() - started

    assert np.count_nonzero(free.predict(window.X_train) < 0) > 0  # the bound is needed
    assert np.count_nonzero(constrained.predict(window.X_train) < 0) == 0
    assert constrained.solver_status_ == "optimal"
    assert constrained.solver_info_["max_constraint_violation"] <= 1e-7
    assert constrained.objective_ >= free.objective_

    mae_free = np.mean(np.abs(free.predict(window.X_test) - window.y_test))
    mae_constrained = np.mean(np.abs(constrained.predict(window.X_test) - window.y_test))
    print(
        f"\n[{wasserstein}] test-week MAE: constrained {mae_constrained:.3f} kWh, "
        f"unconstrained {mae_free:.3f} kWh; test hours < 0: "
        f"{np.count_nonzero(constrained.predict(window.X_test) < 0)} vs "
        f"{np.count_nonzero(free.predict(window.X_test) < 0)}; both fits {elapsed:.1f} s"
    )
    # the paper finds no significant accuracy cost for the constraint
    assert mae_constrained <= 1.1 * mae_free


@pytest.mark.parametrize("wasserstein", ["l1", "l2"])
def test_target_week_as_bound_points_leaves_no_negative_forecast(window, wasserstein):
    """The test week's inputs are known when the forecast is issued: imposed as bound points,
    y_hat >= 0 holds there too, and the fast solver reaches the tight reference's optimum on
    that program by itself."""
    params = {"radius": 0.01, "max_neurons": 20, "wasserstein": wasserstein}
    points = {"bound_X": window.X_test, "bound_lower": 0.0}
    model = make_model("wadiro_pcscnn", **params, solver="ipm")
    model.fit(window.X_train, window.y_train, **points)
    assert model.solver_name_ == "ipm" and model.solver_status_ == "optimal"
    assert np.count_nonzero(model.predict(window.X_test) < 0) == 0
    assert np.count_nonzero(model.predict(window.X_train) < 0) == 0

    program = model.build_program(window.X_train, window.y_train, **points)
    reference = solve_clarabel(program, **TIGHT)
    assert reference.status == "optimal"
    assert abs(model.objective_ - reference.objective) <= 1e-6 * abs(reference.objective)
