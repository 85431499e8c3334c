"""The ``building_data_quality`` view against facts computed by hand and by a plain-Python
recomputation: gaps of missing rows and of absent hours, flat lines, zero and negative runs,
spikes far above a building's own level, a building without readings, one that stopped
reporting and one that started late."""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from datetime import datetime, timedelta, timezone
from pathlib import Path

import duckdb
import pandas as pd
import pytest

from tasks.errors import EmptySelectionError, UnknownBuildingError
from tasks.warehouse.connection import connect
from tasks.warehouse.quality import data_quality
from tasks.warehouse.schema import QUALITY_WINDOW_HOURS, ensure_schema
from tests.cli_runs import invoke

T0 = datetime(2024, 1, 1, tzinfo=timezone.utc)
SPAN = 14 * 168  # hours 0 .. 2351; the 12-week period is hours 336 .. 2351
LAST = SPAN - 1
PERIOD_START = LAST - QUALITY_WINDOW_HOURS + 1

Hours = dict[int, float | None]
"""A building's stored rows: hour index (from T0) -> kwh (None: a row holding NULL)."""


def base(h: int) -> float:
    """A load whose consecutive hours always differ (10.0 .. 13.0 kWh)."""
    return 10.0 + (h % 7) * 0.5


def full(drop: range | tuple = (), null: range | tuple = (), **runs: tuple[range, float]) -> Hours:
    """Every hour 0 .. LAST at :func:`base`, some hours absent (``drop``), some NULL rows
    (``null``), and runs of given values."""
    rows: Hours = {h: base(h) for h in range(SPAN)}
    for hours, value in runs.values():
        rows.update({h: value for h in hours})
    rows.update({h: None for h in null})
    for h in drop:
        rows.pop(h)
    return rows


FLEET: dict[str, Hours] = {
    # complete, no two equal consecutive hours
    "steady": full(),
    # NULL rows 100-104, absent hours 200-209, a gap of NULL rows then absent hours 300-311
    # (the longest: 12), absent hours 2300-2303 in the last 12 weeks
    "gappy": full(drop=(*range(200, 210), *range(306, 312), *range(2300, 2304)),
                  null=(*range(100, 105), *range(300, 306))),
    # two gaps of 3 hours: the earlier one is reported
    "ties": full(drop=range(60, 63), null=range(50, 53)),
    # flat 30 h at 42 and 24 h at 7 (both count), 23 h at 8 (does not), 9.0 over 800-840 broken
    # by a missing hour (two runs of 20), zeros 900-947 (not flat) and a single zero at 1000
    "flat": full(null=(820,), a=(range(500, 530), 42.0), b=(range(600, 624), 7.0),
                 c=(range(700, 723), 8.0), d=(range(800, 841), 9.0),
                 z=(range(900, 948), 0.0), z1=(range(1000, 1001), 0.0)),
    # negatives: -1 .. -6 over 1200-1205, -5.0 over 1300-1304 (also a flat run of 5), -0.5 at
    # 1400, -1 at 1500 and 1502 around a missing hour
    "negative": {**full(drop=(1501,)), **{1200 + i: -1.0 - i for i in range(6)},
                 **{h: -5.0 for h in range(1300, 1305)}, 1400: -0.5, 1500: -1.0, 1502: -1.0},
    # a 999,999 kWh hour and a 200 kWh one in a load of 10 to 13 kWh (99th percentile 13.0):
    # both more than 10 times it; 120 kWh at hour 1800 is not
    "spiky": {**full(), 1600: 999_999.0, 1700: 200.0, 1800: 120.0},
    # stopped reporting after hour 1999; its export goes on with blank (NULL) rows
    "stopped": {h: (base(h) if h < 2000 else None) for h in range(SPAN)},
    # started at hour 2000, after ten NULL rows
    "late_starter": {h: (base(h) if h >= 2000 else None) for h in range(1990, SPAN)},
    # in the buildings table, never a reading: no rows, or NULL rows only
    "silent": {},
    "all_null": {h: None for h in range(0, 500)},
}

