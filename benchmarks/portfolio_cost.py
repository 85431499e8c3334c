"""What the portfolios cost: the CPU of reading a week's portfolio forecasts (with their bands)
and scores for 1,000 buildings in 5 portfolios, against a weekly run's CPU on the same fleet.

A portfolio's forecast is a view (``portfolio_forecasts``), computed when it is read: by
``wadiro export --portfolios``, by the report, by an analyst's query. That read is the portfolio
step; the goal (issue 31) is at most 2 % of a weekly run's CPU on ``benchmarks/fleet_scale.py``'s
fleet of 1,000 buildings, whose steady weekly run takes 577 CPU-s (docs/benchmarks.md).

Set-up (not timed): ``wadiro ingest synthetic --buildings N --weeks W``, then results of the
last K weeks written straight into the result tables the way a run writes them (the portfolio
step's cost depends on how many rows there are, not on how they were computed): per building
and week 7 models' forecasts with intervals (``forecasts``), one published (``publications``),
and its validation errors (``validation_errors``); 4 named portfolios of N / 4 buildings, with
``all`` 5. K = 3 is what ``fleet_scale.py`` leaves (its tuning run and two weekly runs);
``--stored-weeks 52`` is a year of weekly runs.

Measured, best of three, CPU of this process (DuckDB's threads included; ``time.process_time``)
and wall: the 5 portfolios' forecasts of the latest week (``read_portfolio_forecasts``), their
scores of the week before (``read_portfolio_scores``), and an export of the 5 portfolios at
30 minutes (``export_forecasts``, the file written).

    python benchmarks/portfolio_cost.py                         # 1,000 buildings, 3 weeks (~2 min)
    python benchmarks/portfolio_cost.py --stored-weeks 52 --history-weeks 64
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import date, timedelta
from pathlib import Path

from tasks.outputs.export import export_forecasts
from tasks.warehouse.connection import connect, transaction
from tasks.warehouse.portfolio_sql import (
    read_portfolio_forecasts,
    read_portfolio_scores,
)

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _commands import wadiro  # noqa: E402

START = date(2024, 1, 1)
RUN_CPU_S = 577.0
"""A steady weekly run of fleet_scale.py's 1,000 buildings, CPU seconds (docs/benchmarks.md)."""
GOAL_SHARE = 0.02
MODELS = ("wadiro_pcscnn", "wadiro_scnn", "gp", "svr", "wadiro_linreg", "seasonal_naive",
          "day_type_naive")


def fabricate_results(warehouse: Path, weeks: list[date]) -> None:
    """Per building and week in ``weeks``: every model's forecast (the readings times a
    model's own noise), the published one (a model per building) and its validation errors
    (on the week before)."""
    models = ", ".join(f"('{m}', {i})" for i, m in enumerate(MODELS))
    with connect(warehouse) as con, transaction(con):
        for week in weeks:
            con.execute(f"""
                INSERT INTO forecasts (building_id, model, target_week, ts, y_hat, run_id,
                                       y_lo_80, y_hi_80, y_lo_95, y_hi_95)
                SELECT r.building_id, m.model, ?::DATE, r.ts,
                       r.kwh * (1 + 0.1 * sin(epoch(r.ts) / 3600 + m.k)) AS y, 'bench',
                       r.kwh * 0.85, r.kwh * 1.15, r.kwh * 0.75, r.kwh * 1.25
                FROM meter_readings r CROSS JOIN (VALUES {models}) AS m(model, k)
                WHERE r.ts >= ?::DATE AND r.ts < ?::DATE + 7""", [week, week, week])
            con.execute(f"""
                INSERT INTO publications (building_id, target_week, model, reason,
                                          expected_ratio, run_id)
                SELECT building_id, ?::DATE,
                       ({'[' + ', '.join(repr(m) for m in MODELS) + ']'})[
                           CAST(1 + hash(building_id) % {len(MODELS)} AS BIGINT)], 'bench', 0.9,
                       'bench'
                FROM buildings""", [week])
            con.execute("""
                INSERT INTO validation_errors (building_id, target_week, model, ts, error, run_id)
                SELECT r.building_id, ?::DATE, p.model, r.ts,
                       r.kwh * 0.1 * sin(epoch(r.ts) / 7200), 'bench'
                FROM meter_readings r JOIN publications p
                  ON p.building_id = r.building_id AND p.target_week = ?::DATE
                WHERE r.ts >= ?::DATE - 7 AND r.ts < ?::DATE AND r.kwh IS NOT NULL""",
                        [week, week, week, week])


