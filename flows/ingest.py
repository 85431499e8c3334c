"""Prefect flows that fill the warehouse's input tables (run through Prefect or directly,
:mod:`~wadiro_fleet.flows.engine`)."""

from __future__ import annotations

from prefect import flow
from wadiro_fleet.flows.engine import current_engine
from wadiro_fleet.tasks.ingest.cambridge import (
    IngestSummary,
    load_cambridge_task,
    write_cambridge_task,
)
from wadiro_fleet.tasks.ingest.cambridge_archive import ArchiveSelection
from wadiro_fleet.tasks.ingest.synthetic_fleet import (
    FleetSpec,
    SyntheticSummary,
    ingest_synthetic_task,
)
from wadiro_fleet.tasks.warehouse.connection import DEFAULT_WAREHOUSE

__all__ = ["ingest_cambridge_flow", "ingest_synthetic_flow"]


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
