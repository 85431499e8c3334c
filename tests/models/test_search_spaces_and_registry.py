"""Search spaces (paper's Table hyperreal) and the model registry fit together."""

from __future__ import annotations

import math

import numpy as np
import pytest

from wadiro_models import (
    REGISTRY,
    SEARCH_SPACES,
    Categorical,
    IntUniform,
    LogUniform,
    UnknownModelError,
    WaDiRoSCNN,
    make_model,
)


def test_every_registered_model_has_a_search_space_of_its_own_parameters():
    assert set(SEARCH_SPACES) == set(REGISTRY)
    for name, space in SEARCH_SPACES.items():
        params = make_model(name).get_params()
        assert set(space) <= set(params), name


def test_search_spaces_follow_the_paper_table():
    scnn = SEARCH_SPACES["wadiro_scnn"]
    assert scnn["radius"] == LogUniform(math.exp(-6), math.exp(1))
    assert scnn["max_neurons"] == IntUniform(10, 70)
    assert scnn["wasserstein"] == Categorical(("l1", "l2"))
    assert SEARCH_SPACES["wadiro_pcscnn"] == scnn
    assert set(SEARCH_SPACES["wadiro_linreg"]) == {"radius", "wasserstein"}
    svr = SEARCH_SPACES["svr"]
    assert svr["C"] == LogUniform(math.exp(0.1), math.exp(7))
    assert set(svr["fit_intercept"].choices) == {True, False}
    assert set(svr["loss"].choices) == {"l1", "l2"}
    gp = SEARCH_SPACES["gp"]
    for name in ("length_scale", "periodicity", "length_scale_sine"):
        assert gp[name] == LogUniform(math.exp(0.1), math.exp(5))
    assert gp["noise_level"] == LogUniform(math.exp(0.001), math.exp(2))


def test_search_spaces_are_read_only():
    with pytest.raises(TypeError):
        SEARCH_SPACES["new"] = {}  # type: ignore[index]


@pytest.mark.parametrize(
    "bad", [lambda: LogUniform(0.0, 1.0), lambda: LogUniform(2.0, 1.0),
            lambda: IntUniform(5, 4), lambda: Categorical(())]
)
def test_invalid_distributions_are_refused(bad):
    with pytest.raises(ValueError):
        bad()


def test_every_model_fits_with_a_point_drawn_from_its_space():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(80, 3))
    y = 5 + X[:, 0] + np.sin(X[:, 1])
    for name, space in SEARCH_SPACES.items():
        params = {}
        for key, dist in space.items():
            if isinstance(dist, LogUniform):
                params[key] = float(np.sqrt(dist.low * dist.high))
            elif isinstance(dist, IntUniform):
                params[key] = dist.low
            else:
                params[key] = dist.choices[0]
        model = make_model(name, **params).fit(X, y)
        assert np.isfinite(model.predict(X)).all(), name
        assert model.fit_time_ > 0 and isinstance(model.solver_status_, str)


def test_pcscnn_is_the_network_with_a_zero_lower_bound():
    model = make_model("wadiro_pcscnn", radius=0.1)
    assert isinstance(model, WaDiRoSCNN)
    assert model.lower_bound == 0.0 and model.radius == 0.1
    assert make_model("wadiro_scnn").lower_bound is None


def test_unknown_model_name():
    with pytest.raises(UnknownModelError,
                       match="unknown model 'xgb'; known models: gbr, gbr_lags, gp"):
        make_model("xgb")


def test_the_fast_options_solve_the_same_program():
    """Each entry's fast options give the same fit as the defaults (to solver tolerance)."""
    rng = np.random.default_rng(1)
    X = rng.normal(size=(120, 3))
    y = 5 + X[:, 0] + np.sin(X[:, 1]) + 0.1 * rng.normal(size=120)
    for name, entry in REGISTRY.items():
        params = {"svr": {"loss": "l2"}}.get(name, {})  # liblinear's l1 loss stops early
        plain = entry.make(**params).fit(X, y).predict(X)
        fast = entry.make(**params, **entry.fast).fit(X, y).predict(X)
        np.testing.assert_allclose(fast, plain, rtol=1e-4, atol=1e-4 * np.std(y), err_msg=name)


def test_each_entry_names_the_class_it_builds_and_its_module_is_listed():
    import importlib

    from wadiro_models.registry import estimator_modules

    modules = estimator_modules()
    for name, entry in REGISTRY.items():
        estimator = entry.estimator
        assert isinstance(make_model(name), estimator), name
        assert estimator.__module__ in modules, name
    assert all(importlib.import_module(m) for m in modules)


def test_every_exported_name_is_its_submodule_object_and_unknown_names_fail():
    import importlib

    import wadiro_models

    for name in wadiro_models.__all__:
        module = wadiro_models._SOURCE[name]
        assert getattr(wadiro_models, name) is getattr(
            importlib.import_module(module, "wadiro_models"), name), name
        assert name in dir(wadiro_models)
    assert set(wadiro_models.__all__) == set(wadiro_models._SOURCE)
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        wadiro_models.nothing_here  # noqa: B018
