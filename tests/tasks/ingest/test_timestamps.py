"""Timestamps to UTC instants: offsets, local wall-clock time and both clock changes of
Europe/London, checked against UTC instants written by hand."""

from __future__ import annotations

from datetime import date, datetime

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pydantic import ValidationError

from tasks.ingest.contract import open_file
from tasks.ingest.errors import MalformedSourceError
from tasks.ingest.synthetic_fleet import FleetSpec
from tasks.ingest.timestamps import LocalTimeOptions, TimeReader
from tests.tasks.ingest.operator_files import utc, write

LONDON = "Europe/London"


def utc_instants(source, column, *, timezone, ambiguous="refuse", series=None) -> pd.Series:
    """``column`` of a file's ``source`` as UTC instants, as a reader reads it."""
    reader = TimeReader(column, timezone=timezone)
    return reader.utc(source.at, reader.read(source), ambiguous, series)


def instants(tmp_path, cells: list[str], series: list[str] | None = None, **options) -> list[datetime]:
    lines = ["ts,id"] + [f"{c},{s}" for c, s in zip(cells, series or ["a"] * len(cells), strict=True)]
    source = next(open_file(write(tmp_path / "t.csv", "\n".join(lines) + "\n")).chunks())
    ids = pd.Series(source.trimmed("id").to_pylist())
    result = utc_instants(source, "ts", series=ids, **options)
    assert str(result.dtype) == "datetime64[us, UTC]"
    return [t.to_pydatetime() for t in result]


def test_offsets_and_z_name_their_instants(tmp_path):
    assert instants(tmp_path, ["2024-03-31T01:00:00+01:00", "2024-03-31T00:00:00Z",
                               "2024-06-01 12:30+0200", "2024-01-01T00:00:00-05:00"],
                    timezone=None) == [utc("2024-03-31 00:00"), utc("2024-03-31 00:00"),
                                       utc("2024-06-01 10:30"), utc("2024-01-01 05:00")]


def test_spring_forward_in_london(tmp_path):
    # 2024-03-31: 01:00 GMT becomes 02:00 BST; local 00:00 is 00:00Z, 02:00 is 01:00Z
    assert instants(tmp_path, ["2024-03-31 00:00", "2024-03-31 02:00", "2024-03-31 03:00"],
                    timezone=LONDON) == [utc("2024-03-31 00:00"), utc("2024-03-31 01:00"),
                                         utc("2024-03-31 02:00")]


def test_a_skipped_local_time_is_refused_naming_the_line(tmp_path):
    with pytest.raises(MalformedSourceError, match=r"line 3, column 'ts': 2024-03-31 01:30 does "
                       r"not exist in Europe/London \(the clocks go forward"):
        instants(tmp_path, ["2024-03-31 00:30", "2024-03-31 01:30"], timezone=LONDON)


def test_fall_back_hour_twice_in_order_is_summer_then_standard_time(tmp_path):
    # 2024-10-27: 02:00 BST becomes 01:00 GMT; local 01:00 happens at 00:00Z and at 01:00Z
    got = instants(tmp_path, ["2024-10-27 00:00", "2024-10-27 01:00", "2024-10-27 01:00",
                              "2024-10-27 02:00"], timezone=LONDON)
    assert got == [utc("2024-10-26 23:00"), utc("2024-10-27 00:00"), utc("2024-10-27 01:00"),
                   utc("2024-10-27 02:00")]


def test_a_file_written_newest_first_reads_its_repeated_hour_the_other_way_round(tmp_path):
    """Many exports list the newest reading first: the first 01:00 met is then the later one
    (issue 60: the two hours' readings were stored swapped)."""
    got = instants(tmp_path, ["2024-10-27 02:00", "2024-10-27 01:00", "2024-10-27 01:00",
                              "2024-10-27 00:00"], timezone=LONDON)
    assert got == [utc("2024-10-27 02:00"), utc("2024-10-27 01:00"), utc("2024-10-27 00:00"),
                   utc("2024-10-26 23:00")]
    # each series by its own order: a newest first, b oldest first
    got = instants(tmp_path, ["2024-10-27 02:00", "2024-10-27 00:00", "2024-10-27 01:00",
                              "2024-10-27 01:00", "2024-10-27 01:00", "2024-10-27 01:00",
                              "2024-10-27 00:00", "2024-10-27 02:00"],
                   series=["a", "b", "a", "b", "a", "b", "a", "b"], timezone=LONDON)
    assert got == [utc("2024-10-27 02:00"), utc("2024-10-26 23:00"), utc("2024-10-27 01:00"),
                   utc("2024-10-27 00:00"), utc("2024-10-27 00:00"), utc("2024-10-27 01:00"),
                   utc("2024-10-26 23:00"), utc("2024-10-27 02:00")]


