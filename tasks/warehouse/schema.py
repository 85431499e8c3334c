"""The warehouse's schema, in one place: input tables, result tables and the analysts' views.

Timestamps are ``TIMESTAMPTZ`` holding the UTC instant at the *start* of each hour; the
connection sets the session time zone to UTC so that what an analyst sees is UTC.

Input tables have no primary-key index on purpose: a 5,000-building fleet is tens of millions
of readings and DuckDB's ART index makes such bulk loads slow and memory hungry. Idempotency
comes instead from replacing a (building, time range) slice inside one transaction.

Every result row carries the ``run_id`` that wrote it. Rows are keyed by
(building_id, model, target_week) -- ``window_status`` by (building_id, target_week) -- and a
rerun or a backfill *replaces* that slice in one transaction, so nothing is ever duplicated.
As for the input tables there is no primary-key index on the large tables (forecasts grow by
about a million rows per 1,000 buildings and week); ``runs`` is small and keyed.

:data:`TABLES` is the explicit list of every table; :func:`ensure_schema` creates them all and
the views, and only these tables are valid targets of a slice write.
"""

from __future__ import annotations

import hashlib

import duckdb

from tasks.protocol.intervals import QUANTILE_COLUMNS, QUANTILES, quantile_suffix
from tasks.protocol.publication import HELD
from tasks.protocol.scoring import VIOLATION_TOLERANCE_KWH
from tasks.warehouse.portfolio_sql import (
    portfolio_forecasts_sql,
    portfolio_members_sql,
    portfolio_scores_sql,
)
from tasks.warehouse.portfolio_vintages import portfolio_as_of_sql, portfolio_vintage_scores_sql
from tasks.warehouse.quantile_sql import quantile_scores_sql
from tasks.warehouse.usable import USABLE_READINGS

INPUT_TABLES: dict[str, str] = {
    "buildings": """
        CREATE TABLE IF NOT EXISTS buildings (
            building_id      VARCHAR PRIMARY KEY,
            site_id          VARCHAR NOT NULL,
            timezone         VARCHAR NOT NULL,
            holiday_country  VARCHAR NOT NULL,
            holiday_subdiv   VARCHAR,
            building_type    VARCHAR,
            source           VARCHAR NOT NULL,
            floor_area_m2    DOUBLE
        )""",
    "meter_readings": """
        CREATE TABLE IF NOT EXISTS meter_readings (
            building_id  VARCHAR NOT NULL,
            ts           TIMESTAMPTZ NOT NULL,
            kwh          DOUBLE
        )""",
    "weather": """
        CREATE TABLE IF NOT EXISTS weather (
            site_id          VARCHAR NOT NULL,
            ts               TIMESTAMPTZ NOT NULL,
            temperature_c    DOUBLE,
            irradiance_wm2   DOUBLE,
            wind_speed_ms    DOUBLE,
            humidity_pct     DOUBLE,
            kind             VARCHAR NOT NULL DEFAULT 'observed',
            issued_at        TIMESTAMPTZ
        )""",
    "portfolios": """
        CREATE TABLE IF NOT EXISTS portfolios (
            portfolio_id  VARCHAR NOT NULL,
            building_id   VARCHAR NOT NULL
        )""",
    "sub_hourly_readings": """
        CREATE TABLE IF NOT EXISTS sub_hourly_readings (
            building_id  VARCHAR NOT NULL,
            ts           TIMESTAMPTZ NOT NULL,
            minutes      INTEGER NOT NULL,
            kwh          DOUBLE
        )""",
    "meter_flags": """
        CREATE TABLE IF NOT EXISTS meter_flags (
            building_id  VARCHAR NOT NULL,
            ts           TIMESTAMPTZ NOT NULL,
            check_name   VARCHAR NOT NULL,
            kwh          DOUBLE,
            flagged_at   TIMESTAMPTZ NOT NULL,
            accepted_at  TIMESTAMPTZ
        )""",
}
"""``weather.kind`` is ``'observed'`` or ``'forecast'``; a (site_id, ts, kind) is unique: one
forecast per site and hour is kept, the latest issue. ``weather.issued_at`` is when that
forecast was issued (NULL for observations). ``portfolios`` holds the operator's named
portfolios, one row per (portfolio, building); the portfolio ``all`` (every building) is not
stored (:mod:`~tasks.warehouse.portfolio_sql`). ``sub_hourly_readings`` keeps the
latest weeks of each building's sub-hourly readings (the energy of each ``minutes``-long
interval starting at ``ts``), from which an export splits an hour's forecast into settlement
periods by the building's own intra-hour shape
(:mod:`~tasks.warehouse.intra_hour`). ``meter_flags`` holds the hours an ingest judged
implausible (``check_name`` 'stuck_high', 'spike' or 'stuck_zero',
:mod:`~tasks.ingest.meter_checks`; ``kwh``
the value judged, ``flagged_at`` when): the reading stays in ``meter_readings`` as it arrived,
but forecasts and scores treat it as missing (the view ``usable_readings``) until
``accepted_at`` is set (``wadiro accept-readings``, :mod:`~tasks.warehouse.meter_flags`)."""

_FORECAST_COLUMNS = """
            building_id  VARCHAR NOT NULL,
            model        VARCHAR NOT NULL,
            target_week  DATE NOT NULL,
            ts           TIMESTAMPTZ NOT NULL,
            y_hat        DOUBLE,
            run_id       VARCHAR NOT NULL,
            y_lo_80      DOUBLE,
            y_hi_80      DOUBLE,
            y_lo_95      DOUBLE,
            y_hi_95      DOUBLE"""
