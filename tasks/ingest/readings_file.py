"""An operator's meter export (hourly or sub-hourly energy per building) into ``meter_readings``.

Two layouts, CSV or Parquet:

* long: ``building_id, ts, kwh`` (the value column may be named ``value``), one row per
  building and interval;
* wide: ``ts`` and one column per building id.

``--layout auto`` (the default) takes a file with a ``building_id`` column as long, any other as
wide. Timestamps, clock changes, the grid, units and sub-hourly sums follow
:mod:`~wadiro_fleet.tasks.ingest.timestamps` and :mod:`~wadiro_fleet.tasks.ingest.hourly`;
every value must be a plausible energy (:mod:`~wadiro_fleet.tasks.ingest.plausibility`).

Incremental: only the hours the file holds change (an upsert): each is replaced by the file's
value, a blank cell making it missing; a stored hour the file does not mention is never
touched, whatever gap lies between the file's rows. With ``replace_range``
(``--replace-range``) each building's stored hours from its first to its last hour in the file
are replaced instead, so the hours of that range the file lacks are removed, and the summary
says how many. The scores of stored forecasts whose hours the file changed are recomputed in
the same transaction (:mod:`~wadiro_fleet.tasks.warehouse.rescoring`). All buildings change in
one transaction, so re-ingesting a file changes nothing, and a refused file changes nothing.
Every building id must already be in ``buildings``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Literal

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from prefect import task
from prefect.cache_policies import NO_CACHE
from pydantic import Field
from wadiro_fleet.tasks.errors import UnknownBuildingError
from wadiro_fleet.tasks.ingest.errors import MalformedSourceError
from wadiro_fleet.tasks.ingest.hourly import (
    EnergyUnit,
    check_on_grid,
    check_unique,
    infer_interval,
    kwh_factor,
    sum_to_hours,
)
from wadiro_fleet.tasks.ingest.plausibility import (
    ENERGY_KWH,
    REGISTER_KWH,
    ImplausiblePolicy,
    Tally,
    check_column,
)
from wadiro_fleet.tasks.ingest.registers import (
    RegisterCounts,
    difference_registers,
    refuse_registers,
)
from wadiro_fleet.tasks.ingest.source_files import CsvFormat, SourceTable, read_source
from wadiro_fleet.tasks.ingest.timestamps import AmbiguousPolicy, LocalTimeOptions, utc_instants
from wadiro_fleet.tasks.warehouse.connection import connect, transaction
from wadiro_fleet.tasks.warehouse.rescoring import rescore_forecasts, rescored_note
from wadiro_fleet.tasks.warehouse.schema import ensure_schema
from wadiro_fleet.tasks.warehouse.selection import ids_not_in_buildings, shown_ids
from wadiro_fleet.tasks.warehouse.slices import write_key_hours

__all__ = [
    "ReadingsBatch",
    "ReadingsOptions",
    "ReadingsSummary",
    "ingest_readings",
    "load_readings",
    "write_readings",
]

Layout = Literal["auto", "long", "wide"]
VALUE_COLUMNS = ("kwh", "value")
_UTC_TS = pa.timestamp("us", tz="UTC")
READINGS_SCHEMA = pa.schema([("building_id", pa.string()), ("ts", _UTC_TS), ("kwh", pa.float64())])


class ReadingsOptions(LocalTimeOptions, CsvFormat):
    """How to read a meter export (the options of ``wadiro ingest readings``)."""

    layout: Layout = Field(
        "auto",
        description="long (building_id, ts, kwh|value) or wide (ts, one column per "
        "building id); auto: long when there is a building_id column.",
    )
    unit: EnergyUnit = Field(
        "kWh",
        description="kWh or Wh: energy of each interval; kW: average power over the "
        "interval (kWh = kW x interval in hours); register: a cumulative meter register in "
        "kWh, read at each timestamp (the differences are stored; rollovers bridged, resets "
        "missing).",
    )
    ambiguous: AmbiguousPolicy = Field(
        "refuse",
        description="A local time the clocks pass twice (fall back) that appears "
        "only once for a building: refuse, or take the earliest (summer time) or latest "
        "(standard time) instant. Appearing twice, the first is the earliest.",
    )
    implausible: ImplausiblePolicy = Field(
        "refuse",
        description="A negative or non-finite energy: refuse the file (error naming "
        "line and column; nothing is written) or store it as missing and count it.",
    )
    replace_range: bool = Field(
        False,
        description="Replace each building's stored hours from its first to its last hour in "
        "the file, removing those the file does not hold (default: only the hours the file "
        "holds change).",
    )


@dataclass(frozen=True)
class ReadingsBatch:
    """A checked meter export, summed to hours (``readings``: building_id, ts, kwh)."""

    path: str
    readings: pa.Table
    building_ids: tuple[str, ...]
    interval_minutes: int
    rows_read: int
    partial_hours: int
    """Hours stored as missing because a sub-interval was blank while others had values."""
    implausible_values: int
    read_seconds: float
    incomplete_hours: int = 0
    """Hours not written because a sub-interval is absent from the file."""
    replace_range: bool = False
    """Whether each building's range in the file replaces what is stored (``--replace-range``)."""
    registers: RegisterCounts = RegisterCounts()
    """Rollovers and resets met differencing a register (``--unit register``)."""
    unit: EnergyUnit = "kWh"


