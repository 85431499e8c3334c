"""Forecast quality over a fleet-year: every model, the published forecast, and a peer to beat.

Runs the whole protocol (features, tuning, refit, intervals, publication) for every Monday of a
year on a fixed set of real Cambridge buildings, in this process and a pool of worker
processes (BLAS on one thread each, as the pipeline runs), and prints per model:

* ``mae_vs_naive``: the model's summed MAE over seasonal naive's on the building-weeks both
  forecast (so, its mean MAE relative to last week's load);
* ``beats_naive``: the share of those building-weeks where it was better;
* the same two on holiday weeks (a target week with a public holiday on a weekday);
* ``worst_bldg``: the largest yearly mean-MAE ratio over the buildings;
* test-week violations (hours below zero) and the 80 % / 95 % intervals' coverage and width.

Beside them, fitted on the same 12-week histories and run in the same processes, the peer an
operator would try first: scikit-learn's ``HistGradientBoostingRegressor`` (absolute loss) on
the calendar, holiday, weather and the load one and two weeks back (feature set
``paper_lags``), labelled ``gbr_reference``.

    python benchmarks/forecast_quality.py                       # 10 buildings x 52 weeks of 2019
    python benchmarks/forecast_quality.py --year 2020 --buildings auto    # another year
    python benchmarks/forecast_quality.py --archive /data/cambridge-estates --year 2021 \\
        --buildings auto                                         # an archive of your own
    python benchmarks/forecast_quality.py --buildings UCam_Building_b7 --start 2019-03-04 \\
        --end 2019-04-29 --trials 5                              # a quick look

``--archive`` is any archive in the Cambridge layout (``building_data/processed_data/<id>/
electricity/<year>.csv`` and the Met Office folders); ``--buildings auto`` takes the first ten
buildings (by number) with readings for at least 90 % of the hours of the target year and of the
year before it.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
import warnings
from concurrent.futures import ProcessPoolExecutor
from datetime import date, timedelta
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.ensemble import HistGradientBoostingRegressor
from threadpoolctl import threadpool_limits

from wadiro_fleet.tasks.ingest.cambridge import ingest_cambridge
from wadiro_fleet.tasks.protocol.batch import BuildingJob, run_jobs
from wadiro_fleet.tasks.protocol.config import ForecastConfig
from wadiro_fleet.tasks.protocol.features import build_features, holiday_dates
from wadiro_fleet.tasks.protocol.intervals import LEVELS
from wadiro_fleet.tasks.protocol.models import SEASONAL_NAIVE
from wadiro_fleet.tasks.protocol.weeks import mondays_between
from wadiro_fleet.tasks.protocol.windows import build_window
from wadiro_fleet.tasks.warehouse.batches import load_jobs

ARCHIVE = Path(__file__).resolve().parents[2] / "shared" / "data" / "cambridge-estates"
"""The archive in ``../shared`` (``--archive`` names another)."""
BUILDINGS = (
    "UCam_Building_b0", "UCam_Building_b1", "UCam_Building_b3", "UCam_Building_b4",
    "UCam_Building_b7", "UCam_Building_b8", "UCam_Building_b9", "UCam_Building_b11",
    "UCam_Building_b12", "UCam_Building_b14",
)
"""Fixed so the numbers can be rerun: the first ten buildings with near-complete 2018-2019 data."""
REFERENCE = "gbr_reference"
PUBLISHED = "published"


def complete_buildings(archive: Path, years: list[int], n: int = 10,
                       share: float = 0.9) -> list[str]:
    """The first ``n`` buildings (by number) with a non-zero reading (the archive marks missing
    ones with 0) for at least ``share`` of the hours of every one of ``years``."""
    root = archive / "building_data" / "processed_data"
    chosen = []
    for folder in sorted(root.iterdir(), key=lambda p: int("".join(filter(str.isdigit, p.name))
                                                          or 0)):
        counts = []
        for year in years:
            path = folder / "electricity" / f"{year}.csv"
            if not path.is_file():
                break
            loads = pd.read_csv(path, usecols=[1]).iloc[:, 0]
            hours = 24 * (366 if year % 4 == 0 else 365)
            counts.append((pd.to_numeric(loads, errors="coerce") > 0).sum() / hours)
        if len(counts) == len(years) and min(counts) >= share:
            chosen.append(folder.name)
        if len(chosen) == n:
            break
    return chosen


def reference_forecast(
    features: pd.DataFrame, timezone: str, week: date, history_weeks: int
) -> np.ndarray | None:
    """The gradient-boosting peer's forecast of ``week`` (None when its window is unusable)."""
    window = build_window(features, week, timezone, feature_set="paper_lags",
                          history_weeks=history_weeks)
    if not window.ok:
        return None
    X, y = window.xy("train")
    model = HistGradientBoostingRegressor(loss="absolute_error", random_state=0).fit(X, y)
    return model.predict(window.xy("test")[0])


