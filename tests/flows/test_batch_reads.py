"""A run reads several batches in one connection: each gets the jobs its own read would give,
and a building whose data cannot be read fails alone, whichever read it was part of."""

from __future__ import annotations

import pandas as pd
import pytest

from flows import forecast
from flows.engine import run_flow
from flows.forecast import backfill_flow
from flows.settings import BackfillSettings
from tasks.protocol.config import ForecastConfig
from tasks.warehouse.batches import load_batch
from tasks.warehouse.connection import connect
from tasks.warehouse.run_store import OpenRun, RunStore
from tests.flows.warehouse_rows import WEEKS, make_warehouse, result_rows

IDS = [f"synthetic_b0000{n}" for n in range(3)]
CONFIG = ForecastConfig(models=("seasonal_naive",))


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory):
    return make_warehouse(tmp_path_factory.mktemp("reads") / "w.duckdb", buildings=3)


def _read(warehouse, groups):
    """``groups`` read as a run reads its batches: (jobs, failed results) of each."""
    run = OpenRun(run_id="r", label="test", weeks=(WEEKS[0],),
                  building_ids=tuple(b for ids in groups for b in ids), config=CONFIG)
    return [(batch.jobs, batch.unreadable)
            for batch in RunStore(str(warehouse)).read_batches(run, groups)]


def _same_jobs(one, other) -> None:
    assert [j.info for j in one] == [j.info for j in other]
    for a, b in zip(one, other):
        pd.testing.assert_frame_equal(a.hours, b.hours)
        assert (a.weeks, a.stored_params, a.track_record) == (b.weeks, b.stored_params,
                                                              b.track_record)


def test_batches_read_together_get_what_each_read_alone_gets(warehouse):
    groups = [[IDS[2], IDS[0]], [IDS[1]]]
    together = _read(warehouse, groups)
    assert len(together) == 2
    for ids, (jobs, failed) in zip(groups, together):
        alone, alone_failed = load_batch(warehouse, ids, [WEEKS[0]], CONFIG)
        assert failed == alone_failed == []
        _same_jobs(jobs, alone)
    assert {j.info.building_id for j in together[0][0]} == {IDS[0], IDS[2]}


def test_a_building_with_a_duplicated_reading_fails_alone_in_a_shared_read(tmp_path):
    path = make_warehouse(tmp_path / "dup.duckdb", buildings=3)
    with connect(path) as con:
        con.execute("INSERT INTO meter_readings SELECT * FROM meter_readings "
                    f"WHERE building_id = '{IDS[1]}' LIMIT 1")
    (jobs_a, failed_a), (jobs_b, failed_b) = _read(path, [[IDS[0], IDS[1]], [IDS[2]]])
    assert [j.info.building_id for j in jobs_a] == [IDS[0]] and failed_b == []
    assert [r.building_id for r in failed_a] == [IDS[1]]
    assert failed_a[0].status == "failed" and "DuplicateRowError" in failed_a[0].reason
    assert [j.info.building_id for j in jobs_b] == [IDS[2]]


def test_a_run_reading_one_batch_at_a_time_writes_the_same_rows(tmp_path, monkeypatch):
    """Batches of one building, read all at once or one by one: the same rows."""
    together = make_warehouse(tmp_path / "together.duckdb", buildings=3)
    one_by_one = make_warehouse(tmp_path / "one.duckdb", buildings=3)
    settings = {"models": ["seasonal_naive", "wadiro_linreg"], "trials": 1, "batch_size": 1,
                "runner": "threads", "workers": 1}
    runs = []
    for path, per_read in ((together, forecast.READ_BUILDINGS), (one_by_one, 1)):
        monkeypatch.setattr(forecast, "READ_BUILDINGS", per_read)
        reads = []
        monkeypatch.setattr(RunStore, "read_batches", _counting(RunStore.read_batches, reads))
        runs.append(run_flow(backfill_flow, prefect=False, start=WEEKS[0], end=WEEKS[0],
                             settings=BackfillSettings(warehouse=str(path), **settings)))
        assert reads == ([3] if per_read > 1 else [1, 1, 1])
    assert all(run.ok == 3 for run in runs)
    assert result_rows(together) == result_rows(one_by_one)


def _counting(step, reads: list[int]):
    def read(store, run, groups):
        reads.append(len(groups))
        return step(store, run, groups)

    return read
