"""From timestamped readings to the warehouse's hours: the grid, units, and sub-hourly sums.

A timestamp labels the *start* of its interval (the warehouse's convention: each hour is stored
at the UTC instant it starts). A file's interval is the most common step of 15, 30 or 60 minutes
between consecutive timestamps of one series (a file with one timestamp per series is hourly);
a building whose own steps are mostly another of them is read at its own (a 15-minute meter
beside half-hourly ones in one export). Every timestamp must lie on its interval's grid of UTC
instants (10:07 in an hourly file is refused).

Units: ``kWh`` or ``Wh`` are the energy of the interval; ``kW`` is the average power over the
interval, so its energy is kW x the interval in hours (4 quarter-hours of 10 kW are 10 kWh);
``register`` is a cumulative register counting the unit ``--register-unit`` states (kWh, Wh
or MWh; none is assumed), differenced first (:mod:`~tasks.ingest.registers`).
Sub-hourly energies are summed to their hour, never as a partial sum: an hour with a blank
sub-interval is stored as missing (NULL), and an hour with a sub-interval absent from the file
is not written at all (the file does not hold that hour; what is stored for it stays).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd
from pydantic import Field

from tasks.ingest.contract import FileOptions, SourceRows
from tasks.ingest.errors import DuplicateTimestampError, MalformedSourceError
from tasks.ingest.plausibility import ImplausiblePolicy
from tasks.ingest.timestamps import LocalTimeOptions

EnergyUnit = Literal["kWh", "Wh", "kW", "register"]
SUPPORTED_MINUTES = (15, 30, 60)
_US_PER_MINUTE = 60_000_000


class HourlyFileOptions(LocalTimeOptions, FileOptions):
    """How a file of hourly series (a meter export, a weather feed) is read and written."""

    implausible: ImplausiblePolicy = Field(
        "refuse", description="A negative or non-finite energy, or an implausible weather value: "
        "refuse the file (error naming line and column; nothing is written) or store it as "
        "missing and count it (refused when that would leave most of a building's readings "
        "missing).")
    replace_range: bool = Field(
        False, description="Replace each building's (observed weather: site's) stored hours from "
        "its first to its last hour in the file, removing those the file does not hold "
        "(default: only the hours the file holds change).")


def removed_note(removed: int | None) -> str:
    """A summary's words for the stored hours ``--replace-range`` removed (``None``: the option
    was not given)."""
    return ("" if removed is None else f"; removed {removed:,} stored hour(s) of the file's "
            "range that it does not hold (--replace-range)")


def _epoch_us(ts: pd.Series) -> np.ndarray:
    return ts.astype("datetime64[us, UTC]").to_numpy(dtype="datetime64[us]").astype(np.int64)


def series_codes(series: pd.Series | pd.DataFrame | np.ndarray | None) -> np.ndarray | None:
    """Integer codes of the series each row belongs to: a categorical's own codes, or the
    groups of one or more key columns (``None`` for a file of one series)."""
    if series is None:
        return None
    if isinstance(series, pd.DataFrame):
        if len(series.columns) == 1:
            return series_codes(series[series.columns[0]])
        return series.groupby(list(series.columns), sort=False, dropna=False,
                              observed=True).ngroup().to_numpy()
    if isinstance(series, pd.Series) and isinstance(series.dtype, pd.CategoricalDtype):
        return series.cat.codes.to_numpy()
    return pd.factorize(series)[0]


def series_order(codes: np.ndarray | None, t: np.ndarray) -> np.ndarray | None:
    """Row positions that put each series' rows together and in time order (a stable sort),
    or ``None`` when the rows are in that order already (as a file usually has them)."""
    if codes is None:
        return None if np.all(t[1:] >= t[:-1]) else np.argsort(t, kind="stable")
    same = codes[1:] == codes[:-1]
    if np.all(codes[1:] >= codes[:-1]) and np.all(t[1:][same] >= t[:-1][same]):
        return None
    return np.lexsort((t, codes))


MIXED_MIN_STEPS = 12
"""A series is read at an interval of its own (other than the file's) when that is the step
of at least this many of its readings (half a day of hourly ones): a few readings of a gappy
series prove nothing, and keep the file's."""


@dataclass(frozen=True)
class Intervals:
    """A file's interval in minutes (``minutes``: the most common) and, where its series are
    read at different ones (a building every 15 minutes beside hourly ones), each series'
    own (``by_code``: indexed by the series' code; ``None`` when all are read at ``minutes``)."""

    minutes: int
    by_code: np.ndarray | None = None

    @property
    def mixed(self) -> bool:
        return self.by_code is not None

    def per_row(self, codes: np.ndarray | None) -> int | np.ndarray:
        """Each row's interval (``codes``: the rows' series), or the one interval of a file
        whose series share it."""
        return self.minutes if self.by_code is None or codes is None else self.by_code[codes]


def infer_intervals(source: SourceRows, ts: pd.Series,
                    series: pd.Series | np.ndarray | None) -> Intervals:
    """The file's interval in minutes: the most common step of 15, 30 or 60 minutes within a
    series (``series``: e.g. building ids or their codes, aligned with ``ts``; the shortest
    among equally common steps; other steps are gaps, or rows off the grid that
    :func:`check_on_grid` names); 60 when no series has two timestamps. A series whose own
    most common step is another supported interval, in at least :data:`MIXED_MIN_STEPS` of
    its steps, is read at that one (an MDM export often holds 15-minute meters beside
    half-hourly ones): each series is summed to hours by its own interval."""
    codes, t = series_codes(series), _epoch_us(ts)
    order = series_order(codes, t)
    if order is not None:
        t = t[order]
        codes = None if codes is None else codes[order]
    steps = np.diff(t)
    keep = steps > 0
    if codes is not None:
        keep &= codes[1:] == codes[:-1]
    at = np.flatnonzero(keep)  # a step from row i to i + 1 (sorted)
    steps = steps[keep]
    if steps.size == 0:
        return Intervals(60)
    counts = [int(np.count_nonzero(steps == m * _US_PER_MINUTE)) for m in SUPPORTED_MINUTES]
    if max(counts) == 0:
        step = int(pd.Series(steps).mode().iloc[0])
        raise MalformedSourceError(
            f"{source.path}: timestamps are mostly {step / _US_PER_MINUTE:g} minutes apart; "
            "readings every 15, 30 or 60 minutes are supported")
    minutes = SUPPORTED_MINUTES[int(np.argmax(counts))]
    if codes is None:
        return Intervals(minutes)
    return Intervals(minutes, _own_intervals(codes, at, steps, minutes))


def _own_intervals(codes: np.ndarray, at: np.ndarray, steps: np.ndarray,
                   minutes: int) -> np.ndarray | None:
    """Each series' interval, indexed by code, where some series' own most common step (the
    shorter of equally common ones, of at least :data:`MIXED_MIN_STEPS` steps) is another
    supported interval than the file's ``minutes``; ``None`` where none is. ``codes``: each
    sorted row's series; ``at``: the sorted row each of ``steps`` starts from."""
    frame = pd.DataFrame({"code": codes[at], "minutes": steps // _US_PER_MINUTE})
    frame = frame[frame["minutes"].isin(SUPPORTED_MINUTES)]
    counts = (frame.groupby(["code", "minutes"]).size().rename("n").reset_index()
              .sort_values(["code", "n", "minutes"], ascending=[True, False, True])
              .drop_duplicates("code"))
    counts = counts[(counts["n"] >= MIXED_MIN_STEPS) & (counts["minutes"] != minutes)]
    if counts.empty:
        return None
    own = np.full(int(codes.max()) + 1, minutes, dtype=np.int16)
    own[counts["code"].to_numpy()] = counts["minutes"].to_numpy()
    return own


def check_on_grid(source: SourceRows, column: str, ts: pd.Series,
                  minutes: int | np.ndarray) -> None:
    """Every instant starts an interval of ``minutes`` (on the UTC grid; an array: each row's
    own, its building's), else an error naming the first row that does not."""
    off = _epoch_us(ts) % (np.asarray(minutes, dtype=np.int64) * _US_PER_MINUTE) != 0
    if off.any():
        row = int(np.flatnonzero(off)[0])
        own = int(minutes if np.ndim(minutes) == 0 else minutes[row])
        what = "an hour" if own == 60 else f"a {own}-minute interval"
        whose = "the file's interval" if np.ndim(minutes) == 0 else "its building's interval"
        raise source.error(row, column, f"{ts.iloc[row]:%Y-%m-%d %H:%M:%S}Z is not the start "
                           f"of {what} ({whose}; timestamps label the start of each "
                           "interval on the UTC grid)")


def check_unique(
    source: SourceRows, column: str, ts: pd.Series, keys: pd.DataFrame | None, what: str
) -> None:
    """No two rows with the same instant and ``keys`` (e.g. building id); else an error naming
    both rows. ``what`` describes the key in the message (``building 'b1'``)."""
    codes, t = series_codes(keys), _epoch_us(ts)
    order = series_order(codes, t)
    rows = np.arange(t.size) if order is None else order
    t_sorted = t if order is None else t[order]
    equal = t_sorted[1:] == t_sorted[:-1]
    if codes is not None:
        c_sorted = codes if order is None else codes[order]
        equal &= c_sorted[1:] == c_sorted[:-1]
    if not equal.any():
        return
    second = int(rows[1:][equal].min())
    same = t == t[second]
    if codes is not None:
        same &= codes == codes[second]
    first = int(np.flatnonzero(same)[0])
    label = (what.format(**{n: keys[n].iloc[second] for n in keys.columns})
             if keys is not None else what)
    raise DuplicateTimestampError(
        f"{source.path}: {source.where(first)} and {source.where(second)}, column {column!r}: "
        f"{label} at {ts.iloc[second]:%Y-%m-%d %H:%M}Z appears twice (duplicate rows)")


def sum_to_hours(frame: pd.DataFrame, minutes: int) -> tuple[pd.DataFrame, int, int]:
    """``frame`` (``building_id``, ``ts`` UTC, ``kwh`` per interval; NaN = missing) summed per
    (building, UTC hour), never as a partial sum. Returns the hours to write, sorted; how many
    of them are missing because a sub-interval was blank while others had values (*partial*);
    and how many hours are left out because a sub-interval is absent from the file
    (*incomplete*: the file does not hold the whole hour, so a stored value is kept). Both
    counts are 0 for an hourly file, whose rows are its hours."""
    if minutes == 60:
        hours = frame[["building_id", "ts", "kwh"]]
        order = series_order(series_codes(frame["building_id"]), _epoch_us(frame["ts"]))
        return (hours if order is None else hours.iloc[order]).reset_index(drop=True), 0, 0
    per_hour = 60 // minutes
    hour = frame["ts"].dt.floor("h")
    grouped = frame.assign(hour=hour).groupby(["building_id", "hour"], sort=True,
                                              observed=True)["kwh"]
    total = grouped.sum(min_count=1)
    present = grouped.size()
    valued = grouped.count()
    whole = present == per_hour
    hours = pd.DataFrame({"kwh": total.where(valued == present)})[whole.to_numpy()].reset_index()
    hours = hours.rename(columns={"hour": "ts"})[["building_id", "ts", "kwh"]]
    partial = int((whole & (valued > 0) & (valued < present)).sum())
    return hours, partial, int((~whole).sum())
