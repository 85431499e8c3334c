"""Buildings files: rows as stored (a declared floor area too), updates on re-ingest, and every
bad row refused."""

from __future__ import annotations

import pytest

from tasks.errors import PipelineError
from tests.tasks.ingest.operator_files import (
    BUILDINGS_CSV,
    contents,
    csv_to_parquet,
    ingest_buildings,
    row_counts,
    warehouse_with_buildings,
    write,
)


def test_rows_as_stored_with_the_file_name_as_source(tmp_path):
    warehouse = warehouse_with_buildings(tmp_path / "w.duckdb", tmp_path)
    assert contents(warehouse)["buildings"] == [
        ("b1", "s1", "Europe/London", "GB", "ENG", "office", "buildings.csv", None),
        ("b2", "s1", "Europe/London", "GB", "ENG", None, "buildings.csv", None),
        ("b3", "s2", "America/New_York", "US", "NY", "school", "buildings.csv", None),
    ]


def test_reingesting_updates_rows_and_leaves_the_others(tmp_path):
    warehouse = warehouse_with_buildings(tmp_path / "w.duckdb", tmp_path)
    summary = ingest_buildings(warehouse, write(tmp_path / "more.csv",
                               "building_id,site_id,timezone,holiday_country\n"
                               "b2,s3,Europe/Paris,FR\nb4,s3,Europe/Paris,FR\n"))
    assert (summary.new, summary.updated) == (1, 1)
    rows = {r[0]: r for r in contents(warehouse)["buildings"]}
    assert rows["b2"] == ("b2", "s3", "Europe/Paris", "FR", None, None, "more.csv", None)
    assert rows["b1"][-2] == "buildings.csv" and len(rows) == 4


def test_parquet_gives_the_same_rows(tmp_path):
    csv_warehouse = warehouse_with_buildings(tmp_path / "a.duckdb", tmp_path)
    parquet = csv_to_parquet(write(tmp_path / "buildings.csv", BUILDINGS_CSV))
    ingest_buildings(tmp_path / "b.duckdb", parquet)
    strip = lambda rows: [r[:-2] + r[-1:] for r in rows]  # noqa: E731 -- source differs: the file name
    assert strip(contents(tmp_path / "b.duckdb")["buildings"]) == strip(contents(csv_warehouse)["buildings"])


HEAD = "building_id,site_id,timezone,holiday_country,holiday_subdiv\n"
BAD = [
    ("unknown-zone", HEAD + "x1,s1,Europe/London,GB,ENG\nx2,s1,Europe/Londres,GB,\n",
     r"line 3, column 'timezone': unknown time zone 'Europe/Londres' \(not an IANA zone"),
    ("unknown-country", HEAD + "x1,s1,Europe/London,XX,\n",
     r"line 2, column 'holiday_country': no holiday calendar for country 'XX'"),
    ("unknown-subdivision", HEAD + "x1,s1,Europe/London,GB,ENG\nx2,s1,Europe/London,GB,ATLANTIS\n",
     r"line 3, column 'holiday_subdiv': 'ATLANTIS' is not a subdivision of the 'GB' holiday calendar"),
    ("duplicate", HEAD + "x1,s1,Europe/London,GB,\nx2,s1,Europe/London,GB,\nx1,s2,UTC,GB,\n",
     r"line 4, column 'building_id': building 'x1' is listed twice \(line 2 and line 4\)"),
    ("blank-zone", HEAD + "x1,s1,,GB,\n", r"line 2, column 'timezone': empty cell"),
    ("missing-column", "building_id,site_id,timezone\nx1,s1,UTC\n", r"missing required column\(s\) 'holiday_country'"),
    ("unexpected-column", "building_id,site_id,timezone,holiday_country,floor_area\nx1,s1,UTC,GB,10\n",
     r"unexpected column\(s\) 'floor_area'"),
    ("negative-area", "building_id,site_id,timezone,holiday_country,floor_area_m2\nx1,s1,UTC,GB,-500\n",
     r"line 2, column 'floor_area_m2': -500 is not a floor area: a number of square metres from 1 "
     r"to 10,000,000 \(.*\); fix it or leave the cell blank"),
    ("zero-area", "building_id,site_id,timezone,holiday_country,floor_area_m2\nx1,s1,UTC,GB,1200\nx2,s1,UTC,GB,0\n",
     r"line 3, column 'floor_area_m2': 0 is not a floor area"),
    ("infinite-area", "building_id,site_id,timezone,holiday_country,floor_area_m2\nx1,s1,UTC,GB,inf\n",
     r"line 2, column 'floor_area_m2': inf is not a floor area"),
    ("text-area", "building_id,site_id,timezone,holiday_country,floor_area_m2\nx1,s1,UTC,GB,large\n",
     r"line 2, column 'floor_area_m2'"),
    ("empty", "", r"empty file"),
    ("header-only", HEAD, r"a header but no data rows"),
]


@pytest.mark.parametrize(("text", "message"), [c[1:] for c in BAD], ids=[c[0] for c in BAD])
def test_a_bad_buildings_file_is_refused_and_changes_nothing(tmp_path, text, message):
    warehouse = warehouse_with_buildings(tmp_path / "w.duckdb", tmp_path)
    counts, before = row_counts(warehouse), contents(warehouse)
    with pytest.raises(PipelineError, match=message):
        ingest_buildings(warehouse, write(tmp_path / "bad.csv", text))
    assert row_counts(warehouse) == counts and contents(warehouse) == before


def test_a_declared_floor_area_is_stored_and_a_blank_one_is_unknown(tmp_path):
    warehouse = tmp_path / "w.duckdb"
    ingest_buildings(warehouse, write(tmp_path / "b.csv",
                                      "building_id,site_id,timezone,holiday_country,building_type,floor_area_m2\n"
                                      "x1,s1,UTC,GB,general office,500\nx2,s1,UTC,GB,school,\n"
                                      "x3,s1,UTC,GB,,1250.5\n"))
    assert {r[0]: r[-1] for r in contents(warehouse)["buildings"]} == {"x1": 500.0, "x2": None, "x3": 1250.5}
    ingest_buildings(warehouse, write(tmp_path / "again.csv",  # a file without the column: unknown
                                      "building_id,site_id,timezone,holiday_country\nx1,s1,UTC,GB\n"))
    assert {r[0]: r[-1] for r in contents(warehouse)["buildings"]}["x1"] is None
