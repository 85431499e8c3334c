"""A file's timestamp column as UTC instants, with the clock-change rules of local wall time.

A column holds either ISO 8601 timestamps with a UTC offset (``2024-03-31T01:00:00+01:00``,
``...Z``) -- every cell then names its instant and ``timezone`` must not be given -- or naive
local wall-clock times (``2024-03-31 01:00``), read in the IANA zone ``timezone``. Mixing the two
in one column is refused. A Parquet timestamp column counts as "with offset" when its type has a
time zone and as wall-clock time when it has none.

Wall-clock times and clock changes (zone rules from :mod:`zoneinfo`):

* a time the clocks skip (spring forward, e.g. 01:30 on 2024-03-31 in Europe/London) does not
  exist: an error naming the row;
* a time the clocks pass twice (fall back, e.g. 01:30 on 2024-10-27 in Europe/London) that
  appears twice for the same series (building or site), in file order: the first is the earlier
  instant (summer time, 00:30 UTC), the second the later one (standard time, 01:30 UTC);
* such a time that appears only once is refused, unless ``ambiguous`` says which instant it is:
  ``earliest`` (summer time) or ``latest`` (standard time). A third appearance is a duplicate.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import numpy as np
import pandas as pd
import pyarrow as pa
from pydantic import AfterValidator, BaseModel, ConfigDict, Field
from wadiro_fleet.tasks.ingest.errors import MalformedSourceError
from wadiro_fleet.tasks.ingest.source_files import SourceTable

__all__ = ["AmbiguousPolicy", "LocalTimeOptions", "TimeZoneName", "check_zone", "utc_instants"]

AmbiguousPolicy = Literal["refuse", "earliest", "latest"]

_OFFSET = re.compile(r"\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?\s*(?:[zZ]|[+-]\d{2}(?::?\d{2})?)$")
"""A UTC offset after a time of day (so that a date alone, ``2024-01-01``, is not one)."""
_UTC_US = "datetime64[us, UTC]"
_NO_OFFSET_HINT = (
    "write timestamps with a UTC offset (e.g. 2024-03-31T01:00:00+01:00 or ...T00:00:00Z)"
)


def check_zone(name: str) -> str:
    """``name`` if it is an IANA time zone :mod:`zoneinfo` knows, else ``ValueError``."""
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as error:
        raise ValueError(
            f"unknown time zone {name!r} (not an IANA zone, e.g. Europe/London)"
        ) from error
    return name


TimeZoneName = Annotated[str, AfterValidator(check_zone)]
"""An IANA time zone name that :mod:`zoneinfo` knows (a pydantic type; :func:`check_zone`)."""


def utc_instants(
    source: SourceTable,
    column: str,
    *,
    timezone: str | None,
    ambiguous: AmbiguousPolicy = "refuse",
    series: pd.Series | None = None,
    series_name: str = "series",
    pairs: bool = True,
) -> pd.Series:
    """``column`` of ``source`` as UTC instants (``datetime64[us, UTC]``), one per row.

    ``series`` (aligned with the rows; e.g. the building id) says which rows form one time
    series, for the rule "an ambiguous wall time appearing twice is first the earlier, then the
    later instant"; ``series_name`` names it in messages. With ``pairs=False`` (a column whose
    values repeat for other reasons, like a forecast's issue time) every ambiguous time follows
    ``ambiguous``. An empty cell, an unreadable timestamp, a nonexistent or unresolved ambiguous
    local time is an error naming file, row and column.
    """
    values = source.table[column]
    if pa.types.is_timestamp(values.type):
        parsed = pd.Series(
            values.to_pandas(), dtype=f"datetime64[us{', UTC' if values.type.tz else ''}]"
        )
        if parsed.isna().any():
            raise source.error(
                int(np.flatnonzero(parsed.isna().to_numpy())[0]),
                column,
                "empty cell; a timestamp is required",
            )
        if values.type.tz is not None:
            _no_zone_with_offsets(source, column, timezone)
            return parsed.dt.tz_convert("UTC").astype(_UTC_US)
        wall = parsed
    elif pa.types.is_string(values.type) or pa.types.is_large_string(values.type):
        text = source.text(column, required=True)
        has_offset = text.str.contains(_OFFSET).to_numpy(dtype=bool)
        if has_offset.any() and not has_offset.all():
            row = int(np.flatnonzero(has_offset != has_offset[0])[0])
            raise source.error(
                row,
                column,
                f"{text.iloc[row]!r} {'has' if has_offset[row] else 'has no'} "
                f"UTC offset, unlike {source.where(0)}; use one form in the whole column",
            )
        if has_offset.all():
            _no_zone_with_offsets(source, column, timezone)
            parsed = pd.to_datetime(text, format="ISO8601", utc=True, errors="coerce")
            _refuse_unreadable(source, column, text, parsed)
            return parsed.astype(_UTC_US)
        wall = pd.to_datetime(text, format="ISO8601", errors="coerce")
        _refuse_unreadable(source, column, text, wall)
        wall = wall.astype("datetime64[us]")
    else:
        raise MalformedSourceError(
            f"{source.path}: column {column!r} holds {values.type}, not timestamps"
        )
    if timezone is None:
        raise source.error(
            0,
            column,
            f"{wall.iloc[0]} has no UTC offset; give --timezone ZONE "
            f"(local wall-clock times), or {_NO_OFFSET_HINT}",
        )
    return _localise(
        source, column, wall, timezone, ambiguous, series if pairs else None, series_name, pairs
    )


def _no_zone_with_offsets(source: SourceTable, column: str, timezone: str | None) -> None:
    if timezone is not None:
        raise source.error(
            0,
            column,
            "timestamps with a UTC offset name their instant; "
            "--timezone is for naive local wall-clock times only, leave it out",
        )


def _refuse_unreadable(
    source: SourceTable, column: str, text: pd.Series, parsed: pd.Series
) -> None:
    bad = parsed.isna().to_numpy()
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise source.error(
            row,
            column,
            f"{text.iloc[row]!r} is not an ISO 8601 timestamp "
            "(e.g. 2024-03-31T01:00:00+01:00, or 2024-03-31 01:00 with --timezone)",
        )


def _localise(
    source: SourceTable,
    column: str,
    wall: pd.Series,
    timezone: str,
    ambiguous: AmbiguousPolicy,
    series: pd.Series | None,
    series_name: str,
    pairs: bool,
) -> pd.Series:
    zone = ZoneInfo(check_zone(timezone))
    utc = wall.dt.tz_localize(zone, ambiguous="NaT", nonexistent="NaT").dt.tz_convert("UTC")
    odd = np.flatnonzero(utc.isna().to_numpy())
    if odd.size == 0:
        return utc.astype(_UTC_US)
    odd_wall = wall.iloc[odd]
    # pandas' ambiguous=True is the earlier instant of a repeated time (summer time)
    skipped = odd_wall.dt.tz_localize(zone, ambiguous=True, nonexistent="NaT").isna().to_numpy()
    if skipped.any():
        i = int(odd[skipped.argmax()])
        raise source.error(
            i,
            column,
            f"{wall.iloc[i]:%Y-%m-%d %H:%M} does not exist in {timezone} "
            f"(the clocks go forward over it); fix the time, or {_NO_OFFSET_HINT}",
        )
    keys = pd.DataFrame({"series": 0 if series is None else series.iloc[odd].to_numpy(),
                         "wall": odd_wall.to_numpy()})
    grouped = keys.groupby(["series", "wall"], sort=False)
    paired = pairs & (grouped["wall"].transform("size") >= 2).to_numpy()
    if ambiguous == "refuse" and not paired.all():
        i = int(odd[paired.argmin()])
        whose = f" for {series_name} {series.iloc[i]!r}" if series is not None else ""
        raise source.error(
            i,
            column,
            f"{wall.iloc[i]:%Y-%m-%d %H:%M} occurs twice in {timezone} (the clocks go back over "
            f"it) and appears once{whose}; give --ambiguous earliest (summer time, the "
            f"earlier instant) or --ambiguous latest (standard time), or {_NO_OFFSET_HINT}",
        )
    earlier = np.where(paired, grouped.cumcount().to_numpy() == 0, ambiguous == "earliest")
    utc.iloc[odd] = odd_wall.dt.tz_localize(zone, ambiguous=earlier).dt.tz_convert("UTC").array
    return utc.astype(_UTC_US)


class LocalTimeOptions(BaseModel):
    """Options shared by the commands that read timestamped files: the zone of naive local
    timestamps (checked against zoneinfo)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    timezone: TimeZoneName | None = Field(
        None,
        description="IANA time zone of naive local timestamps (leave out when the "
        "timestamps carry a UTC offset).",
    )
