"""The weekly deployment at fleet scale: wall time, CPU per building, peak memory, and the share
of CPU spent outside the forecasting protocol, for a synthetic fleet (default 1,000 buildings).

Set-up (not timed), in a temporary directory unless ``--keep DIR``:

1. ``wadiro ingest synthetic``: N buildings, 13 + K weeks from 2024-01-01, so the 14th week
   (2024-04-01), the first measured one, has its 12 weeks of history and the lags' lookback.
2. Tuning stored beforehand by a short tuning run: ``wadiro forecast --week <the week before>
   --tuning per-window --trials T`` on a sample of S buildings (spread over the building types).
   Every other building then gets, as its stored tuning of that week, the hyperparameters of a
   sample building of its own type (rows of ``model_fits`` with ``tuned_week = target_week``,
   which is what ``--tuning reuse`` reads; ``run_id`` says they were copied). Tuning all N would
   take hours, and the weekly run's cost depends on the hyperparameters' sizes, not on whose
   window chose them.

Measured: K consecutive weekly runs (``--weeks``, default 2), each ``wadiro forecast --week
MONDAY --tuning reuse`` with every model and the deployment's defaults (processes runner, one
worker per core, the automatic batch size: at most 10 buildings a batch), as a child process,
exactly as the weekly deployment's flow runs it without a Prefect server. The first is the first
week after the tuning run: the buildings whose tuning was copied have no forecast of the week
before, so every learned model also fits the 11 weeks before the validation week. From the
second on, the weekly run is in its steady state: the forecasts issued a week earlier are the
validation forecasts (``validation_source``).
For each run:

* wall: ``time.perf_counter`` around the child;
* CPU: user + system time of the child and every process it started (``getrusage`` of the
  children, taken after the child and its workers have ended);
* peak memory: the largest sum of resident memory over the child's process tree, sampled every
  0.2 s (shared pages count once per process, so this errs high), and the largest process;
* inside the protocol: the run's ``window_status.compute_time_s`` (CPU of features, fits,
  certificates and scoring per building-week, in the workers); everything else -- start-up,
  Prefect, reading the warehouse, moving data to and from workers, writing results -- is
  outside it. Model fitting itself is split by model from ``model_fits``.

After the first measured run its results (forecasts of every model, publications, vintages,
scores, validation errors, window status) are copied into the weeks before the tuned one
(``--vintage-weeks``, default 8: the copies and the measured weeks), so that the steady run
reads, rescores and writes beside 8 weeks of results, as a deployment does, and the analyst's
usual queries are timed over 8 weeks of vintages (best of three, wall, fetched as Arrow, on a
read-only connection): the latest week's published forecasts of one building and of a portfolio
of 1,000 buildings (``--portfolio``: every n-th building, ingested as portfolio ``p1000``
before the runs; its rows, and its hourly total with bands as the export reads it), one
building's vintages, and the leaderboard. Then ``wadiro report`` and ``wadiro export`` (every
building; ``--portfolios all``) are measured as commands, and the warehouse's size is given.

    python benchmarks/fleet_scale.py                       # 1,000 buildings, two weekly runs
    python benchmarks/fleet_scale.py --buildings 100 --weeks 3
    python benchmarks/fleet_scale.py --buildings 10000 --keep /data/fleet10k
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import date, timedelta
from pathlib import Path

from _commands import Measured, RunFacts, latest_run, measure, print_stages, wadiro

from tasks.warehouse.connection import connect, transaction
from tasks.warehouse.portfolio_sql import read_portfolio_forecasts

START = date(2024, 1, 1)
WEEK = date(2024, 4, 1)  # the 14th local week of the fleet: the first measured weekly run
TUNED_WEEK = WEEK - timedelta(weeks=1)
GOALS = {"wall_min": 15.0, "outside_share": 0.05}


def tuning_sample(warehouse: Path, size: int) -> list[str]:
    """``size`` buildings taken round-robin over the building types (in id order), and at least
    one of every type, so that every building has a donor of its own type."""
    with connect(warehouse, read_only=True) as con:
        rows = con.execute(
            "SELECT building_id FROM (SELECT building_id, row_number() OVER "
            "(PARTITION BY building_type ORDER BY building_id) AS k, building_type FROM buildings) "
            "ORDER BY k, building_type "
            "LIMIT greatest(?, (SELECT count(DISTINCT building_type) FROM buildings))",
            [size]).fetchall()
    return [r[0] for r in rows]


def copy_tuning(warehouse: Path, sample: list[str]) -> int:
    """Give every building outside ``sample`` the stored tuning of a sample building of its type
    (the i-th building of a type gets the (i mod k)-th of the k sample buildings of that type)."""
    with connect(warehouse) as con, transaction(con):
        con.execute(
            """
            INSERT INTO model_fits (building_id, model, target_week, status, params, tuned_week,
                                    n_train, run_id)
            WITH donors AS (
                SELECT b.building_id AS donor, b.building_type,
                       row_number() OVER (PARTITION BY b.building_type ORDER BY b.building_id) - 1
                           AS k,
                       count(*) OVER (PARTITION BY b.building_type) AS n
                FROM buildings b WHERE b.building_id IN (SELECT unnest(?::VARCHAR[]))),
            takers AS (
                SELECT building_id, building_type,
                       row_number() OVER (PARTITION BY building_type ORDER BY building_id) - 1 AS i
                FROM buildings WHERE building_id NOT IN (SELECT unnest(?::VARCHAR[])))
            SELECT t.building_id, f.model, f.target_week, f.status, f.params, f.tuned_week,
                   f.n_train, 'benchmark: tuning copied from ' || f.building_id
            FROM takers t
            JOIN donors d ON d.building_type = t.building_type AND d.k = t.i % d.n
            JOIN model_fits f ON f.building_id = d.donor AND f.target_week = ?
                              AND f.tuned_week = f.target_week AND f.status = 'ok'
            """, [sample, sample, TUNED_WEEK])
        return con.execute("SELECT count(*) FROM model_fits WHERE run_id LIKE 'benchmark:%'"
                           ).fetchone()[0]


COPIED = ("forecasts", "issued_forecasts", "publications", "scores", "validation_errors",
          "window_status")
"""The tables a weekly run writes per building-week that the copies fill (``model_fits`` and
``tuning_trials`` are left out: ``--tuning reuse`` reads the latest stored tuning)."""


def copy_weeks_back(warehouse: Path, week: date, weeks_back: list[int]) -> None:
    """Copy ``week``'s results of every building into the weeks ``weeks_back`` weeks before it,
    hours moved by whole local weeks (``run_id`` saying they are copies)."""
    with connect(warehouse) as con:
        for k in weeks_back:
            with transaction(con):
                for table in COPIED:
                    columns = [r[0] for r in con.execute(
                        "SELECT column_name FROM information_schema.columns WHERE table_name = ? "
                        "ORDER BY ordinal_position", [table]).fetchall()]
                    moved = {"target_week": f"t.target_week - {7 * k}",
                             "run_id": "'benchmark: copy of ' || t.run_id",
                             "ts": f"timezone(b.timezone, timezone(b.timezone, t.ts) - "
                                   f"INTERVAL {7 * k} DAY)",
                             "issued_at": f"t.issued_at - INTERVAL {7 * k} DAY"}
                    con.execute(
                        f"INSERT INTO {table} SELECT "
                        f"{', '.join(moved.get(c, f't.{c}') for c in columns)} "
                        f"FROM {table} t JOIN buildings b USING (building_id) "
                        "WHERE t.target_week = ?", [week])
        con.execute("CHECKPOINT")


def add_portfolio(warehouse: Path, folder: Path, size: int) -> str:
    """Portfolio ``p{size}``: every n-th building (by id), ``size`` of them."""
    with connect(warehouse, read_only=True) as con:
        ids = [r[0] for r in con.execute("SELECT building_id FROM buildings ORDER BY 1").fetchall()]
    name, step = f"p{size}", max(1, len(ids) // size)
    members = folder / "portfolios.csv"
    members.write_text("portfolio_id,building_id\n"
                       + "".join(f"{name},{b}\n" for b in ids[::step][:size]))
    wadiro("ingest", "portfolios", str(members), "--warehouse", str(warehouse), quiet=True)
    return name


def best_of(n: int, step: Callable[[], object]) -> float:
    walls = []
    for _ in range(n):
        began = time.perf_counter()
        step()
        walls.append(time.perf_counter() - began)
    return min(walls)


def time_queries(warehouse: Path, portfolio: str) -> dict[str, float]:
    """The analyst's usual queries, best of three, wall seconds."""
    latest = "(SELECT max(target_week) FROM publications)"
    with connect(warehouse, read_only=True) as con:
        con.execute("SET enable_progress_bar = false")
        one, week = con.execute(f"SELECT min(building_id), {latest} FROM buildings").fetchall()[0]
        queries: dict[str, Callable[[], object]] = {
            "latest week, one building (published_forecasts)": lambda: con.sql(
                f"SELECT * FROM published_forecasts WHERE building_id = ? "
                f"AND target_week = {latest}", params=[one]).to_arrow_table(),
            f"latest week, portfolio {portfolio}'s buildings (published_forecasts)": lambda: (
                con.sql("SELECT * FROM published_forecasts WHERE target_week = "
                f"{latest} AND building_id IN (SELECT building_id FROM portfolios "
                "WHERE portfolio_id = ?)", params=[portfolio]).to_arrow_table()),
            f"latest week, portfolio {portfolio}'s total with bands": lambda: (
                read_portfolio_forecasts(con, [portfolio], [week])),
            "one building's vintages (vintage_scores)": lambda: con.sql(
                "SELECT * FROM vintage_scores WHERE building_id = ?", params=[one]
            ).to_arrow_table(),
            "the leaderboard (leaderboard)": lambda: con.sql(
                "SELECT * FROM leaderboard").to_arrow_table(),
        }
        return {name: best_of(3, query) for name, query in queries.items()}


