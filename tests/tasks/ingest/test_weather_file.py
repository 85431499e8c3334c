"""Weather feeds: observed and forecast rows, the latest forecast issue kept whatever order the
files come in, what the hourly reader sees, blank cells counted per variable (the real Bedford wind
record's gaps), and every bad feed refused with nothing changed."""

from __future__ import annotations

from datetime import date, timedelta
from pathlib import Path

import duckdb
import pytest
from pydantic import ValidationError

from tasks.errors import PipelineError, UnknownSiteError
from tasks.ingest.cambridge_archive import load_cambridge
from tasks.ingest.weather_file import WeatherOptions
from tasks.warehouse.hours import load_many_building_hours
from tests.tasks.ingest.operator_files import (
    contents,
    ingest_buildings,
    ingest_readings,
    ingest_weather,
    row_counts,
    utc,
    warehouse_with_buildings,
    write,
)

OBSERVED = WeatherOptions(kind="observed")
FORECAST = WeatherOptions(kind="forecast")
HEAD = "site_id,ts,temperature_c,irradiance_wm2,wind_speed_ms"
FHEAD = HEAD + ",issued_at"


@pytest.fixture
def warehouse(tmp_path) -> Path:
    return warehouse_with_buildings(tmp_path / "w.duckdb", tmp_path)


def weather_rows(warehouse: Path, kind: str) -> dict:
    """(site, ts) -> (temperature, issued_at) of one kind."""
    with duckdb.connect(str(warehouse), read_only=True) as con:
        rows = con.execute("SELECT site_id, ts, temperature_c, issued_at FROM weather WHERE kind = ?",
                           [kind]).fetchall()
    return {(s, t): (v, i) for s, t, v, i in rows}


def test_observed_rows_as_stored(warehouse, tmp_path):
    text = (HEAD + ",humidity_pct\n"
            "s1,2024-02-05T00:00Z,4.5,0,3.2,81\ns1,2024-02-05T01:00Z,4.0,,3.0,\ns2,2024-02-05 00:00-05:00,-2,0,1,50\n")
    summary = ingest_weather(warehouse, write(tmp_path / "w.csv", text), OBSERVED)
    assert summary.hours == 3 and summary.sites == 2
    with duckdb.connect(str(warehouse), read_only=True) as con:
        rows = con.execute("SELECT site_id, ts, temperature_c, irradiance_wm2, wind_speed_ms, humidity_pct, "
                           "kind, issued_at FROM weather ORDER BY site_id, ts").fetchall()
    assert rows == [("s1", utc("2024-02-05 00:00"), 4.5, 0.0, 3.2, 81.0, "observed", None),
                    ("s1", utc("2024-02-05 01:00"), 4.0, None, 3.0, None, "observed", None),
                    ("s2", utc("2024-02-05 05:00"), -2.0, 0.0, 1.0, 50.0, "observed", None)]


def test_the_latest_issue_per_hour_is_kept_whatever_the_order_of_files(warehouse, tmp_path):
    early = write(tmp_path / "early.csv", FHEAD + "\n"
                  "s1,2024-02-05T10:00Z,1,0,1,2024-02-04T00:00Z\n"
                  "s1,2024-02-05T11:00Z,1,0,1,2024-02-04T00:00Z\n")
    late = write(tmp_path / "late.csv", FHEAD + "\n"
                 "s1,2024-02-05T11:00Z,2,0,1,2024-02-04T12:00Z\n"
                 "s1,2024-02-05T12:00Z,2,0,1,2024-02-04T12:00Z\n")
    expected = {("s1", utc("2024-02-05 10:00")): (1.0, utc("2024-02-04 00:00")),
                ("s1", utc("2024-02-05 11:00")): (2.0, utc("2024-02-04 12:00")),
                ("s1", utc("2024-02-05 12:00")): (2.0, utc("2024-02-04 12:00"))}
    ingest_weather(warehouse, early, FORECAST)
    ingest_weather(warehouse, late, FORECAST)
    assert weather_rows(warehouse, "forecast") == expected
    summary = ingest_weather(warehouse, early, FORECAST)  # arriving late: only 10:00 is rewritten
    assert weather_rows(warehouse, "forecast") == expected
    assert (summary.hours, summary.older_than_stored) == (1, 1)
    both = write(tmp_path / "both.csv", early.read_text() + "\n".join(late.read_text().splitlines()[1:]) + "\n")
    other = warehouse_with_buildings(tmp_path / "other.duckdb", tmp_path)
    summary = ingest_weather(other, both, FORECAST)  # both issues in one file
    assert weather_rows(other, "forecast") == expected and summary.superseded_in_file == 1
    before = contents(other)
    ingest_weather(other, both, FORECAST)
    assert contents(other) == before


