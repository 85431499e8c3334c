"""Which of a building's hourly readings a meter engineer would not believe, judged at ingest.

A reading can be a possible energy (it passed :mod:`~tasks.ingest.plausibility`'s bounds) and
still not be the building's: a meter stuck at a high value for hours, or at zero for days, or
an hour far above anything the building draws. Such hours reach a forecast through its
targets, its lag features and the persistence forecasts (a stuck 1,017 kWh for three hours of a
building drawing about 210 made next week's published forecast 597 kWh at those hours; a week
stuck at 0 of a building drawing about 68 kWh an hour was published as a 0 kWh week), and its
scores. So each ingest judges the new hours of each building in the context of its stored
history, and the hours it flags are kept as they arrived but treated as missing until an
operator accepts them (``meter_flags``, :mod:`~tasks.warehouse.meter_flags`).

The yardstick is the building's **level**: over the context (its stored hours within four
weeks of the new ones, and the new ones), leaving out runs of :data:`STUCK_RUN_HOURS` or more
identical readings (so that a stuck run of any length never raises its own yardstick), the
reading with 1 % of the others above it (its 99th percentile, nearest rank), or
:data:`LEVEL_LEAVE_OUT` of them where 1 % is fewer (under 800 readings, about five weeks: a
new meter's first weeks): a few spikes can never raise it, however short the context (two
spikes in a new meter's first week were the two readings a 99th percentile of 168 leaves out,
and raised it to themselves). It is the rule of the ``building_data_quality`` view
(``stuck_high_runs``, ``spike_readings``), judged on the weeks around the new hours instead of
the whole history (where 1 % is usually many hours). With fewer than
:data:`MIN_READINGS` readings (a day) the building is not judged: too little to know its level
(a new meter's level is checked by the readings ingest's unit check instead). The checks, on
consecutive hours (a missing hour ends a run):

* ``stuck_high``: :data:`STUCK_RUN_HOURS` or more hours reading the same value, above
  :data:`STUCK_RATIO` times the level: a meter stuck high, or a value filled in. Flat runs of
  three hours at a building's ordinary level are common (meters report in steps, buildings idle
  at night) and are not flagged; nor is a run that is a real step of the building's level
  (:func:`is_step`): one its other readings echo (:data:`ECHO_TOLERANCE`), or, in a flat-load
  building (:data:`FLAT_SHARE`), one lasting :data:`STEP_HOURS` or more at most
  :data:`STEP_RATIO` times the level;
* ``spike``: an hour above :data:`SPIKE_RATIO` times the level (not in a stuck run): no
  building draws ten times its 99th percentile hour;
* ``stuck_zero``: :data:`ZERO_RUN_HOURS` or more hours reading exactly 0 in a building whose
  other usable hours are never near zero: their 1st percentile (nearest rank) at least
  :data:`FLOOR_RATIO` of their median. A building that idles at 0 at night or at weekends
  has zeros among its other hours and is not judged.

A run that touches a new hour is flagged whole (a stuck run that began in the stored hours and
goes on in the file is one run). Ingested week by week, the 110 buildings of the Cambridge
archive (2016-2020, 21,041 building-weeks) get 17 runs, 43 hours flagged, none of them
``stuck_zero`` (the archive's reader stores its publisher's zeros as missing); see
``docs/your-data.md``, "Readings a meter engineer would not believe", for what they are and
where each threshold comes from.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

STUCK_RUN_HOURS = 3
"""Consecutive identical hours that make a stuck run (when high enough)."""
STUCK_RATIO = 2.0
"""A stuck run is flagged above this many times the building's level."""
SPIKE_RATIO = 10.0
"""An hour above this many times the building's level is flagged, alone or not."""
LEVEL_QUANTILE = 0.99
"""The building's level is this quantile of its readings (nearest rank)..."""
LEVEL_LEAVE_OUT = 8
"""... or, where that leaves fewer readings above it, the reading with this many above it."""
MIN_READINGS = 24
"""Readings (a day) the level, or the floor of ``stuck_zero``, needs; with fewer the building
is not judged."""
FLAT_SHARE = 0.5
"""A flat-load building holds its readings for hours at a time: at least this share of them in
flat runs (in the Cambridge archive, b53 alone; the median building has 2 %) ..."""
STEP_HOURS = 24
"""... and in it a flat run this long (a day; the stuck runs seen, in the Cambridge archive and
in operators' files, lasted 3 or 4 hours) ..."""
STEP_RATIO = 5.0
"""... at most this many times the level is a step of the building's level, not a stuck meter
(the archive's largest step: a week whose median is 3.9 times the 99th percentile of the four
weeks before it, b47 from 2019-02-25)."""
ECHO_TOLERANCE = 0.1
"""A flat run is a step when :data:`STUCK_RUN_HOURS` or more of the building's other readings,
not equal to it, lie within this fraction of its value: the building holds that level."""
ZERO_RUN_HOURS = 24
"""Consecutive hours of exact zeros that make a ``stuck_zero`` run: a whole day, longer than a
night's idling."""
FLOOR_QUANTILE = 0.01
"""A building's floor is this quantile (nearest rank) of its other usable readings ..."""
FLOOR_RATIO = 0.1
"""... and it is never near zero when its floor is at least this fraction of their median."""
_US_PER_HOUR = 3_600_000_000


