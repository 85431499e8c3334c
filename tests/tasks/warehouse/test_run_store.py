"""The storage steps of a run wait for a locked warehouse as long as the run allows
(``--lock-wait-minutes``), inside the connection, and are not retried on top of that."""

from __future__ import annotations

import pytest
from prefect import flow

from tasks import forecast_tasks
from tasks.forecast_tasks import OpenRun, read_batches
from tasks.protocol.config import ForecastConfig
from tasks.warehouse.connection import WarehouseLockedError
from tasks.warehouse.hours import DuplicateRowError

RUN = OpenRun(run_id="r", warehouse="w.duckdb", label="test", weeks=(), building_ids=("a",),
              config=ForecastConfig(models=("seasonal_naive",)), lock_wait_s=42.0)


def _flaky(errors: list[Exception]):
    calls = []

    def load_batches(warehouse, groups, weeks, config, lock_wait_s):
        calls.append((groups, lock_wait_s))
        if len(calls) <= len(errors):
            raise errors[len(calls) - 1]
        return [([], []) for _ in groups]

    return load_batches, calls


def _read_in_a_flow():
    @flow
    def reading():
        return read_batches(RUN, [["a"]])

    return reading()


def test_a_batch_is_read_waiting_as_long_as_the_run_allows(monkeypatch, prefect_backend):
    load, calls = _flaky([])
    monkeypatch.setattr(forecast_tasks, "load_batches", load)
    batch = _read_in_a_flow()
    assert calls == [([["a"]], 42.0)]
    assert len(batch) == 1 and batch[0].jobs == [] and batch[0].label == "a+0"


def test_a_warehouse_still_locked_after_that_wait_is_not_retried(monkeypatch, prefect_backend):
    load, calls = _flaky([WarehouseLockedError("locked")])
    monkeypatch.setattr(forecast_tasks, "load_batches", load)
    with pytest.raises(WarehouseLockedError):
        _read_in_a_flow()
    assert len(calls) == 1


def test_other_errors_are_not_retried(monkeypatch, prefect_backend):
    load, calls = _flaky([DuplicateRowError("twice")])
    monkeypatch.setattr(forecast_tasks, "load_batches", load)
    with pytest.raises(DuplicateRowError):
        _read_in_a_flow()
    assert len(calls) == 1


def test_batches_cover_every_building_once():
    run = OpenRun(run_id="r", warehouse="w", label="x", weeks=(), building_ids=tuple("abcde"),
                  config=RUN.config)
    assert list(run.batches(2)) == [["a", "b"], ["c", "d"], ["e"]]
