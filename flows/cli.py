"""The ``wadiro`` command line: parses options and runs the Prefect flows.

A command runs its flow through the Prefect server configured with ``PREFECT_API_URL`` (its
history and UI then show the run), or, with none configured, directly in this process: no
temporary server is started (:mod:`~flows.engine`).

The options are cyclopts': a command that takes a settings model (a run's settings, an ingest's
options) gets one option per field, nested models flattened (``Parameter(name="*")``), and the
model validates the values. Lists are given comma-separated (the models split them). A command
taking settings lives in :mod:`~flows.cli_forecasting` or
:mod:`~flows.cli_ingest` and is imported only when it runs or a help page lists it,
so that a short command starts in about a second.
"""

from __future__ import annotations

import inspect
import logging
import os
import re
import signal
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, Protocol, TypeVar

from cyclopts import App, CycloptsError, Parameter
from cyclopts.validators import Number
from rich.console import Console

# Prefect must not try to phone home (batch machines are often offline, which makes it log
# errors). Set before Prefect is imported: its settings, which the processes runner hands to
# its workers, are read at import. Users can override.
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")

from flows.stopping import (  # noqa: E402
    STOP,
    handle_stop_signals,
    hard_exit,
    quiet_resource_tracker,
)
from tasks.errors import PipelineError, RunStoppedError  # noqa: E402
from tasks.warehouse.connection import (  # noqa: E402
    DEFAULT_WAREHOUSE,
    MACHINE_ERRORS,
    WAREHOUSE_ENV,
    machine_refusal,
)

if TYPE_CHECKING:
    from pydantic import ValidationError

    from tasks.warehouse.run_store import RunSummary

NOT_OPTIONS = re.compile(r"^(?!(model_options|model_inputs)$)")
"""Settings fields that are not options: the per-model mappings (a flow parameter or a
deployment sets them)."""

USAGE_ERROR = 2


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def settings_problems(error: ValidationError) -> str:
    """One clause per bad field of a settings model: ``--field: what is wrong`` (a held
    model's field, flattened into the command's options, named by its own option)."""
    clauses = []
    for problem in error.errors():
        names = [part for part in problem["loc"] if isinstance(part, str)]
        where = _flag(names[-1]) if names else "settings"
        clauses.append(f"{where}: {problem['msg'].removeprefix('Value error, ')}")
    return "; ".join(clauses)


def _one_line(error: CycloptsError) -> str:
    """A usage error as one ``error: ...`` line (a settings model's problems by option), as
    the command's other errors are written."""
    from pydantic import ValidationError

    cause = error.__cause__
    text = settings_problems(cause) if isinstance(cause, ValidationError) else str(error)
    return "error: " + " ".join(text.split())


def _shown_default(value: Any) -> Any:
    """A default as it would be typed: a list comma-separated, a mapping as NAME=VALUE."""
    if isinstance(value, tuple | list):
        return ", ".join(map(str, value))
    if isinstance(value, dict):
        return ", ".join(f"{name}={given}" for name, given in value.items())
    return value


app = App(name="wadiro", help="Fleet-scale week-ahead load forecasting.",
          default_parameter=Parameter(parse=NOT_OPTIONS, negative_iterable=(),
                                      show_default=_shown_default),
          error_formatter=_one_line, version_flags=(), suppress_keyboard_interrupt=False,
          error_console=Console(stderr=True, soft_wrap=True, markup=False, highlight=False))
ingest_app = App(name="ingest", help="Fill the warehouse's input tables.",
                 suppress_keyboard_interrupt=False)
app.command(ingest_app)

_USER_LOG = "wadiro"

DEGRADED_SHOWN = 50
"""How many degraded (and how many held, how many reduced-input) building-weeks a forecasting
command names on standard error."""

DEMO_START = date(2024, 1, 1)
DEMO_WEEKS = 16
"""The demo fleet: 16 weeks of readings from Monday 2024-01-01, then the coming week's weather
forecast; its weekly run stands at 06:00 on that coming Monday, 2024-04-22."""

_WAREHOUSE_HELP = f"DuckDB warehouse file (default: ${WAREHOUSE_ENV}, else {DEFAULT_WAREHOUSE})"
Warehouse = Annotated[Path, Parameter(env_var=WAREHOUSE_ENV, show_env_var=False,
                                      help=f"{_WAREHOUSE_HELP}; it must exist.")]
