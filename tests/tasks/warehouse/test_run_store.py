"""A run's storage steps wait for a locked warehouse as long as the run allows
(``--lock-wait-minutes``), inside the connection, and are not retried on top of that."""

from __future__ import annotations

import pytest

from tasks.protocol.config import ForecastConfig
from tasks.warehouse import run_store
from tasks.warehouse.connection import WarehouseLockedError
from tasks.warehouse.hours import DuplicateRowError
from tasks.warehouse.run_store import OpenRun, RunStore

RUN = OpenRun(run_id="r", label="test", weeks=(), building_ids=("a",),
              config=ForecastConfig(models=("seasonal_naive",)))
STORE = RunStore("w.duckdb", lock_wait_s=42.0)


def _flaky(errors: list[Exception]):
    calls = []

    def load_batch(warehouse, ids, weeks, config, lock_wait_s):
        calls.append((warehouse, ids, lock_wait_s))
        if len(calls) <= len(errors):
            raise errors[len(calls) - 1]
        return [], []

    return load_batch, calls


def test_a_batch_is_read_waiting_as_long_as_the_run_allows(monkeypatch):
    load, calls = _flaky([])
    monkeypatch.setattr(run_store, "load_batch", load)
    batch = STORE.read_batches(RUN, [["a"]])
    assert calls == [("w.duckdb", ["a"], 42.0)]
    assert len(batch) == 1 and batch[0].jobs == [] and batch[0].label == "a+0"


def test_a_warehouse_still_locked_after_that_wait_is_not_retried(monkeypatch):
    load, calls = _flaky([WarehouseLockedError("locked")])
    monkeypatch.setattr(run_store, "load_batch", load)
    with pytest.raises(WarehouseLockedError):
        STORE.read_batches(RUN, [["a"]])
    assert len(calls) == 1


def test_other_errors_are_not_retried(monkeypatch):
    load, calls = _flaky([DuplicateRowError("twice")])
    monkeypatch.setattr(run_store, "load_batch", load)
    with pytest.raises(DuplicateRowError):
        STORE.read_batches(RUN, [["a"]])
    assert len(calls) == 1


def test_batches_cover_every_building_once():
    run = OpenRun(run_id="r", label="x", weeks=(), building_ids=tuple("abcde"),
                  config=RUN.config)
    assert list(run.batches(2)) == [["a", "b"], ["c", "d"], ["e"]]