def report_outputs(warehouse: Path, folder: Path, portfolio: str) -> None:
    """The analyst's queries, the report and the exports, and the warehouse's size."""
    size = sum(p.stat().st_size for p in warehouse.parent.glob(warehouse.name + "*"))
    with connect(warehouse, read_only=True) as con:
        weeks, rows = con.execute("SELECT count(DISTINCT target_week), count(*) "
                                  "FROM issued_forecasts").fetchone()
    print(f"\n== the warehouse after the runs: {size / 2**20:,.0f} MiB, {weeks} weeks of "
          f"vintages ({rows:,} issued rows) ==")
    for name, wall in time_queries(warehouse, portfolio).items():
        print(f"{name:<66}{wall:8.3f} s   goal < 1 s  {'met' if wall < 1 else 'NOT met'}")
    commands = {
        "wadiro report": ("report", "--out", str(folder / "report")),
        "wadiro export (every building, CSV)": ("export", "--out", str(folder / "all.csv")),
        "wadiro export --portfolios all (CSV)": ("export", "--portfolios", "all", "--out",
                                                 str(folder / "portfolio.csv")),
    }
    for name, args in commands.items():
        m = measure(*args, "--warehouse", str(warehouse))
        print(f"{name:<40} wall {m.wall:6.1f} s, CPU {m.cpu:6.1f} s, peak memory "
              f"{m.peak_total / 2**30:.2f} GiB", flush=True)


