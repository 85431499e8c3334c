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

from flows.cli_forecast import register as register_forecast_commands  # noqa: E402 - after the default above
from flows.ingest import ingest_cambridge_flow, ingest_synthetic_flow
from tasks.building_frame import UnknownBuildingError
from tasks.forecasting import UnknownModelNameError
from tasks.ingest_cambridge import IngestError
from tasks.synthetic_fleet import FleetSpecError
from tasks.warehouse import WarehouseError
from tasks.week_selection import EmptySelectionError
from tasks.windows import NotALocalMondayError

EXPECTED_ERRORS = (
    IngestError, FleetSpecError, WarehouseError, UnknownBuildingError, UnknownModelNameError,
    EmptySelectionError, NotALocalMondayError,
)
"""Input problems reported as one line and a non-zero exit code, without a traceback."""

app = typer.Typer(no_args_is_help=True, add_completion=False, help="Fleet-scale week-ahead load forecasting.")
ingest_app = typer.Typer(no_args_is_help=True, help="Fill the warehouse's input tables.")
app.add_typer(ingest_app, name="ingest")

WarehouseOption = Annotated[
    Path, typer.Option("--warehouse", help="DuckDB warehouse file (created on first use).")
]
DateFormats = ["%Y-%m-%d"]


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


class _Summary(Protocol):
    seconds: float

    def line(self) -> str: ...


def run_guarded(call: Callable[[], T]) -> T:
    """``call()``, with an expected input error turned into one line and exit code 1."""
    try:
        return call()
    except EXPECTED_ERRORS as error:
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(code=1) from None


def _run(label: str, call: Callable[[], _Summary]) -> None:
    """Run a flow; print its one-line summary, or one line of error and exit 1."""
    began = time.perf_counter()
    summary = run_guarded(call)
    total = time.perf_counter() - began
    typer.echo(f"{label}: {summary.line()} in {total:.1f} s (ingest itself {summary.seconds:.1f} s)")


def _as_date(value: datetime | None) -> date | None:
    return value.date() if value is not None else None


@ingest_app.command("cambridge")
def ingest_cambridge(
    path: Annotated[Path, typer.Option("--path", help="Root of the Cambridge Estates archive.")],
    buildings: Annotated[
        Optional[str], typer.Option("--buildings", help="Comma-separated building ids (default: all).")
    ] = None,
    start: Annotated[
        Optional[datetime], typer.Option("--start", formats=DateFormats, help="First UTC day (inclusive).")
    ] = None,
    end: Annotated[
        Optional[datetime], typer.Option("--end", formats=DateFormats, help="Last UTC day (inclusive).")
    ] = None,
    warehouse: WarehouseOption = Path("warehouse.duckdb"),
) -> None:
    """Ingest the real Cambridge archive (electricity and Bedford weather)."""
    ids = [b.strip() for b in buildings.split(",") if b.strip()] if buildings is not None else None
    _run(
        "cambridge",
        lambda: ingest_cambridge_flow(
            path=str(path), warehouse=str(warehouse), buildings=ids, start=_as_date(start), end=_as_date(end)
        ),
    )


@ingest_app.command("synthetic")
def ingest_synthetic(
    buildings: Annotated[int, typer.Option("--buildings", min=1, help="Number of buildings.")],
    start: Annotated[
        datetime, typer.Option("--start", formats=DateFormats, help="Start date; the first local Monday on or after it.")
    ],
    weeks: Annotated[int, typer.Option("--weeks", min=1, help="Number of weeks.")],
    seed: Annotated[int, typer.Option("--seed", min=0, help="Random seed.")] = 0,
    sites: Annotated[int, typer.Option("--sites", min=1, help="Number of weather sites.")] = 3,
    warehouse: WarehouseOption = Path("warehouse.duckdb"),
) -> None:
    """Generate and ingest a synthetic fleet of non-residential buildings."""
    _run(
        "synthetic",
        lambda: ingest_synthetic_flow(
            buildings=buildings, start=start.date(), weeks=weeks, seed=seed, sites=sites, warehouse=str(warehouse)
        ),
    )


register_forecast_commands(app, run_guarded)