def run_building(job: BuildingJob, config: ForecastConfig,
                 keep_forecasts: bool = False) -> tuple[list[dict], float]:
    """Every week of one building: one row per (week, model), and the CPU seconds spent.
    With ``keep_forecasts`` each row also holds the forecast, the actuals and the model's
    validation MAE, for looking at publication rules afterwards."""
    threadpool_limits(limits=1)
    warnings.filterwarnings("ignore")
    started = time.process_time()
    results = run_jobs([job], config)
    cpu = time.process_time() - started
    info = job.info
    features = build_features(job.hours, timezone=info.timezone,
                              holiday_country=info.holiday_country,
                              holiday_subdiv=info.holiday_subdiv, feature_set="paper_lags")
    rows = []
    for res in results:
        outcomes = {o.model: o for o in res.outcomes if o.status == "ok"}
        for out in outcomes.values():
            s = out.scores
            extra = ({"y_hat": out.y_hat, "ts": res.test_ts.to_numpy(),
                      "validation_mae": out.validation_mae} if keep_forecasts else {})
            rows.append({"building_id": res.building_id, "week": res.week, "model": out.model,
                         "mae": s.mae, "violations": s.n_violations, **extra,
                         **{f"coverage_{round(100 * lv)}": s.interval_coverage.get(lv)
                            for lv in LEVELS},
                         **{f"width_{round(100 * lv)}": s.interval_width.get(lv) for lv in LEVELS}})
        if res.publication is not None and res.publication.model in outcomes:
            rows.append({**next(r for r in rows if r["week"] == res.week
                                and r["model"] == res.publication.model), "model": PUBLISHED,
                         "published_model": res.publication.model})
        reference = reference_forecast(features, info.timezone, res.week, config.history_weeks)
        if reference is not None and len(res.test_ts):
            actual = job.hours.set_index("ts")["kwh"].reindex(res.test_ts).to_numpy()
            scored = np.isfinite(actual)
            if scored.any():
                rows.append({"building_id": res.building_id, "week": res.week,
                             "model": REFERENCE,
                             "mae": float(np.mean(np.abs(reference[scored] - actual[scored]))),
                             "violations": int(np.sum(reference < -1e-6))})
    return rows, cpu


def holiday_weeks(weeks: list[date]) -> set[date]:
    """Target weeks with a public holiday (England) on a weekday."""
    days = holiday_dates("GB", "ENG", range(weeks[0].year - 1, weeks[-1].year + 2))
    return {w for w in weeks
            if any(np.datetime64(w + timedelta(days=k), "D") in days for k in range(5))}


