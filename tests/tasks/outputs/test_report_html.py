"""The HTML report, opened in a real headless browser: it renders what it claims."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from datetime import date, datetime, timedelta, timezone

import pytest

from tasks.outputs.report import write_report
from tasks.warehouse.connection import connect
from tasks.warehouse.schema import ensure_schema

WEEK = date(2019, 4, 1)
NASTY = "b<script>alert(1)</script>"  # ids are operator data: the page must escape them


@pytest.fixture
def browser() -> str:
    """Headless Chromium's executable (the integration tier: tests/conftest.py)."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if path := shutil.which(name):
            return path
    if os.environ.get("CI"):
        pytest.fail("CI installs Chromium (.ci/run) for this test, but none was found")
    pytest.skip("no Chromium on this machine (CI installs it)")


@pytest.fixture()
def warehouse(tmp_path):
    """Two buildings, one week of 24 hours: gp published on b1, seasonal naive on NASTY."""
    path = tmp_path / "w.duckdb"
    start = datetime(2019, 4, 1, tzinfo=timezone.utc)
    with connect(path) as con:
        ensure_schema(con)
        for building, published in (("b1", "gp"), (NASTY, "seasonal_naive")):
            for model, mae, level in (("gp", 2.0, 0.0), ("seasonal_naive", 4.0, 1.0)):
                con.execute(
                    "INSERT INTO scores (building_id, model, target_week, mae, rmse, mean_actual,"
                    " n_hours, n_violations, n_train_violations, run_id, coverage_80) VALUES "
                    "(?, ?, ?, ?, ?, 10.0, 24, 0, 0, 'r1', 0.75)", [building, model, WEEK, mae, mae])
                for h in range(24):
                    ts = start + timedelta(hours=h)
                    y = 10.0 + level + h % 3
                    con.execute(
                        "INSERT INTO forecasts (building_id, model, target_week, ts, y_hat, run_id,"
                        " y_lo_80, y_hi_80, y_lo_95, y_hi_95) VALUES (?, ?, ?, ?, ?, 'r1', ?, ?, ?, ?)",
                        [building, model, WEEK, ts, y, y - 1, y + 1, y - 2, y + 2])
            con.execute("INSERT INTO buildings (building_id, site_id, timezone, holiday_country, holiday_subdiv, building_type, source) VALUES (?, 's', 'UTC', 'GB', NULL, NULL, 't')",
                        [building])
            for h in range(24):
                con.execute("INSERT INTO meter_readings VALUES (?, ?, ?)",
                            [building, start + timedelta(hours=h), 10.5])
            con.execute("INSERT INTO publications (building_id, target_week, model, reason, "
                        "expected_ratio, run_id) VALUES (?, ?, ?, 'by hand', 0.5, 'r1')",
                        [building, WEEK, published])
    return path


def test_report_page_is_self_contained_and_escapes_ids(warehouse, tmp_path):
    report = write_report(warehouse, tmp_path / "out", None)
    page = (tmp_path / "out" / "report.html").read_text()
    assert tmp_path / "out" / "report.html" in report.files
    assert "<script>alert(1)</script>" not in page and "b&lt;script&gt;" in page
    quality = page[page.index("<h2>Meter data quality</h2>"):]
    assert "<td>b&lt;script&gt;alert(1)&lt;/script&gt;</td>" in quality  # escaped there too
    # both read 10.5 kWh in all 24 hours: one flat line of 24 h each
    assert "0 miss more than 10 % of the recent hours" in quality
    assert "2 have a flat line of 24 h or more" in quality
    # the portfolio 'all''s next week and both buildings' published weeks
    assert page.count("data:image/png;base64,") == 3
    assert "src='http" not in page and 'src="http' not in page  # nothing fetched from outside


@pytest.mark.parametrize(("hours_in", "label"), [(24, "Last week"), (12, "This week"),
                                                 (0, "Next week")])
def test_a_week_whose_readings_are_in_is_last_week(warehouse, tmp_path, hours_in, label):
    with connect(warehouse) as con:
        con.execute("DELETE FROM meter_readings WHERE ts >= ?",
                    [datetime(2019, 4, 1, tzinfo=timezone.utc) + timedelta(hours=hours_in)])
    write_report(warehouse, tmp_path / "out", None)
    page = (tmp_path / "out" / "report.html").read_text()
    assert f"<h2 id='next-week'>{label} (2019-04-01), per portfolio</h2>" in page
    assert f"<h2 id='peaks'>{label}'s peak per building" in page