NewWarehouse = Annotated[Path, Parameter(env_var=WAREHOUSE_ENV, show_env_var=False,
                                         help=f"{_WAREHOUSE_HELP}; created on first use.")]
"""The warehouse option of the commands that create a missing warehouse (they store buildings)."""
AtLeastOne = Number(gte=1)


def echo(text: str = "", err: bool = False) -> None:
    print(text, file=sys.stderr if err else sys.stdout, flush=True)


def usage_error(message: str) -> NoReturn:
    """Options that do not go together: one ``error:`` line, exit code 2."""
    echo(f"error: {message}", err=True)
    raise SystemExit(USAGE_ERROR)


def split_list(value: str | None, option: str) -> list[str] | None:
    """``"a, b"`` -> ``["a", "b"]``, as the settings split their lists; ``None`` -> ``None``;
    an empty list is a usage error."""
    from tasks.protocol.comma_lists import split_commas

    if value is None:
        return None
    try:
        return list(split_commas(value))
    except ValueError as error:
        usage_error(f"{option}: {error}")


class _UserFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return f"{record.levelname.lower()}: {record.getMessage()}"


_VERBOSE = False


@app.meta.default
def wadiro(
    *tokens: Annotated[str, Parameter(show=False, allow_leading_hyphen=True)],
    verbose: Annotated[bool, Parameter(name=["--verbose", "-v"], negative=(),
                                       help="Show Prefect's run logs.")] = False,
) -> Any:
    """Fleet-scale week-ahead load forecasting."""
    global _VERBOSE
    STOP.reset()
    STOP.may_end_process = True  # a stopped command ends, whatever it is waiting for
    quiet_resource_tracker()
    user_log = logging.getLogger(_USER_LOG)  # what a run tells its user (locks, stops)
    for handler in [h for h in user_log.handlers if getattr(h, "_wadiro", False)]:
        user_log.removeHandler(handler)  # one per command: standard error as it is now
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_UserFormatter())
    handler._wadiro = True  # type: ignore[attr-defined]
    user_log.addHandler(handler)
    user_log.propagate = False
    user_log.setLevel(logging.INFO if verbose else logging.WARNING)
    _VERBOSE = verbose
    if not verbose:
        # Worker processes (the processes runner) configure their own logging from this.
        os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
    _quiet_prefect()
    return app(tokens)


app.meta.suppress_keyboard_interrupt = False


def product_stdout_only() -> None:
    """Keep standard output for the product's own lines: a compiled library (a solver's log,
    e.g. HiGHS's ``HighsMipSolverData`` notes) writes to file descriptor 1 itself, past
    Python's ``sys.stdout``. Descriptor 1 is pointed at standard error, for this process and
    every worker it starts, and ``sys.stdout`` writes to a duplicate of the real one."""
    try:
        sys.stdout.flush()
        product = os.dup(1)
        os.dup2(2, 1)
    except (OSError, ValueError):  # no descriptors to juggle (an embedding host): leave them
        return
    sys.stdout = open(product, "w", encoding=sys.stdout.encoding or "utf-8",  # noqa: SIM115
                      errors=getattr(sys.stdout, "errors", None) or "strict",
                      buffering=1, closefd=True)


def main() -> None:
    """The ``wadiro`` executable. A Ctrl-C before a run has taken over the signal (while the
    command starts and imports its libraries) is one line and exit code 130 too, neither a
    traceback nor a silent exit, even where a library wraps the interrupt in an error of its
    own."""
    product_stdout_only()
    interrupted = []

    def on_ctrl_c(signum: int, frame: object) -> None:  # Python's own, remembered
        interrupted.append(signum)
        raise KeyboardInterrupt

    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:  # not where ignored
        signal.signal(signal.SIGINT, on_ctrl_c)
    try:
        app.meta()
    except KeyboardInterrupt:
        echo("error: interrupted by Ctrl-C (SIGINT)", err=True)
        raise SystemExit(128 + signal.SIGINT) from None
    except MemoryError:  # before a command's own guard: loading its libraries
        echo("error: the process ran out of memory while the command started (loading its "
             "libraries); raise the memory limit (`ulimit -v`, the service's MemoryMax) or "
             "free memory", err=True)
        raise SystemExit(1) from None
    except Exception:  # a library that wraps the interrupt in its own error while it loads
        if not interrupted:  # (pydantic, as Prefect reads its settings): still Ctrl-C
            raise
        echo("error: interrupted by Ctrl-C (SIGINT)", err=True)
        raise SystemExit(128 + signal.SIGINT) from None


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


