"""Helpers of the generic-ingest tests: small operator files, and what a warehouse holds."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import pandas as pd
import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.parquet as pq

from flows.ingest import ingest_buildings_flow, ingest_readings_flow, ingest_weather_flow
from tasks.ingest.buildings_file import BuildingsSummary
from tasks.ingest.contract import FileOptions
from tasks.ingest.readings_file import ReadingsOptions, ReadingsSummary
from tasks.ingest.weather_file import WeatherOptions, WeatherSummary
from tasks.warehouse.schema import INPUT_TABLES, TABLES

BUILDINGS_CSV = """building_id,site_id,timezone,holiday_country,holiday_subdiv,building_type
b1,s1,Europe/London,GB,ENG,office
b2,s1,Europe/London,GB,ENG,
b3,s2,America/New_York,US,NY,school
"""


def utc(text: str) -> datetime:
    """``'2024-03-31 01:00'`` -> that UTC instant (hand-written expectations)."""
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def hours(start: str, n: int) -> list[datetime]:
    return [utc(start) + timedelta(hours=h) for h in range(n)]


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def csv_to_parquet(path: Path) -> Path:
    """The same cells as a Parquet file (text columns, as a CSV is read)."""
    names = path.read_text().splitlines()[0].split(",")
    table = pcsv.read_csv(str(path), convert_options=pcsv.ConvertOptions(
        column_types={n: pa.string() for n in names}, strings_can_be_null=True))
    target = path.with_suffix(".parquet")
    pq.write_table(table, str(target))
    return target


def ingest_buildings(warehouse: Path | str, path: Path | str,
                     form: FileOptions | None = None) -> BuildingsSummary:
    """``wadiro ingest buildings``' own steps (its flow's function, without Prefect)."""
    return ingest_buildings_flow.fn(str(path), str(warehouse), form or FileOptions())


def ingest_readings(warehouse: Path | str, path: Path | str,
                    options: ReadingsOptions | None = None) -> ReadingsSummary:
    """``wadiro ingest readings``' own steps (its flow's function, without Prefect)."""
    return ingest_readings_flow.fn(str(path), options or ReadingsOptions(), str(warehouse))


def ingest_weather(warehouse: Path | str, path: Path | str,
                   options: WeatherOptions) -> WeatherSummary:
    """``wadiro ingest weather``' own steps (its flow's function, without Prefect)."""
    return ingest_weather_flow.fn(str(path), options, str(warehouse))


def warehouse_with_buildings(path: Path, tmp: Path) -> Path:
    """A warehouse holding :data:`BUILDINGS_CSV` (b1, b2 at site s1; b3 at s2)."""
    ingest_buildings(path, write(tmp / "buildings.csv", BUILDINGS_CSV))
    return path


def row_counts(warehouse: Path) -> dict[str, int]:
    """Rows of every table of the warehouse (0 for a table not created yet)."""
    if not warehouse.exists():
        return {}
    with duckdb.connect(str(warehouse), read_only=True) as con:
        present = {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
        return {t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] if t in present else 0
                for t in TABLES}


def contents(warehouse: Path) -> dict[str, list[tuple]]:
    """Every row of every input table, sorted."""
    with duckdb.connect(str(warehouse), read_only=True) as con:
        return {t: con.execute(f"SELECT * FROM {t} ORDER BY ALL").fetchall() for t in INPUT_TABLES}


def readings(warehouse: Path, building: str | None = None) -> pd.DataFrame:
    """``meter_readings`` (of one building), sorted, ts in UTC."""
    with duckdb.connect(str(warehouse), read_only=True) as con:
        con.execute("SET TimeZone = 'UTC'")
        where = "WHERE building_id = ?" if building else ""
        frame = con.execute(f"SELECT building_id, ts, kwh FROM meter_readings {where} "
                            "ORDER BY building_id, ts", [building] if building else []).df()
    frame["ts"] = pd.to_datetime(frame["ts"], utc=True)
    return frame


def kwh_by_hour(warehouse: Path, building: str) -> dict[datetime, float | None]:
    frame = readings(warehouse, building)
    return {ts.to_pydatetime(): (None if pd.isna(v) else v) for ts, v in zip(frame["ts"], frame["kwh"], strict=True)}
