"""Results staged as Parquet beside the warehouse, and the one function that loads them.

DuckDB admits one writing process, and an analyst's open connection -- even a read-only one --
keeps a writer out for as long as it stays open. A run must not throw away what it computed
because of that, so its results never go straight into the warehouse: each finished batch is
first *staged*, one Parquet file per batch in a folder beside the warehouse
(``<warehouse>.pending/<run_id>/batch-<number>-<building-weeks>.parquet``), and
:func:`load_staged` writes what is staged, in the order it was staged (several batches in one
transaction), once it has the warehouse: at the run's next load (at most every
``--load-every-seconds``) when it is free, else at a later one or at the run's end, or with
``wadiro load-pending``. The run's closing record (its counts and final status) is staged and
loaded the same way (``closing.parquet``).

A file holds one row: per table, the list of its rows (``SELECT unnest(window_status,
recursive := true) FROM 'batch-....parquet'`` shows them); the run's models are in its
metadata. Loading batches replaces their slices in one transaction and deletes their files only
once that has committed, so loading twice changes nothing; building-weeks that a run started
later has written since are left out (their rows are newer). What is loaded is scored again
against the readings stored at that moment, so readings ingested while the run computed count.
A file that cannot be read stops the load with one line naming it, and stays, with every file
staged after it.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, time, timedelta, timezone
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
from wadiro_fleet.tasks.protocol.forecasting import BuildingWeekResult
from wadiro_fleet.tasks.warehouse.connection import WarehouseError, transaction
from wadiro_fleet.tasks.warehouse.refusals import resource_error
from wadiro_fleet.tasks.warehouse.rescoring import rescore_forecasts
from wadiro_fleet.tasks.warehouse.results import result_tables, write_result_tables
from wadiro_fleet.tasks.warehouse.runs import RunSummary, record_run_end

_BATCH = "batch-{:06d}-{}.parquet"
"""A staged batch's file: its number in the run, and how many building-weeks it holds."""
_CLOSING = "closing.parquet"


def pending_root(warehouse: str | Path) -> Path:
    """The folder beside ``warehouse`` that holds every run's staged results."""
    warehouse = Path(warehouse)
    return warehouse.with_name(warehouse.name + ".pending")


@dataclass
class LoadReport:
    """What loading staged results did."""

    runs: list[str] = field(default_factory=list)
    batches: int = 0
    building_weeks: int = 0
    superseded: int = 0
    """Building-weeks left out because a later run has written them since."""

    def line(self) -> str:
        if not self.runs:
            return "nothing pending"
        skipped = (f", {self.superseded} left out (a later run wrote them since)"
                   if self.superseded else "")
        return (f"wrote {self.building_weeks} building-week(s) in {self.batches} batch(es) of "
                f"{len(self.runs)} run(s){skipped}")


def stage_results(warehouse: str | Path, run_id: str, results: Sequence[BuildingWeekResult],
                  models: Sequence[str]) -> Path:
    """Stage a batch's result rows as the run's next file."""
    batches = _batches(pending_root(warehouse) / run_id)
    number = int(batches[-1].name.split("-")[1]) + 1 if batches else 1
    path = pending_root(warehouse) / run_id / _BATCH.format(number, len(results))
    return _stage(path, result_tables(results, run_id), {"models": json.dumps(list(models))})


def stage_closing(warehouse: str | Path, summary: RunSummary, status: str,
                  message: str | None) -> Path:
    """Stage the run's closing record: its counts and final status."""
    row = {"run_id": summary.run_id, "status": status, "message": message, **summary.counts()}
    return _stage(pending_root(warehouse) / summary.run_id / _CLOSING,
                  {"runs": pa.Table.from_pylist([row])}, {"models": "[]"})


def staged_runs(warehouse: str | Path) -> list[str]:
    """The runs with results staged beside ``warehouse``, least recently changed first."""
    root = pending_root(warehouse)
    folders = [p for p in root.iterdir() if p.is_dir()] if root.is_dir() else []
    return [p.name for p in sorted(folders, key=lambda p: p.stat().st_mtime)]


def staged_building_weeks(warehouse: str | Path, run_id: str) -> int:
    """Building-weeks the run has staged (read from the file names)."""
    return sum(int(p.stem.split("-")[2]) for p in _batches(pending_root(warehouse) / run_id))


def load_staged(con: duckdb.DuckDBPyConnection, warehouse: str | Path,
                run_id: str | None = None) -> LoadReport:
    """Load what ``run_id`` (default: every run, oldest first) has staged beside ``warehouse``:
    its batches in the order they were staged, then the closing record, each file deleted once
    what it holds has committed. Consecutive batches that share no building-week are written
    together, in one transaction (at most :data:`LOAD_BUILDING_WEEKS` building-weeks: a write's
    statements cost much the same for one batch as for several). Call it holding ``con``, the
    one writer: no one loads beside it."""
    report = LoadReport()
    for run in [run_id] if run_id else staged_runs(warehouse):
        folder = pending_root(warehouse) / run
        batches, closing = _batches(folder), folder / _CLOSING
        report.runs += [run] if batches or closing.exists() else []
        started = con.execute("SELECT started_at FROM runs WHERE run_id = ?", [run]).fetchone()
        together = _Together(con, run, started and started[0], report)
        for path in batches:
            try:
                tables, models = _read(path)
            except WarehouseError:
                together.write()  # what was staged before the damaged file is loaded
                raise
            together.add(path, tables, models)
        together.write()
        if closing.exists():
            row = _read(closing)[0]["runs"].to_pylist()[0]
            outcome = (row.pop("status"), row.pop("message"))
            with transaction(con):
                record_run_end(con, RunSummary(weeks=[], **row), outcome=outcome)
            closing.unlink()
        for empty in (folder, folder.parent):
            if empty.is_dir() and not any(empty.iterdir()):
                empty.rmdir()
    return report


