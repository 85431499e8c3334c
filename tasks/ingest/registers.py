"""Cumulative meter registers: recognising one sent as energy, and differencing one sent as such.

A register is the meter's running total (kWh) read at an instant, not the energy of an
interval: stored as load, 123,496 ... 125,376 kWh would be a building drawing a thousand times
what it does. So a series that looks like one is refused (:func:`refuse_registers`), naming the
fix: ``--unit register``, which stores the differences (:func:`difference_registers`).

*Looks like a register* (every condition, on one building's readings in time order): at least
:data:`MIN_READINGS` readings spanning at least a day; it never falls, except at most once per
100 steps (a rollover or a reset); it rises in at least half of its steps; and its median
reading is at least :data:`LEVEL_RATIO` times its median rise, i.e. the readings are more than
100 intervals' consumption above zero. A building's load has a daily cycle, so it falls within
any day; a stuck meter (a flat line) does not rise.

*Differences.* Timestamps label the start of an interval, so the energy of the interval that
starts at a reading is the next reading minus this one, when the next reading is one interval
later: a reading whose next one is absent from the file (the file's last, or one before a gap)
starts no interval that can be known, and is not written; a blank reading makes both intervals
it bounds missing. A fall is a *rollover* when the register wrapped at its capacity, the power
of ten above the series' largest reading (999,950 then 30 on a 6-digit register: 80 kWh), and
the wrapped difference is at most :data:`ROLLOVER_RATIO` times the series' median rise; any
other fall is a *reset* (a replaced meter, a register set back): the energy of that interval
cannot be known and it is stored as missing.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from wadiro_fleet.tasks.ingest.errors import MalformedSourceError
from wadiro_fleet.tasks.ingest.hourly import _epoch_us

__all__ = [
    "LEVEL_RATIO",
    "MIN_READINGS",
    "ROLLOVER_RATIO",
    "RegisterCounts",
    "RegisterReadingsError",
    "difference_registers",
    "refuse_registers",
]

MIN_READINGS = 24
"""Readings a series needs (spanning a day at least) before it can look like a register."""
LEVEL_RATIO = 100.0
"""A register's median reading is at least this many times its median rise."""
ROLLOVER_RATIO = 10.0
"""A fall is a rollover when the wrapped difference is at most this many times the median rise."""
_US_PER_HOUR = 3_600_000_000


class RegisterReadingsError(MalformedSourceError):
    """Readings that are a cumulative meter register, sent as the energy of each interval."""


@dataclass(frozen=True)
class RegisterCounts:
    """What differencing a file's registers met."""

    rollovers: int = 0
    """Falls taken as the register wrapping at a power of ten (their difference is stored)."""
    resets: int = 0
    """Falls taken as a reset or a replaced meter (their interval is stored as missing)."""


def _sorted(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with each building's rows together and in time order (as a file usually has
    them already: then it is not sorted again)."""
    codes = pd.factorize(frame["building_id"])[0]
    ts = _epoch_us(frame["ts"])
    same = codes[1:] == codes[:-1]
    if np.all(codes[1:] >= codes[:-1]) and np.all(ts[1:][same] > ts[:-1][same]):
        return frame.reset_index(drop=True)
    return frame.iloc[np.lexsort((ts, codes))].reset_index(drop=True)


def refuse_registers(path: Path, frame: pd.DataFrame, minutes: int) -> None:
    """Raise :class:`RegisterReadingsError` for the first building of ``frame``
    (``building_id``, ``ts``, ``kwh`` per interval, NaN = missing) whose readings look like a
    cumulative register; nothing for a file of ordinary readings."""
    valued = _sorted(frame[frame["kwh"].notna()])
    if len(valued) < MIN_READINGS:
        return
    codes = pd.factorize(valued["building_id"])[0]
    values = valued["kwh"].to_numpy(float)
    ts = _epoch_us(valued["ts"])
    steps = np.diff(values)
    within = codes[1:] == codes[:-1]
    groups = codes.max() + 1
    n = np.bincount(codes, minlength=groups)
    falls = np.bincount(codes[1:][within & (steps < 0)], minlength=groups)
    rises = np.bincount(codes[1:][within & (steps > 0)], minlength=groups)
    first = np.r_[0, np.flatnonzero(~within) + 1]
    last = np.r_[first[1:] - 1, len(codes) - 1]
    span_h = (ts[last] - ts[first]) / _US_PER_HOUR
    candidates = np.flatnonzero((n >= MIN_READINGS) & (span_h >= MIN_READINGS - 1)
                                & (falls <= (n - 1) // 100) & (2 * rises >= n - 1))
    for group in candidates:
        series = values[first[group]:last[group] + 1]
        up = np.diff(series)
        up = up[up > 0]
        if np.median(series) >= LEVEL_RATIO * np.median(up):
            building = valued["building_id"].iloc[first[group]]
            raise RegisterReadingsError(
                f"{path}: building {building!r}: its {series.size:,} readings rise steadily from "
                f"{series[0]:,.6g} to {series[-1]:,.6g} kWh (a median rise of {np.median(up):.4g} "
                f"kWh per {minutes}-minute interval): a cumulative meter register, not the energy "
                "of each interval; give --unit register to store the differences")


def _capacity(largest: float) -> float:
    """Where a register whose largest reading is ``largest`` wraps: the power of ten above it."""
    return 10.0 ** max(1, len(str(int(largest))))


def difference_registers(frame: pd.DataFrame, minutes: int) -> tuple[pd.DataFrame, RegisterCounts]:
    """Register readings (``building_id``, ``ts``, ``kwh`` = the register, NaN = blank, and any
    other columns, e.g. the file's line) -> the energy of each interval they bound, labelled
    at its start, with the other columns of its start reading; see the module's rules."""
    frame = _sorted(frame)
    values = frame["kwh"].to_numpy(float)
    ts = _epoch_us(frame["ts"])
    codes = pd.factorize(frame["building_id"])[0]
    bounded = (codes[1:] == codes[:-1]) & (np.diff(ts) == minutes * 60_000_000)
    energy = values[1:] - values[:-1]
    rises = energy[bounded & (energy > 0)]
    typical = np.full(codes.max() + 1 if codes.size else 0, np.nan)
    if rises.size:
        medians = pd.Series(rises).groupby(codes[1:][bounded & (energy > 0)]).median()
        typical[medians.index.to_numpy()] = medians.to_numpy()
    largest = pd.Series(values).groupby(codes).max().to_numpy() if codes.size else typical
    rollovers = resets = 0
    for i in np.flatnonzero(bounded & (energy < 0)):
        rolled = _capacity(largest[codes[i]]) - values[i] + values[i + 1]
        if rolled <= ROLLOVER_RATIO * typical[codes[i]]:  # False when no rise is known
            energy[i] = rolled
            rollovers += 1
        else:
            energy[i] = np.nan
            resets += 1
    starts = frame.iloc[np.flatnonzero(bounded)].copy()
    starts["kwh"] = energy[bounded]
    return starts.reset_index(drop=True), RegisterCounts(rollovers, resets)
