"""Computed results that the warehouse could not take yet, kept on disk until it can.

DuckDB admits one writing process, and an analyst's open connection -- even a read-only one --
keeps a writer out for as long as it stays open. A run must not throw away what it computed
because of that: a batch that cannot be written within a short wait is *kept* instead, one file
per batch in a folder beside the warehouse (``<warehouse>.pending/<run_id>/``), and written,
in the order it was computed, as soon as the lock clears. The run's closing record (its final
counts and status) is kept the same way when it cannot be written.

What a run leaves there (it was interrupted, or the lock never cleared) is loaded later with
``wadiro load-pending``, which skips every building-week that a run started later has written
since (its rows are newer). Writing a kept batch replaces its slice in one transaction, as the
run itself would have, so loading twice changes nothing; each file is deleted only once its
transaction has committed.

The files are Python pickles of the run's own result objects, written and read by this
pipeline only (never load a folder you did not get from it).
"""

from __future__ import annotations

import os
import pickle
import shutil
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import duckdb
from wadiro_fleet.tasks.protocol.forecasting import BuildingWeekResult
from wadiro_fleet.tasks.warehouse.connection import transaction
from wadiro_fleet.tasks.warehouse.results import write_results
from wadiro_fleet.tasks.warehouse.runs import RunSummary, record_run_end

_BATCH = "batch-{:06d}-{}.pickle"
"""A kept batch's file: its number in the run, and how many building-weeks it holds."""
_CLOSING = "closing.pickle"
_FORMAT = 1


def pending_root(warehouse: str | Path) -> Path:
    """The folder beside ``warehouse`` that holds every run's kept results."""
    warehouse = Path(warehouse)
    return warehouse.with_name(warehouse.name + ".pending")


@dataclass(frozen=True)
class KeptBatch:
    """One batch of results as a run computed it."""

    run_id: str
    models: tuple[str, ...]
    results: list[BuildingWeekResult]
    format: int = _FORMAT


@dataclass(frozen=True)
class KeptClosing:
    """A run's final counts and status."""

    summary: RunSummary
    status: str
    message: str | None
    format: int = _FORMAT


@dataclass
class LoadReport:
    """What writing kept results did."""

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


class PendingResults:
    """One run's kept batches, in the order they were computed, and its kept closing record."""

    def __init__(self, warehouse: str | Path, run_id: str) -> None:
        self.warehouse = Path(warehouse)
        self.run_id = run_id
        self.folder = pending_root(warehouse) / run_id

    # --- keeping -----------------------------------------------------------------------------

    def keep(self, results: Sequence[BuildingWeekResult], models: Sequence[str]) -> Path:
        """Write a batch to its own file (complete or absent: written aside, then renamed)."""
        path = self.folder / _BATCH.format(self._next_number(), len(results))
        _dump(path, KeptBatch(self.run_id, tuple(models), list(results)))
        return path

    def keep_closing(self, summary: RunSummary, status: str, message: str | None) -> Path:
        path = self.folder / _CLOSING
        _dump(path, KeptClosing(summary, status, message))
        return path

    # --- what is kept ------------------------------------------------------------------------

    def batch_files(self) -> list[Path]:
        return sorted(self.folder.glob("batch-*.pickle")) if self.folder.is_dir() else []

    def __bool__(self) -> bool:
        return bool(self.batch_files()) or (self.folder / _CLOSING).exists()

    def building_weeks(self) -> int:
        """Building-weeks kept (read from the file names)."""
        return sum(int(path.stem.split("-")[2]) for path in self.batch_files())

    # --- writing -----------------------------------------------------------------------------

    def write_to(self, con: duckdb.DuckDBPyConnection, report: LoadReport | None = None) -> LoadReport:
        """Write every kept batch, oldest first, then the closing record; each in its own
        transaction, each file deleted once written. The folder goes when it is empty."""
        report = report or LoadReport()
        started = _run_started(con, self.run_id)
        wrote_any = False
        for path in self.batch_files():
            batch: KeptBatch = _load(path)
            fresh, superseded = _not_superseded(con, batch.results, self.run_id, started)
            if fresh:
                write_results(con, fresh, run_id=batch.run_id, models=batch.models)
            path.unlink()
            report.batches += 1
            report.building_weeks += len(fresh)
            report.superseded += superseded
            wrote_any = True
        closing = self.folder / _CLOSING
        if closing.exists():
            kept: KeptClosing = _load(closing)
            with transaction(con):
                record_run_end(con, kept.summary, outcome=(kept.status, kept.message))
            closing.unlink()
            wrote_any = True
        if wrote_any and self.run_id not in report.runs:
            report.runs.append(self.run_id)
        self.remove_if_empty()
        return report

    def remove_if_empty(self) -> None:
        if self.folder.is_dir() and not any(self.folder.iterdir()):
            self.folder.rmdir()
            root = self.folder.parent
            if root.is_dir() and not any(root.iterdir()):
                root.rmdir()

    def discard(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)
        self.remove_if_empty()

    def _next_number(self) -> int:
        files = self.batch_files()
        return int(files[-1].stem.split("-")[1]) + 1 if files else 1


