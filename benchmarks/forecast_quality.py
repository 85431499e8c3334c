"""Forecast quality over fleet-years: every model, the published forecast, and two peers to beat.

Runs the whole protocol (features, tuning, refit, intervals, publication) for every Monday of
one or several years on real Cambridge buildings, in this process and a pool of worker
processes (BLAS on one thread each, as the pipeline runs), and prints per year and model:

* ``mae_vs_naive``: the model's summed MAE over seasonal naive's on the building-weeks both
  forecast (so, its mean MAE relative to last week's load);
* ``beats_naive``: the share of those building-weeks where it was better;
* the same two on holiday weeks (a target week with a public holiday on a weekday);
* ``worst_bldg``: the largest yearly mean-MAE ratio over the buildings;
* test-week violations (hours below zero) and the 80 % / 95 % intervals' coverage and width.

Beside them, fitted in the same processes, the peers an operator would try first:
scikit-learn's ``HistGradientBoostingRegressor`` (absolute loss, default settings) on the
calendar, holiday, weather and the load one and two weeks back (feature set ``paper_lags``),
trained on the 12-week history (``gbr_reference``) and on a year of it (``gbr_reference_52w``,
as much as the archive holds up to 52 weeks); and LightGBM per building on a year as Nixtla's
mlforecast documentation sets it up (``lgbm_reference_52w``: lags 168 and 336 h, local hour and
weekday, the holiday flag and the week's weather, the target standardised per building, absolute
loss, default trees; on ``lightgbm`` directly). The *strongest peer* of a year is the best of
the three. Then, per year, the goals: the published forecast against the strongest peer and
against the best single model of the run, the constrained network against the strongest peer,
holiday weeks against persistence, negative hours, 80 % coverage.

    python benchmarks/forecast_quality.py                                 # 10 buildings x 2019
    python benchmarks/forecast_quality.py --years 2016,2017,2018 --buildings auto 20
    python benchmarks/forecast_quality.py --years 2019,2020 --buildings auto 20 \\
        --skip-buildings 20                                                # other buildings
    python benchmarks/forecast_quality.py --archive /data/cambridge-estates --years 2021 \\
        --buildings auto 20                                                # your own archive
    python benchmarks/forecast_quality.py --years 2016,2017,2018 --buildings auto 20 \\
        --mode both                                                       # and cold: every 4th
    python benchmarks/forecast_quality.py --buildings UCam_Building_b7 --start 2019-03-04 \\
        --end 2019-04-29 --trials 5                                        # a quick look

``--mode cold`` runs every 4th Monday of each year with nothing between and no warm-up weeks, as
a backfill of every 4th week runs, or a building's or a new operator's first weeks: no model has
forecasts issued for the weeks just before (``--mode both``: each year in both modes). Which
Mondays those are is a matter of phase: ``--cold-phases 4`` runs the four phases of every 4th
Monday, each on its own with nothing carried between them, so that every Monday of the year is
scored once, cold, and prints the goals of each phase beside the pooled ones (on 2016 the phase
alone moved the published forecast from 0.92x to 1.02x the strongest peer). ``--portfolios``
writes each year's results into its warehouse as a run writes them and scores the product's
portfolio bands (all the year's buildings, and every third by id) over every week and over the
first weeks alone, the weeks no earlier published week calibrated.

``--archive`` is any archive in the Cambridge layout (``building_data/processed_data/<id>/
electricity/<year>.csv`` and the Met Office folders); ``--buildings auto N`` takes, per year, the
first N buildings (by number) with readings for at least 90 % of the hours of the target year
and of the year before it (of the target year alone for the archive's first year, whose weeks
start once 16 weeks of readings lie behind them).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
import warnings
from concurrent.futures import ProcessPoolExecutor
from datetime import date, timedelta
from pathlib import Path

import lightgbm
import numpy as np
import pandas as pd
from _distribution_peers import (
    CONFORMAL_SUFFIX,
    LGBM_QUANTILE,
    N_WINDOWS,
    NAIVE_EMPIRICAL,
    conformal_quantiles,
    distribution_scores,
    lightgbm_quantiles,
    mlforecast_inputs,
    naive_empirical,
    window_errors,
)
from sklearn.ensemble import HistGradientBoostingRegressor
from threadpoolctl import threadpool_limits

from tasks.ingest.cambridge_archive import ingest_cambridge
from tasks.ingest.portfolios_file import load_portfolios, write_portfolios
from tasks.protocol.batch import BuildingJob, run_batch
from tasks.protocol.config import ForecastConfig
from tasks.protocol.features import build_features, holiday_dates
from tasks.protocol.intervals import LEVELS, MIN_CALIBRATION, QUANTILES, quantile_suffix
from tasks.protocol.models import MODELS, SEASONAL_NAIVE
from tasks.protocol.weeks import mondays_between
from tasks.protocol.windows import Window, build_window, window_load_range
from tasks.warehouse.batches import load_jobs
from tasks.warehouse.connection import connect
from tasks.warehouse.hours import load_building_hours_by_id
from tasks.warehouse.portfolio_sql import ALL, RECORD_WEEKS, calibration_rows, read_portfolio_scores
from tasks.warehouse.results import result_tables, write_result_tables

ARCHIVE = Path(__file__).resolve().parents[2] / "shared" / "data" / "cambridge-estates"
"""The archive in ``../shared`` (``--archive`` names another)."""
BUILDINGS = (
    "UCam_Building_b0", "UCam_Building_b1", "UCam_Building_b3", "UCam_Building_b4",
    "UCam_Building_b7", "UCam_Building_b8", "UCam_Building_b9", "UCam_Building_b11",
    "UCam_Building_b12", "UCam_Building_b14",
)
"""Fixed so the numbers can be rerun: the first ten buildings with near-complete 2018-2019 data."""
REFERENCE = "gbr_reference"
REFERENCE_52W = "gbr_reference_52w"
LGBM_52W = "lgbm_reference_52w"
PEERS = {REFERENCE: 12, REFERENCE_52W: 52, LGBM_52W: 52}
"""The peers and the weeks of history each trains on."""
PROBABILISTIC_PEERS = (LGBM_QUANTILE, NAIVE_EMPIRICAL, *(f"{p}{CONFORMAL_SUFFIX}" for p in PEERS))
"""The peers that forecast a distribution (:mod:`_distribution_peers`)."""
PUBLISHED = "published"
COMBINATIONS = tuple(name for name, spec in MODELS.items() if spec.combination)
"""Not single models: what "the best single model" is compared without."""
NETWORK = "wadiro_pcscnn"
COLD_EVERY = 4
"""The cold mode runs every 4th Monday and nothing between."""
RUN_ID = "forecast-quality"
"""The run id of the result rows ``--portfolios`` writes into a year's warehouse."""
THIRD = "third"
"""``--portfolios``' named portfolio: every third building, by id."""
PORTFOLIO_WEEKS = (("every week", 0, RECORD_WEEKS), ("first weeks", 0, 0))
"""The weeks ``--portfolios`` pools (earlier published weeks in their record: fewest, most)."""
PHASE_GOALS = ["strongest peer", "published / strongest peer", f"{NETWORK} / strongest peer"]
"""What the cold mode prints per phase when it runs more than one."""
FIRST_WEEKS_OF_ARCHIVE = 16
"""Weeks of readings the archive's first year needs behind a target week (12 of history and the
four the persistence forecasts look back)."""


