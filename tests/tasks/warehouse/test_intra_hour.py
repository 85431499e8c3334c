"""What a sub-hourly ingest keeps of a building's intra-hour shape, and the shape read back."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tasks.warehouse.connection import connect
from tasks.warehouse.intra_hour import (
    KEEP_DAYS,
    MIN_HOURS,
    period_shares,
    recent_sub_hourly,
    write_sub_hourly,
)
from tasks.warehouse.schema import ensure_schema


def _frame(days: int, *, building: str = "a", first_share: float = 0.25,
           start: str = "2024-01-01") -> pd.DataFrame:
    hours = pd.date_range(start, periods=24 * days, freq="h", tz="UTC")
    energy = np.full(len(hours), 8.0)
    return pd.DataFrame({
        "building_id": building,
        "ts": np.concatenate([hours, hours + pd.Timedelta(minutes=30)]),
        "kwh": np.concatenate([first_share * energy, (1 - first_share) * energy])})


def test_only_whole_hours_of_the_last_days_are_kept():
    frame = _frame(40)
    frame.loc[5, "kwh"] = np.nan  # an hour with a blank half
    frame = frame.drop(index=[10]).reset_index(drop=True)  # an hour missing a half (its first)
    kept = recent_sub_hourly(frame, 30).to_pandas()
    last = frame["ts"].max().floor("h")
    assert kept["ts"].min() > last - pd.Timedelta(days=KEEP_DAYS)
    assert len(kept) == 2 * 24 * KEEP_DAYS  # the two damaged hours are older than that
    damaged = recent_sub_hourly(frame.assign(ts=frame["ts"] + pd.Timedelta(days=0)), 30, days=40)
    assert damaged.num_rows == 2 * (24 * 40 - 2)


def test_an_hourly_frame_keeps_nothing():
    hours = pd.DataFrame({"building_id": "a", "ts": pd.date_range("2024-01-01", periods=48,
                                                                  freq="h", tz="UTC"), "kwh": 1.0})
    assert recent_sub_hourly(hours, 60).num_rows == 0


def test_stored_rows_are_replaced_and_pruned_and_give_the_shape(tmp_path):
    with connect(tmp_path / "w.duckdb") as con:
        ensure_schema(con)
        con.execute("INSERT INTO buildings (building_id, site_id, timezone, holiday_country, holiday_subdiv, building_type, source) VALUES ('a', 's', 'UTC', 'GB', NULL, NULL, 't'), "
                    "('b', 's', 'UTC', 'GB', NULL, NULL, 't')")
        write_sub_hourly(con, recent_sub_hourly(_frame(10, first_share=0.9), 30),
                         own_transaction=True)
        # the same days again with another shape, then days later: the first are replaced,
        # what falls more than KEEP_DAYS behind the latest is dropped
        write_sub_hourly(con, recent_sub_hourly(_frame(10, first_share=0.25), 30),
                         own_transaction=True)
        write_sub_hourly(con, recent_sub_hourly(_frame(10, start="2024-01-25"), 30),
                         own_transaction=True)
        span = con.execute("SELECT min(ts), max(ts), count(*) FROM sub_hourly_readings").fetchone()
        shares = period_shares(con, ["a", "b"], 30).set_index(["building_id", "local_hour"])
        quarters = period_shares(con, ["a"], 15).set_index(["building_id", "local_hour"])
    assert span[1] - span[0] <= pd.Timedelta(days=KEEP_DAYS)
    # latest Feb 3 23:30: Jan 1-6 fall more than 28 days behind it, Jan 7-10 stay
    assert span[0] == pd.Timestamp("2024-01-07", tz="UTC")
    assert span[2] == 2 * 24 * (4 + 10)
    assert shares.loc[("a", 10), ["share_0", "share_1"]].tolist() == pytest.approx([0.25, 0.75])
    assert shares.loc[("a", 10), "shaped"]
    assert shares.loc[("b", 10), ["share_0", "share_1"]].tolist() == [0.5, 0.5]  # no readings
    assert not shares.loc[("b", 10), "shaped"]
    assert quarters.loc[("a", 3)].iloc[:4].tolist() == pytest.approx([0.125, 0.125, 0.375, 0.375])


def test_too_few_hours_split_evenly(tmp_path):
    with connect(tmp_path / "w.duckdb") as con:
        ensure_schema(con)
        con.execute("INSERT INTO buildings (building_id, site_id, timezone, holiday_country, holiday_subdiv, building_type, source) VALUES ('a', 's', 'UTC', 'GB', NULL, NULL, 't')")
        write_sub_hourly(con, recent_sub_hourly(_frame(MIN_HOURS - 1), 30), own_transaction=True)
        shares = period_shares(con, ["a"], 30)
    assert (shares["share_0"] == 0.5).all() and not shares["shaped"].any()
