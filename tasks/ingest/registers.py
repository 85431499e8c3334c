"""Cumulative meter registers: recognising one sent as energy, and differencing one sent as such.

A register is the meter's running total (kWh, Wh or MWh) read at an instant, not the energy of
an interval: stored as load, 123,496 ... 125,376 kWh would be a building drawing a thousand
times what it does. So a series that looks like one is refused (:func:`refuse_registers`),
naming the fix: ``--unit register`` with the unit it counts in (``--register-unit``), which
stores the differences (:func:`difference_registers`); and a
series sent with ``--unit register`` that is plainly the energy of each interval is refused too
(:func:`refuse_non_registers`), naming the building.

*Steps.* Each step of a series (one reading to the next) is measured against the series'
*median rise* (the median of its steps up):

* a fall is a *rollover* when the register wrapped at its capacity, the power of ten above the
  series' largest reading (999,950 then 30 on a 6-digit register: 80 kWh), and the wrapped
  difference is at most :data:`ROLLOVER_RATIO` times the median rise and at most a tenth of the
  capacity (the reading before it was in the register's top tenth);
* any other fall no larger than :data:`NOISE_RATIO` times the median rise is *meter noise* (a
  register read a little back: 180.0 then 179.9);
* any other fall is a *reset* (a replaced meter reading lower, a register set back);
* a rise over :data:`JUMP_RATIO` times the median rise is a *jump* (a meter swapped for one
  reading higher, a register set forward): no building draws a hundred times its usual hour.

*Looks like a register* (every condition, on one building's readings in time order): at least
:data:`MIN_READINGS` readings spanning at least a day; it rises (or rolls over) in at least half
of its steps; it falls by meter noise in at most :data:`NOISE_SHARE` of its steps (at least
two allowed) and is reset at most once per 100 steps; and its median reading (a rollover
unwrapped) is at least :data:`LEVEL_RATIO` times its median rise, i.e. the readings are more
than 100 intervals' consumption above zero. A building's load has a daily cycle, so it falls
often and by as much as it rises within any day; a stuck meter (a flat line) does not rise.

*Not a register* (sent with ``--unit register``): a series that falls (other than by rolling
over) in more than :data:`NOT_REGISTER_SHARE` of its steps, three times at least.

*Differences.* Timestamps label the start of an interval, so the energy of the interval that
starts at a reading is the next reading minus this one, when the next reading is one interval
later: a reading whose next one is absent from the file (the file's last, or one before a gap)
starts no interval that can be known, is not written and is counted (*left out*); a blank
reading makes both intervals it bounds missing. A rollover's interval holds the wrapped
difference. A reset's or a jump's interval cannot be known: stored as missing, counted. A
reading after a noisy fall is not trusted, as a blank one: both intervals it bounds are stored
as missing (the noise is neither a reset nor two hours' energy in the next hour), counted.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np
import pandas as pd

from tasks.ingest.errors import MalformedSourceError
from tasks.ingest.hourly import _epoch_us, series_order

MIN_READINGS = 24
"""Readings a series needs (spanning a day at least) before it can look like a register."""
LEVEL_RATIO = 100.0
"""A register's median reading is at least this many times its median rise."""
ROLLOVER_RATIO = 10.0
"""A fall is a rollover when the wrapped difference is at most this many times the median rise."""
NOISE_RATIO = 1.0
"""A fall no larger than this many times the median rise (and no rollover) is meter noise."""
JUMP_RATIO = 100.0
"""A rise larger than this many times the median rise is a jump (a meter swapped)."""
NOISE_SHARE = 0.05
"""A register sent as energy may fall by meter noise in this share of its steps (two at least)."""
NOT_REGISTER_SHARE = 0.10
"""A series sent as a register that falls in more than this share of its steps is not one."""
_US_PER_HOUR = 3_600_000_000


class RegisterReadingsError(MalformedSourceError):
    """Readings that are a cumulative meter register sent as the energy of each interval, or
    interval energies sent as a register."""


