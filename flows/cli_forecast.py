"""The ``wadiro forecast``, ``backfill``, ``report`` and ``demo`` commands."""

from __future__ import annotations

import time
from datetime import date, datetime
from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer

from flows.forecast import RunSummary, backfill_flow, weekly_forecast_flow
from flows.ingest import ingest_synthetic_flow
from flows.runners import RunnerKind
from tasks.forecasting import MODEL_NAMES
from tasks.report import write_report
from tasks.warehouse import connect

DateFormats = ["%Y-%m-%d"]

Buildings = Annotated[
    Optional[str], typer.Option("--buildings", help="Comma-separated building ids (default: all).")
]
Models = Annotated[
    Optional[str],
    typer.Option("--models", help=f"Comma-separated models (default: all): {', '.join(MODEL_NAMES)}."),
]
Trials = Annotated[int, typer.Option("--trials", min=1, help="TPE trials per model and window.")]
class TuningChoice(str, Enum):
    per_window = "per-window"
    reuse = "reuse"


Tuning = Annotated[
    TuningChoice,
    typer.Option("--tuning", help="per-window: tune every window; reuse: refit with the latest "
                 "stored hyperparameters (tune when none or too old)."),
]
ReuseAge = Annotated[
    int, typer.Option("--reuse-max-age-weeks", min=0, help="Oldest tuning --tuning reuse accepts.")
]
FeatureSet = Annotated[str, typer.Option("--feature-set", help="Named feature set (paper, paper_lags).")]
Runner = Annotated[RunnerKind, typer.Option("--runner", help="Where tasks run.")]
DaskAddress = Annotated[
    Optional[str], typer.Option("--dask-address", help="Dask scheduler address for --runner dask.")
]
Workers = Annotated[
    Optional[int], typer.Option("--workers", min=1, help="Parallel workers (default: cores).")
]
Warehouse = Annotated[
    Path, typer.Option("--warehouse", help="DuckDB warehouse file (created on first use).")
]


def split_ids(value: str | None) -> list[str] | None:
    if value is None:
        return None
    ids = [v.strip() for v in value.split(",") if v.strip()]
    return ids or None


def _print_leaderboard(warehouse: Path, run_id: str) -> None:
    from tasks.report import run_leaderboard

    with connect(warehouse, read_only=True) as con:
        board = run_leaderboard(con, run_id)
    if board.empty:
        typer.echo("no scored forecasts in this run (no actuals in the target week?)")
        return
    shown = board[["model", "n_building_weeks", "mean_mae", "median_mae", "mean_rmse",
                   "mean_cv_rmse", "test_violations", "train_violations",
                   "violations_deviation_pct"]]
    typer.echo(shown.to_string(index=False, float_format=lambda v: f"{v:.4g}"))


def _finish(summary: RunSummary, warehouse: Path, began: float) -> None:
    typer.echo(f"run {summary.run_id}: {summary.line()} in {time.perf_counter() - began:.1f} s")
    for failure in summary.failures:
        typer.echo(f"  failed: {failure}", err=True)
    _print_leaderboard(warehouse, summary.run_id)


