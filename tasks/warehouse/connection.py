"""Opening the DuckDB warehouse file, and transactions on it.

DuckDB admits one writing process, and while it holds the file no other process can open it,
not even read-only. :func:`connect` therefore waits for the file lock with the pipeline's one
retry policy, :func:`lock_retrying` (exponential backoff, for as long as ``wait_s`` allows: a
run's ``--lock-wait-minutes``, or a number of retries), whether a flow runs through Prefect or
directly, and always closes the connection on exit; writers keep their transactions short.

Inside :func:`connect`, DuckDB's own errors about the file itself become one-line
:class:`WarehouseError` s that say what to do: a warehouse that does not exist yet, a table
that is not there yet (DuckDB would otherwise look for a Python variable of that name: its
replacement scans are switched off), a damaged file, a write-ahead log (``.wal``) that is not
the warehouse's own; and the machine's refusals (a full disk, a file-size limit, a read-only
folder, memory) become :class:`~tasks.warehouse.refusals.ResourceError` s
(re-exported here for the command line and the flows, with :func:`machine_refusal` and
:func:`out_of_memory`).

Which warehouse: the one given, else ``$WADIRO_WAREHOUSE`` (:data:`WAREHOUSE_ENV`), else
``warehouse.duckdb`` in the working directory (:func:`default_warehouse`).
"""

from __future__ import annotations

import logging
import os
import re
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb
from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    stop_after_delay,
)

from tasks.errors import PipelineError
from tasks.warehouse.catalog import has_table
from tasks.warehouse.refusals import (
    MACHINE_ERRORS,
    UNCHANGED,
    ResourceError,
    machine_refusal,
    out_of_memory,
    resource_error,
)

_log = logging.getLogger(__name__)

DEFAULT_WAREHOUSE = "warehouse.duckdb"
"""The embedded default warehouse, created on first use (relative to the working directory)."""

WAREHOUSE_ENV = "WADIRO_WAREHOUSE"
"""The environment variable naming the operator's warehouse: the default of every command's
``--warehouse`` and of the deployments' ``settings.warehouse``."""


def blank_warehouse_env() -> bool:
    """Whether ``$WADIRO_WAREHOUSE`` is set but blank (``export WADIRO_WAREHOUSE=$TYPO``): a
    mistake that must not quietly become the working directory's warehouse."""
    value = os.environ.get(WAREHOUSE_ENV)
    return value is not None and not value.strip()


def default_warehouse() -> str:
    """``$WADIRO_WAREHOUSE`` when set, else :data:`DEFAULT_WAREHOUSE`; ``""`` when it is set but
    blank, which opening refuses naming the variable (:func:`blank_warehouse_env`)."""
    value = os.environ.get(WAREHOUSE_ENV)
    return DEFAULT_WAREHOUSE if value is None else value.strip()


def _refuse_blank_env(path: Path) -> None:
    """A warehouse named by a blank ``$WADIRO_WAREHOUSE`` (read as ``.`` or blank text) is
    refused, naming the variable, not taken for a folder or a file called blank."""
    if blank_warehouse_env() and str(path).strip() in ("", "."):
        raise WarehouseError(
            f"{WAREHOUSE_ENV} is set but empty, so it names no warehouse; set it to the "
            f"warehouse file (export {WAREHOUSE_ENV}=/path/to/warehouse.duckdb), unset it "
            f"(unset {WAREHOUSE_ENV}) for {DEFAULT_WAREHOUSE} in the working directory, or "
            "give --warehouse")


class WarehouseError(PipelineError, RuntimeError):
    """The warehouse could not be opened or written as asked."""


class WarehouseLockedError(WarehouseError):
    """Another process holds the DuckDB file lock for longer than the retries allow."""

    def __init__(self, message: str, holder: str = "") -> None:
        super().__init__(message)
        self.holder = holder
        """Who holds the lock, as DuckDB names it (a program and its PID), if it says."""


