"""Readings a meter engineer would not believe are flagged at ingest (issues 46 and 60): the
checks on hand-made series, and what an ingest records, says and lets an operator accept."""

from __future__ import annotations

from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from tasks.ingest import flagging
from tasks.ingest.flagging import flag_new_hours
from tasks.ingest.levels import LevelChangeError
from tasks.ingest.meter_checks import SPIKE_RATIO, flagged_runs, reference_level
from tasks.ingest.readings_file import ReadingsOptions
from tasks.ingest.registers import RegisterReadingsError
from tasks.warehouse.connection import connect, transaction
from tasks.warehouse.meter_flags import ReversedRangeError, accept_readings, load_flagged_hours
from tests.cli_runs import invoke, one_error_line
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


def test_less_than_a_day_is_not_judged():
    kwh = np.r_[office(1)[:20], [1000.0] * 3]  # 20 readings outside the stuck run
    assert flagged_runs("b", np.arange(kwh.size), kwh, np.ones(kwh.size, bool)) == []
    kwh = np.r_[office(1), [1000.0] * 3]  # a day: judged
    assert [r.check_name for r in flagged_runs("b", np.arange(kwh.size), kwh,
                                               np.ones(kwh.size, bool))] == ["stuck_high"]


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
        f"flagged: {B}: stuck_high, 2024-03-26 10:00 to 12:00 GMT, 3 hour(s) at {stuck:,.6g} kWh"
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
    with pytest.raises(RegisterReadingsError, match="give --register-unit kWh\\|Wh\\|MWh"):
        ingest_readings(warehouse, wh_register(tmp_path), ReadingsOptions(unit="register"))
    with pytest.raises(LevelChangeError, match=(
            r"building 'b1' is new .*: a median of 40,\d+ kWh/h is 40.\dx up to 1,000 kWh/h, .*"
            r"\(a register in Wh\? give --register-unit Wh\)")):
        ingest_readings(warehouse, wh_register(tmp_path),
                        ReadingsOptions(unit="register", register_unit="kWh"))
    right = ingest_readings(warehouse, wh_register(tmp_path),
                            ReadingsOptions(unit="register", register_unit="Wh"))
    assert right.readings == 47
    with duckdb.connect(str(warehouse), read_only=True) as con:
        assert 35 <= con.execute("SELECT min(kwh) FROM meter_readings").fetchone()[0]
        assert con.execute("SELECT max(kwh) FROM meter_readings").fetchone()[0] <= 45


# --- issue 60: a meter stuck at zero, a new meter's spikes, a flat building's step -------------

def cycle(n: int, low: float, span: int, step: int) -> np.ndarray:
    """``n`` hours reading ``low + (i * step) % span``: each of ``span`` values equally often,
    no two consecutive hours the same (``step`` and ``span`` coprime)."""
    return low + (np.arange(n) * step) % span


def test_a_week_stuck_at_zero_in_a_building_never_near_zero_is_flagged():
    kwh = np.r_[cycle(672, 60.0, 17, 7), np.zeros(168)]  # 60 to 76 kWh, then a week of zeros
    hours = np.arange(kwh.size) + 475_000
    runs = flagged_runs("b", hours, kwh, np.arange(kwh.size) >= 672)
    # the other hours' 1st percentile (nearest rank: the 7th smallest of 672) is 60 kWh, far
    # above a tenth of their median (68 kWh)
    assert [(r.check_name, r.hours, r.low, r.high, r.level) for r in runs] == [
        ("stuck_zero", 168, 0.0, 0.0, 60.0)]
    assert list(runs[0].positions) == list(range(672, 840))
    assert runs[0].line().endswith(
        "168 hour(s) at 0 kWh (its other hours' 1st percentile is 60 kWh)")


def test_zeros_shorter_than_a_day_or_in_a_building_that_idles_at_zero_are_not_flagged():
    hours = np.arange(840)
    kwh = np.r_[cycle(672, 60.0, 17, 7), np.zeros(168)]
    short = kwh.copy()
    short[672 + 23:] = 65.0 + (np.arange(145) % 2)  # 23 hours of zeros only
    assert flagged_runs("b", hours, short, hours >= 672) == []
    nights = kwh.copy()
    nights[:672][hours[:672] % 24 < 6] = 0.0  # idles at exactly 0 from midnight to 06:00
    assert flagged_runs("b", hours, nights, hours >= 672) == []
    weekends = kwh.copy()
    weekends[:672][hours[:672] % 168 >= 120] = 0.0  # idles at 0 every weekend (48 hours)
    assert flagged_runs("b", hours, weekends, hours >= 672) == []


