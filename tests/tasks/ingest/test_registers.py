"""Cumulative meter registers: refused when sent as energy (naming --unit register), even with
meter noise, a rollover or a swapped meter; stored as their hand-computed differences with --unit
register (rollovers bridged; resets, jumps and noise missing and counted; readings left out
counted); a register in Wh stored in kWh or refused against the building's history; a real
building's load refused as a register; and never mistaken for the load of a real or synthetic
building."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest
from pydantic import ValidationError

from tasks.ingest.cambridge_archive import load_cambridge
from tasks.ingest.levels import LevelChangeError
from tasks.ingest.plausibility import ImplausibleValueError
from tasks.ingest.readings_file import ReadingsOptions
from tasks.ingest.registers import RegisterReadingsError, refuse_registers
from tasks.ingest.synthetic_fleet import FleetSpec, fleet_readings
from tests.tasks.ingest.operator_files import (
    contents,
    hours,
    ingest_buildings,
    ingest_readings,
    kwh_by_hour,
    utc,
    warehouse_with_buildings,
    write,
)

# The export: 123,496 kWh rising about 40 kWh an hour (39, 40, 41, 40, ...)
RISES = [39.0 + (h % 3) for h in range(47)]
REGISTER = [123_496.0 + sum(RISES[:h]) for h in range(48)]
KWH_REGISTER = ReadingsOptions(unit="register", register_unit="kWh")


@pytest.fixture
def warehouse(tmp_path) -> Path:
    warehouse = warehouse_with_buildings(tmp_path / "w.duckdb", tmp_path)
    ingest_readings(warehouse, write(tmp_path / "stored.csv", "ts,b1,b2\n" + "".join(
        f"{t:%Y-%m-%dT%H:%MZ},72,9\n" for t in hours("2024-03-04 00:00", 72))))
    return warehouse


def export(tmp_path: Path, values: list, start: str = "2024-03-04 00:00", step: str = "h") -> Path:
    times = pd.date_range(start, periods=len(values), freq=step, tz="UTC")
    return write(tmp_path / "register.csv", "building_id,ts,kwh\n" + "".join(
        f"b1,{t:%Y-%m-%dT%H:%MZ},{'' if v is None else v}\n" for t, v in zip(times, values, strict=True)))


def test_a_register_sent_as_energy_is_refused_naming_the_fix(warehouse, tmp_path):
    before = contents(warehouse)
    with pytest.raises(RegisterReadingsError, match=(
            r"building 'b1': its 48 readings rise steadily from 123,496 to 125,375 kWh \(a median rise of 40 "
            r"kWh per 60-minute interval\): a cumulative meter register, not the energy of each interval; "
            r"give --unit register --register-unit kWh\|Wh\|MWh \(the unit it counts in\) to store the "
            r"differences")):
        ingest_readings(warehouse, export(tmp_path, REGISTER))
    assert contents(warehouse) == before


def test_unit_register_stores_the_differences_and_leaves_the_last_reading_unwritten(warehouse, tmp_path):
    before = kwh_by_hour(warehouse, "b1")
    summary = ingest_readings(warehouse, export(tmp_path, REGISTER), KWH_REGISTER)
    after = kwh_by_hour(warehouse, "b1")
    written = dict(zip(hours("2024-03-04 00:00", 47), RISES, strict=True))
    assert after == {**before, **written}  # the 48th hour (no next reading) keeps its 72
    assert after[utc("2024-03-05 23:00")] == 72.0 and after[utc("2024-03-04 00:00")] == 39.0
    assert summary.readings == 47 and summary.replaced == 47
    assert "differences of a register: 0 rollover(s) bridged, 0 reset(s) stored as missing" in summary.line()
    assert summary.registers.left_out == 1 and "1 reading(s) starting no interval in the file" in summary.line()
    assert kwh_by_hour(warehouse, "b2") == dict.fromkeys(hours("2024-03-04 00:00", 72), 9.0)


def test_a_rollover_is_bridged_a_reset_and_a_blank_reading_are_missing(warehouse, tmp_path):
    # 999,900 +40 +40 then the 6-digit register wraps: 999,980 -> 20 is 40 kWh; then a reset to 5;
    # then a blank reading, which bounds two unknown intervals
    register = [999_900, 999_940, 999_980, 20, 60, 5, 45, None, 125, 165]
    summary = ingest_readings(warehouse, export(tmp_path, register), KWH_REGISTER)
    assert list(kwh_by_hour(warehouse, "b1").values())[:10] == [40, 40, 40, 40, None, 40, None, None, 40, 72]
    assert (summary.registers.rollovers, summary.registers.resets) == (1, 1)
    assert summary.missing_readings == 3


def test_quarter_hour_registers_sum_to_whole_hours_only(warehouse, tmp_path):
    register = [1000 + 2.5 * q for q in range(9)]  # 2.5 kWh a quarter: 10 kWh an hour
    ingest_readings(warehouse, export(tmp_path, register, step="15min"), KWH_REGISTER)
    b1 = kwh_by_hour(warehouse, "b1")
    assert (b1[utc("2024-03-04 00:00")], b1[utc("2024-03-04 01:00")], b1[utc("2024-03-04 02:00")]) == (
        10.0, 10.0, 72.0)


def test_one_glitched_reading_far_above_is_a_jump_then_a_reset_both_missing(warehouse, tmp_path):
    register = [10.0 * h for h in range(30)]
    register[20] = 2_500_000.0  # up 2.5 GWh, then back: a jump (over 100x the 10 kWh rise), a reset
    summary = ingest_readings(warehouse, export(tmp_path, register), KWH_REGISTER)
    b1 = kwh_by_hour(warehouse, "b1")
    assert b1[utc("2024-03-04 19:00")] is None and b1[utc("2024-03-04 20:00")] is None
    assert [b1[t] for t in hours("2024-03-04 00:00", 29) if t.hour not in (19, 20)] == [10.0] * 27
    assert (summary.registers.jumps, summary.registers.resets) == (1, 1)


def test_a_difference_no_building_draws_is_refused_as_any_implausible_energy(warehouse, tmp_path):
    register = [20_000.0 * h for h in range(30)]  # a 20 MWh an hour site
    register[21:] = [r + 1_500_000.0 for r in register[21:]]  # 1.52 GWh from 20:00 (line 22): 76x, no jump
    with pytest.raises(ImplausibleValueError, match=r"line 22, column 'kwh': 1\.52e\+06 is not"):
        ingest_readings(warehouse, export(tmp_path, register), KWH_REGISTER)


# --- nothing healthy is refused ------------------------------------------------------------------

def no_register(frame: pd.DataFrame) -> None:
    """Every series of ``frame`` passes, whole, per ISO week and per UTC day (a weekly or a
    daily export)."""
    frame = frame.assign(ts=pd.to_datetime(frame["ts"], utc=True))
    building = pd.factorize(frame["building_id"])[0].astype("int64") * 1_000_000
    hour = frame["ts"].astype("int64") // 3_600_000_000
    for key in (frame["building_id"], building + (hour + 72) // 168, building + hour // 24):  # Mondays
        refuse_registers(Path("export.csv"), frame.assign(building_id=key), 60)


def test_no_real_cambridge_building_looks_like_a_register(cambridge_archive):
    readings = load_cambridge(cambridge_archive).readings.to_pandas()
    assert readings["building_id"].nunique() > 100 and len(readings) > 3_000_000
    no_register(readings)


def test_no_synthetic_building_looks_like_a_register():
    spec = FleetSpec(buildings=250, start=date(2024, 1, 1), weeks=52, seed=0)
    no_register(pa.Table.from_batches(list(fleet_readings(spec))).to_pandas())


# --- the hostile probe's registers (issue 30) ------------------------------------------------------

def long_export(tmp_path: Path, series: dict[str, list], start: str = "2024-03-04 00:00",
                name: str = "register.csv") -> Path:
    """A long CSV of each building's values, hourly from ``start`` (None: a blank cell)."""
    lines = ["building_id,ts,kwh"]
    for building, values in series.items():
        times = pd.date_range(start, periods=len(values), freq="h", tz="UTC")
        lines += [f"{building},{t:%Y-%m-%dT%H:%MZ},{'' if v is None else repr(float(v))}"
                  for t, v in zip(times, values, strict=True)]
    return write(tmp_path / name, "\n".join(lines) + "\n")


