"""An export is written as it is made, a chunk of buildings or portfolios at a time (issue 49:
a fleet's file in bounded memory): the file is the same bytes as the whole written at once, CSV
and Parquet (whose row groups are cut where pyarrow cuts the whole), across clock changes.

DuckDB runs on one thread here: a portfolio's sums over its buildings, added in parallel, may
differ in their last bit from one run to the next (before and after issue 49 alike)."""

from __future__ import annotations

import io
from contextlib import contextmanager

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import tasks.outputs.export as export
from tasks.warehouse.connection import connect
from tests.tasks.outputs.test_export import AUTUMN, SPRING, warehouse  # noqa: F401


@pytest.fixture(scope="module")
def with_portfolios(warehouse):  # noqa: F811
    with connect(warehouse) as con:
        con.execute("INSERT INTO portfolios VALUES ('north', 'shaped'), ('south', 'hourly'), "
                    "('south', 'shaped'), ('twin', 'hourly'), ('twin', 'shaped')")
    return warehouse


@contextmanager
def _one_thread(*args, **kwargs):
    with connect(*args, **kwargs) as con:
        con.execute("SET threads = 1")
        yield con


@pytest.mark.parametrize("week", [SPRING, AUTUMN])
@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
@pytest.mark.parametrize("portfolios", [None, ["twin", "all", "north", "south"]])
def test_a_file_written_chunk_by_chunk_is_the_file_written_at_once(
        with_portfolios, tmp_path, monkeypatch, week, suffix, portfolios):
    monkeypatch.setattr(export, "ROW_GROUP", 100)  # 1,000 half-hours: 10 row groups and a part
    monkeypatch.setattr(export, "connect", _one_thread)
    files = {}
    for chunk in (10**6, 1):
        monkeypatch.setattr(export, "EXPORT_CHUNK", chunk)
        files[chunk] = tmp_path / f"{chunk}{suffix}"
        summary = export.export_forecasts(with_portfolios, files[chunk], week=week,
                                          resolution=30, portfolios=portfolios)
        assert summary.ids == (4 if portfolios else 3)
    streamed = files[1].read_bytes()
    if suffix == ".csv":
        assert streamed == files[10**6].read_bytes()
        return
    monkeypatch.setattr(export, "EXPORT_CHUNK", 10**6)
    with _one_thread(with_portfolios, read_only=True) as con:
        whole = (export._portfolio_rows(con, sorted(portfolios), week, 30) if portfolios else
                 next(export._building_rows(con, ["=HYPERLINK(1)", "hourly", "shaped"], week, 30)))
    at_once = io.BytesIO()
    pq.write_table(pa.Table.from_pandas(whole, preserve_index=False), at_once,
                   row_group_size=100)
    assert pq.ParquetFile(io.BytesIO(streamed)).metadata.num_row_groups > 1
    assert streamed == at_once.getvalue()
