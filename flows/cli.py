"""The ``wadiro`` command line: parses options and runs the Prefect flows."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from datetime import date, datetime
from pathlib import Path
from typing import Annotated, Optional, Protocol, TypeVar

import typer

# A local run starts Prefect's temporary server; it must not try to phone home (batch machines
# are often offline, which makes it log errors). Set before Prefect is imported: its settings,
# which the processes runner hands to its workers, are read at import. Users can override.
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")

from wadiro_fleet.flows.cli_options import DATE_FORMATS, split_list, with_settings  # noqa: E402
from wadiro_fleet.flows.forecast import backfill_flow, weekly_forecast_flow  # noqa: E402
from wadiro_fleet.flows.ingest import ingest_cambridge_flow, ingest_synthetic_flow  # noqa: E402
from wadiro_fleet.flows.settings import BackfillSettings, WeeklySettings  # noqa: E402
from wadiro_fleet.tasks.errors import PipelineError  # noqa: E402
from wadiro_fleet.tasks.forecast_tasks import RunSummary  # noqa: E402
from wadiro_fleet.tasks.ingest.cambridge_archive import ArchiveSelection  # noqa: E402
from wadiro_fleet.tasks.ingest.synthetic_fleet import FleetSpec  # noqa: E402
from wadiro_fleet.tasks.report import read_run_leaderboard, write_report  # noqa: E402
from wadiro_fleet.tasks.warehouse.connection import DEFAULT_WAREHOUSE  # noqa: E402
from wadiro_fleet.tasks.warehouse.selection import has_buildings  # noqa: E402

app = typer.Typer(no_args_is_help=True, add_completion=False, help="Fleet-scale week-ahead load forecasting.")
ingest_app = typer.Typer(no_args_is_help=True, help="Fill the warehouse's input tables.")
app.add_typer(ingest_app, name="ingest")

Warehouse = Annotated[
    Path, typer.Option("--warehouse", help="DuckDB warehouse file (created on first use).")
]
def _day_option(flag: str, help_text: str) -> typer.models.OptionInfo:
    return typer.Option(flag, formats=DATE_FORMATS, help=help_text)


@app.callback()
def main(
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Show Prefect's run logs.")] = False,
) -> None:
    """Fleet-scale week-ahead load forecasting."""
    if not verbose:
        # Prefect logs every failed run with its traceback; for input errors the one-line
        # message printed below is the whole story, so keep Prefect to warnings and quieter.
        logging.getLogger("prefect").setLevel(logging.WARNING)
        for name in ("prefect.flow_runs", "prefect.task_runs"):
            logging.getLogger(name).setLevel(logging.CRITICAL)
        # Worker processes (the processes runner) configure their own logging from this.
        os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")


T = TypeVar("T")


def run_guarded(call: Callable[[], T]) -> T:
    """``call()``, with a pipeline error (bad input, busy warehouse) turned into one line and
    exit code 1."""
    try:
        return call()
    except PipelineError as error:
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(code=1) from None


def _as_date(value: datetime | None) -> date | None:
    return value.date() if value is not None else None


# --- ingest ------------------------------------------------------------------------------

class _IngestSummary(Protocol):
    seconds: float

    def line(self) -> str: ...


def _ingest(label: str, call: Callable[[], _IngestSummary]) -> None:
    """Run an ingest flow; print its one-line summary."""
    began = time.perf_counter()
    summary = run_guarded(call)
    total = time.perf_counter() - began
    typer.echo(f"{label}: {summary.line()} in {total:.1f} s (ingest itself {summary.seconds:.1f} s)")


@ingest_app.command("cambridge")
@with_settings(ArchiveSelection)
def ingest_cambridge(settings: ArchiveSelection, warehouse: Warehouse = Path(DEFAULT_WAREHOUSE)) -> None:
    """Ingest the real Cambridge archive (electricity and Bedford weather)."""
    _ingest("cambridge", lambda: ingest_cambridge_flow(settings, warehouse=str(warehouse)))


@ingest_app.command("synthetic")
@with_settings(FleetSpec)
def ingest_synthetic(settings: FleetSpec, warehouse: Warehouse = Path(DEFAULT_WAREHOUSE)) -> None:
    """Generate and ingest a synthetic fleet of non-residential buildings."""
    _ingest("synthetic", lambda: ingest_synthetic_flow(settings, warehouse=str(warehouse)))


# --- forecasting -------------------------------------------------------------------------

def _report_run(call: Callable[[], RunSummary], warehouse: str) -> None:
    """Run a forecasting flow; print its summary, its failures and its leaderboard."""
    began = time.perf_counter()
    summary = run_guarded(call)
    typer.echo(f"run {summary.run_id}: {summary.line()} in {time.perf_counter() - began:.1f} s")
    for failure in summary.failures:
        typer.echo(f"  failed: {failure}", err=True)
    board = read_run_leaderboard(warehouse, summary.run_id)
    if board.empty:
        typer.echo("no scored forecasts in this run (no actuals in the target week?)")
        return
    shown = board[["model", "n_building_weeks", "mean_mae", "mae_vs_naive", "beats_naive_share",
                   "mean_cv_rmse", "test_violations", "train_violations", "coverage_80"]]
    typer.echo(shown.to_string(index=False, float_format=lambda v: f"{v:.4g}"))


@app.command("forecast")
@with_settings(WeeklySettings)
def forecast(
    settings: WeeklySettings,
    week: Annotated[Optional[datetime], _day_option(
        "--week", "Target week's local Monday (default: the latest week that can be forecast).")] = None,
) -> None:
    """Forecast one target week for the fleet (the weekly run) and score it where actuals exist."""
    _report_run(lambda: weekly_forecast_flow(week=_as_date(week), settings=settings),
                settings.warehouse)


@app.command("backfill")
@with_settings(BackfillSettings)
def backfill(
    settings: BackfillSettings,
    start: Annotated[datetime, _day_option("--start", "First target week's local Monday.")],
    end: Annotated[datetime, _day_option("--end", "Last target week's local Monday (inclusive).")],
) -> None:
    """Forecast and score every target week from --start to --end."""
    _report_run(lambda: backfill_flow(start=start.date(), end=end.date(), settings=settings),
                settings.warehouse)


@app.command("report")
def report(
    out: Annotated[Path, typer.Option("--out", help="Output directory.")] = Path("reports"),
    buildings: Annotated[Optional[str], typer.Option(
        "--buildings", help="Buildings to plot (default: the first three with scores).")] = None,
    warehouse: Warehouse = Path(DEFAULT_WAREHOUSE),
) -> None:
    """Write the fleet leaderboard, per-building errors and forecast plots."""
    ids = split_list(buildings, "--buildings")
    result = run_guarded(lambda: write_report(warehouse, out, ids))
    typer.echo(result.leaderboard.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    for path in result.files:
        typer.echo(f"wrote {path}")


@app.command("demo")
def demo(
    buildings: Annotated[int, typer.Option("--buildings", min=1, help="Demo fleet size.")] = 6,
    trials: Annotated[int, typer.Option("--trials", min=1, help=WeeklySettings.model_fields[
        "trials"].description)] = WeeklySettings.model_fields["trials"].default,
    warehouse: Warehouse = Path(DEFAULT_WAREHOUSE),
) -> None:
    """The whole job on the embedded default: a generated demo fleet, its latest week
    forecast with every model, and the leaderboard."""
    if not has_buildings(warehouse):
        typer.echo(f"generating a demo fleet of {buildings} buildings into {warehouse} ...")
        spec = FleetSpec(buildings=buildings, start=date(2024, 1, 1), weeks=14)
        run_guarded(lambda: ingest_synthetic_flow(spec, warehouse=str(warehouse)))
    settings = WeeklySettings(warehouse=str(warehouse), trials=trials)
    _report_run(lambda: weekly_forecast_flow(settings=settings), settings.warehouse)
