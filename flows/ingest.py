"""Prefect flows that fill the warehouse's input tables (run through Prefect or directly,
:mod:`~flows.engine`): each reads and checks its source first, writing nothing on
any error, then writes it in one transaction."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import duckdb
from prefect import flow

from tasks.errors import PipelineError
from tasks.ingest.buildings_file import (
    BuildingsSummary,
    load_buildings,
    write_buildings,
)
from tasks.ingest.cambridge_archive import ArchiveSelection, IngestSummary, ingest_cambridge
from tasks.ingest.contract import FileOptions
from tasks.ingest.portfolios_file import PortfoliosSummary, load_portfolios, write_portfolios
from tasks.ingest.readings_file import (
    ReadingsOptions,
    ReadingsSummary,
    load_readings,
    write_readings,
)
from tasks.ingest.synthetic_fleet import FleetSpec, SyntheticSummary, ingest_synthetic
from tasks.ingest.weather_file import (
    WeatherOptions,
    WeatherSummary,
    load_weather,
    write_weather,
)
from tasks.warehouse.connection import (
    DEFAULT_WAREHOUSE,
    UNCHANGED,
    ResourceError,
    connect,
    out_of_memory,
)

B = TypeVar("B")
S = TypeVar("S")


def _read(load: Callable[..., B], path: str, *options: object) -> B:
    """``load(path, *options)``: a file too large for the memory left is one line naming it and
    what to do (the whole file is read and checked before anything is written)."""
    try:
        return load(path, *options)
    except Exception as error:
        if isinstance(error, PipelineError) or not out_of_memory(error):
            raise  # a refused file's own line (its text may hold any words)
        raise ResourceError(
            f"cannot read {path}: the process ran out of memory reading the whole file "
            f"({type(error).__name__}: {str(error)[:120]}); split it into smaller files (e.g. a "
            "month of rows each) and ingest them one after another, or raise the memory limit "
            f"(`ulimit -v`, the service's MemoryMax) or free memory; {UNCHANGED}") from None


def _write(warehouse: str, write: Callable[[duckdb.DuckDBPyConnection, B], S], batch: B,
           *, create: bool = True) -> S:
    """Write a checked batch into ``warehouse`` (created when ``create``, else it must exist)."""
    with connect(warehouse, create=create) as con:
        return write(con, batch)


@flow(name="ingest-cambridge")
def ingest_cambridge_flow(
    selection: ArchiveSelection, warehouse: str = DEFAULT_WAREHOUSE
) -> IngestSummary:
    """Read and check the Cambridge archive selection, then write it in one transaction."""
    return ingest_cambridge(warehouse, selection.path, selection.buildings, selection.start,
                            selection.end, selection.implausible)


@flow(name="ingest-synthetic")
def ingest_synthetic_flow(spec: FleetSpec, warehouse: str = DEFAULT_WAREHOUSE) -> SyntheticSummary:
    """Generate a synthetic fleet and write it in one transaction."""
    return ingest_synthetic(warehouse, spec)


@flow(name="ingest-buildings")
def ingest_buildings_flow(
    path: str, warehouse: str = DEFAULT_WAREHOUSE, form: FileOptions = FileOptions()
) -> BuildingsSummary:
    """Read and check an operator's buildings file, then add or update its buildings."""
    return _write(warehouse, write_buildings, _read(load_buildings, path, form))


@flow(name="ingest-readings")
def ingest_readings_flow(
    path: str, options: ReadingsOptions, warehouse: str = DEFAULT_WAREHOUSE
) -> ReadingsSummary:
    """Read, check and sum to hours an operator's meter export, refuse a level a unit mistake
    made (against each building's stored hours, or a new meter's declared size or the fleet),
    then write its hours in one transaction."""
    return _write(warehouse, write_readings, _read(load_readings, path, options), create=False)


@flow(name="ingest-weather")
def ingest_weather_flow(
    path: str, options: WeatherOptions, warehouse: str = DEFAULT_WAREHOUSE
) -> WeatherSummary:
    """Read and check an operator's weather feed (observed or forecast), then write it in one
    transaction."""
    return _write(warehouse, write_weather, _read(load_weather, path, options), create=False)


@flow(name="ingest-portfolios")
def ingest_portfolios_flow(
    path: str, warehouse: str = DEFAULT_WAREHOUSE, form: FileOptions = FileOptions()
) -> PortfoliosSummary:
    """Read and check an operator's portfolios file, then replace the portfolios it names."""
    return _write(warehouse, write_portfolios, _read(load_portfolios, path, form), create=False)
