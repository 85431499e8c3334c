"""Prefect flows that fill the warehouse's input tables (run through Prefect or directly,
:mod:`~wadiro_fleet.flows.engine`)."""

from __future__ import annotations

from prefect import flow
from wadiro_fleet.flows.engine import current_engine
from wadiro_fleet.tasks.ingest.buildings_file import (
    BuildingsSummary,
    load_buildings_task,
    write_buildings_task,
)
from wadiro_fleet.tasks.ingest.cambridge import (
    IngestSummary,
    load_cambridge_task,
    write_cambridge_task,
)
from wadiro_fleet.tasks.ingest.cambridge_archive import ArchiveSelection
from wadiro_fleet.tasks.ingest.source_files import FileOptions
from wadiro_fleet.tasks.ingest.readings_file import (
    ReadingsOptions,
    ReadingsSummary,
    load_readings_task,
    write_readings_task,
)
from wadiro_fleet.tasks.ingest.synthetic_fleet import (
    FleetSpec,
    SyntheticSummary,
    ingest_synthetic_task,
)
from wadiro_fleet.tasks.ingest.weather_file import (
    WeatherOptions,
    WeatherSummary,
    load_weather_task,
    write_weather_task,
)
from wadiro_fleet.tasks.warehouse.connection import DEFAULT_WAREHOUSE

__all__ = ["ingest_buildings_flow", "ingest_cambridge_flow", "ingest_readings_flow",
           "ingest_synthetic_flow", "ingest_weather_flow"]


@flow(name="ingest-cambridge")
def ingest_cambridge_flow(
    selection: ArchiveSelection, warehouse: str = DEFAULT_WAREHOUSE
) -> IngestSummary:
    """Read and check the Cambridge archive selection, then write it in one transaction."""
    engine = current_engine()
    batch = engine.call(load_cambridge_task, selection)
    return engine.call(write_cambridge_task, warehouse, batch)


@flow(name="ingest-synthetic")
def ingest_synthetic_flow(spec: FleetSpec, warehouse: str = DEFAULT_WAREHOUSE) -> SyntheticSummary:
    """Generate a synthetic fleet and write it in one transaction."""
    return current_engine().call(ingest_synthetic_task, warehouse, spec)


@flow(name="ingest-buildings")
def ingest_buildings_flow(
    path: str, warehouse: str = DEFAULT_WAREHOUSE, form: FileOptions = FileOptions()
) -> BuildingsSummary:
    """Read and check an operator's buildings file, then add or update its buildings."""
    engine = current_engine()
    batch = engine.call(load_buildings_task, path, form)
    return engine.call(write_buildings_task, warehouse, batch)


@flow(name="ingest-readings")
def ingest_readings_flow(
    path: str, options: ReadingsOptions, warehouse: str = DEFAULT_WAREHOUSE
) -> ReadingsSummary:
    """Read, check and sum to hours an operator's meter export, then replace each of its
    buildings' range of hours in one transaction."""
    engine = current_engine()
    batch = engine.call(load_readings_task, path, options)
    return engine.call(write_readings_task, warehouse, batch)


@flow(name="ingest-weather")
def ingest_weather_flow(
    path: str, options: WeatherOptions, warehouse: str = DEFAULT_WAREHOUSE
) -> WeatherSummary:
    """Read and check an operator's weather feed (observed or forecast), then write it in one
    transaction."""
    engine = current_engine()
    batch = engine.call(load_weather_task, path, options)
    return engine.call(write_weather_task, warehouse, batch)