def summarise(rows: pd.DataFrame, holidays: set[date]) -> pd.DataFrame:
    naive = rows[rows["model"] == SEASONAL_NAIVE][["building_id", "week", "mae"]]
    paired = rows.merge(naive.rename(columns={"mae": "naive_mae"}), on=["building_id", "week"])
    paired = paired[paired["mae"].notna() & paired["naive_mae"].notna()]
    paired["holiday"] = paired["week"].isin(holidays)

    def ratio(frame: pd.DataFrame) -> float:
        return frame["mae"].sum() / frame["naive_mae"].sum() if len(frame) else np.nan

    table = []
    for model, frame in paired.groupby("model"):
        on_holiday = frame[frame["holiday"]]
        per_building = frame.groupby("building_id").apply(ratio, include_groups=False)
        table.append({
            "model": model, "building_weeks": len(frame),
            "mae_vs_naive": ratio(frame), "beats_naive": float((frame["mae"] < frame["naive_mae"]).mean()),
            "holiday_vs_naive": ratio(on_holiday),
            "holiday_beats": float((on_holiday["mae"] < on_holiday["naive_mae"]).mean())
            if len(on_holiday) else np.nan,
            "worst_bldg": per_building.max(), "violations": int(frame["violations"].sum()),
            "coverage_80": frame.get("coverage_80", pd.Series(dtype=float)).mean(),
            "coverage_95": frame.get("coverage_95", pd.Series(dtype=float)).mean(),
            "width_80": frame.get("width_80", pd.Series(dtype=float)).mean(),
        })
    return pd.DataFrame(table).sort_values("mae_vs_naive").reset_index(drop=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--archive", type=Path, default=ARCHIVE,
                        help="an archive in the Cambridge layout (default: ../shared's)")
    parser.add_argument("--buildings", default=",".join(BUILDINGS),
                        help="comma-separated ids, or 'auto' (module docstring)")
    parser.add_argument("--year", type=int, default=None,
                        help="every Monday of this year (instead of --start/--end)")
    parser.add_argument("--start", default="2019-01-07", help="first target week (a Monday)")
    parser.add_argument("--end", default="2019-12-30", help="last target week (a Monday)")
    parser.add_argument("--every", type=int, default=1, help="every n-th Monday of the range")
    parser.add_argument("--models", default=None, help="default: the protocol's")
    parser.add_argument("--trials", type=int, default=None, help="default: the protocol's")
    parser.add_argument("--protocol", default="deployed", choices=["deployed", "paper"])
    parser.add_argument("--tuning", default=None, choices=["reuse", "per-window"],
                        help="default: the protocol's")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--csv", type=Path, help="also write every (building, week, model) row")
    parser.add_argument("--pickle", type=Path,
                        help="also write every row with its forecast and the actuals (pandas)")
    args = parser.parse_args()
    if args.year is not None:
        mondays = pd.date_range(f"{args.year}-01-01", f"{args.year}-12-31", freq="W-MON")
        args.start, args.end = mondays[0].date(), mondays[-1].date()
    weeks = mondays_between(args.start, args.end)[::args.every]
    years = sorted({weeks[0].year - 1, *(w.year for w in weeks)})
    buildings = (complete_buildings(args.archive, years) if args.buildings == "auto"
                 else args.buildings.split(","))
    chosen = {"models": args.models.split(",") if args.models else None,
              "trials": args.trials, "tuning": args.tuning}
    config = ForecastConfig(protocol=args.protocol,
                            **{k: v for k, v in chosen.items() if v is not None})
    print(f"{len(buildings)} buildings ({', '.join(b.rsplit('_', 1)[-1] for b in buildings)}) x "
          f"{len(weeks)} weeks ({weeks[0]} to {weeks[-1]}), protocol {config.protocol}: "
          f"models {', '.join(config.models)}, {config.trials} trials, tuning {config.tuning}, "
          f"feature set {config.feature_set}, target {config.target}, persistence "
          f"{config.persistence}, {args.workers} workers", flush=True)
    began = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="forecast-quality-") as tmp:
        warehouse = Path(tmp) / "quality.duckdb"
        ingest_cambridge(warehouse, args.archive, buildings, weeks[0] - timedelta(weeks=20),
                         weeks[-1] + timedelta(weeks=1))
        jobs = [job for b in buildings for job in load_jobs(warehouse, [b], weeks, config)]
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        outputs = list(pool.map(run_building, jobs, [config] * len(jobs),
                                [args.pickle is not None] * len(jobs)))
    rows = pd.DataFrame([row for building_rows, _ in outputs for row in building_rows])
    cpu = sum(seconds for _, seconds in outputs)
    if args.csv:
        rows.drop(columns=["y_hat", "ts", "validation_mae"], errors="ignore").to_csv(
            args.csv, index=False)
    if args.pickle:
        actuals = {job.info.building_id: job.hours.set_index("ts")["kwh"] for job in jobs}
        pd.to_pickle({"rows": rows, "actuals": actuals}, args.pickle)
    table = summarise(rows, holiday_weeks(weeks))
    print(f"\n{len(rows[rows['model'] == SEASONAL_NAIVE])} building-weeks scored in "
          f"{time.perf_counter() - began:.0f} s wall; protocol CPU per building-week "
          f"{cpu / (len(buildings) * len(weeks)):.1f} s (the reference's CPU not included)\n")
    print(table.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    chosen = rows[rows["model"] == PUBLISHED]["published_model"].value_counts(normalize=True)
    print("\npublished models: " + ", ".join(f"{m} {share:.0%}" for m, share in chosen.items()))


if __name__ == "__main__":
    main()
