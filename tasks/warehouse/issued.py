"""What a run issued, as an operator reads it on the morning of a weekly run: each building's
published forecast of the coming week, and how each model did on the week just past (its
validation week, known when the forecast was issued) -- before any of the coming week's readings
exist to score it."""

from __future__ import annotations

import duckdb
import pandas as pd

_PUBLISHED = """
    SELECT p.building_id, p.target_week, p.model, p.expected_ratio,
           sum(f.y_hat) AS week_kwh, max(f.y_hat) AS peak_kwh,
           avg(f.y_hi_80 - f.y_lo_80) AS mean_width_80, count(f.y_hat) AS hours
    FROM publications p
    JOIN forecasts f USING (building_id, target_week, model, run_id)
    WHERE p.run_id = ?
    GROUP BY ALL ORDER BY p.building_id, p.target_week
"""

_VALIDATION = """
    WITH naive AS (
        SELECT building_id, target_week, validation_mae AS naive_mae FROM model_fits
        WHERE run_id = ? AND model = 'seasonal_naive' AND validation_mae > 0)
    SELECT m.model, count(*) AS building_weeks,
           sum(m.validation_mae) / sum(n.naive_mae) AS mae_vs_naive,
           avg((m.validation_mae < n.naive_mae)::INT) AS beats_naive_share,
           count(*) FILTER (WHERE p.model = m.model) AS published
    FROM model_fits m
    JOIN naive n USING (building_id, target_week)
    LEFT JOIN publications p ON p.building_id = m.building_id
        AND p.target_week = m.target_week AND p.run_id = m.run_id
    WHERE m.run_id = ? AND m.status = 'ok' AND m.validation_mae IS NOT NULL
    GROUP BY m.model ORDER BY mae_vs_naive
"""


def published_summary(con: duckdb.DuckDBPyConnection, run_id: str) -> pd.DataFrame:
    """Per building-week of the run: the published model, its expected MAE relative to
    seasonal naive, the week's forecast energy and peak hour (kWh), the 80 % interval's mean
    width (kWh) and the hours forecast."""
    return con.execute(_PUBLISHED, [run_id]).df()


def validation_leaderboard(con: duckdb.DuckDBPyConnection, run_id: str) -> pd.DataFrame:
    """Per model of the run: its MAE on the validation week relative to seasonal naive's, the
    share of building-weeks where it was better, and how many it was published for."""
    return con.execute(_VALIDATION, [run_id, run_id]).df()
