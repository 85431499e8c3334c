"""Portfolios in SQL: the hourly total of a portfolio's published forecasts, with intervals from
the portfolio's own joint errors, and its scores once the readings are in.

A portfolio is a set of buildings: ``all`` (every building) and the operator's named ones
(table ``portfolios``). Its forecast of an hour is the sum of its buildings' published forecasts
of that hour; ``n_buildings`` says how many were summed and ``n_buildings_expected`` how many
the portfolio holds, so a building without a forecast is counted, never silently dropped. A
publication :data:`HELD` (never to be bid) is summed nowhere.

**Quantiles and intervals: split conformal prediction on summed residuals.** Summing the
buildings' bands assumes their errors move together in every hour and is far too wide; treating
them as independent is too narrow. Instead each past hour's errors (actual minus forecast) are
first *summed over the portfolio's buildings* (an hour in which they err together gives a large
sum, one in which they cancel a small one), so the sums carry the correlation between
buildings, and the portfolio's quantiles come from those sums as each building's own do from
its errors (:mod:`~tasks.protocol.intervals`): weighted conformal quantiles of the summed
errors, each weighing the less the older it is (:data:`HALFLIFE_WEEKS`; Barber et al.,
*Conformal prediction beyond exchangeability*, 2023): above the median the total plus the
smallest summed error whose cumulative weight reaches tau of the total weight plus the target
hour's (1), below it the mirror image, the median between the two errors that split the weight
evenly (with equal weights: the ceil((n + 1) tau)-th and floor((n + 1) tau)-th smallest of the
n). A portfolio's *first weeks* (no earlier published week among its errors) are calibrated on
one validation week, whose sum's lean to one side the next week need not share, so their
quantiles are symmetric around the total: the central conformal interval of level
``|2 tau - 1|``, the ceil((n + 1)|2 tau - 1|)-th smallest of the n absolute summed errors, the
median the total itself (Vovk, Gammerman and Shafer, *Algorithmic Learning in a Random World*,
2005; Lei et al., JASA 2018). Ranked one tail at a time, first weeks' 80 % bands held 72-75 % of
the hours of 24 weeks of real buildings and their 95 % bands 87-90 %
(tests/tasks/test_portfolio_calibration.py); symmetric with a record too, the totals of 10
buildings and of a third of them held 1.7-2.2 % of the hours of 2018 at or below their 2.5 %
quantile and 46.9-48.6 % at or below their median, tail by tail 2.8-3.2 % and 48.5-49.7 %
(docs/benchmarks.md). Every
quantile below the median is at most the total and every one above it at least the total, none
below zero, so the 80 % and 95 % intervals (the 10/90 and 2.5/97.5 % pairs) are nested around
it. A portfolio's quantiles are those of its total, never sums of its buildings' quantiles.

The past hours of a target week W are

* its *validation week*: the errors of each building's published model on the week before W,
  forecast from the weeks before that (``validation_errors``), known as soon as W is forecast,
  so a portfolio has intervals from its first week; and
* its *track record*: the errors of the forecasts actually published for the
  :data:`RECORD_WEEKS` weeks before W, against the readings stored now (an error of the week
  k weeks before W weighs ``0.5 ** ((k - 1) / HALFLIFE_WEEKS)``, the validation week's 1).

The buildings summed are those with a published forecast of W (others do not enter its total).
An hour counts when the buildings with an error at that hour carry at least
:data:`MIN_PRESENT_SHARE` of the week's forecast energy; its sum is then scaled up to the whole
(the missing buildings are assumed to err like the others, in proportion to their size). Fewer
than :data:`MIN_CALIBRATION` such hours give no quantile. None goes below zero.

The views read the stored rows when queried: scores follow late or corrected readings at once
(as building scores are re-scored on ingest), and so does the track record of the weeks after
them. What a run issued stays as it was: :mod:`~tasks.warehouse.portfolio_vintages` keeps it,
computed by this SQL when the run closes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import date

import duckdb
import pandas as pd

from tasks.errors import PipelineError
from tasks.protocol.config import ForecastConfig
from tasks.protocol.intervals import (
    BANDS,
    LEVELS,
    MIN_CALIBRATION,
    QUANTILE_COLUMNS,
    QUANTILES,
    RANK_TOLERANCE,
    quantile_name,
    quantile_suffix,
)
from tasks.warehouse.catalog import has_table
from tasks.warehouse.quantile_sql import quantile_scores_sql
from tasks.warehouse.usable import USABLE_READINGS

ALL = "all"
"""The portfolio of every building, present in every warehouse."""

HELD = "held"
"""The ``publications.outcome`` of a building-week's forecast that must never be bid (an order
of magnitude off the building's history or declared size): left out of every portfolio's sum,
so the building counts in ``n_buildings_expected`` but not in ``n_buildings``."""

RECORD_WEEKS: int = ForecastConfig.model_fields["quantile_record_weeks"].default
"""Earlier published weeks whose errors calibrate a portfolio's quantiles (as many as a
building's own by default, ``ForecastConfig.quantile_record_weeks``)."""

