"""Readings a meter engineer would not believe are flagged at ingest (issue 46): the checks on
hand-made series, and what an ingest records, says and lets an operator accept."""

from __future__ import annotations

from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest

from tasks.ingest.meter_checks import SPIKE_RATIO, flagged_runs, reference_level
from tasks.ingest.readings_file import LevelChangeError, ReadingsOptions
from tasks.ingest.registers import RegisterReadingsError
from tasks.warehouse.connection import connect
from tasks.warehouse.meter_flags import accept_readings, load_flagged_hours
from tests.flows.warehouse_rows import make_warehouse
from tests.tasks.ingest.operator_files import ingest_readings, utc, warehouse_with_buildings, write

B = "synthetic_b00001"
STUCK = [utc("2024-03-26 10:00"), utc("2024-03-26 11:00"), utc("2024-03-26 12:00")]
"""Three office hours of Tuesday 26 March 2024 (UTC), where the tests put a stuck meter."""


def office(days: int, day_kwh: float = 210.0, night_kwh: float = 80.0) -> np.ndarray:
    """``days`` of hourly load: ``day_kwh`` from 08:00 to 18:00, ``night_kwh`` else, with a
    little noise so that no two consecutive hours read the same."""
    hours = np.arange(days * 24)
    load = np.where((hours % 24 >= 8) & (hours % 24 < 18), day_kwh, night_kwh)
    return load + np.random.default_rng(0).uniform(-5, 5, load.size)


def test_a_three_hour_stuck_run_at_five_times_the_day_is_flagged_whole():
    kwh = office(35)
    kwh[-48 + 10:-48 + 13] = 5 * 210.0  # the last week's Tuesday, 10:00 to 12:00
    hours = np.arange(kwh.size) + 470_000
    new = np.arange(kwh.size) >= kwh.size - 168
    runs = flagged_runs("b", hours, kwh, new)
    assert [(r.check_name, r.hours, r.low, r.high) for r in runs] == [("stuck_high", 3, 1050, 1050)]
    assert list(runs[0].positions) == [kwh.size - 38, kwh.size - 37, kwh.size - 36]
    assert "b: stuck_high" in runs[0].line() and "3 hour(s) at 1,050 kWh" in runs[0].line()


def test_ordinary_load_flat_runs_and_old_hours_are_not_flagged():
    kwh = office(35)
    hours = np.arange(kwh.size)
    assert flagged_runs("b", hours, kwh, np.ones(kwh.size, bool)) == []
    kwh[100:106] = 80.0  # six identical hours at the building's night level: a meter in steps
    assert flagged_runs("b", hours, kwh, np.ones(kwh.size, bool)) == []
    kwh[200:203] = 1000.0  # stuck high, but in the stored hours only: not this file's to judge
    assert flagged_runs("b", hours, kwh, hours >= 300) == []


def test_a_long_stuck_run_does_not_raise_its_own_yardstick():
    kwh = office(35)
    level = reference_level(np.arange(kwh.size), kwh)
    assert 205 < level < 215  # the day's level with its noise: the 99th percentile
    kwh[-100:-52] = 900.0  # two days stuck: 6 % of the context, far above its 1 %
    assert np.quantile(kwh, 0.99) == 900.0  # what the stuck hours would make of it
    assert reference_level(np.arange(kwh.size), kwh) == pytest.approx(level, rel=1e-3)
    runs = flagged_runs("b", np.arange(kwh.size), kwh, np.arange(kwh.size) >= kwh.size - 168)
    assert [(r.check_name, r.hours) for r in runs] == [("stuck_high", 48)]


def test_a_spike_is_an_hour_above_ten_times_the_level_and_a_gap_ends_a_run():
    kwh = office(35)
    hours = np.arange(kwh.size)
    level = reference_level(hours, kwh)
    kwh[500] = 0.99 * SPIKE_RATIO * level  # high, but not ten times: kept
    kwh[600] = 1.01 * SPIKE_RATIO * level
    kwh[601] = 1.02 * SPIKE_RATIO * level
    hours[601:] += 1  # an hour missing between them: two runs
    runs = flagged_runs("b", hours, kwh, np.ones(kwh.size, bool))
    assert [(r.check_name, list(r.positions)) for r in runs] == [("spike", [600]), ("spike", [601])]


