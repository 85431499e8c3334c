"""Writes keyed per building or site: the hours written replaced (or a range per key), and the
latest version kept."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import duckdb
import pyarrow as pa
import pytest

from tasks.warehouse.connection import WarehouseError
from tasks.warehouse.schema import ensure_schema
from tasks.warehouse.slices import (
    HoursWritten,
    replace_hours_sql,
    replace_ranges_sql,
    replace_unless_newer,
    replace_unless_newer_sql,
    write_key_hours,
)

UTC = timezone.utc
TS = pa.timestamp("us", tz="UTC")


def hour(h: int) -> datetime:
    return datetime(2024, 1, 1, tzinfo=UTC) + timedelta(hours=h)


@pytest.fixture
def con():
    con = duckdb.connect()
    ensure_schema(con)
    con.execute("INSERT INTO meter_readings SELECT b, TIMESTAMPTZ '2024-01-01 00:00+00' + h * INTERVAL 1 HOUR, 1.0 "
                "FROM (VALUES ('a'), ('b')) v(b), range(10) r(h)")
    yield con
    con.close()


def test_sql_checks_identifiers_and_binds_the_filter():
    sql = replace_ranges_sql("weather", "site_id", ["kind"])
    assert sql.endswith("weather.ts BETWEEN r.lo AND r.hi AND weather.kind = ?")
    with pytest.raises(WarehouseError):
        replace_ranges_sql("weather; DROP TABLE runs", "site_id", [])
    with pytest.raises(WarehouseError):
        replace_hours_sql("weather", "site_id) OR (1=1", [])
    with pytest.raises(WarehouseError):
        replace_unless_newer_sql("weather", ["site_id", "ts) OR (1=1"], "issued_at")


def stored(con) -> dict:
    return {(b, t): v for b, t, v in con.execute("SELECT building_id, ts, kwh FROM meter_readings").fetchall()}


def test_only_the_hours_written_change_whatever_lies_between_them(con):
    before = stored(con)
    rows = pa.table({"building_id": ["a", "a", "a", "b"], "ts": pa.array([hour(2), hour(3), hour(7), hour(12)], TS),
                     "kwh": [7.0, None, 8.0, 9.0]})
    assert write_key_hours(con, "meter_readings", rows, "building_id") == HoursWritten(3, 0, 4)
    assert stored(con) == {**before, ("a", hour(2)): 7.0, ("a", hour(3)): None, ("a", hour(7)): 8.0,
                           ("b", hour(12)): 9.0}


def test_a_replaced_range_loses_the_hours_it_lacks_and_counts_them(con):
    before = stored(con)
    rows = pa.table({"building_id": ["a", "a"], "ts": pa.array([hour(2), hour(5)], TS), "kwh": [7.0, 8.0]})
    assert write_key_hours(con, "meter_readings", rows, "building_id", replace_range=True) == HoursWritten(2, 2, 2)
    expected = {k: v for k, v in before.items() if not (k[0] == "a" and k[1] in (hour(3), hour(4)))}
    assert stored(con) == {**expected, ("a", hour(2)): 7.0, ("a", hour(5)): 8.0}


def test_a_failed_insert_rolls_the_delete_back(con):
    rows = pa.table({"building_id": ["a", None], "ts": pa.array([hour(2), hour(3)], TS), "kwh": [7.0, 8.0]})
    with pytest.raises(duckdb.Error):
        write_key_hours(con, "meter_readings", rows, "building_id", replace_range=True)
    assert con.execute("SELECT count(*), sum(kwh) FROM meter_readings").fetchone() == (20, 20.0)


def test_the_later_version_wins_in_either_order(con):
    def forecast(value: float, issued: int) -> pa.Table:
        return pa.table({"site_id": ["s"], "ts": pa.array([hour(30)], TS), "temperature_c": [value],
                         "kind": ["forecast"], "issued_at": pa.array([hour(issued)], TS)})

    keys = ("site_id", "ts", "kind")
    assert replace_unless_newer(con, "weather", forecast(1.0, 5), keys, "issued_at") == (0, 1)
    assert replace_unless_newer(con, "weather", forecast(2.0, 9), keys, "issued_at") == (1, 1)
    assert replace_unless_newer(con, "weather", forecast(3.0, 7), keys, "issued_at") == (0, 0)
    assert replace_unless_newer(con, "weather", forecast(4.0, 9), keys, "issued_at") == (1, 1)
    assert con.execute("SELECT temperature_c, issued_at FROM weather").fetchall() == [(4.0, hour(9))]