class WarehouseMissingError(WarehouseError, FileNotFoundError):
    """The warehouse file does not exist (and a read-only command will not create it)."""


class MissingTableError(WarehouseError, LookupError):
    """The warehouse lacks a table a command reads: nothing of that kind was written yet."""


class WarehouseDamagedError(WarehouseError):
    """The warehouse file is not a readable DuckDB database (truncated, overwritten, ...)."""


class ForeignLogError(WarehouseError):
    """The write-ahead log beside the warehouse (``<warehouse>.wal``) cannot be replayed into it:
    another database's, or damaged."""


_INGEST_FIRST = ("run `wadiro ingest cambridge`, `wadiro ingest synthetic`, or `wadiro ingest "
                 "buildings` then `readings` and `weather` with your own files first")
_BUILDINGS_FIRST = ("ingest its buildings first (`wadiro ingest buildings FILE`, or `wadiro ingest "
                    "cambridge` or `synthetic`)")
MAX_BACKOFF_S = 10.0
"""The longest pause between two tries to open a locked warehouse within a ``wait_s``."""
_FORECAST_FIRST = "run `wadiro forecast` or `wadiro backfill` first"
_DAMAGE_MARKERS = ("corrupt database", "not a valid duckdb database", "could not read enough bytes",
                   "checksum", "database has been invalidated", "serialization error")
_MISSING_TABLE = re.compile(r"Table with name (\w+) does not exist")
_LOCK_HOLDER = re.compile(r"Conflicting lock is held in (.+?\(PID \d+\))")


def _is_lock_error(error: BaseException) -> bool:
    return isinstance(error, duckdb.IOException) and "lock" in str(error).lower()


def _first_line(error: BaseException) -> str:
    return str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__


def lock_holder(error: BaseException) -> str:
    """The process DuckDB names as holding the lock (``/usr/bin/python3 (PID 123)``), or ``""``."""
    match = _LOCK_HOLDER.search(str(error))
    return match.group(1) if match else ""


def _damaged(path: Path, reason: str) -> WarehouseDamagedError:
    return WarehouseDamagedError(
        f"warehouse {path} is damaged ({reason}); restore it from a backup, or move "
        "it aside and rebuild it with `wadiro ingest cambridge` or `wadiro ingest synthetic`"
    )


def _foreign_log(path: Path, error: duckdb.Error) -> ForeignLogError | None:
    """The fix for a ``.wal`` file DuckDB cannot replay into ``path``, or ``None``."""
    text = str(error)
    if "replaying WAL" not in text and "WAL does not match" not in text:
        return None
    log = path.with_name(path.name + ".wal")
    if "does not match" in text:
        whose = ("it belongs to another database (it was copied or restored without its "
                 "warehouse, or the warehouse was replaced without it); move it aside, e.g. "
                 f"`mv {log} {log}.foreign`, and the warehouse opens as of its last checkpoint")
    else:
        whose = ("it cannot be replayed (damaged); move it aside, e.g. `mv "
                 f"{log} {log}.damaged`, and the warehouse opens as of its last checkpoint "
                 "(changes only the log held are lost), or restore both files from a backup")
    return ForeignLogError(f"warehouse {path} cannot be opened: its write-ahead log {log} does "
                           f"not fit it ({_first_line(error).removeprefix('IO Error: ')}): {whose}")


def _is_damage(error: duckdb.Error) -> bool:
    text = str(error).lower()
    return any(marker in text for marker in _DAMAGE_MARKERS)


