"""What a building-week costs, as a user runs it, against one fit of the peer an operator would
try first.

On real Cambridge buildings (default: 20 with complete 2019 data, none of the ten that
``forecast_quality.py`` reports on), in one run and on the same windows:

1. ``wadiro backfill --start W --end W``: a tuned week (no tuning is stored yet, so every model
   is tuned: a building's first week, and each week whose stored tuning is older than
   ``reuse_max_age_weeks``), every model, the deployed protocol;
2. ``wadiro forecast --week W+k`` for k = 1 to 8 (``--weekly-runs``; default: the weeks a
   tuning is reused, ``reuse_max_age_weeks``): the weekly runs that follow, as a deployment
   runs them (W's tuning reused, each week's forecasts the next one's validation forecasts),
   summed. With the tuned week they make one tuning's cycle, what a deployment pays per
   building-week in the long run (reported too, without a goal);
3. ``wadiro forecast --week W+1 --models seasonal_naive`` on copies of the warehouse, on every
   building and on one: what any run costs before a model is fitted (start-up, reading,
   writing; the persistence forecast is free), split into the run's fixed start-up and a
   share per building-week. A fleet of thousands pays the start-up once per run, so each
   command is also reported without it ("at fleet scale"; the start-up moves by a few tenths
   of a CPU-second between runs, which a run of few buildings divides among few of them: two
   buildings' weekly figure came out at 0.12 and 0.58 CPU-s in two runs);
4. in this process, one scikit-learn ``HistGradientBoostingRegressor`` (absolute loss, one thread)
   fitted on each building's window of W (calendar, holiday, weather, the load one and two weeks
   back: feature set ``paper_lags``): the peer's fit, on W's 12 weeks of history
   (``gbr_reference`` of ``forecast_quality.py``) and on its year (``gbr_reference_52w``, the
   stronger peer on most years), timed before command 1, after it, and after the weekly runs;
   each command is compared with the mean of the two passes around it (this machine's speed
   moves between runs by more than the changes being measured).

Commands 1-3 run as child processes; their CPU is user + system time of the command and every
worker it started. Per model and stage (tuning, the final fit, the certificate) the seconds come
from ``model_fits``; the protocol's total from ``window_status.compute_time_s``; everything else
(start-up, Prefect, the warehouse, moving data to workers) is the rest of the command's CPU.

    python benchmarks/fleet_cost.py                              # 20 buildings, W = 2019-04-01
    python benchmarks/fleet_cost.py --buildings UCam_Building_b7,UCam_Building_b0 --week 2019-04-01
    python benchmarks/fleet_cost.py --protocol paper             # the paper's protocol instead
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from datetime import date, timedelta
from pathlib import Path

from _commands import Measured, RunFacts, latest_run, measure, print_stages, wadiro
from forecast_quality import PEERS as QUALITY_PEERS
from forecast_quality import REFERENCE, REFERENCE_52W, peer_window
from sklearn.ensemble import HistGradientBoostingRegressor
from threadpoolctl import threadpool_limits

from tasks.protocol.config import ForecastConfig
from tasks.protocol.features import build_features
from tasks.warehouse.batches import load_jobs

ARCHIVE = Path(__file__).resolve().parents[2] / "shared" / "data" / "cambridge-estates"
BUILDINGS = tuple(f"UCam_Building_b{n}" for n in (15, 16, 19, 20, 21, 22, 23, 24, 25, 26,
                                                  27, 28, 30, 31, 32, 33, 34, 35, 36, 37))
"""Buildings with complete 2019 data. The cost does not depend on which buildings these are;
b15, b16 and b19-b21 are among the development years' buildings, the rest are not."""
GOALS = {"tuned": 10.0, "weekly": 3.0}
"""CPU per building-week, in peer fits."""
PEERS = {name: QUALITY_PEERS[name] for name in (REFERENCE, REFERENCE_52W)}
"""The peers a building-week's cost is counted in: the quality benchmark's scikit-learn ones
(its LightGBM peer is not timed here)."""