def dipped(register: list[float], at: int, by: float = 0.5) -> list[float]:
    """``register`` whose reading ``at`` lies ``by`` below the one before it (meter noise)."""
    return [*register[:at], register[at - 1] - by, *register[at + 1:]]


ONE_WEEK = [123_496.0 + sum(39.0 + (h % 3) for h in range(k)) for k in range(169)]


@pytest.mark.parametrize(("values", "note"), [
    (dipped(REGISTER, 24), "falling back 1 time(s) by at most 0.5 kWh (meter noise)"),
    (dipped(dipped(ONE_WEEK, 40), 120, 0.25), "falling back 2 time(s) by at most 0.5 kWh"),
    ([(999_000.0 + 40 * h) % 1_000_000 for h in range(48)], "rolling over 1 time(s) at 1,000,000"),
    ([*REGISTER[:24], *(r + 44_080 for r in REGISTER[24:])], "a median rise of 40 kWh"),
], ids=["one-dip-48", "two-dips-169", "rollover-48", "meter-swap-up-48"])
def test_a_register_with_dips_a_rollover_or_a_swap_sent_as_energy_is_still_refused(
        warehouse, tmp_path, values, note):
    before = contents(warehouse)
    with pytest.raises(RegisterReadingsError, match="give --unit register") as refused:
        ingest_readings(warehouse, export(tmp_path, values))
    assert note in str(refused.value)
    assert contents(warehouse) == before  # never 48 hours of ~124,000 kWh


