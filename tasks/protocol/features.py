"""Model features for a building's hours, computed in the building's local time.

Every feature is a small function of a :class:`FeatureContext` (the hourly frame, its local
wall-clock times and the building's holiday calendar) that returns one column. Features are
grouped into named :class:`FeatureSet` s; a run picks a set by name, so adding a set never
touches the models. ``paper`` is the paper's eight features (Table "features", Section 8.2) in
the paper's order and the default.

Lag features (``kwh_lag_168``, ``kwh_lag_336``) take the load at the same LOCAL wall-clock
hour one and two weeks earlier
(:func:`~tasks.protocol.weeks.same_local_hour_weeks_before`).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

import holidays
import numpy as np
import pandas as pd

from tasks.errors import PipelineError
from tasks.protocol.day_types import (
    DEFAULT_CLOSURE_PERIODS,
    WORKDAY,
    ClosurePeriod,
    day_type_persistence,
    day_types,
    parse_closure_periods,
    unlike_last_week,
)
from tasks.protocol.weeks import (
    resolve_timezone,
    same_local_hour_weeks_before,
)

TS = "ts"
LABEL = "kwh"
PERSISTENCE = "kwh_persistence"
"""The persistence forecast of each hour (:func:`_persistence`). Computed for every feature set
whenever the load is known and carried through the window beside the label: the seasonal-naive
model forecasts it, a residual model learns the correction to it."""
DAY_TYPE_PERSISTENCE = "kwh_day_type_persistence"
"""The holiday-aware persistence forecast of each hour
(:func:`~tasks.protocol.day_types.day_type_persistence`), carried beside
:data:`PERSISTENCE`: the base a residual model corrects when the run says so."""
ISSUED_BASE = "kwh_issued_base"
"""A model's forecast of each hour as it was issued a week ahead (the target week's: as it is
issued now), carried through a window beside the persistence forecasts when a residual target
corrects that model (:attr:`~tasks.protocol.config.ForecastConfig.base_model`)."""
UNLIKE_LAST_WEEK = "unlike_last_week"
"""1.0 for an hour whose day type differs from the same hour last week's, or that is an off
weekday (:func:`~tasks.protocol.day_types.unlike_last_week`), else 0.0; carried
beside the persistence forecasts."""
PERSISTENCE_LOOKBACK = pd.Timedelta(hours=168 * 4 + 1)
CHANGE_SUFFIX = "_change_168"
"""Suffix of the weather-change features: ``temperature_c_change_168`` is the temperature minus
the temperature at the same local hour one week back."""
WEATHER_COLUMNS: tuple[str, ...] = ("temperature_c", "irradiance_wm2", "wind_speed_ms")
"""Weather inputs that the paper's features take unchanged (observed or forecast values)."""


class FeatureInputError(PipelineError, ValueError):
    """The hourly frame given to :func:`build_features` cannot be used as it is."""


class UnknownFeatureSetError(PipelineError, LookupError):
    """A feature set name that is not in :data:`FEATURE_SETS`."""


class UnknownHolidayCalendarError(PipelineError, ValueError):
    """A holiday country or subdivision that the ``holidays`` library does not provide."""


def holiday_dates(
    country: str, subdiv: str | None, years: range | list[int]
) -> frozenset[np.datetime64]:
    """Public holidays (observed days included) of a calendar, as ``datetime64[D]`` values."""
    return _holiday_dates(country, subdiv, tuple(years))


@lru_cache(maxsize=256)
def _holiday_dates(
    country: str, subdiv: str | None, years: tuple[int, ...]
) -> frozenset[np.datetime64]:
    try:
        calendar = holidays.country_holidays(country, subdiv=subdiv, years=list(years))
    except NotImplementedError as exc:
        raise UnknownHolidayCalendarError(
            f"no holiday calendar for country {country!r}, subdivision {subdiv!r}: {exc}"
        ) from exc
    return frozenset(np.datetime64(day, "D") for day in calendar)


@dataclass(frozen=True)
class FeatureContext:
    """What a feature function sees: the hours, their local times, the holiday dates and the
    closure periods (days that count as holidays for the day types)."""

    hours: pd.DataFrame
    local: pd.DatetimeIndex
    holidays: frozenset[np.datetime64]
    closures: tuple[ClosurePeriod, ...] = ()
    computed: dict[Hashable, np.ndarray] = field(default_factory=dict, repr=False, compare=False)
    """What several features read, computed once per build (a lag of the load, the
    holiday-aware persistence), by key."""

    def once(self, key: Hashable, compute: Callable[[], np.ndarray]) -> np.ndarray:
        """A copy of ``compute()``, computed the first time ``key`` is asked for (a copy: no
        two columns share memory, and no caller changes what the next one reads)."""
        if key not in self.computed:
            self.computed[key] = compute()
        return self.computed[key].copy()


