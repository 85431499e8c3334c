"""A forecast an order of magnitude off what is known of its building is never bid silently
(issue 60): held out of every portfolio, named in the run line, ``runs`` and the exit code."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from tasks.warehouse.connection import connect
from tests.cli_runs import invoke
from tests.flows.warehouse_rows import FAST_MODELS, WEEKS, make_warehouse

WEEK = WEEKS[0]


def _forecast(warehouse: Path):
    return invoke("backfill", "--start", WEEK, "--end", WEEK, "--models", ",".join(FAST_MODELS),
                  "--trials", 2, "--runner", "threads", "--certify-nodes", 0,
                  "--warehouse", warehouse)


@pytest.fixture(scope="module")
def held(tmp_path_factory) -> dict:
    """Two synthetic buildings, the first declared a 10 m2 general office (TM46: 95 kWh/m2/year,
    0.108 kWh/h: its real draw is hundreds of times that), forecast for one week."""
    from flows import engine

    warehouse = make_warehouse(tmp_path_factory.mktemp("held") / "w.duckdb", buildings=2)
    with connect(warehouse) as con:
        first = con.execute("SELECT min(building_id) FROM buildings").fetchone()[0]
        con.execute("UPDATE buildings SET building_type = 'general office', floor_area_m2 = 10 "
                    "WHERE building_id = ?", [first])
    folder = warehouse.parent
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(engine, "configured_api_url", lambda: "")
        run = _forecast(warehouse)
        export = invoke("export", "--out", folder / "bid.csv", "--week", WEEK,
                        "--warehouse", warehouse)
        runs = invoke("runs", "--warehouse", warehouse)
        board = invoke("report", "--out", folder / "report", "--warehouse", warehouse)
    with connect(warehouse, read_only=True) as con:
        rows = {
            "publications": con.execute(
                "SELECT building_id, outcome, reason FROM publications ORDER BY 1").fetchall(),
            "runs": con.execute("SELECT status, n_held, message FROM runs").fetchone(),
            "level": con.execute(
                "SELECT avg(kwh) FROM meter_readings WHERE building_id = ?", [first]).fetchone()[0],
            "portfolio": con.execute(
                "SELECT DISTINCT n_buildings, n_buildings_expected FROM portfolio_forecasts "
                "WHERE portfolio_id = 'all' AND target_week = ?", [WEEK]).fetchall(),
            "vintage": con.execute(
                "SELECT DISTINCT n_buildings FROM issued_portfolio_forecasts "
                "WHERE portfolio_id = 'all'").fetchall(),
        }
    return {"first": first, "run": run, "export": export, "file": folder / "bid.csv",
            "listed": runs, "board": board, **rows}


def test_the_run_exits_5_naming_the_held_building(held):
    assert held["run"].exit_code == 5, held["run"].output
    output = held["run"].output
    assert "1 held out of every bid" in output
    assert f"held: {held['first']} {WEEK}: its forecast's mean of" in output
    assert "10 m2 of general office (CIBSE TM46: 95 kWh/m2/year)" in output


def test_the_held_publication_is_stored_with_its_reason_and_the_other_bid(held):
    (first, outcome, reason), (_, other, _) = held["publications"]
    assert first == held["first"] and outcome == "held" and other != "held"
    # 95 kWh/m2/year x 10 m2 / 8760 h = 0.1084 kWh/h; the forecast is near the building's level
    assert "0.1084 kWh/h" in reason
    factor = float(reason.split(" is ")[1].split("x ")[0].replace(",", ""))
    assert factor == pytest.approx(held["level"] / (95 * 10 / 8760), rel=0.5)


def test_the_runs_row_counts_and_names_it(held):
    status, n_held, message = held["runs"]
    assert (status, n_held) == ("completed_with_held", 1)
    assert held["first"] in message


def test_the_held_building_is_in_no_portfolio_and_no_export(held):
    assert held["portfolio"] == [(1, 2)] and held["vintage"] == [(1,)]
    assert held["export"].exit_code == 0, held["export"].output
    assert (f"1 building(s) held out of every bid, not written ('{held['first']}'"
            in held["export"].output)
    rows = pd.read_csv(held["file"])
    assert held["first"] not in set(rows["building_id"]) and len(rows) == 167  # the clocks go forward
    assert set(rows["outcome"]) == {"learned"}  # each row says what kind of forecast it is


def test_wadiro_runs_names_the_held_count(held):
    assert held["listed"].exit_code == 0
    assert "completed_with_held" in held["listed"].output
    assert "1 held out of every bid" in held["listed"].output


def test_the_leaderboards_published_row_leaves_the_held_week_out(held):
    assert held["board"].exit_code == 0, held["board"].output
    board = pd.read_csv(held["file"].parent / "report" / "leaderboard.csv").set_index("model")
    assert board.loc["published", "n_building_weeks"] == 1
    assert board.loc["seasonal_naive", "n_building_weeks"] == 2


def test_the_managers_page_names_the_held_building(held):
    page = (held["file"].parent / "report" / "report.html").read_text()
    assert "held out of every bid for the week of 2024-03-25" in page
    assert held["first"] in page.split("held out of every bid for the week")[1][:2000]