def _translated(path: Path, error: duckdb.Error) -> WarehouseError | None:
    """A one-line :class:`WarehouseError` for DuckDB errors about the file or its tables."""
    if _is_damage(error):
        return _damaged(path, _first_line(error))
    match = _MISSING_TABLE.search(str(error))
    if isinstance(error, duckdb.CatalogException) and match:
        from tasks.warehouse.schema import INPUT_TABLES  # schema imports no connection

        table = match.group(1)
        what, todo = (("input data", _INGEST_FIRST) if table in INPUT_TABLES
                      else ("forecasts", _FORECAST_FIRST))
        return MissingTableError(f"warehouse {path} has no table {table!r} (no {what} written "
                                 f"yet); {todo}")
    return None


_FILE_HEADERS = 3 * 4096
"""A DuckDB file starts with one main and two database headers of 4 KiB each, then its blocks."""

_open_here: Counter[str] = Counter()
_open_here_lock = threading.Lock()
"""Warehouse files this process has open: DuckDB shares one live instance between them."""


def _check_not_truncated(con: duckdb.DuckDBPyConnection, path: Path) -> None:
    """Refuse a file too short for the blocks in use: DuckDB opens a truncated file and only
    fails (or, for a write, may not even fail) once a lost block is read.

    Only sound on an instance this connection has just opened: the header's block count may
    include free blocks DuckDB has since cut off the file's end, so only blocks in use count;
    and a live instance shared with another connection may hold blocks not yet on disk.
    """
    size = path.stat().st_size if path.exists() else 0
    block_size, blocks, free = con.execute(
        "SELECT block_size, total_blocks, free_blocks FROM pragma_database_size()").fetchone()
    needed = _FILE_HEADERS + block_size * (blocks - free)
    if blocks and size < needed:
        raise _damaged(path, f"the file holds {size:,} bytes, the blocks in use need {needed:,}")


def _check_file_size_limit(path: Path) -> None:
    """Refuse to write a warehouse larger than the process's file-size limit (``ulimit -f``):
    DuckDB rewrites blocks in place, and a write cut short at the limit tears a block the file
    still uses (measured: a forecast under a limit below the file's size left it unreadable).
    A limit above the file's size only ever cuts a new block at its end, which is refused
    cleanly."""
    try:
        import resource
    except ImportError:  # no such limit where there is no resource module (Windows)
        return
    soft, _ = resource.getrlimit(resource.RLIMIT_FSIZE)
    size = path.stat().st_size if path.exists() else 0
    if soft != resource.RLIM_INFINITY and size > soft:
        raise ResourceError(
            f"cannot write warehouse {path}: the file-size limit, {soft:,} bytes, is below its "
            f"size, {size:,} bytes (a write cut short there would damage it); raise the limit "
            f"(`ulimit -f`, or the service's LimitFSIZE), then run the command again; {UNCHANGED}")


@contextmanager
def connect(
    path: str | Path,
    *,
    read_only: bool = False,
    retries: int = 8,
    backoff_s: float = 0.25,
    wait_s: float | None = None,
    create: bool = True,
) -> Iterator[duckdb.DuckDBPyConnection]:
    """Open the warehouse file, retrying with exponential backoff while another process holds it:
    ``retries`` times, or, given ``wait_s``, for at most that many seconds in all.

    A missing file is created unless ``read_only`` or not ``create`` (a command that needs
    stored buildings must not leave an empty warehouse behind). The session time zone is UTC,
    so ``TIMESTAMPTZ`` values read and written are UTC instants. The connection is always
    closed on exit.
    """
    path = Path(path)
    _refuse_blank_env(path)
    _refuse_link_loop(path)
    if path.is_dir():
        raise WarehouseError(f"warehouse {path} is a folder; give the warehouse file "
                             "(e.g. --warehouse warehouse.duckdb)")
    if not read_only and path.parent and not path.parent.exists():
        raise WarehouseError(f"warehouse directory does not exist: {path.parent}")
    if read_only and not path.exists():
        raise WarehouseMissingError(f"warehouse {path} does not exist; {_INGEST_FIRST} "
                                    "(or give the right --warehouse)")
    if not create and not path.exists():
        raise WarehouseMissingError(f"warehouse {path} does not exist; {_BUILDINGS_FIRST} "
                                    "(or give the right --warehouse)")
    if not read_only:
        _check_file_size_limit(path)
    key = str(path.resolve())
    with _open_here_lock:
        fresh_instance = _open_here[key] == 0
        _open_here[key] += 1
    try:
        con = _open(path, read_only, retries, backoff_s, wait_s)
    except BaseException:
        _release(key)
        raise
    try:
        if fresh_instance:
            _check_not_truncated(con, path)
        # A missing table must be an error, not a Python variable of the same name.
        con.execute("SET python_enable_replacements = false")
        con.execute("SET TimeZone = 'UTC'")
        if read_only:
            _stand_in_meter_flags(con)
        yield con
    except (duckdb.Error, MemoryError) as error:
        translated = _translated(path, error) if isinstance(error, duckdb.Error) else None
        if translated is None:
            translated = resource_error(
                error, f"cannot {'read' if read_only else 'write'} warehouse {path}")
        if translated is None:
            raise
        raise translated from error
    finally:
        con.close()
        _release(key)


