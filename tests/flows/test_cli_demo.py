"""The README's first command: ``wadiro demo`` runs the weekly deployment's job on a generated
fleet and prints what it published for the coming week."""

from __future__ import annotations

from tasks.warehouse.connection import connect
from tests.cli_runs import invoke


def test_the_demo_forecasts_the_coming_week_from_its_weather_forecast(tmp_path):
    warehouse = tmp_path / "warehouse.duckdb"
    result = invoke("demo", "--buildings", 2, "--trials", 2, "--warehouse", warehouse)
    assert result.exit_code == 0, result.output
    assert "published forecasts of the week of 2024-04-22" in result.output
    assert "warning" not in result.output.lower()
    with connect(warehouse, read_only=True) as con:
        status = con.execute(
            "SELECT status, weather_source, n_test_weather_forecast, n_test_labelled "
            "FROM window_status").fetchall()
        published = con.execute(
            "SELECT count(*), count(DISTINCT building_id) FROM published_forecasts "
            "WHERE y_hat IS NOT NULL AND y_hat >= 0").fetchone()
        scored = con.execute("SELECT count(*) FROM scores WHERE n_hours > 0").fetchone()[0]
    assert status == [("ok", "forecast", 168, 0)] * 2
    assert published == (2 * 168, 2)
    assert scored == 0  # the week has not happened yet
    again = invoke("demo", "--buildings", 2, "--trials", 2, "--warehouse", warehouse)
    assert again.exit_code == 0 and "generating" not in again.output  # the fleet is kept


def test_the_report_of_a_published_week_not_yet_scored_is_written(tmp_path):
    """The first Monday: the report shows what was published before any week is scored."""
    warehouse = tmp_path / "warehouse.duckdb"
    assert invoke("demo", "--buildings", 2, "--trials", 2, "--warehouse", warehouse).exit_code == 0
    report = invoke("report", "--out", tmp_path / "report", "--warehouse", warehouse)
    assert report.exit_code == 0, report.output
    assert "no week is scored yet" in report.output
    page = (tmp_path / "report" / "report.html").read_text()
    assert "Week-ahead load forecasts: the week of 2024-04-22" in page
    assert "No week is scored yet: the leaderboard follows" in page
    assert len(list((tmp_path / "report" / "plots").glob("*.png"))) == 2


def test_the_report_of_a_warehouse_without_a_forecast_is_refused(tmp_path):
    from tests.flows.warehouse_rows import make_warehouse

    warehouse = make_warehouse(tmp_path / "w.duckdb", buildings=1)
    report = invoke("report", "--out", tmp_path / "report", "--warehouse", warehouse)
    assert report.exit_code == 1
    assert "no published forecast yet" in report.output
