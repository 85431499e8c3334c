"""Cambridge archive ingest: the real archive, a small hand-made archive, and every bad input."""

from __future__ import annotations

import csv
import io
from dataclasses import replace
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest

from tasks.errors import UnknownBuildingError
from tasks.ingest.cambridge_archive import ingest_cambridge, write_cambridge
from tasks.ingest.cambridge_archive import (
    KNOT_IN_MS,
    load_cambridge,
    read_midas_wind,
    utc_range,
)
from tasks.ingest.errors import (
    DuplicateTimestampError,
    EmptyRangeError,
    MalformedSourceError,
    SourceNotFoundError,
)
from tasks.warehouse.connection import connect

UTC = timezone.utc
MIDAS_GLOB = "*qcv-1_{year}.csv"


# --- a small archive in the real layout, written per test ---------------------------------------


def hours_of(year: int) -> list[datetime]:
    start = datetime(year, 1, 1)
    n = (datetime(year + 1, 1, 1) - start) // timedelta(hours=1)
    return [start + timedelta(hours=h) for h in range(n)]


def load_value(building: int, hour: int) -> float:
    """Hand-made readings: every 100th hour is the publisher's 0 (missing)."""
    return 0.0 if hour % 100 == 7 else round(10.0 * (building + 1) + (hour % 24) / 10.0, 1)


MIDAS_HEADER = "ob_time,id,version_num,wind_speed_unit_id,wind_speed,air_temperature"


def write_archive(root: Path, year: int = 2019, buildings: int = 2, midas_rows: list[str] | None = None) -> Path:
    for b in range(buildings):
        folder = root / "building_data" / "processed_data" / f"UCam_Building_b{b}" / "electricity"
        folder.mkdir(parents=True)
        lines = ["datetime,equipment load [kWh]"]
        lines += [f"{ts:%Y-%m-%d %H:%M:%S},{load_value(b, h)}" for h, ts in enumerate(hours_of(year))]
        (folder / f"{year}.csv").write_text("\n".join(lines) + "\n")
    weather = root / "aux_data" / "MetOffice Weather Data" / "processed_data" / "bedford"
    weather.mkdir(parents=True)
    lines = ["datetime,air_temperature [degC],rltv_hum [%],glbl_irad_amt [W/m2]"]
    lines += [f"{ts:%Y-%m-%d %H:%M:%S},{h % 20 - 5}.5,80.0,{(h % 24) * 10}.0" for h, ts in enumerate(hours_of(year))]
    (weather / f"{year}.csv").write_text("\n".join(lines) + "\n")
    raw = root / "aux_data" / "MetOffice Weather Data" / "raw_data" / "hourly_weather"
    raw.mkdir(parents=True)
    if midas_rows is None:  # wind (knots) = hour of day, except a gap at hour 3 of each day
        midas_rows = [
            f"{ts:%Y-%m-%d %H:%M:%S},03560,1,4,{ts.hour}.0,1.0" for ts in hours_of(year) if ts.hour != 3
        ]
    write_midas(raw / f"midas-open_uk-hourly-weather-obs_dv-202308_bedford_qcv-1_{year}.csv", midas_rows)
    return root


def write_midas(path: Path, rows: list[str], end: bool = True) -> Path:
    header = ["Conventions,G,BADC-CSV,1", "title,G,uk-hourly-weather-obs", "location,G,52.227,-0.465"]
    body = header + ["data", MIDAS_HEADER, *rows] + (["end data"] if end else [])
    path.write_text("\n".join(body) + "\n")
    return path


def electricity_file(root: Path, building: int = 0, year: int = 2019) -> Path:
    return root / "building_data" / "processed_data" / f"UCam_Building_b{building}" / "electricity" / f"{year}.csv"


def snapshot(warehouse: Path) -> dict[str, list[tuple]]:
    """Every row of every input table, sorted: 'unchanged' means equal snapshots."""
    if not warehouse.exists():
        return {}
    with connect(warehouse, read_only=True) as con:
        return {
            table: con.execute(f"SELECT * FROM {table} ORDER BY ALL").fetchall()
            for table in ("buildings", "meter_readings", "weather")
        }


