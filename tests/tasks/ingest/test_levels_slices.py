"""A large file's levels are judged a slice of whole buildings at a time, with the same result
as one aggregate (issue 60: the ingest's peak memory)."""

from __future__ import annotations

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa

from tasks.ingest import levels
from tasks.ingest.readings_file import READINGS_SCHEMA


def _hours(ids: list[str], start: str, n: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    ts = pd.date_range(start, periods=n, freq="h", tz="UTC")
    frame = pd.DataFrame({"building_id": np.repeat(ids, n), "ts": np.tile(ts, len(ids)),
                          "kwh": rng.gamma(2.0, 10.0, len(ids) * n)})
    frame.loc[::97, "kwh"] = np.nan
    return pa.Table.from_pandas(frame, schema=READINGS_SCHEMA, preserve_index=False)


def test_slices_of_whole_buildings_give_the_levels_of_one_aggregate(monkeypatch):
    ids = [f"b{i}" for i in range(7)]
    con = duckdb.connect()
    con.execute("CREATE TABLE meter_readings (building_id VARCHAR, ts TIMESTAMPTZ, kwh DOUBLE)")
    stored = _hours(ids[:5], "2024-01-01", 24 * 20, seed=1)  # five buildings have history
    con.register("stored", stored)
    con.execute("INSERT INTO meter_readings SELECT building_id::VARCHAR, ts, kwh FROM stored")
    file = _hours(list(reversed(ids)), "2024-01-21", 24 * 7, seed=2)
    whole = levels._levels(con, file)
    monkeypatch.setattr(levels, "LEVEL_ROWS", 300)  # two buildings' hours a slice
    con.register("__wadiro_file_hours", file)
    assert levels._slices(con) == [["b0", "b1"], ["b2", "b3"], ["b4", "b5"], ["b6"]]
    con.unregister("__wadiro_file_hours")
    assert levels._levels(con, file) == whole
    assert [level.building_id for level in whole] == sorted(ids)
    assert whole[0].stored_hours > 0 and whole[-1].stored_hours == 0