@dataclass(frozen=True)
class Feature:
    """One named column computed by ``compute``.

    ``inputs`` are the columns of the hourly frame it reads (besides ``ts``); ``lookback_hours``
    is how far before the first hour it reads them, so that a caller loads enough history.
    """

    name: str
    compute: Callable[[FeatureContext], np.ndarray]
    inputs: tuple[str, ...] = ()
    lookback_hours: int = 0


@dataclass(frozen=True)
class FeatureSet:
    """A named, ordered tuple of features; the column order is the model's input order."""

    name: str
    features: tuple[Feature, ...]

    @property
    def columns(self) -> tuple[str, ...]:
        return tuple(feature.name for feature in self.features)

    @property
    def inputs(self) -> tuple[str, ...]:
        """Columns the hourly frame must hold besides ``ts``."""
        return tuple(dict.fromkeys(col for f in self.features for col in f.inputs))

    @property
    def load_columns(self) -> tuple[str, ...]:
        """Columns computed from the load alone (its lags and summaries): missing where the
        readings they look back to are."""
        return tuple(f.name for f in self.features if f.inputs == (LABEL,))

    @property
    def lookback(self) -> pd.Timedelta:
        """History needed before the first hour to compute every feature and the persistence
        forecast."""
        hours = max((f.lookback_hours for f in self.features), default=0)
        return max(pd.Timedelta(hours=hours), PERSISTENCE_LOOKBACK)


# --- calendar features -------------------------------------------------------------------

def _angle(values: np.ndarray, period: int) -> np.ndarray:
    return 2.0 * np.pi * values.astype(np.float64) / period


def _cyclic(unit: str, period: int, wave: Callable[[np.ndarray], np.ndarray]
            ) -> Callable[[FeatureContext], np.ndarray]:
    """The local ``unit`` (day_of_week, hour) as a point on a circle of ``period``."""

    def compute(ctx: FeatureContext) -> np.ndarray:
        return wave(_angle(getattr(ctx.local, unit).to_numpy(), period))

    compute.__name__ = f"_{unit}_{wave.__name__}"
    return compute


def _off_days(wall: pd.DatetimeIndex, holidays: frozenset[np.datetime64],
              closures: Sequence[ClosurePeriod] = ()) -> np.ndarray:
    """1.0 where the wall-clock time falls on a weekend, a holiday or a day of ``closures``
    (a day the day types do not count as a workday), else 0.0."""
    return (day_types(wall, holidays, closures) != WORKDAY).astype(np.float64)


def _is_holiday_or_weekend(ctx: FeatureContext) -> np.ndarray:
    return _off_days(ctx.local.tz_localize(None), ctx.holidays)


def _is_off_day(ctx: FeatureContext) -> np.ndarray:
    """``is_holiday_or_weekend`` with the closure periods' weekdays counted as off too."""
    return _off_days(ctx.local.tz_localize(None), ctx.holidays, ctx.closures)


# --- weather features --------------------------------------------------------------------

def _numbers(ctx: FeatureContext, name: str) -> np.ndarray:
    """Column ``name`` of the hourly frame as numbers (NaN: missing)."""
    return pd.to_numeric(ctx.hours[name], errors="coerce").to_numpy(dtype=np.float64)


def _series(ctx: FeatureContext, name: str) -> pd.Series:
    """:func:`_numbers` by UTC hour."""
    index = pd.DatetimeIndex(ctx.hours[TS]).tz_convert("UTC").as_unit("us")
    return pd.Series(_numbers(ctx, name), index=index)


def _column(name: str) -> Callable[[FeatureContext], np.ndarray]:
    def compute(ctx: FeatureContext) -> np.ndarray:
        return _numbers(ctx, name)

    compute.__name__ = f"_column_{name}"
    return compute


# --- load lags ---------------------------------------------------------------------------

LAG_WEEKS: tuple[int, ...] = (1, 2, 3, 4)
"""Weeks back that the lag features and the persistence forecast read."""


def _lags(ctx: FeatureContext, weeks: tuple[int, ...]) -> np.ndarray:
    """(n_hours, len(weeks)) loads at the same local hour ``weeks`` weeks back (NaN: missing)."""
    columns = [ctx.once(("lag", k), lambda k=k: _series(ctx, LABEL).reindex(
        same_local_hour_weeks_before(ctx.local, k).as_unit("us")).to_numpy()) for k in weeks]
    return np.column_stack(columns) if len(ctx.local) else np.zeros((0, len(weeks)))


