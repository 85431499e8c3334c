"""Ingest of the Cambridge archive into the warehouse.

The archive is read and checked first
(:func:`~tasks.ingest.cambridge_archive.load_cambridge`, nothing written on any
error); the warehouse is then changed in one transaction that replaces
the selected buildings' rows and every hour of readings and weather the archive holds in the
asked range, so a rerun leaves the same rows. Hours the archive does not hold (a year without a
file, weather sent from elsewhere for later years) are never touched. The scores of stored
forecasts whose readings changed are recomputed in the same transaction, after the new hours
are judged (:mod:`~tasks.ingest.flagging`: the few the archive's meters got wrong are kept
but treated as missing).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from pathlib import Path

import duckdb
import pyarrow.compute as pc

from tasks.ingest.cambridge_archive import CambridgeBatch, load_cambridge
from tasks.ingest.flagging import FlagReport, flag_new_hours
from tasks.ingest.plausibility import ImplausiblePolicy, value_notes
from tasks.warehouse.connection import connect, transaction
from tasks.warehouse.rescoring import rescore_forecasts, rescored_note
from tasks.warehouse.schema import ensure_schema
from tasks.warehouse.slices import Slice, replace_slice, write_key_hours


@dataclass(frozen=True)
class IngestSummary:
    """What an ingest wrote."""

    buildings: int
    readings: int
    missing_readings: int
    weather_hours: int
    seconds: float
    """Time spent reading, checking and writing (excluding orchestration)."""
    implausible_values: int = 0
    """Values stored as missing because they were implausible (``--implausible missing``)."""
    clipped_values: int = 0
    """Values just past their bound, within a sensor's tolerance, stored as the bound."""
    rescored: int = 0
    """Stored scores of forecasts whose readings changed, updated in place."""
    flags: FlagReport = FlagReport()
    """The hours judged implausible (kept, treated as missing until accepted)."""

    def line(self) -> str:
        notes = value_notes(self.implausible_values, self.clipped_values)
        return (f"wrote {self.readings:,} readings ({self.missing_readings:,} missing) for "
                f"{self.buildings:,} buildings and {self.weather_hours:,} weather hours"
                + "".join(f"; {note}" for note in notes) + self.flags.note()
                + rescored_note(self.rescored))


def write_cambridge(con: duckdb.DuckDBPyConnection, batch: CambridgeBatch) -> IngestSummary:
    """Replace the batch's buildings and the hours of readings and weather it holds, in one
    transaction."""
    began = time.perf_counter()
    ensure_schema(con)
    ids = list(batch.building_ids)
    with transaction(con):
        replace_slice(con, "buildings", batch.buildings, Slice(where_in={"building_id": ids}),
                      own_transaction=False)
        write_key_hours(con, "meter_readings", batch.readings, "building_id",
                        own_transaction=False)
        write_key_hours(con, "weather", batch.weather, "site_id", where={"kind": "observed"},
                        own_transaction=False)
        flags = flag_new_hours(con, batch.readings)
        ts = batch.readings["ts"]
        start, end = flags.span(pc.min(ts).as_py(), pc.max(ts).as_py())
        rescored = rescore_forecasts(con, buildings=ids, start=start, end=end)
    return IngestSummary(
        buildings=len(ids), readings=batch.readings.num_rows,
        missing_readings=batch.readings["kwh"].null_count, weather_hours=batch.weather.num_rows,
        seconds=batch.read_seconds + time.perf_counter() - began,
        implausible_values=batch.implausible_values, clipped_values=batch.clipped_values,
        rescored=rescored, flags=flags)


def ingest_cambridge(warehouse: str | Path, path: str | Path,
                     buildings: Sequence[str] | None = None, start: date | None = None,
                     end: date | None = None, implausible: ImplausiblePolicy = "refuse"
                     ) -> IngestSummary:
    """Load the archive selection, then write it to the warehouse file in one transaction."""
    batch = load_cambridge(path, buildings, start, end, implausible)
    with connect(warehouse) as con:
        return write_cambridge(con, batch)
