"""The fleet report as one self-contained HTML page: open it in any browser, mail it, archive it.

It shows what an operator checks on Monday: the leaderboard against seasonal naive (last week's
load, the bar every model must clear), which models were published and why, the hours any
model forecast below zero, the buildings whose meter data is worst (``building_data_quality``),
and, per building, the published forecast with its 80 % and 95 % intervals beside the actual
load. Plots are embedded as PNG data, so the page needs no other file. When the page has
loaded, a script counts the tables and the plots the browser really rendered and writes the
counts on ``<body>`` (``data-tables-rendered``, ``data-plots-rendered``), so a headless browser
can check the page shows what it claims.
"""

from __future__ import annotations

import base64
import html
import io
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import TYPE_CHECKING

import duckdb
import jinja2
import pandas as pd

from wadiro_fleet.tasks.warehouse.quality import DataQuality, data_quality
from wadiro_fleet.tasks.warehouse.schema import (
    FLAT_RUN_ALERT_HOURS,
    SPIKE_RATIO,
    leaderboard_sql,
)

if TYPE_CHECKING:
    from matplotlib.figure import Figure

PLOT_WEEKS = 4
"""How many of a building's latest published weeks its plot shows."""

QUALITY_ROWS = 10
"""How many of the buildings with the worst meter data the page lists."""

QUALITY_COLUMNS = ("building_id", "last_reading", "hours_since_last_reading", "missing_share_12w",
                   "longest_gap_hours", "longest_flat_hours", "flat_runs_24h", "zero_readings",
                   "negative_readings", "spike_readings")