"""The columns of an hourly forecast: ``forecasts``' and, with its issue, ``issued_forecasts``'
(and last, in both, :data:`_QUANTILE_DDL`)."""

_QUANTILE_DDL = "".join(f""",
            {column:<12} DOUBLE""" for column in QUANTILE_COLUMNS)
"""A forecast's quantile columns, added after the first release (so last in each table)."""

QUANTILE_SCORE_COLUMNS: tuple[str, ...] = (
    "pinball_mean",
    *(f"{kind}_{quantile_suffix(level)}" for kind in ("below", "pinball") for level in QUANTILES))
"""The ``scores`` columns of a forecast's quantiles: the mean pinball loss over the levels, each
level's share of hours at or below it, each level's pinball loss."""

RESULT_TABLES: dict[str, str] = {
    "runs": """
        CREATE TABLE IF NOT EXISTS runs (
            run_id            VARCHAR PRIMARY KEY,
            flow              VARCHAR NOT NULL,
            started_at        TIMESTAMPTZ NOT NULL,
            finished_at       TIMESTAMPTZ,
            status            VARCHAR NOT NULL,
            parameters        JSON NOT NULL,
            code_version      VARCHAR NOT NULL,
            n_building_weeks  INTEGER,
            n_ok              INTEGER,
            n_skipped         INTEGER,
            n_failed          INTEGER,
            message           VARCHAR,
            n_learned         INTEGER,
            n_persistence     INTEGER,
            n_degraded        INTEGER,
            n_unpublished     INTEGER,
            target_weeks      VARCHAR,
            degradations      VARCHAR,
            n_held            INTEGER,
            host              VARCHAR,
            pid               INTEGER
        )""",
    "window_status": """
        CREATE TABLE IF NOT EXISTS window_status (
            building_id        VARCHAR NOT NULL,
            target_week        DATE NOT NULL,
            status             VARCHAR NOT NULL,
            reason             VARCHAR,
            n_train_hours      INTEGER,
            n_train_labelled   INTEGER,
            n_test_hours       INTEGER,
            n_test_labelled    INTEGER,
            run_id             VARCHAR NOT NULL,
            n_test_weather_observed  INTEGER,
            n_test_weather_forecast  INTEGER,
            weather_source           VARCHAR,
            compute_time_s           DOUBLE,
            left_out                 VARCHAR,
            n_flagged_hours          INTEGER
        )""",
    "forecasts": f"""
        CREATE TABLE IF NOT EXISTS forecasts ({_FORECAST_COLUMNS}{_QUANTILE_DDL}
        )""",
    "scores": """
        CREATE TABLE IF NOT EXISTS scores (
            building_id         VARCHAR NOT NULL,
            model               VARCHAR NOT NULL,
            target_week         DATE NOT NULL,
            mae                 DOUBLE,
            rmse                DOUBLE,
            mean_actual         DOUBLE,
            n_hours             INTEGER NOT NULL,
            n_violations        INTEGER NOT NULL,
            n_train_violations  INTEGER NOT NULL,
            run_id              VARCHAR NOT NULL,
            coverage_80         DOUBLE,
            coverage_95         DOUBLE,
            width_80            DOUBLE,
            width_95            DOUBLE,""" + ",".join(f"""
            {column:<19} DOUBLE""" for column in QUANTILE_SCORE_COLUMNS) + """
        )""",
    "tuning_trials": """
        CREATE TABLE IF NOT EXISTS tuning_trials (
            building_id   VARCHAR NOT NULL,
            model         VARCHAR NOT NULL,
            target_week   DATE NOT NULL,
            trial         INTEGER NOT NULL,
            params        JSON NOT NULL,
            value         DOUBLE,
            state         VARCHAR NOT NULL,
            duration_s    DOUBLE,
            error         VARCHAR,
            run_id        VARCHAR NOT NULL
        )""",
    "model_fits": """
        CREATE TABLE IF NOT EXISTS model_fits (
            building_id    VARCHAR NOT NULL,
            model          VARCHAR NOT NULL,
            target_week    DATE NOT NULL,
            status         VARCHAR NOT NULL,
            error          VARCHAR,
            params         JSON,
            tuned_week     DATE,
            solver         VARCHAR,
            solver_status  VARCHAR,
            objective      DOUBLE,
            fit_time_s     DOUBLE,
            tuning_time_s  DOUBLE,
            n_train        INTEGER,
            run_id         VARCHAR NOT NULL,
            validation_mae DOUBLE,
            l_eps          DOUBLE,
            l_eps_lower    DOUBLE,
            l_eps_status   VARCHAR,
            oos_bound_kwh  DOUBLE,
            certify_time_s DOUBLE,
            validation_source VARCHAR,
            level_shift    DOUBLE,
            base           VARCHAR
        )""",
    "publications": """
        CREATE TABLE IF NOT EXISTS publications (
            building_id     VARCHAR NOT NULL,
            target_week     DATE NOT NULL,
            model           VARCHAR NOT NULL,
            reason          VARCHAR NOT NULL,
            expected_ratio  DOUBLE,
            run_id          VARCHAR NOT NULL,
            outcome         VARCHAR,
            ensemble_members VARCHAR
        )""",
    "issued_forecasts": f"""
        CREATE TABLE IF NOT EXISTS issued_forecasts ({_FORECAST_COLUMNS},
            issued_at    TIMESTAMPTZ NOT NULL,
            outcome      VARCHAR,
            reason       VARCHAR,
            timezone     VARCHAR{_QUANTILE_DDL}
        )""",
    "validation_errors": """
        CREATE TABLE IF NOT EXISTS validation_errors (
            building_id  VARCHAR NOT NULL,
            target_week  DATE NOT NULL,
            model        VARCHAR NOT NULL,
            ts           TIMESTAMPTZ NOT NULL,
            error        DOUBLE NOT NULL,
            run_id       VARCHAR NOT NULL
        )""",
    "issued_portfolio_forecasts": f"""
        CREATE TABLE IF NOT EXISTS issued_portfolio_forecasts (
            portfolio_id          VARCHAR NOT NULL,
            target_week           DATE NOT NULL,
            ts                    TIMESTAMPTZ NOT NULL,
            y_hat                 DOUBLE,
            y_lo_80               DOUBLE,
            y_hi_80               DOUBLE,
            y_lo_95               DOUBLE,
            y_hi_95               DOUBLE,
            n_buildings           BIGINT NOT NULL,
            n_buildings_expected  BIGINT NOT NULL,
            n_calibration_hours   BIGINT NOT NULL,
            n_record_weeks        BIGINT NOT NULL,
            timezone              VARCHAR,
            run_id                VARCHAR NOT NULL,
            issued_at             TIMESTAMPTZ NOT NULL{_QUANTILE_DDL}
        )""",
    "issued_portfolio_buildings": """
        CREATE TABLE IF NOT EXISTS issued_portfolio_buildings (
            portfolio_id     VARCHAR NOT NULL,
            target_week      DATE NOT NULL,
            run_id           VARCHAR NOT NULL,
            building_id      VARCHAR NOT NULL,
            model            VARCHAR NOT NULL,
            forecast_run_id  VARCHAR NOT NULL
        )""",
}
"""``model_fits.status``: 'ok' | 'failed' | 'skipped'; ``tuned_week`` is the target week whose
tuning produced ``params`` (itself, or an earlier one under ``--tuning reuse``);
``validation_mae`` is the model's error on the validation week, forecast from the weeks before
it; ``validation_source`` says by what: 'tuning' (the best trial), 'refit' (a fit with the reused
hyperparameters) or 'issued' (the forecast the model issued for that week a week earlier with
the same hyperparameters and protocol, under ``--tuning reuse``).
``forecasts.y_lo_80 ... y_hi_95`` are the 80 % and 95 % prediction intervals and
``scores.coverage_*`` / ``width_*`` their share of actuals inside and mean width.
``publications`` holds the one forecast per building-week an operator uses: its model, why it
was chosen, its expected MAE relative to seasonal naive, its ``outcome`` ('learned': a learned
model or a combination of at least two; 'persistence': a persistence forecast chosen over
trusted learned models; 'degraded': a persistence forecast because no learned forecast could be
trusted that week; 'held': whatever was chosen, an order of magnitude off the building's level,
so never bid: :mod:`~tasks.protocol.bid_check`) and ``ensemble_members``, the models the
week's ensemble combined, comma-separated (NULL: no ensemble that week). ``issued_forecasts``
keeps every published forecast as it was issued, a vintage per (building, week, run), never
deleted or rewritten by a later run: ``issued_at`` is when the run wrote it (UTC), ``model``,
``outcome`` and ``reason`` those of its publication, ``timezone`` the building's then (the zone
its bid was exported in); the tables above hold the latest run's rows.
``issued_portfolio_forecasts`` keeps each portfolio's hourly total and bands as a run issued
them, a vintage per (portfolio, week, run), written when the run closes and never rewritten:
the ``portfolio_forecasts`` columns a bid holds, the ``timezone`` its rows are exported in,
``run_id`` and ``issued_at`` (when written, UTC); ``issued_portfolio_buildings`` the buildings
each vintage summed, and the ``model`` and run (``forecast_run_id``) of the published forecast
of each that it summed (:mod:`~tasks.warehouse.portfolio_vintages`).
``window_status.left_out`` names the weather
inputs the window left out of the week's features and why (NULL: none). ``validation_errors``
holds the published model's errors on its validation week (kWh, actual minus the forecast made
from the weeks before it, per UTC hour): with the published forecasts' own errors, what a
portfolio's intervals are calibrated on (:mod:`~tasks.warehouse.portfolios`). The
SCNN family's guarantees (``tasks.protocol.certification``) are in ``model_fits``: ``l_eps``
(kWh, a certified upper bound), ``l_eps_lower`` (kWh, attained), ``l_eps_status`` ('optimal' |
'node_limit' | 'failed: ...'), ``oos_bound_kwh`` and ``certify_time_s``; NULL for other
models, for fits not certified (``--certify published`` certifies the published one) or with
certification off.
``tuning_time_s``, ``fit_time_s`` (the final fit on the whole history) and ``certify_time_s``
are CPU seconds of the worker thread; under joint SCNN tuning the family's shared fits count
where they were solved (a constrained network that took its twin's optimum spent none).
``window_status.n_test_weather_observed`` / ``n_test_weather_forecast`` count the target week's
hours whose weather was an observation / a forecast, ``weather_source`` is 'observed' |
'forecast' | 'mixed' (NULL: neither, or the building-week failed before its window was built);
the week's other hours had their weather filled or missing (``reason`` says).
``window_status.compute_time_s`` is the CPU seconds the protocol spent on the building-week in
its worker (features, tuning, fits, certificates, scoring; not reading or writing the
warehouse), so a run's total CPU minus their sum is what orchestration and storage cost."""

