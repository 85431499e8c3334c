"""``wadiro quality``: prints each building's data quality worst first, writes it as CSV, and
says what is wrong in one line like every other command."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import pandas as pd
import pytest

from tasks.warehouse.connection import connect
from tasks.warehouse.schema import ensure_schema
from tests.cli_runs import invoke, one_error_line

T0 = datetime(2024, 3, 4, tzinfo=UTC)




@pytest.fixture(scope="module")
def warehouse(tmp_path_factory) -> Path:
    """48 hours: ``ok`` reads every hour (its 30th to 35th hours at 5.0, a flat line of 6),
    ``stopped`` the first 24 then NULL rows, ``silent`` nothing."""
    path = tmp_path_factory.mktemp("quality") / "w.duckdb"
    with connect(path) as con:
        ensure_schema(con)
        for b in ("ok", "stopped", "silent"):
            con.execute("INSERT INTO buildings (building_id, site_id, timezone, holiday_country, holiday_subdiv, building_type, source) VALUES (?, 's', 'UTC', 'GB', NULL, NULL, 't')", [b])
        for h in range(48):
            ts = T0 + timedelta(hours=h)
            con.execute("INSERT INTO meter_readings VALUES ('ok', ?, ?)",
                        [ts, 5.0 if 30 <= h < 36 else 10.0 + h % 2])
            con.execute("INSERT INTO meter_readings VALUES ('stopped', ?, ?)",
                        [ts, 7.0 + h % 3 if h < 24 else None])
    return path


def test_prints_every_building_worst_first(warehouse):
    result = invoke("quality", "--warehouse", str(warehouse))
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == ("3 buildings, worst first; missing_share_12w covers the 48 hours from "
                        "2024-03-04 00:00 to 2024-03-05 23:00 UTC, all the warehouse holds "
                        "(ending at the warehouse's latest reading)")
    assert lines[1].split()[:4] == ["building_id", "first_reading", "last_reading", "readings"]
    assert [line.split()[0] for line in lines[2:]] == ["silent", "stopped", "ok"]
    silent, stopped, ok = (line.split() for line in lines[2:])
    assert silent[1:5] == ["-", "-", "0", "-"] and "1.000" in silent
    #                   first reading           last reading        n   missing since share
    assert stopped[1:9] == ["2024-03-04", "00:00", "2024-03-04", "23:00", "24", "0", "24", "0.500"]
    assert ok[5:9] == ["48", "0", "0", "0.000"] and ok[11] == "6"  # longest_flat_hours (no gap)


def test_writes_the_csv_with_every_column(warehouse, tmp_path):
    csv = tmp_path / "deep" / "dq.csv"
    result = invoke("quality", "--limit", "1", "--csv", str(csv), "--warehouse", str(warehouse))
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[-1] == f"wrote {csv}"
    assert len(result.output.splitlines()) == 4  # the period, the header, one building, wrote
    table = pd.read_csv(csv)
    with duckdb.connect(str(warehouse), read_only=True) as con:
        view_columns = [c[0] for c in con.execute("SELECT * FROM building_data_quality LIMIT 0").description]
    assert list(table.columns) == view_columns
    assert list(table["building_id"]) == ["silent", "stopped", "ok"]  # all, whatever --limit
    rows = table.set_index("building_id")
    assert rows.loc["stopped", "last_reading"] == "2024-03-04T23:00:00Z"
    assert rows.loc["stopped", "missing_share_12w"] == 0.5
    assert list(rows["readings"]) == [0, 24, 48]
    assert rows.loc["ok", "longest_flat_hours"] == 6 and rows.loc["ok", "flat_runs_24h"] == 0
    assert pd.isna(rows.loc["silent", "first_reading"]) and rows.loc["silent", "missing_share_12w"] == 1.0


def test_a_selection_of_buildings(warehouse):
    result = invoke("quality", "--buildings", "ok, stopped", "--warehouse", str(warehouse))
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[0].startswith("2 buildings, worst first; ")
    assert [line.split()[0] for line in result.output.splitlines()[2:]] == ["stopped", "ok"]


def test_what_is_wrong_is_one_line(warehouse, tmp_path):
    missing = one_error_line(invoke("quality", "--warehouse", str(tmp_path / "nowhere.duckdb")))
    assert "does not exist" in missing and "wadiro ingest" in missing
    assert not (tmp_path / "nowhere.duckdb").exists()
    empty = tmp_path / "empty.duckdb"
    duckdb.connect(str(empty)).close()
    line = one_error_line(invoke("quality", "--warehouse", str(empty)))
    assert "has no table 'buildings'" in line and "wadiro ingest" in line
    unknown = one_error_line(invoke("quality", "--buildings", "ok,nowhere", "--warehouse", str(warehouse)))
    assert "not in the buildings table: 'nowhere'" in unknown
    folder = tmp_path / "a-folder.csv"
    folder.mkdir()
    unwritable = one_error_line(invoke("quality", "--csv", str(folder), "--warehouse", str(warehouse)))
    assert unwritable.startswith(f"error: cannot write {folder}: ")


def test_a_warehouse_without_buildings_says_to_ingest_first(tmp_path):
    path = tmp_path / "w.duckdb"
    with connect(path) as con:
        ensure_schema(con)
    line = one_error_line(invoke("quality", "--warehouse", str(path)))
    assert "has no buildings" in line and "wadiro ingest" in line


def test_an_empty_selection_is_a_usage_error(warehouse):
    result = invoke("quality", "--buildings", " , ", "--warehouse", str(warehouse))
    assert result.exit_code == 2 and "--buildings: the list is empty" in result.output


def test_a_999999_kwh_hour_of_a_real_building_is_flagged_as_a_spike(tmp_path, cambridge_archive,
                                                                     no_prefect_server):
    """Issue 18: a single 999,999 kWh hour of a building using about 7 kWh an hour was stored
    and the building looked healthy. The ingest takes it (it is a possible energy), and the
    view, ``wadiro quality`` and the report's page name it as a spike."""
    warehouse, ids = tmp_path / "w.duckdb", "UCam_Building_b7,UCam_Building_b0"
    result = invoke("ingest", "cambridge", "--path", cambridge_archive, "--buildings", ids,
                    "--start", "2019-01-01", "--end", "2019-03-31", "--warehouse", warehouse)
    assert result.exit_code == 0, result.output

    def spikes() -> dict:
        with duckdb.connect(str(warehouse), read_only=True) as con:
            return dict(con.execute("SELECT building_id, spike_readings FROM building_data_quality "
                                    "ORDER BY 1").fetchall())

    assert spikes() == {"UCam_Building_b0": 0, "UCam_Building_b7": 0}
    spike = tmp_path / "spike.csv"
    spike.write_text("building_id,ts,kwh\nUCam_Building_b7,2019-03-12T14:00Z,999999\n")
    assert invoke("ingest", "readings", spike, "--warehouse", warehouse).exit_code == 0
    assert spikes() == {"UCam_Building_b0": 0, "UCam_Building_b7": 1}

    result = invoke("quality", "--warehouse", warehouse)
    assert result.exit_code == 0, result.output
    header, *rows = result.output.splitlines()[1:]
    assert header.split()[-2:] == ["spike_readings", "largest_reading"]
    row = {r.split()[0]: r.split() for r in rows}
    assert row["UCam_Building_b7"][-2:] == ["1", "999999"] and row["UCam_Building_b0"][-2] == "0"

    from tasks.outputs.report_html import render_report

    with connect(warehouse, read_only=True) as con:
        page = render_report(con, None)
    quality = page[page.index("<h2>Meter data quality</h2>"):]
    assert "1 hold spikes (readings over 10 times their own 99th percentile)" in quality
    assert "Spikes: UCam_Building_b7 (1, up to 999999 kWh)." in quality