EXPECTED = {  # building -> the columns, by hand
    "steady": dict(first=0, last=LAST, readings=SPAN, missing_hours=0, since=0, missing_12w=0,
                   gap=0, gap_start=None, flat=0, flat24=0, zeros=0, zero_run=0, neg=0, neg_run=0),
    "spiky": dict(first=0, last=LAST, readings=SPAN, missing_hours=0, since=0, missing_12w=0,
                  gap=0, gap_start=None, flat=0, flat24=0, zeros=0, zero_run=0, neg=0, neg_run=0,
                  spikes=2, largest=999_999.0),
    "gappy": dict(first=0, last=LAST, readings=SPAN - 5 - 10 - 12 - 4, missing_hours=31, since=0,
                  missing_12w=4, gap=12, gap_start=300, flat=0, flat24=0, zeros=0, zero_run=0,
                  neg=0, neg_run=0),
    "ties": dict(first=0, last=LAST, readings=SPAN - 6, missing_hours=6, since=0, missing_12w=0,
                 gap=3, gap_start=50, flat=0, flat24=0, zeros=0, zero_run=0, neg=0, neg_run=0),
    "flat": dict(first=0, last=LAST, readings=SPAN - 1, missing_hours=1, since=0, missing_12w=1,
                 gap=1, gap_start=820, flat=30, flat24=2, zeros=49, zero_run=48, neg=0, neg_run=0),
    "negative": dict(first=0, last=LAST, readings=SPAN - 1, missing_hours=1, since=0,
                     missing_12w=1, gap=1, gap_start=1501, flat=5, flat24=0, zeros=0, zero_run=0,
                     neg=6 + 5 + 1 + 2, neg_run=6),
    "stopped": dict(first=0, last=1999, readings=2000, missing_hours=0, since=LAST - 1999,
                    missing_12w=LAST - 1999, gap=0, gap_start=None, flat=0, flat24=0, zeros=0,
                    zero_run=0, neg=0, neg_run=0),
    "late_starter": dict(first=2000, last=LAST, readings=SPAN - 2000, missing_hours=0, since=0,
                         missing_12w=2000 - PERIOD_START, gap=0, gap_start=None, flat=0, flat24=0,
                         zeros=0, zero_run=0, neg=0, neg_run=0),
    **{b: dict(first=None, last=None, readings=0, missing_hours=None, since=None,
               missing_12w=QUALITY_WINDOW_HOURS, gap=None, gap_start=None, flat=0, flat24=0,
               zeros=0, zero_run=0, neg=0, neg_run=0) for b in ("silent", "all_null")},
}

LARGEST = {"flat": 42.0, "silent": None, "all_null": None, "spiky": 999_999.0}
"""Each building's largest reading where it is not its load's 13.0."""
for _building, _expected in EXPECTED.items():
    _expected.setdefault("spikes", 0)
    _expected["largest"] = LARGEST.get(_building, 13.0)

WORST_FIRST = ["all_null", "silent", "late_starter", "stopped", "gappy", "flat", "negative",
               "spiky", "ties", "steady"]


def write_fleet(path: Path, fleet: Mapping[str, Hours], start: datetime = T0) -> Path:
    """A warehouse holding ``fleet``'s buildings and rows (rows in a shuffled order)."""
    rows = [(b, start + timedelta(hours=h), kwh) for b, hours in fleet.items()
            for h, kwh in hours.items()]
    random.Random(0).shuffle(rows)
    frame = pd.DataFrame(rows, columns=["building_id", "ts", "kwh"]).astype({"kwh": "float64"})
    with connect(path) as con:
        ensure_schema(con)
        for b in fleet:
            con.execute("INSERT INTO buildings (building_id, site_id, timezone, holiday_country, holiday_subdiv, building_type, source) VALUES (?, 's', 'UTC', 'GB', NULL, NULL, 'test')", [b])
        con.register("new_rows", frame)
        con.execute("INSERT INTO meter_readings SELECT building_id, ts, kwh FROM new_rows")
        con.unregister("new_rows")
    return path