ADDED_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("forecasts", "y_lo_80", "DOUBLE"),
    ("forecasts", "y_hi_80", "DOUBLE"),
    ("forecasts", "y_lo_95", "DOUBLE"),
    ("forecasts", "y_hi_95", "DOUBLE"),
    ("scores", "coverage_80", "DOUBLE"),
    ("scores", "coverage_95", "DOUBLE"),
    ("scores", "width_80", "DOUBLE"),
    ("scores", "width_95", "DOUBLE"),
    ("model_fits", "validation_mae", "DOUBLE"),
    ("model_fits", "l_eps", "DOUBLE"),
    ("model_fits", "l_eps_lower", "DOUBLE"),
    ("model_fits", "l_eps_status", "VARCHAR"),
    ("model_fits", "oos_bound_kwh", "DOUBLE"),
    ("model_fits", "certify_time_s", "DOUBLE"),
    ("model_fits", "validation_source", "VARCHAR"),
    ("weather", "issued_at", "TIMESTAMPTZ"),
    ("window_status", "n_test_weather_observed", "INTEGER"),
    ("window_status", "n_test_weather_forecast", "INTEGER"),
    ("window_status", "weather_source", "VARCHAR"),
    ("window_status", "compute_time_s", "DOUBLE"),
    ("publications", "outcome", "VARCHAR"),
    ("publications", "ensemble_members", "VARCHAR"),
    ("window_status", "left_out", "VARCHAR"),
    ("window_status", "n_flagged_hours", "INTEGER"),
    ("model_fits", "level_shift", "DOUBLE"),
    ("model_fits", "base", "VARCHAR"),
    ("runs", "n_learned", "INTEGER"),
    ("runs", "n_persistence", "INTEGER"),
    ("runs", "n_degraded", "INTEGER"),
    ("runs", "n_unpublished", "INTEGER"),
    ("runs", "target_weeks", "VARCHAR"),
    ("runs", "degradations", "VARCHAR"),
    ("buildings", "floor_area_m2", "DOUBLE"),
    ("runs", "n_held", "INTEGER"),
    ("runs", "host", "VARCHAR"),
    ("runs", "pid", "INTEGER"),
    ("issued_forecasts", "timezone", "VARCHAR"),
    *((table, column, "DOUBLE") for table in ("forecasts", "issued_forecasts")
      for column in QUANTILE_COLUMNS),
    *(("scores", column, "DOUBLE") for column in QUANTILE_SCORE_COLUMNS),
    *(("issued_portfolio_forecasts", column, "DOUBLE") for column in QUANTILE_COLUMNS),
)
"""Columns added after the first release: a warehouse made before gets them on first use
(always appended last, so the table's column order matches the DDL above)."""