def test_a_forecast_replaces_one_stored_without_issue_time(warehouse):
    with duckdb.connect(str(warehouse)) as con:
        con.execute("INSERT INTO weather (site_id, ts, temperature_c, kind) "
                    "VALUES ('s1', '2024-02-05 10:00+00', 9, 'forecast')")
    path = write(warehouse.parent / "f.csv", FHEAD + "\ns1,2024-02-05T10:00Z,3,0,1,2024-02-04T00:00Z\n")
    ingest_weather(warehouse, path, FORECAST)
    assert weather_rows(warehouse, "forecast") == {("s1", utc("2024-02-05 10:00")): (3.0, utc("2024-02-04 00:00"))}


def test_the_hourly_reader_prefers_observations_and_sees_no_duplicates(warehouse, tmp_path):
    ingest_readings(warehouse, write(tmp_path / "r.csv", "ts,b1\n2024-02-05T10:00Z,1\n2024-02-05T11:00Z,1\n"
                                     "2024-02-05T12:00Z,1\n"))
    for issued in ("2024-02-04T00:00Z", "2024-02-04T06:00Z"):
        ingest_weather(warehouse, write(tmp_path / "f.csv", FHEAD + "\n" + "".join(
            f"s1,2024-02-05T{h}:00Z,{h}.5,0,1,{issued}\n" for h in (10, 11, 12))), FORECAST)
    ingest_weather(warehouse, write(tmp_path / "o.csv", HEAD + "\ns1,2024-02-05T11:00Z,-1,0,1\n"), OBSERVED)
    with duckdb.connect(str(warehouse), read_only=True) as con:
        frame = load_many_building_hours(con, ["b1"], utc("2024-02-05 10:00"), utc("2024-02-05 13:00"))
    assert list(frame["temperature_c"]) == [10.5, -1.0, 12.5]
    assert list(frame["weather_kind"]) == ["forecast", "observed", "forecast"]


@pytest.mark.parametrize("replace_range", [False, True])
def test_observed_hours_are_replaced_per_site_and_forecasts_untouched(warehouse, tmp_path, replace_range):
    day = HEAD + "\n" + "".join(f"{s},2024-02-05T{h:02d}:00Z,1,0,1\n" for s in ("s1", "s2") for h in range(24))
    ingest_weather(warehouse, write(tmp_path / "day.csv", day), OBSERVED)
    ingest_weather(warehouse, write(tmp_path / "f.csv", FHEAD + "\ns1,2024-02-05T05:00Z,7,0,1,2024-02-04T00:00Z\n"),
                   FORECAST)
    summary = ingest_weather(warehouse, write(tmp_path / "fix.csv", HEAD + "\ns1,2024-02-05T04:00Z,2,0,1\n"
                                              "s1,2024-02-05T06:00Z,2,0,1\n"),
                             WeatherOptions(kind="observed", replace_range=replace_range))
    observed = weather_rows(warehouse, "observed")
    # 05:00 lies between the file's rows: kept, unless the file's range replaces what is stored
    assert (("s1", utc("2024-02-05 05:00")) in observed) is not replace_range
    assert len(observed) == (47 if replace_range else 48)
    assert summary.removed == (1 if replace_range else None)
    assert observed[("s1", utc("2024-02-05 06:00"))][0] == 2.0 and observed[("s1", utc("2024-02-05 07:00"))][0] == 1.0
    assert len(weather_rows(warehouse, "forecast")) == 1


