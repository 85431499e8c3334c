"""Idempotent writes: a writer names the slice of a table it owns and replaces it.

A *slice* is "these buildings, this UTC time range" or "these buildings x this week x these
models". :func:`replace_slice` deletes the slice and inserts the new rows inside one
transaction, so a rerun replaces rows and never duplicates them. An operator's hourly file is
written by :func:`write_key_hours` instead: only the hours it holds change, so a file with gaps
never erases the stored hours between its rows. Values are always bound with
``?``; identifiers (table and column names) are checked against the warehouse schema and a
strict pattern before they reach SQL. Rows come in as a pandas frame, an Arrow table or an
Arrow ``RecordBatchReader`` (streamed, so a large load never sits in memory at once) and are
inserted by one ``INSERT ... SELECT``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import duckdb
import pyarrow as pa

from tasks.warehouse.connection import WarehouseError, transaction
from tasks.warehouse.schema import TABLES

_IDENTIFIER = re.compile(r"^[a-z_][a-z0-9_]*$")
_STAGING_VIEW = "__wadiro_staged_rows"


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


def check_identifier(name: str) -> str:
    """``name`` if it is a plain lower-case SQL identifier, else :class:`WarehouseError`."""
    if not _IDENTIFIER.match(name):
        raise WarehouseError(f"invalid SQL identifier {name!r}")
    return name


def _check_table(table: str, allowed_tables: Sequence[str] | None) -> str:
    allowed = TABLES if allowed_tables is None else allowed_tables
    if table not in allowed:
        raise WarehouseError(f"unknown warehouse table {table!r}")
    return check_identifier(table)


def delete_slice_sql(
    table: str, slice_: Slice, allowed_tables: Sequence[str] | None = None
) -> tuple[str, list[Any]]:
    """The ``DELETE`` statement and its bound parameters for one slice of ``table``."""
    _check_table(table, allowed_tables)
    clauses: list[str] = []
    params: list[Any] = []
    for column, values in slice_.where_in.items():
        clauses.append(f"{check_identifier(column)} IN (SELECT unnest(?))")
        params.append(list(values))
    if slice_.start is not None:
        clauses.append(f"{check_identifier(slice_.time_column)} >= ?")
        params.append(slice_.start)
    if slice_.end is not None:
        clauses.append(f"{check_identifier(slice_.time_column)} < ?")
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
    cols = ", ".join(check_identifier(c) for c in columns)
    return f"INSERT INTO {table} ({cols}) SELECT {cols} FROM {check_identifier(source)}"


def _table_columns(con: duckdb.DuckDBPyConnection, table: str) -> list[str]:
    """``table``'s columns in order, ``[]`` when there is no such table. From the catalog
    entry the relation binds (a twentieth of an ``information_schema`` query's CPU: a run
    checks every table it writes, once per batch)."""
    try:
        return list(con.table(table).columns)
    except duckdb.CatalogException:
        return []


def _check_columns(con: duckdb.DuckDBPyConnection, table: str, columns: Sequence[str]) -> None:
    """``table`` is a warehouse table that exists and holds every one of ``columns``."""
    _check_table(table, None)
    table_columns = _table_columns(con, table)
    if not table_columns:
        raise WarehouseError(f"table {table!r} does not exist; call ensure_schema first")
    unknown = [c for c in columns if c not in table_columns]
    if unknown:
        raise WarehouseError(f"columns {unknown} are not in table {table!r}")


@contextmanager
def _staged(con: duckdb.DuckDBPyConnection,
            data: pa.Table | pa.RecordBatchReader) -> Iterator[None]:
    """``data`` registered as the staging view for the block's statements."""
    con.register(_STAGING_VIEW, data)
    yield
    # Not in a ``finally``: on failure the transaction is aborted and cannot unregister; its
    # rollback drops the view (and a later register under the same name replaces it anyway).
    con.unregister(_STAGING_VIEW)