def test_a_small_backward_step_is_meter_noise_not_a_reset(warehouse, tmp_path):
    # 100, 140, 180, 179.9 (read 0.1 back), 260, 300: the energy around 179.9 cannot be told
    register = [100, 140, 180, 179.9, 260, 300]
    summary = ingest_readings(warehouse, export(tmp_path, register), KWH_REGISTER)
    b1 = kwh_by_hour(warehouse, "b1")
    assert [b1[t] for t in hours("2024-03-04 00:00", 5)] == [40, 40, None, None, 40]  # never 80.1
    counts = summary.registers
    assert (counts.noise, counts.resets, counts.jumps, counts.left_out) == (1, 0, 0, 1)
    assert ("0 reset(s) stored as missing, 1 small backward step(s) (meter noise): the 2 intervals around "
            "each stored as missing, 1 reading(s) starting no interval in the file (the last, or before a "
            "gap) not written") in summary.line()


def test_readings_left_out_are_counted_the_last_and_one_before_a_gap(warehouse, tmp_path):
    values = [100.0 + 40 * h for h in range(12)]
    path = export(tmp_path, values)
    text = path.read_text().splitlines()
    write(path, "\n".join(text[:7] + text[9:]) + "\n")  # the readings of 06:00 and 07:00 taken out
    summary = ingest_readings(warehouse, path, KWH_REGISTER)
    assert summary.registers.left_out == 2  # 05:00 (before the gap) and 11:00 (the last)
    assert summary.readings == 8  # the hours 00:00-04:00 and 08:00-10:00


def test_a_meter_swapped_for_a_higher_one_is_a_missing_hour_counted(warehouse, tmp_path):
    swapped = [*REGISTER[:24], *(r + 44_080 for r in REGISTER[24:])]
    summary = ingest_readings(warehouse, export(tmp_path, swapped), KWH_REGISTER)
    b1 = kwh_by_hour(warehouse, "b1")
    assert b1[utc("2024-03-04 23:00")] is None  # not 44,080 + 40 kWh
    assert max(v for v in b1.values() if v is not None) == 72.0  # the stored hours after the file
    assert (summary.registers.jumps, summary.registers.resets) == (1, 0)
    assert "1 jump(s) over 100x the median rise (a meter swapped) stored as missing" in summary.line()