HALFLIFE_WEEKS: float = ForecastConfig.model_fields["quantile_halflife_weeks"].default
"""The age in weeks at which a summed error weighs half as much as one of the week before the
target week (as a building's by default, ``ForecastConfig.quantile_halflife_weeks``)."""

MIN_SIGNED_RECORD_WEEKS = 1
"""A portfolio-week's quantiles are ranked tail by tail (signed) from this many earlier
published weeks among its errors on; with fewer (a first week) they are symmetric."""

MIN_PRESENT_SHARE = 0.9
"""A past hour calibrates a portfolio's intervals when its buildings with an error at that hour
carry at least this share of the target week's forecast energy."""

_NO_PORTFOLIOS = "(SELECT NULL::VARCHAR AS portfolio_id, NULL::VARCHAR AS building_id WHERE false)"
_NO_VALIDATION = ("(SELECT NULL::VARCHAR AS building_id, NULL::DATE AS target_week, "
                  "NULL::TIMESTAMPTZ AS ts, NULL::DOUBLE AS error WHERE false)")
_NO_VINTAGES = ("(SELECT NULL::VARCHAR AS building_id, NULL::DATE AS target_week, "
                "NULL::VARCHAR AS model, NULL::VARCHAR AS run_id, NULL::TIMESTAMPTZ AS ts, "
                "NULL::DOUBLE AS y_hat, NULL::DOUBLE AS y_lo_80, NULL::DOUBLE AS y_hi_80 "
                "WHERE false)")


def _pct(level: float) -> int:
    return round(100 * level)


PORTFOLIO_CHUNK = 1000
"""Portfolios computed in one query by :func:`read_portfolio_forecasts` and
:func:`read_portfolio_scores` when many are asked for (a report of every portfolio): the
query's state grows with the portfolios' memberships times their hours, so 100,000 portfolios
at once took more than 13 GB; in chunks the memory is that of one chunk."""


def portfolio_members_sql(named: bool = True, chosen: bool = False) -> str:
    """One row per (portfolio, building): ``all`` holds every building; the named portfolios
    (``named``: the table exists) their own. With ``chosen`` only the portfolios of one ``?``
    placeholder (a list of ids)."""
    source = "portfolios" if named else _NO_PORTFOLIOS
    if not chosen:
        return f"""
        SELECT '{ALL}' AS portfolio_id, building_id FROM buildings
        UNION ALL
        SELECT DISTINCT portfolio_id, building_id FROM {source} WHERE portfolio_id <> '{ALL}'"""
    return f"""
        WITH chosen_ids AS (SELECT unnest(?::VARCHAR[]) AS portfolio_id)
        SELECT '{ALL}' AS portfolio_id, building_id FROM buildings
        WHERE '{ALL}' IN (SELECT portfolio_id FROM chosen_ids)
        UNION ALL
        SELECT DISTINCT portfolio_id, building_id FROM {source}
        WHERE portfolio_id <> '{ALL}' AND portfolio_id IN (SELECT portfolio_id FROM chosen_ids)"""


