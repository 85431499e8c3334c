"""The ``wadiro`` command line: parses options and runs the Prefect flows.

A command runs its flow through the Prefect server configured with ``PREFECT_API_URL`` (its
history and UI then show the run), or, with none configured, directly in this process: no
temporary server is started (:mod:`~wadiro_fleet.flows.engine`). Modules are imported when a
command needs them, so that a short command starts in about a second.
"""

from __future__ import annotations

import inspect
import logging
import os
import sys
import time
from collections.abc import Callable
from datetime import date, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Protocol, TypeVar

import typer

# Prefect must not try to phone home (batch machines are often offline, which makes it log
# errors). Set before Prefect is imported: its settings, which the processes runner hands to
# its workers, are read at import. Users can override.
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")

from wadiro_fleet.flows.cli_options import (  # noqa: E402
    DATE_FORMATS,
    OnDemandCommands,
    split_list,
    with_settings,
)
from wadiro_fleet.flows.stopping import (  # noqa: E402
    STOP,
    handle_stop_signals,
    hard_exit,
    quiet_resource_tracker,
)
from wadiro_fleet.tasks.errors import PipelineError, RunStoppedError  # noqa: E402
from wadiro_fleet.tasks.warehouse.connection import (  # noqa: E402
    DEFAULT_WAREHOUSE,
    MACHINE_ERRORS,
    WAREHOUSE_ENV,
    machine_refusal,
)

if TYPE_CHECKING:
    from wadiro_fleet.flows.settings import BackfillSettings, WeeklySettings
    from wadiro_fleet.tasks.forecast_tasks import RunSummary
    from wadiro_fleet.tasks.ingest.cambridge_archive import ArchiveSelection
    from wadiro_fleet.tasks.ingest.readings_file import ReadingsOptions
    from wadiro_fleet.tasks.ingest.source_files import CsvFormat, FileOptions
    from wadiro_fleet.tasks.ingest.synthetic_fleet import FleetSpec
    from wadiro_fleet.tasks.ingest.weather_file import WeatherOptions

commands = OnDemandCommands()
ingest_commands = OnDemandCommands()
app = typer.Typer(no_args_is_help=True, add_completion=False, cls=commands.group_class(),
                  help="Fleet-scale week-ahead load forecasting.")
ingest_app = typer.Typer(no_args_is_help=True, cls=ingest_commands.group_class(),
                         help="Fill the warehouse's input tables.")
app.add_typer(ingest_app, name="ingest")

_SETTINGS = "wadiro_fleet.flows.settings"
_USER_LOG = "wadiro_fleet"

_WAREHOUSE_HELP = f"DuckDB warehouse file (default: ${WAREHOUSE_ENV}, else {DEFAULT_WAREHOUSE})"
Warehouse = Annotated[Path, typer.Option(
    "--warehouse", envvar=WAREHOUSE_ENV, help=f"{_WAREHOUSE_HELP}; it must exist.")]
NewWarehouse = Annotated[Path, typer.Option(
    "--warehouse", envvar=WAREHOUSE_ENV, help=f"{_WAREHOUSE_HELP}; created on first use.")]
"""The warehouse option of the commands that create a missing warehouse (they store buildings)."""

def _day_option(flag: str, help_text: str) -> typer.models.OptionInfo:
    return typer.Option(flag, formats=DATE_FORMATS, help=help_text)


class _UserFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return f"{record.levelname.lower()}: {record.getMessage()}"


@app.callback()
def main(
    verbose: Annotated[bool, typer.Option(
        "--verbose", "-v", help="Show Prefect's run logs.")] = False,
) -> None:
    """Fleet-scale week-ahead load forecasting."""
    STOP.reset()
    STOP.may_end_process = True  # a stopped command ends, whatever it is waiting for
    quiet_resource_tracker()
    user_log = logging.getLogger(_USER_LOG)  # what a run tells its user (locks, stops)
    if not any(getattr(h, "_wadiro", False) for h in user_log.handlers):
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(_UserFormatter())
        handler._wadiro = True  # type: ignore[attr-defined]
        user_log.addHandler(handler)
        user_log.propagate = False
    user_log.setLevel(logging.INFO if verbose else logging.WARNING)
    global _VERBOSE
    _VERBOSE = verbose
    if not verbose:
        # Worker processes (the processes runner) configure their own logging from this.
        os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
    _quiet_prefect()


