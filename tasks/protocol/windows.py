"""Training/validation/test windows of the forecasting protocol for one target week.

A target week W is a LOCAL week: from Monday 00:00 to the next Monday 00:00 in the building's
time zone (DESIGN.md). It therefore holds 168 hourly rows, or 167 when it contains the spring
clock change and 169 when it contains the autumn one. The history is the ``history_weeks``
local weeks just before W (ending at W's local Monday 00:00); its last week validates the
hyperparameters fitted on the weeks before it (the paper's sliding-window split).

Rules applied here, all counted in :class:`PartCoverage`:

* labels (``kwh``) are never imputed: an hour without a reading is left out of fitting and
  of scoring;
* a weather gap of at most ``max_weather_gap_hours`` consecutive hours with values on both
  sides is filled by linear interpolation (weather is smooth at that scale; a longer gap
  stays missing in the history);
* in the target week, weather still missing after that (up to half the week) is filled from
  the daily profile of the last seven days: each hour takes the mean of the same local hour
  of day (``PartCoverage.weather_filled`` counts every filled hour, and the window's reason
  says how many test hours were filled);
* history hours with a missing feature are dropped;
* the test week is forecastable only when enough of its hours have every feature, else its
  status is ``no_weather`` (a weather column is missing) or ``incomplete_features``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, timedelta
from enum import StrEnum
from types import MappingProxyType

import numpy as np
import pandas as pd
from wadiro_fleet.tasks.errors import PipelineError
from wadiro_fleet.tasks.protocol.features import (
    CHANGE_SUFFIX,
    DAY_TYPE_PERSISTENCE,
    DEFAULT_FEATURE_SET,
    LABEL,
    PERSISTENCE,
    TS,
    UNLIKE_LAST_WEEK,
    WEATHER_COLUMNS,
    FeatureSet,
    get_feature_set,
)
from wadiro_fleet.tasks.protocol.weeks import (
    WeekLike,
    as_monday,
    local_midnight_utc,
    resolve_timezone,
    same_local_hour_weeks_before,
)

PARTS: tuple[str, ...] = ("train", "fit", "validation", "test")
"""Window parts: ``train`` is the whole history = ``fit`` + ``validation``; ``test`` is W."""


TEST_WEATHER_PROFILE_MAX_HOURS = 84
"""At most this many target-week hours without weather are filled from the last days' profile
(half a week); a week missing more has status ``no_weather``."""


class WindowInputError(PipelineError, ValueError):
    """The hourly frame given to :func:`build_window` cannot be used as it is."""


class WindowStatus(StrEnum):
    """Whether a window can be fitted and forecast; anything but ``ok`` is skipped."""

    OK = "ok"
    INSUFFICIENT_DATA = "insufficient_data"
    NO_WEATHER = "no_weather"
    INCOMPLETE_FEATURES = "incomplete_features"


@dataclass(frozen=True)
class WindowBounds:
    """UTC instants bounding the parts: history [history_start, test_start), fit up to
    validation_start, test [test_start, test_end)."""

    history_start: pd.Timestamp
    validation_start: pd.Timestamp
    test_start: pd.Timestamp
    test_end: pd.Timestamp

    def part(self, name: str) -> tuple[pd.Timestamp, pd.Timestamp]:
        """``[start, end)`` of a part named in :data:`PARTS`."""
        spans = {
            "train": (self.history_start, self.test_start),
            "fit": (self.history_start, self.validation_start),
            "validation": (self.validation_start, self.test_start),
            "test": (self.test_start, self.test_end),
        }
        return spans[name]


@dataclass(frozen=True)
class PartCoverage:
    """Hour counts of one window part.

    ``usable`` hours have a reading and every feature: they are the rows fitted on (history
    parts) or scored (test). ``weather_filled`` hours had weather interpolated over a short gap.
    """

    hours: int
    labelled: int
    complete_features: int
    usable: int
    weather_filled: int


@dataclass(frozen=True, eq=False)
class Window:
    """One (building, target week) window of the protocol.

    ``train``, ``fit`` and ``validation`` hold only usable rows (reading and every feature
    present); ``test`` holds every hour of W, with NaN ``kwh`` where there is no reading (and
    NaN features where they are missing, which only happens when ``status`` is not ``ok``);
    ``history`` holds every hour before W, usable or not. Frames have ``ts`` (UTC), the feature
    columns in order, then ``kwh`` and, when the load was given, ``kwh_persistence``.
    """

    week: date
    timezone: str
    feature_set: str
    feature_columns: tuple[str, ...]
    bounds: WindowBounds
    train: pd.DataFrame
    fit: pd.DataFrame
    validation: pd.DataFrame
    test: pd.DataFrame
    history: pd.DataFrame
    coverage: Mapping[str, PartCoverage]
    status: WindowStatus
    reason: str

    @property
    def ok(self) -> bool:
        return self.status is WindowStatus.OK

    def xy(self, part: str) -> tuple[np.ndarray, np.ndarray]:
        """Feature matrix and label vector (float64) of a part named in :data:`PARTS`."""
        if part not in PARTS:
            raise ValueError(f"unknown window part {part!r}; parts are {PARTS}")
        frame: pd.DataFrame = getattr(self, part)
        x = frame[list(self.feature_columns)].to_numpy(dtype=np.float64)
        y = frame[LABEL].to_numpy(dtype=np.float64)
        return x, y


# --- bounds ------------------------------------------------------------------------------

def window_bounds(
    week: WeekLike, timezone: str, *, history_weeks: int = 12
) -> WindowBounds:
    """Bounds of every part of the window of target week ``week`` (all at local midnights)."""
    if history_weeks < 2:
        raise ValueError(
            f"history_weeks must be at least 2 (fit + validation), got {history_weeks}"
        )
    monday = as_monday(week)
    return WindowBounds(
        history_start=local_midnight_utc(monday - timedelta(weeks=history_weeks), timezone),
        validation_start=local_midnight_utc(monday - timedelta(weeks=1), timezone),
        test_start=local_midnight_utc(monday, timezone),
        test_end=local_midnight_utc(monday + timedelta(weeks=1), timezone),
    )


def window_load_range(
    week: WeekLike,
    timezone: str,
    *,
    history_weeks: int = 12,
    feature_set: str | FeatureSet = DEFAULT_FEATURE_SET,
) -> tuple[pd.Timestamp, pd.Timestamp]:
    """UTC range of hours to load so that every feature of the window can be computed
    (the history plus the feature set's lookback, through the end of W)."""
    bounds = window_bounds(week, timezone, history_weeks=history_weeks)
    return bounds.history_start - get_feature_set(feature_set).lookback, bounds.test_end


# --- the window --------------------------------------------------------------------------

def _on_grid(hours: pd.DataFrame, columns: list[str], bounds: WindowBounds) -> pd.DataFrame:
    """``hours`` restricted to the window and put on its complete hourly grid."""
    if TS not in hours.columns:
        raise WindowInputError(f"hourly frame has no {TS!r} column")
    if not isinstance(hours[TS].dtype, pd.DatetimeTZDtype):
        raise WindowInputError(f"column {TS!r} must be time-zone aware, got {hours[TS].dtype}")
    missing = [col for col in columns if col not in hours.columns]
    if missing:
        raise WindowInputError(
            f"hourly frame lacks columns {missing}; build it with the same feature set"
        )
    ts = pd.DatetimeIndex(hours[TS]).tz_convert("UTC").as_unit("us")
    if ts.has_duplicates:
        first = ts[ts.duplicated()][0]
        raise WindowInputError(f"column {TS!r} repeats the hour {first.isoformat()}")
    grid = pd.date_range(
        bounds.history_start, bounds.test_end, freq="h", inclusive="left", name=TS
    ).as_unit("us")
    frame = hours[columns].set_axis(ts).reindex(grid).astype(np.float64)
    return frame.reset_index()


def _short_gaps(values: pd.Series, max_gap: int) -> np.ndarray:
    """Mask of missing values in runs of at most ``max_gap`` with values on both sides."""
    missing = values.isna()
    if not missing.any():
        return missing.to_numpy()
    run_length = missing.groupby((missing != missing.shift()).cumsum()).transform("size")
    inside = values.ffill().notna() & values.bfill().notna()
    return (missing & inside & (run_length <= max_gap)).to_numpy()


def _fill_weather_gaps(frame: pd.DataFrame, columns: list[str], max_gap: int) -> np.ndarray:
    """Interpolate short interior weather gaps in place; return the rows that were filled."""
    filled = np.zeros(len(frame), dtype=bool)
    for col in columns:
        mask = _short_gaps(frame[col], max_gap)
        if mask.any():
            interpolated = frame[col].interpolate(method="linear", limit_area="inside")
            frame.loc[mask, col] = interpolated[mask]
            filled |= mask
    return filled


def _fill_test_weather(
    frame: pd.DataFrame, columns: list[str], test: np.ndarray, history: np.ndarray,
    timezone: str, days: int, max_hours: int,
) -> np.ndarray:
    """Fill the target week's remaining weather gaps in place from the daily profile of the
    last ``days`` days of history: the mean of the same local hour of day. Returns the rows
    filled. A week-ahead forecast must go out even when some forecast weather hours are
    missing; the profile of the days just before is the best guess known at issue time. When
    more than ``max_hours`` of the week lack weather nothing is filled (the week has no
    weather to speak of)."""
    filled = np.zeros(len(frame), dtype=bool)
    if days <= 0 or not columns or not test.any():
        return filled
    if int((test & frame[columns].isna().any(axis=1).to_numpy()).sum()) > max_hours:
        return filled
    local_hour = pd.DatetimeIndex(frame[TS]).tz_convert(timezone).hour.to_numpy()
    recent = history & (frame[TS] >= frame.loc[test, TS].min() - pd.Timedelta(days=days)).to_numpy()
    for col in columns:
        missing = test & frame[col].isna().to_numpy()
        if not missing.any():
            continue
        profile = frame.loc[recent, col].groupby(local_hour[recent]).mean()
        values = profile.reindex(local_hour[missing]).to_numpy()
        rows = np.flatnonzero(missing)[~np.isnan(values)]
        frame.loc[rows, col] = values[~np.isnan(values)]
        filled[rows] = True
    return filled


def _refresh_weather_changes(frame: pd.DataFrame, rows: np.ndarray, timezone: str) -> None:
    """Recompute the weather-change features (``<input>_change_168``) of ``rows`` in place
    after their weather was filled, from the filled value and last week's value in the frame
    (no known change where last week's is missing, as the feature itself defines it)."""
    changes = [c for c in frame.columns
               if c.endswith(CHANGE_SUFFIX) and c.removesuffix(CHANGE_SUFFIX) in frame.columns]
    if not changes or not rows.any():
        return
    ts = pd.DatetimeIndex(frame[TS])
    local = ts[rows].tz_convert(resolve_timezone(timezone))
    before_ts = same_local_hour_weeks_before(local, 1)
    for column in changes:
        base = column.removesuffix(CHANGE_SUFFIX)
        values = frame[base].set_axis(ts)
        now = frame.loc[rows, base].to_numpy()
        before = values.reindex(before_ts).to_numpy()
        frame.loc[rows, column] = now - np.where(np.isnan(before), now, before)


def _check_rules(
    min_fit_fraction: float, min_validation_hours: int, min_test_feature_fraction: float,
    max_weather_gap_hours: int,
) -> None:
    if not 0.0 <= min_fit_fraction <= 1.0:
        raise ValueError(f"min_fit_fraction must be in [0, 1], got {min_fit_fraction}")
    if not 0.0 <= min_test_feature_fraction <= 1.0:
        raise ValueError(
            f"min_test_feature_fraction must be in [0, 1], got {min_test_feature_fraction}"
        )
    if min_validation_hours < 1:
        raise ValueError(f"min_validation_hours must be at least 1, got {min_validation_hours}")
    if max_weather_gap_hours < 0:
        raise ValueError(f"max_weather_gap_hours must be >= 0, got {max_weather_gap_hours}")


def build_window(
    hours_with_features: pd.DataFrame,
    week: WeekLike,
    timezone: str,
    *,
    feature_set: str | FeatureSet = DEFAULT_FEATURE_SET,
    history_weeks: int = 12,
    min_fit_fraction: float = 0.5,
    min_validation_hours: int = 24,
    min_test_feature_fraction: float = 1.0,
    max_weather_gap_hours: int = 3,
    test_weather_profile_days: int = 7,
    test_weather_profile_max_hours: int = TEST_WEATHER_PROFILE_MAX_HOURS,
) -> Window:
    """The window of target week ``week`` from a building's featured hours.

    ``hours_with_features`` is :func:`tasks.features.build_features` output (``ts``, the set's
    columns, ``kwh``) covering at least the history and W; hours absent from it count as
    missing. A window is ``ok`` when the fit weeks have at least ``min_fit_fraction`` of their
    hours usable, the validation week at least ``min_validation_hours`` usable hours, and at
    least ``min_test_feature_fraction`` of W's hours every feature, after short weather gaps
    are interpolated and W's remaining weather gaps, when they are at most
    ``test_weather_profile_max_hours`` hours, are filled from the daily profile of the last
    ``test_weather_profile_days`` days (0: no profile fill).
    """
    _check_rules(
        min_fit_fraction, min_validation_hours, min_test_feature_fraction, max_weather_gap_hours
    )
    fs = get_feature_set(feature_set)
    features = list(fs.columns)
    weather = [col for col in features if col in WEATHER_COLUMNS]
    bounds = window_bounds(week, timezone, history_weeks=history_weeks)
    extra = [c for c in (PERSISTENCE, DAY_TYPE_PERSISTENCE, UNLIKE_LAST_WEEK)
             if c in hours_with_features.columns]
    frame = _on_grid(hours_with_features, [*features, LABEL, *extra], bounds)
    filled = _fill_weather_gaps(frame, weather, max_weather_gap_hours)
    ts = frame[TS]
    in_test = ((ts >= bounds.test_start) & (ts < bounds.test_end)).to_numpy()
    in_history = ((ts >= bounds.history_start) & (ts < bounds.test_start)).to_numpy()
    filled |= _fill_test_weather(frame, weather, in_test, in_history, timezone,
                                 test_weather_profile_days, test_weather_profile_max_hours)
    _refresh_weather_changes(frame, filled, timezone)

    labelled = frame[LABEL].notna().to_numpy()
    complete = frame[features].notna().all(axis=1).to_numpy()
    usable = labelled & complete

    parts: dict[str, np.ndarray] = {}
    coverage: dict[str, PartCoverage] = {}
    for part in PARTS:
        start, end = bounds.part(part)
        in_part = ((ts >= start) & (ts < end)).to_numpy()
        parts[part] = in_part
        coverage[part] = PartCoverage(
            hours=int(in_part.sum()),
            labelled=int((in_part & labelled).sum()),
            complete_features=int((in_part & complete).sum()),
            usable=int((in_part & usable).sum()),
            weather_filled=int((in_part & filled).sum()),
        )

    weather_missing = frame[weather].isna().any(axis=1).to_numpy() if weather else np.zeros(
        len(frame), dtype=bool
    )
    status, reason = _judge(
        coverage,
        history_weather_missing=bool((parts["train"] & labelled & weather_missing).any()),
        test_weather_missing=bool((parts["test"] & weather_missing).any()),
        min_fit_fraction=min_fit_fraction,
        min_validation_hours=min_validation_hours,
        min_test_feature_fraction=min_test_feature_fraction,
    )

    def rows(mask: np.ndarray) -> pd.DataFrame:
        return frame.loc[mask].reset_index(drop=True)

    return Window(
        week=as_monday(week),
        timezone=timezone,
        feature_set=fs.name,
        feature_columns=fs.columns,
        bounds=bounds,
        train=rows(parts["train"] & usable),
        fit=rows(parts["fit"] & usable),
        validation=rows(parts["validation"] & usable),
        test=rows(parts["test"]),
        history=rows(parts["train"]),
        coverage=MappingProxyType(coverage),
        status=status,
        reason=reason,
    )


def _judge(
    coverage: Mapping[str, PartCoverage],
    *,
    history_weather_missing: bool,
    test_weather_missing: bool,
    min_fit_fraction: float,
    min_validation_hours: int,
    min_test_feature_fraction: float,
) -> tuple[WindowStatus, str]:
    """Status and human-readable reason of a window from its coverage."""
    fit, val, test = coverage["fit"], coverage["validation"], coverage["test"]
    need_fit = math.ceil(min_fit_fraction * fit.hours)
    short = [
        f"{part} {have.usable} usable hours of {have.hours} ({have.labelled} with a reading, "
        f"{have.complete_features} with every feature), need {need}"
        for part, have, need in (("fit weeks have", fit, need_fit),
                                 ("validation week has", val, min_validation_hours))
        if have.usable < need
    ]
    if short:
        labels_suffice = fit.labelled >= need_fit and val.labelled >= min_validation_hours
        if labels_suffice:
            status = (
                WindowStatus.NO_WEATHER if history_weather_missing
                else WindowStatus.INCOMPLETE_FEATURES
            )
        else:
            status = WindowStatus.INSUFFICIENT_DATA
        return status, "; ".join(short)

    need_test = math.ceil(min_test_feature_fraction * test.hours)
    if test.complete_features < need_test:
        status = (
            WindowStatus.NO_WEATHER if test_weather_missing else WindowStatus.INCOMPLETE_FEATURES
        )
        what = "weather" if test_weather_missing else "features"
        return status, (
            f"test week has every feature for {test.complete_features} of {test.hours} hours "
            f"(missing {what}), need {need_test}"
        )
    filled = f", weather filled for {test.weather_filled}" if test.weather_filled else ""
    return WindowStatus.OK, (
        f"fit {fit.usable}/{fit.hours}, validation {val.usable}/{val.hours} usable hours; "
        f"test {test.complete_features}/{test.hours} hours forecastable{filled}, "
        f"{test.usable} scorable"
    )


__all__ = [
    "PARTS",
    "TEST_WEATHER_PROFILE_MAX_HOURS",
    "PartCoverage",
    "Window",
    "WindowBounds",
    "WindowInputError",
    "WindowStatus",
    "build_window",
    "window_bounds",
    "window_load_range",
]
