"""An operator's meter export (hourly or sub-hourly energy per building) into ``meter_readings``.

Two layouts, CSV or Parquet: long (:data:`LONG_FILE`: ``building_id, ts, kwh``, the value
column may be named ``value``) or wide (:data:`WIDE_FILE`: ``ts`` and one column per building
id); ``--layout auto`` takes a file with a ``building_id`` column as long. The file is judged
through its contract (:mod:`~tasks.ingest.contract`) a chunk at a time, each chunk's cells
becoming compact columns (a building's code, the instant, the energy) before the next is read,
so memory grows with the file's readings, not with its text. Timestamps follow
:mod:`~tasks.ingest.timestamps`; the grid, units and sub-hourly sums :mod:`~tasks.ingest.hourly`;
registers :mod:`~tasks.ingest.registers`; every value must be a plausible energy
(:mod:`~tasks.ingest.plausibility`).

Incremental: only the hours the file holds change (an upsert), a blank cell making an hour
missing; a stored hour the file does not mention is never touched, whatever gap lies between
the file's rows. With ``replace_range`` (``--replace-range``) each building's stored hours from
its first to its last hour in the file are replaced instead, those the file lacks removed and
counted. Every building id must already be in ``buildings``. One transaction changes the hours,
the scores of stored forecasts over them (:mod:`~tasks.warehouse.rescoring`) and, for a
sub-hourly file, each building's latest :data:`~tasks.warehouse.intra_hour.KEEP_DAYS` days of
complete hours as they came (:mod:`~tasks.warehouse.intra_hour`: the intra-hour shape by which
``wadiro export`` splits hours into settlement periods); so re-ingesting a file, or a refused
one, changes nothing. A building whose file hours have a median :data:`LEVEL_CHANGE` times
above or below its stored hours' around them (four weeks either side) is refused, naming the
unit options (a register in Wh sent as kWh is stored 1,000 times too high), unless
``--accept-level-change`` says the level really changed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, fields, replace
from datetime import datetime
from pathlib import Path
from typing import Literal

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import Field, model_validator

from tasks.ingest.contract import (
    Cells,
    Column,
    FileContract,
    SourceFile,
    SourceRows,
    open_file,
)
from tasks.ingest.errors import MalformedSourceError
from tasks.ingest.flagging import FlagReport, flag_new_hours
from tasks.ingest.hourly import (
    EnergyUnit,
    HourlyFileOptions,
    check_on_grid,
    check_unique,
    infer_interval,
    removed_note,
    sum_to_hours,
)
from tasks.ingest.plausibility import (
    ENERGY_KWH,
    REGISTER_KWH,
    Tally,
    check_column,
)
from tasks.ingest.registers import (
    RegisterCounts,
    difference_registers,
    refuse_non_registers,
    refuse_registers,
)
from tasks.ingest.timestamps import (
    DAYS_AHEAD,
    TimeReader,
)
from tasks.warehouse.connection import transaction
from tasks.warehouse.intra_hour import recent_sub_hourly, write_sub_hourly
from tasks.warehouse.rescoring import rescore_forecasts, rescored_note
from tasks.warehouse.schema import ensure_schema
from tasks.warehouse.selection import refuse_unknown_ids
from tasks.warehouse.slices import write_key_hours

Layout = Literal["auto", "long", "wide"]
RegisterUnit = Literal["kWh", "Wh", "MWh"]
ENERGY = Column("kwh", "number", filled=False, bound=ENERGY_KWH, aliases=("value",))
"""An interval's energy (a blank cell: missing)."""
LONG_FILE = FileContract(
    "a long readings file",
    (Column("building_id", "id", what="building id"), Column("ts", "time"), ENERGY))
"""What a long meter export holds (the value column may be named ``value``)."""
WIDE_FILE = FileContract("a wide readings file", (Column("ts", "time"),),
                         others=replace(ENERGY, aliases=(), what="building id"))
"""What a wide meter export holds: ``ts`` and one energy column per building, named by its id."""
VALUE_COLUMNS = ("kwh", *LONG_FILE.column("kwh").aliases)
_REGISTER_KWH = {"kWh": 1.0, "Wh": 1e-3, "MWh": 1e3}
_UTC_TS = pa.timestamp("us", tz="UTC")
READINGS_SCHEMA = pa.schema([("building_id", pa.dictionary(pa.int32(), pa.string())),
                             ("ts", _UTC_TS), ("kwh", pa.float64())])
