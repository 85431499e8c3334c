"""Each SCNN-family fit carries its guarantees: a stability certificate and an out-of-sample
bound, recorded with the fit; a run setting sizes the perturbation and the node budget."""

import dataclasses
from datetime import date

import numpy as np
import pytest
from pydantic import ValidationError

import wadiro_models
from tasks.ingest.synthetic_fleet import FleetSpec, ingest_synthetic
from tasks.protocol.certification import DEFAULT_PERTURBATION, certify_fit
from tasks.protocol.config import ForecastConfig
from tasks.protocol.features import PAPER_COLUMNS
from tasks.protocol.forecasting import forecast_building_week
from tasks.protocol.publication import (
    Candidate,
    choose_publication,
    publish_certified,
)
from tasks.warehouse.batches import load_jobs
from tasks.warehouse.connection import connect
from tasks.warehouse.results import write_results
from tasks.warehouse.schema import ensure_schema
from wadiro_models import WaDiRoLinearRegression, WaDiRoSCNN, certify_stability

WEEK = date(2024, 4, 1)


def _paper_like(n=400, seed=0):
    """Columns shaped like the paper's features: calendar cos/sin, a flag, three weather."""
    rng = np.random.default_rng(seed)
    hour = rng.integers(0, 24, n)
    day = rng.integers(0, 7, n)
    X = np.column_stack([
        np.cos(2 * np.pi * day / 7), np.sin(2 * np.pi * day / 7),
        np.cos(2 * np.pi * hour / 24), np.sin(2 * np.pi * hour / 24), day >= 5,
        rng.uniform(-5, 25, n), rng.uniform(0, 800, n), rng.uniform(0, 12, n),
    ])
    y = 50 + 10 * X[:, 2] - 0.8 * X[:, 5] + 0.01 * X[:, 6] + rng.normal(0, 2, n)
    return X, y


def test_a_fit_gets_a_certificate_and_a_bound():
    X, y = _paper_like()
    model = WaDiRoSCNN(max_neurons=12, lower_bound=0.0).fit(X, y)
    c = certify_fit(model, PAPER_COLUMNS, DEFAULT_PERTURBATION, node_limit=200)
    assert c.l_eps_status in ("optimal", "node_limit")
    assert 0 <= c.l_eps_lower <= c.l_eps
    assert c.oos_bound_kwh > np.mean(np.abs(model.predict(X) - y))
    assert c.certify_time_s > 0
    # the same budget gives the same numbers (a node limit, not a time limit)
    again = certify_fit(model, PAPER_COLUMNS, DEFAULT_PERTURBATION, node_limit=200)
    assert (again.l_eps, again.l_eps_lower, again.l_eps_status) == (
        c.l_eps, c.l_eps_lower, c.l_eps_status)


def test_calendar_features_are_held_fixed():
    X, y = _paper_like(seed=1)
    model = WaDiRoSCNN(max_neurons=8).fit(X, y)
    eps = np.array([DEFAULT_PERTURBATION.get(c, 0.0) for c in PAPER_COLUMNS])
    witness = certify_stability(model, None, eps, "inf", node_limit=200)
    moved = np.flatnonzero(witness.x_perturbed != witness.x)
    assert set(moved) <= {5, 6, 7}
    assert np.all(np.abs(witness.x_perturbed - witness.x) <= eps + 1e-9)
    # with nothing allowed to move there is nothing to certify
    still = certify_fit(model, PAPER_COLUMNS, {}, node_limit=10)
    assert still.l_eps == 0.0 and still.l_eps_status == "optimal"


def test_other_models_get_none_and_failures_are_recorded(monkeypatch):
    X, y = _paper_like(seed=2)
    assert certify_fit(WaDiRoLinearRegression().fit(X, y), PAPER_COLUMNS,
                       DEFAULT_PERTURBATION, 10) is None

    def broken(*args, **kwargs):
        raise RuntimeError("solver crashed")

    monkeypatch.setattr(wadiro_models, "certify_stability", broken)
    c = certify_fit(WaDiRoSCNN(max_neurons=6).fit(X, y), PAPER_COLUMNS, DEFAULT_PERTURBATION, 10)
    assert c.l_eps is None and c.l_eps_status == "failed: RuntimeError: solver crashed"


def test_the_perturbation_setting():
    default = ForecastConfig()
    assert default.perturbation == dict(DEFAULT_PERTURBATION)
    assert default.certify_nodes > 0
    custom = ForecastConfig(perturbation=["temperature_c=0.5", " wind_speed_ms = 2"])
    assert custom.perturbation == {"temperature_c": 0.5, "wind_speed_ms": 2.0}
    assert custom.as_record()["perturbation"] == {"temperature_c": 0.5, "wind_speed_ms": 2.0}
    assert ForecastConfig(perturbation={"wind_speed_ms": 2}).perturbation == {"wind_speed_ms": 2.0}
    for bad in (["nonsense=1"], ["temperature_c=-1"], ["temperature_c"], ["temperature_c=x"],
                "temperature_c=1", ["temperature_c=inf"], {"temperature_c": -1}):
        with pytest.raises(ValidationError):
            ForecastConfig(perturbation=bad)
    with pytest.raises(ValidationError):
        ForecastConfig(certify_nodes=-1)


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory):
    path = tmp_path_factory.mktemp("wh") / "w.duckdb"
    ingest_synthetic(path, FleetSpec(buildings=1, start=date(2024, 1, 1), weeks=14, seed=5))
    with connect(path) as con:
        ensure_schema(con)
    return path