@dataclass(frozen=True)
class FlaggedRun:
    """Consecutive hours of one building that one check flags."""

    building_id: str
    check_name: str
    positions: np.ndarray
    """Positions of the flagged hours in the building's context (as given)."""
    first: pd.Timestamp
    last: pd.Timestamp
    """The first and last flagged hour (UTC)."""
    low: float
    high: float
    level: float
    """The yardstick the run was judged against (kWh): the building's level, or for
    ``stuck_zero`` the floor of its other hours."""
    yardstick: str = "its 99th percentile hour"
    """What :attr:`level` is, as the line names it."""
    timezone: str = "UTC"
    """The building's time zone, in which the line shows the hours."""

    @property
    def hours(self) -> int:
        return int(self.positions.size)

    def line(self) -> str:
        """``b1: stuck_high, 2024-04-09 11:00 to 13:00 BST, 3 hour(s) at 1,017 kWh (...)``:
        the hours in the building's local time, with its zone's abbreviation."""
        values = (f"at {self.high:,.6g} kWh" if self.low == self.high
                  else f"of {self.low:,.6g} to {self.high:,.6g} kWh")
        judged = (f"{self.yardstick} is {self.level:,.4g} kWh" if self.check_name == "stuck_zero"
                  else f"{self.high / self.level:.1f}x {self.yardstick} of {self.level:,.4g} kWh")
        return (f"{self.building_id}: {self.check_name}, {self._when()}, {self.hours} hour(s) "
                f"{values} ({judged})")

    def _when(self) -> str:
        first, last = (ts.tz_convert(self.timezone) for ts in (self.first, self.last))
        if first == last:
            return f"{first:%Y-%m-%d %H:%M %Z}"
        end = f"{last:%H:%M}" if last.date() == first.date() else f"{last:%Y-%m-%d %H:%M}"
        if first.tzname() == last.tzname():
            return f"{first:%Y-%m-%d %H:%M} to {end} {first:%Z}"
        return f"{first:%Y-%m-%d %H:%M %Z} to {end} {last:%Z}"


def _islands(mask: np.ndarray, joined: np.ndarray) -> list[np.ndarray]:
    """Runs of positions where ``mask`` holds, a run going on from ``i`` to ``i + 1`` where
    ``joined[i]`` (e.g. the next position is the next hour)."""
    if not mask.any():
        return []
    starts = mask & ~np.r_[False, mask[:-1] & mask[1:] & joined]
    ids = np.cumsum(starts)[mask]
    return np.split(np.flatnonzero(mask), np.flatnonzero(np.diff(ids)) + 1)


def _flat_runs(kwh: np.ndarray, follows: np.ndarray) -> list[np.ndarray]:
    """Runs of :data:`STUCK_RUN_HOURS` or more identical readings in consecutive hours."""
    same = follows & (kwh[1:] == kwh[:-1])  # i + 1 is the hour after i and reads the same
    in_run = np.r_[same, False] | np.r_[False, same]
    return [run for run in _islands(in_run, same) if run.size >= STUCK_RUN_HOURS]


def _level(values: np.ndarray) -> tuple[float, str]:
    """The level of ``values`` (module docstring) and what it is, as a line names it."""
    percentile = int((1 - LEVEL_QUANTILE) * values.size)  # readings above it, nearest rank
    above = max(percentile, LEVEL_LEAVE_OUT)
    name = ("its 99th percentile hour" if percentile >= LEVEL_LEAVE_OUT
            else f"its {LEVEL_LEAVE_OUT + 1}th highest hour")
    rank = values.size - 1 - above
    return float(np.partition(values, rank)[rank]), name


def _outside_flat_runs(hours: np.ndarray, kwh: np.ndarray) -> np.ndarray:
    """The readings of ``kwh`` that are not missing and not in a flat run."""
    keep = ~np.isnan(kwh)
    for run in _flat_runs(kwh, np.diff(hours) == 1):
        keep[run] = False
    return kwh[keep]


def _yardstick(hours: np.ndarray, kwh: np.ndarray) -> tuple[float, str] | None:
    """The building's level and what it is, or ``None`` (see :func:`reference_level`)."""
    values = _outside_flat_runs(hours, kwh)
    if values.size < MIN_READINGS:
        return None
    level, name = _level(values)
    return (level, name) if level > 0 else None


def reference_level(hours: np.ndarray, kwh: np.ndarray) -> float | None:
    """The building's level (module docstring) over ``hours`` (hour numbers since the epoch,
    sorted, distinct; ``kwh`` NaN = missing); ``None`` with fewer than :data:`MIN_READINGS`
    readings outside flat runs, or a level of 0."""
    found = _yardstick(hours, kwh)
    return None if found is None else found[0]


