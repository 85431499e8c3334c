"""Files as an operator's systems export them (issue 30): an asset register's own column names and
a meter export's ``Date/Time`` written ``dd/mm/yyyy HH:MM``, read through a column mapping
(``--columns``, ``--columns-file``) and a timestamp layout (``--time-format``, ``--dayfirst``),
storing exactly what the same data in the warehouse's own layout stores; and every mapping that
cannot be right refused, naming both names."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from tasks.errors import PipelineError
from tasks.ingest.buildings_file import load_buildings
from tasks.ingest.contract import FileOptions
from tasks.ingest.readings_file import ReadingsOptions, load_readings
from tasks.ingest.weather_file import WeatherOptions, load_weather
from tests.tasks.ingest.operator_files import (
    contents,
    ingest_buildings,
    ingest_readings,
    ingest_weather,
    kwh_by_hour,
    utc,
    write,
)

REGISTER = """Asset Name,Site,Time zone,Country,Region,Floor area (m2)
north-office,leeds,Europe/London,GB,ENG,1200
depot-7,leeds,Europe/London,GB,ENG,5400
"""
ASSET_COLUMNS = ("Asset Name=building_id", "Site=site_id", "Time zone=timezone",
                 "Country=holiday_country", "Region=holiday_subdiv", "Floor area (m2)=floor_area_m2")
STORED = [("depot-7", "leeds", "Europe/London", "GB", "ENG", None, "register.csv", 5400.0),
          ("north-office", "leeds", "Europe/London", "GB", "ENG", None, "register.csv", 1200.0)]


@pytest.fixture
def register(tmp_path) -> Path:
    return write(tmp_path / "register.csv", REGISTER)


def test_an_asset_register_with_its_own_column_names(tmp_path, register):
    warehouse = tmp_path / "w.duckdb"
    with pytest.raises(PipelineError, match=r"missing required column\(s\) 'building_id', 'site_id', 'timezone', "
                                            r"'holiday_country'; .* --columns 'NAME=TARGET' reads a column"):
        ingest_buildings(warehouse, register)
    summary = ingest_buildings(warehouse, register, FileOptions(columns=ASSET_COLUMNS))
    assert (summary.new, summary.updated) == (2, 0)
    assert contents(warehouse)["buildings"] == STORED


def test_the_mapping_from_a_csv_or_a_json_file_reads_the_same(tmp_path, register):
    pairs = [item.split("=") for item in ASSET_COLUMNS]
    as_csv = write(tmp_path / "mapping.csv", "source,target\n" + "".join(f'"{s}",{t}\n' for s, t in pairs))
    as_json = write(tmp_path / "mapping.json", json.dumps({s: t or None for s, t in pairs}))
    both = FileOptions(columns=ASSET_COLUMNS[:2], columns_file=str(tmp_path / "rest.json"))
    write(tmp_path / "rest.json", json.dumps({s: t for s, t in pairs[2:]}))
    for options in (FileOptions(columns_file=str(as_csv)), FileOptions(columns_file=str(as_json)), both):
        assert load_buildings(register, options).buildings.to_pylist() == load_buildings(
            register, FileOptions(columns=ASSET_COLUMNS)).buildings.to_pylist()


@pytest.mark.parametrize(("columns", "message"), [
    (("Asset Name=asset_id",), r"--columns maps column 'Asset Name' to 'asset_id', which is not a column of a "
                               r"buildings file; the columns are building_id, site_id"),
    (("Asset=building_id",), r"--columns maps column 'Asset' to 'building_id', but the file has no column 'Asset'; "
                             r"its columns are \['Asset Name', 'Site'"),
    (("Asset Name=building_id", "Site=building_id"), r"--columns maps both 'Asset Name' and 'Site' to 'building_id'"),
    (("Site=site_id", "Site=timezone"), r"--columns maps column 'Site' a second time \(to 'timezone'"),
    (("Region=Country",), r"maps column 'Region' to 'Country', which is not a column of a buildings file"),
])
def test_a_mapping_that_cannot_be_right_is_refused_naming_both_names(register, columns, message):
    with pytest.raises(PipelineError, match=message):
        load_buildings(register, FileOptions(columns=columns))


def test_a_target_the_file_already_has_and_an_unmapped_extra_column(tmp_path):
    path = write(tmp_path / "b.csv", "building_id,Name,site_id,timezone,holiday_country,notes\nb1,x,s1,UTC,GB,\n")
    with pytest.raises(PipelineError, match=r"maps column 'Name' to 'building_id', but the file already has a "
                                            r"column 'building_id'; map that one elsewhere or leave it out"):
        load_buildings(path, FileOptions(columns=("Name=building_id",)))
    with pytest.raises(PipelineError, match=r"unexpected column\(s\) 'Name', 'notes'; .* --columns 'Name=' leaves "
                                            r"it out"):
        load_buildings(path)
    assert load_buildings(path, FileOptions(columns=("Name=", "notes="))).buildings.num_rows == 1


@pytest.mark.parametrize(("name", "text", "message"), [
    ("m.csv", "from,to\na,b\n", r"line 1 must be the header source,target"),
    ("m.csv", "source,target\na,b,c\n", r"line 2: a source column and a target"),
    ("m.json", "[1, 2]", r"a JSON mapping is one object of column names"),
    ("m.json", "{", r"not valid JSON"),
    ("m.txt", "a=b", r"a mapping file is a .csv \(source,target\) or a .json object"),
])
def test_a_malformed_mapping_file_is_refused_naming_it(tmp_path, register, name, text, message):
    path = write(tmp_path / name, text)
    with pytest.raises(PipelineError, match=rf"--columns-file {path}.*{message}"):
        load_buildings(register, FileOptions(columns_file=str(path)))
    with pytest.raises(PipelineError, match="no such file"):
        load_buildings(register, FileOptions(columns_file=str(tmp_path / "nope.csv")))


def test_option_values_that_are_no_pairs_or_no_layout_are_refused():
    with pytest.raises(ValidationError, match=r"'Asset Name' is not SOURCE=TARGET"):
        FileOptions(columns=("Asset Name",))
    with pytest.raises(ValidationError, match=r"holds no date or time code"):
        ReadingsOptions(time_format="dd/mm/yyyy")
    with pytest.raises(ValidationError, match=r"--time-format names the layout already; leave --dayfirst out"):
        ReadingsOptions(time_format="%d/%m/%Y %H:%M", dayfirst=True)


# --- a meter export: Date/Time as dd/mm/yyyy HH:MM, local time, over the October clock change --------

LOCAL = ["27/10/2024 00:00", "27/10/2024 00:30", "27/10/2024 01:00", "27/10/2024 01:30",
         "27/10/2024 01:00", "27/10/2024 01:30", "27/10/2024 02:00", "27/10/2024 02:30"]
ISO = [f"2024-10-27 {t[11:]}" for t in LOCAL]
METER = "Date/Time,North Office,Depot 7\n" + "".join(
    f"{t},{1 + i},{10 + i}\n" for i, t in enumerate(LOCAL))
METER_COLUMNS = ("Date/Time=ts", "North Office=north-office", "Depot 7=depot-7")


@pytest.fixture
def warehouse(tmp_path, register) -> Path:
    warehouse = tmp_path / "w.duckdb"
    ingest_buildings(warehouse, register, FileOptions(columns=ASSET_COLUMNS))
    return warehouse


def test_a_dd_mm_yyyy_meter_export_is_refused_plainly_then_read_with_the_options(warehouse, tmp_path):
    path = write(tmp_path / "meter.csv", METER)
    with pytest.raises(PipelineError, match=r"line 2, column 'ts': '27/10/2024 00:00' is not an ISO 8601 timestamp "
                                            r".*give --time-format, e.g. '%d/%m/%Y %H:%M', or --dayfirst"):
        load_readings(path, ReadingsOptions(columns=METER_COLUMNS, timezone="Europe/London"))
    options = ReadingsOptions(columns=METER_COLUMNS, time_format="%d/%m/%Y %H:%M", timezone="Europe/London")
    summary = ingest_readings(warehouse, path, options)
    # half hours summed: 00:00 BST (23:00Z) 1+2, 01:00 BST (00:00Z) 3+4, 01:00 GMT (01:00Z) 5+6, 02:00 GMT 7+8
    assert kwh_by_hour(warehouse, "north-office") == {
        utc("2024-10-26 23:00"): 3.0, utc("2024-10-27 00:00"): 7.0, utc("2024-10-27 01:00"): 11.0,
        utc("2024-10-27 02:00"): 15.0}
    assert summary.interval_minutes == 30 and summary.buildings == 2


@pytest.mark.parametrize("layout", [{"time_format": "%d/%m/%Y %H:%M"}, {"dayfirst": True}])
def test_the_export_stores_what_the_iso_file_stores(tmp_path, layout):
    iso = write(tmp_path / "iso.csv", "ts,north-office,depot-7\n" + "".join(
        f"{t},{1 + i},{10 + i}\n" for i, t in enumerate(ISO)))
    export = write(tmp_path / "meter.csv", METER)
    expected = load_readings(iso, ReadingsOptions(timezone="Europe/London")).readings
    read = load_readings(export, ReadingsOptions(columns=METER_COLUMNS, timezone="Europe/London", **layout))
    assert read.readings.equals(expected)


def test_a_long_export_with_its_own_names_and_a_layout_that_does_not_fit(warehouse, tmp_path):
    path = write(tmp_path / "long.csv", "Meter,Date/Time,Consumption (kWh)\n"
                 "north-office,05/02/2024 13:00,4\nnorth-office,05/02/2024 14:00,5\n")
    columns = ("Meter=building_id", "Date/Time=ts", "Consumption (kWh)=kwh")
    ingest_readings(warehouse, path, ReadingsOptions(columns=columns, dayfirst=True, timezone="Europe/London"))
    assert kwh_by_hour(warehouse, "north-office") == {utc("2024-02-05 13:00"): 4.0, utc("2024-02-05 14:00"): 5.0}
    with pytest.raises(PipelineError, match=r"maps column 'Consumption \(kWh\)' to 'energy', which is not a column "
                                            r"of a long readings file; the columns are building_id, ts, kwh, value"):
        load_readings(path, ReadingsOptions(columns=(*columns[:2], "Consumption (kWh)=energy"),
                                            layout="long", dayfirst=True, timezone="Europe/London"))
    us = write(tmp_path / "us.csv", "Meter,Date/Time,Consumption (kWh)\n"
               "north-office,02/05/2024 13:00,4\nnorth-office,13/02/2024 14:00,5\n")
    with pytest.raises(PipelineError, match=r"line 3, column 'ts': '13/02/2024 14:00' does not match "
                                            r"--time-format '%m/%d/%Y %H:%M'"):
        load_readings(us, ReadingsOptions(columns=columns, time_format="%m/%d/%Y %H:%M", timezone="Europe/London"))


def test_a_month_first_file_read_with_dayfirst_is_refused_without_a_raw_warning(tmp_path, recwarn):
    """Its first date can only be month first (issue 60's probe: read month first silently,
    with pandas' own warning, source path and line, on standard error)."""
    path = write(tmp_path / "us.csv", "ts,b1\n09/30/2019 13:00,1\n10/01/2019 14:00,1\n")
    with pytest.raises(PipelineError, match=r"line 2, column 'ts': '09/30/2019 13:00' cannot be "
                                            r"written day first \(--dayfirst\): its month comes "
                                            r"first; leave out --dayfirst"):
        load_readings(path, ReadingsOptions(dayfirst=True, timezone="Europe/London"))
    assert not [w for w in recwarn if issubclass(w.category, UserWarning)]


def test_a_day_first_file_whose_later_row_is_written_otherwise_is_refused(tmp_path):
    path = write(tmp_path / "r.csv", "ts,b1\n05/02/2024 13:00,1\n2024-02-05 14:00,1\n")
    with pytest.raises(PipelineError, match=r"line 3, column 'ts': '2024-02-05 14:00' is not a timestamp written "
                                            r"like line 2's '05/02/2024 13:00' \('%d/%m/%Y %H:%M', read with "
                                            r"--dayfirst\)"):
        load_readings(path, ReadingsOptions(dayfirst=True, timezone="Europe/London"))


def test_a_weather_feed_with_its_own_names_and_layout(warehouse, tmp_path):
    path = write(tmp_path / "station.csv", "Station,Time,Temp (C),Global (W/m2),Wind (m/s),RH (%)\n"
                 "leeds,05/02/2024 13:00+00:00,4.5,120,,81\nleeds,05/02/2024 14:00+00:00,4.0,90,3.1,\n")
    columns = ("Station=site_id", "Time=ts", "Temp (C)=temperature_c", "Global (W/m2)=irradiance_wm2",
               "Wind (m/s)=wind_speed_ms", "RH (%)=humidity_pct")
    options = WeatherOptions(kind="observed", columns=columns, time_format="%d/%m/%Y %H:%M%z")
    summary = ingest_weather(warehouse, path, options)
    assert summary.line().endswith("; wind_speed_ms blank in 1 of 2 rows, humidity_pct blank in 1 of 2 rows "
                                   "(stored as missing)")
    assert [r[1:6] for r in contents(warehouse)["weather"]] == [
        (utc("2024-02-05 13:00"), 4.5, 120.0, None, 81.0), (utc("2024-02-05 14:00"), 4.0, 90.0, 3.1, None)]
    with pytest.raises(PipelineError, match=r"maps column 'Station' to 'station', which is not a column of a "
                                            r"weather file"):
        load_weather(path, WeatherOptions(kind="observed", columns=("Station=station",)))