def _years_on_disk(archive: Path) -> list[int]:
    """The years any building of the archive has a file for."""
    files = (archive / "building_data" / "processed_data").glob("*/electricity/*.csv")
    return sorted({int(p.stem) for p in files if p.stem.isdigit()})


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


def year_weeks(year: int, first_year: int) -> list[date]:
    """Every Monday of ``year``; in the archive's first year, from the one with 16 weeks of
    readings behind it."""
    start = date(year, 1, 1)
    if year == first_year:
        start += timedelta(weeks=FIRST_WEEKS_OF_ARCHIVE)
    mondays = pd.date_range(start, f"{year}-12-31", freq="W-MON")
    return [m.date() for m in mondays]


def peer_window(features: pd.DataFrame, week: date, timezone: str, weeks: int) -> Window:
    """The window a peer of ``weeks`` weeks of history fits and forecasts (``paper_lags``; its
    fit weeks need as many usable hours as the protocol's 12-week window's)."""
    return build_window(features, week, timezone, feature_set="paper_lags", history_weeks=weeks,
                        min_fit_fraction=0.5 * 11 / (weeks - 1))


def hist_gbr(window: Window) -> np.ndarray:
    """The forecast of ``window``'s target week by scikit-learn's gradient boosting (absolute
    loss, default settings)."""
    X, y = window.xy("train")
    model = HistGradientBoostingRegressor(loss="absolute_error", random_state=0).fit(X, y)
    return model.predict(window.xy("test")[0])


