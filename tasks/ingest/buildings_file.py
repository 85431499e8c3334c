"""An operator's list of buildings (CSV or Parquet) into the ``buildings`` table.

Columns: ``building_id, site_id, timezone, holiday_country`` (required, every cell filled) and
``holiday_subdiv, building_type`` (optional columns, blank cells allowed). A time zone must be
one :mod:`zoneinfo` knows (IANA, e.g. ``Europe/London``), and the holiday calendar one the
``holidays`` package has: the country, and the subdivision within it when given. Ids and the
building type are printable text (:mod:`~wadiro_fleet.tasks.ingest.identifiers`: no control or
text-direction characters). A column mapping (``--columns "Asset Name=building_id,Site=site_id"``,
``--columns-file``) reads an asset register's own column names. Each row's
``source`` is the file's name. A building already stored is updated (its row replaced); the
others are untouched; everything in one transaction.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import duckdb
import holidays
import pandas as pd
import pyarrow as pa
from pydantic import TypeAdapter, ValidationError
from wadiro_fleet.tasks.ingest.identifiers import check_ids
from wadiro_fleet.tasks.ingest.source_files import CsvFormat, FileOptions, SourceRows, read_source
from wadiro_fleet.tasks.ingest.timestamps import TimeZoneName
from wadiro_fleet.tasks.warehouse.connection import connect, transaction
from wadiro_fleet.tasks.warehouse.schema import ensure_schema
from wadiro_fleet.tasks.warehouse.slices import Slice, replace_slice

__all__ = [
    "BuildingsBatch",
    "BuildingsSummary",
    "ingest_buildings",
    "load_buildings",
    "write_buildings",
]

REQUIRED = ("building_id", "site_id", "timezone", "holiday_country")
OPTIONAL = ("holiday_subdiv", "building_type")


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
            raise at.error(
                row,
                "holiday_country",
                f"no holiday calendar for country "
                f"{country!r} in the holidays package (an ISO 3166 code, e.g. GB)",
            )
        if subdiv is not None and _calendar_problem(country, subdiv) is not None:
            raise at.error(
                row,
                "holiday_subdiv",
                f"{subdiv!r} is not a subdivision of the "
                f"{country!r} holiday calendar (holidays package): "
                f"{_calendar_problem(country, subdiv)}",
            )


def load_buildings(path: str | Path, form: CsvFormat | None = None) -> BuildingsBatch:
    """Read and check a buildings file (a CSV written as ``form`` says, its columns mapped as
    a :class:`FileOptions` ``form`` says); no warehouse involved."""
    began = time.perf_counter()
    mapping = form.column_mapping() if isinstance(form, FileOptions) else None
    if mapping:
        mapping.check_targets(Path(path), (*REQUIRED, *OPTIONAL), "a buildings file")
    source = read_source(path, required=REQUIRED, optional=OPTIONAL, form=form, mapping=mapping)
    columns = {name: source.text(name, required=True) for name in REQUIRED}
    for name in OPTIONAL:
        columns[name] = (
            source.text(name, required=False)
            if name in source.columns
            else pd.Series([None] * source.rows, dtype=object)
        )
    ids = columns["building_id"]
    at = source.at
    for name, what in (("building_id", "building id"), ("site_id", "site id"),
                       ("building_type", "building type")):
        check_ids(at, name, columns[name], what)
    commas = ids.str.contains(",", regex=False).to_numpy()
    if commas.any():
        row = int(commas.argmax())
        raise at.error(
            row, "building_id",
            f"building id {ids.iloc[row]!r} holds a comma, which separates ids in --buildings "
            "(it could never be selected); rename it, e.g. with '-' or '_'")
    repeated = ids.duplicated().to_numpy()
    if repeated.any():
        second = int(repeated.argmax())
        first = int((ids == ids.iloc[second]).to_numpy().argmax())
        raise at.error(
            second,
            "building_id",
            f"building {ids.iloc[second]!r} is listed "
            f"twice ({at.where(first)} and {at.where(second)})",
        )
    _check_zones(at, columns["timezone"])
    _check_calendars(at, columns["holiday_country"], columns["holiday_subdiv"])
    table = pa.table(
        {
            name: pa.array(columns[name].tolist(), pa.string(), from_pandas=True)
            for name in (*REQUIRED, *OPTIONAL)
        }
    )
    table = table.append_column("source", pa.repeat(pa.scalar(source.path.name), table.num_rows))
    return BuildingsBatch(str(source.path), table, time.perf_counter() - began)


def write_buildings(con: duckdb.DuckDBPyConnection, batch: BuildingsBatch) -> BuildingsSummary:
    """Replace the rows of the file's buildings (new ones are added) in one transaction."""
    began = time.perf_counter()
    ensure_schema(con)
    ids = batch.buildings["building_id"].to_pylist()
    with transaction(con):
        updated, inserted = replace_slice(
            con,
            "buildings",
            batch.buildings,
            Slice(where_in={"building_id": ids}),
            own_transaction=False,
        )
    return BuildingsSummary(
        inserted, inserted - updated, updated, batch.read_seconds + time.perf_counter() - began
    )


def ingest_buildings(warehouse: str | Path, path: str | Path,
                     form: CsvFormat | None = None) -> BuildingsSummary:
    """Load and check the file, then write it to the warehouse file."""
    batch = load_buildings(path, form)
    with connect(warehouse) as con:
        return write_buildings(con, batch)
