"""Whether a meter export's levels are plausible: a unit mistake caught before it is written.

Before anything is written each building's **level** is judged (one aggregate over the file's
hours and the stored ones around them): a register whose unit is not given is refused, naming
the unit its rise per hour makes plausible when only one does; a building whose file hours
have a median :data:`LEVEL_CHANGE` times above or below its stored hours' around them (four
weeks either side) is refused; and a *new meter* (fewer than 24 stored hours around them)
whose mean hour is ten times beyond its yardstick (:mod:`~tasks.protocol.plausible_level`: its
declared size and type, else the fleet's established buildings, else :data:`LARGEST_SITES`) is
refused. Each refusal names the level, what it was judged against and the likely fix (a unit
option when a factor of 1,000 explains it: a register in Wh sent as kWh is stored 1,000 times
too high), unless ``--accept-level-change`` says the level is real.

The fleet's established buildings are those the bid check judges a new building against too
(:func:`~tasks.warehouse.hours.fleet_levels`), over the latest :data:`_LEVEL_WINDOW_DAYS` days
of stored readings and leaving out the file's own new meters. The file is read by
:mod:`~tasks.ingest.readings_file`, which calls :func:`refuse_implausible_levels`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Protocol

import duckdb
import pyarrow as pa

from tasks.ingest.errors import MalformedSourceError
from tasks.ingest.registers import RegisterReadingsError
from tasks.protocol.plausible_level import (
    MIN_FLEET,
    ORDER_OF_MAGNITUDE,
    Yardstick,
    declared_yardstick,
    figure,
    fleet_yardstick,
    history_yardstick,
)
from tasks.warehouse.hours import fleet_levels

REGISTER_UNIT_KWH = {"kWh": 1.0, "Wh": 1e-3, "MWh": 1e3}
"""The kWh of one unit a register counts in (``--register-unit``)."""
LEVEL_CHANGE = 200.0
"""A building's file hours whose median is this many times above (or below) the median of its
stored hours around them are refused as a unit mistake (1,000 for Wh read as kWh)."""
NEW_METER_MAX_KWH = 10_000.0
"""A new meter (too few stored hours near the file's to compare with) that has neither a
declared size nor a fleet to be judged against is refused when its median hour is above this
(a 10 MW average draw, more than all but the largest sites): a register in Wh read as kWh (40
kWh an hour stored as 40,000). The yardstick of last resort (:data:`LARGEST_SITES`), judging
the median as it always did (one odd hour of a short file does not refuse it)."""
LARGEST_SITES = Yardstick(0.0, NEW_METER_MAX_KWH / ORDER_OF_MAGNITUDE,
                          f"any but the largest sites (no declared size and type, and fewer "
                          f"than {MIN_FLEET} established buildings)")
FLEET_MIN_HOURS = 168
"""An established building of the fleet has a week of usable readings in its latest
:data:`_LEVEL_WINDOW_DAYS` days (a level over every day of the week)."""
_LEVEL_WINDOW_DAYS = 28
_LEVEL_MIN_HOURS = 24
_HOUR = timedelta(hours=1)


class LevelChangeError(MalformedSourceError):
    """A file whose energies are a thousand times (or a thousandth of) what is stored."""


class LevelOptions(Protocol):
    """How a file's values were read, as far as judging their level needs it (the file's
    :class:`~tasks.ingest.readings_file.ReadingsOptions`)."""

    @property
    def unit(self) -> str:
        """``--unit``: kWh, Wh, kW or register."""

    @property
    def register_unit(self) -> str | None:
        """``--register-unit``, a key of :data:`REGISTER_UNIT_KWH` (``None``: not given)."""

    @property
    def unit_unstated(self) -> bool:
        """A register whose unit is not given."""

    @property
    def accept_level_change(self) -> bool:
        """``--accept-level-change``: the level is real."""


_LEVELS_SQL = f"""
WITH f AS (
    SELECT building_id::VARCHAR AS building_id, min(ts) AS lo, max(ts) AS hi,
           median(kwh) AS median, avg(kwh) AS mean, count(kwh) AS hours
    FROM __wadiro_file_hours
    WHERE building_id::VARCHAR IN (SELECT unnest(?::VARCHAR[])) GROUP BY 1),
