"""A synthetic fleet of non-residential buildings and their sites' weather, deterministic per seed.

The model (also described in ``data/README.md``):

* Time: hourly UTC instants from the first local Monday 00:00 at or after the start date, for
  ``weeks`` local weeks. Schedules, holidays and the sun use local/solar time.
* Weather per site (a few sites at different latitudes): temperature = annual cycle + daily cycle
  damped by cloud + AR(1) anomaly; global irradiance = a clear-sky model of the sun's elevation
  (declination, hour angle, latitude) reduced by a daily AR(1) cloudiness; wind = log-normal
  AR(1) with an afternoon bump; humidity falls as the air warms above its seasonal level.
* Buildings: a type (office, school, retail, lab, hospital, warehouse) sets the opening hours,
  Saturday/Sunday/holiday activity, base load share and the heating and cooling slopes; each
  building jitters them, has a log-normal peak load, and serves one site. Load =
  peak * (base + (1 - base) * occupancy + heating * max(0, T_heat - T)
  + cooling * max(0, T - T_cool) * (0.3 + 0.7 occupancy)) * (1 + AR(1) noise + white noise).
  Public holidays follow the fleet's calendar (GB/ENG by default); schools also close in the
  summer, Christmas and Easter breaks.
* Data faults: meter outages (runs of missing hours), scattered single missing hours, and rare
  outliers (spikes of 2.5-5x, dips to 5-20%).
* The coming weeks (``forecast_weeks``): no readings yet, and their weather as a forecast issued
  the evening before the first of them (Sunday 18:00 local), the weather those weeks will have
  plus an error that grows with the lead time (temperature 0.8 to 2.5 degC, irradiance 25 %,
  wind 20 %, humidity 5 points), as the weekly run gets it.

Readings are generated per chunk of buildings as Arrow record batches and streamed into the
warehouse, so memory stays bounded whatever the fleet size.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import duckdb
import holidays
import numpy as np
import pandas as pd
import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field, model_validator

from tasks.ingest.timestamps import TimeZoneName
from tasks.warehouse.connection import connect, transaction
from tasks.warehouse.rescoring import rescore_forecasts, rescored_note
from tasks.warehouse.schema import ensure_schema
from tasks.warehouse.slices import Slice, replace_slice

CHUNK_BUILDINGS = 250
"""Buildings per generated chunk; part of the generator's definition (noise streams per chunk)."""

_UTC_TS = pa.timestamp("us", tz="UTC")
_READINGS_SCHEMA = pa.schema([("building_id", pa.string()), ("ts", _UTC_TS), ("kwh", pa.float64())])


@dataclass(frozen=True)
class BuildingType:
    """Occupancy schedule and weather sensitivity of one kind of building."""

    share: float
    open_hour: float
    close_hour: float
    saturday: float
    sunday: float
    holiday: float
    base: float
    heating: float  # fraction of peak per K below the heating balance point
    cooling: float  # fraction of peak per K above the cooling balance point
    term_breaks: bool = False


BUILDING_TYPES: dict[str, BuildingType] = {
    "office": BuildingType(0.32, 7.5, 18.5, 0.15, 0.06, 0.05, 0.35, 0.012, 0.025),
    "school": BuildingType(0.15, 7.5, 16.5, 0.05, 0.02, 0.02, 0.25, 0.016, 0.006, term_breaks=True),
    "retail": BuildingType(0.20, 8.5, 20.5, 1.00, 0.70, 0.40, 0.30, 0.008, 0.030),
    "lab": BuildingType(0.15, 8.0, 19.0, 0.35, 0.30, 0.30, 0.60, 0.006, 0.020),
    "hospital": BuildingType(0.06, 7.0, 21.0, 0.80, 0.75, 0.80, 0.65, 0.008, 0.015),
    "warehouse": BuildingType(0.12, 6.0, 22.0, 0.50, 0.10, 0.10, 0.20, 0.010, 0.005),
}


