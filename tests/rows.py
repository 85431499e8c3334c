"""Many rows into a DuckDB table in one statement: DuckDB's ``executemany`` runs one INSERT a
row, seconds for a few thousand rows, which the tests' warehouses made row by row spent."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import duckdb
import pyarrow as pa

FORECAST_COLUMNS = ["building_id", "model", "target_week", "ts", "y_hat", "run_id", "y_lo_80",
                    "y_hi_80", "y_lo_95", "y_hi_95"]
"""A forecast row's columns with its bands, in the order the tests give them."""


def insert_rows(con: duckdb.DuckDBPyConnection, table: str, columns: Sequence[str],
                rows: Iterable[Sequence[Any]]) -> None:
    """``INSERT INTO table (columns)`` every row of ``rows`` (tuples in ``columns``' order);
    values are cast to the table's types as ``executemany`` would cast them."""
    data = [tuple(row) for row in rows]
    if not data:
        return
    values = pa.table({name: pa.array([row[i] for row in data])
                       for i, name in enumerate(columns)})
    con.register("inserted_rows", values)
    try:
        con.execute(f"INSERT INTO {table} ({', '.join(columns)}) "
                    f"SELECT {', '.join(columns)} FROM inserted_rows")
    finally:
        con.unregister("inserted_rows")
