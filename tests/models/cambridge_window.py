"""One building's 12-week history and the following test week, read from the real archive
through the pipeline's own archive reader, features and window (no warehouse).

Missing readings (the archive's zeros) are left out of both parts, as the protocol does.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path

import numpy as np

from tasks.ingest.cambridge_archive import (
    HOLIDAY_COUNTRY,
    HOLIDAY_SUBDIV,
    TIMEZONE,
    load_cambridge,
)
from tasks.protocol.features import build_features
from tasks.protocol.windows import build_window

HOUR_COLUMNS = ["ts", "temperature_c", "irradiance_wm2", "wind_speed_ms"]


@dataclass(frozen=True)
class Window:
    X_train: np.ndarray
    y_train: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray


def load_window(archive: Path, building: int, test_monday: str) -> Window:
    """The paper's eight features for the 12 local weeks before ``test_monday`` and that week."""
    monday = date.fromisoformat(test_monday)
    batch = load_cambridge(archive, [f"UCam_Building_b{building}"],
                           monday - timedelta(weeks=13), monday + timedelta(weeks=1))
    weather = batch.weather.to_pandas()[HOUR_COLUMNS]
    hours = batch.readings.to_pandas()[["ts", "kwh"]].merge(weather, on="ts", how="left")
    features = build_features(hours, timezone=TIMEZONE, holiday_country=HOLIDAY_COUNTRY,
                              holiday_subdiv=HOLIDAY_SUBDIV)
    window = build_window(features, monday, TIMEZONE)
    X_train, y_train = window.xy("train")
    X_test, y_test = window.xy("test")
    scored = np.isfinite(y_test)
    return Window(X_train, y_train, X_test[scored], y_test[scored])
