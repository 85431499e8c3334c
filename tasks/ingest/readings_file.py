"""An operator's meter export (hourly or sub-hourly energy per building) into ``meter_readings``.

Two layouts, CSV or Parquet: long (:data:`LONG_FILE`: ``building_id, ts, kwh``, the value
column may be named ``value``) or wide (:data:`WIDE_FILE`: ``ts`` and one column per building
id); ``--layout auto`` takes a file with a ``building_id`` column as long. The file is judged
through its contract (:mod:`~tasks.ingest.contract`) a chunk at a time, each chunk's cells
becoming compact columns (a building's code, the instant, the energy) before the next is read,
so memory grows with the file's readings, not with its text. Timestamps follow
:mod:`~tasks.ingest.timestamps`; the grid, units and sub-hourly sums :mod:`~tasks.ingest.hourly`;
registers :mod:`~tasks.ingest.registers` (``--unit register`` needs ``--register-unit``: no unit
is assumed); every value must be a plausible energy (:mod:`~tasks.ingest.plausibility`), values
above any hour's judged once the file is known not to be a register (whose fix is not
``--implausible missing``), and ``--implausible missing`` is refused where it would make more
than :data:`EMPTIED_SHARE` of a building's values missing.

Incremental: only the hours the file holds change (an upsert), a blank cell making an hour
missing; a stored hour the file does not mention is never touched, whatever gap lies between
the file's rows. With ``replace_range`` (``--replace-range``) each building's stored hours from
its first to its last hour in the file are replaced instead, those the file lacks removed and
counted. Every building id must already be in ``buildings``. One transaction changes the hours,
the scores of stored forecasts over them (:mod:`~tasks.warehouse.rescoring`) and, for a
sub-hourly file, each building's latest :data:`~tasks.warehouse.intra_hour.KEEP_DAYS` days of
complete hours as they came (:mod:`~tasks.warehouse.intra_hour`: the intra-hour shape by which
``wadiro export`` splits hours into settlement periods); so re-ingesting a file, or a refused
one, changes nothing.

Before anything is written each building's level is judged, a unit mistake refused
(:mod:`~tasks.ingest.levels`).
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
    Intervals,
    check_on_grid,
    check_unique,
    infer_intervals,
    removed_note,
    sum_to_hours,
)
from tasks.ingest.levels import REGISTER_UNIT_KWH, refuse_implausible_levels
from tasks.ingest.plausibility import (
    ENERGY_KWH,
    REGISTER_KWH,
    ImplausibleValueError,
    Tally,
    check_column,
    implausible_error,
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
_UTC_TS = pa.timestamp("us", tz="UTC")
READINGS_SCHEMA = pa.schema([("building_id", pa.dictionary(pa.int32(), pa.string())),
                             ("ts", _UTC_TS), ("kwh", pa.float64())])
EMPTIED_SHARE = 0.5
"""``--implausible missing`` is refused when it would make more than this share of a
building's values missing: a forecast needs half its history's hours (the windows'
``min_fit_fraction``), so the building would silently go unforecast; a meter's glitches are
never most of its values, a wrong unit or a register sent as energy is."""
WRITE_ROWS = 1_000_000
"""Hours written to the warehouse per statement (whole buildings; one transaction for all)."""


class ReadingsOptions(HourlyFileOptions):
    """How to read a meter export (the options of ``wadiro ingest readings``)."""

    layout: Layout = Field(
        "auto", description="long (building_id, ts, kwh|value) or wide (ts, one column per "
        "building id); auto: long when there is a building_id column.")
    unit: EnergyUnit = Field(
        "kWh", description="kWh or Wh: energy of each interval; kW: average power over the "
        "interval (kWh = kW x interval in hours); register: a cumulative meter register, read at "
        "each timestamp, counting the unit --register-unit states (the differences are "
        "stored; rollovers bridged; resets, jumps and meter noise missing).")
    register_unit: RegisterUnit | None = Field(
        None, description="With --unit register, required: the unit the register counts in, "
        "kWh, Wh or MWh (a Wh register read as kWh would be stored 1,000 times too high).")
    accept_level_change: bool = Field(
        False, description="Store a building's hours even when their level is implausible: a "
        "median 200 times above or below its stored hours' around them, or, for a new meter, a "
        "mean ten times beyond its declared size's or the fleet's (refused by default as a "
        "unit mistake).")

    @model_validator(mode="after")
    def _register_unit_for_registers(self) -> ReadingsOptions:
        if self.register_unit is not None and self.unit != "register":
            raise ValueError("--register-unit is the unit of a register (--unit register); "
                             "for the energy of each interval in Wh give --unit Wh")
        return self

    @property
    def unit_unstated(self) -> bool:
        """A register whose unit is not given: read, then refused (naming the unit that looks
        right) before anything is written."""
        return self.unit == "register" and self.register_unit is None

    def factor(self, minutes: int | np.ndarray) -> float | np.ndarray:
        """What one value of the file is in kWh (a register's reading, with --unit register;
        its own number when its unit is not given); ``minutes`` the interval (an array: each
        row's, in a file whose buildings are read at different ones: so is a kW file's
        factor)."""
        if self.unit == "register":
            return 1.0 if self.register_unit is None else REGISTER_UNIT_KWH[self.register_unit]
        if self.unit == "kW":
            return minutes / 60.0
        return {"kWh": 1.0, "Wh": 1e-3}[self.unit]


@dataclass(frozen=True, kw_only=True)
class ReadingsFindings:
    """What reading a meter export found: said by its batch and, once written, its summary."""

    interval_minutes: int
    """The file's interval (its buildings' most common)."""
    partial_hours: int
    """Hours stored as missing because a sub-interval was blank while others had values."""
    implausible_values: int
    incomplete_hours: int = 0
    """Hours not written because a sub-interval is absent from the file."""
    registers: RegisterCounts | None = None
    """Rollovers, resets, jumps, noise and readings left out differencing a register; ``None``
    unless ``--unit register``."""
    building_intervals: tuple[tuple[int, int], ...] = ()
    """(interval in minutes, buildings read at it) of a file whose buildings are read at
    different intervals, shortest first; empty when they share ``interval_minutes``."""

    def every(self) -> str:
        """What the summary says of the file's interval: nothing for hourly readings."""
        if self.building_intervals:
            return " from " + ", ".join(f"{n:,} building(s)' {m}-minute"
                                        for m, n in self.building_intervals) + " readings"
        minutes = self.interval_minutes
        return "" if minutes == 60 else f" from {minutes}-minute readings"


