"""A run's one writer: results straight into the warehouse, staged beside it only while locked.

DuckDB admits one writing process, and an analyst's open connection -- even a read-only one --
keeps a writer out for as long as it stays open. A run must not throw away what it computed
because of that. :class:`RunWriter` writes the finished batches into the warehouse when its lock
is free, every ``write_every_s`` seconds at most (the run's setting, :data:`WRITE_EVERY_S` by
default: the batches finished since, in one
transaction: a write's cost is mostly fixed, opening the file, replacing each table's slice,
checkpointing on close) and at the run's end; when it is not free, they are *staged*: plain
Parquet files of the result
tables' own rows, one folder per batch
(``<warehouse>.pending/<run_id>/batch-<number>-<building-weeks>/<table>.parquet``, the run's
models in the files' metadata). :func:`load_staged` has DuckDB read them (``read_parquet``) and
replaces each batch's slices in one transaction, in the order they were staged, deleting the
folder once that has committed: at the run's next try (every :data:`PENDING_RETRY_S` while it
computes), at its end, or with ``wadiro load-pending``. The run's closing record (its counts
and status) is kept the same way (``closing.parquet``) until it is written, after the run's
results, with the run's portfolio vintages (:mod:`~tasks.warehouse.portfolio_vintages`) in
its transaction: a process ended while it waits for the lock loses nothing.

Every write, direct or staged, leaves out the building-weeks that a run started later has
written since (their rows are newer), and scores what it writes again against the readings
stored at that moment, so readings ingested while the run computed count; its vintages (the
buildings' and, at the close, the portfolios') are dated at that moment, when they went in.
Loading twice changes nothing. A file that cannot be read stops the load with one line naming
it, and stays, with every batch staged after it.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from datetime import time as day_start
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from tasks.protocol.forecasting import BuildingWeekResult
from tasks.warehouse.connection import (
    WarehouseError,
    WarehouseLockedError,
    connect,
    transaction,
)
from tasks.warehouse.portfolio_vintages import write_portfolio_vintages
from tasks.warehouse.refusals import UNCHANGED, ResourceError, resource_error
from tasks.warehouse.rescoring import rescore_forecasts
from tasks.warehouse.results import result_tables, write_result_tables
from tasks.warehouse.runs import RunSummary, record_run_end

WRITE_EVERY_S = 10.0
"""By default, the longest time a finished batch waits in the run's process before it is
written (or staged); a run's ``write_every_s``, or :data:`WRITE_SHARE` times as long as the
last write took, if longer.
On a 1,000-building warehouse, writing 10 buildings' results at a time cost 13.6 ms of CPU per
building, 50 at a time 5.4 ms; a process ended by ``kill -9`` loses at most this much of its
work (a stop, a failure or the run's end writes what is held first)."""

WRITE_SHARE = 20
"""A write replaces slices of tables that grow with the fleet (on a 10,000-building warehouse
a write of 50 buildings cost 0.65 CPU-s, 0.14 on a 1,000-building one: issue 49), so the writes
are spaced at least this many times their own duration: at most a twentieth of the run's time,
and as many buildings a write as the fleet's size calls for."""

WRITE_WAIT_S = 2.0
"""How long a batch's write (then the batch is staged) and a stopped run's closing record wait
for a locked warehouse."""

PENDING_RETRY_S = 10.0
"""How often a run with staged results tries to load them while it computes."""

_BATCH = "batch-{:06d}-{}"
"""A staged batch's folder: its number in the run, and how many building-weeks it holds."""
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


class RunWriter:
    """Writes one run's results and closes it: straight into the warehouse while its lock is
    free, staged beside it while it is not (loaded as soon as it is free again). ``tell``
    receives what the user must know: the warehouse locked, free again, a run not closed.

    As a context manager it closes the run on leaving the block: with its ``summary`` (which
    :meth:`write` keeps), or with the error that ended the block, which goes on."""

    def __init__(self, warehouse: str, run_id: str, models: Sequence[str], lock_wait_s: float,
                 tell: Callable[[str], None], write_every_s: float | None = None,
                 summary: RunSummary | None = None) -> None:
        self.warehouse, self.run_id, self.models = warehouse, run_id, list(models)
        self.summary = summary or RunSummary(run_id=run_id, weeks=[])
        self.lock_wait_s = lock_wait_s
        self.write_every_s = WRITE_EVERY_S if write_every_s is None else write_every_s
        self.tell = tell
        self.locked = False
        self.status: str | None = None
        """The run's final status once closed (a run is closed once)."""
        self._last_try = self._last_write = time.monotonic()
        self._write_s = 0.0  # how long the last write took
        self._held: list[BuildingWeekResult] = []
        """Finished results not yet written or staged (``write_every_s``)."""
        self.written = 0
        """Building-weeks written straight into the warehouse so far."""

    @property
    def pending(self) -> int:
        """Building-weeks staged, not yet in the warehouse."""
        return staged_building_weeks(self.warehouse, self.run_id)

    @property
    def pending_folder(self) -> Path:
        return pending_root(self.warehouse) / self.run_id

    def write(self, results: Sequence[BuildingWeekResult] = (), *, now: bool = False) -> None:
        """Take a finished batch; write what is held (staged while the warehouse is locked)
        ``now``, or once ``write_every_s`` have passed since the last write."""
        self.summary.add(results)
        self._held.extend(results)
        if not (now or self._write_due()):
            return
        self._last_write = time.monotonic()
        if not self._held:
            return
        tables = result_tables(self._held, self.run_id)
        self._held = []
        if not self.locked:
            try:
                with connect(self.warehouse, wait_s=WRITE_WAIT_S) as con:
                    self.written += write_now(con, tables, self.run_id, self.models)[0]
                self._write_s = time.monotonic() - self._last_write
                return
            except WarehouseLockedError as locked:
                self._now_locked(locked)
            except ResourceError as refused:  # a full disk: say what of the run is stored
                raise ResourceError(self._refused(refused, tables)) from refused
        stage_tables(self.warehouse, self.run_id, tables, self.models)

    def _refused(self, refused: ResourceError, tables: dict[str, pa.Table]) -> str:
        """A refused write's message, saying what of the run is stored: the batches written
        before stand (the write that failed changed nothing)."""
        status = tables.get("window_status")
        lost = 0 if status is None else status.num_rows
        before = (f"the {self.written} building-week(s) run {self.run_id} wrote before stand (a "
                  "new run replaces them)" if self.written
                  else f"nothing of run {self.run_id} is stored but its start")
        before += ("; if its end cannot be recorded either, `wadiro runs` shows it abandoned "
                   "and the next command that writes records it so")
        return str(refused).replace(
            UNCHANGED, f"the {lost} building-week(s) of this write are not stored; {before}")

    def _write_due(self) -> bool:
        every = self.write_every_s and max(self.write_every_s, WRITE_SHARE * self._write_s)
        return time.monotonic() - self._last_write >= every  # 0: every batch as it comes

    def retry(self) -> None:
        """While the run waits: write what has been held ``write_every_s``, and load what a
        locked warehouse kept out, at most every :data:`PENDING_RETRY_S`."""
        if self._held:
            self.write()
        if self.locked and time.monotonic() - self._last_try >= PENDING_RETRY_S:
            self._load(WRITE_WAIT_S)

    def close(self, summary: RunSummary, error: BaseException | None = None) -> str:
        """Record the run's counts and final status after its results; returns the status.
        Waits for a locked warehouse at most ``lock_wait_s`` (after an error, only briefly);
        what stays staged then is loaded later (:meth:`how_to_load`). Closes once."""
        if self.status is not None:
            return self.status
        self.write(now=True)
        status, message = summary.final_status(error)
        self.status = status
        try:
            stage_closing(self.warehouse, summary, status, message)
        except OSError:  # no room beside the warehouse either (a full disk): close it directly
            with connect(self.warehouse, wait_s=WRITE_WAIT_S) as con, transaction(con):
                record_run_end(con, summary, outcome=(status, message),
                               degradations=summary.degradations() or None)
            return status
        self._load(self.lock_wait_s if error is None else WRITE_WAIT_S)
        return status

    def __enter__(self) -> RunWriter:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: object) -> None:
        if error is None:
            self.close(self.summary)
            return
        try:  # the block's error goes on; say why the run was not closed
            self.close(self.summary, error)
        except Exception as close_error:
            if not isinstance(close_error, ResourceError):  # else the error's own line says it
                self.tell(f"run {self.run_id} not closed: {close_error}")
        if self.locked:
            self.tell(self.how_to_load())

    def how_to_load(self) -> str:
        return (f"{self.pending} building-week(s) of run {self.run_id} are kept in "
                f"{self.pending_folder}; load them with `wadiro load-pending --warehouse "
                f"{self.warehouse}` once the warehouse is free")

    def _load(self, wait_s: float) -> None:
        self._last_try = time.monotonic()
        try:
            with connect(self.warehouse, wait_s=wait_s) as con:
                report = load_staged(con, self.warehouse, self.run_id)
        except WarehouseLockedError as locked:
            self._now_locked(locked)
            return
        if self.locked:
            self.tell(f"warehouse free again: wrote the {report.building_weeks} kept "
                      "building-week(s)")
        self.locked = False

    def _now_locked(self, locked: WarehouseLockedError) -> None:
        self._last_try = time.monotonic()
        if not self.locked:
            holder = f" ({locked.holder})" if locked.holder else ""
            self.tell(f"warehouse {self.warehouse} is locked by another process{holder}: "
                      f"finished results are kept in {self.pending_folder} and written as soon "
                      "as it is free")
        self.locked = True