def reference_forecasts(
    hours: pd.DataFrame, timezone: str, holidays: tuple[str, str | None], week: date,
    test_ts: pd.DatetimeIndex | None = None,
) -> dict[str, tuple[np.ndarray, dict[float, np.ndarray] | None]]:
    """Each peer's forecast of ``week`` and, for the probabilistic peers, its quantiles
    (:mod:`_distribution_peers`; ``test_ts``: the week's hours, for last week's load's); a peer
    whose window is unusable is left out."""
    features = build_features(hours, timezone=timezone, holiday_country=holidays[0],
                              holiday_subdiv=holidays[1], feature_set="paper_lags")
    out = {}
    for name, weeks in PEERS.items():
        def window_of(target: date, weeks: int = weeks) -> Window:
            return peer_window(features, target, timezone, weeks)

        window = window_of(week)
        if not window.ok:
            continue
        fit_predict = mlforecast_lightgbm if name == LGBM_52W else hist_gbr
        y_hat = fit_predict(window)
        out[name] = (y_hat, None)
        errors = window_errors(fit_predict, window_of, week)
        if errors.size >= MIN_CALIBRATION:
            out[name + CONFORMAL_SUFFIX] = (y_hat, conformal_quantiles(y_hat, errors))
        if name == LGBM_52W:
            quantiles = lightgbm_quantiles(window)
            out[LGBM_QUANTILE] = (quantiles[0.5], quantiles)
    if test_ts is not None:
        naive = naive_empirical(hours.set_index("ts")["kwh"], test_ts)
        if naive is not None:
            out[NAIVE_EMPIRICAL] = naive
    return out


def mlforecast_lightgbm(window: Window) -> np.ndarray:
    """The forecast of ``window``'s target week by LightGBM as mlforecast's documentation sets
    it up: ``MLForecast(models=LGBMRegressor(objective="l1"), lags=[168, 336],
    date_features=["hour", "dayofweek"], target_transforms=[LocalStandardScaler()])`` with the
    holiday flag and the weather as exogenous inputs, on a year. The target and its lags are
    standardised by the training hours' mean and deviation (the lags of a scaled series are the
    scaled lags), the calendar is the local hour and weekday as integers, and the forecast is
    scaled back."""
    y_train = window.train["kwh"].to_numpy(np.float64)
    mean, scale = float(y_train.mean()), float(y_train.std()) or 1.0
    X, y = mlforecast_inputs(window, "train", mean, scale)
    model = lightgbm.LGBMRegressor(objective="l1", random_state=0, verbosity=-1, n_jobs=1)
    model.fit(X, (y - mean) / scale)
    return model.predict(mlforecast_inputs(window, "test", mean, scale)[0]) * scale + mean