class FleetSpec(BaseModel):
    """What to generate. Equal specs give identical data."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    buildings: int = Field(ge=1, description="Number of buildings.")
    start: date = Field(
        description="Start date; the fleet begins on the first local Monday on or after it.")
    weeks: int = Field(ge=1, description="Number of weeks with readings.")
    forecast_weeks: int = Field(
        0, ge=0, description="Weeks after them with a weather forecast and no readings yet.")
    seed: int = Field(0, ge=0, description="Random seed.")
    sites: int = Field(3, ge=1, description="Number of weather sites.")
    timezone: TimeZoneName = Field("Europe/London", description="IANA time zone of every building.")
    holiday_country: str = Field("GB", description="Holiday calendar's country (ISO code).")
    holiday_subdiv: str | None = Field("ENG", description="Holiday calendar's subdivision.")

    @model_validator(mode="after")
    def _known_calendar(self) -> FleetSpec:
        try:
            holidays.country_holidays(self.holiday_country, subdiv=self.holiday_subdiv)
        except NotImplementedError as error:
            raise ValueError(
                f"unknown holiday calendar {self.holiday_country}/{self.holiday_subdiv}: {error}"
            ) from error
        return self


@dataclass(frozen=True)
class SyntheticSummary:
    """What a synthetic ingest wrote."""

    buildings: int
    readings: int
    missing_readings: int
    weather_hours: int
    start: datetime
    end: datetime
    seconds: float
    """Time spent generating and writing (excluding orchestration)."""
    rescored: int = 0
    """Stored scores of forecasts whose readings changed, updated in place."""
    forecast_hours: int = 0
    """Site-hours of weather forecast for the weeks after the readings."""

    def line(self) -> str:
        forecast = (f", and a weather forecast for the {self.forecast_hours:,} site-hours after "
                    "them" if self.forecast_hours else "")
        return (f"wrote {self.readings:,} readings ({self.missing_readings:,} missing) for "
                f"{self.buildings:,} synthetic buildings and {self.weather_hours:,} weather hours "
                f"({self.start:%Y-%m-%d %H:%M} to {self.end:%Y-%m-%d %H:%M} UTC){forecast}"
                f"{rescored_note(self.rescored)}")


def first_monday(start: date) -> date:
    """The first Monday on or after ``start``."""
    return start + timedelta(days=(7 - start.weekday()) % 7)


def building_ids(n: int) -> list[str]:
    """``synthetic_b00000`` ... in order."""
    return [f"synthetic_b{i:05d}" for i in range(n)]


def site_ids(n: int) -> list[str]:
    """``synthetic_site_0`` ... in order."""
    return [f"synthetic_site_{i}" for i in range(n)]


@dataclass(frozen=True)
class _Calendar:
    ts: np.ndarray  # UTC instants, datetime64[us]
    start: datetime
    end: datetime
    local_hour: np.ndarray  # local clock hour + 0.5 (mid-hour)
    weekday: np.ndarray  # 0 = Monday
    holiday: np.ndarray  # bool
    day_of_year: np.ndarray  # UTC day of year, fractional
    utc_hour: np.ndarray  # UTC hour + 0.5
    day_index: np.ndarray  # local day number since the start
    school_break: np.ndarray  # bool


def _school_break(local_dates: pd.DatetimeIndex) -> np.ndarray:
    md = local_dates.month * 100 + local_dates.day
    summer = (md >= 722) & (md <= 903)
    christmas = (md >= 1220) | (md <= 103)
    easter = (md >= 401) & (md <= 414)
    return np.asarray(summer | christmas | easter)


def fleet_hours(spec: FleetSpec) -> _Calendar:
    """The UTC hours of the spec's local weeks with their local-time calendar."""
    zone = ZoneInfo(spec.timezone)
    monday = first_monday(spec.start)
    begin = datetime(monday.year, monday.month, monday.day, tzinfo=zone).astimezone(UTC)
    last = monday + timedelta(weeks=spec.weeks)
    end = datetime(last.year, last.month, last.day, tzinfo=zone).astimezone(UTC)
    utc = pd.date_range(begin, end, freq="h", inclusive="left")
    local = utc.tz_convert(zone)
    local_days = local.normalize().tz_localize(None)
    calendar = holidays.country_holidays(
        spec.holiday_country, subdiv=spec.holiday_subdiv,
        years=range(local.year.min(), local.year.max() + 1),
    )
    holiday_days = pd.DatetimeIndex(list(calendar.keys()))
    return _Calendar(
        ts=utc.tz_localize(None).to_numpy().astype("datetime64[us]"), start=begin, end=end,
        local_hour=np.asarray(local.hour + 0.5), weekday=np.asarray(local.day_of_week),
        holiday=np.asarray(local_days.isin(holiday_days)),
        day_of_year=np.asarray(utc.day_of_year + utc.hour / 24.0),
        utc_hour=np.asarray(utc.hour + 0.5),
        day_index=np.asarray((local_days - local_days[0]).days),
        school_break=_school_break(local_days))