LEVEL_CHANGE = 200.0
"""A building's file hours whose median is this many times above (or below) the median of its
stored hours around them are refused as a unit mistake (1,000 for Wh read as kWh)."""
NEW_METER_MAX_KWH = 10_000.0
"""A building with no stored reading (a new meter: nothing to compare with) whose file hours
have a median above this (a 10 MW average draw, more than all but the largest sites) is refused
as a unit mistake too: a register in Wh read as kWh (40 kWh an hour stored as 40,000)."""
WRITE_ROWS = 1_000_000
"""Hours written to the warehouse per statement (whole buildings; one transaction for all)."""
_LEVEL_WINDOW_DAYS = 28
_LEVEL_MIN_HOURS = 24


class LevelChangeError(MalformedSourceError):
    """A file whose energies are a thousand times (or a thousandth of) what is stored."""


class ReadingsOptions(HourlyFileOptions):
    """How to read a meter export (the options of ``wadiro ingest readings``)."""

    layout: Layout = Field(
        "auto", description="long (building_id, ts, kwh|value) or wide (ts, one column per "
        "building id); auto: long when there is a building_id column.")
    unit: EnergyUnit = Field(
        "kWh", description="kWh or Wh: energy of each interval; kW: average power over the "
        "interval (kWh = kW x interval in hours); register: a cumulative meter register, read at "
        "each timestamp (the differences are stored; rollovers bridged; resets, jumps and meter "
        "noise missing).")
    register_unit: RegisterUnit = Field(
        "kWh", description="With --unit register: the unit the register counts in, kWh "
        "(default), Wh or MWh.")
    accept_level_change: bool = Field(
        False, description="Store a building's hours even when their median is 200 times above "
        "or below its stored hours' around them (refused by default as a unit mistake).")

    @model_validator(mode="after")
    def _register_unit_for_registers(self) -> ReadingsOptions:
        if self.register_unit != "kWh" and self.unit != "register":
            raise ValueError("--register-unit is the unit of a register (--unit register); "
                             "for the energy of each interval in Wh give --unit Wh")
        return self

    def factor(self, minutes: int) -> float:
        """What one value of the file is in kWh (a register's reading, with --unit register)."""
        if self.unit == "register":
            return _REGISTER_KWH[self.register_unit]
        return {"kWh": 1.0, "Wh": 1e-3, "kW": minutes / 60.0}[self.unit]


@dataclass(frozen=True, kw_only=True)
class ReadingsFindings:
    """What reading a meter export found: said by its batch and, once written, its summary."""

    interval_minutes: int
    partial_hours: int
    """Hours stored as missing because a sub-interval was blank while others had values."""
    implausible_values: int
    incomplete_hours: int = 0
    """Hours not written because a sub-interval is absent from the file."""
    registers: RegisterCounts | None = None
    """Rollovers, resets, jumps, noise and readings left out differencing a register; ``None``
    unless ``--unit register``."""


@dataclass(frozen=True, kw_only=True)
class ReadingsBatch(ReadingsFindings):
    """A checked meter export, summed to hours (``readings``: building_id, ts, kwh)."""

    path: str
    options: ReadingsOptions
    """How the file was read; its unit, ``--replace-range`` and ``--accept-level-change`` say
    how its hours are written."""
    readings: pa.Table
    building_ids: tuple[str, ...]
    rows_read: int
    read_seconds: float
    sub_hourly: pa.Table
    """The file's latest sub-hourly energies, each building's intra-hour shape
    (:func:`~tasks.warehouse.intra_hour.recent_sub_hourly`); empty for an hourly file."""


@dataclass(frozen=True, kw_only=True)
class ReadingsSummary(ReadingsFindings):
    """What a readings ingest wrote, and what reading its file found."""

    buildings: int
    readings: int
    missing_readings: int
    replaced: int
    start: datetime | None
    end: datetime | None
    seconds: float
    removed: int | None = None
    """Stored hours of the file's ranges that it does not hold, removed (``--replace-range``);
    ``None`` without it (nothing is removed)."""
    rescored: int = 0
    """Stored scores of forecasts whose readings the file changed, updated in place."""
    flags: FlagReport = FlagReport()
    """The hours judged implausible (kept, treated as missing until accepted)."""

    def line(self) -> str:
        minutes = self.interval_minutes
        notes = [f"{self.missing_readings:,} missing"]
        if self.partial_hours:
            notes.append(f"{self.partial_hours:,} with a blank {minutes}-minute value stored "
                         "as missing")
        if self.incomplete_hours:
            notes.append(f"{self.incomplete_hours:,} with a {minutes}-minute interval absent "
                         "from the file not written")
        if self.implausible_values:
            notes.append(f"{self.implausible_values:,} implausible value(s) stored as missing")
        if self.registers is not None:
            notes.append(self.registers.line())
        span = ("" if self.start is None or self.end is None else
                f", {self.start:%Y-%m-%d %H:%M} to {self.end:%Y-%m-%d %H:%M} UTC")
        every = "" if minutes == 60 else f" from {minutes}-minute readings"
        return (f"wrote {self.readings:,} hourly readings{every} ({'; '.join(notes)}) for "
                f"{self.buildings:,} building(s){span}, replacing {self.replaced:,} stored"
                f"{removed_note(self.removed)}{self.flags.note()}{rescored_note(self.rescored)}")