def test_a_second_stuck_week_is_judged_without_the_first_flagged_one():
    kwh = np.r_[cycle(672, 60.0, 17, 7), np.zeros(168), cycle(24, 60.0, 17, 7), np.zeros(168)]
    hours = np.arange(kwh.size)
    usable = np.ones(kwh.size, bool)
    usable[672:840] = False  # the first stuck week, flagged by the ingest before
    runs = flagged_runs("b", hours, kwh, hours >= 864, usable=usable)
    assert [(r.check_name, r.hours, int(r.positions[0])) for r in runs] == [
        ("stuck_zero", 168, 864)]


def new_meter_week() -> np.ndarray:
    """A new meter's first week: 30 to 50 kWh (each value 8 times), two hours at 4,000 and
    4,100 kWh (hours 21 and 42, which read 30)."""
    kwh = cycle(168, 30.0, 21, 8)
    assert kwh[21] == kwh[42] == 30.0 and np.count_nonzero(kwh == 50.0) == 8
    kwh[21], kwh[42] = 4000.0, 4100.0
    return kwh


def test_two_spikes_in_a_new_meters_first_week_cannot_raise_their_own_yardstick():
    kwh = new_meter_week()
    hours = np.arange(kwh.size) + 475_000
    # 168 readings: the level leaves 8 above it (not 1 %, one), the 9th highest: 50 kWh
    assert reference_level(hours, kwh) == 50.0
    runs = flagged_runs("b", hours, kwh, np.ones(kwh.size, bool))
    assert [(r.check_name, list(r.positions), r.high, r.level) for r in runs] == [
        ("spike", [21], 4000.0, 50.0), ("spike", [42], 4100.0, 50.0)]
    assert runs[1].line().endswith("1 hour(s) at 4,100 kWh (82.0x its 9th highest hour of 50 kWh)")


def test_a_new_meters_first_two_days_are_judged():
    kwh = cycle(48, 30.0, 21, 8)
    kwh[21] = 4000.0
    # 48 readings, 8 left above the level: 4,000, 50 twice, 49 three times, 48 twice; then 47
    assert reference_level(np.arange(48), kwh) == 47.0
    runs = flagged_runs("b", np.arange(48), kwh, np.ones(48, bool))
    assert [(r.check_name, list(r.positions)) for r in runs] == [("spike", [21])]
    assert reference_level(np.arange(23), kwh[:23]) is None  # less than a day: not judged


def flat_building(new_week: np.ndarray) -> np.ndarray:
    """Four weeks of a flat-load building (six-hour blocks: four hours at 50, 51 or 52 kWh,
    then 49.5 and 50.5), then ``new_week``."""
    blocks = [[a] * 4 + [49.5, 50.5] for a in (50.0, 51.0, 52.0)] * 38
    return np.r_[np.concatenate(blocks)[:672], new_week]


def test_a_flat_buildings_real_step_is_not_judged_stuck():
    hours = np.arange(840)
    new = hours >= 672
    # the level: the 9th highest of the readings outside flat runs (49.5 and 50.5): 50.5 kWh
    assert reference_level(hours, flat_building(np.full(168, 104.0))) == 50.5
    steps = np.repeat(np.resize([104.0, 106.0, 108.0, 110.0], 56), 3)  # 3-hour blocks, doubled
    assert flagged_runs("b", hours, flat_building(steps), new) == []
    assert flagged_runs("b", hours, flat_building(np.full(168, 104.0)), new) == []  # one run
    stuck = flat_building(np.r_[np.full(48, 303.0), np.repeat([50.0, 52.0], 60)])  # 6.0x
    assert [(r.check_name, r.hours) for r in flagged_runs("b", hours, stuck, new)] == [
        ("stuck_high", 48)]
    short = flat_building(np.r_[np.full(12, 104.0), np.repeat([50.0, 52.0], 78)])  # 2.1x, alone
    assert [(r.check_name, r.hours) for r in flagged_runs("b", hours, short, new)] == [
        ("stuck_high", 12)]