@dataclass(frozen=True)
class RegisterCounts:
    """What differencing a file's registers met."""

    rollovers: int = 0
    """Falls taken as the register wrapping at a power of ten (their difference is stored)."""
    resets: int = 0
    """Falls taken as a reset or a replaced meter (their interval is stored as missing)."""
    jumps: int = 0
    """Rises taken as a meter swapped for one reading higher (stored as missing)."""
    noise: int = 0
    """Small falls taken as meter noise (the two intervals around the reading: missing)."""
    left_out: int = 0
    """Readings that start no interval the file bounds (not written)."""

    @classmethod
    def total(cls, counts: list[RegisterCounts]) -> RegisterCounts:
        """The counts of a file's registers read at different intervals, added up."""
        return cls(**{f.name: sum(getattr(c, f.name) for c in counts) for f in fields(cls)})

    def line(self) -> str:
        """The summary's words for these counts."""
        words = (f"differences of a register: {self.rollovers:,} rollover(s) bridged, "
                 f"{self.resets:,} reset(s) stored as missing")
        if self.jumps:
            words += (f", {self.jumps:,} jump(s) over {JUMP_RATIO:g}x the median rise (a meter "
                      "swapped) stored as missing")
        if self.noise:
            words += (f", {self.noise:,} small backward step(s) (meter noise): the 2 intervals "
                      "around each stored as missing")
        if self.left_out:
            words += (f", {self.left_out:,} reading(s) starting no interval in the file (the "
                      "last, or before a gap) not written")
        return words


@dataclass(frozen=True)
class _Steps:
    """The steps between consecutive readings of each series (``within``: the two readings
    belong to one series), each classified against its series' median rise."""

    codes: np.ndarray
    values: np.ndarray
    within: np.ndarray
    steps: np.ndarray
    typical: np.ndarray
    capacity: np.ndarray
    rolled: np.ndarray
    rollover: np.ndarray
    noise: np.ndarray
    reset: np.ndarray
    jump: np.ndarray

    @classmethod
    def of(cls, codes: np.ndarray, values: np.ndarray, within: np.ndarray) -> _Steps:
        groups = int(codes.max()) + 1 if codes.size else 0
        steps = np.diff(values)
        step_codes = codes[1:]
        up = within & (steps > 0)
        typical = np.full(groups, np.nan)
        if up.any():
            medians = pd.Series(steps[up]).groupby(step_codes[up]).median()
            typical[medians.index.to_numpy()] = medians.to_numpy()
        largest = np.full(groups, np.nan)
        finite = ~np.isnan(values)
        if finite.any():
            maxima = pd.Series(values[finite]).groupby(codes[finite]).max()
            largest[maxima.index.to_numpy()] = maxima.to_numpy()
        # where a register wraps: the power of ten above its largest reading (10 at least)
        digits = np.floor(np.log10(np.maximum(np.nan_to_num(largest), 1.0))) + 1
        capacity = 10.0 ** np.maximum(1, digits)
        typ, cap = typical[step_codes], capacity[step_codes]
        with np.errstate(invalid="ignore"):
            rolled = cap - values[:-1] + values[1:]
            fall = within & (steps < 0)
            rollover = fall & (rolled <= ROLLOVER_RATIO * typ) & (rolled <= cap / 10)
            noise = fall & ~rollover & (-steps <= NOISE_RATIO * typ)
            reset = fall & ~rollover & ~noise
            jump = within & (steps > JUMP_RATIO * typ)
        return cls(codes, values, within, steps, typical, capacity, rolled, rollover, noise,
                   reset, jump)

    def per_series(self, mask: np.ndarray) -> np.ndarray:
        """How many steps of each series ``mask`` marks."""
        return np.bincount(self.codes[1:][mask], minlength=self.typical.size)


