"""An operator's list of buildings (CSV or Parquet) into the ``buildings`` table.

Its columns are :data:`BUILDINGS_FILE`'s (read through :mod:`~tasks.ingest.contract`: a column
mapping reads an asset register's own names, ids are printable text). A time zone must be one
:mod:`zoneinfo` knows (IANA, e.g. ``Europe/London``), and the holiday calendar one the
``holidays`` package has: the country, and the subdivision within it when given. A building
may declare its ``floor_area_m2`` (gross internal area, a number within
:data:`~tasks.ingest.plausibility.FLOOR_AREA_M2`; blank: not declared): with a
``building_type`` it is what a new meter's readings are judged against
(:mod:`~tasks.protocol.plausible_level`). Each row's ``source`` is the file's name. A
building already stored is updated (its row replaced: a column the file lacks, e.g. its floor
area, becomes unknown); the others are untouched; everything in one transaction.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import duckdb
import holidays
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import TypeAdapter, ValidationError

from tasks.ingest.contract import Column, CsvFormat, FileContract, SourceRows
from tasks.ingest.plausibility import FLOOR_AREA_M2
from tasks.ingest.timestamps import TimeZoneName
from tasks.warehouse.connection import transaction
from tasks.warehouse.schema import ensure_schema
from tasks.warehouse.slices import Slice, replace_slice

BUILDINGS_FILE = FileContract(
    "a buildings file",
    (Column("building_id", "id", what="building id", listed="--buildings"),
     Column("site_id", "id", what="site id"),
     Column("timezone"),
     Column("holiday_country"),
     Column("holiday_subdiv", required=False, filled=False),
     Column("building_type", "id", what="building type", required=False, filled=False),
     Column("floor_area_m2", "number", required=False, filled=False, bound=FLOOR_AREA_M2)),
    key=("building_id",), repeated="building {building_id!r} is listed twice")
"""What a buildings file holds; its time zones and holiday calendars are checked below."""


@dataclass(frozen=True)
class BuildingsBatch:
    """A checked buildings file, as ``buildings`` rows."""

    path: str
    buildings: pa.Table
    read_seconds: float


@dataclass(frozen=True)
class BuildingsSummary:
    """What a buildings ingest wrote."""

    buildings: int
    new: int
    updated: int
    seconds: float

    def line(self) -> str:
        return f"wrote {self.buildings:,} building(s) ({self.new:,} new, {self.updated:,} updated)"


@cache
def _calendar_problem(country: str, subdiv: str | None) -> str | None:
    """Why ``holidays`` has no calendar for (country, subdiv), or ``None`` when it has one."""
    try:
        holidays.country_holidays(country, subdiv=subdiv)
    except NotImplementedError as error:
        return str(error)
    return None


_ZONES = TypeAdapter(list[TimeZoneName])


def _check_zones(at: SourceRows, zones: pd.Series) -> None:
    try:
        _ZONES.validate_python(zones.tolist())
    except ValidationError as error:
        problem = error.errors()[0]  # the first row's
        raise at.error(problem["loc"][0], "timezone", str(problem["ctx"]["error"])) from None


def _check_calendars(at: SourceRows, countries: pd.Series, subdivs: pd.Series) -> None:
    for row, (country, subdiv) in enumerate(zip(countries, subdivs, strict=True)):
        if _calendar_problem(country, None) is not None:
            raise at.error(row, "holiday_country", f"no holiday calendar for country {country!r} "
                           "in the holidays package (an ISO 3166 code, e.g. GB)")
        if subdiv is not None and _calendar_problem(country, subdiv) is not None:
            raise at.error(row, "holiday_subdiv", f"{subdiv!r} is not a subdivision of the "
                           f"{country!r} holiday calendar (holidays package): "
                           f"{_calendar_problem(country, subdiv)}")


def _check_areas(at: SourceRows, areas: pa.Array | pa.ChunkedArray) -> None:
    """Refuse the first declared floor area outside :data:`FLOOR_AREA_M2` (a blank cell
    declares none). Its own words, not the readings' ``--implausible missing``: a wrong area
    would make every reading of a new meter look implausible, so it is fixed or left out."""
    valid = pc.is_valid(areas).to_numpy(zero_copy_only=False)
    values = pc.fill_null(areas, 1.0).to_numpy(zero_copy_only=False)
    with np.errstate(invalid="ignore"):
        bad = valid & ~((values >= FLOOR_AREA_M2.low) & (values <= FLOOR_AREA_M2.high))
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        low, high = FLOOR_AREA_M2.low, FLOOR_AREA_M2.high
        raise at.error(row, "floor_area_m2", (
            f"{values[row]:g} is not a floor area: a number of square metres from {low:,.0f} "
            f"to {high:,.0f} ({FLOOR_AREA_M2.why}); fix it or leave the cell blank"))


def load_buildings(path: str | Path, form: CsvFormat | None = None) -> BuildingsBatch:
    """Read and check a buildings file (a CSV written as ``form`` says, its columns mapped as
    a :class:`FileOptions` ``form`` says); no warehouse involved."""
    began = time.perf_counter()
    cells = BUILDINGS_FILE.judge(BUILDINGS_FILE.open(path, form), bounds=False)
    _check_areas(cells.at, cells["floor_area_m2"])
    _check_zones(cells.at, cells.strings("timezone"))
    _check_calendars(cells.at, cells.strings("holiday_country"), cells.strings("holiday_subdiv"))
    table = pa.table({name: cells[name] for name in BUILDINGS_FILE.names})
    table = table.append_column("source", pa.repeat(pa.scalar(cells.at.path.name), table.num_rows))
    return BuildingsBatch(str(cells.at.path), table, time.perf_counter() - began)


def write_buildings(con: duckdb.DuckDBPyConnection, batch: BuildingsBatch) -> BuildingsSummary:
    """Replace the rows of the file's buildings (new ones are added) in one transaction."""
    began = time.perf_counter()
    ensure_schema(con)
    ids = batch.buildings["building_id"].to_pylist()
    with transaction(con):
        updated, inserted = replace_slice(con, "buildings", batch.buildings,
                                          Slice(where_in={"building_id": ids}),
                                          own_transaction=False)
    return BuildingsSummary(inserted, inserted - updated, updated,
                            batch.read_seconds + time.perf_counter() - began)