def _refuse_link_loop(path: Path) -> None:
    """A warehouse path that is a symbolic link leading back to itself: one line (a loop
    looks like a missing file to every other check, and makes ``Path.resolve`` raise)."""
    try:
        path.resolve(strict=False)
    except (RuntimeError, OSError) as error:
        raise WarehouseError(f"warehouse {path} is a symbolic link that loops back to itself "
                             f"({error}); give the warehouse file itself") from None


_NO_FLAGS = """
    CREATE TEMP TABLE IF NOT EXISTS meter_flags (
        building_id VARCHAR, ts TIMESTAMPTZ, check_name VARCHAR, kwh DOUBLE,
        flagged_at TIMESTAMPTZ, accepted_at TIMESTAMPTZ)"""


def _stand_in_meter_flags(con: duckdb.DuckDBPyConnection) -> None:
    """A warehouse made before ``meter_flags`` existed, opened read-only (so not upgraded),
    gets an empty temporary one for the session: none of its hours was ever flagged, and the
    readers of the usable readings (:mod:`~tasks.warehouse.usable`) read it the same."""
    if not has_table(con, "meter_flags"):  # a fresh connection: no temporary table yet
        con.execute(_NO_FLAGS)


def _where_from(path: Path) -> str:
    """Where a warehouse path came from, for a message: given, ``$WADIRO_WAREHOUSE`` or the
    default (and, when relative, the folder it is read from)."""
    env = os.environ.get(WAREHOUSE_ENV, "").strip()
    if env and Path(env) == path:
        origin = f"from {WAREHOUSE_ENV}"
    elif not env and path == Path(DEFAULT_WAREHOUSE):
        origin = f"the default; {WAREHOUSE_ENV} is not set"
    else:
        origin = "as given"
    if not path.is_absolute():
        origin += f", relative to {Path.cwd()}"
    return origin


_RUN_NEEDS = f"for a new warehouse, {_INGEST_FIRST}"


def require_warehouse(path: str | Path, otherwise: str = _RUN_NEEDS) -> None:
    """Refuse, before a command starts, a warehouse that is not there: one line naming the file
    looked for, where that name came from, how to give the right one and (``otherwise``) what
    else to know. A forecasting run needs stored buildings, readings and weather, so it never
    creates a warehouse."""
    path = Path(path)
    _refuse_blank_env(path)
    _refuse_link_loop(path)
    if path.is_file():
        return
    shown = path if path.is_absolute() else Path.cwd() / path
    how = (f"set {WAREHOUSE_ENV} or give --warehouse (a deployment: {WAREHOUSE_ENV} in the "
           "worker's environment, or settings.warehouse)")
    if path.is_dir():
        raise WarehouseError(f"warehouse {shown} is a folder ({_where_from(path)}); give the "
                             f"warehouse file: {how}")
    raise WarehouseMissingError(
        f"warehouse {shown} does not exist ({_where_from(path)}): {how}; {otherwise}")