_QUANTILE_LIST = ", ".join(f"{{alias}}{column}" for column in QUANTILE_COLUMNS)
"""The quantile columns, as a SQL list (``.format(alias="f.")``)."""

_POOLED_BELOW = ",\n                   ".join(
    f"sum(below_{quantile_suffix(level)} * n_hours) / nullif(sum(n_hours) FILTER (WHERE "
    f"below_{quantile_suffix(level)} IS NOT NULL), 0) AS below_{quantile_suffix(level)}"
    for level in QUANTILES)
"""SQL: each quantile level's share of the scored hours at or below it, pooled over weeks."""

PUBLISHED = "published"
"""The leaderboard's name for the published forecast (whichever model each building-week used)."""


def leaderboard_sql(run_filter: bool = False) -> str:
    """The fleet leaderboard of the paper's Table 3, plus error statistics, one row per model
    and one for the published forecast (a building-week held out of every bid is not in it).

    With ``run_filter`` the scores of one run only (one ``?`` placeholder: its ``run_id``).
    ``mae_vs_naive`` is the model's mean MAE over seasonal naive's on the building-weeks both
    were scored on, ``beats_naive_share`` the share of those where it was better. Violations
    deviation is relative to the learned model with the fewest test violations;
    ``seasonal_naive`` and the published forecast are left out of that comparison, and the
    deviation is NULL when the best model has no violation at all. ``pinball_mean`` is the
    mean over building-weeks of the quantiles' mean pinball loss (kWh), ``pinball_vs_naive``
    the model's over seasonal naive's on the building-weeks both have one, and ``below_q...``
    each quantile level's share of all scored hours at or below it (a calibrated level ``tau``
    holds ``tau``).
    """
    condition = "n_hours > 0" + (" AND run_id = ?" if run_filter else "")
    return f"""
        WITH s AS (SELECT * FROM scores WHERE {condition}),
        scored AS (
            SELECT * FROM s
            UNION ALL BY NAME
            SELECT s.* REPLACE ('{PUBLISHED}' AS model)
            FROM s JOIN publications p USING (building_id, target_week, model)
            WHERE p.outcome IS DISTINCT FROM '{HELD}'
        ),
        naive AS (
            SELECT building_id, target_week, mae AS naive_mae, pinball_mean AS naive_pinball
            FROM s WHERE model = 'seasonal_naive'
        ),
        per_model AS (
            SELECT model,
                   count(*)                              AS n_building_weeks,
                   avg(mae)                              AS mean_mae,
                   median(mae)                           AS median_mae,
                   avg(rmse)                             AS mean_rmse,
                   median(rmse)                          AS median_rmse,
                   avg(rmse / nullif(mean_actual, 0))    AS mean_cv_rmse,
                   sum(mae) FILTER (WHERE naive_mae IS NOT NULL)
                       / nullif(sum(naive_mae), 0)       AS mae_vs_naive,
                   avg(CASE WHEN naive_mae IS NULL THEN NULL
                            WHEN mae < naive_mae THEN 1.0 ELSE 0.0 END) AS beats_naive_share,
                   sum(n_violations)                     AS test_violations,
                   sum(n_train_violations)               AS train_violations,
                   avg(coverage_80)                      AS coverage_80,
                   avg(coverage_95)                      AS coverage_95,
                   avg(pinball_mean)                     AS pinball_mean,
                   sum(pinball_mean) FILTER (WHERE naive_pinball IS NOT NULL)
                       / nullif(sum(naive_pinball) FILTER (WHERE pinball_mean IS NOT NULL), 0)
                                                         AS pinball_vs_naive,
                   {_POOLED_BELOW}
            FROM scored LEFT JOIN naive USING (building_id, target_week)
            GROUP BY model
        )
        SELECT *,
               CASE WHEN model NOT IN ('seasonal_naive', '{PUBLISHED}') THEN
                   100.0 * (test_violations - min(test_violations) FILTER (
                                WHERE model NOT IN ('seasonal_naive', '{PUBLISHED}')) OVER ())
                         / nullif(min(test_violations) FILTER (
                                WHERE model NOT IN ('seasonal_naive', '{PUBLISHED}')) OVER (), 0)
               END                                                AS violations_deviation_pct,
               rank() OVER (ORDER BY mean_mae)                    AS mae_rank
        FROM per_model
        ORDER BY mean_mae"""


