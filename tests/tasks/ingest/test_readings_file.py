"""Meter exports: hand-computed energies, clock changes, layouts and formats that must agree,
idempotent and incremental writes, and every bad input refused with nothing changed."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from pydantic import ValidationError

from tasks.errors import PipelineError, UnknownBuildingError
from tasks.ingest.readings_file import ReadingsOptions, load_readings
from tests.tasks.ingest.operator_files import (
    contents,
    csv_to_parquet,
    hours,
    ingest_readings,
    kwh_by_hour,
    readings,
    row_counts,
    utc,
    warehouse_with_buildings,
    write,
)

LONDON = ReadingsOptions(timezone="Europe/London")


@pytest.fixture
def warehouse(tmp_path) -> Path:
    return warehouse_with_buildings(tmp_path / "w.duckdb", tmp_path)


def ingest(warehouse: Path, tmp_path: Path, text: str, name: str = "r.csv", **options):
    return ingest_readings(warehouse, write(tmp_path / name, text), ReadingsOptions(**options))


# --- values, units, sub-hourly sums --------------------------------------------------------------

def test_quarter_hours_of_kw_are_summed_to_kwh(warehouse, tmp_path):
    text = "building_id,ts,kw\n".replace("kw", "value") + "".join(
        f"b1,2024-01-15T10:{m:02d}:00Z,{v}\n" for m, v in zip((0, 15, 30, 45), (10, 20, 30, 40), strict=True))
    summary = ingest(warehouse, tmp_path, text, unit="kW")
    # 10, 20, 30, 40 kW for a quarter of an hour each: 2.5 + 5 + 7.5 + 10 = 25 kWh
    assert kwh_by_hour(warehouse, "b1") == {utc("2024-01-15 10:00"): 25.0}
    assert (summary.readings, summary.interval_minutes, summary.partial_hours) == (1, 15, 0)


def test_half_hours_of_wh_a_blank_half_hour_missing_and_an_absent_one_not_written(warehouse, tmp_path):
    ingest(warehouse, tmp_path, "building_id,ts,kwh\nb1,2024-01-15T11:00Z,4\n", name="stored.csv")
    text = ("building_id,ts,kwh\n"
            "b1,2024-01-15T10:00Z,1200\nb1,2024-01-15T10:30Z,1300\n"   # 2.5 kWh
            "b1,2024-01-15T11:00Z,1000\n"                              # 11:30 absent: 11:00 kept
            "b1,2024-01-15T12:00Z,1000\nb1,2024-01-15T12:30Z,\n"       # 12:30 blank
            "b1,2024-01-15T13:00Z,\nb1,2024-01-15T13:30Z,\n")          # all blank: just missing
    summary = ingest(warehouse, tmp_path, text, unit="Wh")
    assert kwh_by_hour(warehouse, "b1") == {utc("2024-01-15 10:00"): 2.5, utc("2024-01-15 11:00"): 4.0,
                                            utc("2024-01-15 12:00"): None, utc("2024-01-15 13:00"): None}
    assert (summary.readings, summary.missing_readings, summary.partial_hours, summary.incomplete_hours) == (
        3, 2, 1, 1)
    assert ("1 with a blank 30-minute value stored as missing; 1 with a 30-minute interval absent from "
            "the file not written") in summary.line()


def test_zero_is_a_reading_and_a_blank_is_missing(warehouse, tmp_path):
    ingest(warehouse, tmp_path, "building_id,ts,kwh\nb1,2024-01-15T10:00Z,0\nb1,2024-01-15T11:00Z,\n")
    assert kwh_by_hour(warehouse, "b1") == {utc("2024-01-15 10:00"): 0.0, utc("2024-01-15 11:00"): None}


def test_implausible_values_can_be_stored_as_missing_and_counted(warehouse, tmp_path):
    # half of b1's values: the most --implausible missing stores as missing (EMPTIED_SHARE)
    text = ("ts,b1,b2\n2024-01-15T10:00Z,-4,1\n2024-01-15T11:00Z,inf,2\n2024-01-15T12:00Z,3,3\n"
            "2024-01-15T13:00Z,4,4\n")
    summary = ingest(warehouse, tmp_path, text, implausible="missing")
    assert kwh_by_hour(warehouse, "b1") == {utc("2024-01-15 10:00"): None, utc("2024-01-15 11:00"): None,
                                            utc("2024-01-15 12:00"): 3.0, utc("2024-01-15 13:00"): 4.0}
    assert summary.implausible_values == 2 and "2 implausible value(s) stored as missing" in summary.line()


# --- clock changes, in local wall-clock time -------------------------------------------------------

def test_both_clock_changes_of_a_london_year(warehouse, tmp_path):
    text = ("ts,b1\n"
            "2024-03-31 00:00,1\n2024-03-31 02:00,2\n2024-03-31 03:00,3\n"           # spring forward
            "2024-10-27 00:00,4\n2024-10-27 01:00,5\n2024-10-27 01:00,6\n2024-10-27 02:00,7\n")
    ingest(warehouse, tmp_path, text, timezone="Europe/London")
    assert kwh_by_hour(warehouse, "b1") == {
        utc("2024-03-31 00:00"): 1, utc("2024-03-31 01:00"): 2, utc("2024-03-31 02:00"): 3,
        utc("2024-10-26 23:00"): 4, utc("2024-10-27 00:00"): 5, utc("2024-10-27 01:00"): 6,
        utc("2024-10-27 02:00"): 7,
    }


def test_quarter_hours_over_the_fall_back_make_two_hours(warehouse, tmp_path):
    rows = [f"2024-10-27 01:{m:02d},{v}" for v, m in enumerate((0, 15, 30, 45, 0, 15, 30, 45), 1)]
    ingest(warehouse, tmp_path, "ts,b1\n" + "\n".join(rows) + "\n", timezone="Europe/London")
    assert kwh_by_hour(warehouse, "b1") == {utc("2024-10-27 00:00"): 1 + 2 + 3 + 4,
                                            utc("2024-10-27 01:00"): 5 + 6 + 7 + 8}


# --- one set of hours, four files --------------------------------------------------------------

LONG = ("building_id,ts,kwh\n"
        "b1,2024-02-05T00:00Z,1.5\nb2,2024-02-05T00:00Z,10\n"
        "b1,2024-02-05T01:00Z,2.5\nb2,2024-02-05T01:00Z,\n"
        "b1,2024-02-05T02:00Z,3.5\nb2,2024-02-05T02:00Z,12\n")
WIDE = ("ts,b1,b2\n"
        "2024-02-05T00:00Z,1.5,10\n2024-02-05T01:00Z,2.5,\n2024-02-05T02:00Z,3.5,12\n")


@pytest.mark.parametrize("form", ["long.csv", "wide.csv", "long.parquet", "wide.parquet"])
def test_long_wide_csv_and_parquet_store_identical_tables(tmp_path, form):
    layout, kind = form.split(".")
    tables = []
    for name, text in (("long", LONG), (layout, LONG if layout == "long" else WIDE)):
        folder = tmp_path / f"{name}-{len(tables)}"
        folder.mkdir()
        warehouse = warehouse_with_buildings(folder / "w.duckdb", folder)
        path = write(folder / f"{name}.csv", text)
        if kind == "parquet" and len(tables) == 1:
            path = csv_to_parquet(path)
        ingest_readings(warehouse, path)
        tables.append(contents(warehouse)["meter_readings"])
    assert tables[0] == tables[1]
    assert len(tables[0]) == 6 and sum(v is None for *_, v in tables[0]) == 1


def test_layout_can_be_forced_and_is_refused_when_it_does_not_fit(tmp_path, warehouse):
    path = write(tmp_path / "r.csv", WIDE)
    assert load_readings(path, ReadingsOptions(layout="wide")).readings.num_rows == 6
    with pytest.raises(PipelineError, match=r"missing required column\(s\) 'building_id'"):
        load_readings(path, ReadingsOptions(layout="long"))


def test_a_long_file_has_one_value_column_kwh_or_value(tmp_path):
    both = write(tmp_path / "both.csv", "building_id,ts,kwh,value\nb1,2024-02-05T00:00Z,1,1\n")
    with pytest.raises(PipelineError, match="a long readings file needs exactly one kwh column, "
                       "'kwh' or 'value'"):
        load_readings(both)
    named_value = write(tmp_path / "value.csv", "building_id,ts,value\nb1,2024-02-05T00:00Z,2\n")
    assert load_readings(named_value).readings["kwh"].to_pylist() == [2.0]


# --- incremental ----------------------------------------------------------------------------------

def test_reingesting_the_same_file_changes_nothing(warehouse, tmp_path):
    ingest(warehouse, tmp_path, LONG)
    first = contents(warehouse)
    summary = ingest(warehouse, tmp_path, LONG)
    assert contents(warehouse) == first
    assert (summary.readings, summary.replaced) == (6, 6)


FIX = "building_id,ts,kwh\nb1,2024-02-05T10:00Z,7\nb1,2024-02-05T11:00Z,\nb1,2024-02-05T13:00Z,9\n"
"""b1 from 10:00 to 13:00: 11:00 blank, 12:00 absent; b2 not in the file."""


@pytest.fixture
def two_days(warehouse, tmp_path):
    week = "ts,b1,b2\n" + "".join(f"{t:%Y-%m-%dT%H:%MZ},1,2\n" for t in hours("2024-02-05 00:00", 48))
    ingest(warehouse, tmp_path, week, name="week.csv")
    return warehouse


def test_an_overlapping_file_changes_exactly_its_hours(two_days, tmp_path):
    summary = ingest(two_days, tmp_path, FIX, name="fix.csv")
    b1 = kwh_by_hour(two_days, "b1")
    assert len(b1) == 48  # 12:00 is not in the file: it keeps its reading
    assert [b1.get(utc(f"2024-02-05 {h:02d}:00")) for h in (9, 10, 11, 12, 13, 14)] == [1, 7, None, 1, 9, 1]
    assert set(kwh_by_hour(two_days, "b2").values()) == {2} and len(kwh_by_hour(two_days, "b2")) == 48
    assert (summary.replaced, summary.removed) == (3, None) and "removed" not in summary.line()


def test_replace_range_replaces_each_buildings_range_and_says_how_many_hours_it_removed(two_days, tmp_path):
    summary = ingest(two_days, tmp_path, FIX, name="fix.csv", replace_range=True)
    b1 = kwh_by_hour(two_days, "b1")
    assert len(b1) == 47  # 12:00 lies in the file's range: removed
    assert [b1.get(utc(f"2024-02-05 {h:02d}:00"), "absent") for h in (9, 10, 11, 12, 13, 14)] == [
        1, 7, None, "absent", 9, 1]
    assert len(kwh_by_hour(two_days, "b2")) == 48
    assert (summary.replaced, summary.removed) == (3, 1)
    assert summary.line().endswith("replacing 3 stored; removed 1 stored hour(s) of the file's range that it "
                                   "does not hold (--replace-range)")


# --- bad inputs: one error each, every table unchanged -----------------------------------------

H = "building_id,ts,kwh\n"
BAD = [
    ("duplicate", H + "b1,2024-02-05T00:00Z,1\nb2,2024-02-05T00:00Z,1\nb1,2024-02-05T00:00Z,2\n", {},
     r"line 2 and line 4, column 'ts': building 'b1' at 2024-02-05 00:00Z appears twice"),
    ("duplicate-offsets", H + "b1,2024-02-05T00:00Z,1\nb1,2024-02-05T01:00+01:00,2\n", {},
     r"line 2 and line 3, column 'ts': building 'b1' at 2024-02-05 00:00Z appears twice"),
    ("unparseable", H + "b1,2024-02-05T00:00Z,1\nb1,2024-02-30T01:00Z,1\n", {},
     r"line 3, column 'ts': '2024-02-30T01:00Z' is not an ISO 8601 timestamp"),
    ("off-the-hour", H + "b1,2024-02-05T09:00Z,1\nb1,2024-02-05T10:00Z,1\nb1,2024-02-05T10:07Z,1\n"
     "b1,2024-02-05T11:00Z,1\n", {}, r"line 4, column 'ts': 2024-02-05 10:07:00Z is not the start of an hour"),
    ("odd-interval", H + "b1,2024-02-05T00:00Z,1\nb1,2024-02-05T00:20Z,1\nb1,2024-02-05T00:40Z,1\n", {},
     r"mostly 20 minutes apart; readings every 15, 30 or 60 minutes"),
    ("negative", H + "b1,2024-02-05T00:00Z,1\nb1,2024-02-05T01:00Z,-5\n", {},
     r"line 3, column 'kwh': -5 is not a finite value from 0 to 1e\+06 kWh"),
    ("negative-wh", "ts,b1\n2024-02-05T00:00Z,-500\n", {"unit": "Wh"},
     r"line 2, column 'b1': -500 \(-0.5 kWh\) is not a finite value"),
    ("infinite", H + "b1,2024-02-05T00:00Z,inf\n", {}, r"line 2, column 'kwh': inf is not a finite"),
    ("nan", "ts,b1,b2\n2024-02-05T00:00Z,1,nan\n", {}, r"line 2, column 'b2': nan is not a finite"),
    ("not-a-number", H + "b1,2024-02-05T00:00Z,12 kWh\n", {}, r"line 2, column 'kwh': '12 kWh' is not a number"),
    ("unknown-buildings", H + "b1,2024-02-05T00:00Z,1\nzz,2024-02-05T00:00Z,1\nyy,2024-02-05T00:00Z,1\n",
     {}, r"2 building id\(s\) not in the buildings table: 'yy', 'zz'; ingest them first"),
    ("wide-duplicate-column", "ts,b1,b2,b1\n2024-02-05T00:00Z,1,2,3\n", {},
     r"column 'b1' appears more than once in the header \(column 4\)"),
    ("nonexistent-hour", "ts,b1\n2024-03-31 00:00,1\n2024-03-31 01:00,1\n2024-03-31 02:00,1\n",
     {"timezone": "Europe/London"}, r"line 3, column 'ts': 2024-03-31 01:00 does not exist in Europe/London"),
    ("ambiguous-once", "ts,b1\n2024-10-27 00:00,1\n2024-10-27 01:00,1\n2024-10-27 02:00,1\n",
     {"timezone": "Europe/London"}, r"line 3, column 'ts': 2024-10-27 01:00 occurs twice"),
    ("no-zone", "ts,b1\n2024-02-05 00:00,1\n", {}, r"line 2, column 'ts': .* has no UTC offset; give --timezone"),
    ("empty-file", "", {}, r"empty file, no header and no rows"),
    ("header-only", H, {}, r"empty file, a header but no data rows"),
    ("missing-column", "building_id,kwh\nb1,1\n", {}, r"missing required column\(s\) 'ts'"),
    ("long-without-id", "ts,kwh\n2024-02-05T00:00Z,1\n", {}, r"a 'kwh' column but no 'building_id' column"),
    ("extra-column", "building_id,ts,kwh,note\nb1,2024-02-05T00:00Z,1,x\n", {}, r"unexpected column\(s\) 'note'"),
    ("blank-id", H + ",2024-02-05T00:00Z,1\n", {}, r"line 2, column 'building_id': empty cell"),
    ("ragged-row", H + "b1,2024-02-05T00:00Z,1\nb1,2024-02-05T01:00Z,1,5\n", {},
     r"line 3: 4 cell\(s\), but the header has 3 columns"),
    ("latin-1", (H + "b\xe9,2024-02-05T00:00Z,1\n").encode("latin-1"), {},
     r"line 2 is not utf-8 text \(byte 0xe9 at character 2\); save the file as UTF-8"),
]


@pytest.mark.parametrize(("text", "options", "message"), [c[1:] for c in BAD], ids=[c[0] for c in BAD])
def test_a_bad_file_is_refused_and_changes_no_table(warehouse, tmp_path, text, options, message):
    ingest(warehouse, tmp_path, LONG, name="before.csv")
    counts, before = row_counts(warehouse), contents(warehouse)
    path = tmp_path / "bad.csv"
    path.write_bytes(text) if isinstance(text, bytes) else path.write_text(text)
    with pytest.raises(PipelineError, match=message) as raised:
        ingest_readings(warehouse, path, ReadingsOptions(**options))
    assert str(raised.value).startswith(str(path)) and "\n" not in str(raised.value)
    assert row_counts(warehouse) == counts and contents(warehouse) == before


def test_unknown_buildings_are_a_lookup_error(warehouse, tmp_path):
    with pytest.raises(UnknownBuildingError):
        ingest(warehouse, tmp_path, "ts,nobody\n2024-02-05T00:00Z,1\n")


def test_parquet_errors_name_rows(warehouse, tmp_path):
    path = csv_to_parquet(write(tmp_path / "r.csv", H + "b1,2024-02-05T00:00Z,1\nb1,2024-02-05T01:00Z,-1\n"))
    with pytest.raises(PipelineError, match=r"r.parquet: row 2, column 'kwh': -1 is not"):
        ingest_readings(warehouse, path)


@pytest.mark.parametrize(("options", "field"), [({"unit": "MWh"}, "unit"), ({"timezone": "Mars/Olympus"}, "timezone"),
                                                ({"layout": "diagonal"}, "layout")])
def test_options_that_do_not_exist_are_refused(options, field):
    with pytest.raises(ValidationError, match=field):
        ReadingsOptions(**options)


def test_an_unknown_file_kind_and_a_missing_file(warehouse, tmp_path):
    with pytest.raises(PipelineError, match=r"unknown file kind '.xlsx'"):
        ingest_readings(warehouse, write(tmp_path / "r.xlsx", "x"))
    with pytest.raises(PipelineError, match=r"file does not exist: .*nothing.csv"):
        ingest_readings(warehouse, tmp_path / "nothing.csv")
    assert len(readings(warehouse)) == 0


def test_a_parquet_file_with_a_repeated_column_is_refused(warehouse, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "wide.parquet"
    pq.write_table(pa.Table.from_arrays([pa.array(["2024-02-05T00:00Z"]), pa.array([1.0]), pa.array([2.0])],
                                        names=["ts", "b1", "b1"]), str(path))
    before = row_counts(warehouse)
    with pytest.raises(PipelineError, match=r"column 'b1' appears more than once in the header \(column 3\)"):
        ingest_readings(warehouse, path)
    assert row_counts(warehouse) == before


def test_a_file_written_in_slices_of_whole_buildings_writes_what_one_statement_writes(tmp_path, monkeypatch):
    import tasks.ingest.readings_file as readings_file

    week = "ts,b1,b2,b3\n" + "".join(f"{t:%Y-%m-%dT%H:%MZ},1,2,3\n" for t in hours("2024-02-05 00:00", 48))
    fix = ("building_id,ts,kwh\n" + "".join(f"{b},{t:%Y-%m-%dT%H:%MZ},{v}\n" for b in ("b1", "b2", "b3")
                                             for v, t in enumerate(hours("2024-02-05 10:00", 5)))
           ).replace("b2,2024-02-05T12:00Z,2\n", "")
    results = []
    for rows in (1_000_000, 4):  # one statement; then b1, b2 and b3 each alone (5, 4 and 5 hours)
        monkeypatch.setattr(readings_file, "WRITE_ROWS", rows)
        folder = tmp_path / str(rows)
        folder.mkdir()
        warehouse = warehouse_with_buildings(folder / "w.duckdb", folder)
        ingest(warehouse, folder, week, name="week.csv")
        summary = ingest(warehouse, folder, fix, name="fix.csv", replace_range=True)
        results.append((contents(warehouse), summary.readings, summary.replaced, summary.removed))
    assert results[0] == results[1]
    assert results[0][1:] == (14, 14, 1)  # b2's 12:00 lies in its range: removed


def test_registers_read_at_different_intervals_are_differenced_and_summed_by_their_own(
        warehouse, tmp_path):
    """Two cumulative registers in one file, b1 read every 15 minutes and b2 every hour: each
    interval's energy is the difference of its own readings, and the summary names both."""
    start = pd.Timestamp("2024-03-04", tz="UTC")
    quarters = [f"b1,{start + pd.Timedelta(minutes=15 * q):%Y-%m-%dT%H:%MZ},{1000 + 0.5 * q}"
                for q in range(97)]
    hourly = [f"b2,{start + pd.Timedelta(hours=h):%Y-%m-%dT%H:%MZ},{5000 + 3 * h}"
              for h in range(25)]
    text = "building_id,ts,kwh\n" + "\n".join(quarters + hourly) + "\n"
    summary = ingest(warehouse, tmp_path, text, unit="register", register_unit="kWh")
    assert set(kwh_by_hour(warehouse, "b1").values()) == {2.0}  # four quarters of 0.5 kWh
    assert set(kwh_by_hour(warehouse, "b2").values()) == {3.0}
    assert summary.readings == 48 and summary.registers.left_out == 2  # each one's last
    assert "from 1 building(s)' 15-minute, 1 building(s)' 60-minute readings" in summary.line()


