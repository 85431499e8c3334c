"""The probabilistic peers an operator would build, for ``forecast_quality.py``: each gives the
quantiles of a target week at the product's levels, scored as the product's are.

* ``lgbm_quantile_52w``: LightGBM quantile regression per building on a year, one model per
  level (``objective="quantile"``, ``alpha`` the level, default trees, as LightGBM's docs show
  it), on the inputs of the point peer ``lgbm_reference_52w`` (mlforecast's set-up); its median
  is its point forecast. The levels are not sorted afterwards: an operator following the docs
  gets them as they come, crossings included.
* ``naive_empirical_8w``: last week's load plus the empirical quantiles of its errors (actual
  minus the load a week before) over the 8 weeks before the target week.
* ``<point peer>_conformal``: each point peer with conformal intervals from its own record, as
  mlforecast's ``PredictionIntervals`` makes them: the peer refitted on the history ending
  before each of the ``n_windows`` (2, mlforecast's default) weeks before the target week,
  forecasting that week; its absolute errors give symmetric quantiles (the level tau above the
  median: the forecast plus the 2 tau - 1 quantile of the absolute errors). mlforecast ranks the
  errors per step of the horizon; with two windows that is the larger of two errors at every
  step, so they are pooled over the week here (336 errors), which only makes the peer stronger.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import date, timedelta

import lightgbm
import numpy as np
import pandas as pd

from tasks.protocol.intervals import QUANTILES, pinball_loss, share_below
from tasks.protocol.windows import Window

LGBM_QUANTILE = "lgbm_quantile_52w"
NAIVE_EMPIRICAL = "naive_empirical_8w"
CONFORMAL_SUFFIX = "_conformal"
N_WINDOWS = 2
"""mlforecast's default number of conformal windows."""
NAIVE_WEEKS = 8
"""Weeks of last week's load's errors the empirical peer ranks."""


def mlforecast_inputs(window: Window, part: str, mean: float, scale: float
                      ) -> tuple[np.ndarray, np.ndarray]:
    """The inputs of mlforecast's LightGBM set-up for ``part`` of ``window``: lags 168 and 336
    h standardised by the training hours' mean and deviation, the local hour and weekday, the
    holiday flag and the week's weather; and the load."""
    frame = getattr(window, part)
    local = pd.DatetimeIndex(frame["ts"]).tz_convert(window.timezone)
    lags = frame[["kwh_lag_168", "kwh_lag_336"]].to_numpy(np.float64)
    exogenous = frame[["is_holiday_or_weekend", "temperature_c", "irradiance_wm2",
                       "wind_speed_ms"]].to_numpy(np.float64)
    return (np.column_stack([(lags - mean) / scale, local.hour, local.day_of_week, exogenous]),
            frame["kwh"].to_numpy(np.float64))


def lightgbm_quantiles(window: Window) -> dict[float, np.ndarray]:
    """``lgbm_quantile_52w``'s quantiles of the window's target week (module docstring)."""
    y_train = window.train["kwh"].to_numpy(np.float64)
    mean, scale = float(y_train.mean()), float(y_train.std()) or 1.0
    X, y = mlforecast_inputs(window, "train", mean, scale)
    X_test = mlforecast_inputs(window, "test", mean, scale)[0]
    out = {}
    for level in QUANTILES:
        model = lightgbm.LGBMRegressor(objective="quantile", alpha=level, random_state=0,
                                       verbosity=-1, n_jobs=1)
        model.fit(X, (y - mean) / scale)
        out[level] = model.predict(X_test) * scale + mean
    return out


def naive_empirical(load: pd.Series, test_ts: pd.DatetimeIndex
                    ) -> tuple[np.ndarray, dict[float, np.ndarray]] | None:
    """``naive_empirical_8w``'s forecast and quantiles of the hours ``test_ts`` (``load``: the
    building's hourly load by UTC hour); ``None`` with fewer than a day of errors."""
    week = pd.Timedelta(weeks=1)
    y_hat = load.reindex(test_ts - week).to_numpy(np.float64)
    start = test_ts.min() - NAIVE_WEEKS * week
    hours = load.index[(load.index >= start) & (load.index < test_ts.min())]
    errors = (load.reindex(hours).to_numpy() - load.reindex(hours - week).to_numpy())
    errors = errors[np.isfinite(errors)]
    if errors.size < 24:
        return None
    return y_hat, {level: y_hat + float(np.quantile(errors, level)) for level in QUANTILES}


def conformal_quantiles(y_hat: np.ndarray, errors: np.ndarray) -> dict[float, np.ndarray]:
    """Symmetric quantiles of ``y_hat`` from absolute errors (mlforecast's conformal
    intervals: the band at level 2 tau - 1 bounds the tau and 1 - tau quantiles)."""
    errors = np.abs(errors[np.isfinite(errors)])
    out = {}
    for level in QUANTILES:
        width = float(np.quantile(errors, abs(2 * level - 1))) if errors.size else np.nan
        out[level] = y_hat + np.sign(level - 0.5) * width
    return out


def window_errors(fit_predict: Callable[[Window], np.ndarray],
                  window_of: Callable[[date], Window], week: date) -> np.ndarray:
    """The errors (actual minus forecast) of a point peer refitted for each of the
    :data:`N_WINDOWS` weeks before ``week`` (``window_of``: the peer's window of a target
    week), over the hours with a reading."""
    errors = []
    for k in range(1, N_WINDOWS + 1):
        window = window_of(week - timedelta(weeks=k))
        if not window.ok:
            continue
        truth = window.test["kwh"].to_numpy(np.float64)
        errors.append(truth - fit_predict(window))
    return np.concatenate(errors) if errors else np.array([])


def distribution_scores(truth: np.ndarray, quantiles: dict[float, np.ndarray]) -> dict:
    """A row's distribution columns: the mean pinball loss over the levels and each level's
    share of the scored hours at or below it (NaN where nothing is scored)."""
    below = {f"below_{level}": share_below(truth, q) for level, q in quantiles.items()}
    losses = [pinball_loss(truth, q, level) for level, q in quantiles.items()]
    losses = [loss for loss in losses if loss is not None]
    return {"pinball": float(np.mean(losses)) if losses else np.nan,
            **{k: np.nan if v is None else v for k, v in below.items()}}
