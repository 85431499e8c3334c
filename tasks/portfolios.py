"""An operator's portfolios (CSV or Parquet) into the ``portfolios`` table, and reading them back.

Columns: ``portfolio_id, building_id``, one row per building of a portfolio; a building may be
in several portfolios. Every portfolio the file names is replaced by the file's buildings (a
building left out of it leaves the portfolio); portfolios the file does not name are kept; all
in one transaction. The portfolio ``all`` (every building) exists in every warehouse and cannot
be defined by a file. What a portfolio's forecast is:
:mod:`~wadiro_fleet.tasks.warehouse.portfolio_sql`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pyarrow as pa
from wadiro_fleet.tasks.errors import UnknownBuildingError
from wadiro_fleet.tasks.ingest.source_files import CsvFormat, read_source
from wadiro_fleet.tasks.warehouse.connection import connect, transaction
from wadiro_fleet.tasks.warehouse.portfolio_sql import ALL
from wadiro_fleet.tasks.warehouse.schema import ensure_schema
from wadiro_fleet.tasks.warehouse.selection import ids_not_in_buildings, shown_ids
from wadiro_fleet.tasks.warehouse.slices import Slice, replace_slice

COLUMNS = ("portfolio_id", "building_id")


@dataclass(frozen=True)
class PortfoliosSummary:
    """What a portfolios ingest wrote."""

    portfolios: int
    buildings: int
    """Rows written: (portfolio, building) pairs."""
    replaced: int
    """Stored rows of the file's portfolios that the file replaced."""
    seconds: float

    def line(self) -> str:
        return (f"wrote {self.portfolios:,} portfolio(s) with {self.buildings:,} building "
                f"membership(s) (replacing {self.replaced:,} stored)")


def load_portfolios(path: str | Path, form: CsvFormat | None = None) -> pa.Table:
    """Read and check a portfolios file; no warehouse involved. Refused, naming the line: a
    blank cell, the reserved id ``all``, an id holding a comma (it separates ids on the
    command line), a pair listed twice."""
    source = read_source(path, required=COLUMNS, optional=(), form=form)
    portfolio = source.text("portfolio_id", required=True)
    building = source.text("building_id", required=True)
    for row, name in enumerate(portfolio):
        if name == ALL:
            raise source.at.error(row, "portfolio_id", f"the portfolio {ALL!r} is every building, "
                               "in every warehouse; give your portfolio another name")
        if "," in name:
            raise source.at.error(row, "portfolio_id", f"portfolio id {name!r} holds a comma, "
                               "which separates ids on the command line; rename it")
    pairs = list(zip(portfolio, building, strict=True))
    seen: dict[tuple[str, str], int] = {}
    for row, pair in enumerate(pairs):
        if pair in seen:
            raise source.at.error(row, "building_id", f"building {pair[1]!r} is listed twice in "
                               f"portfolio {pair[0]!r} ({source.at.where(seen[pair])} and "
                               f"{source.at.where(row)})")
        seen[pair] = row
    return pa.table({"portfolio_id": pa.array(list(portfolio), pa.string()),
                     "building_id": pa.array(list(building), pa.string())})


def write_portfolios(con: duckdb.DuckDBPyConnection, rows: pa.Table,
                     path: str | Path = "the file") -> PortfoliosSummary:
    """Refuse buildings the warehouse does not know, then replace every portfolio ``rows``
    names with its rows, in one transaction."""
    began = time.perf_counter()
    ensure_schema(con)
    buildings = list(dict.fromkeys(rows["building_id"].to_pylist()))
    unknown = ids_not_in_buildings(con, "building_id", buildings)
    if unknown:
        raise UnknownBuildingError(
            f"{path}: {len(unknown)} building id(s) not in the buildings table: "
            f"{shown_ids(unknown)}; ingest them first (wadiro ingest buildings FILE)")
    names = list(dict.fromkeys(rows["portfolio_id"].to_pylist()))
    with transaction(con):
        replaced, inserted = replace_slice(con, "portfolios", rows,
                                           Slice(where_in={"portfolio_id": names}),
                                           own_transaction=False)
    return PortfoliosSummary(len(names), inserted, replaced, time.perf_counter() - began)


def ingest_portfolios(warehouse: str | Path, path: str | Path,
                      form: CsvFormat | None = None) -> PortfoliosSummary:
    """Load and check the file, then write it to the warehouse in one transaction."""
    began = time.perf_counter()
    rows = load_portfolios(path, form)
    with connect(warehouse, create=False) as con:
        summary = write_portfolios(con, rows, path)
    return PortfoliosSummary(summary.portfolios, summary.buildings, summary.replaced,
                             time.perf_counter() - began)


__all__ = ["COLUMNS", "PortfoliosSummary", "ingest_portfolios", "load_portfolios",
           "write_portfolios"]
