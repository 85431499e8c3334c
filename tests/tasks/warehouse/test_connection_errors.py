"""What a command says about a warehouse that is missing, empty, damaged or locked."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import duckdb
import pytest

from tasks.warehouse.connection import (
    MissingTableError,
    WarehouseDamagedError,
    WarehouseLockedError,
    WarehouseMissingError,
    connect,
)
from tasks.warehouse.schema import ensure_schema


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


def test_a_file_duckdb_cut_short_after_freeing_its_last_blocks_is_healthy(tmp_path):
    """After a delete DuckDB cuts free blocks off the file's end, yet the header on disk still
    counts them until the next checkpoint: shorter than the header says is not damage."""
    path = tmp_path / "w.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute("SET threads = 1")  # one writer: the same block layout on every run
        con.execute("CREATE TABLE kept AS SELECT range AS i, hash(range) AS r FROM range(1000000)")
        con.execute("CHECKPOINT")
        con.execute("CREATE TABLE cut AS SELECT range AS i, hash(range + 1000000) AS r "
                    "FROM range(1000000)")
        con.execute("CHECKPOINT")
        full = path.stat().st_size
        con.execute("DELETE FROM cut WHERE i > 10")
        con.execute("CHECKPOINT")
    assert path.stat().st_size < full  # the situation under test did arise
    for read_only in (True, False):
        with connect(path, read_only=read_only) as con:
            assert con.execute("SELECT count(*) FROM kept").fetchone() == (1000000,)
            assert con.execute("SELECT count(*) FROM cut").fetchone() == (11,)


def test_a_file_still_open_in_this_process_is_not_called_damaged(tmp_path):
    """A second connection shares the live instance, whose blocks may be ahead of the file."""
    path = tmp_path / "w.duckdb"
    with connect(path) as writer:
        writer.execute("CREATE TABLE t AS SELECT range AS i, random() AS r FROM range(2000000)")
        with connect(path) as reader:
            assert reader.execute("SELECT count(*) FROM t").fetchone() == (2000000,)


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
