"""Opening the DuckDB warehouse file, and transactions on it.

DuckDB admits one writing process, and while it holds the file no other process can open it,
not even read-only. :func:`connect` therefore retries on the file lock with exponential backoff
and always closes the connection on exit; writers keep their transactions short.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb
from wadiro_fleet.tasks.errors import PipelineError

DEFAULT_WAREHOUSE = "warehouse.duckdb"
"""The embedded default warehouse, created on first use (relative to the working directory)."""


class WarehouseError(PipelineError, RuntimeError):
    """The warehouse could not be opened or written as asked."""


class WarehouseLockedError(WarehouseError):
    """Another process holds the DuckDB file lock for longer than the retries allow."""


def _is_lock_error(error: duckdb.Error) -> bool:
    return isinstance(error, duckdb.IOException) and "lock" in str(error).lower()


@contextmanager
def connect(
    path: str | Path,
    *,
    read_only: bool = False,
    retries: int = 8,
    backoff_s: float = 0.25,
) -> Iterator[duckdb.DuckDBPyConnection]:
    """Open the warehouse file, retrying with exponential backoff while another process holds it.

    The session time zone is UTC, so ``TIMESTAMPTZ`` values read and written are UTC instants.
    The connection is always closed on exit.
    """
    path = Path(path)
    if not read_only and path.parent and not path.parent.exists():
        raise WarehouseError(f"warehouse directory does not exist: {path.parent}")
    attempt = 0
    while True:
        try:
            con = duckdb.connect(str(path), read_only=read_only)
            break
        except duckdb.Error as error:
            if not _is_lock_error(error):
                raise WarehouseError(f"cannot open warehouse {path}: {error}") from error
            if attempt >= retries:
                raise WarehouseLockedError(
                    f"warehouse {path} is locked by another process (gave up after {retries} retries)"
                ) from error
            time.sleep(backoff_s * 2**attempt)
            attempt += 1
    try:
        con.execute("SET TimeZone = 'UTC'")
        yield con
    finally:
        con.close()


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


__all__ = ["DEFAULT_WAREHOUSE", "WarehouseError", "WarehouseLockedError", "connect", "transaction"]