def run_building(job: BuildingJob, config: ForecastConfig, peer_hours: pd.DataFrame,
                 keep_forecasts: bool = False, first_scored: date | None = None,
                 stored: bool = False) -> tuple[list[dict], float, dict | None]:
    """Every week of one building: one row per (week, model), the CPU seconds the protocol
    spent, and with ``stored`` the result tables a run writes for its weeks (warm-up weeks
    included: they are the record of the first scored weeks' portfolio bands). With
    ``keep_forecasts`` each row also holds the forecast, the actuals and the model's validation
    errors, for looking at combinations and publication rules afterwards, and the weeks before
    ``first_scored`` (warm-up weeks: the first scored weeks' record) are kept too, without the
    peers."""
    threadpool_limits(limits=1)
    warnings.filterwarnings("ignore")
    started = time.process_time()
    results = run_batch([job], config, sent_back=False)
    cpu = time.process_time() - started
    tables = result_tables(results, RUN_ID) if stored else None
    info = job.info
    actual = peer_hours.set_index("ts")["kwh"]
    rows = []
    for res in results:
        warm_up = first_scored is not None and res.week < first_scored
        if warm_up and not keep_forecasts:
            continue
        outcomes = {o.model: o for o in res.outcomes if o.status == "ok"}
        truth = actual.reindex(res.test_ts).to_numpy()
        for out in outcomes.values():
            s = out.scores
            extra = ({"y_hat": out.y_hat, "ts": res.test_ts.to_numpy(), "actual": truth,
                      "validation_mae": out.validation_mae,
                      "validation_errors": out.validation_errors} if keep_forecasts else {})
            rows.append({"building_id": res.building_id, "week": res.week, "model": out.model,
                         "mae": s.mae, "violations": s.n_violations, **extra,
                         "n_hours": s.n_hours,
                         "pinball": np.nan if s.pinball_mean is None else s.pinball_mean,
                         **{f"below_{lv}": s.quantile_below.get(lv, np.nan) for lv in QUANTILES},
                         **{f"coverage_{round(100 * lv)}": s.interval_coverage.get(lv)
                            for lv in LEVELS},
                         **{f"width_{round(100 * lv)}": s.interval_width.get(lv) for lv in LEVELS}})
        if res.publication is not None and res.publication.model in outcomes:
            rows.append({**next(r for r in rows if r["week"] == res.week
                                and r["model"] == res.publication.model), "model": PUBLISHED,
                         "published_model": res.publication.model,
                         "outcome": res.publication.outcome})
        if warm_up or not len(res.test_ts):
            continue
        start, _ = window_load_range(res.week, info.timezone, history_weeks=52,
                                     feature_set="paper_lags")
        start -= timedelta(weeks=N_WINDOWS)  # the conformal peers' earlier windows
        recent = peer_hours[(peer_hours["ts"] >= start - timedelta(days=1))
                            & (peer_hours["ts"] < res.test_ts.max() + timedelta(days=1))]
        peers = reference_forecasts(recent.reset_index(drop=True), info.timezone,
                                    (info.holiday_country, info.holiday_subdiv), res.week,
                                    res.test_ts)
        scored = np.isfinite(truth)
        for name, (forecast, quantiles) in peers.items():
            if scored.any():
                rows.append({"building_id": res.building_id, "week": res.week, "model": name,
                             "mae": float(np.nanmean(np.abs(forecast[scored] - truth[scored]))),
                             "violations": int(np.sum(forecast < -1e-6)),
                             "n_hours": int(scored.sum()),
                             **(distribution_scores(truth, quantiles) if quantiles else {}),
                             **({"y_hat": forecast, "ts": res.test_ts.to_numpy(),
                                 "actual": truth} if keep_forecasts else {})})
    return rows, cpu, tables


def phases_note(phases: int) -> str:
    """How a year's cold rows were run, when in more than one phase."""
    return (f"; {phases} phases of every {COLD_EVERY}th Monday, each run on its own with nothing "
            "carried between them" if phases > 1 else "")


def holiday_weeks(weeks: list[date]) -> set[date]:
    """Target weeks with a public holiday (England) on a weekday."""
    days = holiday_dates("GB", "ENG", range(weeks[0].year - 1, weeks[-1].year + 2))
    return {w for w in weeks
            if any(np.datetime64(w + timedelta(days=k), "D") in days for k in range(5))}


def calibration(frame: pd.DataFrame) -> dict[float, float]:
    """Each quantile level's share of the scored hours at or below it, pooled over the rows
    (weighted by their scored hours); NaN for a level no row has."""
    out = {}
    for level in QUANTILES:
        column = f"below_{level}"
        if column not in frame:
            out[level] = np.nan
            continue
        known = frame[frame[column].notna()]
        weights = known["n_hours"].astype(float)
        out[level] = (float((known[column] * weights).sum() / weights.sum())
                      if weights.sum() else np.nan)
    return out


def worst_level(shares: dict[float, float]) -> float:
    """The largest miss of a level's share from the level, in percentage points."""
    misses = [abs(share - level) for level, share in shares.items() if np.isfinite(share)]
    return 100 * max(misses) if misses else np.nan


