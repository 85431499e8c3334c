"""The fleet report as one self-contained HTML page: open it in any browser, mail it, archive it.

Its first part is for the manager (:mod:`~tasks.outputs.manager_summary`): next
week's forecast of every portfolio, hour by hour with its 80 % and 95 % bands, the peak hour
and kWh of each portfolio and of the buildings with the largest peaks, how accurate the last
weeks were per building in per cent of its own load, and the data problems that need someone to
act. The modeller's part follows: the leaderboard against seasonal naive (last week's load, the
bar every model must clear), which models were published and why, the hours any model forecast
below zero, the portfolios' calibration, the buildings whose meter data is worst
(``building_data_quality``), and per building the published forecast with its intervals beside
the actual load. Every plot carries its building's (or portfolio's) name inside it; the
published forecast is a solid blue line, the actual load a dashed orange one. Tables are sized
for a page 1,400 px wide. Plots are embedded as PNG data, so the page needs no other file.

When the page has loaded, a script writes on ``<body>`` what the browser really rendered: the
counts of tables and plots (``data-tables-rendered``, ``data-plots-rendered``), the widest
table's width (``data-widest-table``) and the tops of the two parts (``data-manager-top``,
``data-modeller-top``), so a headless browser can check the page shows what it claims.
"""

from __future__ import annotations

import base64
import html
import io
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import duckdb
import jinja2
import pandas as pd

from tasks.outputs.manager_summary import (
    building_peaks,
    data_problems,
    next_week,
    portfolio_accuracy,
    portfolio_peaks,
    recent_accuracy,
    week_label,
)
from tasks.protocol.intervals import QUANTILE_COLUMNS, QUANTILES, quantile_name, quantile_suffix
from tasks.warehouse.portfolio_sql import calibration_rows, portfolio_ids, read_portfolio_scores
from tasks.warehouse.quality import DataQuality, data_quality
from tasks.warehouse.schema import (
    FLAT_RUN_ALERT_HOURS,
    SPIKE_RATIO,
    leaderboard_sql,
)
from tasks.warehouse.usable import USABLE_READINGS

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

PLOT_WEEKS = 4
"""How many of a building's latest published weeks its plot shows."""

QUALITY_ROWS = 10
"""How many of the buildings with the worst meter data the page lists."""

MANAGER_ROWS = 15
"""How many buildings the manager's tables list (the CSVs beside the page hold all)."""

PORTFOLIO_PLOTS = 4
"""How many portfolios' next weeks are drawn (``all`` first)."""

PROBLEM_IDS = 8
"""How many building ids a data problem names (the CSV and SQL have all)."""

QUALITY_COLUMNS = ("building_id", "last_reading", "hours_since_last_reading", "missing_share_12w",
                   "longest_gap_hours", "longest_flat_hours", "flat_runs_24h", "zero_readings",
                   "negative_readings", "spike_readings", "high_runs", "stuck_high_runs")
"""The data-quality columns the page shows (the CSV beside it has them all)."""

PUBLISHED_STYLE = {"color": "#1f4e9c", "linewidth": 1.5, "linestyle": "-"}
ACTUAL_STYLE = {"color": "#d95f02", "linewidth": 1.3, "linestyle": (0, (4, 2))}
"""The published forecast and the actual load: told apart by colour and by line style."""

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 1.5rem auto; max-width: 1340px;
       padding: 0 1rem; color: #222; }
