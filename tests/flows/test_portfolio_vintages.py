"""The portfolio bid kept as issued (issue 60): each run writes its portfolios' hourly totals and
bands as issued when it closes; a re-run of the week adds its own vintage and never rewrites the
first; ``wadiro export --portfolios --as-of`` gives back, byte for byte, what the export wrote
right after the first run, hourly and per half-hour, bands included."""

from __future__ import annotations

import hashlib
import time
from datetime import UTC, date, datetime
from pathlib import Path

import pytest

from flows.engine import run_flow
from flows.forecast import weekly_forecast_flow
from flows.settings import WeeklySettings
from tasks.warehouse.connection import connect
from tests.cli_runs import invoke
from tests.flows.warehouse_rows import make_warehouse

MODELS = ["seasonal_naive", "wadiro_linreg"]
WEEK = date(2024, 4, 1)  # the fleet's 14 weeks end on Sunday 2024-04-07
ONE = "synthetic_b00000"
VINTAGE = ("SELECT * FROM issued_portfolio_forecasts WHERE run_id = ? "
           "ORDER BY portfolio_id, target_week, ts")


@pytest.fixture
def warehouse(tmp_path) -> Path:
    """Two synthetic buildings, and a named portfolio of the first."""
    path = make_warehouse(tmp_path / "w.duckdb", buildings=2)
    with connect(path) as con:
        con.execute("INSERT INTO portfolios VALUES ('one', ?)", [ONE])
    return path


def _run(warehouse: Path) -> object:
    settings = WeeklySettings(warehouse=str(warehouse), models=MODELS, trials=1, runner="threads")
    return run_flow(weekly_forecast_flow, prefect=False, settings=settings, week=WEEK)


def _hash(warehouse: Path, run_id: str) -> str:
    with connect(warehouse, read_only=True) as con:
        rows = con.execute(VINTAGE, [run_id]).fetchall()
    assert len(rows) == 2 * 168  # `all` and `one`
    return hashlib.sha256(repr(rows).encode()).hexdigest()


def _export(warehouse: Path, out: Path, *args: str) -> bytes:
    done = invoke("export", "--out", str(out), "--week", str(WEEK), "--portfolios", "all,one",
                  "--warehouse", str(warehouse), *args)
    assert done.exit_code == 0, done.output
    return out.read_bytes()


def test_a_re_run_adds_a_portfolio_vintage_and_the_export_as_of_gives_the_first_bid(
        warehouse, tmp_path):
    first = _run(warehouse)
    bid = {m: _export(warehouse, tmp_path / f"bid{m}.csv", "--resolution", m)
           for m in ("60", "30")}
    issued = _hash(warehouse, first.run_id)
    time.sleep(0.05)
    between = datetime.now(UTC)
    time.sleep(0.05)
    with connect(warehouse) as con:  # late, corrected history: the re-run forecasts otherwise
        con.execute("UPDATE meter_readings SET kwh = kwh * 1.5 WHERE ts < ?", [WEEK])
    second = _run(warehouse)

    assert _hash(warehouse, first.run_id) == issued  # never rewritten
    with connect(warehouse, read_only=True) as con:
        vintages = con.execute("SELECT portfolio_id, run_id, vintage FROM "
                               "portfolio_vintage_scores ORDER BY ALL").fetchall()
        bands = con.execute("SELECT count(*) FROM issued_portfolio_forecasts WHERE "
                            "y_lo_80 IS NULL OR y_hi_95 IS NULL").fetchone()[0]
    assert sorted(vintages, key=lambda v: (v[0], v[2])) == [
        ("all", first.run_id, 1), ("all", second.run_id, 2),
        ("one", first.run_id, 1), ("one", second.run_id, 2)]
    assert bands == 0
    for minutes in ("60", "30"):
        as_bid = _export(warehouse, tmp_path / f"as_bid{minutes}.csv", "--resolution", minutes,
                         "--as-of", between.isoformat())
        assert as_bid == bid[minutes]
        latest = _export(warehouse, tmp_path / f"latest{minutes}.csv", "--resolution", minutes)
        assert latest != bid[minutes]
        now = _export(warehouse, tmp_path / f"now{minutes}.csv", "--resolution", minutes,
                      "--as-of", datetime.now(UTC).isoformat())
        assert now == latest  # the re-run's bid, as the export gives it after the re-run


def test_an_export_as_of_a_time_before_any_portfolio_vintage_is_one_line(warehouse, tmp_path):
    _run(warehouse)
    done = invoke("export", "--out", str(tmp_path / "x.csv"), "--portfolios", "all",
                  "--as-of", "2000-01-03 06:00", "--warehouse", str(warehouse))
    assert done.exit_code == 1 and len(done.output.strip().splitlines()) == 1
    assert "no portfolio forecast is kept as issued by 2000-01-03 06:00" in done.output
    assert not (tmp_path / "x.csv").exists()

