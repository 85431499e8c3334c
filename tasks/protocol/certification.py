"""The guarantees recorded with each fitted SCNN-family model: a stability certificate and the
out-of-sample bound (the paper's Sections 6 and 4, from :mod:`wadiro_models`).

The certificate is L_eps = the largest change of the forecast (kWh) when the weather inputs
move within the run's ``perturbation`` (an l_inf box in each feature's own units, e.g. +-1 degC)
anywhere in the training window's range of every feature; features not listed (the calendar,
load lags) are held fixed. The MILP's branch and bound may use ``certify_nodes`` nodes (a
node budget, unlike a time limit, gives the same numbers on every rerun); when they run out,
``l_eps`` is still a certified upper bound, ``l_eps_lower`` a deviation actually found, and
the status says ``node_limit``. The out-of-sample bound is Propositions 3/4's bound on
the expected absolute error (kWh), with probability 1 - :data:`OOS_DELTA`, for data within
the training window's range.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

import wadiro_models

DEFAULT_PERTURBATION: Mapping[str, float] = {
    "temperature_c": 1.0,
    "irradiance_wm2": 50.0,
    "wind_speed_ms": 1.0,
    "temperature_c_change_168": 1.0,
    "irradiance_wm2_change_168": 50.0,
}
"""A forecast's weather inputs are themselves forecasts: +-1 degC, +-50 W/m2, +-1 m/s. A
change-since-last-week feature moves with its weather input (last week's value is known); the
box lets the two move independently, which can only raise the bound."""

OOS_DELTA = 0.05
"""The out-of-sample bound holds with probability at least 1 - OOS_DELTA."""


@dataclass(frozen=True)
class FitCertificate:
    """What ``model_fits`` records about one fit's guarantees (kWh; seconds of wall time)."""

    l_eps: float | None
    l_eps_lower: float | None
    l_eps_status: str
    oos_bound_kwh: float | None
    certify_time_s: float


def certify_fit(
    model: Any, feature_columns: Sequence[str], perturbation: Mapping[str, float],
    node_limit: int, method: str = "milp",
) -> FitCertificate | None:
    """The fit's certificate, or None for a model that is not a convex network.

    ``method`` is :func:`wadiro_models.certify_stability`'s: the MILP (status ``optimal`` or
    ``node_limit``) or the per-unit bound (status ``unit_bounds``: a true upper bound, within
    about 10 % of a 100-node MILP's on real windows, at a tenth of its cost). A certification
    that fails is recorded in the status (``failed: ...``), never raised: the forecast stands
    without it.
    """
    if not hasattr(model, "gates_"):
        return None
    started = time.thread_time()
    eps = np.array([float(perturbation.get(column, 0.0)) for column in feature_columns])
    l_eps = lower = bound = None
    try:
        certificate = wadiro_models.certify_stability(model, None, eps, "inf",
                                                      node_limit=node_limit, method=method)
        l_eps, lower, status = certificate.l_eps, certificate.lower, certificate.status
        bound = float(model.out_of_sample_bound(OOS_DELTA).bound_y)
    except Exception as exc:  # noqa: BLE001 - recorded with the fit, the forecast goes on
        status = f"failed: {type(exc).__name__}: {exc}"
    return FitCertificate(l_eps, lower, status, bound, time.thread_time() - started)