def _as_arrow(rows: Any) -> pa.Table | pa.RecordBatchReader:
    if isinstance(rows, (pa.Table, pa.RecordBatchReader)):
        return rows
    if hasattr(rows, "to_numpy") and hasattr(rows, "columns"):  # a pandas DataFrame
        return pa.Table.from_pandas(rows, preserve_index=False)
    raise TypeError(f"rows must be a pandas DataFrame or Arrow table/reader, not {type(rows)!r}")


def empty_rows(con: duckdb.DuckDBPyConnection, table: str) -> pa.Table:
    """A zero-row Arrow table with ``table``'s schema (to clear a slice and insert nothing)."""
    return con.sql(f"SELECT * FROM {_check_table(table, None)} LIMIT 0").to_arrow_table()  # noqa: S608


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
    columns = list(data.schema.names)
    _check_columns(con, table, columns + slice_.columns())
    delete, params = delete_slice_sql(table, slice_)
    # Staged first: a range delete reads the staged rows' keys and times.
    with (transaction(con) if own_transaction else nullcontext()), _staged(con, data):
        deleted = con.execute(delete, params).fetchone()[0]
        inserted = con.execute(insert_sql(table, columns, _STAGING_VIEW)).fetchone()[0]
        return int(deleted), int(inserted)


def _checked_rows(con: duckdb.DuckDBPyConnection, table: str, rows: Any,
                  needed: Sequence[str]) -> tuple[pa.Table, list[str]]:
    data = _as_arrow(rows)
    if isinstance(data, pa.RecordBatchReader):  # read twice (ranges, then rows): materialise
        data = data.read_all()
    columns = list(data.schema.names)
    _check_columns(con, table, [*columns, *needed])
    missing = [c for c in needed if c not in columns]
    if missing:
        raise WarehouseError(f"rows for {table!r} lack the key column(s) {missing}")
    return data, columns


def replace_ranges_sql(
    table: str, key: str, where_in: Sequence[str], time_column: str = "ts"
) -> str:
    """``DELETE`` of every stored row whose ``key`` appears in the staged rows and whose time
    lies from that key's first to its last staged time (inclusive), and whose ``where_in``
    columns equal the bound values (one ``?`` per column, in order)."""
    return _delete_within(table, key, where_in, time_column,
                          f"SELECT {check_identifier(key)}, min({check_identifier(time_column)}) "
                          f"AS lo, max({check_identifier(time_column)}) AS hi FROM {_STAGING_VIEW} "
                          f"GROUP BY {check_identifier(key)}")


def replace_hours_sql(
    table: str, key: str, where_in: Sequence[str], time_column: str = "ts"
) -> str:
    """``DELETE`` of every stored row at an hour that the staged rows hold for its ``key`` (and
    whose ``where_in`` columns equal the bound values), and of no other. The staged hours are
    grouped into runs of consecutive hours (gaps and islands), so a file holding every hour of
    a stretch costs one range per key, and the hours between two runs are never touched."""
    k, tc = check_identifier(key), check_identifier(time_column)
    runs = (f"SELECT {k}, min({tc}) AS lo, max({tc}) AS hi FROM ("
            f"SELECT {k}, {tc}, epoch_us({tc}) // 3600000000 - row_number() OVER "
            f"(PARTITION BY {k} ORDER BY {tc}) AS island FROM {_STAGING_VIEW}) "
            f"GROUP BY {k}, island")
    return _delete_within(table, key, where_in, time_column, runs)


def _delete_within(table: str, key: str, where_in: Sequence[str], time_column: str,
                   ranges: str) -> str:
    """``DELETE`` of the stored rows of each key inside the ranges ``ranges`` selects (columns
    key, lo, hi; inclusive)."""
    t, k, tc = check_identifier(table), check_identifier(key), check_identifier(time_column)
    _check_table(t, None)
    extra = "".join(f" AND {t}.{check_identifier(c)} = ?" for c in where_in)
    return (f"DELETE FROM {t} USING ({ranges}) AS r "
            f"WHERE {t}.{k} = r.{k} AND {t}.{tc} BETWEEN r.lo AND r.hi{extra}")


