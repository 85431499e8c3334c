"""A new meter's level judged at ingest (issue 60, item 1): a 13th building drawing 5.1 kWh an
hour, sent as a register counting Wh, is refused without its unit, stored at 5.1 with
``--register-unit Wh``, and refused as a thousand times its yardstick with ``--register-unit
kWh``: its declared size and type (CIBSE TM46) when the buildings file gives them, else the
fleet's established buildings; every refusal's advice leads to a correct ingest, and
``--implausible missing`` never leaves a building of the file empty."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tasks.ingest.levels import LevelChangeError
from tasks.ingest.plausibility import ImplausibleValueError
from tasks.ingest.readings_file import ReadingsOptions
from tasks.ingest.registers import RegisterReadingsError
from tests.tasks.ingest.operator_files import (
    contents,
    ingest_buildings,
    ingest_readings,
    readings,
    write,
)

FLEET = [f"b{i}" for i in range(1, 13)]
"""Twelve established buildings drawing 10, 20, ..., 120 kWh an hour."""
RISES = [5000.0, 5100.0, 5200.0] * 56
"""The 13th building's week: 168 hourly rises of its Wh register, a mean of 5,100 Wh (5.1 kWh)."""
REGISTER = list(48_213_000.0 + np.r_[0.0, np.cumsum(RISES)])
"""Its 169 register readings (Wh), 2024-03-11 00:00 to 2024-03-18 00:00 UTC."""
RISES_KWH = [r / 1000 for r in RISES]
"""The same week as the energy of each hour in kWh (5.0, 5.1, 5.2, ...)."""
# The fleet's levels' 1st and 99th percentiles (numpy's linear interpolation over 12 sorted
# values): 10 + 0.11 x 10 = 11.1 and 110 + 0.89 x 10 = 118.9 kWh/h; plausible: 1.11 to 1,189.
# A declared 500 m2 general office: 95 kWh/m2/year x 500 / 8,760 h = 5.422 kWh/h; plausible:
# 0.5422 to 54.22 (5,100 is 940.5x it).


def buildings_csv(b13: str = ",") -> str:
    """The fleet and b13 (its ``building_type,floor_area_m2`` cells: ``b13``)."""
    rows = [f"{b},s1,Europe/London,GB,office," for b in FLEET]
    return ("building_id,site_id,timezone,holiday_country,building_type,floor_area_m2\n"
            + "\n".join([*rows, f"b13,s1,Europe/London,GB,{b13}"]) + "\n")


def warehouse_with_fleet(tmp: Path, b13: str = ",", fleet: list[str] = FLEET) -> Path:
    """A warehouse (in a folder of its own under ``tmp``) whose fleet holds the week of
    2024-03-04 (each building at its own constant level), b13 declared as ``b13`` and without
    readings."""
    tmp = tmp / f"w{len(list(tmp.glob('w*')))}"
    tmp.mkdir()
    warehouse = tmp / "w.duckdb"
    ingest_buildings(warehouse, write(tmp / "buildings.csv", buildings_csv(b13)))
    times = pd.date_range("2024-03-04", periods=168, freq="h", tz="UTC")
    levels = [10 * int(b[1:]) for b in fleet]
    write(tmp / "fleet.csv", f"ts,{','.join(fleet)}\n" + "".join(
        f"{t:%Y-%m-%dT%H:%MZ},{','.join(map(str, levels))}\n" for t in times))
    ingest_readings(warehouse, tmp / "fleet.csv")
    return warehouse


def b13_file(tmp: Path, values: list[float], name: str = "b13.csv") -> Path:
    """A long file of b13's values from 2024-03-11 00:00 UTC, one an hour."""
    times = pd.date_range("2024-03-11", periods=len(values), freq="h", tz="UTC")
    return write(tmp / name, "building_id,ts,kwh\n" + "".join(
        f"b13,{t:%Y-%m-%dT%H:%MZ},{v:.10g}\n" for t, v in zip(times, values, strict=True)))


def register(unit: str | None = None, **more) -> ReadingsOptions:
    return ReadingsOptions(unit="register", register_unit=unit, **more)


def b13_kwh(warehouse: Path) -> list[float]:
    return readings(warehouse, "b13")["kwh"].tolist()


# --- --unit register states its unit ---------------------------------------------------------

