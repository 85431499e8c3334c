"""An operator's portfolios (CSV or Parquet) into the ``portfolios`` table, and reading them back.

Its columns are :data:`PORTFOLIOS_FILE`'s, one row per building of a portfolio; a building may
be in several portfolios. Every portfolio the file names is replaced by the file's buildings (a
building left out of it leaves the portfolio); portfolios the file does not name are kept; all
in one transaction. The portfolio ``all`` (every building) exists in every warehouse and cannot
be defined by a file. What a portfolio's forecast is:
:mod:`~tasks.warehouse.portfolio_sql`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from tasks.ingest.contract import Column, FileContract, FileOptions
from tasks.warehouse.connection import transaction
from tasks.warehouse.portfolio_sql import ALL
from tasks.warehouse.schema import ensure_schema
from tasks.warehouse.selection import refuse_unknown_ids
from tasks.warehouse.slices import Slice, replace_slice

PORTFOLIOS_FILE = FileContract(
    "a portfolios file",
    (Column("portfolio_id", "id", what="portfolio id", listed="--portfolios"),
     Column("building_id", "id", what="building id")),
    key=("portfolio_id", "building_id"),
    repeated="building {building_id!r} is listed twice in portfolio {portfolio_id!r}")
"""What a portfolios file holds: every cell filled, ids printable, a portfolio id without
commas (it is typed into ``--portfolios``), no (portfolio, building) pair twice."""
COLUMNS = PORTFOLIOS_FILE.names


@dataclass(frozen=True)
class PortfoliosBatch:
    """A checked portfolios file, as ``portfolios`` rows."""

    path: str
    rows: pa.Table
    read_seconds: float


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


def load_portfolios(path: str | Path, form: FileOptions | None = None) -> PortfoliosBatch:
    """Read and check a portfolios file (:data:`PORTFOLIOS_FILE`), its columns named as
    ``form``'s mapping reads them (``--columns``); no warehouse involved. The reserved id
    ``all`` is refused too, naming the line."""
    began = time.perf_counter()
    cells = PORTFOLIOS_FILE.read(path, form)
    reserved = pc.equal(cells["portfolio_id"], ALL).to_numpy(zero_copy_only=False)
    if reserved.any():
        raise cells.at.error(int(reserved.argmax()), "portfolio_id",
                             f"the portfolio {ALL!r} is every building, in every warehouse; "
                             "give your portfolio another name")
    return PortfoliosBatch(str(cells.at.path), pa.table({name: cells[name] for name in COLUMNS}),
                           time.perf_counter() - began)


def write_portfolios(con: duckdb.DuckDBPyConnection, batch: PortfoliosBatch
                     ) -> PortfoliosSummary:
    """Refuse buildings the warehouse does not know, then replace every portfolio the file
    names with its rows, in one transaction."""
    began = time.perf_counter()
    ensure_schema(con)
    rows = batch.rows
    buildings = list(dict.fromkeys(rows["building_id"].to_pylist()))
    refuse_unknown_ids(con, batch.path, "building_id", buildings)
    names = list(dict.fromkeys(rows["portfolio_id"].to_pylist()))
    with transaction(con):
        replaced, inserted = replace_slice(con, "portfolios", rows,
                                           Slice(where_in={"portfolio_id": names}),
                                           own_transaction=False)
    return PortfoliosSummary(len(names), inserted, replaced,
                             batch.read_seconds + time.perf_counter() - began)