QUALITY_WINDOW_HOURS = 12 * 168
"""The recent period ``building_data_quality.missing_share_12w`` covers: 12 weeks of hours."""

FLAT_RUN_ALERT_HOURS = 24
"""A flat line this long (identical non-zero readings, hour after hour) is counted as a likely
meter fault in ``building_data_quality.flat_runs_24h``."""

SPIKE_RATIO = 10
"""A reading above this many times its building's 99th percentile reading is a *spike*, far
outside the building's own history (``building_data_quality.spike_readings``). No building of
the synthetic fleet has one (its outliers reach 5 times the load); in the real Cambridge
archive three buildings do (b95: 1,018.9 kWh where 99 % of its hours read at most 14 kWh)."""

HIGH_RATIO = 3
"""A reading above this many times its building's 99th percentile is *high*: far above the
building's own level, if short of a spike. ``building_data_quality`` counts high hours and the
runs of :data:`HIGH_RUN_HOURS` or more consecutive ones (a meter stuck high or spiking for hours,
not one odd reading). In the real archive (107 buildings with readings, 2016-2020) 14 buildings
have a high hour and one (b91) a run of them."""

HIGH_RUN_HOURS = 2
"""Consecutive high hours that make a *high run* (``building_data_quality.high_runs``)."""

STUCK_RATIO = 2
STUCK_RUN_HOURS = 3
"""A run of :data:`STUCK_RUN_HOURS` or more identical consecutive readings above
:data:`STUCK_RATIO` times the building's 99th percentile is a meter *stuck high*
(``building_data_quality.stuck_high_runs``): flat runs of 3 hours are common at a building's
ordinary level (106 of the archive's 107 buildings have some; 21 above their 99th
percentile), none above twice it."""


_NOT_FUTURE = "ts <= now() + INTERVAL 1 DAY"
"""A reading dated more than a day after now (a meter clock or a file with a wrong year) is not
the fleet's latest hour: it would make every building look silent."""