def _contract(source: SourceFile, requested: Layout) -> FileContract:
    """The contract of the file (``--layout``; ``auto``: long when there is a ``building_id``
    column), its header checked against it."""
    columns = source.columns
    values = [c for c in VALUE_COLUMNS if c in columns]
    if requested == "auto" and "building_id" not in columns and values:
        raise MalformedSourceError(
            f"{source.at.path}: a {values[0]!r} column but no 'building_id' column: a long "
            "file needs building_id, ts, kwh; a wide file has ts and one column per building "
            "id (give --layout wide if a building is really called that)")
    long = requested == "long" or requested == "auto" and "building_id" in columns
    contract = LONG_FILE if long else WIDE_FILE
    contract.check_header(source)
    return contract


def _differences(
    rows: SourceRows, frame: pd.DataFrame, minutes: int, options: ReadingsOptions,
    column: str | None, tally: Tally,
) -> tuple[pd.DataFrame, RegisterCounts]:
    """Register readings -> the energy of each interval, checked to be plausible energies
    (errors name the interval's first reading and the building's column, or ``column``)."""
    refuse_non_registers(rows.path, frame)
    energies, counts = difference_registers(frame, minutes)
    parts = []
    for building, part in energies.groupby("building_id", sort=False, observed=True):
        checked = check_column(pa.array(part["kwh"].to_numpy(float), from_pandas=True),
                               ENERGY_KWH, path=rows.path, column=column or building,
                               lines=rows.lines(part["row"].to_numpy()),
                               policy=options.implausible, tally=tally, label=rows.row_label)
        parts.append(part.assign(kwh=checked.to_numpy(zero_copy_only=False)))
    frame = pd.concat(parts, ignore_index=True) if parts else energies
    return frame, counts


def _instants(at: SourceRows, times: TimeReader, ts: pd.Series, codes: np.ndarray | None,
              buildings: pd.Series | None, options: ReadingsOptions) -> tuple[pd.Series, int]:
    """A file's timestamps (one per row) as UTC instants (wall-clock times, read only with
    --timezone: a building's repeated hours paired), and its interval in minutes, once they
    are known to lie on the interval's grid and no building repeats one."""
    ts = times.utc(at, ts, options.ambiguous, buildings, "building")
    minutes = infer_interval(at, ts, codes)
    check_on_grid(at, "ts", ts, minutes)
    if buildings is None:
        check_unique(at, "ts", ts, None, "the timestamp")
    else:
        check_unique(at, "ts", ts, buildings.to_frame("building_id"), "building {building_id!r}")
    return ts, minutes


def _energies(cells: Cells, columns: list[tuple[str, str]], factor: float,
              options: ReadingsOptions, tally: Tally) -> np.ndarray:
    """Every value column's numbers (``columns``: the contract's name and the file's) in kWh
    per interval (a register's reading, with ``--unit register``; NaN = missing), one column
    after the other (a wide file's buildings in turn) and a chunk of the file at a time, each
    let go once converted; implausible values are refused, or stored as missing and counted in
    ``tally``."""
    energy = replace(ENERGY, bound=REGISTER_KWH) if options.unit == "register" else ENERGY
    n = cells.rows
    kwh = np.empty(n * len(columns))
    for k, (key, column) in enumerate(columns):
        first = 0
        for chunk in cells.values.pop(key).chunks:
            values = energy.checked_numbers(chunk, replace(cells.at, first_row=first),
                                            scale=factor, policy=options.implausible,
                                            tally=tally, column=column)
            kwh[k * n + first:k * n + first + len(chunk)] = values.to_numpy(
                zero_copy_only=False) * factor
            first += len(chunk)
    return kwh


