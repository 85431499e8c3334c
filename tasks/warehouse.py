"""DuckDB warehouse access: connections, schema, idempotent slice replacement.

Writes are idempotent by construction: a writer names the *slice* it owns (for example
"these buildings, this UTC time range") and :func:`replace_slice` deletes that slice and inserts
the new rows inside one transaction. Values are always bound with ``?``; identifiers (table and
column names) are checked against the registered DDL and a strict pattern before they reach SQL.
Rows come in as a pandas frame, an Arrow table or an Arrow ``RecordBatchReader`` (streamed, so a
large load never has to sit in memory at once) and are inserted by one ``INSERT ... SELECT``.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from tasks.schema import INPUT_TABLES

__all__ = [
    "Slice",
    "WarehouseError",
    "WarehouseLockedError",
    "connect",
    "delete_slice_sql",
    "ensure_schema",
    "insert_sql",
    "register_tables",
    "registered_tables",
    "replace_slice",
    "transaction",
]

_IDENTIFIER = re.compile(r"^[a-z_][a-z0-9_]*$")
_STAGING_VIEW = "__wadiro_staged_rows"

_TABLES: dict[str, str] = dict(INPUT_TABLES)


class WarehouseError(RuntimeError):
    """The warehouse could not be opened or written as asked."""


class WarehouseLockedError(WarehouseError):
    """Another process holds the DuckDB file lock for longer than the retries allow."""


def register_tables(ddl: Mapping[str, str]) -> None:
    """Add tables (name -> ``CREATE TABLE IF NOT EXISTS`` statement) to the warehouse schema.

    Other modules (e.g. the result tables) call this at import time; :func:`ensure_schema`
    then creates them, and their names become valid targets of :func:`replace_slice`.
    """
    for name, statement in ddl.items():
        _check_identifier(name)
        if name in _TABLES and _TABLES[name] != statement:
            raise WarehouseError(f"table {name!r} is already registered with a different DDL")
        _TABLES[name] = statement


def registered_tables() -> dict[str, str]:
    """A copy of every registered table's DDL."""
    return dict(_TABLES)


def ensure_schema(con: duckdb.DuckDBPyConnection, tables: Mapping[str, str] | None = None) -> None:
    """Create the given tables (default: all registered ones) if they do not exist yet."""
    for statement in (tables if tables is not None else _TABLES).values():
        con.execute(statement)


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


@dataclass(frozen=True)
class Slice:
    """The rows a writer owns: every ``column IN values`` filter, and optionally a time range.

    ``start`` is inclusive and ``end`` exclusive. An empty ``where_in`` with no time range means
    the whole table; :func:`delete_slice_sql` refuses that unless ``whole_table`` is set.
    """

    where_in: Mapping[str, Sequence[Any]] = field(default_factory=dict)
    time_column: str = "ts"
    start: datetime | None = None
    end: datetime | None = None
    whole_table: bool = False

    def columns(self) -> list[str]:
        """Every column the slice's filter mentions."""
        cols = list(self.where_in)
        if self.start is not None or self.end is not None:
            cols.append(self.time_column)
        return cols


def _check_identifier(name: str) -> str:
    if not _IDENTIFIER.match(name):
        raise WarehouseError(f"invalid SQL identifier {name!r}")
    return name


def _check_table(table: str, allowed_tables: Sequence[str] | None) -> str:
    allowed = _TABLES if allowed_tables is None else allowed_tables
    if table not in allowed:
        raise WarehouseError(f"unknown warehouse table {table!r}")
    return _check_identifier(table)


def delete_slice_sql(
    table: str, slice_: Slice, allowed_tables: Sequence[str] | None = None
) -> tuple[str, list[Any]]:
    """The ``DELETE`` statement and its bound parameters for one slice of ``table``."""
    _check_table(table, allowed_tables)
    clauses: list[str] = []
    params: list[Any] = []
    for column, values in slice_.where_in.items():
        clauses.append(f"{_check_identifier(column)} IN (SELECT unnest(?))")
        params.append(list(values))
    if slice_.start is not None:
        clauses.append(f"{_check_identifier(slice_.time_column)} >= ?")
        params.append(slice_.start)
    if slice_.end is not None:
        clauses.append(f"{_check_identifier(slice_.time_column)} < ?")
        params.append(slice_.end)
    if not clauses:
        if not slice_.whole_table:
            raise WarehouseError(f"refusing to delete all of {table!r} without whole_table=True")
        return f"DELETE FROM {table}", []
    return f"DELETE FROM {table} WHERE " + " AND ".join(clauses), params


def insert_sql(
    table: str, columns: Sequence[str], source: str, allowed_tables: Sequence[str] | None = None
) -> str:
    """``INSERT INTO table (cols) SELECT cols FROM source`` with checked identifiers."""
    _check_table(table, allowed_tables)
    if not columns:
        raise WarehouseError(f"no columns to insert into {table!r}")
    cols = ", ".join(_check_identifier(c) for c in columns)
    return f"INSERT INTO {table} ({cols}) SELECT {cols} FROM {_check_identifier(source)}"


def _table_columns(con: duckdb.DuckDBPyConnection, table: str) -> list[str]:
    rows = con.execute(
        "SELECT column_name FROM information_schema.columns WHERE table_name = ? "
        "ORDER BY ordinal_position",
        [table],
    ).fetchall()
    return [r[0] for r in rows]


def _as_arrow(rows: Any) -> pa.Table | pa.RecordBatchReader:
    if isinstance(rows, (pa.Table, pa.RecordBatchReader)):
        return rows
    if hasattr(rows, "to_numpy") and hasattr(rows, "columns"):  # a pandas DataFrame
        return pa.Table.from_pandas(rows, preserve_index=False)
    raise TypeError(f"rows must be a pandas DataFrame or Arrow table/reader, not {type(rows)!r}")


def replace_slice(
    con: duckdb.DuckDBPyConnection,
    table: str,
    rows: Any,
    slice_: Slice,
    *,
    own_transaction: bool = True,
) -> tuple[int, int]:
    """Delete ``slice_`` from ``table`` and insert ``rows``; return (deleted, inserted) counts.

    With ``own_transaction`` the two statements run in their own transaction; pass ``False``
    when the caller already holds one (to make several tables change atomically). Every column
    of ``rows`` must exist in the table; table columns missing from ``rows`` get their defaults.
    """
    data = _as_arrow(rows)
    _check_table(table, None)
    table_columns = _table_columns(con, table)
    if not table_columns:
        raise WarehouseError(f"table {table!r} does not exist; call ensure_schema first")
    columns = list(data.schema.names)
    unknown = [c for c in columns + slice_.columns() if c not in table_columns]
    if unknown:
        raise WarehouseError(f"columns {unknown} are not in table {table!r}")
    delete, params = delete_slice_sql(table, slice_)
    if own_transaction:
        with transaction(con):
            return _delete_insert(con, table, data, columns, delete, params)
    return _delete_insert(con, table, data, columns, delete, params)


def _delete_insert(
    con: duckdb.DuckDBPyConnection,
    table: str,
    data: pa.Table | pa.RecordBatchReader,
    columns: list[str],
    delete: str,
    params: list[Any],
) -> tuple[int, int]:
    deleted = con.execute(delete, params).fetchone()[0]
    con.register(_STAGING_VIEW, data)
    # On failure the transaction is aborted and cannot unregister; its rollback drops the view
    # (and a later register under the same name replaces it anyway).
    inserted = con.execute(insert_sql(table, columns, _STAGING_VIEW)).fetchone()[0]
    con.unregister(_STAGING_VIEW)
    return int(deleted), int(inserted)