@dataclass(frozen=True, kw_only=True)
class ReadingsBatch(ReadingsFindings):
    """A checked meter export, summed to hours (``readings``: building_id, ts, kwh)."""

    path: str
    options: ReadingsOptions
    """How the file was read; its unit, ``--replace-range`` and ``--accept-level-change`` say
    how its hours are written."""
    readings: pa.Table
    """kWh; a register's differences in its own unit when the unit is not given (refused
    before anything is written)."""
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
        minutes = ("sub-hourly" if self.building_intervals
                   else f"{self.interval_minutes}-minute")
        notes = [f"{self.missing_readings:,} missing"]
        if self.partial_hours:
            notes.append(f"{self.partial_hours:,} with a blank {minutes} value stored "
                         "as missing")
        if self.incomplete_hours:
            notes.append(f"{self.incomplete_hours:,} with a {minutes} interval absent "
                         "from the file not written")
        if self.implausible_values:
            notes.append(f"{self.implausible_values:,} implausible value(s) stored as missing")
        if self.registers is not None:
            notes.append(self.registers.line())
        span = ("" if self.start is None or self.end is None else
                f", {self.start:%Y-%m-%d %H:%M} to {self.end:%Y-%m-%d %H:%M} UTC")
        return (f"wrote {self.readings:,} hourly readings{self.every()} ({'; '.join(notes)}) for "
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
) -> tuple[pd.DataFrame, RegisterCounts, dict[str, int]]:
    """Register readings -> the energy of each interval, checked to be plausible energies
    (errors name the interval's first reading and the building's column, or ``column``; a
    register whose unit is not given is checked only to be finite and not negative), and how
    many of each building's energies ``--implausible missing`` made missing."""
    refuse_non_registers(rows.path, frame)
    energies, counts = difference_registers(frame, minutes)
    parts, dropped = [], {}
    for building, part in energies.groupby("building_id", sort=False, observed=True):
        values = pa.array(part["kwh"].to_numpy(float), from_pandas=True)
        checked = check_column(values, ENERGY_KWH, path=rows.path, column=column or building,
                               lines=rows.lines(part["row"].to_numpy()),
                               policy=options.implausible, tally=tally, label=rows.row_label,
                               ceiling=not options.unit_unstated)
        dropped[str(building)] = checked.null_count - values.null_count
        parts.append(part.assign(kwh=checked.to_numpy(zero_copy_only=False)))
    frame = pd.concat(parts, ignore_index=True) if parts else energies
    return frame, counts, dropped


def _instants(at: SourceRows, times: TimeReader, ts: pd.Series, codes: np.ndarray | None,
              buildings: pd.Series | None,
              options: ReadingsOptions) -> tuple[pd.Series, Intervals]:
    """A file's timestamps (one per row) as UTC instants (wall-clock times, read only with
    --timezone: a building's repeated hours paired), and its buildings' intervals, once they
    are known to lie on their interval's grid and no building repeats one."""
    ts = times.utc(at, ts, options.ambiguous, buildings, "building")
    intervals = infer_intervals(at, ts, buildings)  # indexed by the buildings' codes
    check_on_grid(at, "ts", ts, intervals.per_row(codes))
    if buildings is None:
        check_unique(at, "ts", ts, None, "the timestamp")
    else:
        check_unique(at, "ts", ts, buildings.to_frame("building_id"), "building {building_id!r}")
    return ts, intervals


