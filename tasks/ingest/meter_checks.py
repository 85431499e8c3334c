"""Which of a building's hourly readings a meter engineer would not believe, judged at ingest.

A reading can be a possible energy (it passed :mod:`~tasks.ingest.plausibility`'s bounds) and
still not be the building's: a meter stuck at a high value for hours, or an hour far above
anything the building draws. Such hours reach a forecast through its targets, its lag features
and the persistence forecasts (a stuck 1,017 kWh for three hours of a building drawing about 210
made next week's published forecast 597 kWh at those hours), and its scores. So each ingest
judges the new hours of each building in the context of its stored history, and the hours it
flags are kept as they arrived but treated as missing until an operator accepts them
(``meter_flags``, :mod:`~tasks.warehouse.meter_flags`).

The yardstick is the building's **level**: its 99th percentile reading (nearest rank) over the
context (its stored hours within four weeks of the new ones, and the new ones), leaving out runs
of :data:`STUCK_RUN_HOURS` or more identical readings, so that a stuck run of any length never
raises its own yardstick; and a few spikes (under 1 % of the context) cannot raise it either.
It is the rule of the ``building_data_quality`` view (``stuck_high_runs``, ``spike_readings``),
judged on the weeks around the new hours instead of the whole history. With fewer than
:data:`MIN_READINGS` readings the building is not judged: too little to know its level (a new
meter's level is checked by the readings ingest's unit check instead). The checks, on
consecutive hours (a missing hour ends a run):

* ``stuck_high``: :data:`STUCK_RUN_HOURS` or more hours reading the same value, above
  :data:`STUCK_RATIO` times the level: a meter stuck high, or a value filled in. Flat runs of
  three hours at a building's ordinary level are common (meters report in steps, buildings idle
  at night) and are not flagged;
* ``spike``: an hour above :data:`SPIKE_RATIO` times the level (not in a stuck run): no
  building draws ten times its 99th percentile hour.

A run that touches a new hour is flagged whole (a stuck run that began in the stored hours and
goes on in the file is one run). Ingested week by week, the 110 buildings of the Cambridge
archive (2016-2020, 21,041 building-weeks) get 8 runs, 16 hours flagged (see
``docs/your-data.md``, "Readings a meter engineer would not believe").
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
"""The building's level is this quantile of its readings (nearest rank)."""
MIN_READINGS = 72
"""Readings (three days) the level needs; with fewer the building is not judged."""
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
    low: float
    high: float
    level: float
    """The building's level the run was judged against (kWh)."""

    @property
    def hours(self) -> int:
        return int(self.positions.size)

    def line(self) -> str:
        """``b1: stuck_high, 2024-04-09 10:00 to 12:00 UTC, 3 hour(s) at 1,017 kWh (...)``."""
        last = (f"{self.last:%H:%M}" if self.last.date() == self.first.date()
                else f"{self.last:%Y-%m-%d %H:%M}")
        values = (f"at {self.high:,.6g} kWh" if self.low == self.high
                  else f"of {self.low:,.6g} to {self.high:,.6g} kWh")
        return (f"{self.building_id}: {self.check_name}, {self.first:%Y-%m-%d %H:%M} to {last} "
                f"UTC, {self.hours} hour(s) {values} ({self.high / self.level:.1f}x its 99th "
                f"percentile hour of {self.level:,.4g} kWh)")


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


def reference_level(hours: np.ndarray, kwh: np.ndarray) -> float | None:
    """The building's level (module docstring) over ``hours`` (hour numbers since the epoch,
    sorted, distinct; ``kwh`` NaN = missing); ``None`` with fewer than :data:`MIN_READINGS`
    readings outside flat runs, or a level of 0."""
    keep = ~np.isnan(kwh)
    for run in _flat_runs(kwh, np.diff(hours) == 1):
        keep[run] = False
    values = kwh[keep]
    if values.size < MIN_READINGS:
        return None
    level = float(np.quantile(values, LEVEL_QUANTILE, method="inverted_cdf"))
    return level if level > 0 else None


def flagged_runs(building_id: str, hours: np.ndarray, kwh: np.ndarray,
                 new: np.ndarray) -> list[FlaggedRun]:
    """The runs of a building's context (``hours``: hour numbers since the epoch, sorted and
    distinct; ``kwh``: NaN = missing) that a check flags and that touch a ``new`` hour."""
    level = reference_level(hours, kwh)
    if level is None:
        return []
    follows = np.diff(hours) == 1
    with np.errstate(invalid="ignore"):
        found = [("stuck_high", run) for run in _flat_runs(kwh, follows)
                 if kwh[run[0]] > STUCK_RATIO * level]
        stuck = np.zeros(kwh.size, dtype=bool)
        for _, run in found:
            stuck[run] = True
        found += [("spike", run)
                  for run in _islands((kwh > SPIKE_RATIO * level) & ~stuck, follows)]
    return [_run(building_id, check, run, hours, kwh, level)
            for check, run in found if new[run].any()]


def _run(building_id: str, check: str, run: np.ndarray, hours: np.ndarray, kwh: np.ndarray,
         level: float) -> FlaggedRun:
    values = kwh[run]
    return FlaggedRun(building_id, check, run,
                      pd.Timestamp(int(hours[run[0]]) * _US_PER_HOUR, unit="us", tz="UTC"),
                      pd.Timestamp(int(hours[run[-1]]) * _US_PER_HOUR, unit="us", tz="UTC"),
                      float(values.min()), float(values.max()), level)
