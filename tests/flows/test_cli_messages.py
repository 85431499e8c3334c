"""What a command says when an operator's file, folder or warehouse is not what it expects
(issue 18, item 6): one line naming the fix, nothing written -- or, given the option the line
names, the file read as it was meant."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import duckdb
import pytest

from tests.cli_runs import invoke, one_error_line
from tests.flows.processes import local_env
from tests.tasks.ingest.operator_files import BUILDINGS_CSV, contents, row_counts, utc, write  # noqa: E402

EUROPEAN = "ts;b1;b2\n2024-02-05 00:00;1,5;12\n2024-02-05 01:00;2,25;\n"
"""As European Excel saves a CSV: ``;`` between cells, decimal commas."""


@pytest.fixture
def warehouse(tmp_path, no_prefect_server) -> Path:
    warehouse = tmp_path / "w.duckdb"
    result = invoke("ingest", "buildings", write(tmp_path / "b.csv", BUILDINGS_CSV), "--warehouse", warehouse)
    assert result.exit_code == 0, result.output
    return warehouse


def test_a_semicolon_file_with_decimal_commas_is_named_and_read_with_the_options(warehouse, tmp_path):
    path = write(tmp_path / "excel.csv", EUROPEAN)
    before = contents(warehouse)
    line = one_error_line(invoke("ingest", "readings", path, "--timezone", "UTC", "--warehouse", warehouse))
    assert line == (f"error: {path}: the header is one column, 'ts;b1;b2': the file's cells are separated "
                    "by ';', not ','; give --delimiter ';' and --decimal ',', or save it as a "
                    "comma-separated CSV")
    half = one_error_line(invoke("ingest", "readings", path, "--timezone", "UTC", "--delimiter", ";",
                                 "--warehouse", warehouse))
    assert half.endswith("line 2, column 'b1': '1,5' is not a number; give --decimal ',' if the file "
                         "writes decimals with a comma")
    assert contents(warehouse) == before
    result = invoke("ingest", "readings", path, "--timezone", "UTC", "--delimiter", ";", "--decimal", ",",
                    "--warehouse", warehouse)
    assert result.exit_code == 0, result.output
    assert contents(warehouse)["meter_readings"] == [
        ("b1", utc("2024-02-05 00:00"), 1.5), ("b1", utc("2024-02-05 01:00"), 2.25),
        ("b2", utc("2024-02-05 00:00"), 12.0), ("b2", utc("2024-02-05 01:00"), None)]


def test_a_latin_1_file_is_named_with_its_line_and_read_with_encoding(warehouse, tmp_path):
    path = tmp_path / "latin.csv"
    path.write_bytes("building_id,site_id,timezone,holiday_country,building_type\n"
                     "b9,s1,Europe/London,GB,caf\xe9\n".encode("latin-1"))
    before = contents(warehouse)
    line = one_error_line(invoke("ingest", "buildings", path, "--warehouse", warehouse))
    assert line == (f"error: {path}: line 2 is not utf-8 text (byte 0xe9 at character 27); save the "
                    "file as UTF-8 (Excel: 'CSV UTF-8'), or give --encoding with the encoding it was "
                    "saved in (e.g. --encoding latin-1)")
    assert contents(warehouse) == before
    result = invoke("ingest", "buildings", path, "--encoding", "latin-1", "--warehouse", warehouse)
    assert result.exit_code == 0, result.output
    assert [r[5] for r in contents(warehouse)["buildings"] if r[0] == "b9"] == ["café"]


@pytest.mark.parametrize("command", [("buildings",), ("readings",), ("weather", "--kind", "observed")])
def test_a_folder_given_for_a_file_is_called_a_folder(warehouse, tmp_path, command):
    folder = tmp_path / "exports.csv"
    folder.mkdir()
    line = one_error_line(invoke("ingest", command[0], folder, *command[1:], "--warehouse", warehouse))
    assert line == f"error: {folder} is a folder, not a file; give the path of one .csv or .parquet file"


def test_a_file_given_for_the_archive_is_called_a_file(tmp_path, no_prefect_server):
    archive = write(tmp_path / "archive.zip", "not a folder")
    line = one_error_line(invoke("ingest", "cambridge", "--path", archive, "--warehouse", tmp_path / "w.duckdb"))
    assert line == (f"error: archive path {archive} is a file; give the archive's root folder (the one "
                    "holding building_data/)")


@pytest.mark.parametrize("command", [("readings",), ("weather", "--kind", "observed")])
def test_readings_or_weather_without_a_warehouse_create_none(tmp_path, command, no_prefect_server):
    path = write(tmp_path / "x.csv", "ts,b1\n2024-02-05T00:00Z,1\n" if command[0] == "readings" else
                 "site_id,ts,temperature_c,irradiance_wm2,wind_speed_ms\ns1,2024-02-05T00:00Z,1,0,1\n")
    warehouse = tmp_path / "warehouse.duckdb"
    line = one_error_line(invoke("ingest", command[0], path, *command[1:], "--warehouse", warehouse))
    assert line == (f"error: warehouse {warehouse} does not exist; ingest its buildings first (`wadiro "
                    "ingest buildings FILE`, or `wadiro ingest cambridge` or `synthetic`) (or give the "
                    "right --warehouse)")
    assert not warehouse.exists()


def test_a_building_id_with_a_comma_is_refused_naming_why(warehouse, tmp_path):
    path = write(tmp_path / "b.csv", "building_id,site_id,timezone,holiday_country\n"
                                     "north-wing,s1,UTC,GB\n\"north, east wing\",s1,UTC,GB\n")
    counts = row_counts(warehouse)
    line = one_error_line(invoke("ingest", "buildings", path, "--warehouse", warehouse))
    assert line == (f"error: {path}: line 3, column 'building_id': building id 'north, east wing' holds a "
                    "comma, which separates ids in --buildings (it could never be selected); rename "
                    "it, e.g. with '-' or '_'")
    assert row_counts(warehouse) == counts


@pytest.fixture
def scored(tmp_path, no_prefect_server) -> Path:
    from tests.flows.warehouse_rows import WEEKS, make_warehouse

    warehouse = make_warehouse(tmp_path / "scored.duckdb", buildings=1)
    result = invoke("backfill", "--start", WEEKS[0], "--end", WEEKS[0], "--models", "seasonal_naive",
                    "--runner", "threads", "--warehouse", warehouse)
    assert result.exit_code == 0, result.output
    return warehouse


def test_report_out_at_a_file_or_a_folder_that_cannot_be_made_is_one_line(scored, tmp_path):
    taken = write(tmp_path / "report.html", "an earlier report")
    line = one_error_line(invoke("report", "--out", taken, "--warehouse", scored))
    assert line == (f"error: cannot write the report to {taken}: it is a file; give --out a folder you "
                    "can write to")
    inside = taken / "reports"
    line = one_error_line(invoke("report", "--out", inside, "--warehouse", scored))
    assert line == (f"error: cannot write the report to {inside}: Not a directory; give --out a folder "
                    "you can write to")
    assert taken.read_text() == "an earlier report"


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into any folder")
def test_report_out_in_a_read_only_folder_is_one_line(scored, tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    line = one_error_line(invoke("report", "--out", locked / "out", "--warehouse", scored))
    assert "Permission denied; give --out a folder you can write to" in line


def test_a_run_waits_for_a_locked_warehouse_no_longer_than_lock_wait_minutes(scored,
                                                                            wadiro_process):
    """Issue 18: a read step waited about 6 minutes whatever --lock-wait-minutes said."""
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import duckdb, sys
        con = duckdb.connect({str(scored)!r})
        print("locked", flush=True)
        sys.stdin.readline()
    """)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        began = time.monotonic()
        done = wadiro_process.run(["forecast", "--lock-wait-minutes", "0.1", "--models",
                                   "seasonal_naive", "--warehouse", scored], env=local_env(),
                                  capture_output=True, text=True, timeout=120)
        took = time.monotonic() - began
    finally:
        holder.communicate("\n", timeout=30)
    assert done.returncode == 1, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(f"error: warehouse {scored} is locked by another process")
    assert last.endswith("(gave up after waiting 6 s, the run's --lock-wait-minutes)")
    assert 6 <= took < 60, took
    with duckdb.connect(str(scored), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM runs").fetchone() == (1,)  # the backfill's only
