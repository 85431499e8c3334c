"""Portfolio vintages: each portfolio's hourly total and bands as a run issued them, kept beside
the buildings' vintages (``issued_forecasts``) and never rewritten by a later run.

``portfolio_forecasts`` is computed when it is read, from the latest publications and the
readings stored then, so after a re-run or a late reading it changes; what an aggregator bid
must not. When a run closes, in the transaction that records its end (right after its last
results, :func:`~tasks.warehouse.pending.load_staged`), :func:`write_portfolio_vintages`
computes with the view's own SQL
(:func:`~tasks.warehouse.portfolio_sql.portfolio_forecasts_sql`, only the chosen portfolios and
weeks) the rows of each portfolio-week the run's publications changed (``all`` and every named
portfolio holding a building the run published for that week) and appends them to
``issued_portfolio_forecasts`` with the run and ``issued_at``, the time they are written (a run
whose results waited beside a locked warehouse is dated when they went in, not when they were
computed). Beside them, ``issued_portfolio_buildings`` names the buildings each vintage summed
and whose forecast of each: what its scores' actual totals sum (``portfolio_vintage_scores``)
and what an export as issued splits its hours by.

Once per run, at its close, not once per batch: a week's total must hold every building the
run published, and a run of 10,000 buildings writes hundreds of batches while each total
reads the week's hours of the whole portfolio. A run closes once; its vintage of a
portfolio-week is written once (a closing loaded again adds nothing).
"""

from __future__ import annotations

from datetime import date, datetime

import duckdb

from tasks.protocol.intervals import LEVELS, QUANTILE_COLUMNS
from tasks.warehouse.portfolio_sql import (
    PORTFOLIO_CHUNK,
    portfolio_forecasts_sql,
    portfolio_members_sql,
    portfolio_summed_sql,
    portfolio_timezones_sql,
)
from tasks.warehouse.quantile_sql import quantile_scores_sql
from tasks.warehouse.usable import USABLE_READINGS

_PCTS = tuple(round(100 * level) for level in LEVELS)
BANDS = tuple(f"y_{side}_{pct}" for pct in _PCTS for side in ("lo", "hi"))

VINTAGE_COLUMNS = ("portfolio_id", "target_week", "ts", "y_hat", *BANDS, "n_buildings",
                   "n_buildings_expected", "n_calibration_hours", "n_record_weeks", "timezone",
                   "run_id", "issued_at", *QUANTILE_COLUMNS)
"""The columns of ``issued_portfolio_forecasts``, in order."""


def touched_sql() -> str:
    """The (portfolio, target week) pairs whose total the run of a first ``?`` placeholder
    changed: ``all`` and each named portfolio holding a building whose latest publication of
    the week is the run's, less those the run (a second ``?``) already has a vintage of."""
    return f"""
        SELECT DISTINCT m.portfolio_id, p.target_week
        FROM (SELECT building_id, target_week FROM publications WHERE run_id = ?) p
        JOIN ({portfolio_members_sql()}) m USING (building_id)
        ANTI JOIN (SELECT DISTINCT portfolio_id, target_week FROM issued_portfolio_forecasts
                   WHERE run_id = ?) done USING (portfolio_id, target_week)
        ORDER BY 1, 2"""


_PAIRS = "(SELECT unnest(?::VARCHAR[]) AS portfolio_id, unnest(?::DATE[]) AS target_week)"
"""The pairs to write, as two lists of one length (ids, weeks)."""


def insert_vintage_sql() -> str:
    """Append the ``portfolio_forecasts`` rows of the pairs given as :data:`_PAIRS` to
    ``issued_portfolio_forecasts``. Placeholders, in order: the run, the issue time, the
    portfolios and the weeks computed (lists), the pairs (two lists), the portfolios again
    (their time zones)."""
    made = ("timezone", "run_id", "issued_at")  # not the view's
    values = ", ".join(f"f.{column}" for column in VINTAGE_COLUMNS if column not in made)
    return f"""
        INSERT INTO issued_portfolio_forecasts
            ({', '.join(c for c in VINTAGE_COLUMNS if c not in made)}, {', '.join(made)})
        SELECT {values}, z.timezone, ?::VARCHAR, ?::TIMESTAMPTZ
        FROM ({portfolio_forecasts_sql(chosen_weeks=True, chosen_portfolios=True)}) f
        JOIN {_PAIRS} t USING (portfolio_id, target_week)
        LEFT JOIN ({portfolio_timezones_sql()}) z USING (portfolio_id)"""


def insert_buildings_sql() -> str:
    """Append the buildings each of the pairs (:data:`_PAIRS`) sums, and whose forecast of
    each, to ``issued_portfolio_buildings``. Placeholders, in order: the run, the portfolios
    and the weeks computed (lists), the pairs (two lists)."""
    return f"""
        INSERT INTO issued_portfolio_buildings
            (portfolio_id, target_week, run_id, building_id, model, forecast_run_id)
        SELECT s.portfolio_id, s.target_week, ?::VARCHAR, s.building_id, s.model,
               s.forecast_run_id
        FROM ({portfolio_summed_sql()}) s
        JOIN {_PAIRS} t USING (portfolio_id, target_week)"""


