"""The ingest items of issue 30's hostile probe: impossible dates, decimal commas with thousands
dots, ids that cannot be typed or print as something else, a misleading delimiter message; and a
large file read in chunks giving what one read gives, its errors naming the right lines."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tasks.errors import PipelineError
from tasks.ingest import contract
from tasks.ingest.buildings_file import load_buildings
from tasks.ingest.readings_file import ReadingsOptions, load_readings
from tasks.ingest.weather_file import WeatherOptions
from tests.tasks.ingest.operator_files import (
    contents,
    ingest_buildings,
    ingest_readings,
    ingest_weather,
    kwh_by_hour,
    row_counts,
    utc,
    warehouse_with_buildings,
    write,
)

HEAD = "site_id,ts,temperature_c,irradiance_wm2,wind_speed_ms"


@pytest.fixture
def warehouse(tmp_path) -> Path:
    return warehouse_with_buildings(tmp_path / "w.duckdb", tmp_path)


def refused(warehouse: Path, call, message: str) -> str:
    """``call()`` refused with ``message`` (a regular expression), changing no table."""
    counts, before = row_counts(warehouse), contents(warehouse)
    with pytest.raises(PipelineError, match=message) as error:
        call()
    assert row_counts(warehouse) == counts and contents(warehouse) == before
    assert "\n" not in str(error.value)
    return str(error.value)


# --- dates no meter or forecast can hold -------------------------------------------------------------

def _hour(at: datetime) -> str:
    return f"{at.astimezone(UTC):%Y-%m-%dT%H:00Z}"


NOW = datetime.now(UTC)


@pytest.mark.parametrize("stamp", ["0001-01-01T00:00Z", "1900-01-01T00:00Z", "1989-12-31T23:00Z",
                                   "2099-01-05T00:00Z", "2300-06-01T00:00Z", "9999-12-27T00:00Z"])
def test_readings_dated_year_1_1900_2099_2300_or_9999_are_refused_with_file_and_line(warehouse, tmp_path, stamp):
    path = write(tmp_path / "r.csv", f"building_id,ts,kwh\nb1,2024-02-05T00:00Z,1\nb1,{stamp},1\n")
    message = refused(warehouse, lambda: ingest_readings(warehouse, path), (
        rf"line 3, column 'ts': {stamp[:10]} {stamp[11:16]} is outside the dates a file may hold, 1990-01-01 to "
        r"\d{4}-\d\d-\d\d \(readings: at most 2 days after today\)"))
    assert message.startswith(f"{path}: ")


def test_a_local_year_1_and_a_parquet_year_9999_are_refused_too(warehouse, tmp_path):
    wide = write(tmp_path / "r.csv", "ts,b1\n0001-01-01 00:00,1\n")
    refused(warehouse, lambda: ingest_readings(warehouse, wide, ReadingsOptions(timezone="Europe/London")),
            r"line 2, column 'ts': 0001-01-01 00:00 is outside the dates")
    path = tmp_path / "r.parquet"
    pq.write_table(pa.table({"ts": pa.array([datetime(2024, 2, 5, tzinfo=UTC),
                                             datetime(9999, 12, 27, tzinfo=UTC)],
                                            pa.timestamp("us", tz="UTC")),
                             "b1": [1.0, 2.0]}), str(path))
    refused(warehouse, lambda: ingest_readings(warehouse, path), r"row 2, column 'ts': 9999-12-27 00:00 is outside")


def test_readings_up_to_a_day_ahead_are_accepted(warehouse, tmp_path):
    ahead = NOW + timedelta(days=1)
    ingest_readings(warehouse, write(tmp_path / "r.csv", f"ts,b1\n{_hour(ahead)},3\n"))
    assert list(kwh_by_hour(warehouse, "b1").values()) == [3.0]


def test_weather_dates_forecasts_may_lie_three_weeks_ahead(warehouse, tmp_path):
    issued = _hour(NOW)
    ok = write(tmp_path / "f.csv", HEAD + ",issued_at\n"
               f"s1,{_hour(NOW + timedelta(days=10))},1,0,1,{issued}\n")
    assert ingest_weather(warehouse, ok, WeatherOptions(kind="forecast")).hours == 1
    late = write(tmp_path / "late.csv", HEAD + f",issued_at\ns1,{_hour(NOW + timedelta(days=30))},1,0,1,{issued}\n")
    refused(warehouse, lambda: ingest_weather(warehouse, late, WeatherOptions(kind="forecast")),
            r"line 2, column 'ts': .* is outside the dates a file may hold, .*\(a forecast: at most 21 days")
    observed = write(tmp_path / "o.csv", HEAD + "\ns1,2099-01-05T00:00Z,1,0,1\n")
    refused(warehouse, lambda: ingest_weather(warehouse, observed, WeatherOptions(kind="observed")),
            r"line 2, column 'ts': 2099-01-05 00:00 is outside .*\(an observation: at most 2 days")
    issue = write(tmp_path / "i.csv", HEAD + ",issued_at\ns1,2024-02-05T00:00Z,1,0,1,1900-01-01T00:00Z\n")
    refused(warehouse, lambda: ingest_weather(warehouse, issue, WeatherOptions(kind="forecast")),
            r"line 2, column 'issued_at': 1900-01-01 00:00 is outside")


# --- a decimal comma: the dot separates thousands ---------------------------------------------------

def test_with_a_decimal_comma_a_dot_separates_thousands(warehouse, tmp_path):
    path = write(tmp_path / "r.csv", "ts;b1;b2\n2024-02-05T00:00Z;1.234;12,5\n2024-02-05T01:00Z;1.234,5;-0\n"
                 "2024-02-05T02:00Z;123.456,25;\n")
    ingest_readings(warehouse, path, ReadingsOptions(delimiter=";", decimal=","))
    assert list(kwh_by_hour(warehouse, "b1").values()) == [1234.0, 1234.5, 123456.25]
    assert list(kwh_by_hour(warehouse, "b2").values()) == [12.5, 0.0, None]


@pytest.mark.parametrize("cell", ["1.23", "1.2345", "12.5", "1,2,3"])
def test_a_dot_that_cannot_separate_thousands_is_refused(warehouse, tmp_path, cell):
    path = write(tmp_path / "r.csv", f"ts;b1\n2024-02-05T00:00Z;{cell}\n")
    refused(warehouse, lambda: ingest_readings(warehouse, path, ReadingsOptions(delimiter=";", decimal=",")),
            rf"line 2, column 'b1': '{cell}' is not a number")


# --- ids: printable text ------------------------------------------------------------------------------

BUILDINGS = "building_id,site_id,timezone,holiday_country\n"


@pytest.mark.parametrize(("raw", "code"), [
    ("b\x001", "U+0000"), ('"b\n1"', "U+000A"), ("b\t1", "U+0009"), ("b\x1b[31m1", "U+001B"),
    ("b1\u202e2b", "U+202E (right-to-left override)"), ("b\u20661", "U+2066 (left-to-right isolate)"),
], ids=["nul", "newline", "tab", "escape", "rlo", "isolate"])
def test_building_ids_with_control_or_direction_characters_are_refused_naming_the_line(tmp_path, raw, code):
    path = write(tmp_path / "b.csv", BUILDINGS + f"ok,s1,UTC,GB\n{raw},s1,UTC,GB\n")
    with pytest.raises(PipelineError, match=rf"line 3, column 'building_id': building id .* holds {re.escape(code)}"
                       ) as error:
        load_buildings(path)
    assert "\n" not in str(error.value)


def test_site_ids_and_building_types_too(tmp_path):
    path = write(tmp_path / "b.csv", BUILDINGS.replace("\n", ",building_type\n") + "b1,s\u202e1,UTC,GB,\n")
    with pytest.raises(PipelineError, match=r"line 2, column 'site_id': site id 's\\u202e1' holds U\+202E"):
        load_buildings(path)
    path = write(tmp_path / "t.csv", BUILDINGS.replace("\n", ",building_type\n") + "b1,s1,UTC,GB,off\x07ice\n")
    with pytest.raises(PipelineError, match=r"line 2, column 'building_type': building type 'off\\x07ice'"):
        load_buildings(path)


def test_ids_in_readings_and_weather_files_are_checked_too(warehouse, tmp_path):
    wide = write(tmp_path / "w.csv", "ts,b1,b\u202e2\n2024-02-05T00:00Z,1,2\n")
    refused(warehouse, lambda: ingest_readings(warehouse, wide), r"column 3 of the header: building id 'b\\u202e2'")
    long = write(tmp_path / "l.csv", "building_id,ts,kwh\nb1,2024-02-05T00:00Z,1\nb\x1b1,2024-02-05T00:00Z,1\n")
    refused(warehouse, lambda: ingest_readings(warehouse, long), r"line 3, column 'building_id': .* U\+001B")
    feed = write(tmp_path / "o.csv", HEAD + "\ns\t1,2024-02-05T00:00Z,1,0,1\n")
    refused(warehouse, lambda: ingest_weather(warehouse, feed, WeatherOptions(kind="observed")),
            r"line 2, column 'site_id': site id 's\\t1' holds U\+0009")


def test_ids_starting_like_a_spreadsheet_formula_are_text_here(tmp_path):
    warehouse = tmp_path / "w.duckdb"
    ingest_buildings(warehouse, write(tmp_path / "b.csv", BUILDINGS + "=SUM(A1),s1,UTC,GB\n+1,s1,UTC,GB\n"
                                      "@b,s1,UTC,GB\n-b,s1,UTC,GB\n"))
    assert sorted(r[0] for r in contents(warehouse)["buildings"]) == ["+1", "-b", "=SUM(A1)", "@b"]


# --- the delimiter message ----------------------------------------------------------------------------

def test_a_comma_separated_file_read_with_another_delimiter_is_not_told_to_become_one(warehouse, tmp_path):
    path = write(tmp_path / "r.csv", "ts,b1\n2024-02-05T00:00Z,1\n")
    message = refused(warehouse, lambda: ingest_readings(warehouse, path, ReadingsOptions(delimiter=";")),
                      r"separated by ',' \(a comma-separated CSV\), not ';'; leave --delimiter out")
    assert "save it as" not in message
    semicolons = write(tmp_path / "s.csv", "ts;b1\n2024-02-05T00:00Z;1,5\n")
    refused(warehouse, lambda: ingest_readings(warehouse, semicolons),
            r"give --delimiter ';' and --decimal ',', or save it as a comma-separated CSV")


# --- a file read in chunks -------------------------------------------------------------------------------

@pytest.fixture
def small_chunks(monkeypatch):
    """Chunks of about a dozen CSV lines and of 7 Parquet rows."""
    monkeypatch.setattr(contract, "CHUNK_BYTES", 256)
    monkeypatch.setattr(contract, "CHUNK_ROWS", 7)


def _long_file(tmp_path: Path, name: str = "long.csv") -> Path:
    times = pd.date_range("2024-10-26 12:00", periods=40, freq="h")  # local, over the clock change
    local = [f"{t:%Y-%m-%d %H:%M}" for t in times]
    local.insert(local.index("2024-10-27 02:00"), "2024-10-27 01:00")  # the repeated hour, in file order
    return write(tmp_path / name, "building_id,ts,kwh\n" + "".join(
        f"{b},{t},{i % 7 + (b == 'b2')}\n" for b in ("b1", "b2") for i, t in enumerate(local)))


def test_chunks_give_what_one_read_gives(tmp_path, monkeypatch):
    path = _long_file(tmp_path)
    whole = load_readings(path, ReadingsOptions(timezone="Europe/London")).readings
    monkeypatch.setattr(contract, "CHUNK_BYTES", 256)
    chunks = list(contract.open_file(path).chunks())
    assert len(chunks) >= 6 and [c.at.first_row for c in chunks[:2]] == [0, chunks[0].rows]
    chunked = load_readings(path, ReadingsOptions(timezone="Europe/London")).readings
    assert chunked.equals(whole) and whole.num_rows == 82
    b1 = whole.to_pandas().query("building_id == 'b1'")
    assert list(b1["ts"].dt.strftime("%H:%M")[13:16]) == ["00:00", "01:00", "02:00"]  # 01:00 BST, 01:00 GMT


def test_errors_in_a_later_chunk_name_their_line(tmp_path, small_chunks, warehouse):
    text = _long_file(tmp_path).read_text().splitlines()
    for line, cell, message in ((70, "x", r"line 70, column 'kwh': 'x' is not a number"),
                                (75, "-3", r"line 75, column 'kwh': -3 is not a finite value")):
        bad = text.copy()
        bad[line - 1] = ",".join(bad[line - 1].split(",")[:2] + [cell])
        path = write(tmp_path / "bad.csv", "\n".join(bad) + "\n")
        refused(warehouse, lambda p=path: ingest_readings(warehouse, p, ReadingsOptions(timezone="Europe/London")),
                message)
    repeated = write(tmp_path / "dup.csv", "\n".join(text + [text[3]]) + "\n")
    refused(warehouse, lambda: ingest_readings(warehouse, repeated, ReadingsOptions(timezone="Europe/London")),
            rf"line 4 and line {len(text) + 1}, column 'ts': building 'b1' at .* appears twice")
    mixed = write(tmp_path / "mixed.csv", "\n".join(text[:60] + ["b2,2024-10-28T01:00Z,1"]) + "\n")
    refused(warehouse, lambda: ingest_readings(warehouse, mixed, ReadingsOptions(timezone="Europe/London")),
            r"line 61, column 'ts': '2024-10-28T01:00Z' has UTC offset, unlike line 2")


def test_parquet_batches_name_their_rows(tmp_path, small_chunks, warehouse):
    ts = [f"2024-02-05T{h:02d}:00Z" for h in range(20)]
    values = [1.0] * 20
    values[16] = -1.0
    path = tmp_path / "r.parquet"
    pq.write_table(pa.table({"ts": ts, "b1": values}), str(path))
    refused(warehouse, lambda: ingest_readings(warehouse, path), r"row 17, column 'b1': -1 is not")
    values[16] = 2.0
    pq.write_table(pa.table({"ts": ts, "b1": values}), str(path))
    ingest_readings(warehouse, path)
    assert kwh_by_hour(warehouse, "b1")[utc("2024-02-05 16:00")] == 2.0