def pending_runs(warehouse: str | Path) -> list[PendingResults]:
    """Every run with results kept beside ``warehouse``, oldest folder first."""
    root = pending_root(warehouse)
    if not root.is_dir():
        return []
    folders = sorted((p for p in root.iterdir() if p.is_dir()), key=lambda p: p.stat().st_mtime)
    return [PendingResults(warehouse, folder.name) for folder in folders]


def write_pending(con: duckdb.DuckDBPyConnection, warehouse: str | Path) -> LoadReport:
    """Write what every run left pending beside ``warehouse`` (``wadiro load-pending``)."""
    report = LoadReport()
    for pending in pending_runs(warehouse):
        pending.write_to(con, report)
    return report


def _dump(path: Path, value: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    with partial.open("wb") as file:
        pickle.dump(value, file, protocol=pickle.HIGHEST_PROTOCOL)
    os.replace(partial, path)


def _load(path: Path):  # noqa: ANN202 -- a KeptBatch or a KeptClosing
    with path.open("rb") as file:
        return pickle.load(file)  # noqa: S301 -- our own files (see the module's docstring)


def _run_started(con: duckdb.DuckDBPyConnection, run_id: str) -> datetime | None:
    row = con.execute("SELECT started_at FROM runs WHERE run_id = ?", [run_id]).fetchone()
    return row[0] if row else None


def _not_superseded(
    con: duckdb.DuckDBPyConnection, results: list[BuildingWeekResult], run_id: str,
    started: datetime | None,
) -> tuple[list[BuildingWeekResult], int]:
    """The results whose building-week no run started after ``run_id`` has written since."""
    if not results:
        return [], 0
    newer = con.execute(
        """
        SELECT DISTINCT w.building_id, w.target_week
        FROM window_status w JOIN runs r USING (run_id)
        WHERE w.run_id <> ? AND (?::TIMESTAMPTZ IS NULL OR r.started_at > ?::TIMESTAMPTZ)
          AND w.building_id IN (SELECT unnest(?::VARCHAR[]))
        """,
        [run_id, started, started, sorted({r.building_id for r in results})],
    ).fetchall()
    taken = {(building, week) for building, week in newer}
    fresh = [r for r in results if (r.building_id, r.week) not in taken]
    return fresh, len(results) - len(fresh)


def kept_batches(pending: PendingResults) -> Iterator[KeptBatch]:
    """The kept batches of a run, oldest first (for inspection and tests)."""
    for path in pending.batch_files():
        yield _load(path)


__all__ = [
    "KeptBatch",
    "KeptClosing",
    "LoadReport",
    "PendingResults",
    "kept_batches",
    "pending_root",
    "pending_runs",
    "write_pending",
]