_VERBOSE = False


def _quiet_prefect() -> None:
    """Prefect logs every failed run with its traceback; for input errors the one-line message
    printed below is the whole story, so keep Prefect to warnings and quieter (unless
    ``--verbose``). Applied again once Prefect has configured its logging, which it does when
    the flows are first imported (after the options are read)."""
    if _VERBOSE:
        return
    logging.getLogger("prefect").setLevel(logging.WARNING)
    for name in ("prefect.flow_runs", "prefect.task_runs"):
        logging.getLogger(name).setLevel(logging.CRITICAL)


T = TypeVar("T")


def run_guarded(call: Callable[[], T]) -> T:
    """``call()``, with a pipeline error (bad input, busy warehouse) or the machine's refusal (a
    full disk, a limit, memory) turned into one line and exit code 1, and a stop (Ctrl-C,
    SIGTERM, a lost Prefect server) into one line and its exit code (128 + the signal's number
    after a signal). A stopped run ends the process at once:
    threads still computing abandoned batches, or a Prefect server that no longer answers, are
    not waited for."""
    try:
        with handle_stop_signals():
            return call()
    except PipelineError as error:
        if STOP.requested is not None:
            code = (error.exit_code if isinstance(error, RunStoppedError)
                    else STOP.requested.exit_code)
            hard_exit(code, str(error))
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(code=getattr(error, "exit_code", 1)) from None
    except BaseException as error:  # KeyboardInterrupt, Prefect's TerminationSignal, ...
        if isinstance(error, typer.Exit):
            raise
        if STOP.requested is not None:
            hard_exit(STOP.requested.exit_code, STOP.requested.reason)
        # the machine refused: a full disk, a file-size limit, a read-only folder, memory
        refusal = machine_refusal(error) if isinstance(error, MACHINE_ERRORS) else None
        if refusal is None:
            raise
        typer.echo(f"error: {refusal}", err=True)
        raise typer.Exit(code=1) from None


def _run_flow(flow: Any, **parameters: Any) -> Any:
    from wadiro_fleet.flows.engine import run_flow

    _quiet_prefect()
    return run_flow(flow, **parameters)


# --- ingest ------------------------------------------------------------------------------

class _IngestSummary(Protocol):
    seconds: float

    def line(self) -> str: ...


def _ingest(label: str, warehouse: Path, **parameters: Any) -> None:
    """Run the ingest flow ``ingest_{label}_flow``; print its one-line summary."""
    from wadiro_fleet.flows import ingest

    flow = getattr(ingest, f"ingest_{label}_flow")
    began = time.perf_counter()
    summary: _IngestSummary = run_guarded(
        lambda: _run_flow(flow, warehouse=str(warehouse), **parameters))
    total = time.perf_counter() - began
    typer.echo(f"{label}: {summary.line()} in {total:.1f} s "
               f"(ingest itself {summary.seconds:.1f} s)")


@ingest_commands.command("cambridge")
@with_settings("wadiro_fleet.tasks.ingest.cambridge_archive:ArchiveSelection")
def ingest_cambridge(
    settings: ArchiveSelection, warehouse: NewWarehouse = Path(DEFAULT_WAREHOUSE),
) -> None:
    """Ingest the real Cambridge archive (electricity and Bedford weather)."""
    _ingest("cambridge", warehouse, selection=settings)


