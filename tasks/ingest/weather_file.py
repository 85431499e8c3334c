"""An operator's weather feed (observed or forecast, hourly per site) into ``weather``.

Its columns are :data:`WEATHER_FILE`'s, and a forecast's :data:`FORECAST_FILE`'s (``issued_at``
too, when it was issued), read through :mod:`~tasks.ingest.contract` (a blank value is
missing). Timestamps are hourly, each the start of its hour, read like meter timestamps
(:mod:`~tasks.ingest.timestamps`); ``issued_at`` may be any instant. Observations and issue
times may lie at most two days after today, a forecast's hours three weeks. Values must be
plausible (:mod:`~tasks.ingest.plausibility`).

Blank cells are counted per variable, and the summary says so (``wind_speed_ms blank in 161 of
168 rows``), as it names a variable the file has no column of: a variable blank for most of a
week changes what a forecast can use, and the operator should know it at ingest.

Every site must be the ``site_id`` of a building already stored: weather for a site no building
uses cannot feed a forecast and is most likely a typo, so it is refused (naming the sites).

Observed weather is written like meter readings: only the hours the file holds change (a blank
cell making that value missing), and a stored hour the file does not mention is never touched;
with ``replace_range`` (``--replace-range``) each site's stored observations from the file's
first to its last hour (inclusive) are replaced instead, the hours the file lacks removed and
counted. Forecasts keep one row per (site, hour),
the *latest issue*: within the file the latest ``issued_at`` per hour wins, and a stored forecast
of that hour is replaced only by one issued at the same time or later (an older file ingested
late never overwrites a newer forecast). Forecast hours the file does not hold are untouched.
Readers prefer an observation to a forecast for the same hour
(:mod:`~tasks.warehouse.hours`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Literal

import duckdb
import pandas as pd
import pyarrow as pa
from pydantic import Field, model_validator

from tasks.ingest.contract import Column, FileContract, SourceTable
from tasks.ingest.errors import MalformedSourceError
from tasks.ingest.hourly import HourlyFileOptions, check_on_grid, check_unique, removed_note
from tasks.ingest.plausibility import (
    HUMIDITY_PCT,
    IRRADIANCE_WM2,
    TEMPERATURE_C,
    WIND_MS,
    value_notes,
)
from tasks.ingest.timestamps import (
    DAYS_AHEAD,
    FORECAST_DAYS_AHEAD,
)
from tasks.warehouse.connection import transaction
from tasks.warehouse.schema import ensure_schema
from tasks.warehouse.selection import refuse_unknown_ids
from tasks.warehouse.slices import replace_unless_newer, write_key_hours

WeatherKind = Literal["observed", "forecast"]
WindUnit = Literal["m/s", "knots", "km/h"]
WIND_TO_MS: dict[str, float] = {"m/s": 1.0, "knots": 1852.0 / 3600.0, "km/h": 1.0 / 3.6}
"""A wind speed in each unit, in m/s (a knot is a nautical mile, 1,852 m, an hour)."""
WEATHER_FILE = FileContract(
    "a weather file",
    (Column("site_id", "id", what="site id"),
     Column("ts", "time"),
     Column("temperature_c", "number", filled=False, bound=TEMPERATURE_C),
     Column("irradiance_wm2", "number", filled=False, bound=IRRADIANCE_WM2),
     Column("wind_speed_ms", "number", filled=False, bound=WIND_MS),
     Column("humidity_pct", "number", required=False, filled=False, bound=HUMIDITY_PCT),
     Column("issued_at", "time", required=False)))
"""What an observed weather feed holds; a forecast's (:data:`FORECAST_FILE`) requires
``issued_at``. The time columns are read below (their clock options)."""
FORECAST_FILE = WEATHER_FILE.requiring("issued_at")
VALUES = tuple(c.name for c in WEATHER_FILE.columns if c.cells == "number")
_UTC_TS = pa.timestamp("us", tz="UTC")
WEATHER_SCHEMA = pa.schema([("site_id", pa.string()), ("ts", _UTC_TS),
                            *((name, pa.float64()) for name in VALUES), ("kind", pa.string()),
                            ("issued_at", _UTC_TS)])


class WeatherOptions(HourlyFileOptions):
    """How to read a weather feed (the options of ``wadiro ingest weather``)."""

    kind: WeatherKind = Field(
        description="observed, or forecast (then an issued_at column is required; the latest "
        "issue per site and hour is kept).")
    wind_unit: WindUnit = Field(
        "m/s", description="The unit of the file's wind speed column: m/s, knots (a METAR or "
        "MIDAS feed) or km/h; stored in m/s.")

    @model_validator(mode="after")
    def _range_of_observations_only(self) -> WeatherOptions:
        if self.replace_range and self.kind == "forecast":
            raise ValueError("--replace-range is for observed weather; a forecast replaces only "
                             "the hours it holds, and only by a later issue")
        return self


@dataclass(frozen=True, kw_only=True)
class WeatherFindings:
    """What reading a weather feed found: said by its batch and, once written, its summary."""

    kind: WeatherKind
    rows_read: int
    superseded_in_file: int
    """Forecast rows left out because the file holds a later issue of the same site and hour."""
    implausible_values: int
    clipped_values: int = 0
    """Values just past their bound, within a sensor's tolerance, stored as the bound."""
    blank_cells: tuple[tuple[str, int], ...] = ()
    """Per variable the file has a column of, how many of its rows leave it blank."""
    absent: tuple[str, ...] = ()
    """Variables the file has no column of (stored as missing)."""

    def blank_notes(self) -> str:
        """``; wind_speed_ms blank in 161 of 168 rows (stored as missing)``, or nothing."""
        notes = [f"{name} blank in {count:,} of {self.rows_read:,} rows"
                 for name, count in self.blank_cells if count]
        notes += [f"{name} not in the file" for name in self.absent]
        return f"; {', '.join(notes)} (stored as missing)" if notes else ""


