"""Which weather a target week used: hours counted by the kind of their stored row."""

from __future__ import annotations

from datetime import date

import numpy as np
import pandas as pd

from tasks.protocol.forecasting import target_week_weather_sources
from tasks.protocol.windows import WindowBounds, window_bounds

WEEK = date(2024, 3, 25)  # holds the spring clock change in London: 167 hours


def _frame(kinds: list[str | None]) -> tuple[pd.DataFrame, WindowBounds]:
    """A week before W and W itself, in London; W's hours get ``kinds`` in order."""
    bounds = window_bounds(WEEK, "Europe/London", history_weeks=2)
    ts = pd.date_range(bounds.validation_start, bounds.test_end, freq="h", inclusive="left")
    n_test = int((ts >= bounds.test_start).sum())
    assert len(kinds) == n_test == 167
    kind = np.array(["observed"] * (len(ts) - n_test) + kinds, dtype=object)
    frame = pd.DataFrame({"ts": ts, "kwh": 1.0, "temperature_c": 5.0, "irradiance_wm2": 0.0,
                          "wind_speed_ms": 2.0, "humidity_pct": 80.0, "weather_kind": kind})
    frame.loc[frame["weather_kind"].isna(), ["temperature_c", "irradiance_wm2", "wind_speed_ms"]] = np.nan
    return frame, bounds


def test_observed_forecast_mixed_and_neither():
    frame, bounds = _frame(["observed"] * 100 + ["forecast"] * 60 + [None] * 7)
    assert target_week_weather_sources(frame, bounds) == {
        "n_test_weather_observed": 100, "n_test_weather_forecast": 60, "weather_source": "mixed"}
    frame, bounds = _frame(["forecast"] * 167)
    assert target_week_weather_sources(frame, bounds)["weather_source"] == "forecast"
    frame, bounds = _frame(["observed"] * 167)
    assert target_week_weather_sources(frame, bounds) == {
        "n_test_weather_observed": 167, "n_test_weather_forecast": 0, "weather_source": "observed"}
    frame, bounds = _frame([None] * 167)
    assert target_week_weather_sources(frame, bounds) == {
        "n_test_weather_observed": 0, "n_test_weather_forecast": 0, "weather_source": None}


def test_an_hour_lacking_an_input_is_not_counted():
    frame, bounds = _frame(["forecast"] * 167)
    frame.loc[frame.index[-10:], "wind_speed_ms"] = np.nan
    assert target_week_weather_sources(frame, bounds)["n_test_weather_forecast"] == 157


def test_a_frame_that_does_not_say_where_its_weather_came_from():
    frame, bounds = _frame(["forecast"] * 167)
    assert set(target_week_weather_sources(frame.drop(columns="weather_kind"), bounds).values()) == {None}