@dataclass(frozen=True)
class ReadingsSummary:
    """What a readings ingest wrote."""

    buildings: int
    readings: int
    missing_readings: int
    partial_hours: int
    implausible_values: int
    interval_minutes: int
    replaced: int
    start: datetime | None
    end: datetime | None
    seconds: float
    incomplete_hours: int = 0
    removed: int | None = None
    """Stored hours of the file's ranges that it does not hold, removed (``--replace-range``);
    ``None`` without it (nothing is removed)."""
    registers: RegisterCounts | None = None
    """Rollovers and resets met differencing a register; ``None`` unless ``--unit register``."""
    rescored: int = 0
    """Stored scores of forecasts whose readings the file changed, updated in place."""

    def line(self) -> str:
        notes = [f"{self.missing_readings:,} missing"]
        if self.partial_hours:
            notes.append(
                f"{self.partial_hours:,} with a blank {self.interval_minutes}-minute "
                "value stored as missing"
            )
        if self.incomplete_hours:
            notes.append(
                f"{self.incomplete_hours:,} with a {self.interval_minutes}-minute interval "
                "absent from the file not written"
            )
        if self.implausible_values:
            notes.append(f"{self.implausible_values:,} implausible value(s) stored as missing")
        if self.registers is not None:
            notes.append(
                f"differences of a register: {self.registers.rollovers:,} rollover(s) bridged, "
                f"{self.registers.resets:,} reset(s) stored as missing"
            )
        span = (
            f", {self.start:%Y-%m-%d %H:%M} to {self.end:%Y-%m-%d %H:%M} UTC"
            if self.start is not None and self.end is not None
            else ""
        )
        every = (
            ""
            if self.interval_minutes == 60
            else f" from {self.interval_minutes}-minute readings"
        )
        removed = ("" if self.removed is None else
                   f"; removed {self.removed:,} stored hour(s) of the file's range that it "
                   "does not hold (--replace-range)")
        return (
            f"wrote {self.readings:,} hourly readings{every} ({'; '.join(notes)}) for "
            f"{self.buildings:,} building(s){span}, replacing {self.replaced:,} stored{removed}"
            f"{rescored_note(self.rescored)}"
        )