def recompute(fleet: Mapping[str, Hours]) -> dict[str, dict]:
    """Every column, in plain Python over hour indices, with the view's definitions."""
    read = {b: sorted(h for h, v in hours.items() if v is not None) for b, hours in fleet.items()}
    everything = [h for hours in read.values() for h in hours]
    reference = max(everything, default=None)
    start = None if reference is None else max(min(everything), reference - QUALITY_WINDOW_HOURS + 1)
    out = {}
    for b, hours in read.items():
        value = {h: fleet[b][h] for h in hours}
        gaps = [(h2 - h1 - 1, h1 + 1) for h1, h2 in zip(hours, hours[1:]) if h2 - h1 > 1]
        longest = max(gaps, key=lambda g: (g[0], -g[1]), default=(0, None))
        runs: list[tuple[float, int]] = []  # (value, hours) of equal values in consecutive hours
        negative_runs: list[int] = []
        for i, h in enumerate(hours):
            follows = i > 0 and hours[i - 1] == h - 1
            if follows and value[h] == runs[-1][0]:
                runs[-1] = (value[h], runs[-1][1] + 1)
            else:
                runs.append((value[h], 1))
            if value[h] < 0:
                if follows and value[h - 1] < 0:
                    negative_runs[-1] += 1
                else:
                    negative_runs.append(1)
        flat = [n for v, n in runs if v != 0 and n >= 2]
        ranked = sorted(value.values())
        p99 = ranked[math.ceil(0.99 * len(ranked)) - 1] if ranked else None  # nearest rank
        out[b] = dict(
            first=hours[0] if hours else None, last=hours[-1] if hours else None,
            readings=len(hours),
            missing_hours=(hours[-1] - hours[0] + 1 - len(hours)) if hours else None,
            since=(reference - hours[-1]) if hours else None,
            missing_12w=None if reference is None else
            (reference - start + 1) - sum(start <= h <= reference for h in hours),
            gap=longest[0] if hours else None, gap_start=longest[1],
            flat=max(flat, default=0), flat24=sum(n >= 24 for n in flat),
            zeros=sum(v == 0 for v in value.values()),
            zero_run=max((n for v, n in runs if v == 0), default=0),
            neg=sum(v < 0 for v in value.values()), neg_run=max(negative_runs, default=0),
            spikes=sum(v > 10 * p99 for v in value.values()), largest=max(ranked, default=None))
    return out


def as_expected(row: pd.Series, period_hours: int, start: datetime = T0) -> dict:
    """A row of the view in the terms of :data:`EXPECTED` (hour indices, missing hours)."""
    def hour(ts):
        return None if pd.isna(ts) else int((ts - pd.Timestamp(start)) / pd.Timedelta(hours=1))

    def count(v):
        return None if pd.isna(v) else int(v)

    share = row["missing_share_12w"]
    return dict(
        first=hour(row["first_reading"]), last=hour(row["last_reading"]),
        readings=count(row["readings"]), missing_hours=count(row["missing_hours"]),
        since=count(row["hours_since_last_reading"]),
        missing_12w=None if pd.isna(share) else round(share * period_hours),
        gap=count(row["longest_gap_hours"]), gap_start=hour(row["longest_gap_start"]),
        flat=count(row["longest_flat_hours"]), flat24=count(row["flat_runs_24h"]),
        zeros=count(row["zero_readings"]), zero_run=count(row["longest_zero_hours"]),
        neg=count(row["negative_readings"]), neg_run=count(row["longest_negative_hours"]),
        spikes=count(row["spike_readings"]),
        largest=None if pd.isna(row["largest_reading"]) else float(row["largest_reading"]))


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory) -> Path:
    return write_fleet(tmp_path_factory.mktemp("quality") / "w.duckdb", FLEET)


@pytest.fixture(scope="module")
def view(warehouse) -> pd.DataFrame:
    with connect(warehouse, read_only=True) as con:
        return con.execute("SELECT * FROM building_data_quality").df().set_index("building_id")


def test_the_plain_recomputation_agrees_with_the_hand_counts():
    assert recompute(FLEET) == EXPECTED


@pytest.mark.parametrize("building", list(FLEET))
def test_every_column_equals_the_hand_count(view, building):
    assert as_expected(view.loc[building], QUALITY_WINDOW_HOURS) == EXPECTED[building]


