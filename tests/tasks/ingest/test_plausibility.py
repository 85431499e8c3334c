"""Impossible values in the archive: refused with file, line and column, or stored as missing
and counted -- never stored silently."""

from __future__ import annotations

import shutil
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

import pyarrow.compute as pc
import pytest

from tasks.ingest.cambridge_archive import ingest_cambridge
from tasks.ingest.cambridge_archive import load_cambridge
from tasks.ingest.plausibility import ImplausibleValueError
from tasks.warehouse.connection import connect
from tests.tasks.ingest.test_ingest_cambridge import MIDAS_GLOB, electricity_file, write_archive

WEATHER = ("aux_data", "MetOffice Weather Data", "processed_data", "bedford", "2019.csv")


def set_cell(path, line: int, column: int, value: str) -> None:
    lines = path.read_text().splitlines()
    cells = lines[line - 1].split(",")
    cells[column] = value
    lines[line - 1] = ",".join(cells)
    path.write_text("\n".join(lines) + "\n")


@pytest.fixture
def archive(tmp_path):
    return write_archive(tmp_path / "archive")


def midas_file(archive):
    return next((archive / WEATHER[0] / WEATHER[1] / "raw_data" / "hourly_weather").glob(
        MIDAS_GLOB.format(year=2019)))


def test_the_limits_of_the_possible_are_accepted(archive):
    weather = archive.joinpath(*WEATHER)
    set_cell(weather, 10, 1, "-89.2")  # Vostok, 1983
    set_cell(weather, 11, 1, "56.7")  # Death Valley, 1913
    set_cell(weather, 12, 2, "100.0")
    set_cell(weather, 13, 3, "1200.5")
    set_cell(electricity_file(archive), 10, 1, "19380.8")  # the archive's largest reading
    batch = load_cambridge(archive)
    assert batch.implausible_values == 0
    assert pc.min(batch.weather["temperature_c"]).as_py() == -89.2


def test_negative_wind_is_refused_naming_the_midas_line(archive):
    path = midas_file(archive)
    lines = path.read_text().splitlines()
    first = lines.index("data") + 2  # 0-based index of the first observation
    cells = lines[first + 30].split(",")
    cells[4] = "-8.0"  # knots
    lines[first + 30] = ",".join(cells)
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ImplausibleValueError, match=f"line {first + 31}, column 'wind_speed': "
                                                    r"-8 \(-4\.11555 m/s\) is not a finite value"):
        load_cambridge(archive)
    batch = load_cambridge(archive, implausible="missing")
    assert batch.implausible_values == 1


def test_only_the_selected_range_is_judged(archive):
    set_cell(electricity_file(archive), 2 + 24 * 40, 1, "-1")  # 2019-02-10
    set_cell(electricity_file(archive), 2 + 24 * 200, 1, "inf")  # 2019-07-20
    selected = load_cambridge(archive, start=date(2019, 2, 1), end=date(2019, 2, 28),
                              implausible="missing")
    assert selected.implausible_values == 1
    with pytest.raises(ImplausibleValueError, match="line 4802, column 'equipment load"):
        load_cambridge(archive, start=date(2019, 7, 1), end=date(2019, 7, 31))
    untouched = load_cambridge(archive, start=date(2019, 3, 1), end=date(2019, 3, 31))
    assert untouched.implausible_values == 0 and untouched.readings.num_rows == 2 * 31 * 24


# --- a sensor's tolerance, on a real Met Office year --------------------------------------------

REAL_YEAR = 2019
HUMIDITY = 2  # column of rltv_hum [%] in the processed Bedford files


@pytest.fixture
def real_archive(cambridge_archive, tmp_path):
    """A copy of the real archive's 2019: building b0, the processed Bedford year and its raw
    MIDAS file, in the archive's layout."""
    root = tmp_path / "real"
    for relative in (Path("building_data/processed_data/UCam_Building_b0/electricity/2019.csv"),
                     Path(*WEATHER)):
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(cambridge_archive / relative, root / relative)
    raw = Path(WEATHER[0], WEATHER[1], "raw_data", "hourly_weather")
    (root / raw).mkdir(parents=True)
    midas = next((cambridge_archive / raw).glob(MIDAS_GLOB.format(year=REAL_YEAR)))
    shutil.copy(midas, root / raw / midas.name)
    return root