def _portfolio_ctes(*, named: bool, issued: bool, outcomes: bool, record_weeks: int,
                    chosen_weeks: bool, chosen_portfolios: bool) -> str:
    """The shared parts (common table expressions, without ``WITH``) of
    :func:`portfolio_forecasts_sql` up to ``summed``: the members, the published hours of the
    chosen weeks and their records with their readings, and the buildings each chosen week's
    total sums, weighted by their forecast energy (the arguments are
    :func:`portfolio_forecasts_sql`'s)."""
    kept = f"\n              AND outcome IS DISTINCT FROM '{HELD}'" if outcomes else ""
    vintages = "issued_forecasts" if issued else _NO_VINTAGES
    chosen = ("SELECT unnest(?::DATE[]) AS target_week" if chosen_weeks
              else "SELECT DISTINCT target_week FROM publications")
    return f"""
        members AS MATERIALIZED ({portfolio_members_sql(named, chosen_portfolios)}),
        member_buildings AS MATERIALIZED (SELECT DISTINCT building_id FROM members),
        expected AS (
            SELECT portfolio_id, count(*) AS n_buildings_expected FROM members GROUP BY ALL
        ),
        chosen AS ({chosen}),
        -- the weeks whose published forecasts are read: the chosen ones and their records
        wanted AS MATERIALIZED (
            SELECT DISTINCT target_week - CAST(7 * k AS INTEGER) AS target_week
            FROM chosen CROSS JOIN range(0, {int(record_weeks) + 1}) AS weeks_back(k)
        ),
        publication AS MATERIALIZED (
            SELECT building_id, target_week, model, run_id FROM publications
            WHERE target_week IN (SELECT target_week FROM wanted){kept}
              AND building_id IN (SELECT building_id FROM member_buildings)
        ),
        -- each building's published hours of those weeks: as issued, else from forecasts
        issued AS MATERIALIZED (
            SELECT i.building_id, i.target_week, i.ts, i.y_hat, i.y_lo_80, i.y_hi_80
            FROM {vintages} i
            JOIN publication p USING (building_id, target_week, model, run_id)
            WHERE i.target_week IN (SELECT target_week FROM wanted)
        ),
        published AS (
            SELECT * FROM issued
            UNION ALL
            SELECT f.building_id, f.target_week, f.ts, f.y_hat, f.y_lo_80, f.y_hi_80
            FROM forecasts f
            JOIN (SELECT * FROM publication
                  ANTI JOIN (SELECT DISTINCT building_id, target_week FROM issued)
                  USING (building_id, target_week)) p
                USING (building_id, target_week, model)
            WHERE f.target_week IN (SELECT target_week FROM wanted)
        ),
        -- with their readings
        hours AS MATERIALIZED (
            SELECT f.building_id, f.target_week, f.ts, f.y_hat, f.y_hi_80 - f.y_lo_80 AS width_80,
                   r.kwh
            FROM published f
            LEFT JOIN (SELECT * FROM {USABLE_READINGS} -- the wanted hours of the members only
                       WHERE ts >= (SELECT min(target_week) FROM wanted) - INTERVAL 2 DAY
                         AND ts < (SELECT max(target_week) FROM wanted) + INTERVAL 9 DAY
                         AND building_id IN (SELECT building_id FROM member_buildings)) r
                USING (building_id, ts)
        ),
        -- the buildings a chosen week's total sums, each weighted by its forecast energy
        weights AS MATERIALIZED (
            SELECT building_id, target_week, favg(y_hat) AS weight
            FROM hours
            WHERE target_week IN (SELECT target_week FROM chosen)
            GROUP BY ALL
            HAVING count(y_hat) > 0
        ),
        summed AS (
            SELECT m.portfolio_id, w.building_id, w.target_week, w.weight
            FROM members m JOIN weights w USING (building_id)
        )"""


