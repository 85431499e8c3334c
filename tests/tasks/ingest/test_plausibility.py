"""Impossible values in the archive: refused with file, line and column, or stored as missing
and counted -- never stored silently."""

from __future__ import annotations

from datetime import date

import pyarrow.compute as pc
import pytest
from test_ingest_cambridge import MIDAS_GLOB, electricity_file, write_archive
from wadiro_fleet.tasks.ingest.cambridge_archive import load_cambridge
from wadiro_fleet.tasks.ingest.plausibility import ImplausibleValueError

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


def test_only_the_selected_range_is_counted_when_stored_as_missing(archive):
    set_cell(electricity_file(archive), 2 + 24 * 40, 1, "-1")  # 2019-02-10
    set_cell(electricity_file(archive), 2 + 24 * 200, 1, "inf")  # 2019-07-20
    selected = load_cambridge(archive, start=date(2019, 2, 1), end=date(2019, 2, 28),
                              implausible="missing")
    assert selected.implausible_values == 1
    with pytest.raises(ImplausibleValueError, match="line 962, column 'equipment load"):
        load_cambridge(archive, start=date(2019, 7, 1), end=date(2019, 7, 31))  # files are whole