def _valued(frame: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray, pd.Index]:
    """The valued readings of ``frame`` as arrays, each building's together and in time order:
    building codes, values, instants (epoch microseconds), and the building ids by code."""
    column = frame["building_id"]
    if isinstance(column.dtype, pd.CategoricalDtype):
        codes, names = column.cat.codes.to_numpy(), column.cat.categories
    else:
        codes, names = pd.factorize(column)
        names = pd.Index(names)
    values = frame["kwh"].to_numpy(float)
    ts = _epoch_us(frame["ts"])
    valued = ~np.isnan(values)
    if not valued.all():
        codes, values, ts = codes[valued], values[valued], ts[valued]
    order = series_order(codes, ts)
    if order is not None:
        codes, values, ts = codes[order], values[order], ts[order]
    return codes, values, ts, names


def _reading(value: float) -> str:
    """A register's reading as an operator reads it: 48,213,000 rather than 4.8213e+07."""
    return f"{value:,.0f}" if abs(value) >= 1e5 else f"{value:,.6g}"


def refuse_registers(path: Path, frame: pd.DataFrame, minutes: int, unit: str = "kWh") -> None:
    """Raise :class:`RegisterReadingsError` for the first building of ``frame``
    (``building_id``, ``ts``, ``kwh`` per interval, NaN = missing) whose readings look like a
    cumulative register; nothing for a file of ordinary readings. ``unit`` is the unit the file
    was sent in (``--unit``): a register sent as Wh counts in Wh, so the fix names
    ``--unit register --register-unit Wh``; otherwise it names the three units the register may
    count in (``--unit register`` needs one). This is judged before the energy bound, so a
    register's readings above any hour's energy are named as a register, not as values to store
    as missing.

    Every building's falls and rises are counted first; only a building that falls seldom
    enough to be a register (a load falls in most days' evenings) has its steps classified."""
    if frame["kwh"].notna().sum() < MIN_READINGS:
        return
    codes, values, ts, names = _valued(frame)
    groups = names.size
    within = codes[1:] == codes[:-1]
    steps = np.diff(values)
    n = np.bincount(codes, minlength=groups)
    falls = np.bincount(codes[1:][within & (steps < 0)], minlength=groups)
    rises = np.bincount(codes[1:][within & (steps > 0)], minlength=groups)
    first = np.r_[0, np.flatnonzero(~within) + 1]
    starts = np.full(groups, -1)
    starts[codes[first]] = first
    span_h = np.zeros(groups)
    last = np.r_[first[1:] - 1, len(codes) - 1]
    span_h[codes[first]] = (ts[last] - ts[first]) / _US_PER_HOUR
    allowed = np.maximum(2, NOISE_SHARE * (n - 1)) + (n - 1) // 100 + 2  # noise, resets, rollovers
    candidates = np.flatnonzero((n >= MIN_READINGS) & (span_h >= MIN_READINGS - 1)
                                & (falls <= allowed) & (2 * (rises + 2) >= n - 1))
    for group in candidates:
        lo = int(starts[group])
        hi = lo + int(n[group])
        series = values[lo:hi]
        one = _Steps.of(np.zeros(series.size, dtype=np.int64), series,
                        np.ones(max(series.size - 1, 0), dtype=bool))
        up = int((one.steps > 0).sum() + one.rollover.sum())
        noise, resets = int(one.noise.sum()), int(one.reset.sum())
        count = series.size
        if (2 * up < count - 1 or resets > (count - 1) // 100
                or noise > max(2, NOISE_SHARE * (count - 1))):
            continue
        wraps = np.r_[0, np.cumsum(one.rollover)]
        unwrapped = series + wraps * one.capacity[0]
        typical = one.typical[0]
        if np.median(unwrapped) < LEVEL_RATIO * typical:
            continue
        notes = []
        if wraps[-1]:
            notes.append(f"rolling over {int(wraps[-1])} time(s) at {one.capacity[0]:,.0f}")
        if noise:
            dips = -one.steps[one.noise]
            notes.append(f"falling back {noise} time(s) by at most {dips.max():.4g} kWh "
                         "(meter noise)")
        if resets:
            notes.append(f"reset {resets} time(s)")
        # a register states the unit it counts in (one in Wh read as kWh: 1,000 times too high)
        options = ("--unit register --register-unit Wh" if unit == "Wh" else
                   "--unit register --register-unit kWh|Wh|MWh (the unit it counts in)")
        others = (falls >= 3) & (falls > NOT_REGISTER_SHARE * np.maximum(n - 1, 0))
        others[group] = False
        mixed = ""
        if others.any():
            mixed = (f"; the file also holds {int(others.sum())} building(s) of interval "
                     f"energies (e.g. {str(names[int(others.argmax())])!r}): send the "
                     "register(s) in a file of their own")
        raise RegisterReadingsError(
            f"{path}: building {str(names[group])!r}: its {count:,} readings rise steadily from "
            f"{_reading(series[0])} to {_reading(series[-1])} kWh"
            + (f" ({', '.join(notes)})" if notes else "")
            + f" (a median rise of {typical:.4g} kWh per {minutes}-minute interval): a "
            "cumulative meter register, not the energy of each interval; give "
            f"{options} to store the differences{mixed}")


