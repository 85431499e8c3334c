"""A file's timestamp column as UTC instants, with the clock-change rules of local wall time.

A column holds either timestamps with a UTC offset (``2024-03-31T01:00:00+01:00``, ``...Z``) --
every cell then names its instant and ``timezone`` must not be given -- or naive local
wall-clock times (``2024-03-31 01:00``), read in the IANA zone ``timezone``. Mixing the two in
one column is refused. A Parquet timestamp column counts as "with offset" when its type has a
time zone and as wall-clock time when it has none.

How a timestamp is written: ISO 8601 by default; ``time_format`` (``--time-format``, strftime
codes, e.g. ``%d/%m/%Y %H:%M``; ``%z`` reads an offset) for any other layout; ``dayfirst``
(``--dayfirst``) reads the layout of the column's first timestamp, day before month
(``05/02/2024 00:00`` is 5 February), and every other timestamp in that layout. A cell that
does not fit is refused naming its row.

Wall-clock times and clock changes (zone rules from :mod:`zoneinfo`):

* a time the clocks skip (spring forward, e.g. 01:30 on 2024-03-31 in Europe/London) does not
  exist: an error naming the row;
* a time the clocks pass twice (fall back, e.g. 01:30 on 2024-10-27 in Europe/London) that
  appears twice for the same series (building or site), in the series' time order: in a file
  written oldest first the first is the earlier instant (summer time, 00:30 UTC), the second
  the later one (standard time, 01:30 UTC); in a series written newest first (its rows mostly
  going back in time) the other way round;
* such a time that appears only once is refused, unless ``ambiguous`` says which instant it is:
  ``earliest`` (summer time) or ``latest`` (standard time). A third appearance is a duplicate.

Dates (:meth:`LocalTimeOptions.reader`): a timestamp before :data:`EARLIEST` (1990-01-01) or
more than a few days after today (:data:`DAYS_AHEAD` for readings, observations and issue times,
:data:`FORECAST_DAYS_AHEAD` for the hours of a weather forecast) is refused naming its row: a
year 1, 1900, 2099 or 9999 is a typo or a placeholder, and one such row would make a whole
fleet look silent or stale.
"""

from __future__ import annotations

import re
import warnings
from dataclasses import replace
from datetime import timedelta
from typing import Annotated, Literal

import numpy as np
import pandas as pd
import pyarrow as pa
from pandas.tseries.api import guess_datetime_format
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator

from tasks.ingest.contract import SourceRows, SourceTable
from tasks.ingest.errors import MalformedSourceError
from tasks.protocol.weeks import resolve_timezone

AmbiguousPolicy = Literal["refuse", "earliest", "latest"]

EARLIEST = pd.Timestamp("1990-01-01", tz="UTC")
"""The earliest instant a file's timestamp may name (no building's meter export is older)."""
DAYS_AHEAD = 2
"""How many days after today a reading, an observation or a forecast's issue time may lie (a
day for time zones and the day's remaining hours, one more for a clock set wrong)."""
FORECAST_DAYS_AHEAD = 21
"""How many days after today the hours of a weather forecast may lie (a week-ahead forecast
issued a week or two early)."""

_OFFSET = re.compile(r"\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?\s*(?:[zZ]|[+-]\d{2}(?::?\d{2})?)$")
"""A UTC offset after a time of day (so that a date alone, ``2024-01-01``, is not one)."""
_ISO_START = re.compile(r"^\d{4}-\d")
_UTC_US = "datetime64[us, UTC]"
_NO_OFFSET_HINT = ("write timestamps with a UTC offset (e.g. 2024-03-31T01:00:00+01:00 or "
                   "...T00:00:00Z)")


TimeZoneName = Annotated[str, AfterValidator(lambda name: resolve_timezone(name).key)]
"""An IANA time zone name that :mod:`zoneinfo` knows (a pydantic type; the check is
:func:`~tasks.protocol.weeks.resolve_timezone`)."""


