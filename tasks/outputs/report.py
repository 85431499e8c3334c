"""The fleet report: a first page for the manager (next week per portfolio and building, recent
accuracy in % of load, data problems), then the leaderboard, per-building normalised errors,
forecast-versus-actual plots and each building's data quality (also on its own: ``wadiro
quality``).

Every file goes through :mod:`~tasks.outputs.output_files`: written beside its
name and renamed onto it, so a link planted in ``--out`` is replaced, never written through, and
a folder inside it that is a link is refused (nothing is written outside ``--out``); CSV text
cells a spreadsheet would run as a formula (an id starting with ``=``, ``+``, ``-``, ``@``) get
a leading ``'``."""

from __future__ import annotations

import hashlib
import io
import re
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import pandas as pd

from tasks.errors import PipelineError
from tasks.outputs.manager_summary import (
    building_peaks,
    next_week,
    recent_accuracy,
)
from tasks.outputs.output_files import (
    OUTPUT_MEMORY,
    OutputFolderError,
    csv_text,
    write_bytes,
    write_csv,
    write_text,
)
from tasks.outputs.report_html import ACTUAL_STYLE, printable, render_report
from tasks.warehouse.connection import WarehouseError, connect
from tasks.warehouse.issued import (
    published_summary,
    validation_leaderboard,
)
from tasks.warehouse.portfolio_sql import portfolio_ids, read_portfolio_scores
from tasks.warehouse.quality import DataQuality, data_quality
from tasks.warehouse.schema import leaderboard_sql
from tasks.warehouse.selection import fleet_building_ids


def fleet_leaderboard(con: duckdb.DuckDBPyConnection) -> pd.DataFrame:
    """One row per model over every stored score (the ``leaderboard`` view)."""
    return con.execute(leaderboard_sql()).df()


def run_leaderboard(con: duckdb.DuckDBPyConnection, run_id: str) -> pd.DataFrame:
    """The leaderboard of the scores one run wrote."""
    return con.execute(leaderboard_sql(run_filter=True), [run_id]).df()


def building_errors(con: duckdb.DuckDBPyConnection) -> pd.DataFrame:
    """Per building and model: MAE, RMSE, NMAE and CV-RMSE (normalised by mean load)."""
    return con.execute("SELECT * FROM building_errors ORDER BY building_id, model").df()


def default_plot_buildings(con: duckdb.DuckDBPyConnection, n: int = 3) -> list[str]:
    """The first ``n`` buildings with a scored forecast, or, before any week is scored (the
    first Monday), with a published one."""
    for sql in ("SELECT DISTINCT building_id FROM scores WHERE n_hours > 0 ORDER BY 1 LIMIT ?",
                "SELECT DISTINCT building_id FROM publications ORDER BY 1 LIMIT ?"):
        rows = con.execute(sql, [n]).fetchall()
        if rows:
            return [r[0] for r in rows]
    return []


def plot_building(con: duckdb.DuckDBPyConnection, building_id: str, out_dir: Path,
                  name: str) -> Path | None:
    """Forecasts of every model beside the actual load over every stored week of a building,
    as ``out_dir/plots/name`` (its id inside the plot; the actual dashed)."""
    frame = con.execute(
        "SELECT ts, model, y_hat, actual_kwh FROM forecast_vs_actual "
        "WHERE building_id = ? ORDER BY ts, model",
        [building_id],
    ).df()
    if frame.empty:
        return None
    # A figure of its own, not pyplot's: no display, no global state, and matplotlib is
    # imported only by runs that draw.
    from matplotlib.figure import Figure

    fig = Figure(figsize=(12, 4.5))
    ax = fig.subplots()
    for model, group in frame.groupby("model"):
        ax.plot(group["ts"], group["y_hat"], linewidth=0.9, alpha=0.85, label=model)
    actual = frame.drop_duplicates("ts").set_index("ts")["actual_kwh"]
    ax.plot(actual.index, actual.to_numpy(), label="actual", **{**ACTUAL_STYLE, "color": "black"})
    ax.axhline(0.0, color="grey", linewidth=0.6, linestyle=":")
    ax.text(0.01, 0.97, f"{printable(building_id)}: week-ahead forecasts vs actual",
            transform=ax.transAxes,
            ha="left", va="top", fontsize=11, fontweight="bold",
            bbox={"facecolor": "white", "edgecolor": "#999", "alpha": 0.9})
    ax.set_ylabel("energy [kWh]")
    ax.set_xlabel("time (UTC)")
    ax.legend(loc="upper right", ncol=4, fontsize=8)
    fig.autofmt_xdate()
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110)
    return write_bytes(out_dir, Path("plots") / name, buffer.getvalue())