"""The data-quality columns the page shows (the CSV beside it has them all)."""

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2rem; color: #222; }
h1 { font-size: 1.5rem; } h2 { font-size: 1.2rem; margin-top: 2rem; }
table { border-collapse: collapse; margin: 0.5rem 0; }
th, td { border: 1px solid #ccc; padding: 0.25rem 0.6rem; text-align: right; }
th { background: #f3f3f3; } td:first-child, th:first-child { text-align: left; }
tr.published td { font-weight: bold; } tr.naive td { background: #fafae8; }
figure { margin: 1rem 0; } figcaption { font-size: 0.9rem; color: #555; }
p.note { color: #555; max-width: 60rem; }
"""

_CHECK = """
window.addEventListener("load", function () {
  var plots = Array.prototype.filter.call(document.images, function (img) {
    return img.complete && img.naturalWidth > 0;
  });
  var tables = Array.prototype.filter.call(document.querySelectorAll("table"), function (t) {
    return t.rows.length > 1 && t.offsetHeight > 0;
  });
  document.body.dataset.plotsRendered = String(plots.length);
  document.body.dataset.tablesRendered = String(tables.length);
});
"""


_TABLE = jinja2.Environment(finalize=html.escape).from_string(  # escapes every {{ text }}
    "<table><thead><tr>{% for c in columns %}<th>{{ c }}</th>{% endfor %}</tr></thead><tbody>"
    "{% for row in rows %}<tr{% if row[0] in classes %} class='{{ classes[row[0]] }}'{% endif %}>"
    "{% for cell in row %}<td>{{ cell }}</td>{% endfor %}</tr>{% endfor %}</tbody></table>")


def _table(frame: pd.DataFrame, *, row_class: dict[str, str] | None = None,
           digits: int = 3) -> str:
    """An HTML table of ``frame`` (floats to ``digits`` decimals, NULL blank); rows whose first
    cell is a key of ``row_class`` get that class."""
    cells = frame.astype(object).map(
        lambda v: ("" if pd.isna(v) else f"{v:.{digits}f}") if isinstance(v, float)
        else "" if v is None or v is pd.NA else str(v))
    return _TABLE.render(columns=frame.columns, rows=cells.itertuples(index=False),
                         classes=row_class or {})


def _png(fig: Figure) -> str:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=90)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def _building_plot(con: duckdb.DuckDBPyConnection, building_id: str) -> tuple[str, str] | None:
    """The building's latest published weeks: forecast, intervals and actuals, as PNG data and
    a caption; ``None`` without a published forecast."""
    frame = con.execute(
        """
        SELECT p.ts, p.target_week, p.model, p.y_hat, p.y_lo_80, p.y_hi_80, p.y_lo_95, p.y_hi_95,
               m.kwh AS actual
        FROM published_forecasts p
        LEFT JOIN meter_readings m USING (building_id, ts)
        WHERE p.building_id = ? AND p.target_week IN (
            SELECT DISTINCT target_week FROM publications WHERE building_id = ?
            ORDER BY target_week DESC LIMIT ?)
        ORDER BY p.ts
        """,
        [building_id, building_id, PLOT_WEEKS],
    ).df()
    if frame.empty:
        return None
    # A figure of its own, not pyplot's: no display, no global state, and matplotlib is
    # imported only by runs that draw.
    from matplotlib.figure import Figure

    fig = Figure(figsize=(11, 3.6))
    ax = fig.subplots()
    ax.fill_between(frame["ts"], frame["y_lo_95"], frame["y_hi_95"], color="#c6dbef",
                    label="95 % interval", step="mid")
    ax.fill_between(frame["ts"], frame["y_lo_80"], frame["y_hi_80"], color="#6baed6",
                    label="80 % interval", step="mid")
    ax.plot(frame["ts"], frame["y_hat"], color="#08306b", linewidth=1.1, label="published")
    ax.plot(frame["ts"], frame["actual"], color="black", linewidth=0.9, label="actual")
    ax.set_ylabel("energy [kWh]")
    ax.set_ylim(bottom=0)
    ax.legend(loc="upper right", ncol=4, fontsize=8)
    fig.autofmt_xdate()
    fig.tight_layout()
    models = ", ".join(f"{week:%Y-%m-%d}: {model}" for week, model in
                       frame.drop_duplicates("target_week")[["target_week", "model"]].itertuples(
                           index=False))
    return _png(fig), f"{building_id}, published model per week: {models}"


def _quality_section(quality: DataQuality) -> list[str]:
    """A line of fleet counts and the :data:`QUALITY_ROWS` worst buildings' data quality."""
    table = quality.table
    if table.empty:
        return ["<p>No buildings in the warehouse.</p>"]
    count = {
        "miss more than 10 % of the recent hours": int((table["missing_share_12w"] > 0.1).sum()),
        "have no reading at all": int((table["readings"] == 0).sum()),
        f"have a flat line of {FLAT_RUN_ALERT_HOURS} h or more": int((table["flat_runs_24h"] > 0).sum()),
        "hold negative readings": int((table["negative_readings"] > 0).sum()),
        f"hold spikes (readings over {SPIKE_RATIO} times their own 99th percentile)":
            int((table["spike_readings"] > 0).sum()),
    }
    counts = "; ".join(f"{n} {what}" for what, n in count.items())
    spiky = table.loc[table["spike_readings"] > 0, ["building_id", "spike_readings",
                                                    "largest_reading"]]
    spiky = spiky.sort_values("spike_readings", ascending=False, kind="stable")
    named = ", ".join(f"{b} ({int(n)}, up to {v:g} kWh)"
                      for b, n, v in spiky.head(QUALITY_ROWS).itertuples(index=False))
    spikes = f" Spikes: {named}{' and more' if len(spiky) > QUALITY_ROWS else ''}." if named else ""
    shown = quality.cells(null="", limit=QUALITY_ROWS)[list(QUALITY_COLUMNS)]
    shown = shown.assign(last_reading=shown["last_reading"].replace("", "none"))
    return [f"<p class='note'>{len(table)} buildings: {html.escape(counts)}.{html.escape(spikes)} "
            f"{html.escape(quality.period_line())}. The {min(QUALITY_ROWS, len(table))} worst "
            "(most recent hours missing first) are below; <b>data_quality.csv</b> beside this "
            "page lists every building with every column.</p>",
            _table(shown)]


def _plot_buildings(con: duckdb.DuckDBPyConnection, n: int) -> list[str]:
    rows = con.execute(
        "SELECT building_id FROM publications GROUP BY 1 ORDER BY count(*) DESC, 1 LIMIT ?", [n]
    ).fetchall()
    return [r[0] for r in rows]


def render_report(con: duckdb.DuckDBPyConnection, buildings: Sequence[str] | None = None,
                  *, n_plots: int = 6, quality: DataQuality | None = None) -> str:
    """The report page as HTML text (the plotted buildings: ``buildings`` or the ones with the
    most published weeks; the data quality: ``quality``, or read here)."""
    board = con.execute(leaderboard_sql()).df()
    shown = board[["model", "n_building_weeks", "mean_mae", "mae_vs_naive", "beats_naive_share",
                   "test_violations", "coverage_80", "coverage_95"]]
    published = con.execute(
        """SELECT model, count(*) AS building_weeks,
                  round(100.0 * count(*) / sum(count(*)) OVER (), 1) AS share_pct,
                  avg(expected_ratio) AS mean_expected_vs_naive
           FROM publications GROUP BY model ORDER BY building_weeks DESC"""
    ).df()
    violations = con.execute(
        """SELECT model, count(*) AS hours_below_zero, count(DISTINCT building_id) AS buildings,
                  min(y_hat) AS lowest_kwh
           FROM violations GROUP BY model ORDER BY hours_below_zero DESC"""
    ).df()
    span = con.execute("SELECT min(target_week), max(target_week), count(DISTINCT building_id) "
                       "FROM scores").fetchone()
    sections = [
        "<h1>Week-ahead load forecasts: fleet report</h1>",
        f"<p class='note'>{span[2] or 0} buildings, target weeks {span[0]} to {span[1]}; "
        f"made {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC. <b>mae_vs_naive</b> is a model's "
        "MAE over seasonal naive's (last week's load) on the building-weeks both forecast; "
        "below 1 beats it. <b>published</b> is the one forecast per building-week an operator "
        "uses.</p>",
        "<h2>Leaderboard against seasonal naive</h2>",
        _table(shown, row_class={"published": "published", "seasonal_naive": "naive"}),
        "<h2>Published models</h2>",
        _table(published) if not published.empty else "<p>Nothing published yet.</p>",
        "<h2>Forecast hours below zero</h2>",
        _table(violations) if not violations.empty
        else "<p>No forecast hour below zero.</p>",
        "<h2>Meter data quality</h2>",
        *_quality_section(quality if quality is not None else data_quality(con)),
        "<h2>Published forecasts, intervals and actuals</h2>",
    ]
    for building_id in buildings or _plot_buildings(con, n_plots):
        plot = _building_plot(con, building_id)
        if plot is None:
            sections.append(f"<p>{html.escape(building_id)}: no published forecast.</p>")
            continue
        data, caption = plot
        sections.append(f"<figure><img alt='{html.escape(building_id)}' "
                        f"src='data:image/png;base64,{data}'>"
                        f"<figcaption>{html.escape(caption)}</figcaption></figure>")
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        "<title>Fleet forecast report</title>"
        f"<style>{_STYLE}</style></head><body>{''.join(sections)}"
        f"<script>{_CHECK}</script></body></html>"
    )


__all__ = ["PLOT_WEEKS", "QUALITY_COLUMNS", "QUALITY_ROWS", "render_report"]