def test_a_file_mixing_a_15_minute_building_and_an_hourly_one_sums_each_by_its_own(tmp_path):
    """Summed to hours by the file's one interval, every hour of the other building was left
    out as incomplete, then the file was refused (issue 60's probe): an MDM export holds 15-minute
    meters beside hourly ones, so each building is summed by its own interval."""
    lines = ["building_id,ts,kwh"]
    lines += [f"quarter,2024-03-04T{h // 4:02d}:{15 * (h % 4):02d}:00Z,{1.0 + h % 4}"
              for h in range(96)]
    lines += [f"hourly,2024-03-04T{h:02d}:00:00Z,{4.0 + h}" for h in range(24)]
    path = tmp_path / "mixed.csv"
    path.write_text("\n".join(lines) + "\n")
    batch = load_readings(path)
    hours = batch.readings.to_pandas().set_index(["building_id", "ts"])["kwh"]
    assert (batch.incomplete_hours, batch.partial_hours, len(hours)) == (0, 0, 48)
    assert (hours.loc["quarter"] == 1 + 2 + 3 + 4).all()  # four quarters each
    assert hours.loc["hourly"].tolist() == [4.0 + h for h in range(24)]
    assert batch.building_intervals == ((15, 1), (60, 1))
    # only the quarter-hour building's intervals are sub-hourly readings
    assert set(batch.sub_hourly.column("building_id").to_pylist()) == {"quarter"}
    # in kW each interval's energy is its power times its own length
    kw = load_readings(path, ReadingsOptions(unit="kW")).readings.to_pandas()
    kw = kw.set_index(["building_id", "ts"])["kwh"]
    assert (kw.loc["quarter"] == (1 + 2 + 3 + 4) / 4).all()
    assert kw.loc["hourly"].tolist() == [4.0 + h for h in range(24)]
    # an hourly reading off the grid is still refused, naming its building's interval
    path.write_text("\n".join(lines + ["hourly,2024-03-05T00:15:00Z,4.0"]) + "\n")
    with pytest.raises(PipelineError, match=r"not the start of an hour \(its building's"):
        load_readings(path)
    # five hourly readings are too few to be another interval: they are hours with quarters
    # absent from the file, named as such
    gappy = lines[:97] + [f"gappy,2024-03-04T{h:02d}:00:00Z,4.0" for h in range(5)]
    path.write_text("\n".join(gappy) + "\n")
    batch = load_readings(path)
    assert (batch.readings.num_rows, batch.incomplete_hours) == (24, 5)