def write_portfolio_vintages(con: duckdb.DuckDBPyConnection, run_id: str,
                             issued_at: datetime) -> int:
    """Append the vintages of every portfolio-week ``run_id``'s publications changed, dated
    ``issued_at``, and the buildings each sums; the rows added. Call it inside the
    transaction that writes the run's last results or its end, holding ``con``, the one
    writer, once the schema is made."""
    pairs = con.execute(touched_sql(), [run_id, run_id]).fetchall()
    if not pairs:
        return 0
    ids: list[str] = sorted({p for p, _ in pairs})
    weeks: list[date] = sorted({w for _, w in pairs})
    pair_ids, pair_weeks = [p for p, _ in pairs], [w for _, w in pairs]
    added = 0
    for start in range(0, len(ids), PORTFOLIO_CHUNK):  # the memory of one chunk at a time
        chunk = ids[start:start + PORTFOLIO_CHUNK]
        added += con.execute(insert_vintage_sql(), [run_id, issued_at, chunk, weeks, pair_ids,
                                                    pair_weeks, chunk]).fetchone()[0]
        con.execute(insert_buildings_sql(), [run_id, chunk, weeks, pair_ids, pair_weeks])
    return added


def vintage_hours_sql(vintages: str) -> str:
    """Per vintage of ``vintages`` (a subquery with ``portfolio_id``, ``target_week`` and
    ``run_id`` columns): each hour of each building it summed, ``y_hat`` as that building's
    forecast was published then (its run's row in ``issued_forecasts``, else, for a
    publication no vintage was kept of, in ``forecasts`` while that run's is still there)."""
    return f"""
        WITH summed AS (
            SELECT s.* FROM (SELECT DISTINCT portfolio_id, target_week, run_id FROM {vintages}) v
            JOIN issued_portfolio_buildings s USING (portfolio_id, target_week, run_id)
        ),
        issued AS (
            SELECT s.portfolio_id, s.building_id, i.ts, i.y_hat
            FROM summed s JOIN issued_forecasts i ON i.building_id = s.building_id
             AND i.target_week = s.target_week AND i.model = s.model
             AND i.run_id = s.forecast_run_id
        )
        SELECT * FROM issued
        UNION ALL
        SELECT s.portfolio_id, s.building_id, f.ts, f.y_hat
        FROM (SELECT * FROM summed
              ANTI JOIN (SELECT DISTINCT portfolio_id, building_id FROM issued)
              USING (portfolio_id, building_id)) s
        JOIN forecasts f ON f.building_id = s.building_id AND f.target_week = s.target_week
         AND f.model = s.model AND f.run_id = s.forecast_run_id"""


def portfolio_as_of_sql() -> str:
    """The body of the table macro ``portfolio_as_of(as_of)``: per portfolio-week, the latest
    vintage issued at or before ``as_of``, every hour of it (the ``portfolio_forecasts``
    columns a bid holds, with its ``timezone``, ``run_id`` and ``issued_at``)."""
    return f"""
        SELECT {', '.join(VINTAGE_COLUMNS)}
        FROM issued_portfolio_forecasts
        WHERE issued_at <= as_of
        QUALIFY dense_rank() OVER (PARTITION BY portfolio_id, target_week
                                   ORDER BY issued_at DESC, run_id DESC) = 1"""


def portfolio_vintage_scores_sql() -> str:
    """The ``portfolio_vintage_scores`` rows: one per portfolio vintage (``vintage`` 1 is the
    first issued of its portfolio-week), scored against the actual totals: per hour, the sum
    of the usable readings stored now of the buildings that vintage summed
    (``issued_portfolio_buildings``; not the portfolio's members today, nor the buildings a
    later vintage summed), known once every one of them has that hour's reading. ``n_hours``
    (0 until then), ``mae``, ``rmse``, ``mean_actual`` (kWh), the share of those hours
    inside its 80 % and 95 % bands as issued, and its quantiles' calibration and pinball loss
    (:mod:`~tasks.warehouse.quantile_sql`)."""
    coverage = ",\n".join(
        f"""favg(CASE WHEN a.actual_kwh BETWEEN v.y_lo_{pct} AND v.y_hi_{pct} THEN 1.0
                          ELSE 0.0 END)
                   FILTER (WHERE a.actual_kwh IS NOT NULL AND v.y_lo_{pct} IS NOT NULL)
                   AS coverage_{pct}""" for pct in _PCTS)
    return f"""
        WITH actual AS (
            SELECT v.portfolio_id, v.target_week, v.run_id, v.ts,
                   CASE WHEN count(r.kwh) = count(*) THEN fsum(r.kwh) END AS actual_kwh
            FROM issued_portfolio_forecasts v
            JOIN issued_portfolio_buildings b USING (portfolio_id, target_week, run_id)
            LEFT JOIN {USABLE_READINGS} r ON r.building_id = b.building_id AND r.ts = v.ts
            GROUP BY v.portfolio_id, v.target_week, v.run_id, v.ts
        )
        SELECT *, row_number() OVER (PARTITION BY portfolio_id, target_week
                                     ORDER BY issued_at, run_id) AS vintage
        FROM (SELECT v.portfolio_id, v.target_week, v.run_id, v.issued_at,
                     any_value(v.n_buildings_expected) AS n_buildings_expected,
                     max(v.n_buildings) AS n_buildings,
                     count(a.actual_kwh) AS n_hours,
                     favg(abs(v.y_hat - a.actual_kwh)) AS mae,
                     sqrt(favg((v.y_hat - a.actual_kwh) ^ 2)) AS rmse,
                     favg(a.actual_kwh) AS mean_actual,
                     {coverage},
                     {quantile_scores_sql("a.actual_kwh", "v.")}
              FROM issued_portfolio_forecasts v
              LEFT JOIN actual a USING (portfolio_id, target_week, run_id, ts)
              GROUP BY v.portfolio_id, v.target_week, v.run_id, v.issued_at)"""