def _first_present(lags: np.ndarray) -> np.ndarray:
    """Per row, the first column that is not NaN (NaN when none is)."""
    out = np.full(len(lags), np.nan)
    for k in range(lags.shape[1] - 1, -1, -1):
        out = np.where(np.isnan(lags[:, k]), out, lags[:, k])
    return out


def _same_local_hour_weeks_before(weeks: int) -> Callable[[FeatureContext], np.ndarray]:
    """Load at the same local wall-clock hour ``weeks`` weeks earlier; where that reading is
    missing, the next older week's, up to four weeks back (NaN when none is there). A single
    missing reading then never makes an hour of the target week unforecastable."""

    def compute(ctx: FeatureContext) -> np.ndarray:
        return _first_present(_lags(ctx, tuple(k for k in LAG_WEEKS if k >= weeks)))

    compute.__name__ = f"_kwh_{weeks}_weeks_before"
    return compute


def _persistence(ctx: FeatureContext) -> np.ndarray:
    """The load of the same local hour one week back, else two, three or four weeks back:
    the seasonal-naive forecast, and the base a residual model corrects."""
    return _first_present(_lags(ctx, LAG_WEEKS))


def _lag_median(ctx: FeatureContext) -> np.ndarray:
    """Median of the same local hour's load over the last four weeks (missing ones left out):
    robust to one unusual week, e.g. a holiday."""
    lags = _lags(ctx, LAG_WEEKS)
    out = np.full(len(lags), np.nan)
    present = ~np.isnan(lags).all(axis=1)
    out[present] = np.nanmedian(lags[present], axis=1)
    return out


def _lag_week_is_off(ctx: FeatureContext) -> np.ndarray:
    """Whether the same local hour one week back fell on a weekend or public holiday, so that a
    holiday last week explains an unusual lag."""
    return _off_days(ctx.local.tz_localize(None) - pd.Timedelta(weeks=1), ctx.holidays)


def _change_since_last_week(name: str) -> Callable[[FeatureContext], np.ndarray]:
    """A weather input minus its value at the same local hour one week back: what changed
    since the week that persistence repeats (NaN when this hour's value is missing; 0, no
    known change, when only last week's is)."""

    def compute(ctx: FeatureContext) -> np.ndarray:
        values = _series(ctx, name)
        before = values.reindex(same_local_hour_weeks_before(ctx.local, 1).as_unit("us"))
        now = values.to_numpy()
        return now - np.where(np.isnan(before.to_numpy()), now, before.to_numpy())

    compute.__name__ = f"_{name}_change_since_last_week"
    return compute


YEAR_WEEKS = 52
"""A year back, in weeks: 364 days, so the same weekday (and hour) a year earlier."""


def _day_type_lag(ctx: FeatureContext) -> np.ndarray:
    """The holiday-aware persistence forecast of each hour
    (:func:`~tasks.protocol.day_types.day_type_persistence`) as a feature: a model
    that weighs it learns how far to trust the latest day of the same type."""
    return ctx.once("day_type_persistence", lambda: day_type_persistence(
        _series(ctx, LABEL), ctx.local, ctx.holidays, ctx.closures, fallback=_persistence(ctx),
        weeks=LAG_WEEKS, earlier_loads=lambda k: _lags(ctx, (k,))[:, 0]))


def _year_ago(ctx: FeatureContext) -> np.ndarray:
    """The load at the same local hour and weekday a year (52 weeks) back: what the building
    did at this time of its year (a university term, a summer closure). Where that reading is
    missing (the building's first year), the holiday-aware persistence stands in, so the
    feature is always known when the load of the last weeks is."""
    year_ago = _lags(ctx, (YEAR_WEEKS,))[:, 0]
    return np.where(np.isnan(year_ago), _day_type_lag(ctx), year_ago)


def _year_ago_change(ctx: FeatureContext) -> np.ndarray:
    """How the load changed a year back from the week before to this week (same local hour, 52
    weeks minus 53 weeks back): last year's step at this time of year, e.g. a term starting.
    0, no known change, where either reading is missing."""
    change = np.subtract(*_lags(ctx, (YEAR_WEEKS, YEAR_WEEKS + 1)).T)
    return np.where(np.isnan(change), 0.0, change)


def _unlike_last_week(ctx: FeatureContext) -> np.ndarray:
    """1.0 for an hour unlike the same hour last week (:func:`~tasks.protocol.
    day_types.unlike_last_week`), else 0.0."""
    return unlike_last_week(ctx.local, ctx.holidays, ctx.closures).astype(float)