def portfolio_forecasts_sql(*, named: bool = True, validation: bool = True,
                            issued: bool = True, outcomes: bool = True,
                            record_weeks: int = RECORD_WEEKS,
                            chosen_weeks: bool = False, chosen_portfolios: bool = False) -> str:
    """The ``portfolio_forecasts`` rows: per (portfolio, target week, UTC hour) the summed
    published forecast, its 80 % and 95 % intervals, the buildings summed and expected, the
    actual total (NULL until every summed building's reading of the hour is stored), the sum of
    the buildings' own 80 % widths (what adding their bands would give), and what calibrated
    the intervals: ``n_calibration_hours`` and ``n_record_weeks`` (earlier published weeks
    among them; 0 in a portfolio's first week). ``named`` / ``validation`` / ``issued``:
    whether the ``portfolios`` / ``validation_errors`` / ``issued_forecasts`` tables exist (a
    warehouse of an earlier release read without writing has none of them), ``outcomes``
    whether ``publications.outcome`` does: a publication :data:`HELD` is left out of the sums
    (and of the calibration: its errors were never bid). A building-week's
    published hours are its publication's run's vintage in ``issued_forecasts`` (the rows of
    that model in ``forecasts``, which holds every model's: a seventh of the rows to read), or,
    for a publication no vintage was kept of (an earlier release's), its model's rows in
    ``forecasts``. ``record_weeks`` other than :data:`RECORD_WEEKS` (0: every
    week calibrated as a portfolio's first) is for studying the calibration. With
    ``chosen_weeks`` only the target weeks of one ``?`` placeholder (a list of dates) are
    computed: a week's rows read only its own and its record weeks' stored rows, where a
    filter on the view's ``target_week`` still reads every week's (a query's filter does not
    reach inside the SQL's shared parts). With ``chosen_portfolios`` only the portfolios of a
    first ``?`` placeholder (a list of ids, before the weeks') are computed, from their own
    buildings' rows: two portfolios of 100,000 cost what those two do, not what all do."""
    offsets = ",\n".join(
        f"""CASE WHEN any_value(n) >= {MIN_CALIBRATION} THEN
                CASE WHEN count(DISTINCT issued_week) >= {MIN_SIGNED_RECORD_WEEKS}
                     THEN {_signed_offset(level)} ELSE {_symmetric_offset(level)} END
                END AS e_{quantile_suffix(level)}""" for level in QUANTILES)
    quantiles = ",\n".join(  # (greatest() skips a NULL: a quantile that is not there stays NULL)
        f"""CASE WHEN w.e_{quantile_suffix(level)} IS NOT NULL THEN greatest({
                _on_its_side(f"h.y_hat + w.e_{quantile_suffix(level)}", level)}, 0.0) END
                AS {quantile_name(level)}""" for level in QUANTILES)
    bands = ", ".join(f"{quantile_name(low)} AS y_lo_{_pct(band)}, "
                      f"{quantile_name(high)} AS y_hi_{_pct(band)}"
                      for band, (low, high) in BANDS.items())
    errors = "validation_errors" if validation else _NO_VALIDATION
    ctes = _portfolio_ctes(named=named, issued=issued, outcomes=outcomes,
                           record_weeks=record_weeks, chosen_weeks=chosen_weeks,
                           chosen_portfolios=chosen_portfolios)
    return f"""
        WITH {ctes},
        total AS (
            SELECT portfolio_id, target_week, fsum(weight) AS weight FROM summed GROUP BY ALL
        ),
        hourly AS (
            SELECT m.portfolio_id, h.target_week, h.ts,
                   fsum(h.y_hat) AS y_hat,
                   count(h.y_hat) AS n_buildings,
                   CASE WHEN count(h.kwh) FILTER (WHERE h.y_hat IS NOT NULL) = count(h.y_hat)
                        THEN fsum(h.kwh) FILTER (WHERE h.y_hat IS NOT NULL) END AS actual_kwh,
                   fsum(h.width_80) AS buildings_width_80
            FROM members m JOIN hours h USING (building_id)
            WHERE h.target_week IN (SELECT target_week FROM chosen)
            GROUP BY ALL
        ),
        validation AS (
            SELECT s.portfolio_id, s.target_week, v.ts, NULL::DATE AS issued_week,
                   fsum(v.error) AS error, fsum(s.weight) AS weight
            FROM summed s JOIN {errors} v USING (building_id, target_week)
            WHERE v.target_week IN (SELECT target_week FROM chosen)
            GROUP BY s.portfolio_id, s.target_week, v.ts
        ),
        -- the errors of the forecasts published for the record weeks, summed per hour
        record AS (
            SELECT s.portfolio_id, s.target_week, h.ts, any_value(h.target_week) AS issued_week,
                   fsum(h.kwh - h.y_hat) AS error, fsum(s.weight) AS weight
            FROM (SELECT *, target_week - CAST(7 * k AS INTEGER) AS record_week
                  FROM summed CROSS JOIN range(1, {int(record_weeks) + 1}) AS weeks_back(k)) s
            JOIN hours h ON h.building_id = s.building_id AND h.target_week = s.record_week
            WHERE h.kwh IS NOT NULL AND h.y_hat IS NOT NULL
            GROUP BY s.portfolio_id, s.target_week, h.ts
        ),
        calibration AS (
            SELECT c.portfolio_id, c.target_week, c.issued_week,
                   c.error * t.weight / c.weight AS error,
                   CASE WHEN c.issued_week IS NULL THEN 1.0
                        ELSE pow(0.5, greatest(date_diff('day', c.issued_week, c.target_week)
                                               / 7.0 - 1.0, 0.0) / {float(HALFLIFE_WEEKS)!r})
                   END AS age_weight
            FROM (SELECT * FROM validation UNION ALL SELECT * FROM record) c
            JOIN total t USING (portfolio_id, target_week)
            WHERE c.weight >= {MIN_PRESENT_SHARE} * t.weight AND t.weight > 0
        ),
        ranked AS (
            SELECT *, row_number() OVER (PARTITION BY portfolio_id, target_week
                                         ORDER BY abs(error)) AS rank,
                   count(*) OVER (PARTITION BY portfolio_id, target_week) AS n,
                   sum(age_weight) OVER (PARTITION BY portfolio_id, target_week
                                         ORDER BY error ROWS UNBOUNDED PRECEDING) AS up,
                   sum(age_weight) OVER (PARTITION BY portfolio_id, target_week
                                         ORDER BY error DESC ROWS UNBOUNDED PRECEDING) AS down,
                   sum(age_weight) OVER (PARTITION BY portfolio_id, target_week) AS total_weight
            FROM calibration
        ),
        widths AS (
            SELECT portfolio_id, target_week,
                   any_value(n) AS n_calibration_hours,
                   count(DISTINCT issued_week) AS n_record_weeks,
                   {offsets}
            FROM ranked
            GROUP BY portfolio_id, target_week
        ),
        distribution AS (
            SELECT h.portfolio_id, h.target_week, h.ts, h.y_hat,
                   h.n_buildings, e.n_buildings_expected, h.actual_kwh, h.buildings_width_80,
                   coalesce(w.n_calibration_hours, 0) AS n_calibration_hours,
                   coalesce(w.n_record_weeks, 0) AS n_record_weeks,
                   {quantiles}
            FROM hourly h
            JOIN expected e USING (portfolio_id)
            LEFT JOIN widths w USING (portfolio_id, target_week)
        )
        SELECT portfolio_id, target_week, ts, y_hat, {bands},
               n_buildings, n_buildings_expected, actual_kwh, buildings_width_80,
               n_calibration_hours, n_record_weeks, {", ".join(QUANTILE_COLUMNS)}
        FROM distribution"""


