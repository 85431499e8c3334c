"""Test-week accuracy and negative forecasts of the physics-constrained network, with and
without the target week's inputs as bound points.

For one building and a list of target weeks, on the protocol's window (12 local weeks, the last
one validates; the real Cambridge archive): WaDiRo-SCNN with y_hat >= 0 on its training rows
(``wadiro_pcscnn``) picks its hyperparameters from a small grid on the validation week, is
refitted on all 12 weeks and forecasts the target week. ``+bound`` does the same with y_hat >= 0
also imposed inside the program at the inputs of the week it predicts (the validation week
while tuning, the target week in the refit), which are known when the forecast is issued.
``clip`` is the forecast without bound points, negative hours set to 0 afterwards (the
post-processing alternative). Prints, per week, the chosen settings, the test MAE (kWh) and
the negative test hours; then each grid point's totals over the weeks::

    python benchmarks/target_week_bounds.py                              # b7, six weeks of 2019
    python benchmarks/target_week_bounds.py --building UCam_Building_b0 --weeks 2019-04-01
    python benchmarks/target_week_bounds.py --neurons 10 30              # a smaller grid

BLAS runs on one thread; fits use the structured interior-point solver.
"""

from __future__ import annotations

import argparse
import itertools
import time
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

from tasks.ingest.cambridge_archive import (
    HOLIDAY_COUNTRY,
    HOLIDAY_SUBDIV,
    TIMEZONE,
    load_cambridge,
)
from tasks.protocol.features import build_features
from tasks.protocol.windows import build_window
from wadiro_models import WaDiRoSCNN

ARCHIVE = Path(__file__).resolve().parents[2] / "shared" / "data" / "cambridge-estates"
WEEKS = ["2019-02-04", "2019-03-04", "2019-04-01", "2019-06-03", "2019-10-07", "2019-11-04"]
RADII = [float(np.exp(-6)), float(np.exp(-4)), float(np.exp(-2))]
NEURONS = [10, 30, 70]
NORMS = ["l1", "l2"]


@dataclass(frozen=True)
class Week:
    X_fit: np.ndarray
    y_fit: np.ndarray
    X_val: np.ndarray  # every validation hour with its features (scored where labelled)
    y_val: np.ndarray  # NaN where there is no reading
    X_train: np.ndarray
    y_train: np.ndarray
    X_test: np.ndarray  # every hour of the target week (its inputs are known at issue time)
    y_test: np.ndarray  # NaN where there is no reading


def load_week(building: str, monday: date, archive: Path = ARCHIVE) -> Week:
    batch = load_cambridge(archive, [building], monday - timedelta(weeks=13),
                           monday + timedelta(weeks=1))
    weather = batch.weather.to_pandas()[["ts", "temperature_c", "irradiance_wm2",
                                         "wind_speed_ms"]]
    hours = batch.readings.to_pandas()[["ts", "kwh"]].merge(weather, on="ts", how="outer")
    features = build_features(hours, timezone=TIMEZONE, holiday_country=HOLIDAY_COUNTRY,
                              holiday_subdiv=HOLIDAY_SUBDIV)
    window = build_window(features, monday, TIMEZONE)
    if not window.ok:
        raise RuntimeError(f"{building} {monday}: window {window.status}: {window.reason}")
    columns = list(window.feature_columns)
    # the validation week as the model will see it when forecasting: every hour with inputs
    start, end = window.bounds.part("validation")
    frame = features[(features.ts >= start) & (features.ts < end)].dropna(subset=columns)
    X_test, y_test = window.xy("test")
    return Week(*window.xy("fit"), frame[columns].to_numpy(float),
                frame["kwh"].to_numpy(float), *window.xy("train"), X_test, y_test)


def mae(y_hat: np.ndarray, y: np.ndarray) -> float:
    scored = np.isfinite(y)
    return float(np.mean(np.abs(y_hat[scored] - y[scored])))