def test_too_little_history_is_not_judged():
    kwh = np.r_[office(2), [1000.0] * 3]
    assert flagged_runs("b", np.arange(kwh.size), kwh, np.ones(kwh.size, bool)) == []


# --- what an ingest records and says -------------------------------------------------------

@pytest.fixture(scope="module")
def fleet(tmp_path_factory) -> Path:
    return make_warehouse(tmp_path_factory.mktemp("flags") / "w.duckdb")


@pytest.fixture
def warehouse(fleet, tmp_path) -> Path:
    copy = tmp_path / "w.duckdb"
    copy.write_bytes(fleet.read_bytes())
    return copy


def stored_week(warehouse: Path, building: str = B) -> pd.DataFrame:
    with connect(warehouse, read_only=True) as con:
        frame = con.execute("SELECT ts, kwh FROM meter_readings WHERE building_id = ? AND "
                            "ts >= '2024-03-25' AND ts < '2024-04-01' ORDER BY ts",
                            [building]).df()
    frame["ts"] = pd.to_datetime(frame["ts"], utc=True)
    return frame


def week_file(tmp: Path, week: pd.DataFrame, stuck: float | None, name: str = "week.csv") -> Path:
    """The stored week of :data:`B` as an operator's long file, the :data:`STUCK` hours reading
    ``stuck`` (``None``: blank)."""
    lines = ["building_id,ts,kwh"]
    for ts, kwh in zip(week["ts"], week["kwh"], strict=True):
        if ts in STUCK:
            kwh = "" if stuck is None else stuck
        elif pd.isna(kwh):
            kwh = ""
        lines.append(f"{B},{ts.isoformat()},{kwh}")
    return write(tmp / name, "\n".join(lines) + "\n")


def flags(warehouse: Path) -> list[tuple]:
    with connect(warehouse, read_only=True) as con:
        return con.execute("SELECT building_id, ts, check_name, kwh, accepted_at IS NOT NULL "
                           "FROM meter_flags ORDER BY ALL").fetchall()