def test_one_row_per_building_and_the_share_is_a_share_of_the_12_weeks(view):
    assert sorted(view.index) == sorted(FLEET)
    assert view.loc["stopped", "missing_share_12w"] == pytest.approx(352 / 2016)
    assert view.loc["gappy", "missing_share_12w"] == pytest.approx(4 / 2016)
    assert view.loc["silent", "missing_share_12w"] == 1.0
    assert view.loc["steady", "missing_share_12w"] == 0.0
    assert str(view["first_reading"].dtype).endswith("UTC]")


def test_worst_first_and_the_period(warehouse, view):
    with connect(warehouse, read_only=True) as con:
        quality = data_quality(con)
    assert list(quality.table["building_id"]) == WORST_FIRST
    assert quality.period_start == pd.Timestamp(T0 + timedelta(hours=PERIOD_START))
    assert quality.period_end == pd.Timestamp(T0 + timedelta(hours=LAST))
    assert quality.period_hours == QUALITY_WINDOW_HOURS
    assert "2,016 hours from 2024-01-15 00:00 to 2024-04-07 23:00 UTC" in quality.period_line()
    pd.testing.assert_frame_equal(quality.table.set_index("building_id").loc[view.index], view)


def test_a_selection_keeps_the_warehouse_wide_reference_hour(warehouse, view):
    with connect(warehouse, read_only=True) as con:
        some = data_quality(con, ["steady", "stopped", "silent"]).table
        with pytest.raises(UnknownBuildingError, match="'nowhere'"):
            data_quality(con, ["steady", "nowhere"])
        with pytest.raises(EmptySelectionError):
            data_quality(con, [])
    assert list(some["building_id"]) == ["silent", "stopped", "steady"]
    pd.testing.assert_frame_equal(some.set_index("building_id"), view.loc[list(some["building_id"])])


def test_text_shows_hours_counts_and_nulls(warehouse):
    with connect(warehouse, read_only=True) as con:
        quality = data_quality(con)
    lines = quality.text(limit=4).splitlines()
    assert len(lines) == 5 and lines[0].split()[:3] == ["building_id", "first_reading", "last_reading"]
    stopped = lines[4].split()
    assert stopped[:6] == ["stopped", "2024-01-01", "00:00", "2024-03-24", "07:00", "2000"]
    assert "0.175" in stopped and lines[1].split()[1:3] == ["-", "-"]  # all_null: no reading
    assert "nan" not in quality.text().lower() and "NaT" not in quality.text()


def test_an_analysts_session_in_a_local_time_zone_sees_the_same_hours(warehouse, view):
    """The period spans London's spring clock change (31 March 2024): hours are UTC instants."""
    with duckdb.connect(str(warehouse), read_only=True) as con:
        con.execute("SET TimeZone = 'Europe/London'")
        local = con.execute("SELECT * FROM building_data_quality").df().set_index("building_id")
    for column in ("first_reading", "last_reading", "longest_gap_start"):
        local[column] = local[column].dt.tz_convert("UTC")
    pd.testing.assert_frame_equal(local.loc[view.index], view)


def test_a_warehouse_shorter_than_12_weeks_counts_the_hours_it_holds(tmp_path):
    fleet = {"half": {h: base(h) for h in range(24)}, "whole": {h: base(h) for h in range(48)}}
    with connect(write_fleet(tmp_path / "w.duckdb", fleet), read_only=True) as con:
        quality = data_quality(con)
    rows = quality.table.set_index("building_id")
    assert quality.period_hours == 48 and "all the warehouse holds" in quality.period_line()
    assert rows.loc["half", "missing_share_12w"] == 0.5
    assert rows.loc["half", "hours_since_last_reading"] == 24
    assert rows.loc["whole", "missing_share_12w"] == 0.0


def test_a_reading_dated_2099_is_counted_and_does_not_make_the_fleet_look_silent(tmp_path):
    fleet = {"ok": {h: base(h) for h in range(48)}, "wrong_year": {h: base(h) for h in range(48)}}
    path = write_fleet(tmp_path / "w.duckdb", fleet)
    with connect(path) as con:
        con.execute("INSERT INTO meter_readings VALUES ('wrong_year', TIMESTAMPTZ "
                    "'2099-01-01 00:00Z', 5.0)")
    with connect(path, read_only=True) as con:
        quality = data_quality(con)
    rows = quality.table.set_index("building_id")
    assert quality.period_hours == 48  # the reference is the last true hour, not 2099
    assert list(rows["hours_since_last_reading"].loc[["ok"]]) == [0]
    assert list(rows["missing_share_12w"]) == [0.0, 0.0]
    assert rows.loc["wrong_year", "future_readings"] == 1
    assert rows.loc["ok", "future_readings"] == 0