def test_replace_range_is_refused_for_forecasts():
    with pytest.raises(ValidationError, match="--replace-range is for observed weather"):
        WeatherOptions(kind="forecast", replace_range=True)


@pytest.mark.parametrize(("unit", "cells", "stored"), [
    ("m/s", ("10", "50"), (10.0, 50.0)),
    ("knots", ("10", "97.2"), (5.144444, 50.004)),        # 1 kn = 1,852 m / 3,600 s
    ("km/h", ("36", "180"), (10.0, 50.0)),               # a 180 km/h storm is 50 m/s, plausible
])
def test_wind_is_stored_in_metres_per_second_from_the_feeds_unit(warehouse, tmp_path, unit,
                                                                 cells, stored):
    path = write(tmp_path / "o.csv", HEAD + f"\ns1,2024-02-05T00:00Z,3,0,{cells[0]}\n"
                 f"s1,2024-02-05T01:00Z,3,0,{cells[1]}\n")
    summary = ingest_weather(warehouse, path, WeatherOptions(kind="observed", wind_unit=unit))
    assert summary.implausible_values == 0
    with duckdb.connect(str(warehouse), read_only=True) as con:
        winds = [r[0] for r in con.execute("SELECT wind_speed_ms FROM weather ORDER BY ts")
                 .fetchall()]
    assert winds == pytest.approx(list(stored), abs=1e-4)


@pytest.mark.parametrize(("unit", "cell", "shown"), [
    ("km/h", "500", "500 (138.889 m/s)"),    # 500 / 3.6
    ("knots", "300", "300 (154.333 m/s)"),   # 300 x 1,852 / 3,600
])
def test_a_wind_past_the_bound_in_its_unit_is_refused_quoting_the_files_value_then_metres_per_second(
        warehouse, tmp_path, unit, cell, shown):
    path = write(tmp_path / "o.csv", HEAD + f"\ns1,2024-02-05T00:00Z,3,0,2\ns1,2024-02-05T01:00Z,3,0,{cell}\n")
    with pytest.raises(PipelineError) as refused:
        ingest_weather(warehouse, path, WeatherOptions(kind="observed", wind_unit=unit))
    assert str(refused.value).startswith(
        f"{path}: line 3, column 'wind_speed_ms': {shown} is not a finite value from 0 to 115 m/s")
    assert row_counts(warehouse)["weather"] == 0


def test_implausible_values_can_be_stored_as_missing(warehouse, tmp_path):
    path = write(tmp_path / "o.csv", HEAD + "\ns1,2024-02-05T00:00Z,99,-31,1\n")
    summary = ingest_weather(warehouse, path, WeatherOptions(kind="observed", implausible="missing"))
    assert summary.implausible_values == 2
    assert weather_rows(warehouse, "observed") == {("s1", utc("2024-02-05 00:00")): (None, None)}


def test_values_just_past_a_bound_are_clipped_and_counted(warehouse, tmp_path):
    path = write(tmp_path / "o.csv", HEAD + ",humidity_pct\n"
                 "s1,2024-02-05T00:00Z,3,-4.5,1,100.4\ns1,2024-02-05T01:00Z,3,0,1,99\n")
    summary = ingest_weather(warehouse, path, OBSERVED)
    assert summary.clipped_values == 2 and summary.implausible_values == 0
    assert "2 value(s) just past their bound (a sensor's tolerance) clipped to it" in summary.line()
    with duckdb.connect(str(warehouse), read_only=True) as con:
        assert con.execute("SELECT irradiance_wm2, humidity_pct FROM weather ORDER BY ts").fetchall() == [
            (0.0, 100.0), (0.0, 99.0)]


