"""Cumulative meter registers: refused when sent as energy (naming --unit register), stored as
their hand-computed differences with --unit register (rollovers bridged, resets missing), and
never mistaken for the load of a real or synthetic building."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest
from operator_files import contents, hours, kwh_by_hour, utc, warehouse_with_buildings, write
from wadiro_fleet.tasks.ingest.cambridge_archive import load_cambridge
from wadiro_fleet.tasks.ingest.plausibility import ImplausibleValueError
from wadiro_fleet.tasks.ingest.readings_file import ReadingsOptions, ingest_readings
from wadiro_fleet.tasks.ingest.registers import RegisterReadingsError, refuse_registers
from wadiro_fleet.tasks.ingest.synthetic_fleet import FleetSpec, fleet_readings

# The export: 123,496 kWh rising about 40 kWh an hour (39, 40, 41, 40, ...)
RISES = [39.0 + (h % 3) for h in range(47)]
REGISTER = [123_496.0 + sum(RISES[:h]) for h in range(48)]


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
            r"give --unit register to store the differences")):
        ingest_readings(warehouse, export(tmp_path, REGISTER))
    assert contents(warehouse) == before


def test_unit_register_stores_the_differences_and_leaves_the_last_reading_unwritten(warehouse, tmp_path):
    before = kwh_by_hour(warehouse, "b1")
    summary = ingest_readings(warehouse, export(tmp_path, REGISTER), ReadingsOptions(unit="register"))
    after = kwh_by_hour(warehouse, "b1")
    written = dict(zip(hours("2024-03-04 00:00", 47), RISES, strict=True))
    assert after == {**before, **written}  # the 48th hour (no next reading) keeps its 72
    assert after[utc("2024-03-05 23:00")] == 72.0 and after[utc("2024-03-04 00:00")] == 39.0
    assert summary.readings == 47 and summary.replaced == 47
    assert "differences of a register: 0 rollover(s) bridged, 0 reset(s) stored as missing" in summary.line()
    assert kwh_by_hour(warehouse, "b2") == dict.fromkeys(hours("2024-03-04 00:00", 72), 9.0)


def test_a_rollover_is_bridged_a_reset_and_a_blank_reading_are_missing(warehouse, tmp_path):
    # 999,900 +40 +40 then the 6-digit register wraps: 999,980 -> 20 is 40 kWh; then a reset to 5;
    # then a blank reading, which bounds two unknown intervals
    register = [999_900, 999_940, 999_980, 20, 60, 5, 45, None, 125, 165]
    summary = ingest_readings(warehouse, export(tmp_path, register), ReadingsOptions(unit="register"))
    assert list(kwh_by_hour(warehouse, "b1").values())[:10] == [40, 40, 40, 40, None, 40, None, None, 40, 72]
    assert (summary.registers.rollovers, summary.registers.resets) == (1, 1)
    assert summary.missing_readings == 3


def test_quarter_hour_registers_sum_to_whole_hours_only(warehouse, tmp_path):
    register = [1000 + 2.5 * q for q in range(9)]  # 2.5 kWh a quarter: 10 kWh an hour
    ingest_readings(warehouse, export(tmp_path, register, step="15min"), ReadingsOptions(unit="register"))
    b1 = kwh_by_hour(warehouse, "b1")
    assert (b1[utc("2024-03-04 00:00")], b1[utc("2024-03-04 01:00")], b1[utc("2024-03-04 02:00")]) == (
        10.0, 10.0, 72.0)


def test_a_huge_difference_is_refused_as_any_implausible_energy(warehouse, tmp_path):
    register = [10.0 * h for h in range(30)]
    register[20] = 2_500_000.0  # then falls back: the next fall is a reset, this rise impossible
    with pytest.raises(ImplausibleValueError, match=r"line 21, column 'kwh': 2\.49981e\+06 is not"):
        ingest_readings(warehouse, export(tmp_path, register), ReadingsOptions(unit="register"))


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