def add_portfolios(warehouse: Path, folder: Path) -> None:
    """4 named portfolios, each a quarter of the buildings (by id order)."""
    with connect(warehouse, read_only=True) as con:
        ids = [r[0] for r in con.execute("SELECT building_id FROM buildings ORDER BY 1").fetchall()]
    members = folder / "portfolios.csv"
    members.write_text("portfolio_id,building_id\n" + "".join(
        f"quarter_{i % 4},{b}\n" for i, b in enumerate(ids)))
    wadiro("ingest", "portfolios", str(members), "--warehouse", str(warehouse), quiet=True)


def best_of(n: int, step: Callable[[], object]) -> tuple[float, float]:
    """The least CPU and wall seconds of ``n`` runs of ``step``."""
    cpu, wall = [], []
    for _ in range(n):
        c, w = time.process_time(), time.perf_counter()
        step()
        cpu.append(time.process_time() - c)
        wall.append(time.perf_counter() - w)
    return min(cpu), min(wall)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--buildings", type=int, default=1000)
    parser.add_argument("--history-weeks", type=int, default=16)
    parser.add_argument("--stored-weeks", type=int, default=3)
    parser.add_argument("--keep", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="portfolio-cost-") as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        warehouse = folder / "fleet.duckdb"
        began = time.perf_counter()
        wadiro("ingest", "synthetic", "--buildings", str(args.buildings), "--start",
               START.isoformat(), "--weeks", str(args.history_weeks), "--warehouse",
               str(warehouse), quiet=True)
        last = START + timedelta(weeks=args.history_weeks - 1)
        weeks = [last - timedelta(weeks=k) for k in reversed(range(args.stored_weeks))]
        fabricate_results(warehouse, weeks)
        add_portfolios(warehouse, folder)
        with connect(warehouse, read_only=True) as con:
            rows = con.execute("SELECT (SELECT count(*) FROM forecasts), "
                               "(SELECT count(*) FROM meter_readings)").fetchone()
        print(f"{args.buildings} buildings in 5 portfolios, {args.stored_weeks} week(s) of "
              f"results ({rows[0]:,} forecast rows, {rows[1]:,} readings); set up in "
              f"{time.perf_counter() - began:.0f} s\n")
        portfolios = ["all", "quarter_0", "quarter_1", "quarter_2", "quarter_3"]
        with connect(warehouse, read_only=True) as con:
            con.execute("SET enable_progress_bar = false")
            steps = {
                "portfolio_forecasts of the latest week": lambda: read_portfolio_forecasts(
                    con, portfolios, [weeks[-1]]),
                "portfolio_scores of the week before": lambda: read_portfolio_scores(
                    con, portfolios, [weeks[-2] if len(weeks) > 1 else weeks[-1]]),
            }
            measured = {name: best_of(3, step) for name, step in steps.items()}
        measured["wadiro export --portfolios (5) --resolution 30"] = best_of(3, lambda: (
            export_forecasts(warehouse, folder / "portfolios.csv", portfolios=portfolios,
                             resolution=30)))
    print(f"{'step':<52} {'CPU s':>7} {'wall s':>7} {'of a weekly run':>16}")
    for name, (cpu, wall) in measured.items():
        print(f"{name:<52} {cpu:7.2f} {wall:7.2f} {cpu / RUN_CPU_S:15.2%}")
    worst = max(cpu for cpu, _ in measured.values())
    print(f"\ngoal: each at most {GOAL_SHARE:.0%} of a weekly run's {RUN_CPU_S:.0f} CPU-s "
          f"({GOAL_SHARE * RUN_CPU_S:.1f} CPU-s): {'met' if worst <= GOAL_SHARE * RUN_CPU_S else 'MISSED'}")


if __name__ == "__main__":
    main()
