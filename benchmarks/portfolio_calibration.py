"""Portfolio bands on real buildings: how often the portfolio's hourly total fell inside its
80 % and 95 % bands, and how wide the 80 % band was against its buildings' 80 % bands added up
(the only portfolio band before: too wide, as building errors partly cancel).

Set-up: ``wadiro ingest cambridge`` of N real buildings (default the first 15 with readings for
at least 90 % of the hours of 2018 and 2019), a named portfolio ``third`` of every third of them
(by id), then ``wadiro backfill`` of consecutive weeks (default the 25 Mondays from 2019-01-07
to 2019-06-24) with the deployed protocol's defaults, exactly as an operator runs it. Read from
``portfolio_scores`` per portfolio, pooled over the scored hours:

* the weeks by how many earlier published weeks calibrated their bands: the backfill's first
  week (its validation week only), weeks with a record of 1 to 7 weeks, with the full record
  (8), and every week with a record;
* ``every week as a first week``: the same weeks with bands from their validation week alone
  (what a portfolio's first week gets, measured over every week).

Goals (issue 31): with a record, 80 % covers 75-85 % of hours, 95 % covers 90-97 %, and the
80 % band is at most 0.8 times as wide as the buildings' bands added up.

    python benchmarks/portfolio_calibration.py                    # ~4 min on the 2-core machine
    python benchmarks/portfolio_calibration.py --keep /tmp/pf     # keep the warehouse
    python benchmarks/portfolio_calibration.py --warehouse /tmp/pf/portfolios.duckdb  # its table
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

from tasks.warehouse.connection import connect
from tasks.warehouse.portfolio_sql import calibration_rows, read_portfolio_scores

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _commands import wadiro  # noqa: E402

ARCHIVE = Path(__file__).resolve().parents[2] / "shared" / "data" / "cambridge-estates"
BUILDINGS = tuple(f"UCam_Building_b{n}" for n in (0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 12, 13, 14, 15))
"""The first 15 buildings (by number) with readings for at least 90 % of 2018's and 2019's
hours (``forecast_quality.complete_buildings``)."""
START, END = "2019-01-07", "2019-06-24"
GOALS = {"coverage_80": (0.75, 0.85), "coverage_95": (0.90, 0.97), "width_ratio_80": (0.0, 0.8)}
WITH_RECORD = "every week with a record"
FIRST = "every week as a first week"


def third(buildings: list[str]) -> list[str]:
    """Every third building, by id: the named portfolio."""
    return sorted(buildings)[::3]


def backfilled_warehouse(folder: Path, buildings: list[str], start: str, end: str,
                         archive: Path = ARCHIVE) -> Path:
    """The warehouse of the set-up (module docstring), made with the ``wadiro`` command."""
    warehouse = folder / "portfolios.duckdb"
    history = (pd.Timestamp(start) - pd.Timedelta(weeks=18)).date().isoformat()
    after = (pd.Timestamp(end) + pd.Timedelta(weeks=1)).date().isoformat()
    wadiro("ingest", "cambridge", "--path", str(archive), "--buildings", ",".join(buildings),
           "--start", history, "--end", after, "--warehouse", str(warehouse), quiet=True)
    members = folder / "portfolios.csv"
    members.write_text("portfolio_id,building_id\n" + "".join(f"third,{b}\n"
                                                              for b in third(buildings)))
    wadiro("ingest", "portfolios", str(members), "--warehouse", str(warehouse), quiet=True)
    wadiro("backfill", "--start", start, "--end", end, "--warehouse", str(warehouse), quiet=True)
    return warehouse


def calibration_table(warehouse: Path) -> pd.DataFrame:
    """The benchmark's table: each portfolio's groups of weeks, then every week calibrated as
    a first week."""
    with connect(warehouse, read_only=True) as con:
        grouped = calibration_rows(read_portfolio_scores(con))
        first = calibration_rows(read_portfolio_scores(con, record_weeks=0)).assign(weeks=FIRST)
    table = pd.concat([grouped, first], ignore_index=True)
    order = {p: i for i, p in enumerate(dict.fromkeys(grouped["portfolio_id"]))}
    return table.sort_values("portfolio_id", key=lambda s: s.map(order), kind="stable")


def misses(table: pd.DataFrame, weeks: str = WITH_RECORD) -> list[str]:
    """The goals a portfolio's ``weeks`` row misses, as text (empty: all met)."""
    out = []
    for row in table[table["weeks"] == weeks].itertuples():
        for column, (low, high) in GOALS.items():
            value = getattr(row, column)
            if not low <= value <= high:
                out.append(f"{row.portfolio_id} {weeks}: {column} {value:.3f} not in "
                           f"[{low}, {high}]")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--buildings", default=",".join(BUILDINGS))
    parser.add_argument("--start", default=START)
    parser.add_argument("--end", default=END)
    parser.add_argument("--keep", type=Path, help="make the warehouse in this folder and keep it")
    parser.add_argument("--warehouse", type=Path,
                        help="a warehouse made before (--keep): its table, without a backfill")
    args = parser.parse_args()
    began = time.perf_counter()
    if args.warehouse:
        with connect(args.warehouse, read_only=True) as con:
            buildings = [r[0] for r in con.execute("SELECT building_id FROM buildings").fetchall()]
            first, last = con.execute("SELECT min(target_week), max(target_week) "
                                      "FROM publications").fetchone()
        table, made = calibration_table(args.warehouse), f"made before ({first} to {last})"
    else:
        buildings = args.buildings.split(",")
        with tempfile.TemporaryDirectory(prefix="portfolio-calibration-") as tmp:
            folder = args.keep or Path(tmp)
            folder.mkdir(parents=True, exist_ok=True)
            warehouse = backfilled_warehouse(folder, buildings, args.start, args.end)
            table = calibration_table(warehouse)
        made = f"backfilled {args.start} to {args.end} in {time.perf_counter() - began:.0f} s"
    print(f"{len(buildings)} real buildings, portfolios 'all' and 'third' ({len(third(buildings))}"
          f" buildings), {made}\n")
    print(table.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    for weeks in (WITH_RECORD, FIRST):
        failed = misses(table, weeks)
        print(f"\ngoals ({weeks}): " + ("met" if not failed else "; ".join(failed)))


if __name__ == "__main__":
    main()