BAD = [
    ("unknown-sites", OBSERVED, HEAD + "\ns1,2024-02-05T00:00Z,1,0,1\nmoon,2024-02-05T00:00Z,1,0,1\n",
     r"1 site id\(s\) that no building in the warehouse uses: 'moon'", UnknownSiteError),
    ("forecast-without-issue", FORECAST, HEAD + "\ns1,2024-02-05T00:00Z,1,0,1\n",
     r"missing required column\(s\) 'issued_at'", PipelineError),
    ("observed-with-issue", OBSERVED, FHEAD + "\ns1,2024-02-05T00:00Z,1,0,1,2024-02-04T00:00Z\n",
     r"an 'issued_at' column, but --kind observed", PipelineError),
    ("blank-issue", FORECAST, FHEAD + "\ns1,2024-02-05T00:00Z,1,0,1,\n",
     r"line 2, column 'issued_at': empty cell", PipelineError),
    ("off-the-hour", OBSERVED, HEAD + "\ns1,2024-02-05T00:00Z,1,0,1\ns1,2024-02-05T00:30Z,1,0,1\n",
     r"line 3, column 'ts': 2024-02-05 00:30:00Z is not the start of an hour", PipelineError),
    ("implausible", OBSERVED, HEAD + "\ns1,2024-02-05T00:00Z,1,0,1\ns1,2024-02-05T01:00Z,1,0,200\n",
     r"line 3, column 'wind_speed_ms': 200 is not a finite value from 0 to 115 m/s", PipelineError),
    ("humidity-past-tolerance", OBSERVED, HEAD + ",humidity_pct\ns1,2024-02-05T00:00Z,1,0,1,105.5\n",
     r"line 2, column 'humidity_pct': 105.5 is not a finite value from 0 to 105 %", PipelineError),
    ("duplicate-observed", OBSERVED, HEAD + "\ns1,2024-02-05T00:00Z,1,0,1\ns1,2024-02-05T00:00Z,2,0,1\n",
     r"line 2 and line 3, column 'ts': site 's1' at 2024-02-05 00:00Z appears twice", PipelineError),
    ("duplicate-forecast", FORECAST, FHEAD + "\ns1,2024-02-05T00:00Z,1,0,1,2024-02-04T00:00Z\n"
     "s1,2024-02-05T00:00Z,1,0,1,2024-02-04T00:00Z\n", r"line 2 and line 3, column 'ts': site 's1' issued at", PipelineError),
    ("missing-column", OBSERVED, "site_id,ts,temperature_c,irradiance_wm2\ns1,2024-02-05T00:00Z,1,0\n",
     r"missing required column\(s\) 'wind_speed_ms'", PipelineError),
    ("not-a-number", OBSERVED, HEAD + "\ns1,2024-02-05T00:00Z,warm,0,1\n",
     r"line 2, column 'temperature_c': 'warm' is not a number", PipelineError),
    ("empty", OBSERVED, "", r"empty file", PipelineError),
]


@pytest.mark.parametrize(("options", "text", "message", "error"), [c[1:] for c in BAD], ids=[c[0] for c in BAD])
def test_a_bad_feed_is_refused_and_changes_no_table(warehouse, tmp_path, options, text, message, error):
    ingest_weather(warehouse, write(tmp_path / "ok.csv", HEAD + "\ns1,2024-02-05T00:00Z,1,0,1\n"), OBSERVED)
    counts, before = row_counts(warehouse), contents(warehouse)
    with pytest.raises(error, match=message):
        ingest_weather(warehouse, write(tmp_path / "bad.csv", text), options)
    assert row_counts(warehouse) == counts and contents(warehouse) == before


# --- blank cells counted per variable (issue 30) ---------------------------------------------------

VARIABLES = ("temperature_c", "irradiance_wm2", "wind_speed_ms", "humidity_pct")


def _cell(value) -> str:
    return "" if value is None or value != value else repr(float(value))