def _energies(cells: Cells, columns: list[tuple[str, str]], factor: float | np.ndarray,
              options: ReadingsOptions, tally: Tally) -> tuple[np.ndarray, np.ndarray | None]:
    """Every value column's numbers (``columns``: the contract's name and the file's) in kWh
    per interval (a register's reading, with ``--unit register``; NaN = missing), one column
    after the other (a wide file's buildings in turn) and a chunk of the file at a time, each
    let go once converted; implausible values are refused, or stored as missing and counted in
    ``tally`` and, under ``--implausible missing``, marked in the second array. Energies above
    any hour's are left for :func:`_check_ceiling`, once the file is known not to be a
    register. ``factor`` is an array (each row's) for a long kW file whose buildings are read
    at different intervals: its powers are judged as the energy of an hour at that power."""
    register = options.unit == "register"
    bound = REGISTER_KWH if register else ENERGY_KWH
    n = cells.rows
    kwh = np.empty(n * len(columns))
    dropped = np.zeros(kwh.size, dtype=bool) if options.implausible == "missing" else None
    for k, (key, column) in enumerate(columns):
        first = 0
        for chunk in cells.values.pop(key).chunks:
            at = replace(cells.at, first_row=first)
            lo, hi = k * n + first, k * n + first + len(chunk)
            scale = factor if np.ndim(factor) == 0 else factor[lo:hi]
            values = check_column(chunk, bound, path=at.path, column=column,
                                  lines=at.lines(np.arange(len(chunk))),
                                  scale=scale if np.ndim(scale) == 0 else 1.0,
                                  policy=options.implausible, tally=tally, label=at.row_label,
                                  ceiling=register)
            kwh[lo:hi] = values.to_numpy(zero_copy_only=False) * scale
            if dropped is not None and values.null_count > chunk.null_count:
                dropped[lo:hi] = (pc.is_null(values).to_numpy(zero_copy_only=False)
                                  & chunk.is_valid().to_numpy(zero_copy_only=False))
            first += len(chunk)
    return kwh, dropped


def _check_ceiling(at: SourceRows, frame: pd.DataFrame, n: int, columns: list[tuple[str, str]],
                   factor: float | np.ndarray, options: ReadingsOptions, tally: Tally,
                   dropped: np.ndarray | None) -> pd.DataFrame:
    """Energies above :data:`~tasks.ingest.plausibility.ENERGY_KWH`'s top (``frame``'s rows
    are the file's, a wide file's columns one after the other, ``n`` rows each), judged once
    the file is known not to be a register (whose readings are above it, and whose fix is
    ``--unit register``): refused naming the first one's line, or stored as missing."""
    kwh = frame["kwh"].to_numpy()
    with np.errstate(invalid="ignore"):
        over = kwh > ENERGY_KWH.high + ENERGY_KWH.above
    if not over.any():
        return frame
    if options.implausible == "refuse":
        first = int(np.flatnonzero(over)[0])
        k = first // n
        rows = np.flatnonzero(over[k * n:(k + 1) * n])
        scale = float(factor if np.ndim(factor) == 0 else factor[first])
        raise implausible_error(at.path, at.row_label, int(at.lines(rows[:1])[0]),
                                columns[k][1], float(kwh[first] / scale), ENERGY_KWH,
                                rows.size, scale)
    tally.implausible += int(over.sum())
    if dropped is not None:
        dropped |= over
    return frame.assign(kwh=np.where(over, np.nan, kwh))


