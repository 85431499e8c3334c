"""The report as an attacker or a slip would meet it (issue 30's probe): links planted in
``--out`` are never written through, ids a spreadsheet would run are escaped in every CSV the
report writes, and an unknown ``--buildings`` id is one line with nothing written."""

from __future__ import annotations

import csv
import os
from datetime import date, datetime, timedelta, timezone

import pytest

from tasks.outputs.output_files import safe_text
from tasks.outputs.report import ReportFolderError, write_report
from tasks.warehouse.connection import connect
from tasks.warehouse.schema import ensure_schema
from tests.cli_runs import invoke

WEEK = date(2019, 4, 1)
FORMULAS = ["=SUM(A1:A9)", "+1+cmd|' /C calc'!A0", "-2+3", "@SUM(1)", "\tTAB", "\rCR"]
PLAIN = "b1"




def _warehouse(path):
    start = datetime(2019, 4, 1, tzinfo=timezone.utc)
    with connect(path) as con:
        ensure_schema(con)
        for building in [PLAIN, *FORMULAS]:
            con.execute("INSERT INTO buildings (building_id, site_id, timezone, holiday_country, holiday_subdiv, building_type, source) VALUES (?, 's', 'UTC', 'GB', NULL, NULL, 't')",
                        [building])
            con.execute(
                "INSERT INTO scores (building_id, model, target_week, mae, rmse, mean_actual, "
                "n_hours, n_violations, n_train_violations, run_id) VALUES "
                "(?, 'gp', ?, 1.0, 1.0, 10.0, 24, 0, 0, 'r')", [building, WEEK])
            con.execute("INSERT INTO publications (building_id, target_week, model, reason, "
                        "expected_ratio, run_id) VALUES (?, ?, 'gp', 'test', 0.9, 'r')",
                        [building, WEEK])
            for h in range(24):
                ts = start + timedelta(hours=h)
                con.execute("INSERT INTO forecasts (building_id, model, target_week, ts, y_hat, "
                            "run_id, y_lo_80, y_hi_80, y_lo_95, y_hi_95) VALUES "
                            "(?, 'gp', ?, ?, 10.0, 'r', 9.0, 11.0, 8.0, 12.0)",
                            [building, WEEK, ts])
                con.execute("INSERT INTO meter_readings VALUES (?, ?, ?)",
                            [building, ts, 10.0 + h % 2])
    return path


@pytest.fixture()
def warehouse(tmp_path):
    return _warehouse(tmp_path / "w.duckdb")


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """One report of the warehouse, for the tests that only read what it wrote."""
    folder = tmp_path_factory.mktemp("written")
    return write_report(_warehouse(folder / "w.duckdb"), folder / "out", None), folder / "out"


def test_no_file_outside_out_is_written_through_a_planted_link(warehouse, tmp_path):
    out, outside = tmp_path / "out", tmp_path / "outside"
    out.mkdir()
    outside.mkdir()
    victim = outside / "precious.txt"
    victim.write_text("keep me")
    for name in ("leaderboard.csv", "report.html", "data_quality.csv", "accuracy.csv"):
        (out / name).symlink_to(victim)
    report = write_report(warehouse, out, None)
    assert victim.read_text() == "keep me"
    for name in ("leaderboard.csv", "report.html", "data_quality.csv", "accuracy.csv"):
        assert not (out / name).is_symlink() and (out / name).stat().st_size > 0
    assert all(p.resolve().is_relative_to(out.resolve()) for p in report.files)
    assert not [p for p in out.iterdir() if p.name.endswith(".part")]


def test_a_plots_folder_that_links_outside_is_refused(warehouse, tmp_path):
    out, outside = tmp_path / "out", tmp_path / "outside"
    out.mkdir()
    outside.mkdir()
    (out / "plots").symlink_to(outside, target_is_directory=True)
    with pytest.raises(ReportFolderError, match="plots is a symbolic link: nothing is written "
                                                "outside"):
        write_report(warehouse, out, [PLAIN])
    assert list(outside.iterdir()) == []
    result = invoke("report", "--out", out, "--buildings", PLAIN, "--warehouse", warehouse)
    assert result.exit_code == 1 and result.output.startswith("error: cannot write the report")
    assert len(result.output.strip().splitlines()) == 1


def test_report_files_are_readable_like_any_new_file(written):
    report, _ = written
    umask = os.umask(0)
    os.umask(umask)
    assert all(p.stat().st_mode & 0o777 == 0o666 & ~umask for p in report.files)


@pytest.mark.parametrize("name", ["building_errors.csv", "data_quality.csv", "next_week.csv",
                                  "accuracy.csv"])
def test_ids_a_spreadsheet_would_run_are_escaped_in_every_csv(written, name):
    _, out = written
    with (out / name).open(newline="") as stream:
        rows = list(csv.reader(stream))
    ids = {row[0] for row in rows[1:]}
    assert ids == {PLAIN, *("'" + f for f in FORMULAS)}, ids
    dangerous = [cell for row in rows[1:] for cell in row
                 if cell[:1] in ("=", "+", "@", "\t", "\r")]
    assert not dangerous
    # numbers stay numbers, negative ones too
    assert safe_text(-2.5) == -2.5 and safe_text("-2+3") == "'-2+3"


def test_unknown_buildings_are_one_line_and_nothing_is_written(warehouse, tmp_path):
    out = tmp_path / "out"
    result = invoke("report", "--out", out, "--buildings", "nope", "--warehouse", warehouse)
    assert result.exit_code == 1
    assert result.output.strip() == ("error: 1 building id(s) not in the buildings table: "
                                     "'nope'")
    assert not out.exists()


def test_a_known_building_without_a_forecast_is_warned_about(warehouse, tmp_path):
    with connect(warehouse) as con:
        con.execute("INSERT INTO buildings (building_id, site_id, timezone, holiday_country, holiday_subdiv, building_type, source) VALUES ('quiet', 's', 'UTC', 'GB', NULL, NULL, 't')")
    result = invoke("report", "--out", tmp_path / "out", "--buildings", f"{PLAIN},quiet",
                    "--warehouse", warehouse)
    assert result.exit_code == 0, result.output
    assert "warning: quiet: no published forecast, so no plot" in result.output
    assert (tmp_path / "out" / "plots" / f"{PLAIN}.png").exists()
