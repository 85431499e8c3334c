"""The Cambridge University Estates archive, read in its own layout and written to the warehouse.

Layout under the archive root::

    building_data/processed_data/UCam_Building_b{N}/electricity/{YYYY}.csv
        datetime,equipment load [kWh]              (UTC, hourly, one calendar year per file)
    aux_data/MetOffice Weather Data/processed_data/bedford/{YYYY}.csv
        datetime,air_temperature [degC],rltv_hum [%],glbl_irad_amt [W/m2]
    aux_data/MetOffice Weather Data/raw_data/hourly_weather/*qcv-1_{YYYY}.csv
        raw MIDAS hourly observations: a metadata header, a line ``data``, the CSV, ``end data``

Rules (also in ``data/README.md``):

* An exact ``0`` kWh is the publisher's marker for a missing or invalid reading: it is stored as
  NULL, never as 0. Empty cells are NULL too.
* Wind speed comes from the raw MIDAS files, converted from knots to m/s. Only observations
  whose ``ob_time`` falls exactly on the hour are used; when several rows share an ``ob_time``
  the one with the highest ``version_num`` wins, and among equal versions the last one in the
  file (MIDAS appends corrections). An hour without a usable observation gets NULL wind.
* Every yearly file must hold exactly the hours of its year, each once; anything else (a
  truncated file, a duplicated timestamp, a non-numeric value) is an error naming the file, and
  nothing is written.
* Every value of the selected hours must be finite and physically plausible
  (:mod:`~tasks.ingest.plausibility`: no negative energy, no temperature no
  weather station has recorded, ...). A value just past its bound within a sensor's tolerance
  (humidity up to 105 %, irradiance down to -30 W/m2) is clipped to the bound and counted.
  Otherwise the ingest stops with an error naming file, line and column and writes nothing --
  or, when the selection says ``implausible="missing"``, stores such values as missing and
  counts them. Values of hours outside the selected range are not judged (the file's layout
  is: every yearly file is checked whole).

Everything is read and checked into Arrow tables first (:func:`load_cambridge`, nothing
written on any error; the tests and the benchmarks read the archive through it too). The
warehouse is then changed in one transaction (:func:`write_cambridge`) that replaces the selected
buildings' rows and every hour of readings and weather the archive holds in the asked range, so
a rerun leaves the same rows. Hours the archive does not hold (a year without a file, weather
sent from elsewhere for later years) are never touched. The scores of stored forecasts whose
readings changed are recomputed in the same transaction, after the new hours are judged
(:mod:`~tasks.ingest.flagging`: the few the archive's meters got wrong are kept but treated as
missing).
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv
from pydantic import BaseModel, ConfigDict, Field

from tasks.errors import UnknownBuildingError
from tasks.ingest.errors import (
    DuplicateTimestampError,
    EmptyRangeError,
    MalformedSourceError,
    SourceNotFoundError,
)
from tasks.ingest.flagging import FlagReport, flag_new_hours
from tasks.ingest.plausibility import (
    ENERGY_KWH,
    HUMIDITY_PCT,
    IRRADIANCE_WM2,
    TEMPERATURE_C,
    WIND_MS,
    ImplausiblePolicy,
    Tally,
    check_column,
    value_notes,
)
from tasks.protocol.comma_lists import CommaList
from tasks.warehouse.connection import connect, transaction
from tasks.warehouse.rescoring import rescore_forecasts, rescored_note
from tasks.warehouse.schema import ensure_schema
from tasks.warehouse.slices import Slice, replace_slice, write_key_hours

SITE_ID = "bedford"
TIMEZONE = "Europe/London"
HOLIDAY_COUNTRY = "GB"
HOLIDAY_SUBDIV = "ENG"
ARCHIVE_SOURCE = "cambridge-estates"
KNOT_IN_MS = 0.514444
MIDAS_KNOTS_UNIT_ID = 4

ELECTRICITY_COLUMNS = ("datetime", "equipment load [kWh]")
WEATHER_COLUMNS = ("datetime", "air_temperature [degC]", "rltv_hum [%]", "glbl_irad_amt [W/m2]")
_UTC_TS = pa.timestamp("us", tz="UTC")
_YEAR_FILE = re.compile(r"^(\d{4})\.csv$")
_MIDAS_YEAR = re.compile(r"qcv-1_(\d{4})\.csv$")


class ArchiveSelection(BaseModel):
    """Which part of the archive an ingest reads (:func:`load_cambridge`'s arguments)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    path: str = Field(description="Root of the Cambridge Estates archive.")
    buildings: CommaList | None = Field(None, description="Building ids (default: all).")
    start: date | None = Field(None, description="First UTC day (inclusive).")
    end: date | None = Field(None, description="Last UTC day (inclusive).")
    implausible: ImplausiblePolicy = Field(
        "refuse", description="A non-finite or physically implausible value (negative energy or "
        "irradiance, a temperature no station has recorded, ...): refuse it (an error naming "
        "file, line and column; nothing is written) or store it as missing and count it.")


@dataclass(frozen=True)
class ArchiveLayout:
    """Where the archive keeps each kind of file (:meth:`at` checks that they are there)."""

    buildings_dir: Path
    weather_dir: Path
    midas_dir: Path

    @classmethod
    def at(cls, root: str | Path) -> ArchiveLayout:
        root = Path(root)
        if root.exists() and not root.is_dir():
            raise SourceNotFoundError(f"archive path {root} is a file; give the archive's root "
                                      "folder (the one holding building_data/)")
        if not root.is_dir():
            raise SourceNotFoundError(f"archive path does not exist: {root}")
        met = root / "aux_data" / "MetOffice Weather Data"
        layout = cls(root / "building_data" / "processed_data", met / "processed_data" / SITE_ID,
                     met / "raw_data" / "hourly_weather")
        for needed in (layout.buildings_dir, layout.weather_dir):
            if not needed.is_dir():
                raise SourceNotFoundError(f"archive layout incomplete, missing directory: {needed}")
        return layout


@dataclass(frozen=True)
class CambridgeBatch:
    """Everything one ingest writes, already validated."""

    buildings: pa.Table
    readings: pa.Table
    weather: pa.Table
    building_ids: tuple[str, ...]
    read_seconds: float = 0.0
    implausible_values: int = 0
    """Values stored as missing because they were implausible (``implausible="missing"``)."""
    clipped_values: int = 0
    """Values just past their bound, within a sensor's tolerance, stored as the bound."""


def _building_number(building_id: str) -> tuple[int, str]:
    match = re.search(r"(\d+)$", building_id)
    return (int(match.group(1)) if match else -1, building_id)


def list_buildings(layout: ArchiveLayout) -> list[str]:
    """Building ids (folder names) that hold an ``electricity`` folder, in numeric order."""
    ids = [p.name for p in layout.buildings_dir.iterdir() if (p / "electricity").is_dir()]
    return sorted(ids, key=_building_number)


def select_buildings(available: Sequence[str], requested: Sequence[str] | None) -> list[str]:
    """The requested ids (all if ``None``), refusing any id the archive does not have."""
    if requested is None:
        return list(available)
    known = set(available)
    unknown = [b for b in requested if b not in known]
    if unknown:
        raise UnknownBuildingError(f"unknown building id(s) in the archive: {', '.join(unknown)}")
    if not requested:
        raise UnknownBuildingError("an empty list of building ids was given")
    return list(dict.fromkeys(requested))


def utc_range(start: date | None, end: date | None) -> tuple[datetime | None, datetime | None]:
    """Inclusive UTC dates -> [start 00:00, day after end 00:00) as aware datetimes."""
    lo = datetime(start.year, start.month, start.day, tzinfo=UTC) if start else None
    hi = datetime(end.year, end.month, end.day, tzinfo=UTC) + timedelta(days=1) if end else None
    if lo is not None and hi is not None and lo >= hi:
        raise EmptyRangeError(f"empty date range: start {start} is after end {end}")
    return lo, hi


def _year_files(directory: Path, pattern: re.Pattern[str]) -> dict[int, Path]:
    files: dict[int, Path] = {}
    for path in directory.iterdir():
        match = pattern.search(path.name)
        if match and path.is_file():
            files[int(match.group(1))] = path
    return files


def _overlaps(year: int, lo: datetime | None, hi: datetime | None) -> bool:
    year_start = datetime(year, 1, 1, tzinfo=UTC)
    year_end = datetime(year + 1, 1, 1, tzinfo=UTC)
    return (lo is None or lo < year_end) and (hi is None or hi > year_start)


def _read_csv(path: Path, columns: Sequence[str]) -> pa.Table:
    """Read a CSV with a fixed header: timestamp first, doubles after."""
    types = {columns[0]: pa.timestamp("s")} | {c: pa.float64() for c in columns[1:]}
    try:
        table = pcsv.read_csv(
            str(path),
            # Only a blank cell is missing: "nan", "NA", "null" are values, checked (and refused)
            # like any other.
            convert_options=pcsv.ConvertOptions(column_types=types, strings_can_be_null=True,
                                                null_values=[""]),
        )
    except pa.ArrowInvalid as error:
        raise MalformedSourceError(f"{path}: {error}") from error
    if tuple(table.column_names) != tuple(columns):
        raise MalformedSourceError(f"{path}: expected columns {list(columns)}, found "
                                   f"{table.column_names}")
    return table


def _check_full_year(path: Path, year: int, ts: pa.ChunkedArray) -> None:
    """A yearly file holds each hour of its UTC year exactly once."""
    if ts.null_count:
        raise MalformedSourceError(f"{path}: {ts.null_count} row(s) without a timestamp")
    seconds = ts.cast(pa.int64()).to_numpy()
    if np.any(seconds % 3600):
        raise MalformedSourceError(f"{path}: timestamps not on the hour")
    lo = int(datetime(year, 1, 1, tzinfo=UTC).timestamp())
    hi = int(datetime(year + 1, 1, 1, tzinfo=UTC).timestamp())
    unique, counts = np.unique(seconds, return_counts=True)
    if unique.size < seconds.size:
        first = datetime.fromtimestamp(int(unique[counts > 1][0]), tz=UTC)
        raise DuplicateTimestampError(
            f"{path}: duplicate timestamps ({seconds.size - unique.size} repeated), first at "
            f"{first:%Y-%m-%d %H:%M}")
    if seconds.size and (seconds.min() < lo or seconds.max() >= hi):
        raise MalformedSourceError(f"{path}: timestamps outside the year {year}")
    expected = (hi - lo) // 3600
    if seconds.size != expected:
        raise MalformedSourceError(f"{path}: truncated, {seconds.size} of the {expected} "
                                   f"hours of {year}")


def _utc(ts: pa.ChunkedArray) -> pa.ChunkedArray:
    return ts.cast(pa.timestamp("s", tz="UTC")).cast(_UTC_TS)


def _range_mask(ts: pa.ChunkedArray | pa.Array, lo: datetime | None,
                hi: datetime | None) -> np.ndarray:
    """Which UTC instants lie in ``[lo, hi)`` (every one when both are ``None``)."""
    keep = np.ones(len(ts), bool)
    if lo is not None:
        keep &= pc.greater_equal(ts, pa.scalar(lo, _UTC_TS)).to_numpy(zero_copy_only=False)
    if hi is not None:
        keep &= pc.less(ts, pa.scalar(hi, _UTC_TS)).to_numpy(zero_copy_only=False)
    return keep


def _year_rows(path: Path, columns: Sequence[str], year: int, lo: datetime | None,
               hi: datetime | None) -> tuple[pa.Table, pa.ChunkedArray, np.ndarray]:
    """A yearly file checked whole (:func:`_check_full_year`), then only its rows in
    ``[lo, hi)``: those rows, their UTC hours and their lines in the file. Values are judged
    only in the selected rows, so a value outside the range never stops an ingest."""
    raw = _read_csv(path, columns)
    _check_full_year(path, year, raw["datetime"])
    ts = _utc(raw["datetime"])
    keep = _range_mask(ts, lo, hi)
    selected = pa.array(keep)
    return raw.filter(selected), ts.filter(selected), (np.arange(raw.num_rows) + 2)[keep]


def _electricity(path: Path, building_id: str, year: int, implausible: ImplausiblePolicy,
                 lo: datetime | None, hi: datetime | None, tally: Tally) -> pa.Table:
    """One building-year's hours in ``[lo, hi)`` as (building_id, ts, kwh), exact zeros and
    blanks as NULL."""
    raw, ts, lines = _year_rows(path, ELECTRICITY_COLUMNS, year, lo, hi)
    column = ELECTRICITY_COLUMNS[1]
    kwh = check_column(raw[column], ENERGY_KWH, path=path, column=column, lines=lines,
                       policy=implausible, tally=tally)
    kwh = pc.if_else(pc.equal(kwh, 0.0), pa.scalar(None, pa.float64()), kwh)
    return pa.table({"building_id": pa.repeat(pa.scalar(building_id), raw.num_rows), "ts": ts,
                     "kwh": kwh})


_WEATHER_BOUNDS = {
    "air_temperature [degC]": ("temperature_c", TEMPERATURE_C),
    "rltv_hum [%]": ("humidity_pct", HUMIDITY_PCT),
    "glbl_irad_amt [W/m2]": ("irradiance_wm2", IRRADIANCE_WM2),
}


def _midas_body(path: Path) -> tuple[bytes, int]:
    text = path.read_bytes()
    lines = text.splitlines(keepends=True)
    stripped = [line.strip() for line in lines]
    try:
        begin = stripped.index(b"data")
    except ValueError:
        raise MalformedSourceError(f"{path}: no 'data' line, not a MIDAS file") from None
    try:
        end = stripped.index(b"end data", begin + 1)
    except ValueError:
        raise MalformedSourceError(f"{path}: truncated, no 'end data' line") from None
    return b"".join(lines[begin + 1 : end]), begin + 3  # the CSV's header follows "data"


def read_midas_wind(path: Path, implausible: ImplausiblePolicy = "refuse",
                    lo: datetime | None = None, hi: datetime | None = None,
                    tally: Tally | None = None) -> pa.Table:
    """Hourly wind speed (ts, wind_speed_ms) from one raw MIDAS file.

    Rule for repeated ``ob_time`` rows: highest ``version_num``, then last in the file; rows not
    on the hour are ignored. Wind is converted from knots to m/s.
    """
    wanted = ["ob_time", "version_num", "wind_speed_unit_id", "wind_speed"]
    body, first_line = _midas_body(path)
    try:
        raw = pcsv.read_csv(pa.BufferReader(body), convert_options=pcsv.ConvertOptions(
            include_columns=wanted, null_values=["NA", ""],
            column_types={"ob_time": pa.timestamp("s"), "version_num": pa.int64(),
                          "wind_speed_unit_id": pa.int64(), "wind_speed": pa.float64()}))
    except (pa.ArrowInvalid, KeyError) as error:
        raise MalformedSourceError(f"{path}: {error}") from error
    units = raw["wind_speed_unit_id"].drop_null()
    if len(units) and not pc.all(pc.equal(units, MIDAS_KNOTS_UNIT_ID)).as_py():
        raise MalformedSourceError(f"{path}: wind_speed_unit_id other than knots (4) found")
    frame = raw.to_pandas().assign(line=np.arange(raw.num_rows) + first_line)
    frame = frame[frame["ob_time"].notna()]
    frame = frame[frame["ob_time"].dt.floor("h") == frame["ob_time"]]
    frame = frame.assign(order=np.arange(len(frame)), version_num=frame["version_num"].fillna(-1))
    frame = frame.sort_values(["ob_time", "version_num", "order"], kind="stable")
    frame = frame.drop_duplicates("ob_time", keep="last")
    ts = _utc(pa.chunked_array([pa.array(frame["ob_time"], pa.timestamp("s"))]))
    keep = _range_mask(ts, lo, hi)
    frame = frame[keep]
    knots = check_column(
        pa.array(frame["wind_speed"], pa.float64()), WIND_MS, path=path, column="wind_speed",
        lines=frame["line"].to_numpy(), policy=implausible, tally=tally or Tally(),
        scale=KNOT_IN_MS)
    return pa.table({"ts": ts.filter(pa.array(keep)),
                     "wind_speed_ms": pc.multiply(knots, KNOT_IN_MS)})


_HOURLY_WEATHER = pa.schema([("ts", _UTC_TS), ("temperature_c", pa.float64()),
                             ("humidity_pct", pa.float64()), ("irradiance_wm2", pa.float64()),
                             ("wind_speed_ms", pa.float64())])


def _weather_year(path: Path, year: int, midas: Path | None, implausible: ImplausiblePolicy,
                  lo: datetime | None, hi: datetime | None, tally: Tally) -> pa.Table:
    """The hours of one year of processed Bedford weather in ``[lo, hi)``, with the MIDAS wind
    joined on the hour; values just past a bound (humidity up to 105 %, irradiance down to
    -30 W/m2) are clipped to it."""
    raw, ts, lines = _year_rows(path, WEATHER_COLUMNS, year, lo, hi)
    hourly = pa.table({"ts": ts, **{
        name: check_column(raw[source], bound, path=path, column=source, lines=lines,
                           policy=implausible, tally=tally)
        for source, (name, bound) in _WEATHER_BOUNDS.items()}})
    if midas is None:
        return hourly.append_column("wind_speed_ms", pa.nulls(hourly.num_rows, pa.float64()))
    wind = read_midas_wind(midas, implausible, lo, hi, tally)
    return hourly.join(wind, "ts", join_type="left outer").select(_HOURLY_WEATHER.names)


def _weather(layout: ArchiveLayout, lo: datetime | None, hi: datetime | None,
             implausible: ImplausiblePolicy, tally: Tally) -> pa.Table:
    """Observed Bedford weather of every archive year overlapping the range, sorted by time."""
    years = _year_files(layout.weather_dir, _YEAR_FILE)
    midas = _year_files(layout.midas_dir, _MIDAS_YEAR) if layout.midas_dir.is_dir() else {}
    parts = [_weather_year(path, year, midas.get(year), implausible, lo, hi, tally
                           ).cast(_HOURLY_WEATHER)
             for year, path in sorted(years.items()) if _overlaps(year, lo, hi)]
    table = pa.concat_tables(parts).sort_by("ts") if parts else _HOURLY_WEATHER.empty_table()
    n = table.num_rows
    return (table.append_column("site_id", pa.repeat(pa.scalar(SITE_ID), n))
            .append_column("kind", pa.repeat(pa.scalar("observed"), n)))


def load_cambridge(path: str | Path, buildings: Sequence[str] | None = None,
                   start: date | None = None, end: date | None = None,
                   implausible: ImplausiblePolicy = "refuse") -> CambridgeBatch:
    """Read and validate the archive's buildings, readings and weather for the selection
    (``implausible``: refuse implausible values, or store them as missing and count them; only
    values of the selected hours are judged)."""
    began = time.perf_counter()
    layout = ArchiveLayout.at(path)
    lo, hi = utc_range(start, end)
    ids = select_buildings(list_buildings(layout), buildings)
    tally = Tally()
    readings = []
    for building_id in ids:
        files = _year_files(layout.buildings_dir / building_id / "electricity", _YEAR_FILE)
        for year, file in sorted(files.items()):
            if _overlaps(year, lo, hi):
                readings.append(_electricity(file, building_id, year, implausible, lo, hi, tally))
    if not readings:
        raise EmptyRangeError(
            f"no electricity readings between {start or 'the beginning'} and {end or 'the end'} "
            f"for the {len(ids)} selected building(s)")
    meta = pa.table({"building_id": pa.array(ids, pa.string()), **{
        name: pa.repeat(pa.scalar(value), len(ids)) for name, value in (
            ("site_id", SITE_ID), ("timezone", TIMEZONE), ("holiday_country", HOLIDAY_COUNTRY),
            ("holiday_subdiv", HOLIDAY_SUBDIV), ("source", ARCHIVE_SOURCE))}})
    weather = _weather(layout, lo, hi, implausible, tally)
    return CambridgeBatch(
        buildings=meta, readings=pa.concat_tables(readings), weather=weather,
        building_ids=tuple(ids), read_seconds=time.perf_counter() - began,
        implausible_values=tally.implausible, clipped_values=tally.clipped)


@dataclass(frozen=True)
class IngestSummary:
    """What an ingest wrote."""

    buildings: int
    readings: int
    missing_readings: int
    weather_hours: int
    seconds: float
    """Time spent reading, checking and writing (excluding orchestration)."""
    implausible_values: int = 0
    """Values stored as missing because they were implausible (``--implausible missing``)."""
    clipped_values: int = 0
    """Values just past their bound, within a sensor's tolerance, stored as the bound."""
    rescored: int = 0
    """Stored scores of forecasts whose readings changed, updated in place."""
    flags: FlagReport = FlagReport()
    """The hours judged implausible (kept, treated as missing until accepted)."""

    def line(self) -> str:
        notes = value_notes(self.implausible_values, self.clipped_values)
        return (f"wrote {self.readings:,} readings ({self.missing_readings:,} missing) for "
                f"{self.buildings:,} buildings and {self.weather_hours:,} weather hours"
                + "".join(f"; {note}" for note in notes) + self.flags.note()
                + rescored_note(self.rescored))


def write_cambridge(con: duckdb.DuckDBPyConnection, batch: CambridgeBatch) -> IngestSummary:
    """Replace the batch's buildings and the hours of readings and weather it holds, in one
    transaction."""
    began = time.perf_counter()
    ensure_schema(con)
    ids = list(batch.building_ids)
    with transaction(con):
        replace_slice(con, "buildings", batch.buildings, Slice(where_in={"building_id": ids}),
                      own_transaction=False)
        write_key_hours(con, "meter_readings", batch.readings, "building_id",
                        own_transaction=False)
        write_key_hours(con, "weather", batch.weather, "site_id", where={"kind": "observed"},
                        own_transaction=False)
        flags = flag_new_hours(con, batch.readings)
        ts = batch.readings["ts"]
        start, end = flags.span(pc.min(ts).as_py(), pc.max(ts).as_py())
        rescored = rescore_forecasts(con, buildings=ids, start=start, end=end)
    return IngestSummary(
        buildings=len(ids), readings=batch.readings.num_rows,
        missing_readings=batch.readings["kwh"].null_count, weather_hours=batch.weather.num_rows,
        seconds=batch.read_seconds + time.perf_counter() - began,
        implausible_values=batch.implausible_values, clipped_values=batch.clipped_values,
        rescored=rescored, flags=flags)


def ingest_cambridge(warehouse: str | Path, path: str | Path,
                     buildings: Sequence[str] | None = None, start: date | None = None,
                     end: date | None = None, implausible: ImplausiblePolicy = "refuse"
                     ) -> IngestSummary:
    """Load the archive selection, then write it to the warehouse file in one transaction."""
    batch = load_cambridge(path, buildings, start, end, implausible)
    with connect(warehouse) as con:
        return write_cambridge(con, batch)