def summarise(rows: pd.DataFrame, holidays: set[date]) -> pd.DataFrame:
    naive = rows[rows["model"] == SEASONAL_NAIVE][["building_id", "week", "mae"]
                                                  + (["pinball"] if "pinball" in rows else [])]
    paired = rows.merge(naive.rename(columns={"mae": "naive_mae", "pinball": "naive_pinball"}),
                        on=["building_id", "week"])
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
            "mae_vs_naive": ratio(frame),
            "beats_naive": float((frame["mae"] < frame["naive_mae"]).mean()),
            "holiday_vs_naive": ratio(on_holiday),
            "holiday_beats": float((on_holiday["mae"] < on_holiday["naive_mae"]).mean())
            if len(on_holiday) else np.nan,
            "worst_bldg": per_building.max(), "violations": int(frame["violations"].sum()),
            "coverage_80": frame.get("coverage_80", pd.Series(dtype=float)).mean(),
            "coverage_95": frame.get("coverage_95", pd.Series(dtype=float)).mean(),
            "width_80": frame.get("width_80", pd.Series(dtype=float)).mean(),
            "pinball_vs_naive": _pinball_ratio(frame),
            "calib_worst_pts": worst_level(calibration(frame)),
        })
    return pd.DataFrame(table).sort_values("mae_vs_naive").reset_index(drop=True)


def _pinball_ratio(frame: pd.DataFrame) -> float:
    """The model's summed mean pinball loss over seasonal naive's, on the building-weeks both
    have one."""
    if "pinball" not in frame or "naive_pinball" not in frame:
        return np.nan
    both = frame[frame["pinball"].notna() & frame["naive_pinball"].notna()]
    return both["pinball"].sum() / both["naive_pinball"].sum() if len(both) else np.nan


def goals(table: pd.DataFrame) -> dict[str, float]:
    """The issue's goals of one year, from its summary table."""
    by = table.set_index("model")
    ratio = by["mae_vs_naive"]
    strongest = min((name for name in PEERS if name in ratio), key=ratio.get, default=None)
    peer = ratio[strongest] if strongest else np.nan
    singles = ratio.drop([PUBLISHED, *PEERS, *PROBABILISTIC_PEERS, *COMBINATIONS],
                         errors="ignore")
    pinball = by["pinball_vs_naive"] if "pinball_vs_naive" in by else pd.Series(dtype=float)
    probabilistic = [name for name in PROBABILISTIC_PEERS if np.isfinite(pinball.get(name, np.nan))]
    strongest_distribution = min(probabilistic, key=pinball.get, default=None)
    return {
        "strongest probabilistic peer": strongest_distribution,
        "published pinball / strongest probabilistic peer": (
            pinball.get(PUBLISHED, np.nan) / pinball[strongest_distribution]
            if strongest_distribution else np.nan),
        "published pinball / seasonal naive's": pinball.get(PUBLISHED, np.nan),
        "published calibration, worst level (points)": by["calib_worst_pts"].get(PUBLISHED)
        if "calib_worst_pts" in by else np.nan,
        "strongest peer": strongest,
        "published / strongest peer": ratio[PUBLISHED] / peer,
        "published / best single model": ratio[PUBLISHED] / singles.min(),
        "best single model": singles.idxmin(),
        f"{NETWORK} / strongest peer": ratio.get(NETWORK, np.nan) / peer,
        "holiday weeks, published / persistence": by["holiday_vs_naive"].get(PUBLISHED),
        "negative hours, published": by["violations"].get(PUBLISHED),
        "80 % coverage, published": by["coverage_80"].get(PUBLISHED),
    }


def portfolio_goals(coverage: pd.DataFrame | None) -> dict[str, float]:
    """The portfolio goal of one year: each portfolio's 95 % coverage over every week."""
    if coverage is None:
        return {}
    every = coverage[coverage["weeks"] == PORTFOLIO_WEEKS[0][0]].set_index("portfolio_id")
    return {**{f"portfolio 95 % coverage, {name}": every["coverage_95"].get(name, np.nan)
               for name in (ALL, THIRD)},
            **{f"portfolio calibration, worst level (points), {name}":
               every["calib_worst_pts"].get(name, np.nan) for name in (ALL, THIRD)}}