def test_a_register_in_wh_is_stored_in_kwh_with_register_unit_and_refused_without(warehouse, tmp_path):
    in_wh = [1000 * r for r in REGISTER]
    before = contents(warehouse)
    with pytest.raises(LevelChangeError, match=(
            r"building 'b1': the file's median hour is 40,000 kWh, 556 times the 72 kWh of its stored hours "
            r"within 28 days of the file's: a unit mistake \(a register in Wh\? give --register-unit Wh\)")):
        ingest_readings(warehouse, export(tmp_path, in_wh), KWH_REGISTER)
    # without its unit: b1's 25 stored hours after the file's 47 are its history (72 kWh/h), and
    # a mean rise of 1,879,000 / 47 h = 39,980 an hour: 39.98 kWh/h in Wh (0.56x its 72), 39,980
    # in kWh (555x), 4.0e7 in MWh
    with pytest.raises(RegisterReadingsError, match=(
            r"--unit register needs the unit the register counts in: give --register-unit kWh\|Wh\|MWh; Wh "
            r"looks right: the register of building 'b1' rises by a mean of 39,980 an hour, 39.98 kWh/h "
            r"in Wh, plausible against 72 kWh/h, the level of its own usable history, where kWh and MWh "
            r"are not; nothing was written$")):
        ingest_readings(warehouse, export(tmp_path, in_wh), ReadingsOptions(unit="register"))
    assert contents(warehouse) == before
    ingest_readings(warehouse, export(tmp_path, in_wh), ReadingsOptions(unit="register", register_unit="Wh"))
    b1 = kwh_by_hour(warehouse, "b1")
    assert [b1[t] for t in hours("2024-03-04 00:00", 47)] == pytest.approx(RISES, rel=1e-12)
    with pytest.raises(ValidationError, match="--register-unit is the unit of a register"):
        ReadingsOptions(register_unit="Wh")


def test_a_level_change_can_be_accepted(warehouse, tmp_path):
    path = write(tmp_path / "wh.csv", "ts,b1\n" + "".join(
        f"{t:%Y-%m-%dT%H:%MZ},72000\n" for t in hours("2024-03-07 00:00", 24)))
    with pytest.raises(LevelChangeError, match=r"1,000 times .* \(energies in Wh\? give --unit Wh\)"):
        ingest_readings(warehouse, path)
    ingest_readings(warehouse, path, ReadingsOptions(accept_level_change=True))
    assert kwh_by_hour(warehouse, "b1")[utc("2024-03-07 00:00")] == 72000.0


REAL = "UCam_Building_b0"


@pytest.fixture
def real_week(cambridge_archive) -> list[float]:
    """Building b0's hourly energy from Monday 2019-01-14, a week without a missing hour."""
    batch = load_cambridge(cambridge_archive, [REAL], date(2019, 1, 14), date(2019, 1, 21))
    values = batch.readings.to_pandas()["kwh"].to_list()[:169]
    assert len(values) == 169 and not any(pd.isna(values))
    return values


@pytest.fixture
def real_warehouse(tmp_path, cambridge_archive) -> Path:
    """A warehouse holding b0 from the archive for the four weeks before 2019-01-14."""
    from tasks.ingest.cambridge_archive import ingest_cambridge

    warehouse = tmp_path / "real.duckdb"
    ingest_cambridge(warehouse, cambridge_archive, [REAL], date(2018, 12, 17), date(2019, 1, 13))
    return warehouse


def cumulated(values: list[float], start: float = 123_496.0) -> list[float]:
    """A register read at the start of each hour: ``start`` plus the energy before it."""
    return [start + sum(values[:k]) for k in range(len(values) + 1)]