def fabricate(warehouse: Path, weeks: int) -> None:
    """``weeks`` weeks of results up to the fleet's last, written by SQL as
    ``benchmarks/portfolio_cost.py`` writes them, each published forecast issued as a vintage
    on its Monday 06:00 UTC."""
    from portfolio_cost import fabricate_results

    began = time.perf_counter()
    last = START + timedelta(weeks=13 + weeks - 1)
    fabricate_results(warehouse, [last - timedelta(weeks=k) for k in reversed(range(weeks))])
    with connect(warehouse) as con, transaction(con):
        con.execute("""
            INSERT INTO issued_forecasts (building_id, model, target_week, ts, y_hat, run_id,
                                          y_lo_80, y_hi_80, y_lo_95, y_hi_95, issued_at,
                                          outcome, reason)
            SELECT f.building_id, f.model, f.target_week, f.ts, f.y_hat, f.run_id, f.y_lo_80,
                   f.y_hi_80, f.y_lo_95, f.y_hi_95, f.target_week + INTERVAL 6 HOUR,
                   'learned', p.reason
            FROM forecasts f JOIN publications p USING (building_id, target_week, model)""")
    print(f"set-up: {weeks} weeks of results written by SQL "
          f"({time.perf_counter() - began:.0f} s)", flush=True)


def measure_weekly_run(warehouse: Path, week: date, args: argparse.Namespace) -> Measured:
    workers = ["--workers", str(args.workers)] if args.workers else []
    batches = ["--batch-size", str(args.batch_size)] if args.batch_size else []
    return measure("forecast", "--warehouse", str(warehouse), "--week", week.isoformat(),
                   "--tuning", "reuse", *workers, *batches, quiet=False)