def _refuse_emptied(path: Path, buildings: pd.Series, dropped: np.ndarray, kwh: np.ndarray,
                    options: ReadingsOptions, more: dict[str, int] | None = None) -> None:
    """Refuse ``--implausible missing`` where it would make more than :data:`EMPTIED_SHARE`
    of a building's values missing (``dropped``, aligned with ``buildings`` and its values
    ``kwh``; ``more``: a register's energies it made missing, by building)."""
    lost = pd.Series(dropped).groupby(buildings.to_numpy(), observed=True).sum()
    held = pd.Series(dropped | ~np.isnan(kwh)).groupby(buildings.to_numpy(), observed=True).sum()
    lost = lost.add(pd.Series(more or {}, dtype=float), fill_value=0).reindex(held.index)
    emptied = lost[(lost > 0) & (lost > EMPTIED_SHARE * held)]
    if emptied.empty:
        return
    building = str(emptied.index[0])
    fix = ("--register-unit kWh|Wh|MWh, or energies without --unit register"
           if options.unit == "register"
           else "--unit Wh, kW, or register with --register-unit kWh|Wh|MWh")
    raise ImplausibleValueError(
        f"{path}: building {building!r}: --implausible missing would store "
        f"{int(min(emptied.iloc[0], held[building])):,} of its {int(held[building]):,} values "
        f"as missing (more than {EMPTIED_SHARE:.0%}): they are not what its unit says; fix the "
        f"file or its unit ({fix}); nothing was written")


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
    ts, intervals = _instants(at, times, cells.times.pop("ts"), codes, buildings, options)
    tally = Tally()
    factor = options.factor(intervals.per_row(codes))
    kwh, dropped = _energies(cells, columns, factor, options, tally)
    if not long:
        buildings = pd.Series(pd.Categorical.from_codes(
            np.repeat(np.arange(len(columns), dtype=np.int32), n), [c for c, _ in columns]))
        ts = pd.Series(np.tile(ts.to_numpy(dtype="datetime64[us]"), len(columns))
                       ).dt.tz_localize("UTC")
    frame = pd.DataFrame({"building_id": buildings, "ts": ts, "kwh": kwh})
    del kwh, buildings, ts
    if options.unit == "register":
        frame["row"] = np.tile(np.arange(n, dtype=np.int64), len(columns))
    else:  # a register sent as energies is named as one before any energy is judged too high
        for minutes, part in _by_interval(frame, intervals):
            refuse_registers(at.path, part, minutes, options.unit)
        frame = _check_ceiling(at, frame, n, columns, factor, options, tally, dropped)
    parts = [_to_hours(at, part, minutes, options, columns[0][1] if long else None, tally)
             for minutes, part in _by_interval(frame, intervals)]
    if dropped is not None and tally.implausible:
        more = {b: k for part in parts for b, k in part.dropped.items()}
        _refuse_emptied(at.path, frame["building_id"], dropped, frame["kwh"].to_numpy(),
                        options, more if options.unit == "register" else None)
    del frame
    hours = pd.concat([part.hours for part in parts], ignore_index=True)
    readings = pa.Table.from_pandas(hours, schema=READINGS_SCHEMA, preserve_index=False)
    counts = [part.registers for part in parts if part.registers is not None]
    mixed = (tuple((m, int((intervals.by_code == m).sum()))
                   for m in np.unique(intervals.by_code)) if intervals.mixed else ())
    return ReadingsBatch(
        path=str(at.path), options=options, readings=readings,
        building_ids=tuple(sorted(str(b) for b in pd.unique(hours["building_id"]))),
        interval_minutes=intervals.minutes, rows_read=n,
        partial_hours=sum(part.partial for part in parts),
        implausible_values=tally.implausible, read_seconds=time.perf_counter() - began,
        incomplete_hours=sum(part.incomplete for part in parts),
        registers=RegisterCounts.total(counts) if counts else None,
        sub_hourly=pa.concat_tables([part.sub_hourly for part in parts]),
        building_intervals=mixed)


@dataclass(frozen=True)
class _IntervalHours:
    """The hours of a file's buildings read at one interval (:func:`_to_hours`)."""

    hours: pd.DataFrame
    partial: int
    incomplete: int
    sub_hourly: pa.Table
    registers: RegisterCounts | None
    dropped: dict[str, int]
    """A register's energies ``--implausible missing`` made missing, by building."""


def _by_interval(frame: pd.DataFrame,
                 intervals: Intervals) -> list[tuple[int, pd.DataFrame]]:
    """``frame``'s rows by their building's interval (the whole frame where the buildings
    share one): each is summed to hours by its own."""
    if not intervals.mixed:
        return [(intervals.minutes, frame)]
    own = intervals.by_code[frame["building_id"].cat.codes.to_numpy()]
    return [(int(m), frame[own == m]) for m in np.unique(own)]


def _to_hours(at: SourceRows, frame: pd.DataFrame, minutes: int, options: ReadingsOptions,
              column: str | None, tally: Tally) -> _IntervalHours:
    """The hours of ``frame``'s buildings, all read every ``minutes``: a register's readings
    differenced first (``column``: a long file's value column, named in its errors)."""
    registers, dropped = None, {}
    if options.unit == "register":
        frame, registers, dropped = _differences(at, frame, minutes, options, column, tally)
    sub_hourly = recent_sub_hourly(frame, minutes)
    hours, partial, incomplete = sum_to_hours(frame, minutes)
    return _IntervalHours(hours, partial, incomplete, sub_hourly, registers, dropped)


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
    refuse_implausible_levels(con, batch.path, batch.readings, batch.options)
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