s AS (
    SELECT f.building_id, median(m.kwh) AS median, avg(m.kwh) AS mean, count(m.kwh) AS hours
    FROM f JOIN meter_readings AS m ON m.building_id = f.building_id
         AND m.ts >= f.lo - INTERVAL {_LEVEL_WINDOW_DAYS} DAY
         AND m.ts <= f.hi + INTERVAL {_LEVEL_WINDOW_DAYS} DAY
         AND (m.ts < f.lo OR m.ts > f.hi)
    GROUP BY 1)
SELECT f.building_id, f.median, f.mean, f.hours, s.median, s.mean, coalesce(s.hours, 0)
FROM f LEFT JOIN s USING (building_id)
ORDER BY f.building_id
"""
_DECLARED_SQL = """
SELECT building_id, building_type, floor_area_m2 FROM buildings
WHERE building_id IN (SELECT unnest(?::VARCHAR[]))
"""


@dataclass(frozen=True)
class _Level:
    """A building of the file: the median and mean of its file hours (kWh; a register's own
    unit when it is not given) and how many hold a value, and the same of its stored hours
    within :data:`_LEVEL_WINDOW_DAYS` days of them (outside their span)."""

    building_id: str
    median: float | None
    mean: float | None
    hours: int
    stored_median: float | None
    stored_mean: float | None
    stored_hours: int

    @property
    def new(self) -> bool:
        """Too few stored hours near the file's to compare them with: a new meter."""
        return self.stored_hours < _LEVEL_MIN_HOURS


@dataclass(frozen=True)
class _Judged:
    """What a building's level is judged against, and whether that is its declared size."""

    yardstick: Yardstick
    declared: bool = False

    def level(self, level: _Level) -> tuple[float | None, str]:
        """The statistic of the building's file hours judged, and its name: the mean, but the
        median against :data:`LARGEST_SITES` (the old guard's, unchanged)."""
        if self.yardstick is LARGEST_SITES:
            return level.median, "a median"
        return level.mean, "a mean"


LEVEL_ROWS = 1_000_000
"""File hours judged in one aggregate: a median holds every value of its group, so a large
file's buildings are judged a slice of whole buildings at a time (a 182 MB file's in one went
from 408 to 782 MB resident)."""


def _slices(con: duckdb.DuckDBPyConnection) -> list[list[str]]:
    """The registered file hours' buildings in slices of about :data:`LEVEL_ROWS` hours."""
    slices, chosen, rows = [], [], 0
    for building_id, count in con.execute(
            "SELECT building_id::VARCHAR, count(*) FROM __wadiro_file_hours "
            "GROUP BY 1 ORDER BY 1").fetchall():
        chosen.append(building_id)
        rows += count
        if rows >= LEVEL_ROWS:
            slices.append(chosen)
            chosen, rows = [], 0
    return slices + ([chosen] if chosen else [])


def _levels(con: duckdb.DuckDBPyConnection, readings: pa.Table) -> list[_Level]:
    """Every building of the file's hours' (``readings``) :class:`_Level`, one aggregate per
    slice of whole buildings (:data:`LEVEL_ROWS`; the file's rows are filtered as they are
    scanned, never copied), in building order."""
    con.register("__wadiro_file_hours", readings)
    try:
        return [_Level(*row) for chosen in _slices(con)
                for row in con.execute(_LEVELS_SQL, [chosen]).fetchall()]
    finally:
        con.unregister("__wadiro_file_hours")


