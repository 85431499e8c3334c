"""Short runs far above a building's own level in ``building_data_quality``: a meter stuck high
for three hours (the trial's 5.6 times its 99th percentile, under the spike threshold and far
shorter than a 24-hour flat line), a lone high hour, a stuck run at 2.5 times the percentile,
and the ordinary flat runs a real meter shows, which must stay unflagged."""

from __future__ import annotations

import math
from datetime import datetime, timedelta, timezone

import pytest

from tasks.warehouse.connection import connect
from tasks.warehouse.schema import (
    HIGH_RATIO,
    SPIKE_RATIO,
    STUCK_RATIO,
    ensure_schema,
)
from tests.rows import insert_rows

T0 = datetime(2024, 1, 1, tzinfo=timezone.utc)
HOURS = 2000


def _base(h: int) -> float:
    return 100.0 + (h % 7) * 5.0  # 100 .. 130, consecutive hours always differ


def _p99(values: list[float]) -> float:
    ranked = sorted(values)
    return ranked[math.ceil(0.99 * len(ranked)) - 1]  # nearest rank, as the view


def _write(path, buildings: dict[str, dict[int, float]]) -> None:
    with connect(path) as con:
        ensure_schema(con)
        for building, rows in buildings.items():
            con.execute("INSERT INTO buildings (building_id, site_id, timezone, holiday_country, holiday_subdiv, building_type, source) VALUES (?, 's', 'UTC', 'GB', NULL, NULL, 't')",
                        [building])
            if rows:
                insert_rows(con, "meter_readings", ["building_id", "ts", "kwh"],
                            [[building, T0 + timedelta(hours=h), v] for h, v in rows.items()])


def _row(path, building: str) -> dict:
    with connect(path, read_only=True) as con:
        frame = con.execute("SELECT * FROM building_data_quality WHERE building_id = ?",
                            [building]).df()
    return frame.iloc[0].to_dict()


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    p99 = 130.0  # the base's top value: 2/7 of the hours, so every odd reading sits above it
    stuck = {h: 5.6 * p99 for h in range(500, 503)}  # 728 kWh for 3 hours
    lone = {900: 4.0 * p99}
    stuck_lower = {h: 2.5 * p99 for h in range(1200, 1203)}  # stuck, not high
    ordinary_flat = {h: 110.0 for h in range(1500, 1506)}  # 6 h at its own level
    broken = {1700: 3.5 * p99, 1702: 3.5 * p99}  # two high hours, not consecutive
    rows = {h: _base(h) for h in range(HOURS)}
    trial = {**rows, **stuck, **lone, **stuck_lower, **ordinary_flat, **broken}
    path = tmp_path_factory.mktemp("level") / "w.duckdb"
    _write(path, {"trial": trial, "plain": {**rows, **ordinary_flat}})
    assert _p99(list(trial.values())) == p99
    return path


def test_a_three_hour_stuck_reading_far_above_the_level_is_flagged(fleet):
    row = _row(fleet, "trial")
    assert 5.6 < SPIKE_RATIO and row["spike_readings"] == 0  # what the trial missed
    assert row["flat_runs_24h"] == 0
    # 3 stuck + 1 lone + 2 broken hours above 3 x p99; the 2.5 x run is under it
    assert HIGH_RATIO == 3 and row["high_readings"] == 6
    assert row["high_runs"] == 1  # the stuck run; the lone and broken hours are not runs
    assert row["longest_high_hours"] == 3
    # the 5.6 x and the 2.5 x runs are both stuck above 2 x p99; 110 kWh for 6 h is not
    assert STUCK_RATIO == 2 and row["stuck_high_runs"] == 2


def test_ordinary_flat_runs_at_the_buildings_own_level_are_not_flagged(fleet):
    row = _row(fleet, "plain")
    assert row["longest_flat_hours"] == 6
    assert (row["high_readings"], row["high_runs"], row["longest_high_hours"],
            row["stuck_high_runs"]) == (0, 0, 0, 0)


def test_a_building_without_readings_has_zero_counts(tmp_path):
    _write(tmp_path / "w.duckdb", {"silent": {}, "other": {0: 1.0}})
    row = _row(tmp_path / "w.duckdb", "silent")
    assert (row["high_readings"], row["high_runs"], row["longest_high_hours"],
            row["stuck_high_runs"]) == (0, 0, 0, 0)