def test_a_flagged_run_is_shown_in_the_buildings_local_time():
    kwh = office(35)
    kwh[-38:-35] = 1050.0
    hours = np.arange(kwh.size) + int(pd.Timestamp("2024-06-04 09:00", tz="UTC").value
                                      // 3_600_000_000_000) - (kwh.size - 38)
    new = np.ones(kwh.size, bool)
    (london,) = flagged_runs("b", hours, kwh, new, timezone="Europe/London")
    (york,) = flagged_runs("b", hours, kwh, new, timezone="America/New_York")
    assert london.first == pd.Timestamp("2024-06-04 09:00", tz="UTC")  # stored in UTC
    assert "b: stuck_high, 2024-06-04 10:00 to 12:00 BST, 3 hour(s)" in london.line()
    assert "b: stuck_high, 2024-06-04 05:00 to 07:00 EDT, 3 hour(s)" in york.line()
    start = int(pd.Timestamp("2024-03-31 00:00", tz="UTC").value // 3_600_000_000_000)
    (change,) = flagged_runs("b", np.arange(kwh.size) + start - (kwh.size - 38), kwh, new,
                             timezone="Europe/London")
    assert "b: stuck_high, 2024-03-31 00:00 GMT to 03:00 BST, 3 hour(s)" in change.line()
    assert "2024-01-19 18:00 to 20:00 UTC" in flagged_runs(
        "b", np.arange(kwh.size) + 473_000, kwh, new)[0].line()  # no zone given: UTC


def b1_file(tmp: Path, name: str, start: str, kwh: np.ndarray) -> Path:
    """Building b1's hours from ``start`` (UTC) reading ``kwh``, as an operator's long file."""
    stamps = pd.date_range(start, periods=kwh.size, freq="h", tz="UTC")
    rows = [f"b1,{ts.isoformat()},{v}" for ts, v in zip(stamps, kwh, strict=True)]
    return write(tmp / name, "building_id,ts,kwh\n" + "\n".join(rows) + "\n")


def usable_hours(warehouse: Path, start: str, end: str) -> int:
    with connect(warehouse, read_only=True) as con:
        return con.execute("SELECT count(kwh) FROM usable_readings WHERE building_id = 'b1' "
                           "AND ts >= ? AND ts < ?", [utc(start), utc(end)]).fetchone()[0]


def test_ingest_names_records_and_accepts_a_week_stuck_at_zero(tmp_path):
    warehouse = warehouse_with_buildings(tmp_path / "w.duckdb", tmp_path)  # b1: Europe/London
    ingest_readings(warehouse, b1_file(tmp_path, "weeks.csv", "2024-05-06", cycle(672, 60, 17, 7)))
    summary = ingest_readings(warehouse, b1_file(tmp_path, "zeros.csv", "2024-06-03",
                                                 np.zeros(168)))
    assert summary.flags.lines() == [
        "flagged: b1: stuck_zero, 2024-06-03 01:00 to 2024-06-10 00:00 BST, 168 hour(s) at 0 kWh "
        "(its other hours' 1st percentile is 60 kWh)"]
    assert "flagged 168 implausible reading(s) of 1 building(s)" in summary.line()
    week = pd.date_range("2024-06-03", periods=168, freq="h", tz="UTC")
    assert flags(warehouse) == [("b1", ts.to_pydatetime(), "stuck_zero", 0.0, False)
                                for ts in week]
    assert usable_hours(warehouse, "2024-06-03 00:00", "2024-06-10 00:00") == 0
    with connect(warehouse) as con:
        accepted = accept_readings(con, "b1")
    assert accepted.hours == 168
    assert usable_hours(warehouse, "2024-06-03 00:00", "2024-06-10 00:00") == 168


def test_ingest_flags_two_spikes_in_a_new_meters_first_week(tmp_path):
    warehouse = warehouse_with_buildings(tmp_path / "w.duckdb", tmp_path)
    summary = ingest_readings(warehouse, b1_file(tmp_path, "new.csv", "2024-06-03",
                                                 new_meter_week()))
    assert summary.flags.lines() == [
        "flagged: b1: spike, 2024-06-03 22:00 BST, 1 hour(s) at 4,000 kWh (80.0x its 9th "
        "highest hour of 50 kWh)",
        "flagged: b1: spike, 2024-06-04 19:00 BST, 1 hour(s) at 4,100 kWh (82.0x its 9th "
        "highest hour of 50 kWh)"]
    assert flags(warehouse) == [("b1", utc("2024-06-03 21:00"), "spike", 4000.0, False),
                                ("b1", utc("2024-06-04 18:00"), "spike", 4100.0, False)]
    assert usable_hours(warehouse, "2024-06-03 00:00", "2024-06-10 00:00") == 166
    with connect(warehouse) as con:
        spike = utc("2024-06-04 18:00")
        assert accept_readings(con, "b1", spike, spike).hours == 1
    assert usable_hours(warehouse, "2024-06-03 00:00", "2024-06-10 00:00") == 167


def test_accepting_hours_whose_start_is_after_their_end_is_refused(warehouse, tmp_path):
    ingest_readings(warehouse, week_file(tmp_path, stored_week(warehouse), 900.0))
    refusal = ("nothing accepted: --start (2024-03-27 00:00 UTC) is after --end (2024-03-26 "
               "00:00 UTC); give the first hour to accept as --start, the last as --end")
    with connect(warehouse) as con, pytest.raises(ReversedRangeError) as raised:
        accept_readings(con, B, utc("2024-03-27 00:00"), utc("2024-03-26 00:00"))
    assert str(raised.value) == refusal
    result = invoke("accept-readings", "--building", B, "--start", "2024-03-27T01:00+01:00",
                    "--end", "2024-03-26T00:00", "--warehouse", warehouse)
    assert one_error_line(result) == f"error: {refusal}"
    assert [row[4] for row in flags(warehouse)] == [False] * 3  # nothing accepted


# --- judging a large file a few buildings at a time -------------------------------------------

def three_buildings(tmp: Path) -> tuple[Path, pa.Table]:
    """A warehouse whose b1, b2, b3 hold five weeks from 2024-05-06 (b1 stuck high three hours
    of its last week, b2 a spike in it, b3 its last week at zero), and that last week as new
    hours, in time order (the buildings' rows interleaved)."""
    warehouse = warehouse_with_buildings(tmp / "w.duckdb", tmp)
    load = {b: office(35) for b in ("b1", "b2", "b3")}
    load["b1"][-38:-35] = 1050.0
    load["b2"][-30] = 2500.0
    load["b3"][-168:] = 0.0
    stamps = pd.date_range("2024-05-06", periods=840, freq="h", tz="UTC")
    rows = pd.DataFrame([(b, ts, v) for b, kwh in load.items()
                         for ts, v in zip(stamps, kwh, strict=True)],
                        columns=["building_id", "ts", "kwh"])
    with connect(warehouse) as con:
        con.register("rows", rows)
        con.execute("INSERT INTO meter_readings SELECT * FROM rows")
    new = rows[rows["ts"] >= stamps[-168]].sort_values(["ts", "building_id"])
    return warehouse, pa.Table.from_pandas(new, preserve_index=False)


@pytest.mark.parametrize("chunk_hours", [1, 200, 10_000])
def test_buildings_judged_in_chunks_are_judged_as_whole(tmp_path, monkeypatch, chunk_hours):
    monkeypatch.setattr(flagging, "CHUNK_HOURS", chunk_hours)
    warehouse, new = three_buildings(tmp_path)
    ids = new["building_id"]
    for variant in (new, new.set_column(0, "building_id", ids.dictionary_encode())):
        with connect(warehouse) as con, transaction(con):
            report = flag_new_hours(con, variant)
            stored = con.execute("SELECT building_id, check_name, count(*) FROM meter_flags "
                                 "GROUP BY ALL ORDER BY ALL").fetchall()
            con.execute("DELETE FROM meter_flags")
        assert [(r.building_id, r.check_name, r.hours) for r in report.runs] == [
            ("b1", "stuck_high", 3), ("b2", "spike", 1), ("b3", "stuck_zero", 168)]
        assert stored == [("b1", "stuck_high", 3), ("b2", "spike", 1), ("b3", "stuck_zero", 168)]


def test_an_ingests_rows_are_cut_into_chunks_of_whole_buildings():
    ids = pa.chunked_array([pa.array(["a", "a", "b"]), pa.array(["b", "b", "c"]),
                            pa.array(["c"])])
    table = pa.table({"building_id": ids, "ts": pa.array(range(7)), "kwh": pa.array([1.0] * 7)})
    assert flagging._building_runs(ids) == [("a", 0, 2), ("b", 2, 3), ("c", 5, 2)]
    assert flagging._building_runs(ids.dictionary_encode()) == [
        ("a", 0, 2), ("b", 2, 3), ("c", 5, 2)]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(flagging, "CHUNK_HOURS", 3)
        assert [c["building_id"].to_pylist() for c in flagging._chunks(table)] == [
            ["a", "a", "b", "b", "b"], ["c", "c"]]
        apart = table.take([0, 2, 5, 1, 3, 4, 6])  # a, b, c, a, b, b, c
        assert [c["building_id"].to_pylist() for c in flagging._chunks(apart)] == [
            ["a", "a", "b", "b", "b"], ["c", "c"]]
