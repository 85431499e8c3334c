"""An operator's Mondays, replayed from the real Cambridge archive: what they would have by each
Monday (last week's meter export, the coming week's weather forecast), as the files they would
send through ``wadiro ingest``, and the independent checks of what the weekly runs stored.

The history before the first Monday goes in with ``wadiro ingest cambridge`` (16 weeks: the 12
of the window and the four weeks the default features look back). A third building, an
operator's own at a site whose weather is never sent (readings of the archive's b3), cannot be
forecast by the learned models in any week: it must be named, with its reason, every time.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import numpy as np
import pandas as pd

from tasks.ingest.cambridge_archive import load_cambridge

ARCHIVE_BUILDINGS = ("UCam_Building_b0", "UCam_Building_b7")
ANNEX = "annex-b3"
"""An operator's building at site ``annex``, whose weather no one sends."""
ANNEX_SOURCE = "UCam_Building_b3"
SITE = "bedford"
HISTORY_WEEKS = 16
FIRST_MONDAY = date(2019, 2, 4)  # winter: local Mondays are UTC midnights, weeks of 168 hours
MODELS = "seasonal_naive,wadiro_linreg,svr"
BUILDINGS_CSV = (
    "building_id,site_id,timezone,holiday_country,holiday_subdiv,building_type\n"
    f"{ANNEX},annex,Europe/London,GB,ENG,office\n"
)


def utc(day: date) -> pd.Timestamp:
    return pd.Timestamp(datetime(day.year, day.month, day.day, tzinfo=UTC))


@dataclass(frozen=True)
class Archive:
    """The replay's truth: every reading (exact zeros already missing) and observed hour."""

    path: Path
    readings: pd.DataFrame  # building_id, ts, kwh (ANNEX's from b3)
    weather: pd.DataFrame  # ts, temperature_c, irradiance_wm2, wind_speed_ms, humidity_pct

    @classmethod
    def load(cls, path: Path, mondays: int) -> Archive:
        last = FIRST_MONDAY + timedelta(weeks=mondays) - timedelta(days=1)
        batch = load_cambridge(path, [*ARCHIVE_BUILDINGS, ANNEX_SOURCE],
                               FIRST_MONDAY - timedelta(weeks=HISTORY_WEEKS), last)
        readings = batch.readings.to_pandas()
        readings["building_id"] = readings["building_id"].replace(ANNEX_SOURCE, ANNEX)
        weather = batch.weather.to_pandas().drop(columns=["site_id", "kind"])
        return cls(path, readings, weather)

    def readings_between(self, start: date, end: date) -> pd.DataFrame:
        ts = self.readings["ts"]
        return self.readings[(ts >= utc(start)) & (ts < utc(end))]


def write_wide_readings(archive: Archive, start: date, end: date, out: Path,
                        buildings: tuple[str, ...] = (*ARCHIVE_BUILDINGS, ANNEX)) -> Path:
    """A meter export of ``[start, end)``: ``ts`` with UTC offsets, one column per building,
    blank where the archive has no reading."""
    rows = archive.readings_between(start, end)
    wide = rows[rows["building_id"].isin(buildings)].pivot(
        index="ts", columns="building_id", values="kwh")[list(buildings)]
    wide.index = [ts.isoformat() for ts in wide.index]
    wide.to_csv(out, index_label="ts", float_format="%.17g")
    return out


def write_weather_forecast(archive: Archive, monday: date, out: Path, seed: int = 0) -> Path:
    """The coming week's hourly forecast for the archive's site, issued the Sunday before at
    18:00 UTC: the observations plus seeded noise (a forecast is never exactly right)."""
    ts = archive.weather["ts"]
    week = archive.weather[(ts >= utc(monday)) & (ts < utc(monday + timedelta(weeks=1)))].copy()
    rng = np.random.default_rng([seed, monday.toordinal()])
    n = len(week)
    week["temperature_c"] += rng.normal(0.0, 1.0, n)
    week["irradiance_wm2"] = (week["irradiance_wm2"] * (1 + rng.normal(0.0, 0.1, n))).clip(lower=0)
    week["wind_speed_ms"] = (week["wind_speed_ms"] + rng.normal(0.0, 0.5, n)).clip(lower=0)
    week["humidity_pct"] = (week["humidity_pct"] + rng.normal(0.0, 3.0, n)).clip(0, 100)
    week.insert(0, "site_id", SITE)
    week["ts"] = [t.isoformat() for t in week["ts"]]
    week["issued_at"] = (utc(monday) - pd.Timedelta(hours=6)).isoformat()
    week[["site_id", "ts", "temperature_c", "irradiance_wm2", "wind_speed_ms", "humidity_pct",
          "issued_at"]].to_csv(out, index=False, float_format="%.17g")
    return out


def setup_commands(archive: Archive, folder: Path, warehouse: Path) -> list[list[str]]:
    """The first day: the archive's history, then the operator's own building and its history."""
    start = FIRST_MONDAY - timedelta(weeks=HISTORY_WEEKS)
    (folder / "buildings.csv").write_text(BUILDINGS_CSV)
    annex = write_wide_readings(archive, start, FIRST_MONDAY, folder / "annex-history.csv",
                                buildings=(ANNEX,))
    return [
        ["ingest", "cambridge", "--path", str(archive.path), "--buildings",
         ",".join(ARCHIVE_BUILDINGS), "--start", start.isoformat(),
         "--end", (FIRST_MONDAY - timedelta(days=1)).isoformat(), "--warehouse", str(warehouse)],
        ["ingest", "buildings", str(folder / "buildings.csv"), "--warehouse", str(warehouse)],
        ["ingest", "readings", str(annex), "--warehouse", str(warehouse)],
    ]


def monday_commands(archive: Archive, monday: date, folder: Path, warehouse: Path) -> list[list[str]]:
    """What the operator ingests on ``monday`` before the weekly run: last week's meter export
    (the first Monday's is in the history already) and the coming week's weather forecast."""
    commands = []
    if monday > FIRST_MONDAY:
        export = write_wide_readings(archive, monday - timedelta(weeks=1), monday,
                                     folder / f"meters-{monday}.csv")
        commands.append(["ingest", "readings", str(export), "--warehouse", str(warehouse)])
    forecast = write_weather_forecast(archive, monday, folder / f"weather-{monday}.csv")
    commands.append(["ingest", "weather", str(forecast), "--kind", "forecast",
                     "--warehouse", str(warehouse)])
    return commands


def expected_scores(archive: Archive, forecasts: pd.DataFrame) -> pd.DataFrame:
    """MAE, RMSE and hours scored per (building, model, week), recomputed with pandas from the
    stored forecasts and the archive's readings (not the warehouse's)."""
    joined = forecasts.merge(archive.readings.dropna(subset=["kwh"]), on=["building_id", "ts"])
    joined = joined[joined["y_hat"].notna()]
    joined["abs"] = (joined["y_hat"] - joined["kwh"]).abs()
    joined["sq"] = (joined["y_hat"] - joined["kwh"]) ** 2
    grouped = joined.groupby(["building_id", "model", "target_week"])
    return pd.DataFrame({"mae": grouped["abs"].mean(), "rmse": np.sqrt(grouped["sq"].mean()),
                         "n_hours": grouped.size()}).reset_index()