@ingest_commands.command("synthetic")
@with_settings("wadiro_fleet.tasks.ingest.synthetic_fleet:FleetSpec")
def ingest_synthetic(
    settings: FleetSpec, warehouse: NewWarehouse = Path(DEFAULT_WAREHOUSE),
) -> None:
    """Generate and ingest a synthetic fleet of non-residential buildings."""
    _ingest("synthetic", warehouse, spec=settings)


SourceFile = Annotated[Path, typer.Argument(
    metavar="FILE", help="A .csv or .parquet file (see README, 'Bring your own data').",
    show_default=False)]


def _paragraphs(text: str) -> str:
    """A help text with each paragraph on one line (the help page wraps it)."""
    return "\n\n".join(" ".join(p.split()) for p in inspect.cleandoc(text).split("\n\n"))


_BUILDINGS_HELP = """Add or update buildings from a file with columns building_id, site_id,
    timezone, holiday_country and optionally holiday_subdiv, building_type.

    A building already stored is updated. Unknown IANA time zones and holiday calendars are
    refused naming the line."""

_READINGS_HELP = """Ingest a meter export: long (building_id, ts, kwh|value) or wide (ts, one
    column per building id), hourly or every 15 or 30 minutes (summed to hours; an hour missing
    a sub-interval is stored as missing).

    Timestamps label the start of each interval. Only the hours the file holds change (a blank
    cell makes its hour missing); a stored hour the file does not mention is never erased, and
    re-ingesting a file changes nothing. With --replace-range each building's stored hours from
    its first to its last hour in the file are replaced, and the summary says how many it
    removed. Every building must be ingested first (wadiro ingest buildings)."""

_WEATHER_HELP = """Ingest hourly weather per site: site_id, ts, temperature_c, irradiance_wm2,
    wind_speed_ms [, humidity_pct] [, issued_at with --kind forecast].

    Observed: only the hours the file holds change (a stored hour the file does not mention is
    never erased; --replace-range replaces each site's range from the file's first to its last
    hour, saying how many hours it removed). Forecast: the latest issue per site and hour is
    kept (an older issue never overwrites a newer one). Every site must be the site of an
    ingested building."""


@ingest_commands.command("buildings", help=_paragraphs(_BUILDINGS_HELP))
@with_settings("wadiro_fleet.tasks.ingest.source_files:FileOptions")
def ingest_buildings(settings: FileOptions, file: SourceFile,
                     warehouse: NewWarehouse = Path(DEFAULT_WAREHOUSE)) -> None:
    """Add or update buildings from an operator's file."""
    _ingest("buildings", warehouse, path=str(file), form=settings)


@ingest_commands.command("readings", help=_paragraphs(_READINGS_HELP))
@with_settings("wadiro_fleet.tasks.ingest.readings_file:ReadingsOptions")
def ingest_readings(settings: ReadingsOptions, file: SourceFile,
                    warehouse: Warehouse = Path(DEFAULT_WAREHOUSE)) -> None:
    """Ingest an operator's meter export."""
    _ingest("readings", warehouse, path=str(file), options=settings)


@ingest_commands.command("weather", help=_paragraphs(_WEATHER_HELP))
@with_settings("wadiro_fleet.tasks.ingest.weather_file:WeatherOptions")
def ingest_weather(settings: WeatherOptions, file: SourceFile,
                   warehouse: Warehouse = Path(DEFAULT_WAREHOUSE)) -> None:
    """Ingest an operator's weather feed."""
    _ingest("weather", warehouse, path=str(file), options=settings)


_PORTFOLIOS_HELP = """Add or replace portfolios from a file with columns portfolio_id,
    building_id: one row per building of a portfolio (a building may be in several).

    Every portfolio the file names is replaced by its rows; others are kept. The portfolio
    'all' (every building) exists in every warehouse. Unknown building ids are refused."""