def _fleet(con: duckdb.DuckDBPyConnection, leave_out: list[str]) -> Yardstick | None:
    """The fleet's yardstick: each established building's mean usable hour (at least
    :data:`FLEET_MIN_HOURS`) over the :data:`_LEVEL_WINDOW_DAYS` days of hours up to the
    latest stored reading's (the last of them), but those of ``leave_out`` (the file's new
    meters), in one aggregate."""
    # Two statements: the latest reading first, then the aggregate over bound hours (one
    # statement with max(ts) in a CTE took 1.3 s on 50M rows instead of 0.07 s). Stored
    # instants start hours, so [latest + 1 h - 28 days, latest + 1 h) is (latest - 28 days,
    # latest]: the latest hour and the 671 before it.
    latest = con.execute("SELECT max(ts) FROM meter_readings").fetchone()[0]
    if latest is None:
        return None
    end = latest + _HOUR
    return fleet_yardstick(fleet_levels(con, end - timedelta(days=_LEVEL_WINDOW_DAYS), end,
                                        FLEET_MIN_HOURS, leave_out=leave_out))


def _yardsticks(con: duckdb.DuckDBPyConnection, levels: list[_Level]) -> dict[str, _Judged]:
    """What each building of ``levels`` is judged against: its stored hours near the file's
    when it has them; a new meter its declared size and type, else the fleet (read only when
    a new meter has no declared size), else :data:`LARGEST_SITES`."""
    judged = {level.building_id: _Judged(stick) for level in levels if not level.new
              and (stick := history_yardstick(level.stored_mean)) is not None}
    new = [level.building_id for level in levels if level.new]
    if not new:
        return judged
    declared = {building: stick for building, kind, area in
                con.execute(_DECLARED_SQL, [new]).fetchall()
                if (stick := declared_yardstick(kind, area)) is not None}
    fleet = _fleet(con, new) if len(declared) < len(new) else None
    for building in new:
        judged[building] = (_Judged(declared[building], declared=True) if building in declared
                            else _Judged(fleet or LARGEST_SITES))
    return judged


_SMALLER = {"MWh": "kWh", "kWh": "Wh"}
"""A register's unit and the one 1,000 times smaller (a level 1,000 times too high)."""
_LARGER = {"Wh": "kWh", "kWh": "MWh"}
_ENERGY_FIX = {
    ("kWh", True): "energies in Wh? give --unit Wh",
    ("Wh", False): "energies in kWh sent as Wh? leave --unit Wh out",
    ("kWh", False): "energies in MWh? multiply them by 1,000 (there is no --unit MWh)",
    ("kW", True): "power in W? divide it by 1,000 (there is no --unit W)",
    ("kW", False): "power in MW? multiply it by 1,000 (there is no --unit MW)",
}
"""(--unit, the level 1,000 times too high) -> the fix."""


def _unit_fix(options: LevelOptions, too_high: bool) -> str | None:
    """The unit option that would fix hours 1,000 times too high (or low), ``None`` when no
    option would."""
    if options.unit == "register":
        unit = (_SMALLER if too_high else _LARGER).get(options.register_unit or "kWh")
        return None if unit is None else f"a register in {unit}? give --register-unit {unit}"
    return _ENERGY_FIX.get((options.unit, too_high))


def _refuse_level_changes(path: str, options: LevelOptions, levels: list[_Level]) -> None:
    """Refuse the first building whose file hours are :data:`LEVEL_CHANGE` times above or
    below its stored hours around them (both medians positive), naming the unit options."""
    for level in levels:
        if level.new or level.hours < _LEVEL_MIN_HOURS:
            continue
        file, stored = level.median, level.stored_median
        if not (file and stored and file > 0 and stored > 0):
            continue
        ratio = file / stored
        if 1 / LEVEL_CHANGE < ratio < LEVEL_CHANGE:
            continue
        fix = _unit_fix(options, ratio > 1)
        raise LevelChangeError(
            f"{path}: building {level.building_id!r}: the file's median hour is "
            f"{figure(file)} kWh, {figure(float(f'{ratio:.3g}'))} times the {figure(stored)} "
            f"kWh of its stored hours within {_LEVEL_WINDOW_DAYS} days of the file's: "
            + (f"a unit mistake ({fix})" if fix else "check the file's values and unit")
            + "; give --accept-level-change if its level really changed")