def _ar1(rng: np.random.Generator, shape: tuple[int, int], phi: float, sd: float) -> np.ndarray:
    """AR(1) rows with stationary standard deviation ``sd`` along the last axis."""
    shocks = rng.standard_normal(shape) * sd * np.sqrt(1.0 - phi**2)
    shocks[:, 0] = rng.standard_normal(shape[0]) * sd
    from scipy.signal import lfilter  # imported here: it costs a second at every command's start

    return lfilter([1.0], [1.0, -phi], shocks, axis=1)


def _weather_arrays(spec: FleetSpec, cal: _Calendar) -> dict[str, np.ndarray]:
    """Site x hour arrays of temperature, irradiance, wind and humidity."""
    n, hours = spec.sites, cal.ts.size
    climate = np.random.default_rng([spec.seed, 1])  # each site's, as columns
    latitude = climate.uniform(50.3, 55.8, n)[:, None]
    longitude = climate.uniform(-3.5, 1.5, n)[:, None]
    mean_temp = 11.5 - 0.45 * (latitude - 50.3) + climate.normal(0, 0.3, n)[:, None]
    annual_amp = climate.uniform(6.0, 7.5, n)[:, None]
    daily_amp = climate.uniform(3.0, 5.0, n)[:, None]
    mean_wind = climate.uniform(3.0, 6.0, n)[:, None]
    rng = np.random.default_rng([spec.seed, 2])
    days = int(cal.day_index.max()) + 1
    cloud_daily = 1.0 / (1.0 + np.exp(-(_ar1(rng, (n, days), 0.6, 1.4) + 0.4)))
    cloud = np.clip(cloud_daily[:, cal.day_index] + rng.normal(0, 0.08, (n, hours)), 0.0, 1.0)

    declination = np.radians(23.44) * np.sin(2 * np.pi * (284 + cal.day_of_year) / 365.0)
    solar_hour = cal.utc_hour[None, :] + longitude / 15.0
    hour_angle = np.radians(15.0 * (solar_hour - 12.0))
    lat = np.radians(latitude)
    sin_elev = (np.sin(lat) * np.sin(declination)
                + np.cos(lat) * np.cos(declination) * np.cos(hour_angle))
    sin_elev = np.clip(sin_elev, 0.0, None)
    with np.errstate(divide="ignore"):
        clear_sky = np.where(sin_elev > 0.01, 1098.0 * sin_elev * np.exp(-0.057 / sin_elev), 0.0)
    irradiance = clear_sky * (1.0 - 0.75 * cloud**3.4)

    seasonal = mean_temp - annual_amp * np.cos(2 * np.pi * (cal.day_of_year - 20.0) / 365.25)
    daily = daily_amp * (1.0 - 0.6 * cloud) * np.cos(2 * np.pi * (solar_hour - 15.0) / 24.0)
    temperature = seasonal + daily + _ar1(rng, (n, hours), 0.985, 2.6)

    wind = mean_wind * np.exp(_ar1(rng, (n, hours), 0.95, 0.45) - 0.1
                              + 0.15 * np.cos(2 * np.pi * (solar_hour - 14.0) / 24.0))
    humidity = np.clip(80.0 + 12.0 * cloud - 2.2 * (temperature - seasonal)
                       + rng.normal(0, 3.0, (n, hours)), 20.0, 100.0)
    return {"temperature_c": np.round(temperature, 2), "irradiance_wm2": np.round(irradiance, 1),
            "wind_speed_ms": np.round(wind, 2), "humidity_pct": np.round(humidity, 1)}