def load_readings(path: str | Path, options: ReadingsOptions | None = None) -> ReadingsBatch:
    """Read and check a meter export and sum it to hours; no warehouse involved."""
    began = time.perf_counter()
    options = options or ReadingsOptions()
    times = options.reader("ts", DAYS_AHEAD, "readings")
    with open_file(path, options, options.column_mapping()) as source:
        contract = _contract(source, options.layout)
        cells = contract.judge(source, times={"ts": times.read}, bounds=False)
    at, n, long = cells.at, cells.rows, contract is LONG_FILE
    codes = buildings = None
    if long:
        ids = cells.values.pop("building_id")
        codes = ids.indices.to_numpy(zero_copy_only=False)
        buildings = pd.Series(pd.Categorical.from_codes(codes, ids.dictionary.to_pylist()))
        columns = [("kwh", str(LONG_FILE.value_column("kwh", cells.columns)))]
    else:
        columns = [(name, name) for name in WIDE_FILE.other_columns(cells.columns)]
    ts, minutes = _instants(at, times, cells.times.pop("ts"), codes, buildings, options)
    tally = Tally()
    kwh = _energies(cells, columns, options.factor(minutes), options, tally)
    if not long:
        buildings = pd.Series(pd.Categorical.from_codes(
            np.repeat(np.arange(len(columns), dtype=np.int32), n), [c for c, _ in columns]))
        ts = pd.Series(np.tile(ts.to_numpy(dtype="datetime64[us]"), len(columns))
                       ).dt.tz_localize("UTC")
    frame = pd.DataFrame({"building_id": buildings, "ts": ts, "kwh": kwh})
    del kwh, buildings, ts
    registers = None
    if options.unit == "register":
        frame["row"] = np.tile(np.arange(n, dtype=np.int64), len(columns))
        frame, registers = _differences(at, frame, minutes, options,
                                        columns[0][1] if long else None, tally)
    else:
        refuse_registers(at.path, frame, minutes, options.unit)
    sub_hourly = recent_sub_hourly(frame, minutes)
    hours, partial, incomplete = sum_to_hours(frame, minutes)
    del frame
    readings = pa.Table.from_pandas(hours, schema=READINGS_SCHEMA, preserve_index=False)
    return ReadingsBatch(
        path=str(at.path), options=options, readings=readings,
        building_ids=tuple(sorted(str(b) for b in pd.unique(hours["building_id"]))),
        interval_minutes=minutes, rows_read=n, partial_hours=partial,
        implausible_values=tally.implausible, read_seconds=time.perf_counter() - began,
        incomplete_hours=incomplete, registers=registers, sub_hourly=sub_hourly)


_LEVELS_SQL = f"""
WITH f AS (
    SELECT building_id::VARCHAR AS building_id, min(ts) AS lo, max(ts) AS hi,
           median(kwh) AS level, count(kwh) AS hours
    FROM __wadiro_file_hours GROUP BY 1)
SELECT f.building_id, f.level, median(m.kwh) AS stored
FROM f JOIN meter_readings AS m ON m.building_id = f.building_id
     AND m.ts >= f.lo - INTERVAL {_LEVEL_WINDOW_DAYS} DAY
     AND m.ts <= f.hi + INTERVAL {_LEVEL_WINDOW_DAYS} DAY
     AND (m.ts < f.lo OR m.ts > f.hi)
WHERE f.hours >= {_LEVEL_MIN_HOURS}
GROUP BY f.building_id, f.level
HAVING count(m.kwh) >= {_LEVEL_MIN_HOURS}
ORDER BY f.building_id
"""


def _unit_fix(batch: ReadingsBatch, ratio: float) -> str:
    """The unit options that would fix hours ``ratio`` times too high (or low)."""
    if batch.options.unit == "register":
        return ("a register in Wh? give --register-unit Wh" if ratio > 1 else
                "a register in MWh? give --register-unit MWh")
    return ("energies in Wh? give --unit Wh" if ratio > 1 else
            "energies in kWh sent as Wh? leave --unit Wh out")


_NEW_METERS_SQL = """
SELECT building_id::VARCHAR, median(kwh) FROM __wadiro_file_hours AS f
WHERE NOT EXISTS (SELECT 1 FROM meter_readings AS m
                  WHERE m.building_id = f.building_id::VARCHAR AND m.kwh IS NOT NULL)
GROUP BY 1 HAVING median(kwh) > ? ORDER BY 1 LIMIT 1
"""