def _layout(source: SourceTable, requested: Layout) -> Literal["long", "wide"]:
    columns = source.columns
    if requested != "auto":
        return requested
    if "building_id" in columns:
        return "long"
    values = [c for c in VALUE_COLUMNS if c in columns]
    if values:
        raise MalformedSourceError(
            f"{source.path}: a {values[0]!r} column but no 'building_id' column: a long file "
            "needs building_id, ts, kwh; a wide file has ts and one column per building id "
            "(give --layout wide if a building is really called that)"
        )
    return "wide"


def _long_columns(source: SourceTable) -> str:
    values = [c for c in VALUE_COLUMNS if c in source.columns]
    if len(values) != 1:
        raise MalformedSourceError(
            f"{source.path}: a long file needs exactly one value column, 'kwh' or 'value'; "
            f"found {source.columns}"
        )
    expected = {"building_id", "ts", values[0]}
    missing = [c for c in ("building_id", "ts") if c not in source.columns]
    if missing:
        raise MalformedSourceError(
            f"{source.path}: missing required column(s) "
            f"{', '.join(map(repr, missing))}; found {source.columns}"
        )
    extra = [c for c in source.columns if c not in expected]
    if extra:
        raise MalformedSourceError(
            f"{source.path}: unexpected column(s) {', '.join(map(repr, extra))}"
            "; a long file has building_id, ts and kwh (or value)"
        )
    return values[0]


def _energy(
    source: SourceTable, column: str, factor: float, options: ReadingsOptions, tally: Tally
) -> np.ndarray:
    """A value column in kWh per interval (a register's reading, with ``--unit register``;
    NaN = missing), its implausible values stored as missing and counted in ``tally``."""
    bound = REGISTER_KWH if options.unit == "register" else ENERGY_KWH
    values = tally.take(check_column(
        source.numbers(column),
        bound,
        path=source.path,
        column=column,
        lines=source.row_numbers(),
        policy=options.implausible,
        scale=factor,
        label=source.row_label,
    ))
    return values.to_numpy(zero_copy_only=False).astype(float) * factor


def _differences(
    source: SourceTable, frame: pd.DataFrame, minutes: int, options: ReadingsOptions,
    column: str | None, tally: Tally,
) -> tuple[pd.DataFrame, RegisterCounts]:
    """Register readings -> the energy of each interval, checked to be plausible energies
    (errors name the interval's first reading and the building's column, or ``column``)."""
    energies, counts = difference_registers(frame, minutes)
    parts = []
    for building, part in energies.groupby("building_id", sort=False):
        checked = check_column(pa.array(part["kwh"].to_numpy(float), from_pandas=True),
                               ENERGY_KWH, path=source.path, column=column or building,
                               lines=part["line"].to_numpy(), policy=options.implausible,
                               label=source.row_label)
        parts.append(part.assign(kwh=tally.take(checked).to_numpy(zero_copy_only=False)))
    frame = pd.concat(parts, ignore_index=True) if parts else energies
    return frame, counts


