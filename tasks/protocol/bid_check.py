"""The last check before a building-week is bid: is its forecast's level one the building can have?

Whatever model was chosen, a forecast an order of magnitude off what is known of the building
comes from an input or a fit gone wrong (a Wh register read as kWh, a week of zeros, a solver
astray), never from the building: it is *held* (:data:`~tasks.protocol.publication.HELD`),
stored with its reason but left out of every portfolio and export, and the run exits
non-zero. The forecast's level (its mean hourly kWh) is judged
(:mod:`~tasks.protocol.plausible_level`, a factor of ten either way) against

* the building's declared size and type, when the operator declared them (whatever its
  history: a history stored a thousand times too high agrees with a forecast that is too);
* its own usable history before the week, when it has at least :data:`NEW_BUILDING_HOURS` of
  it: the range of its days' mean hourly kWh (:data:`DAY_QUANTILES`), so that a day or two
  stored wrong (or stuck at zero) cannot move the yardstick, and a building's own seasons
  (a term after a quiet summer) are within it;
* the fleet, for a new building (less history) that declared nothing.
"""

from __future__ import annotations

from datetime import date

import numpy as np
import pandas as pd

from tasks.protocol.features import LABEL, TS
from tasks.protocol.plausible_level import Yardstick
from tasks.protocol.weeks import local_midnight_utc

NEW_BUILDING_HOURS = 4 * 168
"""A building with fewer usable hours than this (four weeks) in the history before a week is
new: its forecast is judged against its declared size, or the fleet."""

MIN_DAY_HOURS = 12
"""A day's mean counts towards the history's range when it has at least this many readings."""

DAY_QUANTILES = (0.05, 0.95)
"""The history's range: these quantiles of its days' mean hourly kWh. On the 110 Cambridge
buildings' 19,710 building-weeks of 2016-2020 with four weeks of history or more, last week's
load (the persistence forecast) is never ten times beyond them, where against the median day
it was 19 times (term starting after a summer at a tenth of the load, a lockdown's weeks): a
building's own seasons are not an order of magnitude off."""


def _history(hours: pd.DataFrame, week: date, timezone: str,
             history_weeks: int) -> tuple[pd.DatetimeIndex, np.ndarray]:
    """The instants (UTC) and kWh of the usable readings of the ``history_weeks`` before
    ``week``."""
    start = local_midnight_utc(week, timezone)
    ts = pd.DatetimeIndex(hours[TS]).tz_convert("UTC")
    kwh = hours[LABEL].to_numpy(dtype=np.float64)
    keep = (ts >= start - pd.Timedelta(weeks=history_weeks)) & (ts < start) & np.isfinite(kwh)
    return ts[keep], kwh[keep]


def history_hours(hours: pd.DataFrame, week: date, timezone: str, history_weeks: int) -> int:
    """The building's usable readings in the ``history_weeks`` weeks before ``week``."""
    return int(_history(hours, week, timezone, history_weeks)[1].size)


def history_range(hours: pd.DataFrame, week: date, timezone: str,
                  history_weeks: int) -> tuple[Yardstick | None, int]:
    """The building's range before ``week``: the :data:`DAY_QUANTILES` of its days' mean
    hourly kWh over the ``history_weeks`` weeks before it (days of :data:`MIN_DAY_HOURS`
    readings or more; ``None`` without such a day, or when every day is at zero), and its
    usable hours there."""
    ts, kwh = _history(hours, week, timezone, history_weeks)
    if not kwh.size:
        return None, 0
    days = pd.Series(kwh).groupby(ts.tz_convert(timezone).date)
    means = days.mean()[days.count() >= MIN_DAY_HOURS].to_numpy()
    if not means.size or means.max() <= 0:
        return None, int(kwh.size)
    low, high = (float(q) for q in np.quantile(means, DAY_QUANTILES))
    return Yardstick(low, high, f"its own usable history (its days' {DAY_QUANTILES[0]:.0%} to "
                                f"{DAY_QUANTILES[1]:.0%} quantiles)"), int(kwh.size)


def bid_problem(y_hat: np.ndarray | None, *, history: Yardstick | None, history_hours: int,
                declared: Yardstick | None, fleet: Yardstick | None) -> str | None:
    """Why a forecast (hourly kWh) cannot be bid, or ``None``: its mean hourly kWh judged
    against the building's declared size, its history (:func:`history_range`, over
    ``history_hours`` usable hours) or, for a new building, the fleet (module docstring)."""
    if y_hat is None or not np.isfinite(y_hat).any():
        return None
    level = float(np.nanmean(y_hat))
    own = history if history_hours >= NEW_BUILDING_HOURS else None
    checks = [declared, own] if declared is not None else [own or fleet]
    for yardstick in checks:
        why = yardstick.judge(level, "its forecast's mean") if yardstick is not None else None
        if why is not None:
            return why
    return None