def _last_week_mean(ctx: FeatureContext) -> np.ndarray:
    """Mean load of the local week before each hour's own local week (its level; NaN when
    that week has no reading): known when the week is forecast."""
    lag = pd.Series(_lags(ctx, (1,))[:, 0])
    wall = ctx.local.tz_localize(None)
    monday = (wall.normalize() - pd.to_timedelta(wall.day_of_week, unit="D")).to_numpy()
    return lag.groupby(monday).transform("mean").to_numpy()


FEATURES: dict[str, Feature] = {
    feature.name: feature
    for feature in (
        Feature("dow_cos", _cyclic("day_of_week", 7, np.cos)),
        Feature("dow_sin", _cyclic("day_of_week", 7, np.sin)),
        Feature("hour_cos", _cyclic("hour", 24, np.cos)),
        Feature("hour_sin", _cyclic("hour", 24, np.sin)),
        Feature("is_holiday_or_weekend", _is_holiday_or_weekend),
        Feature("is_off_day", _is_off_day),
        *(Feature(name, _column(name), inputs=(name,)) for name in WEATHER_COLUMNS),
        *(
            Feature(f"kwh_lag_{168 * k}", _same_local_hour_weeks_before(k), inputs=(LABEL,),
                    lookback_hours=168 * k + 1)
            for k in LAG_WEEKS
        ),
        Feature("kwh_lag_median", _lag_median, inputs=(LABEL,), lookback_hours=673),
        Feature("kwh_last_week_mean", _last_week_mean, inputs=(LABEL,),
                lookback_hours=2 * 168 + 1),
        Feature("lag_week_is_off", _lag_week_is_off),
        *(
            Feature(f"{name}{CHANGE_SUFFIX}", _change_since_last_week(name), inputs=(name,),
                    lookback_hours=169)
            for name in ("temperature_c", "irradiance_wm2")
        ),
        Feature("kwh_day_type_lag", _day_type_lag, inputs=(LABEL,), lookback_hours=673),
        Feature("kwh_year_ago", _year_ago, inputs=(LABEL,),
                lookback_hours=168 * YEAR_WEEKS + 1),
        Feature("kwh_year_ago_change", _year_ago_change, inputs=(LABEL,),
                lookback_hours=168 * (YEAR_WEEKS + 1) + 1),
        Feature("unlike_last_week_flag", _unlike_last_week),
    )
}
"""Every feature known to the pipeline, by column name."""

PAPER_COLUMNS: tuple[str, ...] = (
    "dow_cos",
    "dow_sin",
    "hour_cos",
    "hour_sin",
    "is_holiday_or_weekend",
    "temperature_c",
    "irradiance_wm2",
    "wind_speed_ms",
)


OFF_DAY_COLUMNS: tuple[str, ...] = tuple(
    "is_off_day" if col == "is_holiday_or_weekend" else col for col in PAPER_COLUMNS)
"""The paper's eight with the closure periods' weekdays counted as off days, as the day types
count them."""


def make_feature_set(name: str, columns: tuple[str, ...]) -> FeatureSet:
    """A feature set from names in :data:`FEATURES` (unknown names raise ``KeyError``)."""
    unknown = [col for col in columns if col not in FEATURES]
    if unknown:
        raise KeyError(f"feature set {name!r} names unknown features {unknown}")
    return FeatureSet(name, tuple(FEATURES[col] for col in columns))


FEATURE_SETS: dict[str, FeatureSet] = {
    fs.name: fs
    for fs in (
        make_feature_set("paper", PAPER_COLUMNS),
        make_feature_set("paper_lags", (*PAPER_COLUMNS, "kwh_lag_168", "kwh_lag_336")),
        make_feature_set("off_day_lags", (*OFF_DAY_COLUMNS, "kwh_lag_168", "kwh_lag_336")),
        make_feature_set("recent", (
            *PAPER_COLUMNS, "kwh_lag_168", "kwh_lag_336", "kwh_lag_median",
            "kwh_last_week_mean", "lag_week_is_off",
        )),
        make_feature_set("recent_change", (
            *OFF_DAY_COLUMNS, "kwh_lag_168", "kwh_lag_336", "kwh_lag_median",
            "kwh_last_week_mean", "lag_week_is_off", "temperature_c_change_168",
            "irradiance_wm2_change_168",
        )),
        make_feature_set("year", (
            *OFF_DAY_COLUMNS, "kwh_lag_168", "kwh_lag_336", "kwh_lag_504", "kwh_lag_672",
            "kwh_lag_median", "kwh_last_week_mean", "lag_week_is_off", "kwh_day_type_lag",
            "unlike_last_week_flag", "kwh_year_ago", "kwh_year_ago_change",
        )),
    )
}
"""Named feature sets a run can choose. ``paper`` is the paper's eight; ``paper_lags`` adds
the load one and two weeks back (``off_day_lags``: the same with ``is_off_day``, which also
counts the closure periods' weekdays as off days, in place of ``is_holiday_or_weekend``);
``recent`` adds the median of the last four weeks at the same hour, last week's mean load and
whether last week's hour was a holiday or weekend; ``recent_change`` adds how temperature and
irradiance changed since the same hour last week (what a correction to last week's load most
needs to know), its off days flagged as in ``off_day_lags``; ``year`` adds to ``recent`` the
load three and four weeks back, the holiday-aware persistence, whether the hour is unlike last
week, and the load a year back with last year's change at this time of year (the gradient
boosting model's inputs: it trains on a year), its off days flagged as in ``off_day_lags``. The
paper's own sets (``paper``, ``paper_lags``, ``recent``) keep the paper's flag: public
holidays and weekends."""