h1 { font-size: 1.5rem; border-bottom: 2px solid #1f4e9c; padding-bottom: 0.3rem; }
h1.part { margin-top: 3rem; } h2 { font-size: 1.15rem; margin-top: 1.8rem; }
table { border-collapse: collapse; margin: 0.5rem 0; font-size: 0.85rem; max-width: 100%; }
th, td { border: 1px solid #ccc; padding: 0.2rem 0.45rem; text-align: right; }
td { white-space: nowrap; }
th { background: #f3f3f3; font-weight: 600; white-space: normal; vertical-align: bottom;
     max-width: 7.5rem; }
td:first-child, th:first-child { text-align: left; }
td:first-child { white-space: normal; min-width: 11rem; max-width: 24rem;
                 overflow-wrap: anywhere; }
tr.published td { font-weight: bold; } tr.naive td { background: #fafae8; }
tr.portfolio td { background: #eef3fb; font-weight: 600; }
figure { margin: 1rem 0; padding: 0.4rem; border: 1px solid #ddd; }
figure img { max-width: 100%; display: block; }
figcaption { font-size: 0.85rem; color: #555; }
p.note { color: #555; max-width: 70rem; } ul.problems li { margin: 0.4rem 0; max-width: 70rem; }
.ok { color: #1a7f37; }
"""

_CHECK = """
window.addEventListener("load", function () {
  var plots = Array.prototype.filter.call(document.images, function (img) {
    return img.complete && img.naturalWidth > 0;
  });
  var tables = Array.prototype.filter.call(document.querySelectorAll("table"), function (t) {
    return t.rows.length > 1 && t.offsetHeight > 0;
  });
  var widest = tables.reduce(function (w, t) { return Math.max(w, t.offsetWidth); }, 0);
  var top = function (id) {
    var e = document.getElementById(id);
    return e ? String(Math.round(e.getBoundingClientRect().top + window.scrollY)) : "";
  };
  document.body.dataset.plotsRendered = String(plots.length);
  document.body.dataset.tablesRendered = String(tables.length);
  document.body.dataset.widestTable = String(widest);
  document.body.dataset.managerTop = top("manager");
  document.body.dataset.modellerTop = top("modeller");
});
"""


_TABLE = jinja2.Environment(finalize=html.escape).from_string(  # escapes every {{ text }}
    "<table><thead><tr>{% for c in columns %}<th>{{ c }}</th>{% endfor %}</tr></thead><tbody>"
    "{% for row in rows %}<tr{% if row[0] in classes %} class='{{ classes[row[0]] }}'{% endif %}>"
    "{% for cell in row %}<td>{{ cell }}</td>{% endfor %}</tr>{% endfor %}</tbody></table>")


def _header(column: object) -> str:
    """A column name a header may wrap at (``missing_share_12w`` -> ``missing share 12w``)."""
    return str(column).replace("_", " ")


def _table(frame: pd.DataFrame, *, row_class: dict[str, str] | None = None,
           digits: int = 3) -> str:
    """An HTML table of ``frame`` (floats to ``digits`` decimals, NULL blank); rows whose first
    cell is a key of ``row_class`` get that class."""
    cells = frame.astype(object).map(
        lambda v: ("" if pd.isna(v) else f"{v:.{digits}f}") if isinstance(v, float)
        else "" if v is None or v is pd.NA else str(v))
    return _TABLE.render(columns=[_header(c) for c in frame.columns],
                         rows=cells.itertuples(index=False), classes=row_class or {})


def _png(fig: Figure) -> str:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=90)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def _figure(height: float = 3.4) -> tuple[Figure, Axes]:
    # A figure of its own, not pyplot's: no display, no global state, and matplotlib is
    # imported only by runs that draw.
    from matplotlib.figure import Figure

    fig = Figure(figsize=(12.5, height))
    return fig, fig.subplots()


_CONTROL = dict.fromkeys([*range(32), 127], " ")


def printable(name: str) -> str:
    """``name`` with control characters (a tab, a line break in an id) shown as spaces."""
    return name.translate(_CONTROL)


def _name_inside(ax: Axes, name: str, detail: str = "") -> None:
    """The plot's name (and a line about it) in its top left corner, inside the axes: a
    caption under a plot, in a stack of them, reads as the next plot's title."""
    box = {"facecolor": "white", "edgecolor": "#999", "alpha": 0.92, "boxstyle": "round,pad=0.3"}
    name = printable(name)
    ax.text(0.006, 0.975, name, transform=ax.transAxes, ha="left", va="top", fontsize=11,
            fontweight="bold", bbox=box)
    if detail:
        ax.text(0.006, 0.845, detail, transform=ax.transAxes, ha="left", va="top", fontsize=9,
                bbox={**box, "edgecolor": "none"})


FAN = ((0.025, 0.975, "#deebf7"), (0.05, 0.95, "#c6dbef"), (0.10, 0.90, "#9ecae1"),
       (0.25, 0.75, "#6baed6"))
"""The fan of a forecast's quantiles, outermost first: each pair of levels shaded, darker inward
(the 95, 90, 80 and 50 % central intervals)."""


def _has_quantiles(frame: pd.DataFrame) -> bool:
    return all(quantile_name(level) in frame for pair in FAN for level in pair[:2]) and bool(
        frame[quantile_name(0.025)].notna().any())


def _band_plot(frame: pd.DataFrame, name: str, detail: str, timezone_name: str,
               actual: str | None) -> str:
    """A forecast with the fan of its quantiles (its 80 % and 95 % bands where it has none:
    a week forecast by an earlier release), and the actual when ``actual`` names its column,
    over local time, as PNG data."""
    fig, ax = _figure()
    ts = frame["ts"].dt.tz_convert(timezone_name).dt.tz_localize(None)
    if _has_quantiles(frame):
        for low, high, color in FAN:
            ax.fill_between(ts, frame[quantile_name(low)], frame[quantile_name(high)],
                            color=color, step="mid",
                            label=f"{100 * (high - low):.0f} % ({100 * low:g}-{100 * high:g} %)")
    else:
        ax.fill_between(ts, frame["y_lo_95"], frame["y_hi_95"], color="#c6dbef",
                        label="95 % band", step="mid")
        ax.fill_between(ts, frame["y_lo_80"], frame["y_hi_80"], color="#8fb8de",
                        label="80 % band", step="mid")
    ax.plot(ts, frame["y_hat"], label="published forecast", **PUBLISHED_STYLE)
    if actual is not None and frame[actual].notna().any():
        ax.plot(ts, frame[actual], label="actual", **ACTUAL_STYLE)
    ax.set_ylabel("energy [kWh per hour]")
    ax.set_xlabel(f"local time ({timezone_name})")
    top = frame[["y_hi_95", "y_hat", *([actual] if actual else [])]].max().max()
    ax.set_ylim(bottom=0, top=float(top) * 1.35 if top > 0 else 1.0)  # room for the name
    from matplotlib.dates import DateFormatter

    ax.xaxis.set_major_formatter(DateFormatter("%a %d %b"))
    ax.grid(alpha=0.3)
    _name_inside(ax, name, detail)
    ax.legend(loc="upper right", ncol=4, fontsize=8, framealpha=0.9)
    fig.autofmt_xdate()
    fig.tight_layout()
    return _png(fig)


def _img(data: str, alt: str, caption: str = "") -> str:
    cap = f"<figcaption>{html.escape(caption)}</figcaption>" if caption else ""
    return (f"<figure><img alt='{html.escape(alt)}' src='data:image/png;base64,{data}'>"
            f"{cap}</figure>")


def _zone(con: duckdb.DuckDBPyConnection, building_id: str | None = None) -> str:
    if building_id is None:
        zone = con.execute("SELECT mode(timezone ORDER BY timezone) FROM buildings").fetchone()[0]
    else:
        zone = con.execute("SELECT timezone FROM buildings WHERE building_id = ?",
                           [building_id]).fetchone()
        zone = zone[0] if zone else None
    return zone or "UTC"


def _building_plot(con: duckdb.DuckDBPyConnection, building_id: str) -> tuple[str, str] | None:
    """The building's latest published weeks: forecast, intervals and actuals, as PNG data and
    a caption; ``None`` without a published forecast."""
    viewed = {c[0] for c in con.execute("SELECT * FROM published_forecasts LIMIT 0").description}
    quantiles = "".join(f"p.{c}, " for c in QUANTILE_COLUMNS if c in viewed)  # (none: a view
    frame = con.execute(  # an earlier release made, read without writing since)
        f"""
        SELECT p.ts, p.target_week, p.model, p.y_hat, p.y_lo_80, p.y_hi_80, p.y_lo_95, p.y_hi_95,
               {quantiles}m.kwh AS actual
        FROM published_forecasts p
        LEFT JOIN {USABLE_READINGS} m USING (building_id, ts)
        WHERE p.building_id = ? AND p.target_week IN (
            SELECT DISTINCT target_week FROM publications WHERE building_id = ?
            ORDER BY target_week DESC LIMIT ?)
        ORDER BY p.ts
        """,
        [building_id, building_id, PLOT_WEEKS],
    ).df()
    if frame.empty:
        return None
    models = ", ".join(f"{week:%Y-%m-%d}: {model}" for week, model in
                       frame.drop_duplicates("target_week")[["target_week", "model"]].itertuples(
                           index=False))
    data = _band_plot(frame, building_id, f"published: {models}", _zone(con, building_id),
                      "actual")
    return data, f"{building_id}, published model per week: {models}"


def _quality_section(quality: DataQuality) -> list[str]:
    """A line of fleet counts and the :data:`QUALITY_ROWS` worst buildings' data quality."""
    table = quality.table
    if table.empty:
        return ["<p>No buildings in the warehouse.</p>"]
    count = {
        "miss more than 10 % of the recent hours": int((table["missing_share_12w"] > 0.1).sum()),
        "have no reading at all": int((table["readings"] == 0).sum()),
        f"have a flat line of {FLAT_RUN_ALERT_HOURS} h or more":
            int((table["flat_runs_24h"] > 0).sum()),
        "hold negative readings": int((table["negative_readings"] > 0).sum()),
        f"hold spikes (readings over {SPIKE_RATIO} times their own 99th percentile)":
            int((table["spike_readings"] > 0).sum()),
    }
    if "high_runs" in table:
        count["hold runs of hours far above their own level or a meter stuck high"] = int(
            ((table["high_runs"] > 0) | (table["stuck_high_runs"] > 0)).sum())
    counts = "; ".join(f"{n} {what}" for what, n in count.items())
    spiky = table.loc[table["spike_readings"] > 0, ["building_id", "spike_readings",
                                                    "largest_reading"]]
    spiky = spiky.sort_values("spike_readings", ascending=False, kind="stable")
    named = ", ".join(f"{b} ({int(n)}, up to {v:g} kWh)"
                      for b, n, v in spiky.head(QUALITY_ROWS).itertuples(index=False))
    spikes = f" Spikes: {named}{' and more' if len(spiky) > QUALITY_ROWS else ''}." if named else ""
    columns = [c for c in QUALITY_COLUMNS if c in table]
    shown = quality.cells(null="", limit=QUALITY_ROWS)[columns]
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


def _kwh(frame: pd.DataFrame, columns: Sequence[str]) -> pd.DataFrame:
    """kWh columns rounded for reading (to 3 significant figures past the units)."""
    return frame.assign(**{c: frame[c].map(lambda v: "" if pd.isna(v) else f"{v:,.0f}"
                                           if abs(v) >= 100 else f"{v:.1f}")
                           for c in columns if c in frame})


def _manager_forecast(con: duckdb.DuckDBPyConnection, week: object) -> list[str]:
    """The published week per portfolio (a plot each, and a table), and the largest building
    peaks; the week is 'Next week' until its readings are in (:func:`week_label`)."""
    hours, portfolios = portfolio_peaks(con, week, plotted=PORTFOLIO_PLOTS)
    zone = _zone(con)
    label = week_label(con, week)
    out = [f"<h2 id='next-week'>{label} ({week}), per portfolio</h2>"]
    if portfolios.empty:
        return [*out, "<p>No published forecast for that week.</p>"]
    shown = portfolios.rename(columns={"peak_lo_80": "peak 80 % low",
                                       "peak_hi_80": "peak 80 % high",
                                       "record_weeks": "weeks of record in its bands"})
    out.append(_table(_kwh(shown, ["week_kwh", "peak_kwh", "peak 80 % low", "peak 80 % high"]),
                      row_class=dict.fromkeys(portfolios["portfolio_id"], "portfolio")))
    out.append("<p class='note'>A portfolio's forecast is the sum of its buildings' published "
               "forecasts; its distribution (the fan: the 2.5 to 97.5 % quantiles of its total, "
               "the 80 % band its 10 and 90 % ones) comes from the portfolio's own summed errors "
               "(its buildings err partly together, partly apart), so it is narrower than its "
               "buildings' bands added up. <b>buildings</b> counts those with a forecast of the "
               f"week against those the portfolio holds. Peak hours in {html.escape(zone)} "
               "time.</p>")
    for portfolio in portfolios["portfolio_id"].head(PORTFOLIO_PLOTS):
        frame = hours[hours["portfolio_id"] == portfolio]
        row = portfolios[portfolios["portfolio_id"] == portfolio].iloc[0]
        detail = (f"week of {week}: {row['buildings']} buildings, {row['week_kwh']:,.0f} kWh, "
                  f"peak {row['peak_kwh']:,.0f} kWh on {row['peak_hour']}")
        out.append(_img(_band_plot(frame, f"portfolio {portfolio}", detail, zone, None),
                        f"portfolio {portfolio}"))
    peaks = building_peaks(con, week)
    out.append(f"<h2 id='peaks'>{label}'s peak per building (the "
               f"{min(MANAGER_ROWS, len(peaks))} largest)</h2>")
    shown = peaks.head(MANAGER_ROWS).rename(columns={"peak_lo_80": "peak 80 % low",
                                                     "peak_hi_80": "peak 80 % high"})
    out.append(_table(_kwh(shown, ["week_kwh", "peak_kwh", "peak 80 % low", "peak 80 % high"])))
    out.append(f"<p class='note'>{len(peaks)} buildings forecast; <b>next_week.csv</b> beside "
               "this page lists every one (peak hours in each building's own local time).</p>")
    return out


def _manager_accuracy(con: duckdb.DuckDBPyConnection, scores: pd.DataFrame) -> list[str]:
    """How accurate the published forecasts were in the latest scored weeks, in % of load."""
    out = ["<h2 id='accuracy'>How accurate the last weeks were</h2>"]
    portfolios = portfolio_accuracy(con, scores)
    if not portfolios.empty:
        shown = portfolios[["portfolio_id", "target_week", "mae_pct", "coverage_80", "coverage_95",
                            "width_80", "buildings_width_80"]].copy()
        shown["target_week"] = pd.to_datetime(shown["target_week"]).dt.strftime("%Y-%m-%d")
        shown = shown.rename(columns={"mae_pct": "error % of load",
                                      "coverage_80": "80 % band covered",
                                      "coverage_95": "95 % band covered",
                                      "width_80": "80 % band width kWh",
                                      "buildings_width_80": "buildings' bands added kWh"})
        out.append(_table(shown, row_class=dict.fromkeys(portfolios["portfolio_id"], "portfolio"),
                          digits=2))
    buildings = recent_accuracy(con)
    if buildings.empty:
        return [*out, "<p>No week has been scored yet (a week is scored once its readings are "
                      "ingested).</p>"]
    shown = buildings.head(MANAGER_ROWS).rename(columns={"mean_pct": "over these weeks"})
    out.append("<p class='note'>Per building, the published forecast's mean absolute error in "
               "% of the building's own mean load (so buildings of any size compare), week by "
               f"week; the {min(MANAGER_ROWS, len(buildings))} least accurate of "
               f"{len(buildings)} below, <b>accuracy.csv</b> beside this page has every one.</p>")
    out.append(_table(shown, digits=1))
    return out


def _manager_problems(con: duckdb.DuckDBPyConnection, quality: DataQuality,
                      week: object) -> list[str]:
    problems = data_problems(con, quality, week)
    out = ["<h2 id='problems'>Data problems that need action</h2>"]
    if not problems:
        return [*out, "<p class='ok'>None: every building is forecast, reporting and plausible."
                      "</p>"]
    items = []
    for p in problems:
        ids = ", ".join(p.buildings[:PROBLEM_IDS])
        more = (f" and {len(p.buildings) - PROBLEM_IDS} more"
                if len(p.buildings) > PROBLEM_IDS else "")
        items.append(f"<li><b>{len(p.buildings)} building(s): {html.escape(p.what)}</b> "
                     f"({html.escape(ids + more)}). "
                     f"{html.escape(p.action[:1].upper() + p.action[1:])}.</li>")
    return [*out, f"<ul class='problems'>{''.join(items)}</ul>"]


def _calibration_section(scores: pd.DataFrame) -> list[str]:
    """How the portfolios' bands covered over every scored week, by how much record made
    them."""
    table = calibration_rows(scores)
    if table.empty:
        return []
    shown = table.rename(columns={"width_ratio_80": "width 80 / buildings' width 80"})
    return ["<h2>Portfolio bands over every scored week</h2>",
            "<p class='note'>Pooled over the scored hours, by how many earlier published weeks "
            "calibrated the bands (a portfolio's first week: its validation week only). Goals: "
            "80 % covers 75-85 % of hours, 95 % covers 90-97 %, at most 0.8 times the width of "
            "the buildings' bands added up.</p>",
            _table(shown, row_class=dict.fromkeys(table["portfolio_id"], "portfolio"))]


def _distribution_section(board: pd.DataFrame) -> list[str]:
    """Each model's forecast distribution: its mean pinball loss against seasonal naive's, and
    each quantile level's share of the scored hours at or below it."""
    if board.empty or "pinball_mean" not in board or board["pinball_mean"].isna().all():
        return []  # (no column: a leaderboard view an earlier release made)
    below = [f"below_{quantile_suffix(level)}" for level in QUANTILES]
    shown = board[["model", "pinball_mean", "pinball_vs_naive", *below]].rename(
        columns={c: f"{100 * level:g} %" for c, level in zip(below, QUANTILES, strict=True)})
    return ["<h2>Forecast distributions: pinball loss and calibration</h2>",
            "<p class='note'><b>pinball_mean</b>: the mean pinball loss of the quantiles "
            "(kWh; lower is better), <b>pinball_vs_naive</b> over last week's load's "
            "(seasonal naive with its own quantiles) on the building-weeks both have; each "
            "level's column is the share of scored hours at or below that quantile: a "
            "calibrated 90 % quantile holds 0.90.</p>",
            _table(shown, row_class={"published": "published", "seasonal_naive": "naive"})]


def render_report(con: duckdb.DuckDBPyConnection, buildings: Sequence[str] | None = None,
                  *, n_plots: int = 6, quality: DataQuality | None = None,
                  portfolio_scores: pd.DataFrame | None = None) -> str:
    """The report page as HTML text (the plotted buildings: ``buildings`` or the ones with the
    most published weeks; the data quality and every portfolio's scores: ``quality`` and
    ``portfolio_scores``, or read here)."""
    quality = quality if quality is not None else data_quality(con)
    scores = (portfolio_scores if portfolio_scores is not None
              else read_portfolio_scores(con, portfolio_ids(con)))
    week = next_week(con)
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
    made = f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC"
    sections = [
        f"<h1 id='manager'>Week-ahead load forecasts: the week of {week or '(none yet)'}</h1>",
        f"<p class='note'>Made {made}. The forecast an operator uses (the <b>published</b> one "
        "per building and week) summed per portfolio, with its bands; then how accurate the "
        "last weeks were and what in the data needs action. The modeller's tables follow.</p>",
        *(_manager_forecast(con, week) if week is not None
          else ["<p>Nothing is published yet: run `wadiro forecast`.</p>"]),
        *_manager_accuracy(con, scores),
        *_manager_problems(con, quality, week),
        "<h1 id='modeller' class='part'>For the modeller</h1>",
        f"<p class='note'>{span[2] or 0} buildings, target weeks {span[0]} to {span[1]}. "
        "<b>mae_vs_naive</b> is a model's MAE over seasonal naive's (last week's load) on the "
        "building-weeks both forecast; below 1 beats it. <b>published</b> is the one forecast "
        "per building-week an operator uses.</p>",
        "<h2>Leaderboard against seasonal naive</h2>",
        _table(shown, row_class={"published": "published", "seasonal_naive": "naive"})
        if not shown.empty else "<p>No week is scored yet: the leaderboard follows once a "
        "published week's readings are ingested.</p>",
        "<h2>Published models</h2>",
        _table(published) if not published.empty else "<p>Nothing published yet.</p>",
        "<h2>Forecast hours below zero</h2>",
        _table(violations) if not violations.empty
        else "<p>No forecast hour below zero.</p>",
        *_distribution_section(board),
        *_calibration_section(scores),
        "<h2>Meter data quality</h2>",
        *_quality_section(quality),
        "<h2>Published forecasts, intervals and actuals</h2>",
    ]
    for building_id in buildings or _plot_buildings(con, n_plots):
        plot = _building_plot(con, building_id)
        if plot is None:
            sections.append(f"<p>{html.escape(building_id)}: no published forecast.</p>")
            continue
        data, caption = plot
        sections.append(_img(data, building_id, caption))
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        "<title>Fleet forecast report</title>"
        f"<style>{_STYLE}</style></head><body>{''.join(sections)}"
        f"<script>{_CHECK}</script></body></html>"
    )