def load_readings(path: str | Path, options: ReadingsOptions | None = None) -> ReadingsBatch:
    """Read and check a meter export and sum it to hours; no warehouse involved."""
    began = time.perf_counter()
    options = options or ReadingsOptions()
    source = read_source(path, required=["ts"], optional=None, form=options)
    lines = source.row_numbers()
    # columns: each value column -> the building id(s) of its cells
    if _layout(source, options.layout) == "long":
        value_column = _long_columns(source)
        ids = source.text("building_id", required=True)
        columns = {value_column: ids.to_numpy()}
        keys, what = pd.DataFrame({"building_id": ids}), "building {building_id!r}"
    else:
        value_column = ids = keys = None
        columns = {building: building for building in source.columns if building != "ts"}
        if not columns:
            raise MalformedSourceError(
                f"{source.path}: a wide file needs ts and one column per "
                f"building id; found only {source.columns}"
            )
        what = "the timestamp"
    ts = utc_instants(
        source,
        "ts",
        timezone=options.timezone,
        ambiguous=options.ambiguous,
        series=ids,
        series_name="building",
    )
    minutes = infer_interval(source, ts, ids)
    check_on_grid(source, "ts", ts, minutes)
    check_unique(source, "ts", ts, keys, what)
    factor = kwh_factor(options.unit, minutes)
    tally, parts = Tally(), []
    for column, building in columns.items():
        kwh = _energy(source, column, factor, options, tally)
        parts.append(pd.DataFrame({"building_id": building, "ts": ts.to_numpy(), "kwh": kwh,
                                   "line": lines}))
    frame = pd.concat(parts, ignore_index=True)
    registers = RegisterCounts()
    if options.unit == "register":
        frame, registers = _differences(source, frame, minutes, options, value_column, tally)
    else:
        refuse_registers(source.path, frame, minutes)
    hours, partial, incomplete = sum_to_hours(frame.drop(columns="line"), minutes)
    readings = pa.Table.from_pandas(hours, schema=READINGS_SCHEMA, preserve_index=False)
    return ReadingsBatch(
        path=str(source.path),
        readings=readings,
        building_ids=tuple(dict.fromkeys(hours["building_id"])),
        interval_minutes=minutes,
        rows_read=source.rows,
        partial_hours=partial,
        implausible_values=tally.implausible,
        read_seconds=time.perf_counter() - began,
        incomplete_hours=incomplete,
        replace_range=options.replace_range,
        registers=registers,
        unit=options.unit,
    )


def write_readings(con: duckdb.DuckDBPyConnection, batch: ReadingsBatch) -> ReadingsSummary:
    """Refuse building ids the warehouse does not know, then write the file's hours (or, with
    ``replace_range``, each building's range of hours) in one transaction."""
    began = time.perf_counter()
    ensure_schema(con)
    unknown = ids_not_in_buildings(con, "building_id", batch.building_ids)
    if unknown:
        raise UnknownBuildingError(
            f"{batch.path}: {len(unknown)} building id(s) not in the buildings table: "
            f"{shown_ids(unknown)}; ingest them first (wadiro ingest buildings FILE)"
        )
    ts = batch.readings["ts"]
    with transaction(con):
        written = write_key_hours(con, "meter_readings", batch.readings, "building_id",
                                  replace_range=batch.replace_range, own_transaction=False)
        rescored = rescore_forecasts(con, buildings=batch.building_ids,
                                     start=pc.min(ts).as_py(), end=pc.max(ts).as_py())
    return ReadingsSummary(
        buildings=len(batch.building_ids),
        readings=written.inserted,
        missing_readings=batch.readings["kwh"].null_count,
        partial_hours=batch.partial_hours,
        implausible_values=batch.implausible_values,
        interval_minutes=batch.interval_minutes,
        replaced=written.replaced,
        start=pc.min(ts).as_py(),
        end=pc.max(ts).as_py(),
        seconds=batch.read_seconds + time.perf_counter() - began,
        incomplete_hours=batch.incomplete_hours,
        removed=written.removed if batch.replace_range else None,
        registers=batch.registers if batch.unit == "register" else None,
        rescored=rescored,
    )


def ingest_readings(
    warehouse: str | Path, path: str | Path, options: ReadingsOptions | None = None
) -> ReadingsSummary:
    """Load and check the file, then write it to the warehouse file in one transaction."""
    batch = load_readings(path, options)
    with connect(warehouse, create=False) as con:
        return write_readings(con, batch)


@task(name="load-readings-file", cache_policy=NO_CACHE)
def load_readings_task(path: str, options: ReadingsOptions) -> ReadingsBatch:
    """Prefect wrapper of :func:`load_readings`."""
    return load_readings(path, options)


@task(name="write-readings-file", cache_policy=NO_CACHE)
def write_readings_task(warehouse: str, batch: ReadingsBatch) -> ReadingsSummary:
    """Prefect wrapper: open the warehouse and :func:`write_readings` the batch."""
    with connect(warehouse, create=False) as con:
        return write_readings(con, batch)
