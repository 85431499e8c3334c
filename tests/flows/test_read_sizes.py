"""A large fleet is read in larger pieces (issue 49): each read scans tables that grow with the
fleet, so a run reads a twentieth of its buildings at a time when that is more than
``READ_BUILDINGS`` (here, scaled down: a fleet of 3 read whole, batch by batch before)."""

from __future__ import annotations

from flows import forecast
from flows.engine import run_flow
from flows.forecast import backfill_flow
from flows.settings import BackfillSettings
from tasks.warehouse.run_store import RunStore
from tests.flows.test_batch_reads import _counting
from tests.flows.warehouse_rows import WEEKS, make_warehouse


def test_a_fleet_larger_than_twenty_reads_is_read_in_twenty(tmp_path, monkeypatch):
    path = make_warehouse(tmp_path / "w.duckdb", buildings=3)
    settings = BackfillSettings(warehouse=str(path), models=["seasonal_naive"], batch_size=1,
                                runner="threads", workers=1)
    monkeypatch.setattr(forecast, "READ_BUILDINGS", 1)
    for reads_per_run, expected in ((20, [1, 1, 1]), (1, [3])):
        monkeypatch.setattr(forecast, "READS_PER_RUN", reads_per_run)
        reads: list[int] = []
        monkeypatch.setattr(RunStore, "read_batches", _counting(RunStore.read_batches, reads))
        run = run_flow(backfill_flow, prefect=False, start=WEEKS[0], end=WEEKS[0],
                       settings=settings)
        assert run.ok == 3 and reads == expected