def fleet_weather(spec: FleetSpec, cal: _Calendar | None = None) -> pa.Table:
    """Observed hourly weather of every site, as a ``weather`` table slice."""
    cal = cal or fleet_hours(spec)
    arrays = _weather_arrays(spec, cal)
    hours = cal.ts.size
    ids = pa.array(site_ids(spec.sites))
    return pa.table({"site_id": ids.take(pa.array(np.repeat(np.arange(spec.sites), hours))),
                     "ts": pa.array(np.tile(cal.ts, spec.sites), _UTC_TS),
                     **{name: pa.array(values.ravel()) for name, values in arrays.items()},
                     "kind": pa.repeat(pa.scalar("observed"), spec.sites * hours)})


def _fleet_parameters(spec: FleetSpec) -> dict[str, np.ndarray]:
    """Per-building parameters (one array each, a value per building), drawn once for the whole
    fleet."""
    rng = np.random.default_rng([spec.seed, 3])
    n = spec.buildings
    names = np.array(list(BUILDING_TYPES))
    shares = np.array([t.share for t in BUILDING_TYPES.values()])
    kind = rng.choice(len(names), size=n, p=shares / shares.sum())

    def column(attr: str) -> np.ndarray:
        return np.array([getattr(t, attr) for t in BUILDING_TYPES.values()], dtype=float)[kind]

    def jitter(values: np.ndarray, rel: float, lo: float = 0.0, hi: float = np.inf) -> np.ndarray:
        return np.clip(values * rng.lognormal(0.0, rel, n), lo, hi)

    return dict(
        type_names=names[kind], site=rng.integers(0, spec.sites, n),
        peak_kw=rng.lognormal(np.log(60.0), 0.9, n),
        open_hour=column("open_hour") + rng.uniform(-1.0, 1.0, n),
        close_hour=column("close_hour") + rng.uniform(-1.0, 1.0, n),
        saturday=jitter(column("saturday"), 0.3, 0.0, 1.2),
        sunday=jitter(column("sunday"), 0.3, 0.0, 1.2),
        holiday=jitter(column("holiday"), 0.3, 0.0, 1.0),
        base=jitter(column("base"), 0.25, 0.05, 0.9), heating=jitter(column("heating"), 0.4),
        cooling=jitter(column("cooling"), 0.4), heat_balance=rng.uniform(13.0, 17.0, n),
        cool_balance=rng.uniform(19.0, 23.0, n), term_breaks=column("term_breaks").astype(bool),
        noise_sd=rng.uniform(0.02, 0.06, n))


def fleet_buildings(spec: FleetSpec) -> pa.Table:
    """The ``buildings`` table rows of the fleet."""
    params = _fleet_parameters(spec)
    n = spec.buildings
    sites = np.array(site_ids(spec.sites))
    return pa.table({"building_id": pa.array(building_ids(n)),
                     "site_id": pa.array(sites[params["site"]]),
                     "timezone": pa.repeat(pa.scalar(spec.timezone), n),
                     "holiday_country": pa.repeat(pa.scalar(spec.holiday_country), n),
                     "holiday_subdiv": pa.repeat(pa.scalar(spec.holiday_subdiv, pa.string()), n),
                     "building_type": pa.array(params["type_names"].astype(str)),
                     "source": pa.repeat(pa.scalar("synthetic"), n)})


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * x))