def data_quality_sql(selected: bool = False) -> str:
    """One row per building of ``buildings`` (those without any reading too): how complete and
    how plausible its stored meter readings are. Gaps and runs are found with window functions
    over the readings in time order (gaps and islands): one sort of ``meter_readings`` by
    building and hour; only the few readings that repeat their predecessor are sorted again.

    A *reading* is a ``meter_readings`` row with a non-NULL ``kwh``; an hour is *missing* when
    its row holds NULL or there is no row for it. The *reference hour* is the latest reading of
    the whole warehouse (every building), so a building that stopped reporting shows as missing
    up to it; a reading dated more than a day after now is not the reference. Columns:

    * ``first_reading``, ``last_reading``: the hours (UTC, start) of the building's first and
      last reading; NULL without any.
    * ``readings``: how many hours have a reading.
    * ``future_readings``: readings dated more than a day after now (a meter clock or a file
      with a wrong year, e.g. 9999: the reference hour leaves them out, so one wrong year does
      not make the fleet look silent, and so do the gap and recency columns below).
    * ``missing_hours``: hours without a reading between the first and the last reading not in
      the future.
    * ``hours_since_last_reading``: hours from the building's last reading not in the future to
      the reference hour (0: up to date; never negative; NULL without any such reading).
    * ``missing_share_12w``: the share (0 to 1) of the 12 weeks (2,016 hours) ending at the
      reference hour, inclusive, that have no reading (hours before a building's first reading
      count too); the period starts no earlier than the warehouse's first reading when the
      warehouse holds less. 1 for a building without readings; NULL when the warehouse holds
      none at all.
    * ``longest_gap_hours``, ``longest_gap_start``: the longest run of consecutive missing
      hours between the first and the last reading not in the future, and its first hour (the
      earliest of equal ones); 0 and NULL without a gap, NULL and NULL without readings.
    * ``longest_flat_hours``: the longest run of consecutive hours with the same non-zero
      reading (2 hours or more; 0 when no two consecutive readings are equal), a stuck meter or
      a filled-in value.
    * ``flat_runs_24h``: how many such runs last at least 24 hours.
    * ``zero_readings``, ``longest_zero_hours``: hours reading exactly 0, and the longest run of
      consecutive ones (a meter reporting nothing, or a building switched off).
    * ``negative_readings``, ``longest_negative_hours``: hours reading below 0, and the longest
      run of consecutive ones. The ingest stores none (it refuses them, or stores them as
      missing with ``--implausible missing``); older warehouses and rows written by other tools
      may hold some.
    * ``spike_readings``: hours reading more than :data:`SPIKE_RATIO` times the building's own
      99th percentile reading (``quantile_disc``), a value far outside its history (a 999,999
      kWh hour of a building using 72 kWh an hour); ``largest_reading``: its largest reading
      (NULL without any).
    * ``high_readings``: hours reading more than :data:`HIGH_RATIO` times the 99th percentile
      (spikes included); ``high_runs``: runs of :data:`HIGH_RUN_HOURS` or more consecutive
      high hours; ``longest_high_hours``: the longest run of consecutive high hours (1 for a
      lone one, 0 without any).
    * ``stuck_high_runs``: runs of :data:`STUCK_RUN_HOURS` or more identical consecutive
      readings above :data:`STUCK_RATIO` times the 99th percentile (a meter stuck high: a
      3-hour run at 5.6 times it is a high run and a stuck one).

    Runs are of consecutive *hours*: a missing hour ends a run. With ``selected`` only the
    buildings listed in one ``?`` placeholder (a list of ids); the reference hour stays the
    whole warehouse's.
    """
    only = " AND building_id IN (SELECT unnest(?::VARCHAR[]))" if selected else ""
    their_readings = " AND building_id IN (SELECT building_id FROM selection)" if selected else ""
    return f"""
        WITH selection AS (
            SELECT building_id FROM buildings WHERE true{only}
        ),
        fleet AS (
            SELECT max(ts) AS reference_ts,
                   greatest(min(ts), max(ts) - INTERVAL {QUALITY_WINDOW_HOURS - 1} HOUR)
                       AS window_start
            FROM meter_readings WHERE kwh IS NOT NULL AND {_NOT_FUTURE}
        ),
        ordered AS (
            SELECT building_id, ts, kwh,
                   lag(ts) OVER w AS prev_ts,
                   lag(kwh) OVER w AS prev_kwh,
                   quantile_disc(kwh, 0.99) OVER (PARTITION BY building_id) AS p99
            FROM meter_readings
            WHERE kwh IS NOT NULL{their_readings}
            WINDOW w AS (PARTITION BY building_id ORDER BY ts)
        ),
        stepped AS (
            SELECT building_id, ts, kwh, prev_ts, p99,
                   greatest(CAST(round((epoch(ts) - epoch(prev_ts)) / 3600) AS BIGINT) - 1, 0)
                       AS gap_before,
                   epoch(ts) - epoch(prev_ts) = 3600 AS follows,
                   prev_kwh
            FROM ordered
        ),
        per_building AS (
            SELECT building_id,
                   min(ts)                                  AS first_reading,
                   max(ts)                                  AS last_reading,
                   max(ts) FILTER (WHERE {_NOT_FUTURE})     AS last_present_reading,
                   count(*)                                 AS readings,
                   CAST(coalesce(sum(gap_before) FILTER (WHERE {_NOT_FUTURE}), 0) AS BIGINT)
                                                            AS missing_hours,
                   coalesce(max(gap_before) FILTER (WHERE {_NOT_FUTURE}), 0)
                                                            AS longest_gap_hours,
                   arg_max(prev_ts + INTERVAL 1 HOUR, (gap_before, -epoch(prev_ts)))
                       FILTER (WHERE gap_before > 0 AND {_NOT_FUTURE})
                                                            AS longest_gap_start,
                   count(*) FILTER (WHERE ts >= (SELECT window_start FROM fleet)
                                    AND ts <= (SELECT reference_ts FROM fleet))
                                                            AS recent_readings,
                   count(*) FILTER (WHERE kwh = 0)          AS zero_readings,
                   count(*) FILTER (WHERE kwh < 0)          AS negative_readings,
                   max(kwh)                                 AS largest_reading,
                   count(*) FILTER (WHERE kwh > {SPIKE_RATIO} * p99)
                                                            AS spike_readings,
                   count(*) FILTER (WHERE kwh > {HIGH_RATIO} * p99)
                                                            AS high_readings,
                   count(*) FILTER (WHERE NOT {_NOT_FUTURE}) AS future_readings
            FROM stepped
            GROUP BY building_id
        ),
        -- A run of n equal (or n negative) readings in consecutive hours is one first hour and
        -- n - 1 *continuations*; the continuations of one run are consecutive hours, and those
        -- of two runs never are. So the runs are the islands of consecutive continuation hours,
        -- few rows on real meters: only those are numbered.
        continuations AS (
            SELECT building_id, ts, kwh, p99,
                   follows AND kwh = prev_kwh AS repeats,
                   follows AND kwh < 0 AND prev_kwh < 0 AS stays_negative
            FROM stepped
            WHERE follows AND (kwh = prev_kwh OR (kwh < 0 AND prev_kwh < 0))
        ),
        value_runs AS (
            SELECT building_id, any_value(kwh) AS kwh, any_value(p99) AS p99,
                   count(*) + 1 AS hours
            FROM (SELECT building_id, ts, kwh, p99,
                         CAST(epoch(ts) / 3600 AS BIGINT)
                             - row_number() OVER (PARTITION BY building_id ORDER BY ts) AS island
                  FROM continuations WHERE repeats)
            GROUP BY building_id, island
        ),
        negative_runs AS (
            SELECT building_id, count(*) + 1 AS hours
            FROM (SELECT building_id, ts,
                         CAST(epoch(ts) / 3600 AS BIGINT)
                             - row_number() OVER (PARTITION BY building_id ORDER BY ts) AS island
                  FROM continuations WHERE stays_negative)
            GROUP BY building_id, island
        ),
        value_stats AS (
            SELECT building_id,
                   max(hours) FILTER (WHERE kwh <> 0)                   AS longest_flat_hours,
                   count(*) FILTER (WHERE kwh <> 0 AND hours >= {FLAT_RUN_ALERT_HOURS})
                                                                        AS flat_runs_24h,
                   max(hours) FILTER (WHERE kwh = 0)                    AS longest_zero_run,
                   count(*) FILTER (WHERE kwh > {STUCK_RATIO} * p99
                                    AND hours >= {STUCK_RUN_HOURS})     AS stuck_high_runs
            FROM value_runs
            GROUP BY building_id
        ),
        -- High hours are rare too: only they are numbered into runs.
        high_runs AS (
            SELECT building_id, count(*) AS hours
            FROM (SELECT building_id,
                         CAST(epoch(ts) / 3600 AS BIGINT)
                             - row_number() OVER (PARTITION BY building_id ORDER BY ts) AS island
                  FROM stepped WHERE kwh > {HIGH_RATIO} * p99)
            GROUP BY building_id, island
        ),
        high_stats AS (
            SELECT building_id, max(hours) AS longest_high_run,
                   count(*) FILTER (WHERE hours >= {HIGH_RUN_HOURS}) AS high_run_count
            FROM high_runs
            GROUP BY building_id
        ),
        negative_stats AS (
            SELECT building_id, max(hours) AS longest_negative_run
            FROM negative_runs
            GROUP BY building_id
        )
        SELECT b.building_id,
               p.first_reading,
               p.last_reading,
               coalesce(p.readings, 0)                                  AS readings,
               p.missing_hours,
               CAST(round((epoch(f.reference_ts) - epoch(p.last_present_reading)) / 3600)
                    AS BIGINT)                                          AS hours_since_last_reading,
               1.0 - coalesce(p.recent_readings, 0)
                   / ((epoch(f.reference_ts) - epoch(f.window_start)) / 3600 + 1)
                                                                        AS missing_share_12w,
               p.longest_gap_hours,
               p.longest_gap_start,
               coalesce(v.longest_flat_hours, 0)                        AS longest_flat_hours,
               coalesce(v.flat_runs_24h, 0)                             AS flat_runs_24h,
               coalesce(p.zero_readings, 0)                             AS zero_readings,
               coalesce(v.longest_zero_run, CASE WHEN p.zero_readings > 0 THEN 1 ELSE 0 END)
                                                                        AS longest_zero_hours,
               coalesce(p.negative_readings, 0)                         AS negative_readings,
               coalesce(n.longest_negative_run,
                        CASE WHEN p.negative_readings > 0 THEN 1 ELSE 0 END)
                                                                        AS longest_negative_hours,
               coalesce(p.high_readings, 0)                             AS high_readings,
               coalesce(h.high_run_count, 0)                            AS high_runs,
               coalesce(h.longest_high_run, 0)                          AS longest_high_hours,
               coalesce(v.stuck_high_runs, 0)                           AS stuck_high_runs,
               coalesce(p.future_readings, 0)                           AS future_readings,
               coalesce(p.spike_readings, 0)                            AS spike_readings,
               p.largest_reading
        FROM selection b
        CROSS JOIN fleet f
        LEFT JOIN per_building p USING (building_id)
        LEFT JOIN value_stats v USING (building_id)
        LEFT JOIN negative_stats n USING (building_id)
        LEFT JOIN high_stats h USING (building_id)"""