def test_a_real_buildings_register_is_stored_as_its_hourly_energy(real_warehouse, tmp_path, real_week):
    register = cumulated(real_week[:168])  # 169 readings, 168 hours
    path = long_export(tmp_path, {REAL: register}, start="2019-01-14 00:00")
    with pytest.raises(RegisterReadingsError, match=f"building '{REAL}': its 169 readings rise steadily"):
        ingest_readings(real_warehouse, path)
    summary = ingest_readings(real_warehouse, path, KWH_REGISTER)
    stored = kwh_by_hour(real_warehouse, REAL)
    week = hours("2019-01-14 00:00", 168)
    assert [stored[t] for t in week] == pytest.approx(real_week[:168], abs=1e-6)
    counts = summary.registers
    assert (counts.rollovers, counts.resets, counts.jumps, counts.noise, counts.left_out) == (0, 0, 0, 0, 1)

    noisy = dipped(register, 100, 0.5)
    ingest_readings(real_warehouse, long_export(tmp_path, {REAL: noisy}, start="2019-01-14 00:00"),
                    KWH_REGISTER)
    stored = kwh_by_hour(real_warehouse, REAL)
    assert stored[week[99]] is None and stored[week[100]] is None
    assert [stored[t] for i, t in enumerate(week) if i not in (99, 100)] == pytest.approx(
        [v for i, v in enumerate(real_week[:168]) if i not in (99, 100)], abs=1e-6)


def test_a_real_buildings_register_in_wh_is_refused_against_its_history(real_warehouse, tmp_path, real_week):
    register = [1000 * r for r in cumulated(real_week[:168])]
    path = long_export(tmp_path, {REAL: register}, start="2019-01-14 00:00")
    before = contents(real_warehouse)
    with pytest.raises(LevelChangeError, match="a register in Wh\\? give --register-unit Wh"):
        ingest_readings(real_warehouse, path, KWH_REGISTER)
    assert contents(real_warehouse) == before
    ingest_readings(real_warehouse, path, ReadingsOptions(unit="register", register_unit="Wh"))
    stored = kwh_by_hour(real_warehouse, REAL)
    assert [stored[t] for t in hours("2019-01-14 00:00", 168)] == pytest.approx(real_week[:168], abs=1e-6)


def test_a_file_mixing_a_register_and_a_real_building_is_refused_both_ways(tmp_path, real_week):

    warehouse = tmp_path / "mixed.duckdb"
    ingest_buildings(warehouse, write(tmp_path / "b.csv", "building_id,site_id,timezone,holiday_country\n"
                                      f"meter-9,bedford,Europe/London,GB\n{REAL},bedford,Europe/London,GB\n"))
    path = long_export(tmp_path, {"meter-9": cumulated(real_week[:47]), REAL: real_week[:48]},
                       start="2019-01-14 00:00")
    with pytest.raises(RegisterReadingsError, match=(
            f"building 'meter-9': .* give --unit register --register-unit kWh\\|Wh\\|MWh \\(the unit it "
            f"counts in\\) to store the differences; the file also holds 1 "
            f"building\\(s\\) of interval energies \\(e.g. '{REAL}'\\): send the register\\(s\\) in a file of "
            "their own")):
        ingest_readings(warehouse, path)
    with pytest.raises(RegisterReadingsError, match=(
            f"building '{REAL}': its readings fall in \\d+ of 47 steps: the energy of each interval, not a "
            "cumulative meter register .*; send it in a file of its own, without --unit register")):
        ingest_readings(warehouse, path, KWH_REGISTER)
    alone = long_export(tmp_path, {REAL: real_week[:48]}, start="2019-01-14 00:00", name="alone.csv")
    with pytest.raises(RegisterReadingsError, match="ingest the file without --unit register"):
        ingest_readings(warehouse, alone, KWH_REGISTER)
    assert contents(warehouse)["meter_readings"] == []
