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

With ``--portfolios P``, P more named portfolios of 2 to 49 buildings drawn at random (a
large operator's file); with ``--commands``, the commands an operator runs are measured as
child processes, wall, CPU and peak memory: ``wadiro export --portfolios all``, ``wadiro
export`` (every building) and ``wadiro report`` (which reads every portfolio).

    python benchmarks/portfolio_cost.py                         # 1,000 buildings, 3 weeks (~2 min)
    python benchmarks/portfolio_cost.py --stored-weeks 52 --history-weeks 64
    python benchmarks/portfolio_cost.py --buildings 10000 --history-weeks 12 --portfolios 100000 \
        --commands
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
from _commands import measure, wadiro  # noqa: E402

START = date(2024, 1, 1)
RUN_CPU_S = 577.0
"""A steady weekly run of fleet_scale.py's 1,000 buildings, CPU seconds (docs/benchmarks.md)."""
GOAL_SHARE = 0.02
MODELS = ("wadiro_pcscnn", "wadiro_scnn", "gp", "svr", "wadiro_linreg", "seasonal_naive",
          "day_type_naive")


def fabricate_results(warehouse: Path, weeks: list[date]) -> None:
    """Per building and week in ``weeks``: every model's forecast (the readings times a
    model's own noise), the published one (a model per building) and its validation errors
    (on the week before); then every forecast's scores (the report needs some)."""
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
        con.execute("""
            INSERT INTO scores (building_id, model, target_week, mae, rmse, mean_actual,
                                n_hours, n_violations, n_train_violations, run_id,
                                coverage_80, coverage_95, width_80, width_95)
            SELECT f.building_id, f.model, f.target_week, avg(abs(f.y_hat - r.kwh)),
                   sqrt(avg((f.y_hat - r.kwh) ^ 2)), avg(r.kwh), count(r.kwh), 0, 0, 'bench',
                   0.8, 0.95, avg(f.y_hi_80 - f.y_lo_80), avg(f.y_hi_95 - f.y_lo_95)
            FROM forecasts f JOIN meter_readings r USING (building_id, ts)
            WHERE r.kwh IS NOT NULL GROUP BY ALL""")


def add_portfolios(warehouse: Path, folder: Path) -> None:
    """4 named portfolios, each a quarter of the buildings (by id order)."""
    with connect(warehouse, read_only=True) as con:
        ids = [r[0] for r in con.execute("SELECT building_id FROM buildings ORDER BY 1").fetchall()]
    members = folder / "portfolios.csv"
    members.write_text("portfolio_id,building_id\n" + "".join(
        f"quarter_{i % 4},{b}\n" for i, b in enumerate(ids)))
    wadiro("ingest", "portfolios", str(members), "--warehouse", str(warehouse), quiet=True)


def add_random_portfolios(warehouse: Path, n: int) -> int:
    """``n`` portfolios ``r000000``... of 2 to 49 buildings each, drawn by a hash; their
    memberships."""
    with connect(warehouse) as con, transaction(con):
        con.execute("""
            INSERT INTO portfolios
            WITH ids AS (SELECT building_id, row_number() OVER (ORDER BY building_id) - 1 AS i
                         FROM buildings)
            SELECT DISTINCT printf('r%06d', p), ids.building_id
            FROM range(?) a(p), (SELECT count(*) AS n FROM buildings) c,
                 LATERAL (SELECT unnest(range(2 + (hash(p) % 48)::BIGINT)) AS k) m
            JOIN ids ON ids.i = (hash(p * 1000 + m.k) % c.n)::BIGINT""", [n])
        return con.execute("SELECT count(*) FROM portfolios WHERE portfolio_id LIKE 'r%'"
                           ).fetchall()[0][0]


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
    parser.add_argument("--portfolios", type=int, default=0,
                        help="more named portfolios, drawn at random (default none)")
    parser.add_argument("--commands", action="store_true",
                        help="measure wadiro export and wadiro report as commands too")
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
        if args.portfolios:
            print(f"{args.portfolios:,} more portfolios, "
                  f"{add_random_portfolios(warehouse, args.portfolios):,} memberships")
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
        commands = {"wadiro export --portfolios all": ("export", "--portfolios", "all"),
                    "wadiro export (every building)": ("export",),
                    "wadiro report": ("report", "--out", str(folder / "report"))}
        for name, command in commands.items() if args.commands else ():
            out = [] if "--out" in command else ["--out", str(folder / "export.csv")]
            m = measure(*command, *out, "--warehouse", str(warehouse))
            print(f"{name:<34} wall {m.wall:7.1f} s, CPU {m.cpu:7.1f} s, peak memory "
                  f"{m.peak_total / 2**30:.2f} GiB", flush=True)
    print(f"{'step':<52} {'CPU s':>7} {'wall s':>7} {'of a weekly run':>16}")
    for name, (cpu, wall) in measured.items():
        print(f"{name:<52} {cpu:7.2f} {wall:7.2f} {cpu / RUN_CPU_S:15.2%}")
    worst = max(cpu for cpu, _ in measured.values())
    print(f"\ngoal: each at most {GOAL_SHARE:.0%} of a weekly run's {RUN_CPU_S:.0f} CPU-s "
          f"({GOAL_SHARE * RUN_CPU_S:.1f} CPU-s): "
          f"{'met' if worst <= GOAL_SHARE * RUN_CPU_S else 'MISSED'}")


if __name__ == "__main__":
    main()