def _refuse_level_changes(con: duckdb.DuckDBPyConnection, batch: ReadingsBatch) -> None:
    """Refuse the first building whose file hours are :data:`LEVEL_CHANGE` times above or
    below its stored hours around them (both medians positive), or, without any stored
    reading, whose median is above :data:`NEW_METER_MAX_KWH`, naming the unit options."""
    if batch.options.accept_level_change:
        return
    con.register("__wadiro_file_hours", batch.readings)
    try:
        levels = con.execute(_LEVELS_SQL).fetchall()
        new_meter = con.execute(_NEW_METERS_SQL, [NEW_METER_MAX_KWH]).fetchall()
    finally:
        con.unregister("__wadiro_file_hours")
    if new_meter:
        building, level = new_meter[0]
        raise LevelChangeError(
            f"{batch.path}: building {building!r}: the file's median hour is {level:,.6g} kWh, "
            f"a {level / 1000:,.4g} MW average draw, and it has no stored readings to compare "
            f"them with: a unit mistake ({_unit_fix(batch, 2.0)}); give --accept-level-change "
            "if it really draws that much")
    for building, level, stored in levels:
        if not (level and stored and level > 0 and stored > 0):
            continue
        ratio = level / stored
        if 1 / LEVEL_CHANGE < ratio < LEVEL_CHANGE:
            continue
        fix = _unit_fix(batch, ratio)
        raise LevelChangeError(
            f"{batch.path}: building {building!r}: the file's median hour is {level:,.4g} kWh, "
            f"{ratio:,.3g} times the {stored:,.4g} kWh of its stored hours within "
            f"{_LEVEL_WINDOW_DAYS} days of the file's: a unit mistake ({fix}); give "
            "--accept-level-change if its level really changed")


def _by_buildings(readings: pa.Table) -> list[pa.Table]:
    """``readings`` (each building's hours together) in slices of about :data:`WRITE_ROWS`
    rows, every building whole in one slice: the warehouse matches each slice's hours against
    what it stores in memory of the slice's size, not the file's."""
    if readings.num_rows <= WRITE_ROWS:
        return [readings]
    ids = readings["building_id"]
    if not pa.types.is_dictionary(ids.type):
        ids = pc.dictionary_encode(ids)
    codes = ids.combine_chunks().indices.to_numpy(zero_copy_only=False)
    starts = np.r_[0, np.flatnonzero(codes[1:] != codes[:-1]) + 1]
    cuts, last = [0], 0
    for start in starts[1:]:
        if start - last >= WRITE_ROWS:
            cuts.append(int(start))
            last = start
    cuts.append(readings.num_rows)
    return [readings.slice(lo, hi - lo) for lo, hi in zip(cuts[:-1], cuts[1:], strict=True)]


def write_readings(con: duckdb.DuckDBPyConnection, batch: ReadingsBatch) -> ReadingsSummary:
    """Refuse building ids the warehouse does not know and hours a unit mistake made (see the
    module), then write the file's hours (or, with ``replace_range``, each building's range of
    hours) and its latest sub-hourly energies in one transaction."""
    began = time.perf_counter()
    ensure_schema(con)
    refuse_unknown_ids(con, batch.path, "building_id", batch.building_ids)
    _refuse_level_changes(con, batch)
    first, last = pc.min(batch.readings["ts"]).as_py(), pc.max(batch.readings["ts"]).as_py()
    replaced = removed = inserted = 0
    with transaction(con):
        for part in _by_buildings(batch.readings):
            written = write_key_hours(con, "meter_readings", part, "building_id",
                                      replace_range=batch.options.replace_range,
                                      own_transaction=False)
            replaced += written.replaced
            removed += written.removed
            inserted += written.inserted
        write_sub_hourly(con, batch.sub_hourly)
        flags = flag_new_hours(con, batch.readings)
        start, end = flags.span(first, last)
        rescored = rescore_forecasts(con, buildings=batch.building_ids, start=start, end=end)
    return ReadingsSummary(
        **{found.name: getattr(batch, found.name) for found in fields(ReadingsFindings)},
        buildings=len(batch.building_ids), readings=inserted,
        missing_readings=batch.readings["kwh"].null_count, replaced=replaced, start=first,
        end=last, seconds=batch.read_seconds + time.perf_counter() - began,
        removed=removed if batch.options.replace_range else None, rescored=rescored, flags=flags)
