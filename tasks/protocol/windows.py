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
* weather is judged per input (temperature, irradiance, wind): an input still missing for
  more than :data:`MAX_FILLED_WEATHER_SHARE` of the target week's hours is *left out* of that
  window's features (with the weather-change feature made from it), and so is an input whose
  gaps in the history would leave too few hours to fit on; the models are fitted on the
  others, and the window's reason names each input left out and its hours
  (:attr:`Window.left_out`). One blank input costs that input, not the week;
* in the target week, an input kept but still missing for some hours has them filled from
  the daily profile of the last seven days: each hour takes the mean of the same local hour
  of day (``PartCoverage.weather_filled`` counts every filled hour, and the window's reason
  says how many test hours were filled), so no input a model reads is more than a quarter
  guessed;
* history hours with a missing feature are dropped, except, in a window for models that take
  missing inputs (trees: ``missing_load_ok``), a missing load lag, which such a model reads as
  missing in the history and in the target week alike;
* the test week is forecastable only when enough of its hours have every feature, else its
  status is ``no_weather`` (a weather column is missing; also when every weather input of the
  feature set was left out) or ``incomplete_features``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date, timedelta
from enum import StrEnum
from types import MappingProxyType

import numpy as np
import pandas as pd

from tasks.errors import PipelineError
from tasks.protocol.features import (
    CHANGE_SUFFIX,
    DAY_TYPE_PERSISTENCE,
    DEFAULT_FEATURE_SET,
    ISSUED_BASE,
    LABEL,
    PERSISTENCE,
    TS,
    UNLIKE_LAST_WEEK,
    WEATHER_COLUMNS,
    FeatureSet,
    get_feature_set,
)
from tasks.protocol.weeks import (
    WeekLike,
    as_monday,
    local_midnight_utc,
    resolve_timezone,
    same_local_hour_weeks_before,
)

PARTS: tuple[str, ...] = ("train", "fit", "validation", "test")
"""Window parts: ``train`` is the whole history = ``fit`` + ``validation``; ``test`` is W."""


MAX_FILLED_WEATHER_SHARE = 0.25
"""A weather input missing (after short gaps are interpolated) for more than this share of the
target week's hours is left out of that week's features; one missing for fewer hours has them
filled from the last days' profile. So at most a quarter of any weather input a model reads
in the target week is a guess."""


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
    present, the load's lags aside in a window built with ``missing_load_ok``); ``test`` holds
    every hour of W, with NaN ``kwh`` where there is no reading (and NaN features where they are
    missing, which only happens when ``status`` is not ``ok`` or in those lags);
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
    left_out: Mapping[str, str] = field(default_factory=dict)
    """Weather inputs of the feature set left out of this window's features, each with why
    (``"missing for 161 of 168 target-week hours"``); their change features are left out too.
    When every weather input is left out the window keeps them and its status is
    ``no_weather``."""
    test_weather_filled: Mapping[str, int] = field(default_factory=dict)
    """Per weather input the window kept, how many target-week hours had it filled in
    (interpolated over a short gap, or from the last days' profile)."""

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


def _fill_weather_gaps(frame: pd.DataFrame, columns: list[str], max_gap: int
                       ) -> dict[str, np.ndarray]:
    """Interpolate short interior weather gaps in place; return each column's filled rows."""
    filled = {}
    for col in columns:
        mask = _short_gaps(frame[col], max_gap)
        if mask.any():
            interpolated = frame[col].interpolate(method="linear", limit_area="inside")
            frame.loc[mask, col] = interpolated[mask]
        filled[col] = mask.copy()  # a Series' own (read-only) array otherwise
    return filled