def _on_its_side(value: str, level: float) -> str:
    """SQL: a quantile ``value`` kept on its level's side of the total ``h.y_hat``."""
    if level == 0.5:
        return value
    return f"{'least' if level < 0.5 else 'greatest'}({value}, h.y_hat)"


def _symmetric_offset(level: float) -> str:
    """SQL: the quantile at ``level`` minus the total, from a group's errors ranked by size
    (``error``, ``rank``, ``n``): minus or plus the conformal half width of the central interval
    of level ``|2 level - 1|`` (the ceil((n + 1)|2 level - 1|)-th smallest absolute error); 0 for
    the median."""
    central = round(abs(2 * level - 1), 12)
    if central == 0:
        return "0.0"
    half = (f"min(abs(error)) FILTER (WHERE rank = least(CAST(ceil((n + 1) * {central!r}) AS "
            "BIGINT), n))")
    return f"-{half}" if level < 0.5 else half


def _signed_offset(level: float) -> str:
    """SQL: the quantile at ``level`` minus the total, the weighted conformal quantile of a
    group's signed errors (``error``, their cumulative weights ``up`` from the smallest and
    ``down`` from the largest, ``total_weight``): above the median the smallest error whose
    ``up`` reaches ``level`` of the total weight plus the target hour's 1 (the largest where
    none does), below it the largest whose ``down`` reaches ``1 - level`` of it (the smallest
    where none does), the median the mean of the smallest error whose ``up`` and the largest
    whose ``down`` reach half the total weight (one error, or the two that split it evenly)."""
    tolerance = RANK_TOLERANCE
    if level == 0.5:
        return (f"(min(error) FILTER (WHERE up >= total_weight / 2 - {tolerance!r}) + "
                f"max(error) FILTER (WHERE down >= total_weight / 2 - {tolerance!r})) / 2")
    if level > 0.5:
        return (f"coalesce(min(error) FILTER (WHERE up >= {level!r} * (total_weight + 1) - "
                f"{tolerance!r}), max(error))")
    return (f"coalesce(max(error) FILTER (WHERE down >= {round(1 - level, 12)!r} * "
            f"(total_weight + 1) - {tolerance!r}), min(error))")


def portfolio_timezones_sql(named: bool = True) -> str:
    """Per portfolio of one ``?`` placeholder (a list of ids): the time zone most of its
    buildings share (``named``: the ``portfolios`` table exists), in which its rows are
    exported."""
    return f"""
        SELECT m.portfolio_id, mode(b.timezone ORDER BY b.timezone) AS timezone
        FROM ({portfolio_members_sql(named, chosen=True)}) m JOIN buildings b USING (building_id)
        GROUP BY ALL"""


def portfolio_hours_sql(*, named: bool = True, issued: bool = True,
                        outcomes: bool = True) -> str:
    """Per portfolio of a first ``?`` placeholder and target week of a second (lists of ids,
    of dates): each hour of each building its total sums (``y_hat`` NULL where the building
    has no forecast of the hour), the rows ``portfolio_forecasts`` adds up (the arguments are
    :func:`portfolio_forecasts_sql`'s): what an export splits a portfolio's hours by."""
    ctes = _portfolio_ctes(named=named, issued=issued, outcomes=outcomes, record_weeks=0,
                           chosen_weeks=True, chosen_portfolios=True)
    return f"""
        WITH {ctes}
        SELECT m.portfolio_id, h.building_id, h.target_week, h.ts, h.y_hat
        FROM members m JOIN hours h USING (building_id)
        WHERE h.target_week IN (SELECT target_week FROM chosen)"""