def register(app: typer.Typer, run_guarded) -> None:  # noqa: ANN001 - the CLI's error wrapper
    """Add the forecasting commands to ``app``; ``run_guarded(call)`` maps input errors to exit 1."""

    def run_forecast_flow(
        flow, warehouse: Path, buildings: str | None, models: str | None, trials: int,  # noqa: ANN001
        tuning: TuningChoice, reuse_max_age_weeks: int, feature_set: str, runner: RunnerKind,
        dask_address: str | None, workers: int | None, **weeks,  # noqa: ANN003
    ) -> None:
        """Run ``flow`` with the options ``forecast`` and ``backfill`` share; print the result."""
        began = time.perf_counter()
        summary = run_guarded(lambda: flow(
            warehouse=str(warehouse), buildings=split_ids(buildings), models=split_ids(models),
            trials=trials, tuning=tuning.value, reuse_max_age_weeks=reuse_max_age_weeks,
            feature_set=feature_set, runner=runner.value, dask_address=dask_address,
            max_workers=workers, **weeks,
        ))
        _finish(summary, warehouse, began)

    @app.command("forecast")
    def forecast(
        week: Annotated[
            Optional[datetime],
            typer.Option("--week", formats=DateFormats,
                         help="Target week's local Monday (default: latest week that can be forecast)."),
        ] = None,
        buildings: Buildings = None, models: Models = None, trials: Trials = 15,
        tuning: Tuning = TuningChoice.per_window, reuse_max_age_weeks: ReuseAge = 8,
        feature_set: FeatureSet = "paper", runner: Runner = RunnerKind.processes,
        dask_address: DaskAddress = None, workers: Workers = None,
        warehouse: Warehouse = Path("warehouse.duckdb"),
    ) -> None:
        """Forecast one target week for the fleet and score it where actuals exist."""
        run_forecast_flow(
            weekly_forecast_flow, warehouse, buildings, models, trials, tuning,
            reuse_max_age_weeks, feature_set, runner, dask_address, workers,
            week=week.date() if week else None,
        )

    @app.command("backfill")
    def backfill(
        start: Annotated[datetime, typer.Option("--start", formats=DateFormats,
                                                help="First target week's local Monday.")],
        end: Annotated[datetime, typer.Option("--end", formats=DateFormats,
                                              help="Last target week's local Monday (inclusive).")],
        buildings: Buildings = None, models: Models = None, trials: Trials = 15,
        tuning: Tuning = TuningChoice.per_window, reuse_max_age_weeks: ReuseAge = 8,
        feature_set: FeatureSet = "paper", runner: Runner = RunnerKind.processes,
        dask_address: DaskAddress = None, workers: Workers = None,
        warehouse: Warehouse = Path("warehouse.duckdb"),
    ) -> None:
        """Forecast and score every target week from --start to --end."""
        run_forecast_flow(
            backfill_flow, warehouse, buildings, models, trials, tuning,
            reuse_max_age_weeks, feature_set, runner, dask_address, workers,
            start=start.date(), end=end.date(),
        )

    @app.command("report")
    def report(
        out: Annotated[Path, typer.Option("--out", help="Output directory.")] = Path("reports"),
        buildings: Annotated[Optional[str], typer.Option(
            "--buildings", help="Buildings to plot (default: the first three with scores).")] = None,
        warehouse: Warehouse = Path("warehouse.duckdb"),
    ) -> None:
        """Write the fleet leaderboard, per-building errors and forecast plots."""
        def make():
            with connect(warehouse, read_only=True) as con:
                return write_report(con, out, split_ids(buildings))

        result = run_guarded(make)
        typer.echo(result.leaderboard.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
        for path in result.files:
            typer.echo(f"wrote {path}")

    @app.command("demo")
    def demo(
        buildings: Annotated[int, typer.Option("--buildings", min=1, help="Demo fleet size.")] = 6,
        trials: Trials = 15,
        warehouse: Warehouse = Path("warehouse.duckdb"),
    ) -> None:
        """The whole job on the embedded default: a generated demo fleet, its latest week
        forecast with every model, and the leaderboard."""
        began = time.perf_counter()
        if not _has_buildings(warehouse):
            typer.echo(f"generating a demo fleet of {buildings} buildings into {warehouse} ...")
            run_guarded(lambda: ingest_synthetic_flow(
                buildings=buildings, start=date(2024, 1, 1), weeks=14, seed=0,
                warehouse=str(warehouse)))
        summary = run_guarded(lambda: weekly_forecast_flow(
            warehouse=str(warehouse), trials=trials, tuning="per-window"))
        _finish(summary, warehouse, began)


def _has_buildings(warehouse: Path) -> bool:
    if not warehouse.exists():
        return False
    with connect(warehouse, read_only=True) as con:
        try:
            return con.execute("SELECT count(*) FROM buildings").fetchone()[0] > 0
        except Exception:  # noqa: BLE001 - a warehouse without the table has no buildings
            return False