def _fill_test_weather(
    frame: pd.DataFrame, columns: list[str], test: np.ndarray, history: np.ndarray,
    timezone: str, days: int, filled: dict[str, np.ndarray],
) -> None:
    """Fill the target week's remaining gaps of the weather ``columns`` in place from the daily
    profile of the last ``days`` days of history: the mean of the same local hour of day, and
    mark the rows in ``filled``. A week-ahead forecast must go out even when some forecast
    weather hours are missing; the profile of the days just before is the best guess known at
    issue time (an input missing for more hours than that may guess is left out beforehand)."""
    if days <= 0 or not columns or not test.any():
        return
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
        filled[col][rows] = True


def _weather_left_out(
    frame: pd.DataFrame, features: list[str], weather: list[str], parts: Mapping[str, np.ndarray],
    labelled: np.ndarray, need: Mapping[str, int], test_limit: int,
) -> dict[str, str]:
    """The weather inputs to leave out of the window, each with why: those missing for more
    than ``test_limit`` of the target week's hours, then, while the fit or the validation part
    has fewer usable hours than ``need`` says although it has the readings, the input missing
    at the most labelled history hours (never one that misses none). Every input may end up
    left out."""
    test = parts["test"]
    left: dict[str, str] = {}
    for col in weather:
        missing = int((test & frame[col].isna().to_numpy()).sum())
        if missing > test_limit:
            left[col] = f"missing for {missing} of {int(test.sum())} target-week hours"
    history = parts["fit"] | parts["validation"]
    if any(int((parts[p] & labelled).sum()) < n for p, n in need.items()):
        return left  # too few readings: no input left out would make up for them
    while len(left) < len(weather):
        complete = frame[_kept(features, left)].notna().all(axis=1).to_numpy()
        if all(int((parts[p] & labelled & complete).sum()) >= n for p, n in need.items()):
            break
        gaps = {col: int((history & labelled & frame[col].isna().to_numpy()).sum())
                for col in weather if col not in left}
        worst = max(gaps, key=lambda col: gaps[col])
        if not gaps[worst]:
            break
        left[worst] = f"missing at {gaps[worst]} of the history's hours with a reading"
    return left


def _kept(features: list[str], left_out: Mapping[str, str]) -> list[str]:
    """``features`` without the weather inputs ``left_out`` and the changes made from them."""
    return [f for f in features
            if f not in left_out and f.removesuffix(CHANGE_SUFFIX) not in left_out]


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


MIN_VALIDATION_HOURS = 24
"""The usable hours a window's validation week needs (by default) to tune and judge on."""


