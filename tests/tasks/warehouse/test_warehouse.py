"""Warehouse helpers: pure SQL builders, slice replacement, transactions, the file lock."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from datetime import datetime, timezone

import duckdb
import pandas as pd
import pyarrow as pa
import pytest

from tasks.warehouse.connection import (
    WarehouseError,
    WarehouseLockedError,
    connect,
)
from tasks.warehouse.schema import (
    ADDED_COLUMNS,
    INPUT_TABLES,
    TABLES,
    VIEWS,
    ensure_schema,
)
from tasks.warehouse.slices import (
    Slice,
    delete_slice_sql,
    insert_sql,
    replace_slice,
)

UTC = timezone.utc
T0 = datetime(2020, 1, 1, tzinfo=UTC)
T2 = datetime(2020, 1, 1, 2, tzinfo=UTC)


# --- pure SQL builders -------------------------------------------------------------------------


def test_delete_sql_binds_every_value():
    sql, params = delete_slice_sql(
        "meter_readings", Slice(where_in={"building_id": ("a", "b")}, start=T0, end=T2)
    )
    assert sql == (
        "DELETE FROM meter_readings WHERE building_id IN (SELECT unnest(?)) AND ts >= ? AND ts < ?"
    )
    assert params == [["a", "b"], T0, T2]


def test_delete_sql_open_ended_range_and_several_filters():
    sql, params = delete_slice_sql(
        "weather", Slice(where_in={"site_id": ["s"], "kind": ["observed"]}, end=T2)
    )
    assert sql == "DELETE FROM weather WHERE site_id IN (SELECT unnest(?)) AND kind IN (SELECT unnest(?)) AND ts < ?"
    assert params == [["s"], ["observed"], T2]


def test_delete_sql_refuses_whole_table_unless_asked():
    with pytest.raises(WarehouseError, match="refusing"):
        delete_slice_sql("weather", Slice())
    assert delete_slice_sql("weather", Slice(whole_table=True)) == ("DELETE FROM weather", [])


@pytest.mark.parametrize("bad", ["kwh; DROP TABLE buildings", "Kwh", "1col", "a-b", ""])
def test_identifiers_outside_the_pattern_are_refused(bad):
    with pytest.raises(WarehouseError, match="identifier"):
        delete_slice_sql("meter_readings", Slice(where_in={bad: ["x"]}))
    with pytest.raises(WarehouseError, match="identifier"):
        insert_sql("meter_readings", ["building_id", bad], "staged")


def test_unknown_tables_are_refused():
    with pytest.raises(WarehouseError, match="unknown warehouse table"):
        delete_slice_sql("pg_catalog", Slice(whole_table=True))
    with pytest.raises(WarehouseError, match="unknown warehouse table"):
        insert_sql("x", ["a"], "staged", allowed_tables=["y"])


def test_insert_sql_names_columns_on_both_sides():
    assert insert_sql("meter_readings", ["building_id", "ts", "kwh"], "staged") == (
        "INSERT INTO meter_readings (building_id, ts, kwh) SELECT building_id, ts, kwh FROM staged"
    )
    with pytest.raises(WarehouseError, match="no columns"):
        insert_sql("meter_readings", [], "staged")


# --- against a real DuckDB file -------------------------------------------------------------------


def readings(building: str, hours: range, value: float) -> pa.Table:
    ts = [datetime(2020, 1, 1, h, tzinfo=UTC) for h in hours]
    return pa.table(
        {
            "building_id": pa.array([building] * len(ts)),
            "ts": pa.array(ts, pa.timestamp("us", tz="UTC")),
            "kwh": pa.array([value] * len(ts)),
        }
    )


def all_readings(con) -> list[tuple]:
    return con.execute("SELECT building_id, hour(ts), kwh FROM meter_readings ORDER BY 1, 2").fetchall()


@pytest.fixture
def con(tmp_path):
    with connect(tmp_path / "w.duckdb") as connection:
        ensure_schema(connection)
        yield connection


def test_connect_sets_utc_and_closes(tmp_path):
    with connect(tmp_path / "w.duckdb") as c:
        assert c.execute("SELECT current_setting('TimeZone')").fetchone()[0] == "UTC"
    with pytest.raises(duckdb.ConnectionException):
        c.execute("SELECT 1")


def test_connect_to_missing_directory_is_a_clear_error(tmp_path):
    with pytest.raises(WarehouseError, match="does not exist"):
        with connect(tmp_path / "nope" / "w.duckdb"):
            pass


def test_ensure_schema_creates_input_tables_and_is_repeatable(con):
    ensure_schema(con)
    tables = {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
    assert set(INPUT_TABLES) <= tables


class _Counted:
    """A connection that counts the statements it is given."""

    def __init__(self, con):
        self.con, self.statements = con, []

    def execute(self, statement, *args):
        self.statements.append(statement)
        return self.con.execute(statement, *args)


def test_a_schema_this_release_made_is_not_made_again_and_an_earlier_one_is(con):
    counted = _Counted(con)
    ensure_schema(counted)
    assert len(counted.statements) == 1  # the check alone
    table, column, _ = ADDED_COLUMNS[-1]
    # what an earlier release left: its own version of every view, a column it did not know
    con.execute(f"ALTER TABLE {table} DROP COLUMN {column}")
    for view in VIEWS:
        con.execute(f"CREATE OR REPLACE VIEW {view} AS SELECT 1 AS earlier")
    ensure_schema(counted)
    assert len(counted.statements) > len(TABLES) + len(VIEWS)
    assert column in {r[0] for r in con.execute(f"DESCRIBE {table}").fetchall()}
    for view in VIEWS:
        assert "earlier" not in {r[0] for r in con.execute(f"DESCRIBE {view}").fetchall()}


def test_replace_slice_touches_only_its_slice(con):
    replace_slice(con, "meter_readings", readings("a", range(0, 4), 1.0), Slice(where_in={"building_id": ["a"]}))
    replace_slice(con, "meter_readings", readings("b", range(0, 4), 5.0), Slice(where_in={"building_id": ["b"]}))
    deleted, inserted = replace_slice(
        con,
        "meter_readings",
        readings("a", range(1, 3), 2.0),
        Slice(where_in={"building_id": ["a"]}, start=datetime(2020, 1, 1, 1, tzinfo=UTC), end=datetime(2020, 1, 1, 3, tzinfo=UTC)),
    )
    assert (deleted, inserted) == (2, 2)
    expected = [("a", 0, 1.0), ("a", 1, 2.0), ("a", 2, 2.0), ("a", 3, 1.0)] + [("b", h, 5.0) for h in range(4)]
    assert all_readings(con) == expected


def test_replace_slice_twice_leaves_the_same_rows(con):
    new = readings("a", range(0, 5), 3.0)
    slice_ = Slice(where_in={"building_id": ["a"]})
    assert replace_slice(con, "meter_readings", new, slice_) == (0, 5)
    first = all_readings(con)
    assert replace_slice(con, "meter_readings", new, slice_) == (5, 5)
    assert all_readings(con) == first


def test_replace_slice_accepts_pandas_and_streams(con):
    frame = readings("p", range(0, 3), 1.5).to_pandas()
    assert isinstance(frame, pd.DataFrame)
    replace_slice(con, "meter_readings", frame, Slice(where_in={"building_id": ["p"]}))
    batches = readings("r", range(0, 6), 2.5).to_batches(max_chunksize=2)
    reader = pa.RecordBatchReader.from_batches(batches[0].schema, iter(batches))
    assert replace_slice(con, "meter_readings", reader, Slice(where_in={"building_id": ["r"]})) == (0, 6)
    assert con.execute("SELECT building_id, count(*) FROM meter_readings GROUP BY 1 ORDER BY 1").fetchall() == [
        ("p", 3),
        ("r", 6),
    ]


def test_columns_missing_from_rows_get_their_default(con):
    rows = pa.table({"site_id": ["s"], "ts": pa.array([T0], pa.timestamp("us", tz="UTC")), "temperature_c": [4.0]})
    replace_slice(con, "weather", rows, Slice(where_in={"site_id": ["s"]}))
    assert con.execute("SELECT kind, temperature_c, wind_speed_ms FROM weather").fetchall() == [("observed", 4.0, None)]


def test_failed_insert_rolls_back_the_delete(con):
    replace_slice(con, "meter_readings", readings("a", range(0, 3), 1.0), Slice(where_in={"building_id": ["a"]}))
    before = all_readings(con)
    bad = readings("a", range(0, 3), 9.0).set_column(0, "building_id", pa.array([None, "a", "a"], pa.string()))
    with pytest.raises(duckdb.ConstraintException):
        replace_slice(con, "meter_readings", bad, Slice(where_in={"building_id": ["a"]}))
    assert all_readings(con) == before


def test_unknown_column_is_refused_before_anything_changes(con):
    replace_slice(con, "meter_readings", readings("a", range(0, 2), 1.0), Slice(where_in={"building_id": ["a"]}))
    before = all_readings(con)
    with pytest.raises(WarehouseError, match="not in table"):
        replace_slice(con, "meter_readings", readings("a", range(0, 2), 1.0).append_column("extra", pa.array([1, 2])), Slice(where_in={"building_id": ["a"]}))
    with pytest.raises(WarehouseError, match="not in table"):
        replace_slice(con, "meter_readings", readings("a", range(0, 2), 1.0), Slice(where_in={"site_id": ["a"]}))
    assert all_readings(con) == before


def test_the_schema_lists_every_table_and_only_its_tables_take_slices(con):
    kinds = dict(con.execute("SELECT table_name, table_type FROM information_schema.tables").fetchall())
    assert {t for t, kind in kinds.items() if kind == "BASE TABLE"} == set(TABLES)
    assert {t for t, kind in kinds.items() if kind == "VIEW"} == set(VIEWS)
    con.execute("CREATE TABLE extra_results (building_id VARCHAR NOT NULL, score DOUBLE)")
    rows = pa.table({"building_id": ["a", "b"], "score": [1.0, 2.0]})
    with pytest.raises(WarehouseError, match="unknown warehouse table 'extra_results'"):
        replace_slice(con, "extra_results", rows, Slice(where_in={"building_id": ["a", "b"]}))


def _hold_lock(path, seconds: float) -> subprocess.Popen:
    code = textwrap.dedent(
        f"""
        import duckdb, sys, time
        con = duckdb.connect({str(path)!r})
        print("locked", flush=True)
        time.sleep({seconds})
        con.close()
        """
    )
    holder = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "locked"
    return holder


def test_connect_waits_for_the_file_lock_then_gives_up(tmp_path):
    path = tmp_path / "locked.duckdb"
    holder = _hold_lock(path, 1.5)
    try:
        with pytest.raises(WarehouseLockedError, match="locked by another process"):
            with connect(path, retries=1, backoff_s=0.05):
                pass
        began = time.perf_counter()
        with connect(path, retries=8, backoff_s=0.1) as c:
            assert c.execute("SELECT 42").fetchone() == (42,)
        assert time.perf_counter() - began > 0.3  # it really waited for the holder
    finally:
        holder.wait(timeout=30)


def test_a_wait_for_the_lock_ends_within_wait_s(tmp_path):
    """The one retry policy (:func:`lock_retrying`): backoff pauses, the last one cut short, so
    a run's ``--lock-wait-minutes`` is kept to the second."""
    path = tmp_path / "locked.duckdb"
    holder = _hold_lock(path, 10)
    try:
        began = time.perf_counter()
        with pytest.raises(WarehouseLockedError, match=r"gave up after waiting 2 s, the run's "):
            with connect(path, wait_s=2.0, backoff_s=0.05):
                pass
        assert 2.0 <= time.perf_counter() - began < 3.5
    finally:
        holder.kill()
        holder.wait(timeout=30)