def test_a_register_without_its_unit_is_refused_naming_the_unit_the_fleet_makes_plausible(tmp_path):
    warehouse = warehouse_with_fleet(tmp_path)
    before = contents(warehouse)
    with pytest.raises(RegisterReadingsError) as refused:
        ingest_readings(warehouse, b13_file(tmp_path, REGISTER), register())
    message = str(refused.value)
    assert "\n" not in message
    assert ("--unit register needs the unit the register counts in: give --register-unit "
            "kWh|Wh|MWh") in message
    # 5,100 an hour: 5.1 kWh/h read as Wh is within the fleet's 1.11 to 1,189; 5,100 kWh/h
    # (42.9x its 118.9) and 5.1e6 are not
    assert ("Wh looks right: the register of building 'b13' rises by a mean of 5,100 an hour, "
            "5.1 kWh/h in Wh, plausible against 11.1 to 118.9 kWh/h, the level of the "
            "fleet's 12 established buildings, where kWh and MWh are not; nothing was written") in message
    with pytest.raises(RegisterReadingsError, match="needs the unit the register counts in"):
        ingest_readings(warehouse, b13_file(tmp_path, REGISTER), register(accept_level_change=True))
    assert contents(warehouse) == before


def test_a_register_without_its_unit_is_refused_naming_the_unit_its_declared_size_makes_plausible(
        tmp_path):
    warehouse = warehouse_with_fleet(tmp_path, b13="general office,500")
    with pytest.raises(RegisterReadingsError, match=(
            r"Wh looks right: the register of building 'b13' rises by a mean of 5,100 an hour, "
            r"5.1 kWh/h in Wh, plausible against 5.422 kWh/h, the level of its declared 500 m2 of "
            r"general office \(CIBSE TM46: 95 kWh/m2/year\), where kWh and MWh are not")):
        ingest_readings(warehouse, b13_file(tmp_path, REGISTER), register())


def test_a_register_without_its_unit_and_nothing_to_judge_it_by_names_no_unit(tmp_path):
    warehouse = warehouse_with_fleet(tmp_path, fleet=FLEET[:4])  # 4 buildings: no fleet
    with pytest.raises(RegisterReadingsError) as refused:
        ingest_readings(warehouse, b13_file(tmp_path, REGISTER), register())
    assert str(refused.value).endswith("give --register-unit kWh|Wh|MWh; nothing was written")


def test_a_wh_register_with_its_unit_is_stored_at_its_hand_computed_hours(tmp_path):
    warehouse = warehouse_with_fleet(tmp_path)
    summary = ingest_readings(warehouse, b13_file(tmp_path, REGISTER), register("Wh"))
    assert summary.readings == 168
    assert b13_kwh(warehouse) == pytest.approx([5.0, 5.1, 5.2] * 56)
    assert np.mean(b13_kwh(warehouse)) == pytest.approx(5.1)


def test_a_wh_register_read_as_kwh_is_refused_as_a_thousand_times_the_fleet(tmp_path):
    warehouse = warehouse_with_fleet(tmp_path)
    before = contents(warehouse)
    with pytest.raises(LevelChangeError) as refused:
        ingest_readings(warehouse, b13_file(tmp_path, REGISTER), register("kWh"))
    assert str(refused.value) == (
        f"{tmp_path / 'b13.csv'}: building 'b13' is new (fewer than 24 stored readings within 28 "
        "days of the file's hours): a mean of 5,100 kWh/h is 42.9x 11.1 to 118.9 kWh/h, the level "
        "of the fleet's 12 established buildings: a unit mistake (a register in Wh? give "
        "--register-unit Wh); give --accept-level-change if its level is real")
    assert contents(warehouse) == before


def test_a_wh_register_read_as_kwh_is_refused_as_a_thousand_times_its_declared_size(tmp_path):
    warehouse = warehouse_with_fleet(tmp_path, b13="general office,500")
    with pytest.raises(LevelChangeError, match=(
            r"building 'b13' is new .*: a mean of 5,100 kWh/h is 941x 5.422 kWh/h, the level of its "
            r"declared 500 m2 of general office \(CIBSE TM46: 95 kWh/m2/year\): a unit mistake \(a "
            r"register in Wh\? give --register-unit Wh\)")):
        ingest_readings(warehouse, b13_file(tmp_path, REGISTER), register("kWh"))