class TimeReader:
    """Reads one timestamp column of a file, chunk after chunk, as either UTC instants or naive
    wall-clock times (:attr:`with_offset` says which; every chunk must be like the first), each
    within ``[EARLIEST, latest]`` (when ``latest`` is given; wall-clock times are compared as
    if they were UTC, the bounds being days wide)."""

    def __init__(self, column: str, *, timezone: str | None, time_format: str | None = None,
                 dayfirst: bool = False, latest: pd.Timestamp | None = None,
                 latest_why: str = "") -> None:
        self.column = column
        self.timezone = timezone
        self.time_format = time_format
        self.dayfirst = dayfirst
        self.latest = latest
        self.latest_why = latest_why
        self.with_offset: bool | None = None
        self._layout: str | None = time_format
        self._layout_from = ""

    def read(self, source: SourceTable) -> pd.Series:
        """The chunk's timestamps: ``datetime64[us, UTC]`` (with offsets) or naive
        ``datetime64[us]`` (wall-clock times); an empty or unreadable cell is an error."""
        at = source.at
        values = source.table[self.column]
        if pa.types.is_timestamp(values.type):
            at.refuse_blank(self.column, values)
            parsed = pd.Series(values.to_pandas(),
                               dtype=f"datetime64[us{', UTC' if values.type.tz else ''}]")
            offset = values.type.tz is not None
            self._same_form(at, offset, np.full(len(parsed), offset), None)
            parsed = parsed.dt.tz_convert("UTC").astype(_UTC_US) if offset else parsed
        elif pa.types.is_string(values.type) or pa.types.is_large_string(values.type):
            text = source.trimmed(self.column)
            at.refuse_blank(self.column, text)
            parsed = self._parse(at, pd.Series(text.to_numpy(zero_copy_only=False), dtype=object))
        else:
            raise MalformedSourceError(
                f"{at.path}: column {self.column!r} holds {values.type}, not timestamps")
        if not self.with_offset and self.timezone is None:
            raise at.error(
                0, self.column,
                f"{parsed.iloc[0]} has no UTC offset; give --timezone ZONE "
                f"(local wall-clock times), or {_NO_OFFSET_HINT}")
        if self.with_offset and self.timezone is not None:
            raise at.error(
                0, self.column,
                "timestamps with a UTC offset name their instant; "
                "--timezone is for naive local wall-clock times only, leave it out")
        self._check_dates(at, parsed)
        return parsed

    def utc(self, at: SourceRows, wall: pd.Series, ambiguous: AmbiguousPolicy,
            series: pd.Series | np.ndarray | None = None, series_name: str = "series", *,
            pairs: bool = True) -> pd.Series:
        """The file's timestamps (:meth:`read`, every chunk's, in file order) as UTC instants:
        naive wall-clock times ``wall`` localised in :attr:`timezone` by the module's
        clock-change rules, ``series`` (aligned) pairing the repeated times of each series."""
        if self.with_offset:
            return wall
        column, timezone = self.column, str(self.timezone)
        zone = resolve_timezone(timezone)
        utc = wall.dt.tz_localize(zone, ambiguous="NaT", nonexistent="NaT").dt.tz_convert("UTC")
        odd = np.flatnonzero(utc.isna().to_numpy())
        if odd.size == 0:
            return utc.astype(_UTC_US)
        odd_wall = wall.iloc[odd]
        # pandas' ambiguous=True is the earlier instant of a repeated time (summer time)
        skipped = odd_wall.dt.tz_localize(zone, ambiguous=True, nonexistent="NaT").isna().to_numpy()
        if skipped.any():
            i = int(odd[skipped.argmax()])
            raise at.error(i, column, f"{wall.iloc[i]:%Y-%m-%d %H:%M} does not exist in "
                           f"{timezone} (the clocks go forward over it); fix the time, or "
                           f"{_NO_OFFSET_HINT}")
        names = (None if series is None else series.reset_index(drop=True)
                 if isinstance(series, pd.Series) else pd.Series(series))
        keys = pd.DataFrame({"series": 0 if names is None else names.iloc[odd].to_numpy(),
                             "wall": odd_wall.to_numpy()})
        grouped = keys.groupby(["series", "wall"], sort=False)
        paired = pairs & (grouped["wall"].transform("size") >= 2).to_numpy()
        if ambiguous == "refuse" and not paired.all():
            i = int(odd[paired.argmin()])
            whose = f" for {series_name} {names.iloc[i]!r}" if names is not None else ""
            raise at.error(
                i, column,
                f"{wall.iloc[i]:%Y-%m-%d %H:%M} occurs twice in {timezone} (the clocks go back "
                f"over it) and appears once{whose}; give --ambiguous earliest (summer time, the "
                f"earlier instant) or --ambiguous latest (standard time), or {_NO_OFFSET_HINT}")
        # in a file written newest first, a series' first 01:30 is its standard-time one
        first = np.where(_descending(wall, names).iloc[odd].to_numpy(), 1, 0)
        earlier = np.where(paired, grouped.cumcount().to_numpy() == first,
                           ambiguous == "earliest")
        utc.iloc[odd] = odd_wall.dt.tz_localize(zone, ambiguous=earlier).dt.tz_convert("UTC").array
        return utc.astype(_UTC_US)

    def _parse(self, at: SourceRows, text: pd.Series) -> pd.Series:
        if self._layout is None and self.dayfirst:
            self._dayfirst_layout(at, text.iloc[0])
        if self._layout is not None:  # a layout with an offset (%z) gives every row one
            aware = "%z" in self._layout or "%Z" in self._layout
            each = np.full(len(text), aware)
        else:  # ISO 8601, each row with an offset or without
            each = text.str.contains(_OFFSET).to_numpy(dtype=bool)
            aware = bool(each[0])
        self._same_form(at, aware, each, text)
        parsed = pd.to_datetime(text, format=self._layout or "ISO8601", utc=aware,
                                errors="coerce")
        self._refuse_unreadable(at, text, parsed)
        return parsed.astype(_UTC_US if aware else "datetime64[us]")

    def _dayfirst_layout(self, at: SourceRows, first: str) -> None:
        if _ISO_START.match(first):  # ISO 8601 (year first) is read as such
            return
        with warnings.catch_warnings():  # pandas warns when it reads the month first
            warnings.simplefilter("ignore", UserWarning)
            layout = guess_datetime_format(first, dayfirst=True)
        if layout is None:
            raise at.error(0, self.column,
                           f"cannot tell how {first!r} is written (--dayfirst); give "
                           "--time-format (e.g. '%d/%m/%Y %H:%M')")
        if layout.find("%d") > layout.find("%m") >= 0:
            raise at.error(0, self.column,
                           f"{first!r} cannot be written day first (--dayfirst): its month "
                           "comes first; leave out --dayfirst, or give --time-format (e.g. "
                           "'%m/%d/%Y %H:%M')")
        self._layout, self._layout_from = layout, f"{at.where(0)}'s {first!r}"

    def _same_form(self, at: SourceRows, form: bool, each: np.ndarray,
                   text: pd.Series | None) -> None:
        """Every row with (``each``) or without a UTC offset, as the file's first row."""
        if self.with_offset is None:
            self.with_offset = form
        differs = each != self.with_offset
        if differs.any():
            row = int(np.flatnonzero(differs)[0])
            shown = repr(text.iloc[row]) if text is not None else "the timestamp"
            first = replace(at, first_row=0).where(0)
            raise at.error(
                row, self.column,
                f"{shown} {'has' if each[row] else 'has no'} UTC offset, unlike {first}; "
                "use one form in the whole column")

    def _refuse_unreadable(self, at: SourceRows, text: pd.Series, parsed: pd.Series) -> None:
        bad = parsed.isna().to_numpy()
        if not bad.any():
            return
        row = int(np.flatnonzero(bad)[0])
        cell = text.iloc[row]
        if self.time_format is not None:
            why = f"does not match --time-format {self.time_format!r}"
        elif self._layout is not None:
            why = (f"is not a timestamp written like {self._layout_from} ({self._layout!r}, "
                   "read with --dayfirst); give --time-format for another layout")
        else:
            why = ("is not an ISO 8601 timestamp (e.g. 2024-03-31T01:00:00+01:00, or "
                   "2024-03-31 01:00 with --timezone; for another layout give --time-format, "
                   "e.g. '%d/%m/%Y %H:%M', or --dayfirst)")
        raise at.error(row, self.column, f"{cell!r} {why}")

    def _check_dates(self, at: SourceRows, parsed: pd.Series) -> None:
        if self.latest is None:
            return
        instants = parsed if parsed.dt.tz is not None else parsed.dt.tz_localize("UTC")
        low = (instants < EARLIEST).to_numpy()
        high = (instants > self.latest).to_numpy()
        if low.any() or high.any():
            row = int(np.flatnonzero(low | high)[0])
            t = parsed.iloc[row]
            raise at.error(
                row, self.column,
                f"{t.year:04d}-{t:%m-%d %H:%M} is outside the dates a file may hold, "
                f"{EARLIEST:%Y-%m-%d} to {self.latest:%Y-%m-%d} ({self.latest_why}); "
                "a mistyped year or a placeholder date? fix the timestamp")