def is_step(run: np.ndarray, kwh: np.ndarray, level: float, flat_share: float) -> bool:
    """Whether a flat run above :data:`STUCK_RATIO` times ``level`` is a real step of the
    building's level rather than a stuck meter: its other readings echo its value (a real load
    varies about its level; a stuck meter repeats one number), or, in a flat-load building
    (``flat_share``: the share of its other readings in flat runs, at least :data:`FLAT_SHARE`),
    it lasts a day or more at a level a building can step to."""
    value = kwh[run[0]]
    if flat_share >= FLAT_SHARE and run.size >= STEP_HOURS and value <= STEP_RATIO * level:
        return True
    with np.errstate(invalid="ignore"):
        echo = (np.abs(kwh - value) <= ECHO_TOLERANCE * value) & (kwh != value)
    return int(np.count_nonzero(echo)) >= STUCK_RUN_HOURS


def zero_floor(kwh: np.ndarray, run: np.ndarray, usable: np.ndarray) -> float | None:
    """The floor (:data:`FLOOR_QUANTILE`, nearest rank) of the building's usable readings
    outside ``run`` when it is at least :data:`FLOOR_RATIO` of their median (the building is
    never near zero); ``None`` when it is near zero or has fewer than :data:`MIN_READINGS`."""
    keep = usable & ~np.isnan(kwh)
    keep[run] = False
    values = kwh[keep]
    if values.size < MIN_READINGS:
        return None
    rank = int(np.ceil(FLOOR_QUANTILE * values.size)) - 1
    floor = float(np.partition(values, rank)[rank])
    median = float(np.median(values))
    return floor if median > 0 and floor >= FLOOR_RATIO * median else None


def _zero_runs(kwh: np.ndarray, follows: np.ndarray) -> list[np.ndarray]:
    """Runs of :data:`ZERO_RUN_HOURS` or more exact zeros in consecutive hours."""
    return [run for run in _islands(kwh == 0, follows) if run.size >= ZERO_RUN_HOURS]


def _stuck_zero(kwh: np.ndarray, follows: np.ndarray, new: np.ndarray,
                usable: np.ndarray) -> list[tuple[np.ndarray, float]]:
    """The ``stuck_zero`` runs touching a new hour, each with the floor it was judged by."""
    found = []
    for run in _zero_runs(kwh, follows):
        floor = zero_floor(kwh, run, usable) if new[run].any() else None
        if floor is not None:
            found.append((run, floor))
    return found


def _against_level(kwh: np.ndarray, follows: np.ndarray,
                   level: float) -> list[tuple[str, np.ndarray]]:
    """The ``stuck_high`` and ``spike`` runs of a building whose level is ``level``."""
    flats = _flat_runs(kwh, follows)
    flat, readings = sum(run.size for run in flats), int(np.count_nonzero(~np.isnan(kwh)))
    found = [("stuck_high", run) for run in flats if kwh[run[0]] > STUCK_RATIO * level
             and not is_step(run, kwh, level, (flat - run.size) / max(readings - run.size, 1))]
    stuck = np.zeros(kwh.size, dtype=bool)
    for _, run in found:
        stuck[run] = True
    return found + [("spike", run)
                    for run in _islands((kwh > SPIKE_RATIO * level) & ~stuck, follows)]


def flagged_runs(building_id: str, hours: np.ndarray, kwh: np.ndarray, new: np.ndarray,
                 usable: np.ndarray | None = None, timezone: str = "UTC") -> list[FlaggedRun]:
    """The runs of a building's context (``hours``: hour numbers since the epoch, sorted and
    distinct; ``kwh``: NaN = missing) that a check flags and that touch a ``new`` hour.
    ``usable``: the hours not flagged already (default: all), the only ones ``stuck_zero``
    compares with; ``timezone``: the building's, in which the runs' lines show their hours."""
    follows = np.diff(hours) == 1
    found: list[tuple[str, np.ndarray, float, str]] = []
    yardstick = _yardstick(hours, kwh)
    if yardstick is not None:
        level, name = yardstick
        found += [(check, run, level, name)
                  for check, run in _against_level(kwh, follows, level) if new[run].any()]
    usable = np.ones(kwh.size, dtype=bool) if usable is None else usable
    found += [("stuck_zero", run, floor, "its other hours' 1st percentile")
              for run, floor in _stuck_zero(kwh, follows, new, usable)]
    return [_run(building_id, check, run, hours, kwh, level, name, timezone)
            for check, run, level, name in found]


def _run(building_id: str, check: str, run: np.ndarray, hours: np.ndarray, kwh: np.ndarray,
         level: float, yardstick: str, timezone: str) -> FlaggedRun:
    values = kwh[run]
    return FlaggedRun(building_id, check, run, hour_stamp(int(hours[run[0]])),
                      hour_stamp(int(hours[run[-1]])), float(values.min()), float(values.max()),
                      level, yardstick, timezone)


def hour_stamp(hour: int) -> pd.Timestamp:
    """The UTC instant of an hour number since the epoch."""
    return pd.Timestamp(hour * _US_PER_HOUR, unit="us", tz="UTC")
