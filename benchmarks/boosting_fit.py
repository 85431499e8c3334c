"""A gradient-boosting fit of the pipeline against scikit-learn's own, in one process.

The pipeline's gradient boosting (``GradientBoostingModel``: scikit-learn's histogram trees, the
absolute loss setting each leaf to its residuals' median by one partition) against scikit-learn's
``HistGradientBoostingRegressor(loss="absolute_error")`` with the same settings, on a real
building's year before the target week (the Cambridge archive's hourly electricity and Bedford
weather, feature set ``paper_lags``), every hour and every second and fourth (the deployed
``gbr_lags`` fits every second hour of its year, ``gbr``'s tuning trials every fourth). Both
paths are timed alternately, BLAS and OpenMP on one thread, CPU time; the script prints the
medians, their ratio and whether the two forecasts are identical. Then the same model on the
LightGBM engine (``engine="lightgbm"``, the deployed protocol's): its CPU, its ratio to
scikit-learn's, and both forecasts' MAE on the target week::

    python benchmarks/boosting_fit.py                          # b1 and b7, 2019-03-04, 5 repeats
    python benchmarks/boosting_fit.py --buildings UCam_Building_b0 --repeat 9
"""

from __future__ import annotations

import argparse
import statistics
import time
from datetime import date, timedelta
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.ensemble import HistGradientBoostingRegressor
from threadpoolctl import threadpool_limits

from tasks.ingest.cambridge_archive import (
    HOLIDAY_COUNTRY,
    HOLIDAY_SUBDIV,
    TIMEZONE,
    load_cambridge,
)
from tasks.protocol.features import build_features, get_feature_set
from wadiro_models import GradientBoostingModel

ARCHIVE = Path(__file__).resolve().parents[2] / "shared" / "data" / "cambridge-estates"


def year_window(building: str, week: date, archive: Path
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``paper_lags`` features and labels [kWh] of the 52 weeks before ``week``, and of ``week``
    (hours with a missing label dropped; a missing lag stays missing, as the trees take it)."""
    batch = load_cambridge(archive, [building], week - timedelta(weeks=54),
                           week + timedelta(weeks=1))
    readings = batch.readings.to_pandas()[["ts", "kwh"]]
    weather = batch.weather.to_pandas().drop(columns=["site_id", "kind"], errors="ignore")
    hours = readings.merge(weather, on="ts", how="left").reset_index(drop=True)
    feature_set = get_feature_set("paper_lags")
    frame = build_features(hours, timezone=TIMEZONE, holiday_country=HOLIDAY_COUNTRY,
                           holiday_subdiv=HOLIDAY_SUBDIV, feature_set=feature_set)
    start, target = (pd.Timestamp(day, tz="UTC") for day in (week - timedelta(weeks=52), week))
    columns = [f.name for f in feature_set.features]
    train = frame[(frame.ts >= start) & (frame.ts < target) & frame.kwh.notna()]
    test = frame[(frame.ts >= target) & frame.kwh.notna()]
    return (train[columns].to_numpy(float), train["kwh"].to_numpy(float),
            test[columns].to_numpy(float), test["kwh"].to_numpy(float))


def cpu(fit) -> tuple[float, np.ndarray]:
    started = time.process_time()
    prediction = fit()
    return time.process_time() - started, prediction


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--buildings", default="UCam_Building_b1,UCam_Building_b7")
    parser.add_argument("--week", default="2019-03-04", help="the target week (a Monday)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--archive", type=Path, default=ARCHIVE)
    args = parser.parse_args()
    threadpool_limits(limits=1)
    week = date.fromisoformat(args.week)
    print(f"{'building':<20}{'every':>6}{'rows':>7}{'ours CPU-s':>12}{'scikit-learn':>14}"
          f"{'ratio':>7}  same forecast")
    ratios, engines = [], []
    for building in args.buildings.split(","):
        X_all, y_all, X_week, y_week = year_window(building, week, args.archive)
        for every in (1, 2, 4):
            X, y = X_all[::-1][::every][::-1], y_all[::-1][::every][::-1]  # back from the latest
            ours, theirs, same = [], [], True
            for _ in range(args.repeat):
                seconds, mine = cpu(lambda: GradientBoostingModel().fit(X, y).predict(X_all))
                ours.append(seconds)
                seconds, reference = cpu(lambda: HistGradientBoostingRegressor(
                    loss="absolute_error", early_stopping=False, random_state=0,
                ).fit(X, y).predict(X_all))
                theirs.append(seconds)
                same = same and np.array_equal(mine, reference)
            ratio = statistics.median(ours) / statistics.median(theirs)
            ratios.append(ratio)
            print(f"{building:<20}{every:>6}{len(y):>7}{statistics.median(ours):>12.3f}"
                  f"{statistics.median(theirs):>14.3f}{ratio:>7.2f}  {same}")
            lightgbm = [cpu(lambda: GradientBoostingModel(engine="lightgbm").fit(X, y))[0]
                        for _ in range(args.repeat)]
            mae = [np.abs(GradientBoostingModel(engine=engine).fit(X, y).predict(X_week)
                          - y_week).mean() for engine in ("sklearn", "lightgbm")]
            engines.append((building, every, statistics.median(lightgbm),
                            statistics.median(lightgbm) / statistics.median(ours), *mae))
    print(f"median ratio (ours / scikit-learn's): {statistics.median(ratios):.2f}")
    print(f"\nengine='lightgbm'\n{'building':<20}{'every':>6}{'CPU-s':>8}"
          f"{'/ scikit-learn engine':>23}{'week MAE kWh: sklearn':>23}{'lightgbm':>10}")
    for building, every, seconds, ratio, mae_sklearn, mae_lightgbm in engines:
        print(f"{building:<20}{every:>6}{seconds:>8.3f}{ratio:>23.2f}{mae_sklearn:>23.2f}"
              f"{mae_lightgbm:>10.2f}")
    print(f"median ratio (lightgbm / sklearn engine): "
          f"{statistics.median(e[3] for e in engines):.2f}")


if __name__ == "__main__":
    main()
