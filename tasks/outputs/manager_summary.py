"""What a manager reads on Monday, from the warehouse: next week's forecast per portfolio and
per building (energy, peak hour and kWh), how accurate the last weeks were per building in
per cent of its own load (not kWh, which averages buildings hundreds of times apart), and the
data problems that need someone to act. The report's first page renders these
(:mod:`~tasks.outputs.report_html`); each is also a CSV beside it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

import duckdb
import pandas as pd

from tasks.warehouse.portfolio_sql import (
    portfolio_groups,
    portfolio_ids,
    read_portfolio_forecasts,
)
from tasks.warehouse.quality import DataQuality
from tasks.warehouse.schema import FLAT_RUN_ALERT_HOURS, HIGH_RATIO
from tasks.warehouse.usable import USABLE_READINGS

ACCURACY_WEEKS = 4
"""How many of the latest scored weeks the accuracy table shows."""

STOPPED_HOURS = 24
"""A building whose latest reading is this many hours older than the warehouse's latest has
stopped reporting (its readings need ingesting, or its meter looking at)."""

LAST_WEEK_SHARE = 0.9
"""A published week whose readings cover this share of its hours is over: 'Last week'."""

MISSING_SHARE = 0.1
"""A building missing more than this share of the recent 12 weeks' hours needs its gaps
filled."""


def next_week(con: duckdb.DuckDBPyConnection) -> date | None:
    """The latest target week with a published forecast (the week a weekly run forecast)."""
    return con.execute("SELECT max(target_week) FROM publications").fetchone()[0]


def week_label(con: duckdb.DuckDBPyConnection, week: date) -> str:
    """What the report calls the published ``week``: 'Next week' while none of its readings
    are in, 'Last week' once its published buildings' usable readings cover nine in ten of its
    hours, 'This week' between."""
    readings, hours = con.execute(
        f"""SELECT count(u.kwh), count(*) FROM published_forecasts p
            LEFT JOIN (SELECT * FROM {USABLE_READINGS} WHERE ts >= ?::DATE - INTERVAL 2 DAY
                       AND ts < ?::DATE + INTERVAL 9 DAY) u USING (building_id, ts)
            WHERE p.target_week = ?""", [week, week, week]).fetchone()
    if not readings:
        return "Next week"
    return "Last week" if readings >= LAST_WEEK_SHARE * hours else "This week"


def building_peaks(con: duckdb.DuckDBPyConnection, week: date) -> pd.DataFrame:
    """Per building with a published forecast of ``week``: the model, the week's energy, and
    its peak hour (local time) and kWh, with the 80 % interval at the peak; largest peak
    first."""
    return con.execute(
        """
        SELECT p.building_id, any_value(p.model) AS model,
               sum(p.y_hat) AS week_kwh,
               strftime(timezone(any_value(b.timezone), arg_max(p.ts, p.y_hat)), '%a %d %b %H:%M')
                   AS peak_hour,
               max(p.y_hat) AS peak_kwh,
               arg_max(p.y_lo_80, p.y_hat) AS peak_lo_80,
               arg_max(p.y_hi_80, p.y_hat) AS peak_hi_80
        FROM published_forecasts p JOIN buildings b USING (building_id)
        WHERE p.target_week = ?
        GROUP BY p.building_id
        ORDER BY peak_kwh DESC NULLS LAST, p.building_id
        """, [week]).df()


def portfolio_peaks(con: duckdb.DuckDBPyConnection, week: date, plotted: int | None = None
                    ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Each portfolio's hourly forecast of ``week`` (``portfolio_forecasts``; of the first
    ``plotted`` portfolios only, when given) and one row per portfolio: buildings forecast and
    expected, the week's energy, the peak hour (in the time zone most of its buildings have)
    and kWh with its 80 % interval. The portfolios holding the same buildings are computed
    once (:func:`~tasks.warehouse.portfolio_sql.portfolio_groups`), so 100,000 portfolios
    never hold their hours in memory at once."""
    zone = con.execute("SELECT mode(timezone ORDER BY timezone) FROM buildings").fetchone()[0]
    groups = portfolio_groups(con, portfolio_ids(con))
    hours = read_portfolio_forecasts(con, list(groups), [week])
    if hours.empty:
        return hours, pd.DataFrame()
    hours = hours.reset_index(drop=True)
    by = hours.groupby("portfolio_id", sort=False)
    peak = hours.loc[by["y_hat"].idxmax()].set_index("portfolio_id")
    first = by.first()
    table = pd.DataFrame({
        "buildings": by["n_buildings"].max().astype(int).astype(str) + " of "
                     + first["n_buildings_expected"].astype(int).astype(str),
        "week_kwh": by["y_hat"].sum(),
        "peak_hour": peak["ts"].dt.tz_convert(zone or "UTC").dt.strftime("%a %d %b %H:%M"),
        "peak_kwh": peak["y_hat"], "peak_lo_80": peak["y_lo_80"], "peak_hi_80": peak["y_hi_80"],
        "record_weeks": first["n_record_weeks"].astype(int),
    })
    each = pd.DataFrame([(p, f) for f, ids in groups.items() for p in ids],
                        columns=["portfolio_id", "first"]).sort_values("portfolio_id")
    each = each[each["first"].isin(table.index)]
    rows = table.loc[each["first"]].reset_index(drop=True)
    rows.insert(0, "portfolio_id", each["portfolio_id"].to_numpy())
    shown = each.head(plotted) if plotted is not None else each
    plots = shown.merge(hours.rename(columns={"portfolio_id": "first"}), on="first")
    return plots.drop(columns="first")[list(hours.columns)], rows