@contextmanager
def guarded() -> Iterator[None]:
    """Around a command's work: a pipeline error (bad input, busy warehouse) or the machine's
    refusal (a full disk, a limit, memory) becomes one line and exit code 1, and a stop
    (Ctrl-C, SIGTERM, a lost Prefect server) one line and its exit code (128 + the signal's
    number after a signal). A stopped run ends the process at once: threads still computing
    abandoned batches, or a Prefect server that no longer answers, are not waited for."""
    _quiet_prefect()  # again: a command's import of the flows configured Prefect's logging
    try:
        with handle_stop_signals():
            yield
    except PipelineError as error:
        if STOP.requested is not None:
            code = (error.exit_code if isinstance(error, RunStoppedError)
                    else STOP.requested.exit_code)
            hard_exit(code, str(error))
        echo(f"error: {error}", err=True)
        raise SystemExit(getattr(error, "exit_code", 1)) from None
    except BaseException as error:  # KeyboardInterrupt, Prefect's TerminationSignal, ...
        if isinstance(error, SystemExit):
            raise
        if STOP.requested is not None:
            hard_exit(STOP.requested.exit_code, STOP.requested.reason)
        # the machine refused: a full disk, a file-size limit, a read-only folder, memory
        refusal = machine_refusal(error) if isinstance(error, MACHINE_ERRORS) else None
        if refusal is None:
            raise
        echo(f"error: {refusal}", err=True)
        raise SystemExit(1) from None


def run_guarded(call: Callable[[], T]) -> T:
    """``call()`` inside :func:`guarded`."""
    with guarded():
        return call()


class _IngestSummary(Protocol):
    seconds: float

    def line(self) -> str: ...


def run_ingest(label: str, warehouse: Path, **parameters: Any) -> None:
    """Run the ingest flow ``ingest_{label}_flow``; print its one-line summary."""
    from flows import ingest
    from flows.engine import run_flow

    flow = getattr(ingest, f"ingest_{label}_flow")
    began = time.perf_counter()
    summary: _IngestSummary = run_guarded(
        lambda: run_flow(flow, warehouse=str(warehouse), **parameters))
    total = time.perf_counter() - began
    echo(f"{label}: {summary.line()} in {total:.1f} s (ingest itself {summary.seconds:.1f} s)")
    flags = getattr(summary, "flags", None)  # readings judged implausible
    for flagged in flags.lines() if flags is not None else []:
        echo(f"  {flagged}")


LAZY_HELP = {
    "ingest cambridge": """Ingest the real Cambridge archive (electricity and Bedford weather).""",
    "ingest synthetic": """Generate and ingest a synthetic fleet of non-residential buildings.""",
    "ingest buildings": """Add or update buildings from an operator's file.

    A file with columns building_id, site_id, timezone, holiday_country and optionally
    holiday_subdiv, building_type and floor_area_m2 (a building's declared type and size: what
    a new meter's readings and every forecast are judged against, CIBSE TM46's typical
    intensity of its type times its area, an order of magnitude either way). A building
    already stored is updated. Unknown IANA time zones and holiday calendars are refused
    naming the line.
    """,
    "ingest readings": """Ingest an operator's meter export.

    Long (building_id, ts, kwh|value) or wide (ts, one column per building id), hourly or every
    15 or 30 minutes (summed to hours; an hour missing a sub-interval is stored as missing).

    Timestamps label the start of each interval. Only the hours the file holds change (a blank
    cell makes its hour missing); a stored hour the file does not mention is never erased, and
    re-ingesting a file changes nothing. With --replace-range each building's stored hours from
    its first to its last hour in the file are replaced, and the summary says how many it
    removed. Every building must be ingested first (wadiro ingest buildings).
    """,
    "ingest weather": """Ingest an operator's weather feed.

    Hourly weather per site: site_id, ts, temperature_c, irradiance_wm2, wind_speed_ms
    [, humidity_pct] [, issued_at with --kind forecast].

    Observed: only the hours the file holds change (a stored hour the file does not mention is
    never erased; --replace-range replaces each site's range from the file's first to its last
    hour, saying how many hours it removed). Forecast: the latest issue per site and hour is
    kept (an older issue never overwrites a newer one). Every site must be the site of an
    ingested building.
    """,
    "ingest portfolios": """Add or replace portfolios of buildings.

    A file with columns portfolio_id, building_id: one row per building of a portfolio (a
    building may be in several). Every portfolio the file names is replaced by its rows; others
    are kept. The portfolio 'all' (every building) exists in every warehouse. Unknown building
    ids are refused.
    """,
    "forecast": """Forecast one target week for the fleet (the weekly run) and score it where
    actuals exist.""",
    "backfill": """Forecast and score every target week from --start to --end.""",
}
"""The help of the commands that take a settings model: they are imported only when they run
(:mod:`~flows.cli_ingest`, :mod:`~flows.cli_forecasting`), and a
help page lists them without importing them."""

