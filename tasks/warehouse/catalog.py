"""What the warehouse's catalog holds, asked of an open connection (no import of the warehouse's
other modules, so that any of them may ask it)."""

from __future__ import annotations

import duckdb


def has_table(con: duckdb.DuckDBPyConnection, name: str) -> bool:
    """Whether the warehouse has a table ``name`` (one made before it existed has not)."""
    return bool(con.execute("SELECT count(*) FROM information_schema.tables WHERE table_name = ?",
                            [name]).fetchone()[0])