VIEWS: dict[str, str] = {
    # The readings forecasts and scores use: meter_readings less the flagged hours not accepted.
    "usable_readings": f"CREATE OR REPLACE VIEW usable_readings AS SELECT * FROM {USABLE_READINGS}",
    # One row per model over every stored score.
    "leaderboard": f"CREATE OR REPLACE VIEW leaderboard AS {leaderboard_sql()}",
    # Every hour of every forecast that breaks y_hat >= 0, with the actual beside it.
    "violations": f"""
        CREATE OR REPLACE VIEW violations AS
        SELECT f.building_id, f.model, f.target_week, f.ts, f.y_hat, m.kwh AS actual_kwh, f.run_id
        FROM forecasts f
        LEFT JOIN {USABLE_READINGS} m USING (building_id, ts)
        WHERE f.y_hat < -{VIOLATION_TOLERANCE_KWH}""",
    # The one forecast per building-week an operator uses, with its intervals and model.
    "published_forecasts": f"""
        CREATE OR REPLACE VIEW published_forecasts AS
        SELECT f.building_id, f.target_week, f.ts, p.model, f.y_hat,
               f.y_lo_80, f.y_hi_80, f.y_lo_95, f.y_hi_95, p.reason, p.run_id, p.outcome,
               {_QUANTILE_LIST.format(alias="f.")}
        FROM publications p
        JOIN forecasts f USING (building_id, target_week, model)""",
    # Every vintage of every published forecast, scored against the readings stored now:
    # "as bid" (vintage 1) beside "as re-forecast" (later vintages).
    "vintage_scores": f"""
        CREATE OR REPLACE VIEW vintage_scores AS
        SELECT *, row_number() OVER (PARTITION BY building_id, target_week
                                     ORDER BY issued_at, run_id) AS vintage
        FROM (SELECT i.building_id, i.target_week, i.run_id, i.issued_at, i.model, i.outcome,
                     count(m.kwh)                      AS n_hours,
                     avg(abs(i.y_hat - m.kwh))          AS mae,
                     sqrt(avg((i.y_hat - m.kwh) ^ 2))   AS rmse,
                     {quantile_scores_sql("m.kwh", "i.", mean="avg")}
              FROM issued_forecasts i
              LEFT JOIN {USABLE_READINGS} m USING (building_id, ts)
              GROUP BY ALL)""",
    # Forecasts beside actuals, for plots and ad-hoc error analysis.
    "forecast_vs_actual": f"""
        CREATE OR REPLACE VIEW forecast_vs_actual AS
        SELECT f.building_id, f.model, f.target_week, f.ts, f.y_hat, m.kwh AS actual_kwh,
               f.y_hat - m.kwh AS error
        FROM forecasts f
        LEFT JOIN {USABLE_READINGS} m USING (building_id, ts)""",
    # Per building and model: errors normalised by the building's mean load (ASHRAE style).
    "building_errors": """
        CREATE OR REPLACE VIEW building_errors AS
        SELECT building_id, model,
               count(*)                                           AS n_weeks,
               avg(mae)                                           AS mean_mae,
               avg(rmse)                                          AS mean_rmse,
               sum(mae * n_hours) / nullif(sum(mean_actual * n_hours), 0) AS nmae,
               sqrt(sum(rmse * rmse * n_hours) / nullif(sum(n_hours), 0))
                   / nullif(sum(mean_actual * n_hours) / nullif(sum(n_hours), 0), 0) AS cv_rmse,
               sum(n_violations)                                  AS test_violations
        FROM scores
        WHERE n_hours > 0
        GROUP BY building_id, model""",
    # Per building: first and last reading, gaps, recent missing share, flat, zero and
    # negative runs (data_quality_sql's docstring defines every column).
    "building_data_quality": "CREATE OR REPLACE VIEW building_data_quality AS "
                             f"{data_quality_sql()}",
    # Portfolios: ``all`` and the named ones, their hourly forecasts with intervals from their
    # joint errors, and their scores (portfolio_sql's docstrings define every column).
    "portfolio_members": f"CREATE OR REPLACE VIEW portfolio_members AS {portfolio_members_sql()}",
    "portfolio_forecasts": "CREATE OR REPLACE VIEW portfolio_forecasts AS "
                           f"{portfolio_forecasts_sql()}",
    "portfolio_scores": f"CREATE OR REPLACE VIEW portfolio_scores AS {portfolio_scores_sql()}",
    # Every portfolio vintage scored against its buildings' readings stored now.
    "portfolio_vintage_scores": "CREATE OR REPLACE VIEW portfolio_vintage_scores AS "
                                f"{portfolio_vintage_scores_sql()}",
}

