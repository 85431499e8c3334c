"""``wadiro ingest readings`` of a half-hourly meter export keeps each building's own intra-hour
shape, and ``wadiro export --resolution 30|15`` then splits its hours by it: a building whose
first half-hours carry 60 % of each hour exports 0.6/0.4 shares, one whose readings came hourly
splits evenly."""

from __future__ import annotations

from datetime import date

import duckdb
import numpy as np
import pandas as pd
import pytest

from flows import engine
from tests.cli_runs import invoke
from tests.rows import FORECAST_COLUMNS, insert_rows

MORNING, EVENING, HOURLY = "morning", "evening", "hourly"
"""Half-hourly buildings whose first half-hour carries 60 % (MORNING) or 25 % (EVENING) of
every hour, and one whose readings come hourly."""
FIRST_HALF = {MORNING: 0.6, EVENING: 0.25}
DAYS = 14
"""Days of readings: more than the 7 complete hours per hour of the day a shape needs."""
WEEK = date(2024, 2, 12)
"""The published week, the Monday after the readings (no clock change near it)."""


def _hour_energies() -> tuple[pd.DatetimeIndex, np.ndarray]:
    hours = pd.date_range("2024-01-29", periods=24 * DAYS, freq="h", tz="UTC")
    return hours, 10.0 + np.arange(len(hours)) % 24  # 10..33 kWh, by hour of the day


def _half_hourly_csv() -> str:
    """A wide export: ts and one column per building, each hour's energy split by its shape."""
    hours, energy = _hour_energies()
    lines = [f"ts,{MORNING},{EVENING}"]
    for hour, kwh in zip(hours, energy):
        for minute, part in ((0, lambda s: s), (30, lambda s: 1 - s)):
            cells = [repr(float(part(FIRST_HALF[b]) * kwh)) for b in (MORNING, EVENING)]
            lines.append(f"{hour + pd.Timedelta(minutes=minute):%Y-%m-%dT%H:%MZ},{','.join(cells)}")
    return "\n".join(lines) + "\n"


def _hourly_csv() -> str:
    hours, energy = _hour_energies()
    return f"ts,{HOURLY}\n" + "".join(f"{h:%Y-%m-%dT%H:%MZ},{float(e)!r}\n"
                                      for h, e in zip(hours, energy))


def _publish(warehouse, buildings) -> None:
    """A published forecast of :data:`WEEK` per building (London hours, none across a clock
    change: 168 of them)."""
    hours = pd.date_range(pd.Timestamp(WEEK, tz="Europe/London"), periods=168, freq="h")
    with duckdb.connect(str(warehouse)) as con:
        for b in buildings:
            con.execute("INSERT INTO publications (building_id, target_week, model, reason, "
                        "expected_ratio, run_id) VALUES (?, ?, 'gp', 't', 0.9, 'r')", [b, WEEK])
            insert_rows(con, "forecasts", FORECAST_COLUMNS,
                        [[b, "gp", WEEK, t.to_pydatetime(), y, "r", y - 1, y + 1, y - 2, y + 2]
                         for t, y in zip(hours, 20 + 5 * np.sin(np.arange(168) / 7))])


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory):
    """Three buildings ingested through the command line, then a week published for each."""
    folder = tmp_path_factory.mktemp("intra_hour")
    path = folder / "w.duckdb"
    (folder / "b.csv").write_text("building_id,site_id,timezone,holiday_country\n" + "".join(
        f"{b},s,Europe/London,GB\n" for b in (MORNING, EVENING, HOURLY)))
    (folder / "half.csv").write_text(_half_hourly_csv())
    (folder / "hourly.csv").write_text(_hourly_csv())
    steps = ((("buildings", folder / "b.csv"), "wrote 3 building(s)"),
             (("readings", folder / "half.csv"),
              f"wrote {2 * 24 * DAYS:,} hourly readings from 30-minute readings"),
             (("readings", folder / "hourly.csv"), f"wrote {24 * DAYS} hourly readings"))
    with pytest.MonkeyPatch.context() as patch:  # as the no_prefect_server fixture does
        patch.setattr(engine, "configured_api_url", lambda: "")
        for args, says in steps:
            result = invoke("ingest", *args, "--warehouse", path)
            assert result.exit_code == 0 and says in result.output, result.output
    _publish(path, (MORNING, EVENING, HOURLY))
    return path


