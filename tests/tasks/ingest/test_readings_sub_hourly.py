"""What a readings ingest keeps of a sub-hourly file's intra-hour shape (``sub_hourly_readings``):
each building's complete hours of its last 28 days, in kWh after the unit and register handling,
the same whether the file is read whole or in chunks, long or wide, CSV or Parquet; nothing of an
hourly file."""

from __future__ import annotations

from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from tasks.ingest import contract
from tasks.ingest.readings_file import ReadingsOptions, load_readings
from tasks.warehouse.intra_hour import KEEP_DAYS, recent_sub_hourly
from tests.tasks.ingest.operator_files import (
    csv_to_parquet,
    ingest_readings,
    warehouse_with_buildings,
    write,
)

HALF = pd.Timedelta(minutes=30)
B1_START, B1_END = pd.Timestamp("2024-02-01", tz="UTC"), pd.Timestamp("2024-03-03", tz="UTC")
"""b1: 31 days of half-hours (2024 is a leap year), its last hour 2024-03-02 23:00."""
B2_START, B2_END = pd.Timestamp("2024-02-10", tz="UTC"), pd.Timestamp("2024-02-20", tz="UTC")
"""b2: 10 days, ending well before b1: its own last 28 days hold all of them."""
BLANK = pd.Timestamp("2024-03-01 10:30", tz="UTC")
"""A blank cell of b1: its 10:00 hour is damaged."""
ABSENT = pd.Timestamp("2024-03-02 05:00", tz="UTC")
"""An interval of b1 not in the file: its 05:00 hour is damaged."""


def _half_hours(start: pd.Timestamp, end: pd.Timestamp) -> pd.DatetimeIndex:
    return pd.date_range(start, end, freq="30min", inclusive="left")