DEFAULT_FEATURE_SET = "paper"
"""The functions' default: the paper's set (a run's default is in ``config.py``)."""


def get_feature_set(feature_set: str | FeatureSet) -> FeatureSet:
    """The registered set called ``feature_set`` (a :class:`FeatureSet` passes through)."""
    if isinstance(feature_set, FeatureSet):
        return feature_set
    try:
        return FEATURE_SETS[feature_set]
    except KeyError:
        raise UnknownFeatureSetError(
            f"unknown feature set {feature_set!r}; known sets: {sorted(FEATURE_SETS)}"
        ) from None


def _utc_index(hours: pd.DataFrame) -> pd.DatetimeIndex:
    if TS not in hours.columns:
        raise FeatureInputError(
            f"hourly frame has no {TS!r} column (columns: {list(hours.columns)})"
        )
    ts = hours[TS]
    if not isinstance(ts.dtype, pd.DatetimeTZDtype):
        raise FeatureInputError(
            f"column {TS!r} must hold time-zone-aware UTC timestamps, got dtype {ts.dtype}"
        )
    if ts.isna().any():
        raise FeatureInputError(f"column {TS!r} has {int(ts.isna().sum())} missing timestamps")
    index = pd.DatetimeIndex(ts).tz_convert("UTC")
    if index.has_duplicates:
        first = index[index.duplicated()][0]
        raise FeatureInputError(f"column {TS!r} repeats the hour {first.isoformat()}")
    return index


def build_features(
    hours: pd.DataFrame,
    *,
    timezone: str,
    holiday_country: str,
    holiday_subdiv: str | None,
    feature_set: str | FeatureSet = DEFAULT_FEATURE_SET,
    closure_periods: tuple[str, ...] = DEFAULT_CLOSURE_PERIODS,
) -> pd.DataFrame:
    """The features of ``feature_set`` for each row of ``hours``, in local time.

    ``hours`` has a time-zone-aware ``ts`` column (start of each hour) and the set's inputs
    (weather columns; ``kwh`` for lag sets). The result keeps the index and row order of
    ``hours`` and has ``ts`` (UTC), the set's columns in order, then, when ``hours`` has the
    load, ``kwh``, ``kwh_persistence``, ``kwh_day_type_persistence`` and
    ``unlike_last_week`` (whose off days are the public holidays and ``closure_periods``).
    Missing inputs stay NaN: deciding what to do with them is the window step's job.
    """
    fs = get_feature_set(feature_set)
    utc = _utc_index(hours)
    missing = [col for col in fs.inputs if col not in hours.columns]
    if missing:
        raise FeatureInputError(
            f"feature set {fs.name!r} needs columns {missing} that the hourly frame lacks"
        )
    local = utc.tz_convert(resolve_timezone(timezone))
    years = range(local.year.min(), local.year.max() + 1) if len(local) else range(0)
    closures = parse_closure_periods(closure_periods)
    ctx = FeatureContext(
        hours=hours,
        local=local,
        holidays=holiday_dates(holiday_country, holiday_subdiv, years),
        closures=closures,
    )
    out = pd.DataFrame({TS: utc}, index=hours.index)
    for feature in fs.features:
        out[feature.name] = feature.compute(ctx)
    if LABEL in hours.columns:
        out[LABEL] = pd.to_numeric(hours[LABEL], errors="coerce").to_numpy(dtype=np.float64)
        out[PERSISTENCE] = _persistence(ctx)
        out[DAY_TYPE_PERSISTENCE] = _day_type_lag(ctx)
        out[UNLIKE_LAST_WEEK] = unlike_last_week(local, ctx.holidays, closures).astype(float)
    return out