def write_now(con: duckdb.DuckDBPyConnection, tables: dict[str, pa.Table], run_id: str,
              models: Sequence[str]) -> tuple[int, int]:
    """Replace the slices of ``tables``' building-weeks in one transaction, leaving out those a
    run started after ``run_id`` has written since; score them again against the readings
    stored now. Returns (building-weeks written, left out). Call it holding ``con``, the one
    writer."""
    kept, superseded = _not_superseded(con, tables, run_id)
    write_result_tables(con, kept, models)
    _rescore_written(con, kept.get("window_status"))
    status = kept.get("window_status")
    return (0 if status is None else status.num_rows), superseded


def stage_tables(warehouse: str | Path, run_id: str, tables: dict[str, pa.Table],
                 models: Sequence[str]) -> Path:
    """Stage a batch's result tables as the run's next folder, complete or not at all."""
    folder = pending_root(warehouse) / run_id
    batches = _batches(folder)
    number = int(batches[-1].name.split("-")[1]) + 1 if batches else 1
    n = tables["window_status"].num_rows if "window_status" in tables else 0
    target = folder / _BATCH.format(number, n)
    meta = {"models": json.dumps(list(models))}
    return _atomically(target, lambda partial: [
        pq.write_table(t.replace_schema_metadata(meta), partial / f"{name}.parquet")
        for name, t in tables.items()])