def recent_accuracy(con: duckdb.DuckDBPyConnection, weeks: int = ACCURACY_WEEKS) -> pd.DataFrame:
    """Per building, the published forecast's MAE in % of the building's own mean load in each
    of the ``weeks`` latest scored weeks (a column per week) and over them (``mean_pct``: their
    summed MAE over their summed mean load), worst first."""
    rows = con.execute(
        """
        WITH scored AS (
            SELECT s.building_id, s.target_week, s.mae, s.mean_actual
            FROM scores s JOIN publications p USING (building_id, target_week, model)
            WHERE s.n_hours > 0 AND s.mean_actual > 0
        ),
        latest AS (SELECT DISTINCT target_week FROM scored ORDER BY 1 DESC LIMIT ?)
        SELECT building_id, target_week, 100.0 * mae / mean_actual AS pct, mae, mean_actual
        FROM scored WHERE target_week IN (SELECT target_week FROM latest)
        """, [weeks]).df()
    if rows.empty:
        return pd.DataFrame(columns=["building_id", "mean_pct"])
    table = rows.pivot(index="building_id", columns="target_week", values="pct")
    table.columns = [f"{pd.Timestamp(w):%Y-%m-%d}" for w in table.columns]
    totals = rows.groupby("building_id")[["mae", "mean_actual"]].sum()
    table["mean_pct"] = 100.0 * totals["mae"] / totals["mean_actual"]
    return (table.reset_index().sort_values(["mean_pct", "building_id"], ascending=[False, True])
            .reset_index(drop=True))


def portfolio_accuracy(con: duckdb.DuckDBPyConnection, scores: pd.DataFrame,
                       weeks: int = ACCURACY_WEEKS) -> pd.DataFrame:
    """Per portfolio and one of the ``weeks`` latest scored weeks: its MAE in % of its mean
    load, and its 80 % and 95 % bands' coverage and width beside the width of its buildings'
    bands added up (of every portfolio's ``scores``)."""
    latest = [r[0] for r in con.execute(
        "SELECT DISTINCT target_week FROM scores WHERE n_hours > 0 ORDER BY 1 DESC LIMIT ?",
        [weeks]).fetchall()]
    chosen = pd.to_datetime(scores["target_week"]).dt.date.isin(latest) & (scores["n_hours"] > 0)
    return scores[chosen].reset_index(drop=True)


@dataclass(frozen=True)
class Problem:
    """A data problem that needs someone to act: what, for which buildings, and what to do."""

    what: str
    buildings: list[str]
    action: str