def portfolio_summed_sql() -> str:
    """Per (portfolio, target week): each building its total sums (a published forecast of
    the week, not :data:`HELD`), the ``model`` and ``forecast_run_id`` (the run) of the
    published forecast of it that was summed; for the portfolios of a first ``?``
    placeholder and the weeks of a second (a list of ids, of dates). What a portfolio
    vintage keeps beside its hours: the same parts as :func:`portfolio_forecasts_sql` (so
    the same buildings), reading the chosen weeks only (the buildings summed do not depend
    on the record weeks)."""
    ctes = _portfolio_ctes(named=True, issued=True, outcomes=True, record_weeks=0,
                           chosen_weeks=True, chosen_portfolios=True)
    return f"""
        WITH {ctes}
        SELECT s.portfolio_id, s.target_week, s.building_id, p.model, p.run_id AS forecast_run_id
        FROM summed s JOIN publication p USING (building_id, target_week)"""


def portfolio_scores_sql(forecasts: str = "portfolio_forecasts") -> str:
    """The ``portfolio_scores`` rows: per (portfolio, target week), over the hours whose actual
    total is known (``n_hours``; 0 before the week's readings arrive): MAE, RMSE and the mean
    actual (kWh), the MAE in % of the mean actual, the intervals' coverage and mean width, the
    buildings' own 80 % bands added up (``buildings_width_80``: the width the portfolio's band
    replaces), each quantile's calibration and pinball loss and their mean
    (:mod:`~tasks.warehouse.quantile_sql`), and what calibrated the intervals. ``forecasts`` is
    the relation (or subquery) holding the ``portfolio_forecasts`` rows."""
    coverage = ",\n".join(
        f"""favg(CASE WHEN actual_kwh BETWEEN y_lo_{_pct(level)} AND y_hi_{_pct(level)}
                     THEN 1.0 ELSE 0.0 END) FILTER (WHERE scored AND y_lo_{_pct(level)} IS NOT NULL)
                AS coverage_{_pct(level)},
            favg(y_hi_{_pct(level)} - y_lo_{_pct(level)}) FILTER (WHERE scored)
                AS width_{_pct(level)}""" for level in LEVELS)
    return f"""
        SELECT portfolio_id, target_week,
               count(*) FILTER (WHERE scored) AS n_hours,
               count(*) AS n_hours_forecast,
               favg(abs(actual_kwh - y_hat)) FILTER (WHERE scored) AS mae,
               sqrt(favg((actual_kwh - y_hat) ^ 2) FILTER (WHERE scored)) AS rmse,
               favg(actual_kwh) FILTER (WHERE scored) AS mean_actual,
               100.0 * favg(abs(actual_kwh - y_hat)) FILTER (WHERE scored)
                   / nullif(favg(actual_kwh) FILTER (WHERE scored), 0) AS mae_pct,
               {coverage},
               favg(buildings_width_80) FILTER (WHERE scored) AS buildings_width_80,
               {quantile_scores_sql("actual_kwh", scored="scored")},
               min(n_buildings) AS min_buildings,
               any_value(n_buildings_expected) AS n_buildings_expected,
               any_value(n_calibration_hours) AS n_calibration_hours,
               any_value(n_record_weeks) AS n_record_weeks
        FROM (SELECT *, actual_kwh IS NOT NULL AS scored FROM {forecasts})
        GROUP BY portfolio_id, target_week"""


class UnknownPortfolioError(PipelineError, LookupError):
    """Portfolio ids that the warehouse does not hold."""


def stored_members_sql(con: duckdb.DuckDBPyConnection, chosen: bool = False) -> str:
    """:func:`portfolio_members_sql` for the tables this warehouse has (``chosen``: of the
    portfolios of one ``?`` placeholder)."""
    return portfolio_members_sql(named=has_table(con, "portfolios"), chosen=chosen)


def has_column(con: duckdb.DuckDBPyConnection, table: str, column: str) -> bool:
    """Whether ``table`` has ``column`` (a warehouse of an earlier release, opened read-only,
    may lack a column added since)."""
    return bool(con.execute("SELECT count(*) FROM information_schema.columns WHERE table_name = ? "
                            "AND column_name = ?", [table, column]).fetchone()[0])