for _command, _help in LAZY_HELP.items():
    _parent, _, _name = _command.rpartition(" ")
    _module = "cli_ingest" if _parent else "cli_forecasting"
    (ingest_app if _parent else app).command(f"flows.{_module}:{_name}", name=_name,
                                              help=inspect.cleandoc(_help))


# --- forecasting -------------------------------------------------------------------------

class RunReport:
    """What a forecasting command's flow returned (:func:`run_report` reports it)."""

    summary: RunSummary | None = None


@contextmanager
def run_report(warehouse: str) -> Iterator[RunReport]:
    """Around a forecasting command's flow (``report.summary = run_flow(...)``, so that the
    command itself calls the flow): one line for an error or a stop (:func:`guarded`), then
    the run's summary, its failures and degraded weeks, and its leaderboard; a ``--strict``
    run's degraded summary is reported too, before its exit code."""
    from tasks.errors import DegradedRunError
    from tasks.outputs.report import read_run_leaderboard

    report, degraded = RunReport(), None
    began = time.perf_counter()
    with guarded():
        try:
            yield report
        except DegradedRunError as error:  # --strict: report, then exit with its code
            report.summary, degraded = error.summary, error
    summary = report.summary
    if summary is None:
        return
    echo(f"run {summary.run_id}: {summary.line()} in {time.perf_counter() - began:.1f} s")
    for failure in summary.failures:
        echo(f"  failed: {failure}", err=True)
    for week in summary.held_weeks[:DEGRADED_SHOWN]:
        echo(f"  held: {week.line()}", err=True)
    for kind, weeks in (("degraded", summary.degraded_weeks),
                        ("reduced inputs", summary.reduced_weeks)):
        for week in weeks[:DEGRADED_SHOWN]:
            echo(f"  {kind}: {week.line()}", err=True)
        if len(weeks) > DEGRADED_SHOWN:
            echo(f"  and {len(weeks) - DEGRADED_SHOWN} more {kind} (window_status and "
                 f"publications of run {summary.run_id})", err=True)
    board = run_guarded(lambda: read_run_leaderboard(warehouse, summary.run_id))
    if board.empty:
        _print_issued(warehouse, summary.run_id)
    else:
        shown = board[["model", "n_building_weeks", "mean_mae", "mae_vs_naive",
                       "beats_naive_share", "mean_cv_rmse", "test_violations",
                       "train_violations", "coverage_80"]]
        echo(shown.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    if degraded is not None:
        echo(f"error: {degraded}", err=True)
        raise SystemExit(degraded.exit_code)


def _print_issued(warehouse: str, run_id: str) -> None:
    """A week not yet over: what was published for it, and how the models did last week."""
    import pandas as pd

    from tasks.outputs.report import read_issued

    published, validation = run_guarded(lambda: read_issued(warehouse, run_id))
    if published.empty:
        echo("nothing was published in this run")
        return
    weeks = ", ".join(str(w.date()) for w in pd.to_datetime(published["target_week"].unique()))
    echo(f"\npublished forecasts of the week of {weeks} (no readings of it yet: the next "
         "weekly run scores them):")
    echo(published.drop(columns="target_week").to_string(
        index=False, float_format=lambda v: f"{v:.4g}"))
    echo("\nthe models on last week (the validation week, forecast a week earlier), "
         "MAE relative to seasonal naive's:")
    echo(validation.to_string(index=False, float_format=lambda v: f"{v:.3g}"))


@app.command
def worker(
    *arguments: Annotated[str, Parameter(allow_leading_hyphen=True, show=False)],
    pool: Annotated[str, Parameter(help="The work pool to take flow runs from.")] = "wadiro",
) -> None:
    """Run a Prefect process worker that stops on the first Ctrl-C or SIGTERM.

    `prefect worker start --pool POOL ...` (other options go to it): the flow runs in progress
    stop first, writing what they finished, then the worker.
    """
    from flows.worker import run_worker

    raise SystemExit(run_worker(["--pool", pool, *arguments]))


@app.command(name="accept-readings")
def accept_readings(
    *,
    building: Annotated[str, Parameter(help="The building whose flagged readings are real.")],
    start: Annotated[datetime | None, Parameter(
        help="First hour to accept, ISO 8601 (UTC unless it has an offset; default: the "
        "building's first flagged hour).")] = None,
    end: Annotated[datetime | None, Parameter(
        help="Last hour to accept, inclusive, not before --start (default: its last flagged "
        "hour).")] = None,
    warehouse: Warehouse = Path(DEFAULT_WAREHOUSE),
) -> None:
    """Confirm readings an ingest flagged as implausible as real: forecasts and scores use them.

    An ingest keeps a reading it judges implausible (a meter stuck high or at zero, a spike)
    but treats it as missing and names it (in the building's local time); this accepts the
    building's flagged readings from --start to --end, and scores the forecasts of those hours
    again. A --start after --end is refused. SQL: the table meter_flags.
    """
    from tasks.warehouse.meter_flags import accept_flagged_readings

    summary = run_guarded(lambda: accept_flagged_readings(str(warehouse), building, start, end))
    echo(f"accept-readings: {summary.line()}")


@app.command(name="load-pending")
def load_pending(*, warehouse: Warehouse = Path(DEFAULT_WAREHOUSE)) -> None:
    """Write the results that runs kept beside the warehouse while it was locked.

    Building-weeks that a later run has written since are left out.
    """
    from tasks.warehouse.run_store import RunStore

    echo(f"load-pending: {run_guarded(lambda: RunStore(str(warehouse)).load_pending()).line()}")


@app.command
def runs(
    *,
    limit: Annotated[int, Parameter(validator=AtLeastOne, help="How many runs to show.")] = 20,
    warehouse: Warehouse = Path(DEFAULT_WAREHOUSE),
) -> None:
    """The latest forecasting runs in the warehouse: when, what, how they ended."""
    from tasks.warehouse.run_store import RunStore

    rows = run_guarded(lambda: RunStore(str(warehouse)).history(limit))
    if not rows:
        echo("no runs yet")
    for (run_id, flow, started, minutes, status, weeks, done, learned, persistence, degraded,
         unpublished, failed, degradations, message, held) in rows:
        took = f"{minutes:g} min" if minutes is not None else "-"
        published = ("" if learned is None else  # a run closed by an earlier release
                     f": {learned} learned, {persistence} persistence, {degraded} degraded, "
                     f"{f'{held} held out of every bid, ' if held else ''}"
                     f"{unpublished} not published")
        line = (f"{started}  {run_id}  {flow:<8}  {status:<23}  {took:>9}  "
                f"{'week(s) ' + weeks + ': ' if weeks else ''}"
                f"{done if done is not None else '-'} building-weeks{published}, "
                f"{failed or 0} failed")
        line += f"; {degradations}" if degradations else ""
        echo(line + (f"  ({message[:120]})" if message else ""))


@app.command
def report(
    *,
    out: Annotated[Path, Parameter(help="Output directory.")] = Path("reports"),
    buildings: Annotated[str | None, Parameter(
        help="Buildings to plot (default: the first three with scores).")] = None,
    warehouse: Warehouse = Path(DEFAULT_WAREHOUSE),
) -> None:
    """Write the fleet leaderboard, per-building errors and forecast plots."""
    from tasks.outputs.report import write_report

    ids = split_list(buildings, "--buildings")
    result = run_guarded(lambda: write_report(warehouse, out, ids))
    echo(result.leaderboard.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    for path in result.files:
        echo(f"wrote {path}")
    for warning in result.warnings:
        echo(f"warning: {warning}", err=True)


@app.command
def export(
    *,
    out: Annotated[Path, Parameter(help="File to write: .csv or .parquet.")],
    week: Annotated[date | None, Parameter(
        help="Target week's local Monday (default: the latest forecast week).")] = None,
    resolution: Annotated[int, Parameter(
        help="Period length in minutes: 60, 30 or 15.")] = 60,
    buildings: Annotated[str | None, Parameter(
        help="Buildings to export, comma-separated (default: every one).")] = None,
    portfolios: Annotated[str | None, Parameter(
        help="Export these portfolios' forecasts instead, comma-separated ('all' is every "
        "building).")] = None,
    as_of: Annotated[datetime | None, Parameter(
        help="The forecasts as they were published at this time (each building-week's, or "
        "with --portfolios each portfolio-week's, latest vintage issued by then, bands "
        "included: what was bid); a time without an offset is the fleet's local time.")] = None,
    warehouse: Warehouse = Path(DEFAULT_WAREHOUSE),
) -> None:
    """Write a week's published or portfolio forecasts for an operator's systems.

    A week's published forecasts (default: the latest forecast week) as CSV or Parquet (by
    --out's suffix), per building or, with --portfolios, per portfolio; with --as-of, as they
    were issued at that time.

    Rows carry the period's start in local time with its UTC offset, in UTC, and as local wall
    clock. --resolution 30 or 15 splits each hour into settlement periods by the building's own
    intra-hour shape where its readings came sub-hourly, evenly otherwise; the periods of an
    hour sum to its forecast and to its interval bounds.
    """
    from tasks.outputs.export import export_forecasts

    if buildings is not None and portfolios is not None:
        usage_error("give --buildings or --portfolios, not both")
    summary = run_guarded(lambda: export_forecasts(
        warehouse, out, week=week, buildings=split_list(buildings, "--buildings"),
        portfolios=split_list(portfolios, "--portfolios"), resolution=resolution,
        as_of=as_of))
    echo(f"export: {summary.line()}")


@app.command
def quality(
    *,
    buildings: Annotated[str | None, Parameter(
        help="Buildings to show, comma-separated (default: every building).")] = None,
    csv: Annotated[Path | None, Parameter(
        help="Also write the table, every column, to this CSV file.")] = None,
    limit: Annotated[int | None, Parameter(
        validator=AtLeastOne, help="Print only the N worst buildings (the CSV has all).")] = None,
    warehouse: Warehouse = Path(DEFAULT_WAREHOUSE),
) -> None:
    """Each building's meter data quality, worst first.

    First and last reading, the share missing over the last 12 weeks (ending at the
    warehouse's latest reading), the longest gap, flat-lined, zero and negative runs: the
    building_data_quality view (README, "The warehouse").
    """
    from tasks.outputs.report import read_data_quality, write_data_quality_csv

    ids = split_list(buildings, "--buildings")
    result = run_guarded(lambda: read_data_quality(warehouse, ids))
    if csv is not None:
        try:
            written = write_data_quality_csv(result, csv)
        except OSError as error:
            echo(f"error: cannot write {csv}: {error.strerror or error}", err=True)
            raise SystemExit(1) from None
    echo(f"{len(result.table)} buildings, worst first; {result.period_line()}")
    echo(result.text(limit))
    if csv is not None:
        echo(f"wrote {written}")


@app.command
def demo(
    *,
    buildings: Annotated[int, Parameter(validator=AtLeastOne, help="Demo fleet size.")] = 6,
    trials: Annotated[int | None, Parameter(
        validator=AtLeastOne,
        help="TPE trials per model and window (default: the weekly run's).")] = None,
    warehouse: NewWarehouse = Path(DEFAULT_WAREHOUSE),
) -> None:
    """The whole job as the weekly deployment runs it, on the embedded default.

    A generated demo fleet whose readings end last Sunday and whose coming week has a weather
    forecast, that week forecast with every model, what was published and how the models did
    last week.
    """
    from flows.engine import run_flow
    from flows.forecast import weekly_forecast_flow
    from flows.ingest import ingest_synthetic_flow
    from flows.settings import WeeklySettings
    from tasks.ingest.synthetic_fleet import FleetSpec
    from tasks.warehouse.selection import has_buildings

    if not run_guarded(lambda: has_buildings(warehouse)):
        echo(f"generating a demo fleet of {buildings} buildings into {warehouse}: 16 weeks "
             "of readings and weather, and the coming week's weather forecast ...")
        spec = FleetSpec(buildings=buildings, start=DEMO_START, weeks=DEMO_WEEKS,
                         forecast_weeks=1)
        run_guarded(lambda: run_flow(ingest_synthetic_flow, spec=spec, warehouse=str(warehouse)))
    settings = WeeklySettings(warehouse=str(warehouse),
                              **({"trials": trials} if trials is not None else {}))
    # The demo fleet's Monday morning, as the weekly deployment would run on it.
    coming = DEMO_START + timedelta(weeks=DEMO_WEEKS)
    monday = datetime(coming.year, coming.month, coming.day, 6)
    with run_report(settings.warehouse) as report:
        report.summary = run_flow(weekly_forecast_flow, as_of=monday, settings=settings)


