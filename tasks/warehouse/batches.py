"""Reading batches of buildings' inputs for the protocol: their hours, infos and stored tuning.

One short read-only connection per read, which may cover several batches: a read's queries scan
the stored rows of every building, so they cost much the same for 10 buildings as for 200, and
a run reads many batches at a time (``flows.forecast.READ_BUILDINGS``). A read whose data
cannot be read is retried batch by batch, and a batch building by building, so one building's
bad data (e.g. a duplicated reading) fails that building only and the others go on.
"""

from __future__ import annotations

from datetime import date, timedelta
from pathlib import Path

import duckdb
import pandas as pd

from tasks.errors import BuildingDataError
from tasks.protocol.batch import BuildingInfo, BuildingJob, failed_results
from tasks.protocol.bid_check import NEW_BUILDING_HOURS, history_hours
from tasks.protocol.config import ForecastConfig
from tasks.protocol.forecasting import BuildingWeekResult
from tasks.protocol.plausible_level import Yardstick, fleet_yardstick
from tasks.protocol.track_record import RECORD_WEEKS
from tasks.protocol.weeks import local_midnight_utc
from tasks.warehouse.connection import connect
from tasks.warehouse.hours import (
    fleet_levels,
    load_building_hours_by_id,
    load_buildings_info,
)
from tasks.warehouse.meter_flags import load_flagged_hours
from tasks.warehouse.results import (
    load_issued_forecasts,
    load_issued_history,
    load_recent_forecasts,
    load_stored_params,
    load_track_record,
)


def load_jobs(
    warehouse: str | Path, ids: list[str], weeks: list[date], config: ForecastConfig,
    lock_wait_s: float | None = None,
) -> list[BuildingJob]:
    """One batch's jobs: hours from the history of the first week (the longest any of the run's
    models reads, with its features' lookback) through the end of the last (the usable
    readings: a flagged one is missing, and listed in the job's ``flagged_hours``),
    the building's scores of the weeks before the first (its track record), the forecasts its
    base models issued for the history's weeks (what models stacked on them correct), and (under
    ``tuning="reuse"``) the latest stored tuning per model and the forecasts issued for the
    week before the first, which its validation can use instead of fitting again. A locked
    warehouse is waited for at most ``lock_wait_s`` (default: a minute of retries)."""
    with connect(warehouse, read_only=True, wait_s=lock_wait_s) as con:
        infos = load_buildings_info(con, ids)
        tz = next(iter(infos.values())).timezone
        start, _ = config.load_range(weeks[0], tz)
        _, end = config.load_range(weeks[-1], tz)
        # A day of slack on both sides covers buildings in other time zones of the batch.
        hours = load_building_hours_by_id(con, ids, start - timedelta(days=1),
                                          end + timedelta(days=1))
        flagged = load_flagged_hours(con, ids, start - timedelta(days=1), end + timedelta(days=1))
        reuse = config.tuning == "reuse"
        stored = load_stored_params(con, ids, config.models, weeks[0]) if reuse else {}
        issued = (load_issued_forecasts(con, ids, weeks[0] - timedelta(weeks=1), config)
                  if reuse else {})
        record = load_track_record(con, ids, weeks[0], max(
            RECORD_WEEKS, config.record_weeks, config.quantile_record_weeks))
        recent = load_recent_forecasts(
            con, ids, weeks[0] - timedelta(weeks=config.quantile_record_weeks), weeks[0])
        history = (load_issued_history(con, ids, config.base_models,
                                       weeks[0] - timedelta(weeks=config.history_weeks),
                                       weeks[0]) if config.base_models else {})
        fleet = _fleet_if_new(con, hours, infos, weeks[0], config)
    return [
        BuildingJob(info=infos[bid], hours=frame, weeks=tuple(weeks),
                    stored_params=stored.get(bid, {}), track_record=record.get(bid, {}),
                    issued=issued.get(bid, {}), issued_history=history.get(bid, {}),
                    recent_forecasts=recent.get(bid, {}), fleet=fleet,
                    **({"flagged_hours": flagged[bid]} if bid in flagged else {}))
        for bid, frame in hours.items()
    ]


def _fleet_if_new(con: duckdb.DuckDBPyConnection, hours: dict[str, pd.DataFrame],
                  infos: dict[str, BuildingInfo], week: date,
                  config: ForecastConfig) -> Yardstick | None:
    """The fleet's yardstick over the history before ``week``, read only when a building of
    the read is new then (:data:`~tasks.protocol.bid_check.NEW_BUILDING_HOURS`): the other
    buildings' forecasts are judged against their own history, and the fleet's levels cost a
    scan of every building's weeks."""
    new = any(history_hours(frame, week, infos[bid].timezone, config.history_weeks)
              < NEW_BUILDING_HOURS for bid, frame in hours.items())
    if not new:
        return None
    start = local_midnight_utc(week, next(iter(infos.values())).timezone)
    return fleet_yardstick(fleet_levels(con, start - timedelta(weeks=config.history_weeks),
                                        start, NEW_BUILDING_HOURS))


def load_batch(
    warehouse: str | Path, ids: list[str], weeks: list[date], config: ForecastConfig,
    lock_wait_s: float | None = None,
) -> tuple[list[BuildingJob], list[BuildingWeekResult]]:
    """Jobs for the buildings whose data can be read, ``failed`` results for the others."""
    try:
        return load_jobs(warehouse, ids, weeks, config, lock_wait_s), []
    except BuildingDataError as exc:
        if len(ids) == 1:
            return [], failed_results(ids[0], weeks, exc)
    singles = [load_batch(warehouse, [building_id], weeks, config, lock_wait_s)
               for building_id in ids]
    return ([job for jobs, _ in singles for job in jobs],
            [result for _, failed in singles for result in failed])