@pytest.mark.parametrize("year", [2099, 9999])
def test_a_reading_in_the_future_never_gives_negative_hours_or_a_gap_to_it(tmp_path, year):
    # Issue 46: after a reading dated 9999, `wadiro quality` showed hours_since_last_reading
    # -69,908,354 and a gap of as many hours up to it.
    fleet = {"ok": {h: base(h) for h in range(48)},
             "wrong_year": {h: base(h) for h in range(48) if h not in (10, 11, 46, 47)}}
    path = write_fleet(tmp_path / "w.duckdb", fleet)
    with connect(path) as con:
        con.execute(f"INSERT INTO meter_readings VALUES ('wrong_year', TIMESTAMPTZ "
                    f"'{year}-01-01 00:00Z', 5.0)")
    csv = tmp_path / "q.csv"
    result = invoke("quality", "--csv", csv, "--warehouse", path)
    assert result.exit_code == 0, result.output
    rows = pd.read_csv(csv).set_index("building_id")
    wrong = rows.loc["wrong_year"]
    assert wrong["future_readings"] == 1 and wrong["last_reading"].startswith(f"{year}-01-01")
    assert wrong["hours_since_last_reading"] == 2  # its last reading not in the future: hour 45
    assert wrong["missing_hours"] == 2 and wrong["longest_gap_hours"] == 2
    assert (rows["hours_since_last_reading"] >= 0).all()


def test_without_any_reading_the_share_is_unknown(tmp_path):
    with connect(write_fleet(tmp_path / "w.duckdb", {"a": {}, "b": {0: None}}), read_only=True) as con:
        quality = data_quality(con)
    assert quality.table["missing_share_12w"].isna().all()
    assert list(quality.table["readings"]) == [0, 0]
    assert quality.period_hours == 0 and "no meter readings" in quality.period_line()


def test_without_buildings_the_table_is_empty_or_refused(tmp_path):
    with connect(tmp_path / "w.duckdb") as con:
        ensure_schema(con)
        assert data_quality(con).table.empty
        with pytest.raises(EmptySelectionError, match="no buildings"):
            data_quality(con, require_buildings=True)


def random_fleet(seed: int) -> dict[str, Hours]:
    """Buildings with random spans, NULL rows, absent hours, repeated and negative values."""
    rng = random.Random(seed)
    fleet: dict[str, Hours] = {}
    for i in range(12):
        first, length = rng.randrange(0, 300), rng.randrange(0, 2600)
        absent, null = rng.choice([0.0, 0.005, 0.03]), rng.choice([0.0, 0.005, 0.03])
        change = rng.choice([0.02, 0.3, 1.0])  # else the last value again: flat lines
        rows: Hours = {}
        value = 1.0
        for h in range(first, first + length):
            roll = rng.random()
            if roll < absent:
                continue
            if roll < absent + null:
                rows[h] = None
                continue
            if rng.random() < change:
                value = rng.choice([0.0, -1.0, -2.5, 3.0, 4.0, rng.uniform(-5, 50)])
            rows[h] = value
        fleet[f"r{i:02d}"] = rows
    return fleet


@pytest.mark.parametrize("seed", [1, 2])
def test_random_fleets_equal_the_plain_recomputation(tmp_path, seed):
    fleet = random_fleet(seed)
    expected = recompute(fleet)
    assert any(e["flat24"] for e in expected.values()) and any(e["neg_run"] > 1 for e in expected.values())
    with connect(write_fleet(tmp_path / "w.duckdb", fleet), read_only=True) as con:
        quality = data_quality(con)
    for _, row in quality.table.iterrows():
        assert as_expected(row, quality.period_hours) == expected[row["building_id"]], row["building_id"]
    shares = quality.table.set_index("building_id")["missing_share_12w"]
    for b, e in expected.items():
        assert math.isclose(shares[b], e["missing_12w"] / quality.period_hours)