def test_the_level_is_accepted_when_said_to_be_real(tmp_path):
    warehouse = warehouse_with_fleet(tmp_path)
    ingest_readings(warehouse, b13_file(tmp_path, REGISTER), register("kWh", accept_level_change=True))
    assert np.mean(b13_kwh(warehouse)) == pytest.approx(5100.0)


# --- a new meter sent as energies, judged against its declared size ---------------------------

def test_a_declared_500_m2_office_accepts_5_1_kwh_and_refuses_5_100(tmp_path):
    warehouse = warehouse_with_fleet(tmp_path, b13="general office,500")
    ingest_readings(warehouse, b13_file(tmp_path, RISES_KWH))
    assert np.mean(b13_kwh(warehouse)) == pytest.approx(5.1)
    other = warehouse_with_fleet(tmp_path, b13="office,500")
    with pytest.raises(LevelChangeError, match=(
            r"a mean of 5,100 kWh/h is 941x 5.422 kWh/h, the level of its declared 500 m2 of office "
            r"\(CIBSE TM46: 95 kWh/m2/year\): a unit mistake \(energies in Wh\? give --unit Wh\)")):
        ingest_readings(other, b13_file(tmp_path, RISES))
    summary = ingest_readings(other, b13_file(tmp_path, RISES), ReadingsOptions(unit="Wh"))
    assert summary.readings == 168 and np.mean(b13_kwh(other)) == pytest.approx(5.1)



def test_a_thousandth_of_the_yardstick_names_mwh(tmp_path):
    warehouse = warehouse_with_fleet(tmp_path)
    in_mwh = [r / 1e6 for r in REGISTER]  # the register counted in MWh, read as kWh
    with pytest.raises(LevelChangeError, match=(
            r"a mean of 0.0051 kWh/h is 0.00046x 11.1 to 118.9 kWh/h, the level of the fleet's 12 "
            r"established buildings: a unit mistake \(a register in MWh\? give --register-unit MWh\)")):
        ingest_readings(warehouse, b13_file(tmp_path, in_mwh), register("kWh"))
    ingest_readings(warehouse, b13_file(tmp_path, in_mwh), register("MWh"))
    assert np.mean(b13_kwh(warehouse)) == pytest.approx(5.1)


def test_a_level_off_by_no_unit_says_to_check_the_file_or_declare_the_size(tmp_path):
    # five buildings of 80 to 120 kWh/h: 80.4 to 119.6 (4 x 0.01 and 4 x 0.99 between ranks);
    # 2,000 kWh/h is 16.7x 119.6, and 2 (read as Wh) is under 8.04: neither unit fits
    warehouse = warehouse_with_fleet(tmp_path, fleet=FLEET[7:])
    with pytest.raises(LevelChangeError, match=(
            r"a mean of 2,000 kWh/h is 16.7x 80.4 to 119.6 kWh/h, the level of the fleet's 5 "
            r"established buildings: check the file, or declare the building's floor_area_m2 and "
            r"building_type in the buildings file; give --accept-level-change if its level is real$")):
        ingest_readings(warehouse, b13_file(tmp_path, [2000.0] * 24))
    # 510 kWh/h for a declared 500 m2 office: 94.1x its 5.422, and 0.51 under its 0.5422
    declared = warehouse_with_fleet(tmp_path, b13="general office,500")
    with pytest.raises(LevelChangeError, match=(
            r"a mean of 510 kWh/h is 94.1x 5.422 kWh/h, the level of its declared 500 m2 of general "
            r"office \(CIBSE TM46: 95 kWh/m2/year\): check the file and the building's declared "
            r"floor_area_m2 and building_type; give --accept-level-change if its level is real$")):
        ingest_readings(declared, b13_file(tmp_path, [510.0] * 24))


def test_established_buildings_are_judged_by_their_own_history_not_the_fleet(tmp_path):
    warehouse = warehouse_with_fleet(tmp_path)
    times = pd.date_range("2024-03-11", periods=24, freq="h", tz="UTC")
    # b12's next day at 1,000 kWh/h: 8.3x its stored 120 (below the 200x level change) and 8.4x
    # the fleet's 118.9; judged against its own history only
    path = write(tmp_path / "b12.csv", "ts,b12\n" + "".join(f"{t:%Y-%m-%dT%H:%MZ},1000\n" for t in times))
    assert ingest_readings(warehouse, path).readings == 24