def test_ingest_flags_a_stuck_run_names_it_and_keeps_the_values(warehouse, tmp_path):
    week = stored_week(warehouse)
    day = week.loc[week["ts"].dt.hour.between(8, 17), "kwh"].mean()
    stuck = round(5 * day, 1)
    summary = ingest_readings(warehouse, week_file(tmp_path, week, stuck))
    assert summary.flags.lines() == [
        f"flagged: {B}: stuck_high, 2024-03-26 10:00 to 12:00 UTC, 3 hour(s) at {stuck:,.6g} kWh"
        f" ({stuck / summary.flags.runs[0].level:.1f}x its 99th percentile hour of "
        f"{summary.flags.runs[0].level:,.4g} kWh)"]
    assert "flagged 3 implausible reading(s) of 1 building(s)" in summary.line()
    assert flags(warehouse) == [(B, ts, "stuck_high", stuck, False) for ts in STUCK]
    assert (stored_week(warehouse).set_index("ts").loc[STUCK, "kwh"] == stuck).all()  # kept
    with connect(warehouse, read_only=True) as con:
        usable = con.execute("SELECT count(*), count(kwh) FROM usable_readings WHERE "
                             "building_id = ? AND ts IN (SELECT unnest(?::TIMESTAMPTZ[]))",
                             [B, STUCK]).fetchone()
        assert usable == (0, 0)
        hours = load_flagged_hours(con, [B, "synthetic_b00000"], utc("2024-03-01 00:00"),
                                   utc("2024-04-01 00:00"))
    assert {b: list(us) for b, us in hours.items()} == {
        B: [int(pd.Timestamp(ts).value // 1000) for ts in STUCK]}


def test_sending_the_file_again_or_corrected_replaces_the_judgement(warehouse, tmp_path):
    week = stored_week(warehouse)
    file = week_file(tmp_path, week, 900.0)
    ingest_readings(warehouse, file)
    assert ingest_readings(warehouse, file).flags.hours == 3
    assert len(flags(warehouse)) == 3  # never twice
    corrected = ingest_readings(warehouse, week_file(tmp_path, week, 120.0, "fixed.csv"))
    assert corrected.flags.runs == () and flags(warehouse) == []


def test_accepted_values_are_used_and_not_flagged_again(warehouse, tmp_path):
    week = stored_week(warehouse)
    file = week_file(tmp_path, week, 900.0)
    ingest_readings(warehouse, file)
    with connect(warehouse) as con:
        other = accept_readings(con, B, utc("2024-03-27 00:00"), None)
        accepted = accept_readings(con, B, utc("2024-03-26 00:00"), utc("2024-03-26 23:00"))
        used = con.execute("SELECT count(kwh) FROM usable_readings WHERE building_id = ? AND "
                           "ts IN (SELECT unnest(?::TIMESTAMPTZ[]))", [B, STUCK]).fetchone()[0]
    assert other.hours == 0 and "no flagged reading" in other.line()
    assert accepted.hours == 3 and accepted.line().startswith(
        f"accepted 3 flagged reading(s) of {B} from 2024-03-26 10:00 to 2024-03-26 12:00 UTC")
    assert used == 3
    again = ingest_readings(warehouse, file)
    assert again.flags.runs == () and all(row[4] for row in flags(warehouse))
    ingest_readings(warehouse, week_file(tmp_path, week, 950.0, "other.csv"))  # another value
    assert [row[3:] for row in flags(warehouse)] == [(950.0, False)] * 3


# --- a register in Wh for a new meter (the probe) ---------------------------------------------

def wh_register(tmp: Path) -> Path:
    """48 hourly readings of a register counting Wh, rising about 40 kWh an hour."""
    rng = np.random.default_rng(1)
    register = 123_496_000 + np.cumsum(np.r_[0, rng.uniform(35_000, 45_000, 47)])
    ts = pd.date_range("2024-03-04", periods=48, freq="h", tz="UTC")
    rows = [f"b1,{t.isoformat()},{r:.0f}" for t, r in zip(ts, register, strict=True)]
    return write(tmp / "register.csv", "building_id,ts,kwh\n" + "\n".join(rows) + "\n")


def test_a_wh_register_sent_as_wh_is_told_both_options(tmp_path):
    warehouse = warehouse_with_buildings(tmp_path / "w.duckdb", tmp_path)
    with pytest.raises(RegisterReadingsError,
                       match="give --unit register --register-unit Wh to store the differences"):
        ingest_readings(warehouse, wh_register(tmp_path), ReadingsOptions(unit="Wh"))


def test_a_wh_register_read_as_kwh_on_a_new_meter_is_refused(tmp_path):
    warehouse = warehouse_with_buildings(tmp_path / "w.duckdb", tmp_path)
    with pytest.raises(LevelChangeError, match=(
            r"building 'b1': the file's median hour is 40,\d+ kWh, a 40.\d+ MW average draw, "
            r"and it has no stored readings .* \(a register in Wh\? give --register-unit Wh\)")):
        ingest_readings(warehouse, wh_register(tmp_path), ReadingsOptions(unit="register"))
    right = ingest_readings(warehouse, wh_register(tmp_path),
                            ReadingsOptions(unit="register", register_unit="Wh"))
    assert right.readings == 47
    with duckdb.connect(str(warehouse), read_only=True) as con:
        assert 35 <= con.execute("SELECT min(kwh) FROM meter_readings").fetchone()[0]
        assert con.execute("SELECT max(kwh) FROM meter_readings").fetchone()[0] <= 45
