"""``wadiro ingest ...`` end to end through the Prefect flows (on Prefect's test backend)."""

from __future__ import annotations

import duckdb
import pytest

from tests.cli_runs import invoke

B0 = "UCam_Building_b0"


@pytest.fixture
def run(prefect_backend):
    return invoke


def counts(warehouse) -> tuple:
    with duckdb.connect(str(warehouse), read_only=True) as con:
        return tuple(con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in ("buildings", "meter_readings", "weather"))


def test_synthetic_ingest_prints_a_summary(run, tmp_path):
    warehouse = tmp_path / "w.duckdb"
    result = run("ingest", "synthetic", "--buildings", "4", "--start", "2023-06-01", "--weeks", "1", "--seed", "3", "--warehouse", str(warehouse))
    assert result.exit_code == 0, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("synthetic: wrote 672 readings")
    assert "4 synthetic buildings" in lines[0] and "2023-06-04 23:00 to 2023-06-11 23:00 UTC" in lines[0]
    assert counts(warehouse) == (4, 4 * 168, 3 * 168)
    again = run("ingest", "synthetic", "--buildings", "4", "--start", "2023-06-01", "--weeks", "1", "--seed", "3", "--warehouse", str(warehouse))
    assert again.exit_code == 0
    assert counts(warehouse) == (4, 4 * 168, 3 * 168)


def test_warehouse_defaults_to_the_current_directory(run, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = run("ingest", "synthetic", "--buildings", "1", "--start", "2023-06-05", "--weeks", "1")
    assert result.exit_code == 0, result.output
    assert counts(tmp_path / "warehouse.duckdb")[1] == 168


def test_cambridge_ingest_of_one_building_week(run, tmp_path, cambridge_archive):
    warehouse = tmp_path / "w.duckdb"
    result = run(
        "ingest", "cambridge", "--path", str(cambridge_archive), "--buildings", B0,
        "--start", "2018-03-05", "--end", "2018-03-11", "--warehouse", str(warehouse),
    )
    assert result.exit_code == 0, result.output
    assert result.output.startswith("cambridge: wrote 168 readings")
    assert counts(warehouse) == (1, 168, 168)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--buildings", f"{B0},UCam_Building_b999"], "unknown building id(s) in the archive: UCam_Building_b999"),
        (["--start", "2019-02-01", "--end", "2019-01-01"], "empty date range"),
        (["--start", "2030-01-01", "--end", "2030-01-31"], "no electricity readings"),
    ],
)
def test_cambridge_input_errors_are_one_line_and_change_nothing(run, tmp_path, cambridge_archive, args, message):
    warehouse = tmp_path / "w.duckdb"
    ok = run("ingest", "synthetic", "--buildings", "2", "--start", "2023-06-05", "--weeks", "1", "--warehouse", str(warehouse))
    assert ok.exit_code == 0
    before = counts(warehouse)
    result = run("ingest", "cambridge", "--path", str(cambridge_archive), *args, "--warehouse", str(warehouse))
    assert result.exit_code == 1
    assert result.output.startswith(f"error: {message}")
    assert len(result.output.strip().splitlines()) == 1
    assert "Traceback" not in result.output
    assert counts(warehouse) == before


def test_missing_archive_path_is_named(run, tmp_path):
    result = run("ingest", "cambridge", "--path", str(tmp_path / "no-archive"), "--warehouse", str(tmp_path / "w.duckdb"))
    assert result.exit_code == 1
    assert result.output.strip() == f"error: archive path does not exist: {tmp_path / 'no-archive'}"


def test_malformed_options_are_usage_errors(run, tmp_path):
    bad_date = run("ingest", "synthetic", "--buildings", "2", "--start", "05/06/2023", "--weeks", "1")
    assert bad_date.exit_code == 2
    no_weeks = run("ingest", "synthetic", "--buildings", "2", "--start", "2023-06-05", "--weeks", "0")
    assert no_weeks.exit_code == 2
    assert not (tmp_path / "warehouse.duckdb").exists()
