"""Whether a building's level of consumption is one it can have: an order-of-magnitude check.

A unit mistake (a Wh register read as kWh: 1,000x), a meter stuck at zero or a solver gone
astray moves a building's load by orders of magnitude, where real buildings differ from their
peers by a few times at most. So a building's **level**, its mean hourly energy (kWh per hour),
is judged against what is known of it, each yardstick allowing :data:`ORDER_OF_MAGNITUDE`
either way:

* **its declared size and type** (``buildings.floor_area_m2`` and ``building_type``): the
  typical annual electricity intensity of its type (kWh per m2 of floor area per year), from
  CIBSE TM46:2008 *Energy benchmarks*, Table 1 (the benchmarks behind the UK's Display Energy
  Certificates), times its floor area, over the 8,760 hours of a year. A Display Energy
  Certificate's operational rating is the building's use against that benchmark (100 = typical,
  G = over 150): real buildings span about a quarter to five times it, inside a factor of ten;
* **the fleet** (a building without a declared size, or of a type not in the table): the range
  of the fleet's established buildings' levels (their 1st to 99th percentile, at least
  :data:`MIN_FLEET` buildings, but within ten times their median), widened by the factor: a
  level ten times beyond every building the operator holds, or a hundred times its median
  building's, needs a declared size;
* **its own history** (a forecast): the building's level over the usable hours before the
  forecast week.

A level beyond its yardstick that a factor of :data:`UNIT_SLIP` brings within it
(:meth:`Yardstick.unit_slip`) is most likely a unit mistake, which the caller can name.

Pure: the callers bring the levels (the ingest from the file and the stored readings, the
publication step from the window).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

ORDER_OF_MAGNITUDE = 10.0
"""A level more than this many times above (or below) its yardstick is implausible."""

MIN_FLEET = 5
"""Fewer established buildings than this are no fleet to judge a building against."""

HOURS_PER_YEAR = 8760.0

TM46_ELECTRICITY_KWH_M2: dict[str, float] = {
    "general office": 95, "high street agency": 140, "general retail": 165,
    "large non-food shop": 70, "small food store": 310, "large food store": 400,
    "restaurant": 90, "bar, pub or licensed club": 130, "hotel": 105,
    "cultural activities": 70, "entertainment halls": 150, "swimming pool centre": 245,
    "fitness and health centre": 160, "dry sports and leisure facility": 95,
    "covered car park": 20, "public buildings with light usage": 20,
    "schools and seasonal public buildings": 40, "university campus": 80, "clinic": 70,
    "hospital - clinical and research": 90, "long term residential": 65,
    "general accommodation": 60, "emergency services": 70,
    "laboratory or operating theatre": 160, "public waiting or circulation": 30,
    "terminal": 75, "workshop": 35, "storage facility": 35, "cold storage": 145,
}
"""CIBSE TM46:2008, Table 1: typical electricity use of each benchmark category, kWh per m2
of floor area (gross internal area) per year."""

TYPE_ALIASES: dict[str, str] = {
    "office": "general office", "retail": "general retail", "shop": "general retail",
    "supermarket": "large food store", "pub": "bar, pub or licensed club",
    "bar": "bar, pub or licensed club", "museum": "cultural activities",
    "library": "cultural activities", "theatre": "entertainment halls",
    "cinema": "entertainment halls", "swimming pool": "swimming pool centre",
    "gym": "fitness and health centre", "sports": "dry sports and leisure facility",
    "car park": "covered car park", "school": "schools and seasonal public buildings",
    "university": "university campus", "academic": "university campus",
    "hospital": "hospital - clinical and research", "care home": "long term residential",
    "residential": "general accommodation", "accommodation": "general accommodation",
    "laboratory": "laboratory or operating theatre", "lab": "laboratory or operating theatre",
    "warehouse": "storage facility", "storage": "storage facility",
    "fire station": "emergency services", "police station": "emergency services",
    "airport": "terminal", "station": "terminal", "factory": "workshop",
}
"""Everyday names of building types (an asset register's) -> TM46 category."""


UNIT_SLIP = 1000.0
"""The factor a unit mistake makes: Wh read as kWh (1,000 times too high), MWh read as kWh."""


def figure(value: float) -> str:
    """An amount (a level in kWh/h) to four significant figures, grouped by commas and never
    in exponent form (873,000 rather than 8.73e+05: an operator reads it)."""
    rounded = float(f"{value:.4g}")
    return f"{rounded:,.0f}" if abs(rounded) >= 1e4 else f"{value:,.4g}"


def _key(building_type: str) -> str:
    return re.sub(r"[\s_]+", " ", building_type.strip().lower())


def typical_intensity(building_type: str | None) -> float | None:
    """The TM46 typical electricity intensity (kWh/m2/year) of a building type, by its TM46
    category's name or an everyday alias (case, spaces and underscores ignored); ``None`` for a
    type the table does not know."""
    if not building_type:
        return None
    key = _key(building_type)
    key = TYPE_ALIASES.get(key, key)
    value = TM46_ELECTRICITY_KWH_M2.get(key)
    return None if value is None else float(value)


@dataclass(frozen=True)
class Yardstick:
    """A typical level (kWh per hour) and what it comes from; levels within
    :data:`ORDER_OF_MAGNITUDE` of ``low`` .. ``high`` are plausible."""

    low: float
    high: float
    source: str
    """e.g. ``"its declared 1,200 m2 of general office (TM46: 95 kWh/m2/year)"``."""

    def judge(self, level: float, what: str = "a mean") -> str | None:
        """Why ``level`` (kWh per hour) is implausible against this yardstick, or ``None``:
        ``"<what> of 5,100 kWh/h is 941x 5.42 kWh/h, the level of <source>"``."""
        if not np.isfinite(level):
            return f"{what} of {level} kWh/h is no level"
        if level > self.high * ORDER_OF_MAGNITUDE:
            factor = level / self.high
        elif level < self.low / ORDER_OF_MAGNITUDE:
            factor = level / self.low
        else:
            return None
        shown = (f"{factor:,.0f}x" if factor >= 100 else f"{factor:.3g}x" if factor >= 1
                 else f"{factor:.2g}x")
        return (f"{what} of {figure(level)} kWh/h is {shown} {self.typical()}, the level of "
                f"{self.source}")

    def typical(self) -> str:
        """The typical level in words: ``5.422 kWh/h``, ``11.1 to 118.9 kWh/h``, or ``up to
        1,000 kWh/h`` for a yardstick without a lower end (``low`` 0)."""
        if self.low == self.high:
            return f"{figure(self.low)} kWh/h"
        if self.low <= 0:
            return f"up to {figure(self.high)} kWh/h"
        return f"{figure(self.low)} to {figure(self.high)} kWh/h"

    def unit_slip(self, level: float) -> float | None:
        """The factor, 1/:data:`UNIT_SLIP` or :data:`UNIT_SLIP`, that makes an implausible
        ``level`` plausible (a level 1,000 times too high: Wh read as kWh), or ``None`` when
        neither does or it is plausible as it is. At most one can: a level above ten times the
        yardstick's top stays above it when multiplied, and one below stays below."""
        if self.judge(level) is None:
            return None
        return next((factor for factor in (1 / UNIT_SLIP, UNIT_SLIP)
                     if self.judge(level * factor) is None), None)


def declared_yardstick(building_type: str | None,
                       floor_area_m2: float | None) -> Yardstick | None:
    """The level a building's declared type and floor area make typical (``None`` when either
    is missing or the type is not in TM46)."""
    intensity = typical_intensity(building_type)
    if intensity is None or floor_area_m2 is None or not floor_area_m2 > 0:
        return None
    level = intensity * floor_area_m2 / HOURS_PER_YEAR
    return Yardstick(level, level, f"its declared {floor_area_m2:,.0f} m2 of {building_type} "
                                   f"(CIBSE TM46: {intensity:g} kWh/m2/year)")


def fleet_yardstick(levels: Iterable[float]) -> Yardstick | None:
    """The range of the fleet's established buildings' levels (kWh per hour): their 1st to
    99th percentile, but no further than :data:`ORDER_OF_MAGNITUDE` times from their median
    (so a level more than a hundred times the median building's is never plausible without a
    declared size, however large the fleet's largest: a 3.6 kWh/h meter's Wh read as kWh beside
    an 830 kWh/h campus building); ``None`` with fewer than :data:`MIN_FLEET` positive ones."""
    values = np.asarray([v for v in levels if np.isfinite(v) and v > 0], dtype=float)
    if values.size < MIN_FLEET:
        return None
    low, median, high = (float(q) for q in np.quantile(values, [0.01, 0.5, 0.99]))
    return Yardstick(max(low, median / ORDER_OF_MAGNITUDE), min(high, median * ORDER_OF_MAGNITUDE),
                     f"the fleet's {values.size:,} established buildings")


def history_yardstick(level: float | None) -> Yardstick | None:
    """A building's own level over its usable history (kWh per hour), ``None`` without one."""
    if level is None or not np.isfinite(level) or level <= 0:
        return None
    return Yardstick(level, level, "its own usable history")


def yardstick(building_type: str | None, floor_area_m2: float | None,
              fleet: Yardstick | None) -> Yardstick | None:
    """What a new building (no history of its own) is judged against: its declared size and
    type when they are known, else the fleet."""
    return declared_yardstick(building_type, floor_area_m2) or fleet