def report(n: int, week: date, m: Measured, facts: RunFacts) -> None:
    cpu_per = m.cpu / n
    outside = 1 - facts.inside / m.cpu if m.cpu else float("nan")
    print(f"\n== weekly run of {week}, {n:,} buildings, --tuning reuse, every model ==")
    print(f"building-weeks by status: {facts.status}")
    rows = [
        ("wall time", f"{m.wall / 60:.1f} min", f"< {GOALS['wall_min']:.0f} min",
         m.wall / 60 < GOALS["wall_min"]),
        ("CPU per building", f"{cpu_per:.2f} s", "-", None),
        ("peak memory (process tree)", f"{m.peak_total / 2**30:.2f} GiB", "-", None),
        ("largest process", f"{m.peak_one / 2**30:.2f} GiB", "-", None),
        ("CPU outside the protocol", f"{100 * outside:.1f} %",
         f"< {100 * GOALS['outside_share']:.0f} %", outside < GOALS["outside_share"]),
    ]
    for name, value, goal, met in rows:
        verdict = "" if met is None else ("met" if met else "NOT met")
        print(f"{name:<28}{value:>14}   goal {goal:<9}{verdict}")
    print(f"total CPU {m.cpu:.0f} s: inside the protocol {facts.inside:.0f} s, "
          f"outside {m.cpu - facts.inside:.0f} s\n")
    print_stages(facts, n)
    print("(fit: the final fit on the 12 weeks; a 'refit' validation forecast is one more fit on "
          "the 11 weeks before the validation week, inside the protocol's CPU but not in this "
          "column)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--buildings", type=int, default=1000)
    parser.add_argument("--sample", type=int, default=12,
                        help="buildings tuned by the short tuning run (default 12)")
    parser.add_argument("--trials", type=int, default=5, help="TPE trials of that run")
    parser.add_argument("--weeks", type=int, default=2,
                        help="consecutive weekly runs to measure (default 2)")
    parser.add_argument("--workers", type=int, default=None, help="default: cores")
    parser.add_argument("--batch-size", type=int, default=None,
                        help="buildings per batch of the weekly runs (default: the run's own)")
    parser.add_argument("--keep", type=Path, default=None,
                        help="build the warehouse in this folder and keep it")
    parser.add_argument("--vintage-weeks", type=int, default=8,
                        help="weeks of results the steady run and the queries see (default 8)")
    parser.add_argument("--portfolio", type=int, default=1000,
                        help="buildings of the portfolio the analyst reads (default 1,000)")
    parser.add_argument("--fabricated", action="store_true",
                        help="no runs: --vintage-weeks weeks of results written by SQL "
                             "(portfolio_cost.py's, with a vintage each), then the queries, "
                             "the report and the exports")
    args = parser.parse_args()
    os.environ.pop("PREFECT_API_URL", None)  # the command line's own engine, no server
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        warehouse = folder / "fleet.duckdb"
        if warehouse.exists():
            raise SystemExit(f"{warehouse} exists; give an empty --keep folder")
        wadiro("ingest", "synthetic", "--warehouse", str(warehouse), "--buildings",
               str(args.buildings), "--start", START.isoformat(), "--weeks",
               str(13 + (args.vintage_weeks if args.fabricated else args.weeks)))
        portfolio = add_portfolio(warehouse, folder, min(args.portfolio, args.buildings))
        if args.fabricated:
            fabricate(warehouse, args.vintage_weeks)
            report_outputs(warehouse, folder, portfolio)
            return
        sample = tuning_sample(warehouse, min(args.sample, args.buildings))
        started = time.perf_counter()
        wadiro("forecast", "--warehouse", str(warehouse), "--week", TUNED_WEEK.isoformat(),
               "--tuning", "per-window", "--trials", str(args.trials),
               "--buildings", ",".join(sample), quiet=True)
        copied = copy_tuning(warehouse, sample)
        print(f"set-up: tuned {len(sample)} sample buildings ({args.trials} trials, "
              f"{time.perf_counter() - started:.0f} s); copied {copied:,} stored tunings to the "
              f"other {args.buildings - len(sample):,} buildings", flush=True)
        for k in range(args.weeks):
            week = WEEK + timedelta(weeks=k)
            report(args.buildings, week, measure_weekly_run(warehouse, week, args),
                   latest_run(warehouse))
            if k == 0 and args.vintage_weeks > args.weeks:
                began = time.perf_counter()
                back = list(range(2, 2 + args.vintage_weeks - args.weeks))
                copy_weeks_back(warehouse, WEEK, back)
                print(f"copied the week's results into the {len(back)} weeks before "
                      f"{TUNED_WEEK} ({time.perf_counter() - began:.0f} s)")
            sys.stdout.flush()
        report_outputs(warehouse, folder, portfolio)


if __name__ == "__main__":
    main()
