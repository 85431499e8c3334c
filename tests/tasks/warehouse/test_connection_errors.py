"""What a command says about a warehouse that is missing, empty, damaged or locked."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import duckdb
import pytest
from wadiro_fleet.tasks.warehouse.connection import (
    MissingTableError,
    WarehouseDamagedError,
    WarehouseLockedError,
    WarehouseMissingError,
    connect,
)
from wadiro_fleet.tasks.warehouse.schema import ensure_schema


def test_a_missing_file_is_not_created_by_a_reader(tmp_path):
    path = tmp_path / "none.duckdb"
    with pytest.raises(WarehouseMissingError, match="does not exist; run `wadiro ingest"):
        with connect(path, read_only=True):
            pass
    assert not path.exists()


@pytest.mark.parametrize(("table", "todo"), [("buildings", "wadiro ingest"),
                                             ("scores", "wadiro forecast")])
def test_a_missing_table_says_what_to_run_first(tmp_path, table, todo):
    path = tmp_path / "empty.duckdb"
    duckdb.connect(str(path)).close()
    buildings = scores = "a Python variable DuckDB must not read instead"  # noqa: F841
    with pytest.raises(MissingTableError, match=f"has no table '{table}'.*{todo}"):
        with connect(path, read_only=True) as con:
            con.execute(f"SELECT * FROM {table}").fetchall()


@pytest.mark.parametrize("damage", ["garbage", "truncated", "overwritten"])
def test_a_damaged_file_is_named_with_what_to_do(tmp_path, damage):
    path = tmp_path / "w.duckdb"
    with connect(path) as con:
        ensure_schema(con)
        con.execute("INSERT INTO meter_readings SELECT 'b', TIMESTAMPTZ '2024-01-01' + "
                    "INTERVAL (i) HOUR, i FROM range(200000) t(i)")
    if damage == "garbage":
        path.write_bytes(os.urandom(5000))
    elif damage == "truncated":
        os.truncate(path, path.stat().st_size // 2)
    else:
        with path.open("r+b") as file:
            file.seek(path.stat().st_size // 2)
            file.write(os.urandom(256 * 1024))
    with pytest.raises(WarehouseDamagedError, match="is damaged .*restore it from a backup"):
        with connect(path, read_only=True) as con:
            con.execute("SELECT sum(kwh) FROM meter_readings").fetchall()


def test_the_lock_holder_is_named(tmp_path):
    path = tmp_path / "w.duckdb"
    duckdb.connect(str(path)).close()
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import duckdb, sys
        con = duckdb.connect({str(path)!r})
        print("locked", flush=True)
        sys.stdin.readline()
    """)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(WarehouseLockedError) as locked:
            with connect(path, retries=1, backoff_s=0.01):
                pass
        assert f"(PID {holder.pid})" in locked.value.holder
        assert locked.value.holder in str(locked.value)
    finally:
        holder.communicate("\n", timeout=30)