class NothingToReportError(WarehouseError):
    """The warehouse holds no published forecast yet."""


class ReportFolderError(PipelineError):
    """The report's folder (``--out``) cannot be written: a file, not writable, ..."""


def _writable_folder(out_dir: Path) -> Path:
    """``out_dir``, created if needed and checked to take a file, or a one-line error."""
    fix = "give --out a folder you can write to"
    if out_dir.exists() and not out_dir.is_dir():
        raise ReportFolderError(f"cannot write the report to {out_dir}: it is a file; {fix}")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=out_dir):
            pass
    except OSError as error:
        raise ReportFolderError(f"cannot write the report to {out_dir}: "
                                f"{error.strerror or error}; {fix}") from None
    return out_dir


_UNSAFE_FILE_CHARACTERS = re.compile(r"[^A-Za-z0-9._-]+")
MAX_FILE_STEM = 80
"""Characters of a building id kept in its plot's file name (file systems allow 255 bytes)."""


def plot_file_name(building_id: str, taken: set[str]) -> str:
    """A file name for a building's plot: letters, digits, ``._-`` only, at most
    :data:`MAX_FILE_STEM` characters of the id, never hidden or a path, and not in ``taken``
    (compared without case, as some file systems do); the id's hash is appended whenever the
    name is not the id itself or is taken. The name is added to ``taken``."""
    stem = _UNSAFE_FILE_CHARACTERS.sub("_", building_id).lstrip(".")[:MAX_FILE_STEM] or "building"
    if stem != building_id or stem.lower() in taken:
        stem = f"{stem}-{hashlib.sha256(building_id.encode()).hexdigest()[:10]}"
    taken.add(stem.lower())
    return f"{stem}.png"


@dataclass
class Report:
    leaderboard: pd.DataFrame
    building_errors: pd.DataFrame
    files: list[Path] = field(default_factory=list)
    data_quality: pd.DataFrame = field(default_factory=pd.DataFrame)
    warnings: list[str] = field(default_factory=list)
    """What the report could not show that was asked for (a building without a forecast)."""


def write_report(
    warehouse: str | Path, out_dir: Path, buildings: Sequence[str] | None = None
) -> Report:
    """Leaderboard, per-building errors and data quality as CSV, one self-contained HTML page
    (:mod:`~tasks.outputs.report_html`) and one PNG per building, read from the warehouse
    in one read-only connection."""
    with connect(warehouse, read_only=True) as con:
        con.execute(f"SET memory_limit = '{OUTPUT_MEMORY}'")
        try:
            return _write_report(con, out_dir, buildings)
        except OutputFolderError as error:  # a link planted in the folder, ...
            raise ReportFolderError(f"cannot write the report to {out_dir}: {error}") from None
        except OSError as error:  # a disk that filled up, a folder removed while writing
            raise ReportFolderError(f"cannot write the report to {out_dir}: "
                                    f"{error.strerror or error}") from None


def read_data_quality(warehouse: str | Path, buildings: Sequence[str] | None = None) -> DataQuality:
    """Every building's data quality (or that of ``buildings``), worst first, read in a short
    read-only connection; a warehouse without buildings is refused."""
    with connect(warehouse, read_only=True) as con:
        return data_quality(con, buildings, require_buildings=True)