def test_fall_back_pairs_are_counted_per_series(tmp_path):
    got = instants(tmp_path, ["2024-10-27 01:30", "2024-10-27 01:30", "2024-10-27 01:30",
                              "2024-10-27 01:30"], series=["a", "b", "a", "b"], timezone=LONDON)
    assert got == [utc("2024-10-27 00:30"), utc("2024-10-27 00:30"), utc("2024-10-27 01:30"),
                   utc("2024-10-27 01:30")]


def test_an_ambiguous_time_appearing_once_needs_a_choice(tmp_path):
    cells = ["2024-10-27 00:00", "2024-10-27 01:00"]
    with pytest.raises(MalformedSourceError, match=r"line 3, column 'ts': 2024-10-27 01:00 occurs "
                       r"twice in Europe/London .* appears once for series 'a'; give --ambiguous"):
        instants(tmp_path, cells, timezone=LONDON)
    assert instants(tmp_path, cells, timezone=LONDON, ambiguous="earliest")[1] == utc("2024-10-27 00:00")
    assert instants(tmp_path, cells, timezone=LONDON, ambiguous="latest")[1] == utc("2024-10-27 01:00")


@pytest.mark.parametrize(("cells", "options", "message"), [
    (["2024-01-01 00:00"], {"timezone": None}, r"line 2, column 'ts': 2024-01-01 00:00:00 has no UTC offset; give --timezone"),
    (["2024-01-01T00:00Z"], {"timezone": LONDON}, r"line 2, column 'ts': timestamps with a UTC offset .* leave it out"),
    (["2024-01-01T00:00Z", "2024-01-01 01:00"], {"timezone": None}, r"line 3, column 'ts': '2024-01-01 01:00' has no UTC offset, unlike line 2"),
    (["2024-01-01T00:00Z", "2024-01-01T25:00Z"], {"timezone": None}, r"line 3, column 'ts': '2024-01-01T25:00Z' is not an ISO 8601"),
    (["2024-01-01 00:00", "2024-13-01 00:00"], {"timezone": LONDON}, r"line 3, column 'ts': '2024-13-01 00:00' is not an ISO 8601"),
    (["2024-01-01T00:00Z", ""], {"timezone": None}, r"line 3, column 'ts': empty cell"),
], ids=["naive-without-zone", "zone-with-offsets", "mixed", "unreadable", "impossible-month", "blank"])
def test_bad_timestamps_name_line_and_column(tmp_path, cells, options, message):
    with pytest.raises(MalformedSourceError, match=message):
        instants(tmp_path, cells, **options)


def test_parquet_timestamp_columns_with_and_without_a_zone(tmp_path):
    aware = pa.array([pd.Timestamp("2024-10-27 00:00Z"), pd.Timestamp("2024-10-27 01:00Z")],
                     pa.timestamp("us", tz="UTC"))
    naive = pa.array([datetime(2024, 10, 27, 1), datetime(2024, 10, 27, 1)], pa.timestamp("us"))
    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"aware": aware, "naive": naive}), str(path))
    source = next(open_file(path).chunks())
    assert list(utc_instants(source, "aware", timezone=None)) == [pd.Timestamp("2024-10-27 00:00Z"),
                                                                  pd.Timestamp("2024-10-27 01:00Z")]
    assert list(utc_instants(source, "naive", timezone=LONDON)) == [pd.Timestamp("2024-10-27 00:00Z"),
                                                                    pd.Timestamp("2024-10-27 01:00Z")]
    with pytest.raises(MalformedSourceError, match="row 1, column 'naive'"):
        utc_instants(source, "naive", timezone=None)


@pytest.mark.parametrize("make", [
    lambda zone: LocalTimeOptions(timezone=zone),
    lambda zone: FleetSpec(buildings=1, start=date(2024, 1, 1), weeks=1, timezone=zone),
], ids=["readings-and-weather-options", "synthetic-fleet"])
def test_one_zone_type_checks_every_zone_option(make):
    assert make(LONDON).timezone == LONDON
    with pytest.raises(ValidationError, match=r"unknown time zone 'Europe/Londres' \(not an IANA "
                       r"zone, e.g. Europe/London\)"):
        make("Europe/Londres")
