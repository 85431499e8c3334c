"""One building's 12-week history and the following test week, straight from the archive.

Small and self-contained on purpose (the pipeline's own ingest/features live in ``tasks``):
electricity of one building, Bedford processed weather (temperature, global irradiance) and
wind speed from the raw MIDAS file, and the paper's eight features in Europe/London time.
Exact zeros in the electricity file are missing readings and are dropped.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path

import holidays
import numpy as np
import pandas as pd

KNOT = 0.514444  # m/s


@dataclass(frozen=True)
class Window:
    X_train: np.ndarray
    y_train: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray


def _electricity(archive: Path, building: int, year: int) -> pd.Series:
    folder = archive / "building_data/processed_data" / f"UCam_Building_b{building}"
    path = folder / "electricity" / f"{year}.csv"
    frame = pd.read_csv(path, parse_dates=["datetime"])
    series = frame.set_index("datetime")["equipment load [kWh]"]
    return series[series != 0].tz_localize("UTC")


def _weather(archive: Path, year: int) -> pd.DataFrame:
    base = archive / "aux_data/MetOffice Weather Data"
    processed = pd.read_csv(base / f"processed_data/bedford/{year}.csv", parse_dates=["datetime"])
    processed = processed.set_index("datetime").tz_localize("UTC")
    raw = next((base / "raw_data/hourly_weather").glob(f"*qcv-1_{year}.csv"))
    lines = raw.read_text().splitlines()
    start, end = lines.index("data") + 1, lines.index("end data")
    midas = pd.read_csv(io.StringIO("\n".join(lines[start:end])), usecols=["ob_time", "wind_speed"],
                        na_values=["NA"], parse_dates=["ob_time"])
    wind = midas.groupby("ob_time")["wind_speed"].mean().tz_localize("UTC") * KNOT
    return pd.DataFrame({
        "temperature": processed["air_temperature [degC]"],
        "irradiance": processed["glbl_irad_amt [W/m2]"],
        "wind": wind.reindex(processed.index),
    })


def paper_features(index: pd.DatetimeIndex, weather: pd.DataFrame) -> pd.DataFrame:
    local = index.tz_convert("Europe/London")
    dow = local.day_of_week.to_numpy()
    hour = local.hour.to_numpy()
    england = holidays.UnitedKingdom(subdiv="ENG", years=sorted(set(local.year)))
    off = (dow >= 5) | np.array([d in england for d in local.date])
    w = weather.reindex(index).interpolate(limit_direction="both")
    return pd.DataFrame({
        "dow_cos": np.cos(2 * np.pi * dow / 7), "dow_sin": np.sin(2 * np.pi * dow / 7),
        "hour_cos": np.cos(2 * np.pi * hour / 24), "hour_sin": np.sin(2 * np.pi * hour / 24),
        "off_day": off.astype(float), "temperature": w["temperature"].to_numpy(),
        "irradiance": w["irradiance"].to_numpy(), "wind": w["wind"].to_numpy(),
    }, index=index)


def load_window(archive: Path, building: int, year: int, test_monday: str) -> Window:
    """12 weeks of history before the local Monday ``test_monday`` and that week as test."""
    load = _electricity(archive, building, year)
    features = paper_features(load.index, _weather(archive, year))
    monday = pd.Timestamp(test_monday, tz="Europe/London")  # calendar weeks in local time
    start_test = monday.tz_convert("UTC")
    end_test = (monday + pd.DateOffset(weeks=1)).tz_convert("UTC")
    start_train = (monday - pd.DateOffset(weeks=12)).tz_convert("UTC")
    train = (load.index >= start_train) & (load.index < start_test)
    test = (load.index >= start_test) & (load.index < end_test)
    return Window(
        X_train=features[train].to_numpy(), y_train=load[train].to_numpy(),
        X_test=features[test].to_numpy(), y_test=load[test].to_numpy(),
    )
