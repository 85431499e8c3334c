"""Reading a batch of buildings' inputs for the protocol: their hours, infos and stored tuning.

One short read-only connection per batch. A batch whose data cannot be read is retried
building by building, so one building's bad data (e.g. a duplicated reading) fails that
building only and the others go on.
"""

from __future__ import annotations

from datetime import date, timedelta
from pathlib import Path

from wadiro_fleet.tasks.errors import BuildingDataError
from wadiro_fleet.tasks.protocol.batch import BuildingJob, failed_results
from wadiro_fleet.tasks.protocol.config import ForecastConfig
from wadiro_fleet.tasks.protocol.forecasting import BuildingWeekResult
from wadiro_fleet.tasks.protocol.windows import window_load_range
from wadiro_fleet.tasks.warehouse.connection import connect
from wadiro_fleet.tasks.warehouse.hours import (
    load_buildings_info,
    load_many_building_hours,
)
from wadiro_fleet.tasks.protocol.track_record import RECORD_WEEKS
from wadiro_fleet.tasks.warehouse.results import (
    load_issued_forecasts,
    load_stored_params,
    load_track_record,
)


def load_jobs(
    warehouse: str | Path, ids: list[str], weeks: list[date], config: ForecastConfig,
    lock_wait_s: float | None = None,
) -> list[BuildingJob]:
    """One batch's jobs: hours from the history of the first week through the end of the last,
    the building's scores of the weeks before the first (its track record), and (under
    ``tuning="reuse"``) the latest stored tuning per model and the forecasts issued for the
    week before the first, which its validation can use instead of fitting again. A locked
    warehouse is waited for at most ``lock_wait_s`` (default: a minute of retries)."""
    with connect(warehouse, read_only=True, wait_s=lock_wait_s) as con:
        infos = load_buildings_info(con, ids)
        tz = next(iter(infos.values())).timezone
        start, _ = window_load_range(weeks[0], tz, history_weeks=config.history_weeks,
                                     feature_set=config.feature_set)
        _, end = window_load_range(weeks[-1], tz, history_weeks=config.history_weeks,
                                   feature_set=config.feature_set)
        # A day of slack on both sides covers buildings in other time zones of the batch.
        hours = load_many_building_hours(con, ids, start - timedelta(days=1), end + timedelta(days=1))
        reuse = config.tuning == "reuse"
        stored = load_stored_params(con, ids, config.models, weeks[0]) if reuse else {}
        issued = (load_issued_forecasts(con, ids, weeks[0] - timedelta(weeks=1), config)
                  if reuse else {})
        record = load_track_record(con, ids, weeks[0], max(RECORD_WEEKS, config.record_weeks))
    return [
        BuildingJob(info=infos[bid], hours=frame.drop(columns="building_id").reset_index(drop=True),
                    weeks=tuple(weeks), stored_params=stored.get(bid, {}),
                    track_record=record.get(bid, {}), issued=issued.get(bid, {}))
        for bid, frame in hours.groupby("building_id", sort=False)
    ]


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
    jobs: list[BuildingJob] = []
    failed: list[BuildingWeekResult] = []
    for building_id in ids:
        more_jobs, more_failed = load_batch(warehouse, [building_id], weeks, config, lock_wait_s)
        jobs += more_jobs
        failed += more_failed
    return jobs, failed


__all__ = ["load_batch", "load_jobs"]
