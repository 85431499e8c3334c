"""SQL of a forecast distribution's scores: each quantile's calibration and pinball loss.

The same numbers as :func:`~tasks.protocol.scoring.score_forecast` computes for a building's
forecast in Python, for the views that score in SQL (a building's vintages, a portfolio's
total and its vintages): per level tau, the share of scored hours whose actual is at or below
the quantile (``below_q...``), the mean pinball loss (``pinball_q...``: tau times the shortfall
where the actual is above the quantile, 1 - tau times the excess where below), and the mean of
the levels' losses (``pinball_mean``).
"""

from __future__ import annotations

from collections.abc import Callable

from tasks.protocol.intervals import QUANTILES, quantile_name, quantile_suffix


def quantile_scores_sql(actual: str, alias: str = "", scored: str = "true",
                        mean: str | Callable[[str], str] = "favg") -> str:
    """SQL select items (aggregates) scoring the quantile columns of ``alias`` (e.g. ``"v."``)
    against ``actual`` over the rows where ``scored`` holds and both are known; ``mean`` is the
    averaging aggregate (``favg``: exact floating-point sums), or a function that writes the
    mean of an SQL expression (the rescoring's exact decimal mean)."""
    average = (lambda value: f"{mean}({value})") if isinstance(mean, str) else mean
    items, losses = [], []
    for level in QUANTILES:
        q, suffix = f"{alias}{quantile_name(level)}", quantile_suffix(level)
        known = f"({scored}) AND {actual} IS NOT NULL AND {q} IS NOT NULL"
        miss = f"({actual} - {q})"
        loss = (f"{average(f'greatest({level!r} * {miss}, ({level!r} - 1) * {miss})')} "
                f"FILTER (WHERE {known})")
        items.append(f"{average(f'CASE WHEN {actual} <= {q} THEN 1.0 ELSE 0.0 END')} "
                     f"FILTER (WHERE {known}) AS below_{suffix}")
        items.append(f"{loss} AS pinball_{suffix}")
        losses.append(loss)
    items.append(f"({' + '.join(losses)}) / {len(losses)} AS pinball_mean")
    return ",\n               ".join(items)