def _release(key: str) -> None:
    with _open_here_lock:
        _open_here[key] -= 1
        if not _open_here[key]:
            del _open_here[key]


def lock_retrying(wait_s: float | None = None, *, retries: int = 8,
                  backoff_s: float = 0.25) -> Retrying:
    """The one retry policy for a locked warehouse: tries again while the error is DuckDB's file
    lock, pausing ``backoff_s``, then twice as long each time, for at most ``wait_s`` seconds in
    all (pauses of at most :data:`MAX_BACKOFF_S`) or, without it, ``retries`` times; then the
    last error is raised."""

    def pause(state: RetryCallState) -> float:
        doubled = backoff_s * 2 ** (state.attempt_number - 1)
        if wait_s is None:
            return doubled
        return min(doubled, MAX_BACKOFF_S, max(wait_s - (state.seconds_since_start or 0), 0))

    return Retrying(
        retry=retry_if_exception(_is_lock_error),
        stop=stop_after_attempt(retries + 1) if wait_s is None else stop_after_delay(wait_s),
        wait=pause, reraise=True,
    )


def _open(path: Path, read_only: bool, retries: int, backoff_s: float,
          wait_s: float | None) -> duckdb.DuckDBPyConnection:
    """``duckdb.connect`` under :func:`lock_retrying`; its errors as :class:`WarehouseError` s."""
    patience = backoff_s * (2**retries - 1) if wait_s is None else wait_s

    def tell(state) -> None:  # noqa: ANN001 -- before the first pause, a wait worth telling about
        if state.attempt_number == 1 and patience >= 10:
            holder = lock_holder(state.outcome.exception())
            _log.warning("warehouse %s is locked by another process%s; waiting up to %.0f s",
                         path, f" ({holder})" if holder else "", patience)

    policy = lock_retrying(wait_s, retries=retries, backoff_s=backoff_s).copy(before_sleep=tell)
    try:
        return policy(duckdb.connect, str(path), read_only=read_only)
    except duckdb.Error as error:
        if _is_damage(error):
            raise _damaged(path, _first_line(error)) from error
        if (foreign := _foreign_log(path, error)) is not None:
            raise foreign from error
        if not _is_lock_error(error):
            refused = resource_error(error, f"cannot open warehouse {path}")
            if refused is not None:
                raise refused from error
            raise WarehouseError(f"cannot open warehouse {path}: {_first_line(error)}") from error
        holder = lock_holder(error)
        waited = (f"{retries} retries" if wait_s is None
                  else f"waiting {wait_s:.0f} s, the run's --lock-wait-minutes")
        raise WarehouseLockedError(f"warehouse {path} is locked by another process"
                                   f"{f' ({holder})' if holder else ''} (gave up after {waited})",
                                   holder) from error


@contextmanager
def transaction(con: duckdb.DuckDBPyConnection) -> Iterator[duckdb.DuckDBPyConnection]:
    """``BEGIN`` ... ``COMMIT``, or ``ROLLBACK`` if the block raises."""
    con.begin()
    try:
        yield con
    except BaseException:
        con.rollback()
        raise
    con.commit()


__all__ = [
    "DEFAULT_WAREHOUSE",
    "MACHINE_ERRORS",
    "MAX_BACKOFF_S",
    "UNCHANGED",
    "WAREHOUSE_ENV",
    "ForeignLogError",
    "MissingTableError",
    "ResourceError",
    "WarehouseDamagedError",
    "WarehouseError",
    "WarehouseLockedError",
    "WarehouseMissingError",
    "blank_warehouse_env",
    "connect",
    "default_warehouse",
    "has_table",
    "lock_holder",
    "lock_retrying",
    "machine_refusal",
    "out_of_memory",
    "require_warehouse",
    "transaction",
]
