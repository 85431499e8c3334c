"""How the constrained network keeps y_hat >= 0 beyond its training rows, on a real window.

Building b12, the week of Good Friday 2019: a holiday puts the target week's inputs outside
anything in the window. Bound inside the program at those inputs (``program``, the old
default), the floor pins the network's weights along directions the training rows hardly
constrain (the objective moves by under 1 %) and the forecast doubles its error; projected
onto the floor (``projection``) it is within 2 % of the unconstrained twin (whose forecast goes
below zero there), and never below zero.
"""

from __future__ import annotations

from datetime import date

import numpy as np
import pytest

from tasks.ingest.cambridge_archive import ingest_cambridge
from tasks.protocol.config import ForecastConfig
from tasks.protocol.features import build_features
from tasks.protocol.fitting import Fitter
from tasks.protocol.windows import build_window
from tasks.warehouse.batches import load_jobs

BUILDING = "UCam_Building_b12"
WEEK = date(2019, 4, 15)
PARAMS = {"radius": 0.01, "max_neurons": 30, "wasserstein": "l1"}


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory, cambridge_archive):
    path = tmp_path_factory.mktemp("floor") / "w.duckdb"
    ingest_cambridge(path, cambridge_archive, [BUILDING], date(2018, 12, 1), date(2019, 4, 23))
    return path


def _forecasts(warehouse, floor: str) -> tuple[dict[str, np.ndarray], np.ndarray, dict]:
    config = ForecastConfig(target_week_floor=floor, persistence="last_week")
    [job] = load_jobs(warehouse, [BUILDING], [WEEK], config)
    info = job.info
    features = build_features(job.hours, timezone=info.timezone,
                              holiday_country=info.holiday_country,
                              holiday_subdiv=info.holiday_subdiv, feature_set=config.feature_set)
    window = build_window(features, WEEK, info.timezone, feature_set=config.feature_set)
    fitter = Fitter(window, config)
    test = fitter.parts["test"]
    forecasts, fits = {}, {}
    for model in ("wadiro_scnn", "wadiro_pcscnn"):
        fits[model] = fitter.fit(model, "train", PARAMS, forecasts="test")
        forecasts[model] = test.to_load(fitter.predict(model, fits[model], "test"))
    return forecasts, test.load, fits


def _mae(y_hat, actual):
    scored = np.isfinite(actual)
    return float(np.mean(np.abs(y_hat[scored] - actual[scored])))


def test_bounding_the_target_week_inside_the_program_bends_the_forecast(warehouse):
    forecasts, actual, fits = _forecasts(warehouse, "program")
    assert forecasts["wadiro_pcscnn"].min() >= -1e-6
    bent, twin = _mae(forecasts["wadiro_pcscnn"], actual), _mae(forecasts["wadiro_scnn"], actual)
    assert bent > 1.5 * twin
    objectives = fits["wadiro_pcscnn"].objective_, fits["wadiro_scnn"].objective_
    assert objectives[0] < 1.01 * objectives[1]  # the training fit hardly moved


def test_projecting_the_forecast_keeps_the_floor_without_that_damage(warehouse):
    forecasts, actual, _ = _forecasts(warehouse, "projection")
    pcscnn, twin = forecasts["wadiro_pcscnn"], forecasts["wadiro_scnn"]
    assert twin.min() < 0  # the unconstrained twin forecasts negative load here
    assert pcscnn.min() >= 0
    assert _mae(pcscnn, actual) <= 1.02 * _mae(twin, actual)