def evaluate_year(year: int, archive: Path, buildings: list[str], weeks: list[date],
                  config: ForecastConfig, workers: int, keep: bool, warm_up: list[date],
                  portfolios: bool = False) -> tuple[pd.DataFrame, float, pd.DataFrame | None]:
    """Every (building, week) row of one year, the protocol's CPU seconds, and with
    ``portfolios`` the ``portfolio_scores`` rows of its scored weeks. The ``warm_up`` weeks
    before the year run first and are not scored: a deployed run has weeks of issued forecasts
    and scores behind it (the record, the issued forecasts models are stacked on). With
    ``keep`` their rows are returned too, marked ``warm_up``."""
    run_weeks = [*warm_up, *weeks]
    with tempfile.TemporaryDirectory(prefix="forecast-quality-") as tmp:
        warehouse = Path(tmp) / "quality.duckdb"
        first = min(config.load_range(run_weeks[0], "Europe/London")[0].date(),
                    run_weeks[0] - timedelta(weeks=58))
        ingest_cambridge(warehouse, archive, buildings, first, weeks[-1] + timedelta(weeks=1))
        jobs = [job for b in buildings for job in load_jobs(warehouse, [b], run_weeks, config)]
        with connect(warehouse, read_only=True) as con:
            peer_hours = load_building_hours_by_id(
                con, buildings, pd.Timestamp(first, tz="UTC"),
                pd.Timestamp(weeks[-1] + timedelta(weeks=1, days=1), tz="UTC"))
        with ProcessPoolExecutor(max_workers=workers) as pool:
            outputs = list(pool.map(
                run_building, jobs, [config] * len(jobs),
                [peer_hours[job.info.building_id] for job in jobs], [keep] * len(jobs),
                [weeks[0]] * len(jobs), [portfolios] * len(jobs)))
        scores = (portfolio_scores(warehouse, Path(tmp), buildings, weeks, config,
                                   [tables for _, _, tables in outputs])
                  if portfolios else None)
    rows = pd.DataFrame([row for building_rows, _, _ in outputs for row in building_rows])
    rows["warm_up"] = rows["week"] < weeks[0]
    rows["year"] = year
    return rows, sum(seconds for _, seconds, _ in outputs), scores


def portfolio_scores(warehouse: Path, folder: Path, buildings: list[str], weeks: list[date],
                     config: ForecastConfig, tables: list[dict]) -> pd.DataFrame:
    """The year's results written into its warehouse as a run writes them, a portfolio of every
    third building (by id) named beside ``all`` from a portfolios file, and the product's
    ``portfolio_scores`` rows of the scored ``weeks``."""
    members = folder / "portfolios.csv"
    members.write_text("portfolio_id,building_id\n"
                       + "".join(f"{THIRD},{b}\n" for b in sorted(buildings)[::3]))
    with connect(warehouse) as con:
        for building_tables in tables:
            write_result_tables(con, building_tables, config.models)
        write_portfolios(con, load_portfolios(members))
        return read_portfolio_scores(con, [ALL, THIRD], weeks)


def portfolio_coverage(scores: pd.DataFrame) -> pd.DataFrame:
    """Per portfolio, over the scored hours: the 80 % and 95 % bands' coverage, pooled over
    every week and over the first weeks alone (no earlier published week calibrated them), and
    over every week its quantiles' largest miss of their level (points) and mean pinball loss
    (kWh)."""
    rows = calibration_rows(scores, PORTFOLIO_WEEKS)
    rows = rows[["portfolio_id", "weeks", "n_weeks", "n_hours", "coverage_80", "coverage_95"]]
    scored = scores[scores["n_hours"] > 0]
    distribution = {}
    for portfolio, frame in scored.groupby("portfolio_id"):
        shares = calibration(frame.rename(columns={f"below_{quantile_suffix(lv)}": f"below_{lv}"
                                                   for lv in QUANTILES}))
        distribution[portfolio] = {"calib_worst_pts": worst_level(shares),
                                   "pinball": frame["pinball_mean"].mean()}
    every = rows["weeks"] == PORTFOLIO_WEEKS[0][0]
    for column in ("calib_worst_pts", "pinball"):
        rows[column] = np.where(every, rows["portfolio_id"].map(
            {p: d[column] for p, d in distribution.items()}), np.nan)
    return rows