def peer_fit_cpu(warehouse: Path, buildings: list[str], week: date,
                 history_weeks: int = 12) -> tuple[float, int]:
    """Mean CPU seconds of one peer fit on the buildings' windows of ``week`` (``history_weeks``
    of history, as ``forecast_quality.py`` fits it: :data:`PEERS`), one thread."""
    config = ForecastConfig(feature_set="paper_lags", history_weeks=history_weeks)
    jobs = load_jobs(warehouse, buildings, [week], config)
    spent, fitted = 0.0, 0
    with threadpool_limits(limits=1):
        for job in jobs:
            info = job.info
            features = build_features(job.hours, timezone=info.timezone,
                                      holiday_country=info.holiday_country,
                                      holiday_subdiv=info.holiday_subdiv,
                                      feature_set="paper_lags")
            window = peer_window(features, week, info.timezone, history_weeks)
            if not window.ok:
                continue
            X, y = window.xy("train")
            started = time.process_time()
            HistGradientBoostingRegressor(loss="absolute_error", random_state=0).fit(X, y)
            spent += time.process_time() - started
            fitted += 1
    return spent / max(fitted, 1), fitted


def print_run(label: str, m: Measured, facts: RunFacts, peer: float) -> float:
    n = facts.building_weeks
    per = m.cpu / n
    print(f"\n== {label}: {n} building-weeks {facts.status}, {m.wall:.0f} s wall ==")
    print(f"CPU per building-week {per:.2f} s = {per / peer:.1f} peer fits; inside the protocol "
          f"{facts.inside / n:.2f} s, start-up, orchestration and warehouse "
          f"{(m.cpu - facts.inside) / n:.2f} s ({100 * (1 - facts.inside / m.cpu):.0f} %)")
    print_stages(facts, n)
    return per


