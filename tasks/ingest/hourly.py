"""From timestamped readings to the warehouse's hours: the grid, units, and sub-hourly sums.

A timestamp labels the *start* of its interval (the warehouse's convention: each hour is stored
at the UTC instant it starts). A file's interval is the most common step of 15, 30 or 60 minutes
between consecutive timestamps of one series (a file with one timestamp per series is hourly),
and every timestamp must lie on that grid of UTC instants (10:07 in an hourly file is refused).

Units: ``kWh`` or ``Wh`` are the energy of the interval; ``kW`` is the average power over the
interval, so its energy is kW x the interval in hours (4 quarter-hours of 10 kW are 10 kWh);
``register`` is a cumulative register in kWh, differenced first
(:mod:`~wadiro_fleet.tasks.ingest.registers`).
Sub-hourly energies are summed to their hour, never as a partial sum: an hour with a blank
sub-interval is stored as missing (NULL), and an hour with a sub-interval absent from the file
is not written at all (the file does not hold that hour; what is stored for it stays).
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import pandas as pd
from wadiro_fleet.tasks.ingest.errors import DuplicateTimestampError, MalformedSourceError
from wadiro_fleet.tasks.ingest.source_files import SourceTable

__all__ = [
    "SUPPORTED_MINUTES",
    "EnergyUnit",
    "check_on_grid",
    "check_unique",
    "infer_interval",
    "kwh_factor",
    "sum_to_hours",
]

EnergyUnit = Literal["kWh", "Wh", "kW", "register"]
SUPPORTED_MINUTES = (15, 30, 60)
_US_PER_MINUTE = 60_000_000


def kwh_factor(unit: EnergyUnit, minutes: int) -> float:
    """What one value in ``unit`` over an interval of ``minutes`` is in kWh."""
    return {"kWh": 1.0, "Wh": 1e-3, "kW": minutes / 60.0, "register": 1.0}[unit]


def _epoch_us(ts: pd.Series) -> np.ndarray:
    return ts.astype("datetime64[us, UTC]").to_numpy(dtype="datetime64[us]").astype(np.int64)


def infer_interval(source: SourceTable, ts: pd.Series, series: pd.Series | None) -> int:
    """The file's interval in minutes: the most common step of 15, 30 or 60 minutes within a
    series (the shortest among equally common ones; other steps are gaps, or rows off the grid
    that :func:`check_on_grid` names); 60 when no series has two timestamps."""
    frame = pd.DataFrame({"s": series.to_numpy() if series is not None else 0, "t": _epoch_us(ts)})
    frame = frame.sort_values(["s", "t"], kind="stable")
    steps = np.diff(frame["t"].to_numpy())
    same = frame["s"].to_numpy()[1:] == frame["s"].to_numpy()[:-1]
    steps = steps[same & (steps > 0)]
    if steps.size == 0:
        return 60
    supported = np.isin(steps, np.array(SUPPORTED_MINUTES) * _US_PER_MINUTE)
    if not supported.any():
        step = int(pd.Series(steps).mode().iloc[0])
        raise MalformedSourceError(
            f"{source.path}: timestamps are mostly {step / _US_PER_MINUTE:g} minutes apart; "
            "readings every 15, 30 or 60 minutes are supported"
        )
    return int(pd.Series(steps[supported]).mode().iloc[0]) // _US_PER_MINUTE


def check_on_grid(source: SourceTable, column: str, ts: pd.Series, minutes: int) -> None:
    """Every instant starts an interval of ``minutes`` (on the UTC grid), else an error naming
    the first row that does not."""
    off = _epoch_us(ts) % (minutes * _US_PER_MINUTE) != 0
    if off.any():
        row = int(np.flatnonzero(off)[0])
        what = "an hour" if minutes == 60 else f"a {minutes}-minute interval"
        raise source.error(
            row,
            column,
            f"{ts.iloc[row]:%Y-%m-%d %H:%M:%S}Z is not the start of "
            f"{what} (the file's interval; timestamps label the start of each "
            "interval on the UTC grid)",
        )


def check_unique(
    source: SourceTable, column: str, ts: pd.Series, keys: pd.DataFrame | None, what: str
) -> None:
    """No two rows with the same instant and ``keys`` (e.g. building id); else an error naming
    both rows. ``what`` describes the key in the message (``building 'b1'``)."""
    names = [] if keys is None else list(keys.columns)
    frame = pd.DataFrame({**{name: keys[name].to_numpy() for name in names}, "t": _epoch_us(ts)})
    repeated = frame.duplicated(keep="first").to_numpy()
    if not repeated.any():
        return
    second = int(np.flatnonzero(repeated)[0])
    group = frame.groupby([*names, "t"], sort=False, dropna=False).ngroup().to_numpy()
    first = int(np.flatnonzero(group == group[second])[0])
    label = what.format(**{n: frame[n].iloc[second] for n in names}) if names else what
    raise DuplicateTimestampError(
        f"{source.path}: {source.where(first)} and {source.where(second)}, column {column!r}: "
        f"{label} at {ts.iloc[second]:%Y-%m-%d %H:%M}Z appears twice (duplicate rows)"
    )


def sum_to_hours(frame: pd.DataFrame, minutes: int) -> tuple[pd.DataFrame, int, int]:
    """``frame`` (``building_id``, ``ts`` UTC, ``kwh`` per interval; NaN = missing) summed per
    (building, UTC hour), never as a partial sum. Returns the hours to write, sorted; how many
    of them are missing because a sub-interval was blank while others had values (*partial*);
    and how many hours are left out because a sub-interval is absent from the file
    (*incomplete*: the file does not hold the whole hour, so a stored value is kept). Both
    counts are 0 for an hourly file."""
    per_hour = 60 // minutes
    hour = frame["ts"].dt.floor("h")
    grouped = frame.assign(hour=hour).groupby(["building_id", "hour"], sort=True)["kwh"]
    total = grouped.sum(min_count=1)
    present = grouped.size()
    valued = grouped.count()
    whole = present == per_hour
    hours = pd.DataFrame({"kwh": total.where(valued == present)})[whole.to_numpy()].reset_index()
    hours = hours.rename(columns={"hour": "ts"})[["building_id", "ts", "kwh"]]
    partial = int((whole & (valued > 0) & (valued < present)).sum())
    return hours, partial, int((~whole).sum())