def _new_meter_fix(options: LevelOptions, judged: _Judged, level: float) -> str:
    """What fixes a new meter's implausible ``level``: a unit option when a factor of 1,000
    makes it plausible, else the file or the building's declared size."""
    slip = judged.yardstick.unit_slip(level)
    fix = None if slip is None else _unit_fix(options, slip < 1)
    if fix is not None:
        return f"a unit mistake ({fix})"
    if judged.declared:
        return "check the file and the building's declared floor_area_m2 and building_type"
    return ("check the file, or declare the building's floor_area_m2 and building_type in "
            "the buildings file")


def _refuse_new_meters(con: duckdb.DuckDBPyConnection, path: str, options: LevelOptions,
                       levels: list[_Level]) -> None:
    """Refuse the first new meter whose mean hour is implausible against its declared size
    and type, else the fleet, else :data:`LARGEST_SITES`, naming the likely fix."""
    new = [level for level in levels if level.new and level.mean is not None]
    if not new:
        return
    judged = _yardsticks(con, new)
    for level in new:
        this = judged[level.building_id]
        value, what = this.level(level)
        why = this.yardstick.judge(value, what)
        if why is None:
            continue
        raise LevelChangeError(
            f"{path}: building {level.building_id!r} is new (fewer than "
            f"{_LEVEL_MIN_HOURS} stored readings within {_LEVEL_WINDOW_DAYS} days of the "
            f"file's hours): {why}: {_new_meter_fix(options, this, value)}; give "
            "--accept-level-change if its level is real")


def _unit_hint(levels: list[_Level], judged: dict[str, _Judged]) -> str:
    """Which register unit looks right: the one unit that makes every judged building's level
    plausible while each other unit makes one implausible, said with an example building;
    nothing when no unit or several do."""
    pairs = [(level, judged[level.building_id]) for level in levels
             if level.mean is not None and level.building_id in judged]

    def fits(unit: str, level: _Level, this: _Judged) -> bool:
        return this.yardstick.judge(this.level(level)[0] * REGISTER_UNIT_KWH[unit]) is None

    plausible = [u for u in REGISTER_UNIT_KWH if all(fits(u, lv, st) for lv, st in pairs)]
    if not pairs or len(plausible) != 1:
        return ""
    unit = plausible[0]
    others = [u for u in REGISTER_UNIT_KWH if u != unit]
    level, this = next(((lv, st) for lv, st in pairs
                        if not any(fits(u, lv, st) for u in others)), pairs[0])
    alone = not any(fits(u, level, this) for u in others)
    value, what = this.level(level)
    return (f"; {unit} looks right: the register of building {level.building_id!r} rises by "
            f"{what} of {figure(value)} an hour, {figure(value * REGISTER_UNIT_KWH[unit])} "
            f"kWh/h in {unit}, plausible against {this.yardstick.typical()}, the level of "
            f"{this.yardstick.source}, where {' and '.join(others)} are not"
            + ("" if alone else " for every building of the file"))


def refuse_implausible_levels(con: duckdb.DuckDBPyConnection, path: str, readings: pa.Table,
                              options: LevelOptions) -> None:
    """Refuse a register whose unit is not given (naming the unit its buildings' levels make
    plausible), and, unless ``--accept-level-change``, a building whose level a unit mistake
    made: one whose stored hours around the file's it is :data:`LEVEL_CHANGE` times off, or
    a new meter ten times beyond its yardstick (:mod:`~tasks.protocol.plausible_level`).
    ``readings``: the file's hours (building_id, ts, kwh), read from ``path`` as ``options``
    say."""
    if options.accept_level_change and not options.unit_unstated:
        return
    levels = _levels(con, readings)
    if options.unit_unstated:
        raise RegisterReadingsError(
            f"{path}: --unit register needs the unit the register counts in: give "
            f"--register-unit kWh|Wh|MWh{_unit_hint(levels, _yardsticks(con, levels))}; "
            "nothing was written")
    _refuse_level_changes(path, options, levels)
    _refuse_new_meters(con, path, options, levels)