class LocalTimeOptions(BaseModel):
    """Options shared by the commands that read timestamped files: the zone of naive local
    timestamps (checked against zoneinfo), how timestamps are written, and which instant a
    repeated local time is."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    timezone: TimeZoneName | None = Field(
        None, description="IANA time zone of naive local timestamps (leave out when the "
        "timestamps carry a UTC offset).")
    time_format: str | None = Field(
        None, description="How timestamps are written, when not ISO 8601, in strftime codes "
        "(e.g. '%d/%m/%Y %H:%M' for 05/02/2024 13:00; '%z' reads a UTC offset).")
    dayfirst: bool = Field(
        False, description="Timestamps that are not ISO 8601 are written day first (05/02/2024 "
        "is 5 February): the layout of the first one is read, and every other must follow it.")
    ambiguous: AmbiguousPolicy = Field(
        "refuse", description="A local time the clocks pass twice (fall back) that appears only "
        "once for a building (or site): refuse, or take the earliest (summer time) or latest "
        "(standard time) instant. Appearing twice, the first is the earliest.")

    @field_validator("time_format")
    @classmethod
    def _a_format(cls, value: str | None) -> str | None:
        if value is not None and not re.search(r"%[YymdbBHIMjG]", value):
            raise ValueError(f"{value!r} holds no date or time code (e.g. '%d/%m/%Y %H:%M')")
        return value

    @model_validator(mode="after")
    def _one_layout(self) -> LocalTimeOptions:
        if self.time_format is not None and self.dayfirst:
            raise ValueError("--time-format names the layout already; leave --dayfirst out")
        return self

    def reader(self, column: str, days_ahead: int, what: str) -> TimeReader:
        """A reader of ``column`` as these options say, refusing an instant more than
        ``days_ahead`` days after today (``what``: ``readings``, ``an issue time``, ...)."""
        return TimeReader(column, timezone=self.timezone, time_format=self.time_format,
                          dayfirst=self.dayfirst,
                          latest=pd.Timestamp.now("UTC") + timedelta(days=days_ahead),
                          latest_why=f"{what}: at most {days_ahead} days after today")


def _descending(wall: pd.Series, names: pd.Series | None) -> pd.Series:
    """Per row, whether its series (``names``, aligned; None: one series) is written newest
    first: more of its consecutive rows step back in time than forward."""
    frame = pd.DataFrame({"series": 0 if names is None else names.to_numpy(),
                          "step": wall.reset_index(drop=True)})
    steps = frame.groupby("series", sort=False)["step"].diff()
    back = (steps < pd.Timedelta(0)).groupby(frame["series"], sort=False).transform("sum")
    forward = (steps > pd.Timedelta(0)).groupby(frame["series"], sort=False).transform("sum")
    return (back > forward).set_axis(wall.index)