@ingest_commands.command("portfolios", help=_paragraphs(_PORTFOLIOS_HELP))
@with_settings("wadiro_fleet.tasks.ingest.source_files:CsvFormat")
def ingest_portfolios(settings: CsvFormat, file: SourceFile,
                      warehouse: Warehouse = Path(DEFAULT_WAREHOUSE)) -> None:
    """Add or replace portfolios of buildings."""
    from wadiro_fleet.tasks.portfolios import ingest_portfolios as ingest

    summary = run_guarded(lambda: ingest(warehouse, file, settings))
    typer.echo(f"portfolios: {summary.line()} in {summary.seconds:.1f} s")


# --- forecasting -------------------------------------------------------------------------

def _report_run(call: Callable[[], RunSummary], warehouse: str) -> None:
    """Run a forecasting flow; print its summary, its failures and its leaderboard."""
    from wadiro_fleet.tasks.errors import DegradedRunError
    from wadiro_fleet.tasks.report import read_run_leaderboard

    def strictly() -> tuple[RunSummary, DegradedRunError | None]:
        try:
            return call(), None
        except DegradedRunError as degraded:  # --strict: report, then exit with its code
            return degraded.summary, degraded

    began = time.perf_counter()
    summary, degraded = run_guarded(strictly)
    typer.echo(f"run {summary.run_id}: {summary.line()} in {time.perf_counter() - began:.1f} s")
    for failure in summary.failures:
        typer.echo(f"  failed: {failure}", err=True)
    board = run_guarded(lambda: read_run_leaderboard(warehouse, summary.run_id))
    if board.empty:
        _print_issued(warehouse, summary.run_id)
    else:
        shown = board[["model", "n_building_weeks", "mean_mae", "mae_vs_naive",
                       "beats_naive_share", "mean_cv_rmse", "test_violations",
                       "train_violations", "coverage_80"]]
        typer.echo(shown.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    if degraded is not None:
        typer.echo(f"error: {degraded}", err=True)
        raise typer.Exit(code=degraded.exit_code)


def _print_issued(warehouse: str, run_id: str) -> None:
    """A week not yet over: what was published for it, and how the models did last week."""
    import pandas as pd
    from wadiro_fleet.tasks.report import read_issued

    published, validation = run_guarded(lambda: read_issued(warehouse, run_id))
    if published.empty:
        typer.echo("nothing was published in this run")
        return
    weeks = ", ".join(str(w.date()) for w in pd.to_datetime(published["target_week"].unique()))
    typer.echo(f"\npublished forecasts of the week of {weeks} (no readings of it yet: the next "
               "weekly run scores them):")
    typer.echo(published.drop(columns="target_week").to_string(
        index=False, float_format=lambda v: f"{v:.4g}"))
    typer.echo("\nthe models on last week (the validation week, forecast a week earlier), "
               "MAE relative to seasonal naive's:")
    typer.echo(validation.to_string(index=False, float_format=lambda v: f"{v:.3g}"))


@commands.command("forecast")
@with_settings(f"{_SETTINGS}:WeeklySettings")
def forecast(
    settings: WeeklySettings,
    week: Annotated[datetime | None, _day_option(
        "--week",
        "Target week's local Monday (default: the latest week that can be forecast).")] = None,
) -> None:
    """Forecast one target week for the fleet (the weekly run) and score it where actuals exist."""
    from wadiro_fleet.flows.forecast import weekly_forecast_flow

    day = week.date() if week is not None else None
    _report_run(lambda: _run_flow(weekly_forecast_flow, week=day, settings=settings),
                settings.warehouse)


@commands.command("backfill")
@with_settings(f"{_SETTINGS}:BackfillSettings")
def backfill(
    settings: BackfillSettings,
    start: Annotated[datetime, _day_option("--start", "First target week's local Monday.")],
    end: Annotated[datetime, _day_option("--end", "Last target week's local Monday (inclusive).")],
) -> None:
    """Forecast and score every target week from --start to --end."""
    from wadiro_fleet.flows.forecast import backfill_flow

    _report_run(lambda: _run_flow(backfill_flow, start=start.date(), end=end.date(),
                                  settings=settings), settings.warehouse)


@commands.command("worker", context_settings={"allow_extra_args": True,
                                              "ignore_unknown_options": True})
def worker(
    ctx: typer.Context,
    pool: Annotated[str, typer.Option(
        "--pool", help="The work pool to take flow runs from.")] = "wadiro",
) -> None:
    """Run a Prefect process worker (`prefect worker start --pool POOL ...`; other options go
    to it) that stops on the first Ctrl-C or SIGTERM: the flow runs in progress stop first,
    writing what they finished, then the worker.
    """
    from wadiro_fleet.flows.worker import run_worker

    raise typer.Exit(code=run_worker(["--pool", pool, *ctx.args]))


@commands.command("load-pending")
def load_pending(warehouse: Warehouse = Path(DEFAULT_WAREHOUSE)) -> None:
    """Write the results that runs kept beside the warehouse while it was locked.

    Building-weeks that a later run has written since are left out.
    """
    from wadiro_fleet.tasks.forecast_tasks import load_pending_results

    typer.echo(f"load-pending: {run_guarded(lambda: load_pending_results(str(warehouse))).line()}")


@commands.command("runs")
def runs(
    limit: Annotated[int, typer.Option("--limit", min=1, help="How many runs to show.")] = 20,
    warehouse: Warehouse = Path(DEFAULT_WAREHOUSE),
) -> None:
    """The latest forecasting runs in the warehouse: when, what, how they ended."""
    from wadiro_fleet.tasks.forecast_tasks import run_history

    rows = run_guarded(lambda: run_history(str(warehouse), limit))
    if not rows:
        typer.echo("no runs yet")
    for (run_id, flow, started, minutes, status, done, learned, persistence, degraded,
         unpublished, failed, message) in rows:
        took = f"{minutes:g} min" if minutes is not None else "-"
        published = ("" if learned is None else  # a run closed by an earlier release
                     f": {learned} learned, {persistence} persistence, {degraded} degraded, "
                     f"{unpublished} not published")
        line = (f"{started}  {run_id}  {flow:<8}  {status:<23}  {took:>9}  "
                f"{done if done is not None else '-'} building-weeks{published}, "
                f"{failed or 0} failed")
        typer.echo(line + (f"  ({message[:120]})" if message else ""))


@commands.command("report")
def report(
    out: Annotated[Path, typer.Option("--out", help="Output directory.")] = Path("reports"),
    buildings: Annotated[str | None, typer.Option(
        "--buildings", help="Buildings to plot (default: the first three with scores).")] = None,
    warehouse: Warehouse = Path(DEFAULT_WAREHOUSE),
) -> None:
    """Write the fleet leaderboard, per-building errors and forecast plots."""
    from wadiro_fleet.tasks.report import write_report

    ids = split_list(buildings, "--buildings")
    result = run_guarded(lambda: write_report(warehouse, out, ids))
    typer.echo(result.leaderboard.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    for path in result.files:
        typer.echo(f"wrote {path}")
    for warning in result.warnings:
        typer.echo(f"warning: {warning}", err=True)


_EXPORT_HELP = """Write a week's published forecasts (default: the latest forecast week) as
    CSV or Parquet (by --out's suffix), per building or, with --portfolios, per portfolio.

    Rows carry the period's start in local time with its UTC offset, in UTC, and as local wall
    clock. --resolution 30 or 15 splits each hour into settlement periods by the building's own
    intra-hour shape where its readings came sub-hourly, evenly otherwise; the periods of an
    hour sum to its forecast and to its interval bounds."""


@commands.command("export", help=_paragraphs(_EXPORT_HELP))
def export(
    out: Annotated[Path, typer.Option("--out", help="File to write: .csv or .parquet.")],
    week: Annotated[datetime | None, _day_option(
        "--week", "Target week's local Monday (default: the latest forecast week).")] = None,
    resolution: Annotated[int, typer.Option(
        "--resolution", help="Period length in minutes: 60, 30 or 15.")] = 60,
    buildings: Annotated[str | None, typer.Option(
        "--buildings", help="Buildings to export, comma-separated (default: every one).")] = None,
    portfolios: Annotated[str | None, typer.Option(
        "--portfolios", help="Export these portfolios' forecasts instead, comma-separated "
        "('all' is every building).")] = None,
    warehouse: Warehouse = Path(DEFAULT_WAREHOUSE),
) -> None:
    """Write a week's published or portfolio forecasts for an operator's systems."""
    from wadiro_fleet.tasks.export import export_forecasts

    if buildings is not None and portfolios is not None:
        raise typer.BadParameter("give --buildings or --portfolios, not both")
    summary = run_guarded(lambda: export_forecasts(
        warehouse, out, week=week.date() if week is not None else None,
        buildings=split_list(buildings, "--buildings"),
        portfolios=split_list(portfolios, "--portfolios"), resolution=resolution))
    typer.echo(f"export: {summary.line()}")


@commands.command("quality")
def quality(
    buildings: Annotated[str | None, typer.Option(
        "--buildings",
        help="Buildings to show, comma-separated (default: every building).")] = None,
    csv: Annotated[Path | None, typer.Option(
        "--csv", help="Also write the table, every column, to this CSV file.")] = None,
    limit: Annotated[int | None, typer.Option(
        "--limit", min=1, help="Print only the N worst buildings (the CSV has all).")] = None,
    warehouse: Warehouse = Path(DEFAULT_WAREHOUSE),
) -> None:
    """Each building's meter data quality, worst first.

    First and last reading, the share missing over the last 12 weeks (ending at the
    warehouse's latest reading), the longest gap, flat-lined, zero and negative runs: the
    building_data_quality view (README, "The warehouse").
    """
    from wadiro_fleet.tasks.report import read_data_quality, write_data_quality_csv

    ids = split_list(buildings, "--buildings")
    result = run_guarded(lambda: read_data_quality(warehouse, ids))
    if csv is not None:
        try:
            written = write_data_quality_csv(result, csv)
        except OSError as error:
            typer.echo(f"error: cannot write {csv}: {error.strerror or error}", err=True)
            raise typer.Exit(code=1) from None
    typer.echo(f"{len(result.table)} buildings, worst first; {result.period_line()}")
    typer.echo(result.text(limit))
    if csv is not None:
        typer.echo(f"wrote {written}")


@commands.command("demo")
def demo(
    buildings: Annotated[int, typer.Option("--buildings", min=1, help="Demo fleet size.")] = 6,
    trials: Annotated[int | None, typer.Option(
        "--trials", min=1,
        help="TPE trials per model and window (default: the weekly run's).")] = None,
    warehouse: NewWarehouse = Path(DEFAULT_WAREHOUSE),
) -> None:
    """The whole job as the weekly deployment runs it, on the embedded default: a generated
    demo fleet whose readings end last Sunday and whose coming week has a weather forecast,
    that week forecast with every model, what was published and how the models did last
    week."""
    from wadiro_fleet.flows.forecast import weekly_forecast_flow
    from wadiro_fleet.flows.ingest import ingest_synthetic_flow
    from wadiro_fleet.flows.settings import WeeklySettings
    from wadiro_fleet.tasks.ingest.synthetic_fleet import FleetSpec
    from wadiro_fleet.tasks.warehouse.selection import has_buildings

    if not run_guarded(lambda: has_buildings(warehouse)):
        typer.echo(f"generating a demo fleet of {buildings} buildings into {warehouse}: 16 weeks "
                   "of readings and weather, and the coming week's weather forecast ...")
        spec = FleetSpec(buildings=buildings, start=date(2024, 1, 1), weeks=16, forecast_weeks=1)
        run_guarded(lambda: _run_flow(ingest_synthetic_flow, spec=spec, warehouse=str(warehouse)))
    settings = WeeklySettings(warehouse=str(warehouse),
                              **({"trials": trials} if trials is not None else {}))
    _report_run(lambda: _run_flow(weekly_forecast_flow, settings=settings), settings.warehouse)