def _long_frame() -> pd.DataFrame:
    """b1's and b2's half-hours: 3 to 7 kWh in the first half of each hour, 1 in the second."""
    parts = []
    for building, start, end in (("b1", B1_START, B1_END), ("b2", B2_START, B2_END)):
        ts = _half_hours(start, end)
        first = ts.minute == 0
        kwh = np.where(first, 3.0 + (np.arange(len(ts)) // 2) % 5, 1.0)
        parts.append(pd.DataFrame({"building_id": building, "ts": ts, "kwh": kwh}))
    frame = pd.concat(parts, ignore_index=True)
    frame.loc[(frame["building_id"] == "b1") & (frame["ts"] == BLANK), "kwh"] = np.nan
    return frame[~((frame["building_id"] == "b1") & (frame["ts"] == ABSENT))].reset_index(drop=True)


def _expected(factor: float = 1.0) -> pd.DataFrame:
    """By hand: b1's half-hours from 2024-02-04 00:00 (28 days before its last hour's end) but
    those of its two damaged hours, and every half-hour of b2, in kWh."""
    frame = _long_frame()
    damaged = frame["ts"].dt.floor("h").isin([BLANK.floor("h"), ABSENT.floor("h")])
    kept = frame[(frame["building_id"] == "b2") |
                 ((frame["ts"] >= pd.Timestamp("2024-02-04", tz="UTC")) & ~damaged)]
    assert (kept["building_id"] == "b1").sum() == 2 * (28 * 24 - 2)
    return kept.assign(minutes=30, kwh=kept["kwh"] * factor)[
        ["building_id", "ts", "minutes", "kwh"]].reset_index(drop=True)


def _write(tmp_path: Path, layout: str) -> Path:
    frame = _long_frame()
    text = frame.assign(ts=frame["ts"].dt.strftime("%Y-%m-%dT%H:%MZ"))
    if layout == "wide":  # one row per timestamp of either building; b2's other cells blank
        text = text.pivot(index="ts", columns="building_id", values="kwh").reset_index()
        text.columns.name = None
    path = tmp_path / f"{layout}.csv"
    text.to_csv(path, index=False)
    return csv_to_parquet(path) if layout == "parquet" else path


def _stored(warehouse: Path) -> pd.DataFrame:
    with duckdb.connect(str(warehouse), read_only=True) as con:
        frame = con.execute("SELECT building_id, ts, minutes, kwh FROM sub_hourly_readings "
                            "ORDER BY building_id, ts").df()
    frame["ts"] = pd.to_datetime(frame["ts"], utc=True)
    return frame


def _check(stored: pd.DataFrame, expected: pd.DataFrame) -> None:
    pd.testing.assert_frame_equal(stored, expected, check_dtype=False)


@pytest.fixture
def warehouse(tmp_path) -> Path:
    return warehouse_with_buildings(tmp_path / "w.duckdb", tmp_path)


def _ingested(tmp_path: Path, name: str, path: Path) -> pd.DataFrame:
    """What a new warehouse keeps of ``path`` after ``wadiro ingest readings``."""
    folder = tmp_path / name
    folder.mkdir()
    warehouse = warehouse_with_buildings(folder / "w.duckdb", folder)
    ingest_readings(warehouse, path)
    return _stored(warehouse)


@pytest.mark.parametrize("layout", ["long", "wide", "parquet"])
def test_chunks_keep_what_one_read_keeps_and_what_a_hand_count_says(tmp_path, monkeypatch,
                                                                   layout):
    path = _write(tmp_path, layout)
    whole, stored_whole = load_readings(path), _ingested(tmp_path, "whole", path)
    monkeypatch.setattr(contract, "CHUNK_BYTES", 256)  # about a dozen CSV lines
    monkeypatch.setattr(contract, "CHUNK_ROWS", 7)
    assert len(list(contract.open_file(path).chunks())) > 100
    chunked, stored_chunked = load_readings(path), _ingested(tmp_path, "chunked", path)
    assert chunked.sub_hourly.equals(whole.sub_hourly) and chunked.readings.equals(whole.readings)
    pd.testing.assert_frame_equal(stored_chunked, stored_whole)
    _check(stored_whole, _expected())


def test_the_kept_energies_are_in_kwh_after_the_unit(warehouse, tmp_path):
    ingest_readings(warehouse, _write(tmp_path, "long"), ReadingsOptions(unit="kW"))
    _check(_stored(warehouse), _expected(factor=0.5))  # kW over half an hour


def test_a_register_keeps_its_differences(warehouse, tmp_path):
    register = [100, 106, 110, 113, 120, 122, 130, 131, 140]  # 6, 4 | 3, 7 | 2, 8 | 1, 9
    times = _half_hours(pd.Timestamp("2024-03-04", tz="UTC"),
                        pd.Timestamp("2024-03-04 04:30", tz="UTC"))
    ingest_readings(warehouse, write(tmp_path / "r.csv", "building_id,ts,kwh\n" + "".join(
        f"b1,{t:%Y-%m-%dT%H:%MZ},{v}\n" for t, v in zip(times, register, strict=True))),
        ReadingsOptions(unit="register", register_unit="kWh"))
    stored = _stored(warehouse)
    assert stored["ts"].tolist() == list(times[:-1])  # the last reading starts no interval
    assert stored["kwh"].tolist() == [6, 4, 3, 7, 2, 8, 1, 9]


def test_an_hourly_file_keeps_nothing_and_leaves_the_kept_shape(warehouse, tmp_path):
    ingest_readings(warehouse, _write(tmp_path, "long"))
    before = _stored(warehouse)
    hours = pd.date_range("2024-03-02", periods=24, freq="h", tz="UTC")
    summary = ingest_readings(warehouse, write(tmp_path / "h.csv", "ts,b1,b2\n" + "".join(
        f"{t:%Y-%m-%dT%H:%MZ},4,4\n" for t in hours)))
    assert summary.interval_minutes == 60 and summary.readings == 48
    pd.testing.assert_frame_equal(_stored(warehouse), before)
    assert load_readings(tmp_path / "h.csv").sub_hourly.num_rows == 0


def _kept_by_definition(frame: pd.DataFrame, minutes: int) -> pa.Table:
    """The rows :func:`recent_sub_hourly` keeps, by its definition on the whole frame: the
    intervals of every complete hour in each building's last :data:`KEEP_DAYS` days."""
    ts = pd.to_datetime(frame["ts"], utc=True)
    hour = ts.dt.floor("h")
    kwh = frame["kwh"]
    valued = kwh.notna() & (kwh >= 0)
    whole = valued.groupby([frame["building_id"], hour]).transform("sum") == 60 // minutes
    latest = hour.groupby(frame["building_id"]).transform("max")
    keep = (whole & (hour > latest - pd.Timedelta(days=KEEP_DAYS))).to_numpy()
    return pa.table({"building_id": pa.array(frame["building_id"].to_numpy()[keep], pa.string()),
                     "ts": pa.array(ts[keep], pa.timestamp("us", tz="UTC")),
                     "minutes": pa.array(np.full(int(keep.sum()), minutes), pa.int32()),
                     "kwh": pa.array(kwh[keep].to_numpy(np.float64))})


@pytest.mark.parametrize("seed", range(12))
def test_the_rows_picked_first_give_what_the_whole_frame_gives(seed):
    """:func:`recent_sub_hourly` computes the kept rows on each building's last days only: the
    same table as its definition on the whole frame, whatever the spans, gaps, blanks and
    order."""
    rng = np.random.default_rng(seed)
    minutes = int(rng.choice([15, 30]))
    parts = []
    for building in range(int(rng.integers(1, 5))):
        n = int(rng.integers(1, 40 * 24 * 60 // minutes))
        start = pd.Timestamp("2024-01-01", tz="UTC") + int(rng.integers(0, 5000)) * pd.Timedelta(
            minutes=minutes)
        ts = pd.date_range(start, periods=n, freq=f"{minutes}min")
        kwh = rng.uniform(0, 5, n)
        kwh[rng.random(n) < 0.01] = np.nan
        present = rng.random(n) > 0.01
        parts.append(pd.DataFrame({"building_id": f"b{building}", "ts": ts[present],
                                   "kwh": kwh[present]}))
    frame = pd.concat(parts, ignore_index=True).sample(frac=1, random_state=seed)
    frame = frame.reset_index(drop=True).astype({"building_id": "category"})
    assert recent_sub_hourly(frame, minutes).equals(_kept_by_definition(frame, minutes))