@dataclass(frozen=True, kw_only=True)
class WeatherBatch(WeatherFindings):
    """A checked weather feed as ``weather`` rows, one per (site, hour)."""

    path: str
    weather: pa.Table
    site_ids: tuple[str, ...]
    read_seconds: float
    replace_range: bool = False


@dataclass(frozen=True, kw_only=True)
class WeatherSummary(WeatherFindings):
    """What a weather ingest wrote, and what reading its file found."""

    sites: int
    hours: int
    replaced: int
    older_than_stored: int
    seconds: float
    removed: int | None = None
    """Stored hours of the file's ranges that it does not hold, removed (``--replace-range``)."""

    def line(self) -> str:
        notes = []
        if self.kind == "forecast":
            notes.append(f"the latest issue per hour: {self.superseded_in_file:,} earlier "
                         f"issue(s) in the file and {self.older_than_stored:,} older than the "
                         "stored forecast left out")
        notes += value_notes(self.implausible_values, self.clipped_values)
        extra = f" ({'; '.join(notes)})" if notes else ""
        return (f"wrote {self.hours:,} {self.kind} weather hours for {self.sites:,} site(s), "
                f"replacing {self.replaced:,} stored{removed_note(self.removed)}{extra}"
                f"{self.blank_notes()}")


def load_weather(path: str | Path, options: WeatherOptions) -> WeatherBatch:
    """Read and check a weather feed; no warehouse involved."""
    began = time.perf_counter()
    forecast = options.kind == "forecast"
    contract = FORECAST_FILE if forecast else WEATHER_FILE
    source = contract.open(path, options)
    if not forecast and "issued_at" in source.columns:
        source.close()
        raise MalformedSourceError(f"{source.at.path}: an 'issued_at' column, but --kind "
                                   "observed; a forecast feed is ingested with --kind forecast")
    cells = contract.judge(source, policy=options.implausible,
                           scale={"wind_speed_ms": WIND_TO_MS[options.wind_unit]})
    at = cells.at
    times = ("ts", "issued_at") if forecast else ("ts",)
    stamps = SourceTable(pa.table({column: cells[column] for column in times}), at)
    sites = cells.strings("site_id")
    keys = pd.DataFrame({"site_id": sites})
    if forecast:
        reader = options.reader("issued_at", DAYS_AHEAD, "an issue time")
        issued = reader.utc(at, reader.read(stamps), options.ambiguous, pairs=False)
        keys["issued_at"] = issued.astype(str)
    reader = (options.reader("ts", FORECAST_DAYS_AHEAD, "a forecast") if forecast
              else options.reader("ts", DAYS_AHEAD, "an observation"))
    ts = reader.utc(at, reader.read(stamps), options.ambiguous,
                    sites + "\x00" + keys["issued_at"] if forecast else sites, "site and issue")
    check_on_grid(at, "ts", ts, 60)
    check_unique(at, "ts", ts, keys,
                 "site {site_id!r}" + (" issued at {issued_at}" if forecast else ""))
    frame = pd.DataFrame({"site_id": sites.to_numpy(), "ts": ts.to_numpy(),
                          **{name: cells[name].to_numpy(zero_copy_only=False) for name in VALUES},
                          "kind": options.kind,
                          "issued_at": issued.to_numpy() if forecast else pd.NaT})
    superseded = 0
    if forecast:  # the latest issue of each site and hour
        latest = frame.sort_values("issued_at", kind="stable").drop_duplicates(["site_id", "ts"],
                                                                               keep="last")
        superseded, frame = len(frame) - len(latest), latest
    frame = frame.sort_values(["site_id", "ts"], kind="stable")
    frame["issued_at"] = pd.to_datetime(frame["issued_at"], utc=True)
    table = pa.Table.from_pandas(frame, schema=WEATHER_SCHEMA, preserve_index=False)
    return WeatherBatch(
        path=str(at.path), kind=options.kind, weather=table,
        site_ids=tuple(dict.fromkeys(frame["site_id"])), rows_read=cells.rows,
        superseded_in_file=superseded, implausible_values=cells.tally.implausible,
        clipped_values=cells.tally.clipped, read_seconds=time.perf_counter() - began,
        replace_range=options.replace_range, blank_cells=tuple(cells.blank.items()),
        absent=tuple(name for name in VALUES if name not in cells.columns))