def refuse_non_registers(path: Path, frame: pd.DataFrame) -> None:
    """Raise :class:`RegisterReadingsError` for the first building of ``frame`` (register
    readings as sent with ``--unit register``) whose readings fall too often to be a register
    (see the module)."""
    codes, values, _, names = _valued(frame)
    if not codes.size:
        return
    steps = _Steps.of(codes, values, codes[1:] == codes[:-1])
    n = np.bincount(codes, minlength=names.size)
    falls = steps.per_series(steps.noise | steps.reset)  # other than by rolling over
    plain = (falls >= 3) & (falls > NOT_REGISTER_SHARE * np.maximum(n - 1, 0))
    if not plain.any():
        return
    group = int(plain.argmax())
    rest = ("send it in a file of its own, without --unit register" if (~plain & (n > 0)).any()
            else "ingest the file without --unit register")
    raise RegisterReadingsError(
        f"{path}: building {str(names[group])!r}: its readings fall in {int(falls[group]):,} of "
        f"{int(n[group]) - 1:,} steps: the energy of each interval, not a cumulative meter "
        "register (which falls only when it rolls over, is reset or reads a little back); "
        f"{rest}")


def difference_registers(frame: pd.DataFrame, minutes: int) -> tuple[pd.DataFrame, RegisterCounts]:
    """Register readings (``building_id``, ``ts``, ``kwh`` = the register, NaN = blank, and any
    other columns, e.g. the file's row) -> the energy of each interval they bound, labelled at
    its start, with the other columns of its start reading; see the module's rules."""
    codes = pd.factorize(frame["building_id"])[0]
    order = series_order(codes, _epoch_us(frame["ts"]))  # each building's rows in time order
    if order is not None:
        frame = frame.iloc[order].reset_index(drop=True)
        codes = pd.factorize(frame["building_id"])[0]
    values = frame["kwh"].to_numpy(float)
    ts = _epoch_us(frame["ts"])
    bounded = (codes[1:] == codes[:-1]) & (np.diff(ts) == minutes * 60_000_000)
    steps = _Steps.of(codes, values, bounded)
    energy = steps.steps.copy()
    energy[steps.rollover] = steps.rolled[steps.rollover]
    energy[steps.reset | steps.jump] = np.nan
    noisy = np.flatnonzero(steps.noise)
    energy[noisy] = np.nan
    after = noisy + 1
    energy[after[after < energy.size]] = np.nan  # the next interval starts at the noisy reading
    starts = frame.iloc[np.flatnonzero(bounded)].copy()
    starts["kwh"] = energy[bounded]
    counts = RegisterCounts(
        rollovers=int(steps.rollover.sum()), resets=int(steps.reset.sum()),
        jumps=int(steps.jump.sum()), noise=int(noisy.size),
        left_out=int(len(frame) - bounded.sum()))
    return starts.reset_index(drop=True), counts
