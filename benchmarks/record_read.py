"""What the quantiles' record costs a weekly run: reading every model's stored forecasts of a
building's last K weeks (``load_recent_forecasts``, in the batch reads) and turning them into
hourly errors against the readings (``_with_errors``, in the workers), at K = 8 (issue 61's
first version) and K = 16 (``quantile_record_weeks`` since), against a steady weekly run's CPU.

Set-up (not timed): ``wadiro ingest synthetic --buildings N --weeks W``, then results of the
last K + 1 weeks written straight into the result tables as a run writes them
(``portfolio_cost.fabricate_results``: 7 models' forecasts per building-week). Timed, CPU of
this process (DuckDB's threads included), best of three: the fleet read in batches of
``--batch`` buildings as a run reads it, and the merge of each building's forecasts with its
readings.

    python benchmarks/record_read.py                    # 1,000 buildings (~3 min)
    python benchmarks/record_read.py --buildings 300 --batch 20
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from datetime import timedelta
from pathlib import Path

import numpy as np
import pandas as pd

from tasks.protocol.batch import _with_errors
from tasks.protocol.track_record import WeekScore
from tasks.warehouse.connection import connect
from tasks.warehouse.results import load_recent_forecasts

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _commands import wadiro  # noqa: E402
from portfolio_cost import MODELS, RUN_CPU_S, START, best_of, fabricate_results  # noqa: E402

RECORDS = (8, 16)
"""The record lengths compared (weeks)."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--buildings", type=int, default=1000)
    parser.add_argument("--batch", type=int, default=10, help="buildings a batch read")
    args = parser.parse_args()
    weeks_stored = max(RECORDS) + 1
    with tempfile.TemporaryDirectory(prefix="record-read-") as tmp:
        warehouse = Path(tmp) / "fleet.duckdb"
        history = weeks_stored + 2
        wadiro("ingest", "synthetic", "--buildings", str(args.buildings), "--start",
               START.isoformat(), "--weeks", str(history), "--warehouse", str(warehouse),
               quiet=True)
        target = START + timedelta(weeks=history - 1)
        fabricate_results(warehouse, [target - timedelta(weeks=k)
                                      for k in reversed(range(1, weeks_stored + 1))])
        with connect(warehouse, read_only=True) as con:
            ids = [r[0] for r in con.execute(
                "SELECT building_id FROM buildings ORDER BY building_id").fetchall()]
            readings = {b: frame for b, frame in con.execute(
                "SELECT building_id, epoch_us(ts) AS hour, kwh FROM meter_readings "
                "ORDER BY building_id, ts").df().groupby("building_id")}
            loads = {b: pd.Series(f["kwh"].to_numpy(np.float64), index=f["hour"].to_numpy())
                     for b, f in readings.items()}
            batches = [ids[i:i + args.batch] for i in range(0, len(ids), args.batch)]
            measured = {}
            for weeks in RECORDS:
                start = target - timedelta(weeks=weeks)
                loaded: dict = {}

                def read(start=start, loaded=loaded):
                    for batch in batches:
                        loaded.update(load_recent_forecasts(con, batch, start, target))

                def merge(start=start, loaded=loaded, weeks=weeks):
                    record = {start + timedelta(weeks=k): {m: WeekScore(1.0) for m in MODELS}
                              for k in range(weeks)}
                    for b, forecasts in loaded.items():
                        _with_errors(record, forecasts, loads[b])

                measured[weeks] = (best_of(3, read)[0], best_of(3, merge)[0],
                                   sum(len(f) for f in loaded.values()))
    per = 1000 / args.buildings
    print(f"{args.buildings} buildings, {len(MODELS)} models, batches of {args.batch}; CPU s per "
          f"1,000 buildings (best of three), against a steady weekly run's {RUN_CPU_S:.0f} CPU-s")
    print(f"{'record':<10} {'forecasts':>10} {'read':>8} {'merge':>8} {'total':>8} "
          f"{'of a weekly run':>16}")
    for weeks, (read_s, merge_s, n) in measured.items():
        total = (read_s + merge_s) * per
        print(f"{weeks:>3} weeks {n:>10,} {read_s * per:8.2f} {merge_s * per:8.2f} {total:8.2f} "
              f"{total / RUN_CPU_S:15.2%}")
    low, high = (sum(measured[w][:2]) * per for w in RECORDS)
    print(f"\n{RECORDS[1]} weeks against {RECORDS[0]}: {high / low:.2f}x, "
          f"+{high - low:.2f} CPU-s per 1,000 buildings ({(high - low) / RUN_CPU_S:.2%} of a "
          f"weekly run)")


if __name__ == "__main__":
    main()