def fit_predict(params: dict, X: np.ndarray, y: np.ndarray, X_next: np.ndarray,
                bounded: bool) -> np.ndarray:
    model = WaDiRoSCNN(**params, lower_bound=0.0, solver="ipm")
    if bounded:
        model.fit(X, y, bound_X=X_next, bound_lower=0.0)
    else:
        model.fit(X, y)
    return model.predict(X_next)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--building", default="UCam_Building_b7")
    parser.add_argument("--weeks", nargs="+", default=WEEKS)
    parser.add_argument("--neurons", type=int, nargs="+", default=NEURONS)
    args = parser.parse_args()

    grid = [dict(radius=r, max_neurons=n, wasserstein=w)
            for r, n, w in itertools.product(RADII, args.neurons, NORMS)]
    variants = ["plain", "+bound"]
    per_point = {(v, i): [] for v in variants for i in range(len(grid))}
    chosen_rows = []
    seconds = dict.fromkeys(variants, 0.0)
    print(f"{args.building}: grid radius {[round(r, 4) for r in RADII]} x max_neurons "
          f"{args.neurons} x {NORMS}, picked on the validation week")
    print(f"{'week':>10} {'variant':>7} {'radius':>7} {'n':>3} {'norm':>4} "
          f"{'test MAE':>8} {'neg h':>5} {'min y_hat':>9}")
    with threadpool_limits(limits=1, user_api="blas"):
        for week in args.weeks:
            data = load_week(args.building, date.fromisoformat(week))
            for variant in variants:
                bounded = variant == "+bound"
                started = time.perf_counter()
                val_mae, forecasts = [], []
                for i, params in enumerate(grid):
                    val = fit_predict(params, data.X_fit, data.y_fit, data.X_val, bounded)
                    val_mae.append(mae(val, data.y_val))
                    test = fit_predict(params, data.X_train, data.y_train, data.X_test,
                                       bounded)
                    forecasts.append(test)
                    per_point[variant, i].append(
                        (mae(test, data.y_test), int(np.count_nonzero(test < 0)),
                         mae(np.maximum(test, 0.0), data.y_test)))
                seconds[variant] += time.perf_counter() - started
                best = int(np.argmin(val_mae))
                test = forecasts[best]
                rows = [(variant, test)]
                if not bounded:
                    rows.append(("clip", np.maximum(test, 0.0)))
                for name, y_hat in rows:
                    p = grid[best]
                    chosen_rows.append((week, name, mae(y_hat, data.y_test),
                                        int(np.count_nonzero(y_hat < 0))))
                    print(f"{week:>10} {name:>7} {p['radius']:>7.4f} {p['max_neurons']:>3} "
                          f"{p['wasserstein']:>4} {mae(y_hat, data.y_test):>8.3f} "
                          f"{np.count_nonzero(y_hat < 0):>5} {y_hat.min():>9.3f}", flush=True)

    print("\nchosen by validation, over all weeks:")
    for name in ["plain", "clip", "+bound"]:
        rows = [r for r in chosen_rows if r[1] == name]
        print(f"  {name:>7}: mean test MAE {np.mean([r[2] for r in rows]):.3f} kWh, "
              f"negative test hours {sum(r[3] for r in rows)}")
    print(f"  fit time (tuning grid + refits): plain {seconds['plain']:.0f} s, "
          f"+bound {seconds['+bound']:.0f} s")
    print("\neach grid point, over all weeks (mean test MAE kWh / negative test hours):")
    print(f"{'radius':>7} {'n':>3} {'norm':>4} {'plain':>13} {'clip':>7} {'+bound':>13}")
    for i, p in enumerate(grid):
        plain, bound = np.array(per_point["plain", i]), np.array(per_point["+bound", i])
        print(f"{p['radius']:>7.4f} {p['max_neurons']:>3} {p['wasserstein']:>4} "
              f"{plain[:, 0].mean():>7.3f} / {int(plain[:, 1].sum()):>3} "
              f"{plain[:, 2].mean():>7.3f} {bound[:, 0].mean():>7.3f} / "
              f"{int(bound[:, 1].sum()):>3}")


if __name__ == "__main__":
    main()