def test_every_degraded_building_week_is_on_the_first_page(warehouse, tmp_path):
    with connect(warehouse) as con:
        con.execute("INSERT INTO window_status (building_id, target_week, status, run_id, "
                    "left_out, n_flagged_hours) VALUES ('b1', ?, 'ok', 'r1', "
                    "'wind_speed_ms missing for 161 of 168 target-week hours', 3)", [WEEK])
        con.execute("INSERT INTO window_status (building_id, target_week, status, run_id) "
                    "VALUES (?, ?, 'ok', 'r1')", [NASTY, WEEK])
        con.execute("UPDATE publications SET outcome = 'degraded', reason = 'no learned model "
                    "beat seasonal naive on its record' WHERE building_id = ?", [NASTY])
    write_report(warehouse, tmp_path / "out", None)
    page = (tmp_path / "out" / "report.html").read_text()
    first = page[page.index("id='problems'"):page.index("id='modeller'")]
    assert ("1 building(s): weather inputs left out of the week of 2019-04-01</b> (b1). Ingest "
            "the missing weather and run `wadiro forecast --week 2019-04-01` again; first: "
            "wind_speed_ms missing for 161 of 168 target-week hours.") in first
    assert ("1 building(s): flagged readings treated as missing in the history of the week of "
            "2019-04-01</b> (b1)") in first and "first: 3 flagged hour(s)" in first
    assert ("1 building(s): forecast for the week of 2019-04-01 by persistence: no learned "
            "forecast could be trusted</b> (b&lt;script&gt;") in first
    assert "no learned model beat seasonal naive on its record" in first


def _chromium(browser: str, profile, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
         "--no-first-run", "--disable-background-networking", "--disable-component-update",
         "--disable-sync", f"--user-data-dir={profile}", "--hide-scrollbars",
         "--window-size=1400,3000", "--virtual-time-budget=10000", *args],
        capture_output=True, text=True, timeout=120, check=True)


def test_a_headless_browser_renders_the_tables_and_plots(warehouse, tmp_path, browser):
    write_report(warehouse, tmp_path / "out", None)
    page = tmp_path / "out" / "report.html"
    dom = _chromium(browser, tmp_path / "profile", "--dump-dom", page.as_uri()).stdout
    body = dict(re.findall(r'data-([a-z-]+)="([^"]*)"', re.search(r"<body([^>]*)>", dom).group(1)))
    # the page's own check ran in the browser: every plot decoded, every table laid out: the
    # portfolio's week and both buildings' plots; next week per portfolio, peaks per building,
    # accuracy per portfolio and per building, leaderboard, published models, the portfolio
    # bands' calibration, data quality
    assert body["plots-rendered"] == "3", body
    assert body["tables-rendered"] == "8", body
    # the manager's part first, and every table within a page 1,400 px wide
    assert 0 < int(body["manager-top"]) < int(body["modeller-top"]), body
    assert int(body["widest-table"]) <= 1400 - 2 * 16, body
    for section in ("next-week", "peaks", "accuracy", "problems"):
        assert f'id="{section}"' in dom
    assert dom.index('id="next-week"') < dom.index('id="problems"') < dom.index('id="modeller"')
    board = re.search(r"<h2>Leaderboard against seasonal naive</h2><table>(.*?)</table>", dom).group(1)
    published = re.search(r'<tr class="published">(.*?)</tr>', board).group(1)
    cells = re.findall(r"<td>(.*?)</td>", published)
    assert cells[:3] == ["published", "2", "3.000"]  # gp on b1 (2.0) and naive on NASTY (4.0)
    assert "b1, published model per week: 2019-04-01: gp" in dom
    # the portfolio 'all' sums both buildings: 2 of 2, peak 10 + 2 + 11 + 2 = 25 kWh
    portfolio = re.search(r'<tr class="portfolio">(.*?)</tr>', dom).group(1)
    assert re.findall(r"<td>(.*?)</td>", portfolio)[:2] == ["all", "2 of 2"]
    shot = tmp_path / "shot.png"
    _chromium(browser, tmp_path / "profile", f"--screenshot={shot}", page.as_uri())
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 50_000