@pytest.fixture
def archive(tmp_path) -> Path:
    return write_archive(tmp_path / "archive")


@pytest.fixture
def loaded(tmp_path, archive) -> Path:
    """A warehouse already holding the small archive."""
    warehouse = tmp_path / "w.duckdb"
    ingest_cambridge(warehouse, archive)
    return warehouse


# --- the small archive ---------------------------------------------------------------------------


def test_small_archive_rows_zeros_and_weather(loaded):
    n = len(hours_of(2019))
    zeros = sum(1 for h in range(n) if load_value(0, h) == 0.0)
    with connect(loaded, read_only=True) as con:
        per_building = con.execute(
            "SELECT building_id, count(*), count(*) - count(kwh), min(kwh) FROM meter_readings GROUP BY 1 ORDER BY 1"
        ).fetchall()
        assert per_building == [("UCam_Building_b0", n, zeros, 10.0), ("UCam_Building_b1", n, zeros, 20.0)]
        # 2019-01-01 07:00 is hour 7: stored as NULL, never 0
        assert con.execute(
            "SELECT kwh FROM meter_readings WHERE building_id = 'UCam_Building_b0' AND ts = '2019-01-01 07:00:00+00'"
        ).fetchone() == (None,)
        assert con.execute("SELECT count(*) FROM meter_readings WHERE kwh = 0").fetchone() == (0,)
        assert con.execute("SELECT * EXCLUDE (floor_area_m2) FROM buildings ORDER BY building_id").fetchall() == [
            (f"UCam_Building_b{b}", "bedford", "Europe/London", "GB", "ENG", None, "cambridge-estates") for b in range(2)
        ]
        weather = con.execute(
            "SELECT count(*), count(wind_speed_ms), max(wind_speed_ms), min(temperature_c) FROM weather"
        ).fetchone()
        assert weather == (n, n - n // 24, pytest.approx(23 * KNOT_IN_MS), -5.5)
        assert con.execute("SELECT count(*) FROM weather WHERE hour(ts) = 3 AND wind_speed_ms IS NOT NULL").fetchone() == (0,)


def test_ingest_twice_leaves_the_same_rows(tmp_path, archive, loaded):
    first = snapshot(loaded)
    summary = ingest_cambridge(loaded, archive)
    assert summary.readings == len(first["meter_readings"])
    assert snapshot(loaded) == first


def test_range_ingest_replaces_only_that_range(tmp_path, archive, loaded):
    before = snapshot(loaded)
    summary = ingest_cambridge(loaded, archive, buildings=["UCam_Building_b1"], start=date(2019, 3, 1), end=date(2019, 3, 2))
    assert (summary.buildings, summary.readings, summary.weather_hours) == (1, 48, 48)
    assert snapshot(loaded) == before
    with connect(loaded) as con:
        con.execute("DELETE FROM meter_readings WHERE building_id = 'UCam_Building_b1' AND ts >= '2019-03-01' AND ts < '2019-03-05'")
    ingest_cambridge(loaded, archive, buildings=["UCam_Building_b1"], start=date(2019, 3, 1), end=date(2019, 3, 2))
    with connect(loaded, read_only=True) as con:
        assert con.execute(
            "SELECT count(*) FROM meter_readings WHERE building_id = 'UCam_Building_b1' AND ts >= '2019-03-01' AND ts < '2019-03-05'"
        ).fetchone() == (48,)


def test_utc_range_is_inclusive_of_the_end_day():
    assert utc_range(date(2019, 1, 1), date(2019, 1, 1)) == (
        datetime(2019, 1, 1, tzinfo=UTC),
        datetime(2019, 1, 2, tzinfo=UTC),
    )
    assert utc_range(None, None) == (None, None)


# --- the wind rule -------------------------------------------------------------------------------


def test_wind_rule_latest_version_then_last_row_on_the_hour(tmp_path):
    rows = [
        "2019-05-01 00:00:00,03560,0,4,10.0,1",
        "2019-05-01 00:00:00,03560,1,4,12.0,1",  # higher version wins ...
        "2019-05-01 00:00:00,03560,0,4,99.0,1",  # ... even if an older version comes later
        "2019-05-01 01:00:00,03560,1,4,5.0,1",
        "2019-05-01 01:00:00,03560,1,4,6.0,1",  # same version: the last row wins
        "2019-05-01 01:30:00,03560,1,4,50.0,1",  # not on the hour: ignored
        "2019-05-01 02:00:00,03560,1,4,NA,1",  # missing stays missing
    ]
    wind = read_midas_wind(write_midas(tmp_path / "x_qcv-1_2019.csv", rows)).to_pylist()
    assert [(r["ts"].hour, r["wind_speed_ms"]) for r in wind] == [
        (0, pytest.approx(12.0 * KNOT_IN_MS)),
        (1, pytest.approx(6.0 * KNOT_IN_MS)),
        (2, None),
    ]


def test_a_year_without_midas_file_has_null_wind(tmp_path, archive):
    for raw in (archive / "aux_data" / "MetOffice Weather Data" / "raw_data" / "hourly_weather").iterdir():
        raw.unlink()
    batch = load_cambridge(archive)
    assert batch.weather.num_rows == len(hours_of(2019))
    assert batch.weather["wind_speed_ms"].null_count == batch.weather.num_rows
    assert batch.weather["temperature_c"].null_count == 0


def test_midas_file_without_end_marker_is_truncated(tmp_path):
    path = write_midas(tmp_path / "x_qcv-1_2019.csv", ["2019-05-01 00:00:00,03560,1,4,5.0,1"], end=False)
    with pytest.raises(MalformedSourceError, match="truncated.*end data") as info:
        read_midas_wind(path)
    assert str(path) in str(info.value)


def test_midas_wind_in_other_units_is_refused(tmp_path):
    path = write_midas(tmp_path / "x_qcv-1_2019.csv", ["2019-05-01 00:00:00,03560,1,1,5.0,1"])
    with pytest.raises(MalformedSourceError, match="knots"):
        read_midas_wind(path)


# --- bad input: a clear error naming the file or id, and the warehouse unchanged ----------------


def truncate_mid_line(path: Path) -> None:
    text = path.read_text()
    path.write_text(text[: len(text) // 2 + 5])


def truncate_at_line(path: Path) -> None:
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines[:5000]) + "\n")


def non_numeric(path: Path) -> None:
    lines = path.read_text().splitlines()
    lines[800] = lines[800].split(",")[0] + ",twelve"
    path.write_text("\n".join(lines) + "\n")


def duplicate_timestamp(path: Path) -> None:
    lines = path.read_text().splitlines()
    lines[1001] = lines[1000].split(",")[0] + ",5.0"
    path.write_text("\n".join(lines) + "\n")


def wrong_header(path: Path) -> None:
    path.write_text(path.read_text().replace("equipment load [kWh]", "load", 1))


@pytest.mark.parametrize(
    ("damage", "error", "message"),
    [
        (truncate_mid_line, MalformedSourceError, "Expected 2 columns"),
        (truncate_at_line, MalformedSourceError, "truncated, 4999 of the 8760 hours"),
        (non_numeric, MalformedSourceError, "conversion error"),
        (duplicate_timestamp, DuplicateTimestampError, "duplicate timestamps"),
        (wrong_header, MalformedSourceError, "expected columns"),
    ],
)
def test_bad_electricity_file_names_it_and_changes_nothing(archive, loaded, damage, error, message):
    before = snapshot(loaded)
    bad = electricity_file(archive, building=1)
    damage(bad)
    with pytest.raises(error, match=message) as info:
        ingest_cambridge(loaded, archive)
    assert str(bad) in str(info.value)
    assert snapshot(loaded) == before


def test_bad_weather_file_names_it_and_changes_nothing(archive, loaded):
    before = snapshot(loaded)
    bad = archive / "aux_data" / "MetOffice Weather Data" / "processed_data" / "bedford" / "2019.csv"
    bad.write_text(bad.read_text().replace("2019-06-01 12:00:00,", "2019-06-01 12:00:00,warm", 1))
    with pytest.raises(MalformedSourceError) as info:
        ingest_cambridge(loaded, archive)
    assert str(bad) in str(info.value)
    assert snapshot(loaded) == before


def test_unknown_building_id_is_named(archive, loaded):
    before = snapshot(loaded)
    with pytest.raises(UnknownBuildingError, match="UCam_Building_b99"):
        ingest_cambridge(loaded, archive, buildings=["UCam_Building_b0", "UCam_Building_b99"])
    assert snapshot(loaded) == before


@pytest.mark.parametrize(
    ("start", "end", "message"),
    [
        (date(2019, 5, 2), date(2019, 5, 1), "start 2019-05-02 is after end 2019-05-01"),
        (date(2021, 1, 1), date(2021, 12, 31), "no electricity readings"),
    ],
)
def test_empty_range_is_refused(archive, loaded, start, end, message):
    before = snapshot(loaded)
    with pytest.raises(EmptyRangeError, match=message):
        ingest_cambridge(loaded, archive, start=start, end=end)
    assert snapshot(loaded) == before


def test_missing_path_is_named(tmp_path, loaded):
    before = snapshot(loaded)
    with pytest.raises(SourceNotFoundError, match="nowhere"):
        ingest_cambridge(loaded, tmp_path / "nowhere")
    incomplete = tmp_path / "incomplete"
    (incomplete / "building_data" / "processed_data").mkdir(parents=True)
    with pytest.raises(SourceNotFoundError, match="bedford"):
        ingest_cambridge(loaded, incomplete)
    assert snapshot(loaded) == before


def test_failure_while_writing_rolls_back_every_table(archive, loaded):
    """Readings and buildings are replaced before weather; a weather failure undoes them too."""
    before = snapshot(loaded)
    batch = load_cambridge(archive)
    site = batch.weather.schema.get_field_index("site_id")
    broken = batch.weather.set_column(site, "site_id", pa.nulls(batch.weather.num_rows, pa.string()))  # NOT NULL
    damaged = replace(batch, weather=broken, readings=batch.readings.slice(0, 10))
    with connect(loaded) as con, pytest.raises(duckdb.ConstraintException, match="site_id"):
        write_cambridge(con, damaged)
    assert snapshot(loaded) == before


# --- the real archive ----------------------------------------------------------------------------

B0 = "UCam_Building_b0"


def read_with_csv_module(path: Path) -> list[tuple[str, float]]:
    with path.open(newline="") as handle:
        reader = csv.reader(handle)
        next(reader)
        return [(row[0], float(row[1])) for row in reader]


def test_real_building_year_matches_its_file(tmp_path, cambridge_archive):
    source = electricity_file(cambridge_archive, 0, 2018)
    rows = read_with_csv_module(source)
    zeros = sum(1 for _, v in rows if v == 0.0)
    assert zeros > 0  # this building-year has the publisher's zeros
    warehouse = tmp_path / "real.duckdb"
    summary = ingest_cambridge(warehouse, cambridge_archive, buildings=[B0], start=date(2018, 1, 1), end=date(2018, 12, 31))
    assert (summary.readings, summary.missing_readings) == (len(rows), zeros)
    with connect(warehouse, read_only=True) as con:
        count, nulls, total, stored_zeros = con.execute(
            "SELECT count(*), count(*) - count(kwh), sum(kwh), count(*) FILTER (WHERE kwh = 0) FROM meter_readings"
        ).fetchone()
        assert (count, nulls, stored_zeros) == (len(rows), zeros, 0)
        assert total == pytest.approx(sum(v for _, v in rows))
        # the NULL hours are exactly the file's zero hours
        null_hours = {r[0].strftime("%Y-%m-%d %H:%M:%S") for r in con.execute("SELECT ts FROM meter_readings WHERE kwh IS NULL").fetchall()}
        assert null_hours == {ts for ts, v in rows if v == 0.0}
        # weather joined for every hour: the processed Bedford file covers all of 2018
        joined = con.execute(
            "SELECT count(*), count(w.temperature_c), count(w.irradiance_wm2) FROM meter_readings m "
            "LEFT JOIN weather w ON w.ts = m.ts AND w.site_id = 'bedford' AND w.kind = 'observed'"
        ).fetchone()
        assert joined == (len(rows), len(rows), len(rows))
        wind_hours = con.execute("SELECT count(wind_speed_ms) FROM weather").fetchone()[0]
        sample = con.execute("SELECT wind_speed_ms FROM weather WHERE ts = '2018-01-01 00:00:00+00'").fetchone()[0]

    raw = next((cambridge_archive / "aux_data" / "MetOffice Weather Data" / "raw_data" / "hourly_weather").glob(MIDAS_GLOB.format(year=2018)))
    lines = raw.read_text().splitlines()
    table = list(csv.DictReader(io.StringIO("\n".join(lines[lines.index("data") + 1 : lines.index("end data")]))))
    on_hour = {r["ob_time"]: r["wind_speed"] for r in table if r["ob_time"].endswith(":00:00")}
    assert wind_hours == sum(1 for v in on_hour.values() if v != "NA")
    assert sample == pytest.approx(float(on_hour["2018-01-01 00:00:00"]) * KNOT_IN_MS)


@pytest.mark.slow  # the whole real archive, 110 buildings over five years
def test_whole_real_archive_matches_duckdbs_own_reader(tmp_path, cambridge_archive):
    warehouse = tmp_path / "all.duckdb"
    summary = ingest_cambridge(warehouse, cambridge_archive)
    pattern = str(cambridge_archive / "building_data" / "processed_data" / "*" / "electricity" / "*.csv")
    with duckdb.connect() as con:
        files, rows, zeros = con.execute(
            "SELECT count(DISTINCT filename), count(*), count(*) FILTER (WHERE \"equipment load [kWh]\" = 0) "
            "FROM read_csv(?, filename = true)",
            [pattern],
        ).fetchone()
    assert (summary.buildings, summary.readings, summary.missing_readings) == (110, rows, zeros)
    with connect(warehouse, read_only=True) as con:
        assert con.execute("SELECT count(*), count(*) - count(kwh) FROM meter_readings").fetchone() == (rows, zeros)
        assert con.execute("SELECT count(*) FROM buildings").fetchone() == (110,)
        assert con.execute("SELECT count(DISTINCT building_id || strftime(ts, '%Y')) FROM meter_readings").fetchone() == (files,)
        assert con.execute("SELECT min(ts), max(ts) FROM weather").fetchone() == (
            datetime(2016, 1, 1, tzinfo=UTC),
            datetime(2020, 12, 31, 23, tzinfo=UTC),
        )


def test_hours_the_archive_does_not_hold_are_never_touched(loaded, archive):
    """Weather and readings sent from elsewhere for a year the archive has no file for (and a
    whole-archive ingest, whose range is everything) stay as they were: an ingest replaces the
    hours it holds, not a range."""
    later = datetime(2021, 6, 1, 12, tzinfo=UTC)
    with connect(loaded) as con:
        con.execute("INSERT INTO weather (site_id, ts, temperature_c, kind) VALUES ('bedford', ?, 17.5, "
                    "'observed')", [later])
        con.execute("INSERT INTO meter_readings VALUES ('UCam_Building_b0', ?, 42.0)", [later])
    before = snapshot(loaded)
    ingest_cambridge(loaded, archive)
    assert snapshot(loaded) == before
    ingest_cambridge(loaded, archive, start=date(2019, 12, 1), end=date(2021, 12, 31))
    assert snapshot(loaded) == before
