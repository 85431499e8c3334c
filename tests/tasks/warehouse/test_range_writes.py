"""Writes keyed per building or site: a range per key replaced, and the latest version kept."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import duckdb
import pyarrow as pa
import pytest
from wadiro_fleet.tasks.warehouse.connection import WarehouseError
from wadiro_fleet.tasks.warehouse.schema import ensure_schema
from wadiro_fleet.tasks.warehouse.slices import (
    replace_key_ranges,
    replace_ranges_sql,
    replace_unless_newer,
    replace_unless_newer_sql,
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
        replace_unless_newer_sql("weather", ["site_id", "ts) OR (1=1"], "issued_at")


def test_each_key_loses_only_its_own_range(con):
    rows = pa.table({"building_id": ["a", "a"], "ts": pa.array([hour(2), hour(5)], TS), "kwh": [7.0, 8.0]})
    assert replace_key_ranges(con, "meter_readings", rows, "building_id") == (4, 2)
    got = con.execute("SELECT building_id, count(*), sum(kwh) FROM meter_readings GROUP BY 1 ORDER BY 1").fetchall()
    assert got == [("a", 8, 6.0 + 15.0), ("b", 10, 10.0)]


def test_a_failed_insert_rolls_the_delete_back(con):
    rows = pa.table({"building_id": ["a", None], "ts": pa.array([hour(2), hour(3)], TS), "kwh": [7.0, 8.0]})
    with pytest.raises(duckdb.Error):
        replace_key_ranges(con, "meter_readings", rows, "building_id")
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