def stored_weather(warehouse) -> dict[datetime, tuple]:
    """hour -> (temperature, humidity, irradiance, wind) of the stored observations."""
    with connect(warehouse, read_only=True) as con:
        rows = con.execute("SELECT ts, temperature_c, humidity_pct, irradiance_wm2, wind_speed_ms "
                           "FROM weather WHERE kind = 'observed' ORDER BY ts").fetchall()
    return {ts: tuple(values) for ts, *values in rows}


def hour_of_line(line: int) -> datetime:
    return datetime(REAL_YEAR, 1, 1, tzinfo=timezone.utc) + timedelta(hours=line - 2)


def test_humidity_just_over_100_is_clipped_and_counted_on_a_real_met_office_year(real_archive,
                                                                               tmp_path):
    warehouse = tmp_path / "w.duckdb"
    ingest_cambridge(warehouse, real_archive)
    before = stored_weather(warehouse)
    assert len(before) == 8760 and max(v[1] for v in before.values() if v[1] is not None) <= 100
    overshoot = {3000: "100.3", 3001: "100.5", 3002: "100.4", 7000: "100.3"}  # lines of the file
    for line, value in overshoot.items():
        set_cell(real_archive.joinpath(*WEATHER), line, HUMIDITY, value)
    summary = ingest_cambridge(warehouse, real_archive)
    after = stored_weather(warehouse)
    assert summary.clipped_values == len(overshoot)
    assert "4 value(s) just past their bound (a sensor's tolerance) clipped to it" in summary.line()
    changed = {hour_of_line(line) for line in overshoot}
    assert {ts: values[1] for ts, values in after.items() if ts in changed} == dict.fromkeys(changed, 100.0)
    assert {ts: v for ts, v in after.items() if ts not in changed} == {
        ts: v for ts, v in before.items() if ts not in changed}


def test_an_impossible_value_outside_the_asked_range_stops_nothing(real_archive, tmp_path):
    warehouse = tmp_path / "w.duckdb"
    set_cell(real_archive.joinpath(*WEATHER), 8000, HUMIDITY, "150")  # 2019-11-29
    summary = ingest_cambridge(warehouse, real_archive, start=date(2019, 3, 1), end=date(2019, 3, 31))
    assert summary.weather_hours == 31 * 24 and summary.clipped_values == 0
    before = stored_weather(warehouse)
    assert len(before) == 31 * 24
    with pytest.raises(ImplausibleValueError, match=r"line 8000, column 'rltv_hum \[%\]': 150 is not a "
                                                    r"finite value from 0 to 105 %"):
        ingest_cambridge(warehouse, real_archive, start=date(2019, 11, 1), end=date(2019, 11, 30))
    assert stored_weather(warehouse) == before


def test_irradiance_a_little_below_zero_at_night_is_clipped_and_far_below_refused(real_archive,
                                                                                tmp_path):
    weather = real_archive.joinpath(*WEATHER)
    set_cell(weather, 2 + 24 * 10 + 2, 3, "-2.5")  # 2019-01-11 02:00
    summary = ingest_cambridge(tmp_path / "w.duckdb", real_archive, start=date(2019, 1, 11),
                               end=date(2019, 1, 11))
    assert summary.clipped_values == 1
    assert stored_weather(tmp_path / "w.duckdb")[hour_of_line(2 + 24 * 10 + 2)][2] == 0.0
    set_cell(weather, 2 + 24 * 10 + 2, 3, "-31")
    with pytest.raises(ImplausibleValueError, match=r"-31 is not a finite value from -30 to 1500 W/m2"):
        ingest_cambridge(tmp_path / "w.duckdb", real_archive, start=date(2019, 1, 11),
                         end=date(2019, 1, 11))