def write_weather(con: duckdb.DuckDBPyConnection, batch: WeatherBatch) -> WeatherSummary:
    """Refuse sites no stored building uses, then write the feed in one transaction
    (observations: the file's hours, or with ``replace_range`` each site's range; forecasts:
    the latest issue per hour kept)."""
    began = time.perf_counter()
    ensure_schema(con)
    refuse_unknown_ids(con, batch.path, "site_id", batch.site_ids)
    removed = None
    with transaction(con):
        if batch.kind == "observed":
            written = write_key_hours(con, "weather", batch.weather, "site_id",
                                      where={"kind": "observed"},
                                      replace_range=batch.replace_range, own_transaction=False)
            deleted, inserted = written.replaced, written.inserted
            removed = written.removed if batch.replace_range else None
        else:
            deleted, inserted = replace_unless_newer(con, "weather", batch.weather,
                                                     ("site_id", "ts", "kind"), "issued_at",
                                                     own_transaction=False)
    return WeatherSummary(
        **{found.name: getattr(batch, found.name) for found in fields(WeatherFindings)},
        sites=len(batch.site_ids), hours=inserted, replaced=deleted,
        older_than_stored=batch.weather.num_rows - inserted if batch.kind == "forecast" else 0,
        seconds=batch.read_seconds + time.perf_counter() - began, removed=removed)