def _stored(warehouse) -> pd.DataFrame:
    with duckdb.connect(str(warehouse), read_only=True) as con:
        frame = con.execute("SELECT building_id, ts, minutes, kwh FROM sub_hourly_readings "
                            "ORDER BY building_id, ts").df()
    frame["ts"] = pd.to_datetime(frame["ts"], utc=True)
    return frame


def _shares(warehouse, tmp_path, resolution: int) -> pd.DataFrame:
    """The exported periods, each with its share of its hour's forecast."""
    out = tmp_path / f"e{resolution}.csv"
    result = invoke("export", "--out", out, "--resolution", resolution, "--week", WEEK,
                    "--warehouse", warehouse)
    assert result.exit_code == 0, result.output
    rows = pd.read_csv(out)
    start = pd.to_datetime(rows["period_start_utc"], utc=True)
    rows["hour"], rows["minute"] = start.dt.floor("h"), start.dt.minute
    rows["share"] = rows["y_hat"] / rows.groupby(["building_id", "hour"])["y_hat"].transform("sum")
    return rows


def test_the_ingest_stores_the_half_hours_of_a_half_hourly_file_only(warehouse):
    stored = _stored(warehouse)
    hours, energy = _hour_energies()
    assert set(stored["building_id"]) == {MORNING, EVENING}  # nothing of the hourly file
    assert (stored["minutes"] == 30).all()
    for building, first in FIRST_HALF.items():
        mine = stored[stored["building_id"] == building]
        assert mine["ts"].tolist() == sorted([*hours, *(hours + pd.Timedelta(minutes=30))])
        firsts = mine[mine["ts"].dt.minute == 0]["kwh"].to_numpy()
        assert np.allclose(firsts, first * energy, rtol=1e-12)
        assert np.isclose(mine["kwh"].sum(), energy.sum(), rtol=1e-12)


def test_half_hours_split_by_each_buildings_own_profile_and_evenly_for_hourly_readings(
        warehouse, tmp_path):
    rows = _shares(warehouse, tmp_path, 30)
    assert rows.groupby("building_id").size().to_dict() == {b: 2 * 168 for b in
                                                           (MORNING, EVENING, HOURLY)}
    for building, first in {**FIRST_HALF, HOURLY: 0.5}.items():
        mine = rows[rows["building_id"] == building]
        assert np.allclose(mine[mine["minute"] == 0]["share"], first, atol=1e-12), building
        assert np.allclose(mine[mine["minute"] == 30]["share"], 1 - first, atol=1e-12), building


def test_quarter_hours_split_each_stored_half_hour_evenly(warehouse, tmp_path):
    rows = _shares(warehouse, tmp_path, 15)
    morning = rows[rows["building_id"] == MORNING].groupby("minute")["share"]
    assert np.allclose(morning.min(), [0.3, 0.3, 0.2, 0.2], atol=1e-12)
    assert np.allclose(morning.max(), [0.3, 0.3, 0.2, 0.2], atol=1e-12)
    assert np.allclose(rows[rows["building_id"] == HOURLY]["share"], 0.25, atol=1e-12)


def test_ingesting_the_same_file_again_keeps_the_same_rows(warehouse, tmp_path,
                                                          no_prefect_server):
    before = _stored(warehouse)
    (tmp_path / "half.csv").write_text(_half_hourly_csv())
    result = invoke("ingest", "readings", tmp_path / "half.csv", "--warehouse", warehouse)
    assert result.exit_code == 0, result.output
    pd.testing.assert_frame_equal(_stored(warehouse), before)