def write_data_quality_csv(quality: DataQuality, path: Path) -> Path:
    """The data-quality table as CSV (timestamps in ISO 8601, UTC; empty cells for NULL; ids a
    spreadsheet would run escaped), creating the folder it goes in."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(csv_text(quality.table, date_format="%Y-%m-%dT%H:%M:%SZ"), encoding="utf-8",
                    newline="")
    return path


def read_run_leaderboard(warehouse: str | Path, run_id: str) -> pd.DataFrame:
    """The leaderboard of one run, read in a short read-only connection."""
    with connect(warehouse, read_only=True) as con:
        return run_leaderboard(con, run_id)


def read_issued(warehouse: str | Path, run_id: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """What run ``run_id`` issued for a week not yet scored: its published summary and its
    models' validation leaderboard (:mod:`~tasks.warehouse.issued`), read in a
    short read-only connection."""
    with connect(warehouse, read_only=True) as con:
        return published_summary(con, run_id), validation_leaderboard(con, run_id)


def _manager_tables(con: duckdb.DuckDBPyConnection) -> dict[str, pd.DataFrame]:
    """The manager page's tables in full: next week's peak per building, recent accuracy per
    building, every portfolio's scores."""
    week = next_week(con)
    return {
        "next_week": building_peaks(con, week) if week is not None else pd.DataFrame(),
        "accuracy": recent_accuracy(con),
        "portfolio_scores": read_portfolio_scores(con, portfolio_ids(con)),
    }


def _without_forecast(con: duckdb.DuckDBPyConnection, buildings: Sequence[str]) -> list[str]:
    published = {r[0] for r in con.execute(
        "SELECT DISTINCT building_id FROM publications "
        "WHERE building_id IN (SELECT unnest(?::VARCHAR[]))", [list(buildings)]).fetchall()}
    return [b for b in buildings if b not in published]


def _write_report(
    con: duckdb.DuckDBPyConnection, out_dir: Path, buildings: Sequence[str] | None
) -> Report:
    if buildings is not None:
        buildings = fleet_building_ids(con, buildings)  # an unknown id: one line, nothing written
    report = Report(fleet_leaderboard(con), building_errors(con))
    if report.leaderboard.empty and not con.execute(
            "SELECT count(*) FROM (SELECT 1 FROM publications LIMIT 1)").fetchone()[0]:
        raise NothingToReportError(
            "the warehouse holds no published forecast yet; run `wadiro forecast` or "
            "`wadiro backfill` first")
    if report.leaderboard.empty:  # the first Monday: published, not yet scored
        report.warnings.append("no week is scored yet (a week is scored once its readings are "
                               "ingested): the report shows what was published")
    if buildings is not None:
        report.warnings += [f"{b}: no published forecast, so no plot"
                            for b in _without_forecast(con, buildings)]
    _writable_folder(out_dir)
    quality = data_quality(con)
    report.data_quality = quality.table
    tables = {"leaderboard": report.leaderboard, "building_errors": report.building_errors,
              **_manager_tables(con)}  # every portfolio's scores computed once, used twice
    for name, frame in tables.items():
        report.files.append(write_csv(out_dir, f"{name}.csv", frame))
    report.files.append(write_csv(out_dir, "data_quality.csv", quality.table,
                                  date_format="%Y-%m-%dT%H:%M:%SZ"))
    report.files.append(write_text(out_dir, "report.html",
                                   render_report(con, buildings, quality=quality,
                                                 portfolio_scores=tables["portfolio_scores"])))
    taken: set[str] = set()
    for building_id in buildings or default_plot_buildings(con):
        png = plot_building(con, building_id, out_dir, plot_file_name(building_id, taken))
        if png is not None:
            report.files.append(png)
    return report