def bedford_feed(cambridge_archive, start: date, end: date, path: Path, forecast: bool = False,
                 blank_wind: int = 0) -> Path:
    """The real Bedford weather of ``start``-``end`` written as an operator's feed (blank cells
    where the record has none; with ``blank_wind``, the wind of the week's first hours blanked)."""
    weather = load_cambridge(cambridge_archive, ["UCam_Building_b0"], start, end).weather.to_pandas()
    lines = [HEAD + ",humidity_pct" + (",issued_at" if forecast else "")]
    for i, row in enumerate(weather.itertuples()):
        wind = None if i < blank_wind else row.wind_speed_ms
        cells = [_cell(row.temperature_c), _cell(row.irradiance_wm2), _cell(wind), _cell(row.humidity_pct)]
        issue = f",{start - timedelta(days=1)}T06:00Z" if forecast else ""
        lines.append(f"bedford,{row.ts:%Y-%m-%dT%H:%MZ}," + ",".join(cells) + issue)
    return write(path, "\n".join(lines) + "\n")


def blank_cells_in(path: Path) -> dict[str, int]:
    """Empty cells per variable, counted in the file's text."""
    rows = [line.split(",") for line in path.read_text().splitlines()]
    return {name: sum(r[rows[0].index(name)] == "" for r in rows[1:]) for name in VARIABLES}


@pytest.fixture
def bedford(tmp_path) -> Path:
    warehouse = tmp_path / "bedford.duckdb"

    ingest_buildings(warehouse, write(tmp_path / "b.csv", "building_id,site_id,timezone,holiday_country\n"
                                      "b0,bedford,Europe/London,GB\n"))
    return warehouse


def test_the_real_bedford_wind_gaps_are_counted_and_stored_as_missing(bedford, tmp_path, cambridge_archive):
    # the Met Office's Bedford station reported wind in only 25 hours of the week of 18 July 2016
    path = bedford_feed(cambridge_archive, date(2016, 7, 18), date(2016, 7, 24), tmp_path / "obs.csv")
    blank = blank_cells_in(path)
    assert blank == {"temperature_c": 0, "irradiance_wm2": 0, "wind_speed_ms": 143, "humidity_pct": 0}
    summary = ingest_weather(bedford, path, OBSERVED)
    assert summary.blank_cells == (("temperature_c", 0), ("irradiance_wm2", 0), ("wind_speed_ms", 143),
                                   ("humidity_pct", 0))
    assert summary.line() == ("wrote 168 observed weather hours for 1 site(s), replacing 0 stored; "
                              "wind_speed_ms blank in 143 of 168 rows (stored as missing)")
    with duckdb.connect(str(bedford), read_only=True) as con:
        nulls = con.execute("SELECT count(*) FILTER (wind_speed_ms IS NULL), count(*) FILTER (wind_speed_ms = 0), "
                            "count(*) FILTER (temperature_c IS NULL) FROM weather").fetchone()
    written = [line.split(",")[4] for line in path.read_text().splitlines()[1:]]
    assert nulls == (143, sum(cell in ("0.0", "0") for cell in written), 0)  # a blank is NULL, never 0


def test_the_issues_forecast_week_with_wind_blank_161_of_168_hours_says_so(bedford, tmp_path, cambridge_archive):
    path = bedford_feed(cambridge_archive, date(2019, 1, 14), date(2019, 1, 20), tmp_path / "fc.csv",
                        forecast=True, blank_wind=161)
    assert blank_cells_in(path)["wind_speed_ms"] == 161 and blank_cells_in(path)["temperature_c"] == 0
    summary = ingest_weather(bedford, path, FORECAST)
    assert summary.line().endswith("; wind_speed_ms blank in 161 of 168 rows (stored as missing)")


def test_a_variable_without_a_column_is_named(warehouse, tmp_path):
    summary = ingest_weather(warehouse, write(tmp_path / "o.csv", HEAD + "\ns1,2024-02-05T00:00Z,1,,2\n"), OBSERVED)
    assert summary.line().endswith("; irradiance_wm2 blank in 1 of 1 rows, humidity_pct not in the file "
                                   "(stored as missing)")