def data_problems(con: duckdb.DuckDBPyConnection, quality: DataQuality,
                  week: date | None) -> list[Problem]:
    """The problems of the fleet's data that need action, most urgent first: buildings without
    a forecast of ``week``, buildings that stopped reporting or miss many recent hours,
    building-weeks the learned models could not forecast, and meters that look faulty (flat,
    stuck high, high runs, spikes, negative readings)."""
    table = quality.table
    problems = []

    def add(mask: pd.Series, what: str, action: str) -> None:
        ids = table.loc[mask.fillna(False).astype(bool), "building_id"].tolist()
        if ids:
            problems.append(Problem(what, ids, action))

    if week is not None:
        missing = [r[0] for r in con.execute(
            "SELECT building_id FROM buildings WHERE building_id NOT IN ("
            "SELECT building_id FROM publications WHERE target_week = ?) ORDER BY 1",
            [week]).fetchall()]
        if missing:
            problems.append(Problem(f"no forecast for the week of {week}", missing,
                                    "see why in window_status; ingest their readings and "
                                    "weather, then run `wadiro forecast` again"))
        degraded = con.execute(
            "SELECT building_id, status || ': ' || coalesce(reason, '') FROM window_status "
            "WHERE target_week = ? AND status <> 'ok' ORDER BY 1", [week]).fetchall()
        if degraded:
            problems.append(Problem(
                f"forecast for the week of {week} by persistence only (the learned models "
                "could not run)", [b for b, _ in degraded],
                f"first reason: {degraded[0][1][:160]}"))
        problems += _degraded_weeks(con, week)
    if not table.empty:
        add(table["hours_since_last_reading"] > STOPPED_HOURS,
            f"readings stopped more than {STOPPED_HOURS} h before the fleet's latest",
            "ingest their latest meter export, or check the meter")
        add(table["missing_share_12w"] > MISSING_SHARE,
            f"more than {MISSING_SHARE:.0%} of the last 12 weeks' hours missing",
            "ingest the missing readings")
        for column, what in (
                ("stuck_high_runs", "a meter stuck high (3 h or more of one reading above twice "
                                    "its 99th percentile)"),
                ("high_runs", f"runs of hours above {HIGH_RATIO} times the building's 99th "
                              "percentile"),
                ("spike_readings", "spikes (readings over 10 times the 99th percentile)"),
                ("flat_runs_24h", f"flat lines of {FLAT_RUN_ALERT_HOURS} h or more"),
                ("negative_readings", "negative readings")):
            if column in table:
                add(table[column] > 0, what, "check the meter and correct or blank the "
                    "readings (wadiro ingest readings)")
    return problems


def _degraded_weeks(con: duckdb.DuckDBPyConnection, week: date) -> list[Problem]:
    """The building-weeks of ``week`` that were held out of every bid (their forecast an
    order of magnitude off the building's level), degraded (persistence published because no
    learned forecast could be trusted) or forecast from reduced inputs (weather inputs left
    out, flagged readings treated as missing); each with its buildings and the first one's
    reason."""
    found = []
    for what, sql, action in (
            (f"held out of every bid for the week of {week}: the forecast is an order of "
             "magnitude off the building's level",
             "SELECT building_id, reason FROM publications WHERE target_week = ? "
             "AND outcome = 'held'",
             "check its readings' unit and its declared floor_area_m2 and building_type; "
             "first: {reason}"),
            (f"forecast for the week of {week} by persistence: no learned forecast could be "
             "trusted",
             "SELECT p.building_id, p.reason FROM publications p JOIN window_status w "
             "USING (building_id, target_week) WHERE p.target_week = ? "
             "AND p.outcome = 'degraded' AND w.status = 'ok'",
             "see their record in publications; first reason: {reason}"),
            (f"weather inputs left out of the week of {week}",
             "SELECT building_id, left_out FROM window_status WHERE target_week = ? "
             "AND left_out IS NOT NULL",
             "ingest the missing weather and run `wadiro forecast --week " f"{week}` again; "
             "first: {reason}"),
            (f"flagged readings treated as missing in the history of the week of {week}",
             "SELECT building_id, n_flagged_hours || ' flagged hour(s)' FROM window_status "
             "WHERE target_week = ? AND n_flagged_hours > 0",
             "check them in meter_flags and accept the real ones (`wadiro accept-readings`); "
             "first: {reason}")):
        rows = con.execute(sql + " ORDER BY 1", [week]).fetchall()
        if rows:
            found.append(Problem(what, [b for b, _ in rows],
                                 action.format(reason=str(rows[0][1])[:160])))
    return found