def _chunk_load(spec: FleetSpec, cal: _Calendar, temperature: np.ndarray,
                params: dict[str, np.ndarray], chunk: slice) -> np.ndarray:
    """Hourly kWh (buildings x hours) of one chunk, NaN where the meter is out."""
    rng = np.random.default_rng([spec.seed, 4, chunk.start // CHUNK_BUILDINGS])
    idx = np.arange(chunk.start, chunk.stop)
    b, hours = idx.size, cal.ts.size
    p = {name: values[chunk] for name, values in params.items()}  # this chunk's buildings'
    hour = cal.local_hour[None, :]
    daytime = (_sigmoid((hour - p["open_hour"][:, None]) / 0.45)
               * _sigmoid((p["close_hour"][:, None] - hour) / 0.45))
    day_factor = np.ones((b, hours))
    day_factor[:, cal.weekday == 5] = p["saturday"][:, None]
    day_factor[:, cal.weekday == 6] = p["sunday"][:, None]
    day_factor[:, cal.holiday] = np.minimum(day_factor[:, cal.holiday], p["holiday"][:, None])
    schools = p["term_breaks"]
    if schools.any():
        day_factor[np.ix_(schools, cal.school_break)] *= 0.15
    occupancy = daytime * day_factor

    temp = temperature[p["site"]]
    heat = p["heating"][:, None] * np.maximum(0.0, p["heat_balance"][:, None] - temp)
    cool = p["cooling"][:, None] * np.maximum(0.0, temp - p["cool_balance"][:, None])
    base = p["base"][:, None]
    load = base + (1.0 - base) * occupancy + heat + cool * (0.3 + 0.7 * occupancy)
    noise = _ar1(rng, (b, hours), 0.8, 1.0) * p["noise_sd"][:, None]
    noise += rng.standard_normal((b, hours)) * 0.5 * p["noise_sd"][:, None]
    kwh = p["peak_kw"][:, None] * load * np.clip(1.0 + noise, 0.05, None)

    outlier = rng.random((b, hours)) < 8e-4
    spike = rng.random((b, hours)) < 0.5
    factor = np.where(spike, rng.uniform(2.5, 5.0, (b, hours)), rng.uniform(0.05, 0.2, (b, hours)))
    kwh = np.where(outlier, kwh * factor, kwh)

    missing = rng.random((b, hours)) < 2e-3
    events = rng.poisson(0.08 * spec.weeks, b)
    owner = np.repeat(np.arange(b), events)
    starts = rng.integers(0, hours, owner.size)
    stops = np.minimum(starts + 1 + rng.geometric(1.0 / 12.0, owner.size), hours)
    edges = np.zeros((b, hours + 1), dtype=np.int32)
    np.add.at(edges, (owner, starts), 1)
    np.add.at(edges, (owner, stops), -1)
    missing |= np.cumsum(edges, axis=1)[:, :hours] > 0
    kwh = np.round(kwh, 3)
    kwh[missing] = np.nan
    return kwh


def fleet_readings(spec: FleetSpec, cal: _Calendar | None = None,
                   hours: int | None = None) -> Iterator[pa.RecordBatch]:
    """``meter_readings`` rows, one record batch per chunk of ``CHUNK_BUILDINGS`` buildings,
    for the calendar's first ``hours`` hours (default: all)."""
    cal = cal or fleet_hours(spec)
    temperature = _weather_arrays(spec, cal)["temperature_c"]
    params = _fleet_parameters(spec)
    ids = pa.array(building_ids(spec.buildings))
    hours = cal.ts.size if hours is None else hours
    for first in range(0, spec.buildings, CHUNK_BUILDINGS):
        chunk = slice(first, min(first + CHUNK_BUILDINGS, spec.buildings))
        kwh = _chunk_load(spec, cal, temperature, params, chunk)[:, :hours]
        b = chunk.stop - chunk.start
        yield pa.record_batch(
            [ids.take(pa.array(np.repeat(np.arange(chunk.start, chunk.stop), hours))),
             pa.array(np.tile(cal.ts[:hours], b), _UTC_TS),
             pa.array(kwh.ravel(), pa.float64(), from_pandas=True)], schema=_READINGS_SCHEMA)


def forecast_weather(spec: FleetSpec, weather: pa.Table, issued_at: datetime) -> pa.Table:
    """``weather`` (the coming weeks' observations to be) as a forecast issued at
    ``issued_at``: each value plus an error growing with the lead time (module docstring)."""
    frame = weather.to_pandas()
    rng = np.random.default_rng([spec.seed, 3])
    lead_days = (frame["ts"] - pd.Timestamp(issued_at)).dt.total_seconds().to_numpy() / 86400
    n = len(frame)
    temperature_sd = 0.8 + 1.7 * np.clip(lead_days, 0, 7) / 7
    frame["temperature_c"] = np.round(frame["temperature_c"] + rng.normal(0, 1, n)
                                      * temperature_sd, 2)
    frame["irradiance_wm2"] = np.round(
        np.clip(frame["irradiance_wm2"] * (1 + rng.normal(0, 0.25, n)), 0, None), 1)
    frame["wind_speed_ms"] = np.round(frame["wind_speed_ms"] * np.exp(rng.normal(0, 0.2, n)), 2)
    frame["humidity_pct"] = np.round(np.clip(frame["humidity_pct"] + rng.normal(0, 5, n),
                                             20, 100), 1)
    frame["kind"] = "forecast"
    frame["issued_at"] = pd.Timestamp(issued_at)
    table = pa.Table.from_pandas(frame, preserve_index=False)
    return table.set_column(table.schema.get_field_index("issued_at"), "issued_at",
                            table.column("issued_at").cast(_UTC_TS))


def write_fleet(con: duckdb.DuckDBPyConnection, spec: FleetSpec) -> SyntheticSummary:
    """Generate the fleet and replace its slice of the input tables in one transaction."""
    began = time.perf_counter()
    history = fleet_hours(spec)
    cal = fleet_hours(spec.model_copy(update={"weeks": spec.weeks + spec.forecast_weeks}))
    kept = int(np.searchsorted(cal.ts, history.ts[-1], side="right"))
    ids = building_ids(spec.buildings)
    sites = site_ids(spec.sites)
    everything = fleet_weather(spec, cal)
    known = np.tile(np.arange(cal.ts.size) < kept, spec.sites)  # fleet_weather's row order
    weather, coming = everything.filter(pa.array(known)), everything.filter(pa.array(~known))
    issued = history.end - timedelta(hours=6)
    counted = {"rows": 0, "missing": 0}
    failed: list[BaseException] = []  # the generator's own error, which duckdb wraps

    def readings() -> Iterator[pa.RecordBatch]:
        try:
            for batch in fleet_readings(spec, cal, hours=kept):
                counted["rows"] += batch.num_rows
                counted["missing"] += batch.column("kwh").null_count
                yield batch
        except BaseException as error:
            failed.append(error)
            raise

    ensure_schema(con)
    try:
        with transaction(con):
            replace_slice(con, "buildings", fleet_buildings(spec),
                          Slice(where_in={"building_id": ids}), own_transaction=False)
            replace_slice(con, "weather", weather,
                          Slice(where_in={"site_id": sites, "kind": ["observed"]},
                                start=history.start, end=history.end), own_transaction=False)
            if coming.num_rows:
                replace_slice(con, "weather", forecast_weather(spec, coming, issued),
                              Slice(where_in={"site_id": sites, "kind": ["forecast"]},
                                    start=history.end, end=cal.end), own_transaction=False)
            replace_slice(con, "meter_readings",
                          pa.RecordBatchReader.from_batches(_READINGS_SCHEMA, readings()),
                          Slice(where_in={"building_id": ids}, start=history.start,
                                end=history.end), own_transaction=False)
            rescored = rescore_forecasts(con, buildings=ids, start=history.start,
                                         end=history.end - timedelta(hours=1))
    except duckdb.Error:
        if failed:
            raise failed[0] from None
        raise
    return SyntheticSummary(
        buildings=spec.buildings, readings=counted["rows"], missing_readings=counted["missing"],
        weather_hours=weather.num_rows, start=history.start, end=history.end,
        forecast_hours=coming.num_rows, seconds=time.perf_counter() - began, rescored=rescored)


def ingest_synthetic(warehouse: str | Path, spec: FleetSpec) -> SyntheticSummary:
    """Open the warehouse file and :func:`write_fleet` into it."""
    with connect(warehouse) as con:
        return write_fleet(con, spec)
