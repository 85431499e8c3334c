"""The ``wadiro ingest`` commands: an option per field of each ingest's options model."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from cyclopts import Parameter

from flows.cli import NewWarehouse, Warehouse, run_ingest
from tasks.ingest.cambridge_archive import ArchiveSelection
from tasks.ingest.contract import FileOptions
from tasks.ingest.readings_file import ReadingsOptions
from tasks.ingest.synthetic_fleet import FleetSpec
from tasks.ingest.weather_file import WeatherOptions
from tasks.warehouse.connection import DEFAULT_WAREHOUSE

SourceFile = Annotated[Path, Parameter(
    name="FILE", help="A .csv or .parquet file (see README, 'Bring your own data').")]


def cambridge(*, settings: Annotated[ArchiveSelection, Parameter(name="*")],
              warehouse: NewWarehouse = Path(DEFAULT_WAREHOUSE)) -> None:
    """``wadiro ingest cambridge`` (its help: :data:`~flows.cli.LAZY_HELP`)."""
    run_ingest("cambridge", warehouse, selection=settings)


def synthetic(*, settings: Annotated[FleetSpec, Parameter(name="*")],
              warehouse: NewWarehouse = Path(DEFAULT_WAREHOUSE)) -> None:
    """``wadiro ingest synthetic`` (its help: :data:`~flows.cli.LAZY_HELP`)."""
    run_ingest("synthetic", warehouse, spec=settings)


def buildings(file: SourceFile, /, *,
              settings: Annotated[FileOptions, Parameter(name="*")] = FileOptions(),
              warehouse: NewWarehouse = Path(DEFAULT_WAREHOUSE)) -> None:
    """``wadiro ingest buildings`` (its help: :data:`~flows.cli.LAZY_HELP`)."""
    run_ingest("buildings", warehouse, path=str(file), form=settings)


def readings(file: SourceFile, /, *,
             settings: Annotated[ReadingsOptions, Parameter(name="*")] = ReadingsOptions(),
             warehouse: Warehouse = Path(DEFAULT_WAREHOUSE)) -> None:
    """``wadiro ingest readings`` (its help: :data:`~flows.cli.LAZY_HELP`)."""
    run_ingest("readings", warehouse, path=str(file), options=settings)


def weather(file: SourceFile, /, *, settings: Annotated[WeatherOptions, Parameter(name="*")],
            warehouse: Warehouse = Path(DEFAULT_WAREHOUSE)) -> None:
    """``wadiro ingest weather`` (its help: :data:`~flows.cli.LAZY_HELP`)."""
    run_ingest("weather", warehouse, path=str(file), options=settings)


def portfolios(file: SourceFile, /, *,
               settings: Annotated[FileOptions, Parameter(name="*")] = FileOptions(),
               warehouse: Warehouse = Path(DEFAULT_WAREHOUSE)) -> None:
    """``wadiro ingest portfolios`` (its help: :data:`~flows.cli.LAZY_HELP`)."""
    run_ingest("portfolios", warehouse, path=str(file), form=settings)