def stored_parts(con: duckdb.DuckDBPyConnection) -> dict[str, bool]:
    """Which of the tables and columns a portfolio's sum reads this warehouse has, as the
    ``named``, ``issued`` and ``outcomes`` arguments of :func:`portfolio_forecasts_sql`."""
    return {"named": has_table(con, "portfolios"), "issued": has_table(con, "issued_forecasts"),
            "outcomes": has_column(con, "publications", "outcome")}


def portfolio_ids(con: duckdb.DuckDBPyConnection) -> list[str]:
    """``all`` and the named portfolios, in that order (names sorted)."""
    named = []
    if has_table(con, "portfolios"):
        named = [r[0] for r in con.execute(
            "SELECT DISTINCT portfolio_id FROM portfolios ORDER BY 1").fetchall()]
    return [ALL, *named]


def checked_portfolio_ids(con: duckdb.DuckDBPyConnection,
                          wanted: Sequence[str] | None) -> list[str]:
    """``wanted`` checked to exist (an unknown one refused, naming those there are), or
    every portfolio."""
    known = portfolio_ids(con)
    if wanted is None:
        return known
    if not wanted:
        raise UnknownPortfolioError("an empty list of portfolios was given")
    unknown = [p for p in wanted if p not in known]
    if unknown:
        shown = ", ".join(repr(p) for p in known[:10]) + (" ..." if len(known) > 10 else "")
        raise UnknownPortfolioError(
            f"unknown portfolio(s) {', '.join(repr(p) for p in unknown[:10])}; the warehouse "
            f"holds {shown} (add one with `wadiro ingest portfolios FILE`)")
    return list(wanted)


def _selected(con: duckdb.DuckDBPyConnection, portfolios: Sequence[str],
              weeks: Sequence[date] | None, record_weeks: int = RECORD_WEEKS) -> tuple[str, list]:
    """The ``portfolio_forecasts`` rows of ``portfolios`` and ``weeks`` as a subquery, and its
    parameters: both given inside the SQL (only their rows are read), for the tables this
    warehouse has (a warehouse of an earlier release, opened read-only, has no
    ``portfolios`` and ``validation_errors``, one older still no ``publications.outcome``)."""
    sql = portfolio_forecasts_sql(**stored_parts(con),
                                  validation=has_table(con, "validation_errors"),
                                  record_weeks=record_weeks, chosen_weeks=weeks is not None,
                                  chosen_portfolios=True)
    params: list = [list(portfolios), *([list(weeks)] if weeks is not None else [])]
    return f"({sql})", params


def portfolio_groups(con: duckdb.DuckDBPyConnection,
                     portfolios: Sequence[str]) -> dict[str, list[str]]:
    """``portfolios`` grouped by their buildings: the first (by id) of each set of portfolios
    holding the same buildings -> all of them, sorted. A portfolio's rows depend on its
    buildings only, so each set is computed once (100,000 portfolios over a few buildings are a
    few sets); a portfolio without buildings is left out (it has no rows)."""
    rows = con.execute(
        f"""SELECT list(portfolio_id ORDER BY portfolio_id)
            FROM (SELECT portfolio_id, list(building_id ORDER BY building_id) AS buildings
                  FROM ({stored_members_sql(con, chosen=True)}) GROUP BY portfolio_id)
            GROUP BY buildings ORDER BY min(portfolio_id)""",
        [sorted(set(portfolios))]).fetchall()
    return {ids[0]: ids for (ids,) in rows}


def _in_chunks(con: duckdb.DuckDBPyConnection, portfolios: Sequence[str] | None,
               read: Callable[[list[str]], pd.DataFrame], order: list[str]) -> pd.DataFrame:
    """``read(chunk)`` for every :data:`PORTFOLIO_CHUNK` of the sets of ``portfolios``
    (default: every one) with the same buildings (:func:`portfolio_groups`), each set's rows
    then given to each of its portfolios, sorted by ``order``: the memory of a query is that
    of one chunk."""
    groups = portfolio_groups(con, portfolios if portfolios is not None else portfolio_ids(con))
    firsts = list(groups)
    frames = [read(firsts[i:i + PORTFOLIO_CHUNK]) for i in range(0, len(firsts), PORTFOLIO_CHUNK)]
    rows = pd.concat(frames, ignore_index=True) if len(frames) > 1 else (
        frames[0] if frames else read([]))
    if all(len(ids) == 1 for ids in groups.values()):
        return rows
    each = pd.DataFrame([(first, p) for first, ids in groups.items() for p in ids],
                        columns=["portfolio_id", "member_of"])
    rows = rows.merge(each, on="portfolio_id").drop(columns="portfolio_id")
    rows = rows.rename(columns={"member_of": "portfolio_id"})[list(frames[0].columns)]
    return rows.sort_values(order, kind="stable", ignore_index=True)