def _run(warehouse, config):
    [job] = load_jobs(warehouse, ["synthetic_b00000"], [WEEK], config)
    info = job.info
    return forecast_building_week(
        job.hours, building_id=info.building_id, timezone=info.timezone,
        holiday_country=info.holiday_country, holiday_subdiv=info.holiday_subdiv,
        week=WEEK, config=config)


def test_the_run_records_the_guarantees_in_model_fits(warehouse):
    config = ForecastConfig(models=("wadiro_pcscnn", "svr"), trials=2, certify_nodes=50,
                            certify="all", certificate="milp")
    result = _run(warehouse, config)
    scnn, svr = result.outcomes
    assert scnn.status == "ok" and scnn.l_eps_status in ("optimal", "node_limit")
    assert scnn.l_eps >= scnn.l_eps_lower >= 0 and scnn.oos_bound_kwh > 0
    assert svr.l_eps is None and svr.l_eps_status is None
    with connect(warehouse) as con:
        write_results(con, [result], run_id="r1", models=config.models)
        rows = dict(con.execute(
            "SELECT model, (l_eps, l_eps_lower, l_eps_status, oos_bound_kwh, certify_time_s) "
            "FROM model_fits").fetchall())
    l_eps, lower, status, bound, seconds = rows["wadiro_pcscnn"]
    assert (l_eps, lower, status, bound) == (
        scnn.l_eps, scnn.l_eps_lower, scnn.l_eps_status, scnn.oos_bound_kwh)
    assert seconds > 0
    assert rows["svr"] == (None, None, None, None, None)


def test_only_the_published_network_is_certified_by_default(warehouse):
    config = ForecastConfig(models=("wadiro_pcscnn", "wadiro_scnn", "seasonal_naive"),
                            trials=2)
    result = _run(warehouse, config)
    certified = {o.model: o.l_eps_status for o in result.outcomes}
    published = result.publication.model
    for model, status in certified.items():
        if model == published and model != "seasonal_naive":
            assert status == "unit_bounds"
        else:
            assert status is None
    # the same fits certified by the MILP bound no more than the unit bound (a looser one)
    milp = _run(warehouse, config.model_copy(update={"certify": "all", "certificate": "milp"}))
    for outcome in milp.outcomes:
        if outcome.model == published and published != "seasonal_naive":
            unit = next(o for o in result.outcomes if o.model == published)
            assert outcome.l_eps <= unit.l_eps * (1 + 1e-9)


def test_a_certificate_requirement_certifies_until_the_choice_stands():
    """Only the chosen network is certified; one the requirement refuses is passed over."""
    hours, y = np.ones(168, dtype=bool), np.full(168, 10.0)
    candidates = {
        "seasonal_naive": Candidate("seasonal_naive", y, 2.0),
        "wadiro_pcscnn": Candidate("wadiro_pcscnn", y, 1.0),
        "wadiro_scnn": Candidate("wadiro_scnn", y, 1.2),
        "gp": Candidate("gp", y, 1.5),
    }
    bounds = {"wadiro_pcscnn": 80.0, "wadiro_scnn": 30.0}
    certified = []

    def certify(model):
        certified.append(model)
        candidates[model] = dataclasses.replace(candidates[model], l_eps=bounds[model],
                                                l_eps_status="unit_bounds")

    def choose(limit):
        return lambda: choose_publication(list(candidates.values()), hours, max_l_eps=limit)

    networks = {"wadiro_pcscnn", "wadiro_scnn"}
    assert publish_certified(choose(50.0), certify, networks, required=True).model == "wadiro_scnn"
    assert certified == ["wadiro_pcscnn", "wadiro_scnn"]
    certified.clear()
    assert publish_certified(choose(10.0), certify, networks, required=True).model == "gp"
    assert certified == []  # both already certified: nothing certified twice
    for model in networks:
        candidates[model] = dataclasses.replace(candidates[model], l_eps=None, l_eps_status=None)
    assert publish_certified(choose(None), certify, networks, required=False).model == (
        "wadiro_pcscnn")
    assert certified == ["wadiro_pcscnn"]


def test_certification_can_be_turned_off(warehouse):
    result = _run(warehouse, ForecastConfig(models=("wadiro_scnn",), trials=2, certify_nodes=0))
    [scnn] = result.outcomes
    assert scnn.status == "ok" and scnn.l_eps is None and scnn.certify_time_s is None


def test_publication_can_require_a_certificate_below_a_threshold():
    hours, y = np.ones(168, dtype=bool), np.full(168, 10.0)
    candidates = [
        Candidate("seasonal_naive", y, 2.0),
        Candidate("wadiro_pcscnn", y, 1.0, l_eps=80.0, l_eps_status="node_limit"),
        Candidate("wadiro_scnn", y, 1.2, l_eps=None, l_eps_status="failed: RuntimeError: x"),
        Candidate("gp", y, 1.5),  # no certificate to require
    ]
    assert choose_publication(candidates, hours).model == "wadiro_pcscnn"
    strict = choose_publication(candidates, hours, max_l_eps=50.0)
    assert strict.model == "gp"
    assert "wadiro_pcscnn: L_eps 80 kWh above 50" in strict.reason
    assert "wadiro_scnn: no stability certificate (failed: RuntimeError: x)" in strict.reason
    assert choose_publication(candidates, hours, max_l_eps=100.0).model == "wadiro_pcscnn"
    with pytest.raises(ValidationError):
        ForecastConfig(max_l_eps=0)