def test_the_same_file_again_is_judged_again_and_changes_nothing(tmp_path):
    warehouse = warehouse_with_fleet(tmp_path)
    ingest_readings(warehouse, b13_file(tmp_path, REGISTER), register("Wh"))
    before = contents(warehouse)
    ingest_readings(warehouse, b13_file(tmp_path, REGISTER), register("Wh"))
    assert contents(warehouse) == before


def test_without_a_yardstick_only_the_largest_draw_is_refused(tmp_path):
    warehouse = warehouse_with_fleet(tmp_path, fleet=FLEET[:4])  # 4 buildings: no fleet
    ingest_readings(warehouse, b13_file(tmp_path, RISES))  # 5,100 kWh/h: nothing to judge it by
    with pytest.raises(LevelChangeError, match=(
            r"a median of 51,000 kWh/h is 51x up to 1,000 kWh/h, the level of any but the largest "
            r"sites \(no declared size and type, and fewer than 5 established buildings\): a unit "
            r"mistake \(energies in Wh\? give --unit Wh\)")):
        ingest_readings(warehouse, b13_file(tmp_path, [r * 10 for r in RISES], "big.csv"))


# --- every refusal's advice leads to a correct ingest ------------------------------------------

def test_a_register_over_the_energy_bound_sent_as_kwh_is_refused_as_a_register(tmp_path):
    warehouse = warehouse_with_fleet(tmp_path)
    for policy in ("refuse", "missing"):  # --implausible missing stored it empty
        with pytest.raises(RegisterReadingsError, match=(
                r"building 'b13': its 169 readings rise steadily .*: a cumulative meter register, not "
                r"the energy of each interval; give --unit register --register-unit kWh\|Wh\|MWh "
                r"\(the unit it counts in\) to store the differences$")):
            ingest_readings(warehouse, b13_file(tmp_path, REGISTER), ReadingsOptions(implausible=policy))
    assert b13_kwh(warehouse) == []


def test_implausible_missing_refuses_to_leave_a_building_empty(tmp_path):
    warehouse = warehouse_with_fleet(tmp_path)
    before = contents(warehouse)
    with pytest.raises(ImplausibleValueError) as refused:
        ingest_readings(warehouse, b13_file(tmp_path, [-v for v in RISES_KWH]),
                        ReadingsOptions(implausible="missing"))
    assert str(refused.value) == (
        f"{tmp_path / 'b13.csv'}: building 'b13': --implausible missing would store 168 of its 168 "
        "values as missing (more than 50%): they are not what its unit says; fix the file or its "
        "unit (--unit Wh, kW, or register with --register-unit kWh|Wh|MWh); nothing was written")
    assert contents(warehouse) == before


@pytest.mark.parametrize(("bad", "stored"), [(84, True), (85, False)])
def test_implausible_missing_stores_up_to_half_of_a_buildings_values_as_missing(tmp_path, bad, stored):
    warehouse = warehouse_with_fleet(tmp_path)
    values = [-1.0] * bad + RISES_KWH[bad:]
    path = b13_file(tmp_path, values)
    if stored:
        summary = ingest_readings(warehouse, path, ReadingsOptions(implausible="missing"))
        assert summary.implausible_values == 84 and summary.missing_readings == 84
    else:
        with pytest.raises(ImplausibleValueError, match="would store 85 of its 168 values as missing"):
            ingest_readings(warehouse, path, ReadingsOptions(implausible="missing"))


def test_a_few_implausible_values_of_a_wide_file_are_still_stored_as_missing(tmp_path):
    warehouse = warehouse_with_fleet(tmp_path)
    times = pd.date_range("2024-03-11", periods=24, freq="h", tz="UTC")
    path = write(tmp_path / "w.csv", "ts,b1,b2\n" + "".join(
        f"{t:%Y-%m-%dT%H:%MZ},{'2e6' if h == 5 else 10},{-3 if h == 7 else 20}\n"
        for h, t in enumerate(times)))
    summary = ingest_readings(warehouse, path, ReadingsOptions(implausible="missing"))
    assert summary.implausible_values == 2 and summary.missing_readings == 2
    over = write(tmp_path / "over.csv", path.read_text().replace(",-3\n", ",20\n"))
    # a value above any hour's energy, once the file is known not to be a register
    with pytest.raises(ImplausibleValueError, match=(
            r"line 7, column 'b1': 2e\+06 is not a finite value from 0 to 1e\+06 kWh .*; 1 such "
            r"value\(s\) in the file. Fix the file, or give --implausible missing")):
        ingest_readings(warehouse, over)