def read_portfolio_forecasts(con: duckdb.DuckDBPyConnection,
                             portfolios: Sequence[str] | None = None,
                             weeks: Sequence[date] | None = None) -> pd.DataFrame:
    """The ``portfolio_forecasts`` rows of ``portfolios`` and ``weeks`` (default: all), by
    portfolio, week and hour; read from the SQL, so a read-only connection to a warehouse of an
    earlier release reads them too."""
    def read(chunk: list[str]) -> pd.DataFrame:
        rows, params = _selected(con, chunk, weeks)
        return con.execute(f"SELECT * FROM {rows} ORDER BY portfolio_id, target_week, ts",
                           params).df()

    return _in_chunks(con, portfolios, read, ["portfolio_id", "target_week", "ts"])


def read_portfolio_scores(con: duckdb.DuckDBPyConnection,
                          portfolios: Sequence[str] | None = None,
                          weeks: Sequence[date] | None = None, *,
                          record_weeks: int = RECORD_WEEKS) -> pd.DataFrame:
    """The ``portfolio_scores`` rows of ``portfolios`` and ``weeks`` (default: all), by
    portfolio and week (``record_weeks``: see :func:`portfolio_forecasts_sql`)."""
    def read(chunk: list[str]) -> pd.DataFrame:
        rows, params = _selected(con, chunk, weeks, record_weeks)
        return con.execute(f"SELECT * FROM ({portfolio_scores_sql(rows)}) "
                           "ORDER BY portfolio_id, target_week", params).df()

    return _in_chunks(con, portfolios, read, ["portfolio_id", "target_week"])


CALIBRATION_GROUPS = (("first week (validation week only)", 0, 0),
                      (f"record of 1 to {RECORD_WEEKS - 1} weeks", 1, RECORD_WEEKS - 1),
                      (f"full record ({RECORD_WEEKS} weeks)", RECORD_WEEKS, RECORD_WEEKS),
                      ("every week with a record", 1, RECORD_WEEKS))
"""How :func:`calibration_rows` groups a portfolio's scored weeks: by how many earlier
published weeks calibrated their bands (name, fewest, most)."""


def calibration_rows(scores: pd.DataFrame,
                     groups: Sequence[tuple[str, int, int]] = CALIBRATION_GROUPS) -> pd.DataFrame:
    """Per portfolio and group of ``groups`` (name, fewest and most earlier published weeks, as
    :data:`CALIBRATION_GROUPS`), over its scored hours: weeks, hours, the 80 % and 95 % bands'
    coverage, the 80 % band's mean width and the mean width of its buildings' 80 % bands added
    up, and their ratio (``portfolio_scores`` rows in).
    Computed for every portfolio at once (hours-weighted sums per group), not portfolio by
    portfolio: a report of 100,000 portfolios."""
    scored = scores[scores["n_hours"] > 0]
    weighted = scored.assign(**{f"w_{c}": scored[c] * scored["n_hours"] for c in
                                ("coverage_80", "coverage_95", "width_80", "buildings_width_80")})
    parts = []
    for rank, (name, low, high) in enumerate(groups):
        part = weighted[weighted["n_record_weeks"].between(low, high)]
        sums = part.groupby("portfolio_id", sort=False).agg(
            n_weeks=("n_hours", "size"), n_hours=("n_hours", "sum"),
            **{c: (f"w_{c}", "sum") for c in ("coverage_80", "coverage_95", "width_80",
                                                "buildings_width_80")})
        parts.append(sums[sums["n_hours"] > 0].reset_index().assign(weeks=name, rank=rank))
    if not parts or all(p.empty for p in parts):
        return pd.DataFrame()
    rows = pd.concat(parts, ignore_index=True)
    hours = rows["n_hours"].astype(float)
    for column in ("coverage_80", "coverage_95", "width_80", "buildings_width_80"):
        rows[column] = rows[column] / hours
    rows["width_ratio_80"] = (rows["width_80"] / rows["buildings_width_80"]).where(
        rows["buildings_width_80"] != 0)
    first = {p: i for i, p in enumerate(dict.fromkeys(scored["portfolio_id"]))}
    rows = rows.assign(n_hours=rows["n_hours"].astype(int),
                       order=rows["portfolio_id"].map(first)).sort_values(
        ["order", "rank"], kind="stable", ignore_index=True)
    return rows[["portfolio_id", "weeks", "n_weeks", "n_hours", "coverage_80", "coverage_95",
                 "width_80", "buildings_width_80", "width_ratio_80"]]