def stage_results(warehouse: str | Path, run_id: str, results: Sequence[BuildingWeekResult],
                  models: Sequence[str]) -> Path:
    """Stage a batch's results (:func:`stage_tables` of their rows)."""
    return stage_tables(warehouse, run_id, result_tables(results, run_id), models)


def stage_closing(warehouse: str | Path, summary: RunSummary, status: str,
                  message: str | None) -> Path:
    """Stage the run's closing record: its counts and final status."""
    row = {"run_id": summary.run_id, "status": status, "message": message,
           "degradations": summary.degradations() or None, **summary.counts()}
    path = pending_root(warehouse) / summary.run_id / _CLOSING
    _atomically(path, lambda partial: pq.write_table(pa.Table.from_pylist([row]), partial))
    return path


def staged_runs(warehouse: str | Path) -> list[str]:
    """The runs with results staged beside ``warehouse``, least recently changed first."""
    root = pending_root(warehouse)
    folders = [p for p in root.iterdir() if p.is_dir()] if root.is_dir() else []
    return [p.name for p in sorted(folders, key=lambda p: p.stat().st_mtime)]


def staged_building_weeks(warehouse: str | Path, run_id: str) -> int:
    """Building-weeks the run has staged (read from the folder names)."""
    return sum(int(p.name.split("-")[2]) for p in _batches(pending_root(warehouse) / run_id))


def load_staged(con: duckdb.DuckDBPyConnection, warehouse: str | Path,
                run_id: str | None = None) -> LoadReport:
    """Load what ``run_id`` (default: every run, oldest first) has staged beside ``warehouse``:
    its batches in the order they were staged, each in one transaction, then the closing
    record with the run's portfolio vintages
    (:func:`~tasks.warehouse.portfolio_vintages.write_portfolio_vintages`, dated now), each
    deleted once what it holds has committed. Call it holding ``con``, the one writer: no one
    loads beside it."""
    report = LoadReport()
    for run in [run_id] if run_id else staged_runs(warehouse):
        folder = pending_root(warehouse) / run
        _refuse_older_layout(folder)
        batches, closing = _batches(folder), folder / _CLOSING
        report.runs += [run] if batches or closing.exists() else []
        for batch in batches:
            tables, models = _read_batch(con, batch)
            written, superseded = write_now(con, tables, run, models)
            shutil.rmtree(batch)
            report.batches += 1
            report.building_weeks += written
            report.superseded += superseded
        if closing.exists():
            row = con.read_parquet(str(closing)).to_arrow_table().to_pylist()[0]
            outcome = (row.pop("status"), row.pop("message"))
            degradations = row.pop("degradations", None)  # a closing staged by an earlier release
            with transaction(con):
                record_run_end(con, RunSummary(weeks=[], **row), outcome=outcome,
                               degradations=degradations)
                write_portfolio_vintages(con, run, datetime.now(UTC))
            closing.unlink()
        for empty in (folder, folder.parent):
            if empty.is_dir() and not any(empty.iterdir()):
                empty.rmdir()
    return report