def calibration_table(rows: pd.DataFrame) -> pd.DataFrame:
    """Per quantile level (columns, in %), the published forecast's and each probabilistic
    peer's share of the scored hours at or below it."""
    shown = [PUBLISHED, SEASONAL_NAIVE, *PROBABILISTIC_PEERS]
    return pd.DataFrame({model: {f"{100 * lv:g} %": share for lv, share in
                                 calibration(rows[rows["model"] == model]).items()}
                         for model in shown if (rows["model"] == model).any()}).T


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--archive", type=Path, default=ARCHIVE,
                        help="an archive in the Cambridge layout (default: ../shared's)")
    parser.add_argument("--buildings", nargs="+", default=[",".join(BUILDINGS)],
                        help="comma-separated ids, or 'auto N' (module docstring)")
    parser.add_argument("--skip-buildings", type=int, default=0, metavar="K",
                        help="with 'auto N': the N complete buildings after the first K (buildings "
                        "the design was not chosen on)")
    parser.add_argument("--years", default=None,
                        help="every Monday of these years, comma-separated (instead of "
                        "--start/--end)")
    parser.add_argument("--year", type=int, default=None, help="one year (as --years)")
    parser.add_argument("--start", default="2019-01-07", help="first target week (a Monday)")
    parser.add_argument("--end", default="2019-12-30", help="last target week (a Monday)")
    parser.add_argument("--every", type=int, default=1, help="every n-th Monday of the range")
    parser.add_argument("--mode", default="monday", choices=["monday", "cold", "both"],
                        help="monday: every Monday (of --every) after the warm-up weeks; cold: "
                        f"every {COLD_EVERY}th of them and nothing between, no warm-up (a "
                        "backfill of every 4th week, a new building's or operator's first "
                        "weeks: no issued forecasts of the weeks before); both: each year in both")
    parser.add_argument("--cold-phases", type=int, default=1, choices=range(1, COLD_EVERY + 1),
                        help=f"cold: how many of the {COLD_EVERY} phases of every {COLD_EVERY}th "
                        "Monday to run, each on its own and pooled in the year's rows (phase k "
                        f"starts at the year's Monday k; {COLD_EVERY}: every Monday scored once, "
                        "cold)")
    parser.add_argument("--warm-up-weeks", type=int, default=8,
                        help="weeks run before each year and not scored (a deployed run's "
                        "record and issued forecasts), as far as the archive reaches back")
    parser.add_argument("--models", default=None, help="default: the protocol's")
    parser.add_argument("--trials", type=int, default=None, help="default: the protocol's")
    parser.add_argument("--protocol", default="deployed", choices=["deployed", "paper"])
    parser.add_argument("--tuning", default=None, choices=["reuse", "per-window"],
                        help="default: the protocol's")
    parser.add_argument("--set", action="append", default=[], metavar="FIELD=JSON",
                        help="any other run setting, its value as JSON (e.g. "
                        "'ensemble_power=2', 'model_inputs={\"gbr\": {...}}'); repeatable")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--portfolios", action="store_true",
                        help="also write each year's results into its warehouse as a run does "
                        f"and score the product's portfolio bands: {ALL} and {THIRD} (every "
                        "third building)")
    parser.add_argument("--csv", type=Path, help="also write every (building, week, model) row")
    parser.add_argument("--pickle", type=Path,
                        help="also write every row with its forecast, validation errors and "
                        "the actuals, and the warm-up weeks' rows (marked warm_up) that were "
                        "the first scored weeks' record (pandas; benchmarks/ensemble_replay.py "
                        "reads it)")
    args = parser.parse_args()
    chosen = {"models": args.models.split(",") if args.models else None,
              "trials": args.trials, "tuning": args.tuning}
    chosen.update({name: json.loads(value) for name, _, value in
                   (item.partition("=") for item in args.set)})
    config = ForecastConfig(protocol=args.protocol,
                            **{k: v for k, v in chosen.items() if v is not None})
    on_disk = _years_on_disk(args.archive)
    years = ([int(y) for y in args.years.split(",")] if args.years
             else [args.year] if args.year else [])
    spans = ({y: year_weeks(y, on_disk[0])[::args.every] for y in years} if years
             else {0: mondays_between(args.start, args.end)[::args.every]})
    auto = args.buildings[0] == "auto"
    n_auto = int(args.buildings[1]) if auto and len(args.buildings) > 1 else 10
    if args.skip_buildings and not auto:
        parser.error("--skip-buildings goes with --buildings auto N")
    print(f"protocol {config.protocol}: models {', '.join(config.models)}, {config.trials} "
          f"trials, tuning {config.tuning}, feature set {config.feature_set}, target "
          f"{config.target}, persistence {config.persistence}, {args.workers} workers",
          flush=True)
    all_rows, tables, bands = [], {}, {}
    modes = ["monday", "cold"] if args.mode == "both" else [args.mode]
    for (year, span), mode in ((item, mode) for item in spans.items() for mode in modes):
        runs = ([span[phase::COLD_EVERY] for phase in range(args.cold_phases)]
                if mode == "cold" else [span])
        weeks = sorted(week for run in runs for week in run)
        data_years = [y for y in (weeks[0].year - 1, weeks[-1].year) if y in on_disk]
        buildings = (complete_buildings(args.archive, data_years,
                                        args.skip_buildings + n_auto)[args.skip_buildings:]
                     if auto else args.buildings[0].split(","))
        began = time.perf_counter()
        earliest = year_weeks(on_disk[0], on_disk[0])[0]
        parts, scores, cpu, n_run, n_warm_up = [], [], 0.0, 0, 0
        for phase, run_weeks in enumerate(runs):  # each phase of the cold mode on its own
            warm_up = [] if mode == "cold" else [
                w for w in (run_weeks[0] - timedelta(weeks=k)
                            for k in range(args.warm_up_weeks, 0, -1)) if w >= earliest]
            part, seconds, scored = evaluate_year(year or weeks[0].year, args.archive,
                                                  buildings, run_weeks, config, args.workers,
                                                  args.pickle is not None, warm_up,
                                                  args.portfolios)
            part["mode"], part["phase"] = mode, phase
            parts.append(part)
            scores.append(scored)
            cpu += seconds
            n_run += len(buildings) * (len(run_weeks) + len(warm_up))
            n_warm_up += len(warm_up)
        kept = pd.concat(parts, ignore_index=True)
        all_rows.append(kept)
        rows = kept[~kept["warm_up"]].drop(columns="warm_up")
        table = summarise(rows, holiday_weeks(weeks))
        label = f"{year or f'{weeks[0]} to {weeks[-1]}'}{' cold' if mode == 'cold' else ''}"
        tables[label] = table
        print(f"\n{label}: {len(buildings)} buildings "
              f"({', '.join(b.rsplit('_', 1)[-1] for b in buildings)}) x {len(weeks)} weeks, "
              f"{len(rows[rows['model'] == SEASONAL_NAIVE])} building-weeks scored in "
              f"{time.perf_counter() - began:.0f} s wall; protocol CPU per building-week "
              f"{cpu / max(1, n_run):.1f} s (the peers' not included; {n_warm_up} warm-up weeks "
              f"run before, not scored){phases_note(len(runs))}\n", flush=True)
        print(table.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
        print("\nquantiles: each level's share of the scored hours at or below it\n"
              + calibration_table(rows).to_string(float_format=lambda v: f"{v:.3f}"))
        if len(runs) > 1:
            print("\n" + pd.DataFrame({
                f"phase {phase}": goals(summarise(rows[rows["phase"] == phase],
                                                  holiday_weeks(runs[phase])))
                for phase in range(len(runs))}).loc[PHASE_GOALS].to_string(
                    float_format=lambda v: f"{v:.3f}"))
        if args.portfolios:
            bands[label] = portfolio_coverage(pd.concat(scores, ignore_index=True))
            print(f"\nportfolio bands ({ALL}: the {len(buildings)} buildings; {THIRD}: every third "
                  "by id; first weeks: no earlier published week in their record)\n"
                  + bands[label].to_string(index=False, float_format=lambda v: f"{v:.3f}"))
        published = rows[rows["model"] == PUBLISHED]
        shares = published["published_model"].value_counts(normalize=True)
        print("\npublished models: " + ", ".join(f"{m} {s:.0%}" for m, s in shares.items()))
        if "outcome" in published:
            outcomes = published["outcome"].value_counts(normalize=True)
            print("published outcomes: " + ", ".join(f"{m} {s:.0%}" for m, s in outcomes.items()))
        print(flush=True)
        if args.pickle:  # after every year: a long run stopped later keeps what it measured
            pd.to_pickle({"rows": pd.concat(all_rows, ignore_index=True)}, args.pickle)
    print("goals (strongest peer: the best of " + ", ".join(PEERS) + "):")
    print(pd.DataFrame({label: {**goals(table), **portfolio_goals(bands.get(label))}
                        for label, table in tables.items()}).to_string(
        float_format=lambda v: f"{v:.3f}"))
    rows = pd.concat(all_rows, ignore_index=True)
    if args.csv:
        rows[~rows["warm_up"]].drop(
            columns=["warm_up", "y_hat", "ts", "actual", "validation_mae", "validation_errors"],
            errors="ignore").to_csv(args.csv, index=False)


if __name__ == "__main__":
    main()