LOAD_BUILDING_WEEKS = 200
"""At most this many staged building-weeks are written in one transaction (and held in memory
for it)."""


class _Together:
    """Staged batches of one run gathered to be written in one transaction: consecutive ones
    with the same models and no building-week in common (a later batch with a building-week of
    an earlier one replaces its rows, so it waits for the next write)."""

    def __init__(self, con: duckdb.DuckDBPyConnection, run_id: str, started: datetime | None,
                 report: LoadReport) -> None:
        self.con, self.run_id, self.started, self.report = con, run_id, started, report
        self.paths: list[Path] = []
        self.tables: list[dict[str, pa.Table]] = []
        self.models: list[str] = []
        self.keys: set[tuple[str, Any]] = set()

    def add(self, path: Path, tables: dict[str, pa.Table], models: list[str]) -> None:
        status = tables["window_status"]
        keys = set(zip(status["building_id"].to_pylist(), status["target_week"].to_pylist()))
        if self.paths and (keys & self.keys or models != self.models
                           or len(self.keys) + len(keys) > LOAD_BUILDING_WEEKS):
            self.write()
        self.paths.append(path)
        self.tables.append(tables)
        self.models = models
        self.keys |= keys

    def write(self) -> None:
        if not self.paths:
            return
        names = dict.fromkeys(name for tables in self.tables for name in tables)
        joined = {name: pa.concat_tables([t[name] for t in self.tables if name in t],
                                         promote_options="permissive") for name in names}
        kept, superseded = _not_superseded(self.con, joined, self.run_id, self.started)
        write_result_tables(self.con, kept, self.models)
        _rescore_written(self.con, kept["window_status"])
        for path in self.paths:
            path.unlink()
        self.report.batches += len(self.paths)
        self.report.building_weeks += kept["window_status"].num_rows
        self.report.superseded += superseded
        self.paths, self.tables, self.keys = [], [], set()


def _rescore_written(con: duckdb.DuckDBPyConnection, status: pa.Table) -> None:
    """Score the forecasts just written against the readings stored now. A batch was scored
    against the readings its run read; readings ingested since (corrected, late, removed) were
    re-scored then against what was stored then, so the batch's own scores must not stand
    unchecked: an ingest between a batch's compute and its load would leave them stale."""
    if not status.num_rows:
        return
    weeks = status["target_week"].to_pylist()
    rescore_forecasts(con, min(weeks), buildings=sorted(set(status["building_id"].to_pylist())),
                      end=datetime.combine(max(weeks) + timedelta(days=8), time(), timezone.utc))


def _batches(folder: Path) -> list[Path]:
    return sorted(folder.glob("batch-*.parquet")) if folder.is_dir() else []


def _stage(path: Path, tables: dict[str, pa.Table], meta: dict[str, str]) -> Path:
    """Write ``tables`` as one row of lists, complete or not at all (written aside, renamed)."""
    columns = {name: pa.ListArray.from_arrays(pa.array([0, t.num_rows], pa.int32()),
                                              t.to_struct_array().combine_chunks())
               for name, t in tables.items()}
    partial = path.with_name(path.name + ".partial")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.table(columns).replace_schema_metadata(meta), partial)
        os.replace(partial, path)
    except OSError as error:  # a full disk, a file-size limit, a read-only folder
        with contextlib.suppress(OSError):
            partial.unlink(missing_ok=True)
        refused = resource_error(
            error, f"cannot keep results beside the warehouse in {path.parent}")
        if refused is None:
            raise
        raise refused from None
    return path


def _read(path: Path) -> tuple[dict[str, pa.Table], list[str]]:
    """A staged file's tables and models; one line naming the file if it cannot be read."""
    try:
        row = pq.read_table(path)
        tables = {name: pa.Table.from_struct_array(row[name].combine_chunks().flatten())
                  for name in row.column_names}
        meta = row.schema.metadata or {}
        if not tables.keys() & {"window_status", "runs"} or b"models" not in meta:
            raise ValueError("not a file this pipeline staged")
        return tables, json.loads(meta[b"models"])
    except (pa.ArrowException, OSError, ValueError) as error:
        reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise WarehouseError(
            f"staged results {path} cannot be read ({reason}); it and the files staged after it "
            "are kept: restore or move it aside, then run `wadiro load-pending` again") from error


def _not_superseded(
    con: duckdb.DuckDBPyConnection, tables: dict[str, pa.Table], run_id: str,
    started: datetime | None,
) -> tuple[dict[str, pa.Table], int]:
    """The rows of building-weeks that no run started after ``run_id`` has written since, and
    how many building-weeks were left out."""
    status = tables["window_status"]
    newer = con.execute(
        """
        SELECT DISTINCT w.building_id, w.target_week
        FROM window_status w JOIN runs r USING (run_id)
        WHERE w.run_id <> ? AND (?::TIMESTAMPTZ IS NULL OR r.started_at > ?::TIMESTAMPTZ)
          AND w.building_id IN (SELECT unnest(?::VARCHAR[]))
        """,
        [run_id, started, started, sorted(set(status["building_id"].to_pylist()))],
    ).fetchall()
    if not newer:
        return tables, 0
    taken = set(newer)
    kept = {name: t.filter(pa.array([key not in taken for key in zip(
                t["building_id"].to_pylist(), t["target_week"].to_pylist())], pa.bool_()))
            for name, t in tables.items()}
    return kept, status.num_rows - kept["window_status"].num_rows


__all__ = [
    "LoadReport",
    "load_staged",
    "pending_root",
    "stage_closing",
    "stage_results",
    "staged_building_weeks",
    "staged_runs",
]