def build_window(
    hours_with_features: pd.DataFrame,
    week: WeekLike,
    timezone: str,
    *,
    feature_set: str | FeatureSet = DEFAULT_FEATURE_SET,
    history_weeks: int = 12,
    min_fit_fraction: float = 0.5,
    min_validation_hours: int = MIN_VALIDATION_HOURS,
    min_test_feature_fraction: float = 1.0,
    max_weather_gap_hours: int = 3,
    test_weather_profile_days: int = 7,
    max_filled_weather_share: float = MAX_FILLED_WEATHER_SHARE,
    missing_load_ok: bool = False,
) -> Window:
    """The window of target week ``week`` from a building's featured hours.

    ``hours_with_features`` is :func:`tasks.features.build_features` output (``ts``, the set's
    columns, ``kwh``) covering at least the history and W; hours absent from it count as
    missing. A window is ``ok`` when the fit weeks have at least ``min_fit_fraction`` of their
    hours usable, the validation week at least ``min_validation_hours`` usable hours, and at
    least ``min_test_feature_fraction`` of W's hours every feature, after short weather gaps
    are interpolated, weather inputs missing for more than ``max_filled_weather_share`` of W's
    hours (or too much of the history) are left out, and the remaining gaps in W of the inputs
    kept are filled from the daily profile of the last ``test_weather_profile_days`` days (0:
    no profile fill). With ``missing_load_ok`` (a window for models that take missing inputs)
    the load's lags and summaries (:attr:`FeatureSet.load_columns`) may be missing: an hour is
    usable with a reading and every other feature, and forecastable with every other feature.
    """
    _check_rules(
        min_fit_fraction, min_validation_hours, min_test_feature_fraction, max_weather_gap_hours
    )
    fs = get_feature_set(feature_set)
    features = list(fs.columns)
    weather = [col for col in features if col in WEATHER_COLUMNS]
    bounds = window_bounds(week, timezone, history_weeks=history_weeks)
    extra = [c for c in (PERSISTENCE, DAY_TYPE_PERSISTENCE, UNLIKE_LAST_WEEK, ISSUED_BASE)
             if c in hours_with_features.columns]
    frame = _on_grid(hours_with_features, [*features, LABEL, *extra], bounds)
    filled_by = _fill_weather_gaps(frame, weather, max_weather_gap_hours)
    ts = frame[TS]
    parts = {}
    for part in PARTS:
        start, end = bounds.part(part)
        parts[part] = ((ts >= start) & (ts < end)).to_numpy()
    in_history = parts["train"]
    labelled = frame[LABEL].notna().to_numpy()
    need = {"fit": math.ceil(min_fit_fraction * int(parts["fit"].sum())),
            "validation": min_validation_hours}
    left_out = _weather_left_out(
        frame, features, weather, parts, labelled, need,
        test_limit=math.floor(max_filled_weather_share * int(parts["test"].sum())))
    no_weather_left = bool(weather) and len(left_out) == len(weather)
    if no_weather_left:  # the week has no weather to speak of: it stays missing
        weather = []
    else:
        features = _kept(features, left_out)
        weather = [col for col in weather if col not in left_out]
    _fill_test_weather(frame, weather, parts["test"], in_history, timezone,
                       test_weather_profile_days, filled_by)
    filled = np.zeros(len(frame), dtype=bool)
    for col in weather:
        filled |= filled_by[col]
    _refresh_weather_changes(frame, filled, timezone)

    may_miss = set(fs.load_columns) if missing_load_ok else set()
    required = [c for c in features if c not in may_miss]
    complete = frame[required].notna().all(axis=1).to_numpy()
    usable = labelled & complete

    coverage: dict[str, PartCoverage] = {}
    for part in PARTS:
        in_part = parts[part]
        coverage[part] = PartCoverage(
            hours=int(in_part.sum()),
            labelled=int((in_part & labelled).sum()),
            complete_features=int((in_part & complete).sum()),
            usable=int((in_part & usable).sum()),
            weather_filled=int((in_part & filled).sum()),
        )

    weather_cols = [col for col in features if col in WEATHER_COLUMNS]
    weather_missing = (frame[weather_cols].isna().any(axis=1).to_numpy() if weather_cols
                       else np.zeros(len(frame), dtype=bool))
    status, reason = _judge(
        coverage,
        history_weather_missing=bool((parts["train"] & labelled & weather_missing).any()),
        test_weather_missing=bool((parts["test"] & weather_missing).any()),
        min_fit_fraction=min_fit_fraction,
        min_validation_hours=min_validation_hours,
        min_test_feature_fraction=min_test_feature_fraction,
    )
    if left_out:
        said = "; ".join(f"{col} {why}" for col, why in left_out.items())
        reason += (f"; no weather input usable: {said}" if no_weather_left
                   else f"; left out: {said}")

    def rows(mask: np.ndarray) -> pd.DataFrame:
        return frame.loc[mask].reset_index(drop=True)

    return Window(
        week=as_monday(week),
        timezone=timezone,
        feature_set=fs.name,
        feature_columns=tuple(features),
        bounds=bounds,
        train=rows(parts["train"] & usable),
        fit=rows(parts["fit"] & usable),
        validation=rows(parts["validation"] & usable),
        test=rows(parts["test"]),
        history=rows(parts["train"]),
        coverage=MappingProxyType(coverage),
        status=status,
        reason=reason,
        left_out=MappingProxyType({} if no_weather_left else left_out),
        test_weather_filled=MappingProxyType(
            {col: int((parts["test"] & filled_by[col]).sum()) for col in weather}),
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
