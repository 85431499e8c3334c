"""Which values an input file may hold: finite numbers within what the quantity allows.

A value outside its :class:`Bound` (``inf``, ``nan``, a negative energy, a temperature no
weather station has recorded, ...) is never stored silently. By default the ingest refuses the
file with an :class:`ImplausibleValueError` naming file, line and column, and writes nothing;
with ``implausible="missing"`` (``--implausible missing``) such values are stored as missing
(NULL, like a blank cell) and counted in the ingest's summary; the readers refuse that too when
it would leave most of a series missing (a meter export:
:data:`~tasks.ingest.readings_file.EMPTIED_SHARE`), since a column whose values are mostly
implausible is in the wrong unit, not a few glitches.

Sensor tolerances are not physical limits: a real hygrometer reads up to a few per cent above
100 % in fog, and a pyranometer a few W/m2 below 0 at night (its thermal offset). A value just
past its bound, within the bound's *tolerance*, is therefore clipped to the bound and counted
(never refused); only values past the tolerance are implausible.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tasks.ingest.errors import MalformedSourceError

ImplausiblePolicy = Literal["refuse", "missing"]


class ImplausibleValueError(MalformedSourceError):
    """A value that cannot be a measurement of its quantity."""


@dataclass(frozen=True)
class Bound:
    """The values a measured quantity can take (inclusive), and why; values down to
    ``low - below`` and up to ``high + above`` are a sensor's tolerance, clipped to the bound."""

    low: float
    high: float
    unit: str
    why: str
    below: float = 0.0
    above: float = 0.0

    def describe(self) -> str:
        return (f"a finite value from {self.low - self.below:g} to {self.high + self.above:g} "
                f"{self.unit} ({self.why})")


@dataclass
class Tally:
    """Values of a file stored as missing (implausible) or clipped to their bound, counted over
    the columns :func:`check_column` checks."""

    implausible: int = 0
    clipped: int = 0


ENERGY_KWH = Bound(0.0, 1.0e6, "kWh", "an hour's consumption is never negative, and a building "
                   "drawing 1 GW is a power station")
REGISTER_KWH = Bound(0.0, 1.0e12, "kWh", "a meter register counts up from 0")
TEMPERATURE_C = Bound(-90.0, 60.0, "degC", "the coldest and hottest air ever recorded were "
                      "-89.2 and 56.7 degC")
HUMIDITY_PCT = Bound(0.0, 100.0, "%", "relative humidity; hygrometers read up to 5 % over "
                     "100 % near saturation, such readings are stored as 100 %", above=5.0)
IRRADIANCE_WM2 = Bound(0.0, 1500.0, "W/m2", "sunlight never makes it negative, and it reaches "
                       "about 1361 W/m2 above the atmosphere; a pyranometer's zero offset (up to "
                       "30 W/m2 in ISO 9060's class C) makes night readings down to -30, stored "
                       "as 0", below=30.0)
WIND_MS = Bound(0.0, 115.0, "m/s", "the strongest gust ever measured was 113 m/s")
FLOOR_AREA_M2 = Bound(1.0, 1.0e7, "m2", "a building's gross internal area; the largest buildings "
                      "have about 2 million m2")


def implausible_error(path: Path, label: str, line: int, column: str, value: float | None,
                      bound: Bound, count: int, scale: float = 1.0) -> ImplausibleValueError:
    """The refusal of an implausible ``value`` (in the file's own units; ``scale`` converts it
    into the bound's, and the converted value follows it), and of the ``count`` such values of
    the file."""
    shown = "nan" if value is not None and math.isnan(value) else f"{value:g}"
    if scale != 1.0 and shown != "nan":
        shown += f" ({value * scale:g} {bound.unit})"
    return ImplausibleValueError(
        f"{path}: {label} {line}, column {column!r}: {shown} is not {bound.describe()}"
        f"; {count} such value(s) in the file. Fix the file, or give --implausible missing to "
        "store such values as missing")


def check_column(values: pa.ChunkedArray | pa.Array, bound: Bound, *, path: Path, column: str,
                 lines: np.ndarray, policy: ImplausiblePolicy, tally: Tally, scale: float = 1.0,
                 label: str = "line", ceiling: bool = True) -> pa.ChunkedArray | pa.Array:
    """``values`` (times ``scale`` when compared, e.g. knots to m/s) checked against ``bound``;
    the values clipped or made missing are counted in ``tally``.

    Nulls pass. A value within the bound's tolerance is clipped to the bound (in the column's
    own units). Under ``"refuse"`` the first implausible value raises, naming ``path``, its
    line (``lines[i]`` for row ``i``; ``label`` says what the number counts, e.g. ``"row"``
    in a Parquet file) and ``column``; under ``"missing"`` every implausible value becomes null.
    With ``ceiling=False`` finite values past the bound's top (and its tolerance) are left as
    they are, for the caller to judge later: a meter export's readings above any hour's energy
    are first recognised as a register, whose fix is not ``--implausible missing``.
    """
    numbers = pc.multiply(pc.cast(values, pa.float64()), scale).to_numpy(zero_copy_only=False)
    with np.errstate(invalid="ignore"):
        left = (np.isfinite(numbers) & (numbers > bound.high + bound.above) if not ceiling
                else np.zeros(numbers.size, dtype=bool))
        bad = ~np.isnan(numbers) & ~((numbers >= bound.low - bound.below)
                                     & (numbers <= bound.high + bound.above)) & ~left
        low = ~bad & (numbers < bound.low)
        high = ~bad & ~left & (numbers > bound.high)
    bad |= pc.fill_null(pc.is_nan(pc.cast(values, pa.float64())), False).to_numpy(
        zero_copy_only=False)  # a nan written in the file, as opposed to a blank cell
    tally.clipped += int((low | high).sum())
    if (low | high).any():
        kept = pc.cast(values, pa.float64())
        kept = pc.if_else(pa.array(low), pa.scalar(bound.low / scale), kept)
        values = pc.if_else(pa.array(high), pa.scalar(bound.high / scale), kept)
    if not bad.any():
        return values
    if policy == "refuse":
        row = int(np.flatnonzero(bad)[0])
        raise implausible_error(path, label, int(lines[row]), column,
                                pc.cast(values, pa.float64())[row].as_py(), bound,
                                int(bad.sum()), scale)
    tally.implausible += int(bad.sum())
    return pc.if_else(pa.array(bad), pa.scalar(None, values.type), values)


def value_notes(implausible: int, clipped: int) -> list[str]:
    """What an ingest's summary says about the values it changed (none: an empty list)."""
    notes = []
    if implausible:
        notes.append(f"{implausible:,} implausible value(s) stored as missing")
    if clipped:
        notes.append(f"{clipped:,} value(s) just past their bound (a sensor's tolerance) "
                     "clipped to it")
    return notes