@dataclass(frozen=True)
class HoursWritten:
    """What :func:`write_key_hours` did, in rows."""

    replaced: int
    """Stored rows at an hour the new rows hold (replaced by them)."""
    removed: int
    """Stored rows the new rows do not hold, removed because their key's range was replaced."""
    inserted: int


def write_key_hours(
    con: duckdb.DuckDBPyConnection,
    table: str,
    rows: Any,
    key: str,
    *,
    where: Mapping[str, Any] | None = None,
    time_column: str = "ts",
    replace_range: bool = False,
    own_transaction: bool = True,
) -> HoursWritten:
    """Write hourly ``rows`` (unique per ``key`` and hour) over what is stored for their keys,
    restricted to ``where`` (column = value, e.g. ``kind = 'observed'``).

    By default only the hours the rows hold change (an upsert): a stored hour the rows do not
    mention is kept, whatever gap lies between the rows. With ``replace_range`` every stored
    row of a key from its first to its last hour in ``rows`` is replaced, so the hours of that
    range the rows lack are removed (and counted). Rows of other keys are untouched either way.
    See :func:`replace_slice` for ``own_transaction``.
    """
    where = dict(where or {})
    data, columns = _checked_rows(con, table, rows, [key, time_column, *where])
    params = list(where.values())
    with (transaction(con) if own_transaction else nullcontext()), _staged(con, data):
        replaced = con.execute(replace_hours_sql(table, key, list(where), time_column),
                               params).fetchone()[0]
        removed = (con.execute(replace_ranges_sql(table, key, list(where), time_column),
                               params).fetchone()[0] if replace_range else 0)
        inserted = con.execute(insert_sql(table, columns, _STAGING_VIEW)).fetchone()[0]
        return HoursWritten(int(replaced), int(removed), int(inserted))


def replace_unless_newer_sql(table: str, keys: Sequence[str], version: str) -> tuple[str, str]:
    """The ``DELETE`` of stored rows that the staged rows supersede (same ``keys``, a version
    not later, or none) and the ``INSERT`` of the staged rows no stored row supersedes."""
    t, v = check_identifier(table), check_identifier(version)
    _check_table(t, None)
    same = " AND ".join(f"{t}.{check_identifier(k)} = s.{k}" for k in keys)
    delete = (f"DELETE FROM {t} USING {_STAGING_VIEW} AS s WHERE {same} "
              f"AND ({t}.{v} IS NULL OR {t}.{v} <= s.{v})")
    kept = " AND ".join(f"w.{k} = s.{k}" for k in keys)
    insert = (f"SELECT s.* FROM {_STAGING_VIEW} AS s "
              f"WHERE NOT EXISTS (SELECT 1 FROM {t} AS w WHERE {kept})")
    return delete, insert


def replace_unless_newer(
    con: duckdb.DuckDBPyConnection,
    table: str,
    rows: Any,
    keys: Sequence[str],
    version: str,
    *,
    own_transaction: bool = True,
) -> tuple[int, int]:
    """Per ``keys`` (e.g. site, hour, kind), keep whichever row has the later ``version`` (e.g.
    a forecast's issue time): a staged row replaces a stored one of the same or an earlier
    version (or none), and is left out when a later one is stored. The staged rows must be
    unique per ``keys``. Returns (deleted, inserted)."""
    data, columns = _checked_rows(con, table, rows, [*keys, version])
    delete, select = replace_unless_newer_sql(table, keys, version)
    cols = ", ".join(check_identifier(c) for c in columns)
    with (transaction(con) if own_transaction else nullcontext()), _staged(con, data):
        deleted = con.execute(delete).fetchone()[0]
        inserted = con.execute(
            f"INSERT INTO {table} ({cols}) SELECT {cols} FROM ({select})").fetchone()[0]
        return int(deleted), int(inserted)