MACROS: dict[str, str] = {
    # What was published at a time: per building-week, the latest vintage issued at or before
    # ``as_of`` (SELECT * FROM published_as_of(TIMESTAMPTZ '2024-10-28 06:00+00')).
    "published_as_of": f"""
        CREATE OR REPLACE MACRO published_as_of(as_of) AS TABLE
        SELECT building_id, target_week, ts, model, y_hat, y_lo_80, y_hi_80, y_lo_95, y_hi_95,
               reason, run_id, issued_at, outcome, timezone, {_QUANTILE_LIST.format(alias="")}
        FROM issued_forecasts
        WHERE issued_at <= as_of
        QUALIFY dense_rank() OVER (PARTITION BY building_id, target_week
                                   ORDER BY issued_at DESC, run_id DESC) = 1""",
    # What a portfolio's bid was at a time: per portfolio-week, the latest vintage issued at or
    # before ``as_of`` (SELECT * FROM portfolio_as_of(TIMESTAMPTZ '2024-10-28 06:00+00')).
    "portfolio_as_of": "CREATE OR REPLACE MACRO portfolio_as_of(as_of) AS TABLE "
                       f"{portfolio_as_of_sql()}",
}

TABLES: dict[str, str] = {**INPUT_TABLES, **RESULT_TABLES}
"""Every table of the warehouse, name -> ``CREATE TABLE IF NOT EXISTS`` statement."""


SCHEMA_FINGERPRINT = "wadiro schema " + hashlib.sha256("\n".join(
    [*TABLES.values(), *(" ".join(added) for added in ADDED_COLUMNS), *VIEWS.values(),
     *MACROS.values()]).encode()).hexdigest()[:16]
"""What :func:`ensure_schema` made, as the comment of the last view it (re)creates: any
release's :func:`ensure_schema` replaces that view and so drops the comment."""

_MARKED_VIEW = list(VIEWS)[-1]


def ensure_schema(con: duckdb.DuckDBPyConnection) -> None:
    """Create every table, add the columns a warehouse made by an earlier release lacks, and
    (re)create the views; repeatable. A warehouse whose schema this release made is left as
    it is (its view carries :data:`SCHEMA_FINGERPRINT`): binding the views takes ~50 ms, paid
    by every command that writes."""
    marked = con.execute("SELECT comment FROM duckdb_views() WHERE view_name = ? AND "
                         "schema_name = current_schema()", [_MARKED_VIEW]).fetchall()
    if marked == [(SCHEMA_FINGERPRINT,)]:
        return
    for statement in TABLES.values():
        con.execute(statement)
    for table, column, kind in ADDED_COLUMNS:
        con.execute(f"ALTER TABLE {table} ADD COLUMN IF NOT EXISTS {column} {kind}")
    for statement in (*VIEWS.values(), *MACROS.values()):
        con.execute(statement)
    con.execute(f"COMMENT ON VIEW {_MARKED_VIEW} IS '{SCHEMA_FINGERPRINT}'")