def summed(runs: list[Measured]) -> Measured:
    """Several commands as one: their wall and CPU seconds added, the highest memory."""
    return Measured(sum(m.wall for m in runs), sum(m.cpu for m in runs),
                    max(m.peak_total for m in runs), max(m.peak_one for m in runs))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--buildings", default=",".join(BUILDINGS))
    parser.add_argument("--week", default="2019-04-01", help="W, the tuned week (a Monday)")
    parser.add_argument("--protocol", default="deployed", choices=("deployed", "paper"))
    parser.add_argument("--workers", type=int, default=None, help="default: cores")
    parser.add_argument("--weekly-runs", type=int, default=None,
                        help="weekly runs after W (default: the weeks a tuning is reused, "
                        "reuse_max_age_weeks; 1 when the protocol tunes every window)")
    args = parser.parse_args()
    os.environ.pop("PREFECT_API_URL", None)  # the command line's own engine, no server
    buildings = args.buildings.split(",")
    week = date.fromisoformat(args.week)
    config = ForecastConfig(protocol=args.protocol)
    weekly_runs = args.weekly_runs or (config.reuse_max_age_weeks
                                       if config.tuning == "reuse" else 1)
    common = ["--protocol", args.protocol, *(["--workers", str(args.workers)]
                                              if args.workers else [])]
    # every hour any model of the protocol reads (a year and its lookback for the deployed
    # gradient boosting), so that each fits on what it would in a deployment
    first_hour = config.load_range(week, "Europe/London")[0]
    with tempfile.TemporaryDirectory(prefix="fleet-cost-") as tmp:
        warehouse = Path(tmp) / "cost.duckdb"
        wadiro("ingest", "cambridge", "--path", str(ARCHIVE), "--buildings", ",".join(buildings),
               "--start", min(first_hour.date() - timedelta(days=1),
                              week - timedelta(weeks=20)).isoformat(),
               "--end", (week + timedelta(weeks=weekly_runs + 1)).isoformat(),
               "--warehouse", str(warehouse), quiet=True)
        def time_peers() -> dict[str, float]:
            return {name: peer_fit_cpu(warehouse, buildings, week, weeks)[0]
                    for name, weeks in PEERS.items()}

        peers = [time_peers()]
        print(f"{len(buildings)} buildings, W = {week}, protocol {args.protocol}; one peer fit "
              "(HistGradientBoosting, absolute loss, one thread; mean of the windows): "
              + ", ".join(f"{name} ({PEERS[name]} weeks) {cpu:.3f} CPU-s"
                          for name, cpu in peers[0].items()))
        tuned = measure("backfill", "--start", week.isoformat(), "--end", week.isoformat(),
                        "--warehouse", str(warehouse), *common)
        peers.append(time_peers())
        tuned_peer = {name: (peers[0][name] + peers[1][name]) / 2 for name in PEERS}
        tuned_per = print_run(f"wadiro backfill --start {week} --end {week} (tuned week)", tuned,
                              latest_run(warehouse), tuned_peer[REFERENCE])
        nxt = (week + timedelta(weeks=1)).isoformat()
        startup = {}
        for n in sorted({1, len(buildings)}):  # what a run costs before a model is fitted
            empty = Path(tmp) / f"startup-{n}.duckdb"
            shutil.copy(warehouse, empty)
            startup[n] = measure("forecast", "--week", nxt, "--models", "seasonal_naive",
                                 "--buildings", ",".join(buildings[:n]),
                                 "--warehouse", str(empty), *common).cpu
        weeks = [week + timedelta(weeks=k) for k in range(1, weekly_runs + 1)]
        runs = [measure("forecast", "--week", w.isoformat(), "--warehouse", str(warehouse),
                        *common) for w in weeks]
        peers.append(time_peers())
        weekly_peer = {name: (peers[1][name] + peers[2][name]) / 2 for name in PEERS}
        label = (f"wadiro forecast --week {weeks[0]}" if weekly_runs == 1 else
                 f"wadiro forecast, each week {weeks[0]} to {weeks[-1]} (the weekly runs after "
                 "it), summed")
        weekly_per = print_run(label, summed(runs), latest_run(warehouse, weekly_runs),
                               weekly_peer[REFERENCE])
    n = len(buildings)
    each = (startup[n] - startup[1]) / (n - 1) if n > 1 else 0.0
    fixed = startup[1] - each
    print(f"\nany run before fitting a model (wadiro forecast --models seasonal_naive): "
          f"{startup[n]:.1f} CPU-s on the {n} buildings, {startup[1]:.1f} on one: "
          f"{fixed:.1f} CPU-s once per run (start-up) and {each:.3f} per building-week")
    print("weekly runs, CPU per building-week: "
          + ", ".join(f"{w:%m-%d} {m.cpu / n:.2f}" for w, m in zip(weeks, runs, strict=True)))
    # a deployment tunes a building's week when its tuning is older than reuse_max_age_weeks:
    # one tuned week, then the weekly runs that reuse it, per building-week
    cycle_per = (tuned_per + weekly_runs * weekly_per) / (1 + weekly_runs)
    cycle_peer = {name: sum(p[name] for p in peers) / len(peers) for name in PEERS}
    scale = f"at fleet scale ({fixed:.1f} s start-up spread over thousands of buildings)"
    print(f"\n{'what':<44}{'CPU-s per building-week':>24}{'peer fits':>11}"
          f"{'year-long peer fits':>21}{'goal':>8}")
    for where, shift in ((f"as run, {n} buildings", 0.0), (scale, fixed / n)):
        print(where)
        for what, per, peer, goal in (
                ("  tuned week (wadiro backfill)", tuned_per - shift, tuned_peer,
                 GOALS["tuned"]),
                ("  weekly run (wadiro forecast)", weekly_per - shift, weekly_peer,
                 GOALS["weekly"]),
                (f"  a tuning's cycle (1 tuned + {weekly_runs} weekly)",
                 cycle_per - shift, cycle_peer, None)):
            ratios = [per / peer[name] for name in PEERS]
            verdicts = "" if goal is None else ", ".join(
                f"{'met' if r <= goal else 'NOT met'} against the {name}"
                for r, name in zip(ratios, PEERS, strict=True))
            print(f"{what:<44}{per:>24.2f}{ratios[0]:>11.1f}{ratios[1]:>21.1f}"
                  f"{'' if goal is None else f'<= {goal:g}':>8}  {verdicts}")
    for name in PEERS:
        print(f"{name + ' fit (before, between, after)':<56}"
              f"{' / '.join(f'{p[name]:.3f}' for p in peers)} CPU-s")


if __name__ == "__main__":
    main()