def _refuse_older_layout(folder: Path) -> None:
    """Results staged by a version before the run loop's renovation (one file per batch, each
    table a list in one row) are not loaded over: one line says what to do."""
    older = bool(list(folder.glob("batch-*.parquet")))
    closing = folder / _CLOSING
    if not older and closing.exists():
        try:
            older = "status" not in pq.read_schema(closing).names
        except (pa.ArrowException, OSError):
            older = False  # damaged: loading it names it
    if older:
        raise WarehouseError(
            f"staged results in {folder} were kept by an earlier version of wadiro (a file per "
            "batch); load them with that version (`wadiro load-pending`), or move the folder "
            "aside")


def _rescore_written(con: duckdb.DuckDBPyConnection, status: pa.Table | None) -> None:
    """Score the forecasts just written against the readings stored now: a batch was scored
    against the readings its run read, and an ingest since (corrected, late, removed readings)
    rescored only what was stored then."""
    if status is None or not status.num_rows:
        return
    weeks = status["target_week"].to_pylist()
    rescore_forecasts(con, min(weeks), buildings=sorted(set(status["building_id"].to_pylist())),
                      end=datetime.combine(max(weeks) + timedelta(days=8), day_start(), UTC))


def _batches(folder: Path) -> list[Path]:
    return sorted(p for p in folder.glob("batch-*") if p.is_dir() and not p.suffix) \
        if folder.is_dir() else []


def _atomically(path: Path, write: Callable[[Path], object]) -> Path:
    """``write`` a file or folder aside (``.partial``), then rename it to ``path``: complete or
    not at all. A refusal of the machine (a full disk, a file-size limit) is one line."""
    partial = path.with_name(path.name + ".partial")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.suffix:
            partial.mkdir()
        write(partial)
        os.replace(partial, path)
    except OSError as error:
        with contextlib.suppress(OSError):
            shutil.rmtree(partial) if partial.is_dir() else partial.unlink(missing_ok=True)
        refused = resource_error(
            error, f"cannot keep results beside the warehouse in {path.parent}")
        if refused is None:
            raise
        raise refused from None
    return path


def _read_batch(con: duckdb.DuckDBPyConnection, folder: Path
                ) -> tuple[dict[str, pa.Table], list[str]]:
    """A staged batch's tables, read by DuckDB, and the run's models; one line naming the file
    that cannot be read."""
    tables, models = {}, None
    for path in sorted(folder.glob("*.parquet")):
        try:
            tables[path.stem] = con.read_parquet(str(path)).to_arrow_table()
            meta = pq.read_schema(path).metadata or {}
            models = json.loads(meta[b"models"])
        except (duckdb.Error, pa.ArrowException, OSError, ValueError, KeyError) as error:
            text = str(error).strip()
            reason = text.splitlines()[0] if text else type(error).__name__
            raise WarehouseError(
                f"staged results {path} cannot be read ({reason}); it and the batches staged "
                "after it are kept: restore or move it aside, then run `wadiro load-pending` "
                "again") from error
    if "window_status" not in tables or models is None:
        raise WarehouseError(f"staged results {folder} hold no window_status rows; move it "
                             "aside, then run `wadiro load-pending` again")
    return tables, models


def _not_superseded(
    con: duckdb.DuckDBPyConnection, tables: dict[str, pa.Table], run_id: str
) -> tuple[dict[str, pa.Table], int]:
    """The rows of building-weeks that no run started after ``run_id`` has written since, and
    how many building-weeks were left out."""
    status = tables.get("window_status")
    if status is None or not status.num_rows:
        return tables, 0
    newer = con.execute(
        """
        SELECT DISTINCT w.building_id, w.target_week
        FROM window_status w JOIN runs r USING (run_id)
        WHERE w.run_id <> $run AND w.building_id IN (SELECT unnest($buildings::VARCHAR[]))
          AND r.started_at > coalesce((SELECT started_at FROM runs WHERE run_id = $run),
                                      '-infinity'::TIMESTAMPTZ)
        """,
        {"run": run_id, "buildings": sorted(set(status["building_id"].to_pylist()))},
    ).fetchall()
    if not newer:
        return tables, 0
    taken = set(newer)
    kept = {name: t.filter(pa.array([key not in taken for key in zip(
                t["building_id"].to_pylist(), t["target_week"].to_pylist(), strict=True)],
                pa.bool_()))
            for name, t in tables.items()}
    return kept, status.num_rows - kept["window_status"].num_rows
