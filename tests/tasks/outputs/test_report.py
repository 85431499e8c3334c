"""The leaderboard and per-building errors against values computed by hand, and the plots."""

from datetime import date, datetime, timedelta, timezone

import pandas as pd
import pytest

from tasks.outputs.report import (
    building_errors,
    fleet_leaderboard,
    run_leaderboard,
    write_report,
)
from tasks.warehouse.connection import connect
from tasks.warehouse.schema import ensure_schema

WEEK = date(2019, 4, 1)
SCORES = [
    # building, model, mae, rmse, mean_actual, n_hours, n_violations, n_train_violations, run
    ("b1", "wadiro_pcscnn", 2.0, 3.0, 10.0, 168, 0, 0, "r1"),
    ("b2", "wadiro_pcscnn", 4.0, 5.0, 20.0, 100, 2, 0, "r1"),
    ("b1", "gp", 3.0, 4.0, 10.0, 168, 4, 1, "r1"),
    ("b2", "gp", 5.0, 7.0, 20.0, 100, 6, 2, "r2"),
    ("b3", "gp", 9.0, 9.0, 30.0, 0, 3, 0, "r2"),  # nothing scored: left out of errors
]


@pytest.fixture()
def warehouse(tmp_path):
    path = tmp_path / "w.duckdb"
    with connect(path) as con:
        ensure_schema(con)
        for row in SCORES:
            con.execute("INSERT INTO scores (building_id, model, target_week, mae, rmse, "
                        "mean_actual, n_hours, n_violations, n_train_violations, run_id) "
                        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", [*row[:2], WEEK, *row[2:]])
        start = datetime(2019, 4, 1, tzinfo=timezone.utc)
        for h in range(3):
            ts = start + timedelta(hours=h)
            con.execute("INSERT INTO meter_readings VALUES ('b1', ?, ?)", [ts, 10.0 + h])
            for model, y in (("gp", 9.0 + h), ("wadiro_pcscnn", 10.5 + h)):
                con.execute("INSERT INTO forecasts (building_id, model, target_week, ts, y_hat, "
                            "run_id) VALUES ('b1', ?, ?, ?, ?, 'r1')", [model, WEEK, ts, y])
    return path


def test_leaderboard_by_hand(warehouse):
    with connect(warehouse, read_only=True) as con:
        board = fleet_leaderboard(con).set_index("model")
        per_run = run_leaderboard(con, "r1").set_index("model")
    assert list(board.index) == ["wadiro_pcscnn", "gp"]  # ranked by mean MAE
    assert board.loc["wadiro_pcscnn", "mean_mae"] == pytest.approx(3.0)
    assert board.loc["gp", "mean_mae"] == pytest.approx(4.0)
    assert board.loc["gp", "median_rmse"] == pytest.approx(5.5)
    assert board.loc["wadiro_pcscnn", "mean_cv_rmse"] == pytest.approx((3 / 10 + 5 / 20) / 2)
    assert board.loc["gp", "test_violations"] == 10  # the unscored week does not count
    # deviation from the model with the fewest test violations (2), as in the paper's Table 3
    assert board.loc["gp", "violations_deviation_pct"] == pytest.approx(400.0)
    assert board.loc["wadiro_pcscnn", "violations_deviation_pct"] == pytest.approx(0.0)
    assert per_run.loc["gp", "n_building_weeks"] == 1 and per_run.loc["gp", "mean_mae"] == 3.0


def test_building_errors_normalised_by_mean_load(warehouse):
    with connect(warehouse, read_only=True) as con:
        errors = building_errors(con).set_index(["building_id", "model"])
    assert errors.loc[("b2", "gp"), "nmae"] == pytest.approx(5.0 / 20.0)
    assert errors.loc[("b1", "wadiro_pcscnn"), "cv_rmse"] == pytest.approx(3.0 / 10.0)
    assert ("b3", "gp") not in errors.index


def _add_buildings(warehouse, *ids: str) -> None:
    with connect(warehouse) as con:
        for building in ids:
            con.execute("INSERT INTO buildings (building_id, site_id, timezone, holiday_country, holiday_subdiv, building_type, source) VALUES (?, 's', 'UTC', 'GB', NULL, NULL, 't')",
                        [building])


def test_report_files(warehouse, tmp_path):
    _add_buildings(warehouse, "b1", "b2")
    out = tmp_path / "report"
    report = write_report(warehouse, out, ["b1"])
    names = sorted(p.relative_to(out).as_posix() for p in report.files)
    assert names == ["accuracy.csv", "building_errors.csv", "data_quality.csv", "leaderboard.csv",
                     "next_week.csv", "plots/b1.png", "portfolio_scores.csv", "report.html"]
    assert (out / "plots" / "b1.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert pd.read_csv(out / "leaderboard.csv")["model"].tolist() == ["wadiro_pcscnn", "gp"]


def test_report_lists_the_worst_meter_data_beside_the_leaderboard(warehouse, tmp_path):
    """b1 reads 3 hours, b2 none: b2 first, in the CSV (every column) and on the page."""
    with connect(warehouse) as con:
        for building in ("b1", "b2"):
            con.execute("INSERT INTO buildings (building_id, site_id, timezone, holiday_country, holiday_subdiv, building_type, source) VALUES (?, 's', 'UTC', 'GB', NULL, NULL, 't')",
                        [building])
    out = tmp_path / "report"
    report = write_report(warehouse, out, ["b1"])
    quality = pd.read_csv(out / "data_quality.csv")
    assert quality["building_id"].tolist() == ["b2", "b1"]
    assert quality["readings"].tolist() == [0, 3] and quality["missing_share_12w"].tolist() == [1.0, 0.0]
    assert quality["last_reading"].tolist()[1] == "2019-04-01T02:00:00Z"
    assert report.data_quality["building_id"].tolist() == ["b2", "b1"]
    page = (out / "report.html").read_text()
    section = page[page.index("<h2>Meter data quality</h2>"):page.index("<h2>Published forecasts")]
    assert ("2 buildings: 1 miss more than 10 % of the recent hours; 1 have no reading at all; "
            "0 have a flat line of 24 h or more; 0 hold negative readings") in section
    assert "the 3 hours from 2019-04-01 00:00 to 2019-04-01 02:00 UTC" in section
    assert section.index("<td>b2</td><td>none</td>") < section.index("<td>b1</td><td>2019-04-01 02:00</td>")


def test_a_report_without_buildings_says_so_in_its_quality_section(warehouse, tmp_path):
    write_report(warehouse, tmp_path / "report", None)
    assert "<p>No buildings in the warehouse.</p>" in (tmp_path / "report" / "report.html").read_text()
    assert pd.read_csv(tmp_path / "report" / "data_quality.csv").empty


def test_seasonal_naive_is_not_the_violations_reference(warehouse):
    with connect(warehouse) as con:
        con.execute("INSERT INTO scores (building_id, model, target_week, mae, rmse, mean_actual, "
                    "n_hours, n_violations, n_train_violations, run_id) VALUES ('b1', "
                    "'seasonal_naive', ?, 6.0, 7.0, 10.0, 168, 0, 0, 'r3')", [WEEK])
        board = fleet_leaderboard(con).set_index("model")
    assert pd.isna(board.loc["seasonal_naive", "violations_deviation_pct"])
    assert board.loc["gp", "violations_deviation_pct"] == pytest.approx(400.0)


def test_leaderboard_against_seasonal_naive_and_the_published_forecast(warehouse):
    """Seasonal naive scored on b1 only: ratios use the building-weeks both have; the published
    forecast of b1 is gp, of b2 wadiro_pcscnn."""
    with connect(warehouse) as con:
        con.execute("INSERT INTO scores (building_id, model, target_week, mae, rmse, mean_actual, "
                    "n_hours, n_violations, n_train_violations, run_id) VALUES ('b1', "
                    "'seasonal_naive', ?, 2.5, 3.0, 10.0, 168, 0, 0, 'r1')", [WEEK])
        for building, model in (("b1", "gp"), ("b2", "wadiro_pcscnn")):
            con.execute("INSERT INTO publications (building_id, target_week, model, reason, "
                        "expected_ratio, run_id) VALUES (?, ?, ?, 'by hand', 0.9, 'r1')",
                        [building, WEEK, model])
        board = fleet_leaderboard(con).set_index("model")
    assert board.loc["wadiro_pcscnn", "mae_vs_naive"] == pytest.approx(2.0 / 2.5)  # b1 only
    assert board.loc["gp", "mae_vs_naive"] == pytest.approx(3.0 / 2.5)
    assert board.loc["wadiro_pcscnn", "beats_naive_share"] == 1.0
    assert board.loc["gp", "beats_naive_share"] == 0.0
    published = board.loc["published"]
    assert published["n_building_weeks"] == 2
    assert published["mean_mae"] == pytest.approx((3.0 + 4.0) / 2)  # gp on b1, pcscnn on b2
    assert published["test_violations"] == 4 + 2
    assert pd.isna(published["violations_deviation_pct"])
