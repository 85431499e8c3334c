"""``wadiro ingest buildings|readings|weather``: an operator's files through the command line,
one-line errors that change no table, and options refused before anything is written."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest

from tests.cli_runs import invoke, one_error_line
from tests.tasks.ingest.operator_files import BUILDINGS_CSV, contents, row_counts, utc, write  # noqa: E402

QUARTERS = "ts,b1,b2\n" + "".join(
    f"2024-10-27 {h:02d}:{m:02d},{4 * h + m // 15},8\n" for h in (0, 1) for m in (0, 15, 30, 45)
) + "".join(f"2024-10-27 01:{m:02d},1,8\n" for m in (0, 15, 30, 45))
OBSERVED = "site_id,ts,temperature_c,irradiance_wm2,wind_speed_ms\ns1,2024-10-26T23:00Z,9,0,2\n"
FORECAST = ("site_id,ts,temperature_c,irradiance_wm2,wind_speed_ms,issued_at\n"
            "s1,2024-10-27T00:00Z,8,0,2,2024-10-26T06:00Z\ns1,2024-10-27T00:00Z,7,0,2,2024-10-26T18:00Z\n")




@pytest.fixture
def loaded(tmp_path, no_prefect_server) -> Path:
    """A warehouse after the four commands of an operator's first day."""
    warehouse = tmp_path / "w.duckdb"
    steps = [
        (("buildings", write(tmp_path / "b.csv", BUILDINGS_CSV)),
         "buildings: wrote 3 building(s) (3 new, 0 updated)"),
        (("readings", write(tmp_path / "r.csv", QUARTERS), "--unit", "kW", "--timezone", "Europe/London"),
         "readings: wrote 6 hourly readings from 15-minute readings (0 missing) for 2 building(s), "
         "2024-10-26 23:00 to 2024-10-27 01:00 UTC, replacing 0 stored"),
        (("weather", write(tmp_path / "o.csv", OBSERVED), "--kind", "observed"),
         "weather: wrote 1 observed weather hours for 1 site(s), replacing 0 stored"),
        (("weather", write(tmp_path / "f.csv", FORECAST), "--kind", "forecast"),
         "weather: wrote 1 forecast weather hours for 1 site(s), replacing 0 stored (the latest issue "
         "per hour: 1 earlier issue(s) in the file and 0 older than the stored forecast left out)"),
    ]
    for args, summary in steps:
        result = invoke("ingest", *args, "--warehouse", warehouse)
        assert result.exit_code == 0, result.output
        assert result.output.startswith(summary), result.output
    return warehouse


def test_an_operators_files_land_as_hand_computed(loaded):
    rows = contents(loaded)
    # local 00:00-00:45 BST is 23:00Z; 01:00-01:45 first BST (00:00Z), then GMT (01:00Z)
    # kW over 15 minutes: kWh = sum / 4; b1's values 0..3, 4..7, then 1 x 4
    assert [(b, t, v) for b, t, v in rows["meter_readings"] if b == "b1"] == [
        ("b1", utc("2024-10-26 23:00"), 1.5), ("b1", utc("2024-10-27 00:00"), 5.5),
        ("b1", utc("2024-10-27 01:00"), 1.0)]
    assert {v for b, _, v in rows["meter_readings"] if b == "b2"} == {8.0}
    assert sorted((r[1], r[2], r[6]) for r in rows["weather"]) == [
        (utc("2024-10-26 23:00"), 9.0, "observed"), (utc("2024-10-27 00:00"), 7.0, "forecast")]


def test_every_command_again_changes_nothing(loaded, tmp_path):
    before = contents(loaded)
    for args in (("buildings", tmp_path / "b.csv"),
                 ("readings", tmp_path / "r.csv", "--unit", "kW", "--timezone", "Europe/London"),
                 ("weather", tmp_path / "o.csv", "--kind", "observed"),
                 ("weather", tmp_path / "f.csv", "--kind", "forecast")):
        assert invoke("ingest", *args, "--warehouse", loaded).exit_code == 0
    assert contents(loaded) == before


BAD = [
    (("readings",), "ts,b1\n2024-10-27 01:00,1\n", ("--timezone", "Europe/London"),
     "line 2, column 'ts': 2024-10-27 01:00 occurs twice in Europe/London"),
    (("readings",), "ts,b1\n2024-03-31 01:00,1\n", ("--timezone", "Europe/London"),
     "line 2, column 'ts': 2024-03-31 01:00 does not exist in Europe/London"),
    (("readings",), "ts,b1,b1\n2024-02-05T00:00Z,1,2\n", (), "column 'b1' appears more than once"),
    (("readings",), "ts,b1\n2024-02-05T00:00Z,-1\n", (), "line 2, column 'b1': -1 is not a finite value"),
    (("readings",), "ts,b1,b9\n2024-02-05T00:00Z,1,1\n", (), "1 building id(s) not in the buildings table: 'b9'"),
    (("readings",), "", (), "empty file"),
    (("weather", "--kind", "observed"), OBSERVED.replace("s1,", "s9,"), (),
     "1 site id(s) that no building in the warehouse uses: 's9'"),
    (("weather", "--kind", "forecast"), OBSERVED, (), "missing required column(s) 'issued_at'"),
    (("buildings",), "building_id,site_id,timezone,holiday_country\nb1,s1,Europe/Lndon,GB\n", (),
     "line 2, column 'timezone': unknown time zone 'Europe/Lndon'"),
    (("buildings",), "building_id,site_id,timezone,holiday_country,holiday_subdiv\nb1,s1,UTC,GB,XYZ\n", (),
     "line 2, column 'holiday_subdiv': 'XYZ' is not a subdivision"),
]


@pytest.mark.parametrize(("command", "text", "options", "message"), BAD,
                         ids=[f"{c[0]}-{m[:30]}" for c, _, _, m in BAD])
def test_a_bad_file_is_one_line_and_changes_no_table(loaded, tmp_path, command, text, options, message):
    counts, before = row_counts(loaded), contents(loaded)
    path = write(tmp_path / "bad.csv", text)
    line = one_error_line(invoke("ingest", command[0], path, *command[1:], *options, "--warehouse", loaded))
    assert line.startswith(f"error: {path}: ") and message in line
    assert row_counts(loaded) == counts and contents(loaded) == before


@pytest.mark.parametrize("error", [
    pa.lib.ArrowException("Unknown error: Wrapping 2034-09-04 18:00 failed"), MemoryError()],
    ids=["arrow", "python"])
def test_a_file_too_large_for_memory_is_one_line_saying_so(loaded, tmp_path, monkeypatch, error):
    # Issue 46: under `ulimit -v 1800000` a 181 MB CSV ended in a 62-line traceback ending in
    # pyarrow's "Wrapping ... failed" (Python's MemoryError, cleared by pyarrow). The machine's
    # refusal is simulated where the file is read and checked.
    import flows.ingest

    def out_of_memory(*args):
        raise error

    monkeypatch.setattr(flows.ingest, "load_readings", out_of_memory)
    counts, before = row_counts(loaded), contents(loaded)
    path = write(tmp_path / "big.csv", QUARTERS)
    line = one_error_line(invoke("ingest", "readings", path, "--warehouse", loaded))
    assert line.startswith(f"error: cannot read {path}: the process ran out of memory reading the "
                           f"whole file ({type(error).__name__}"), line
    assert "split it into smaller files" in line and "`ulimit -v`" in line
    assert line.endswith("what was stored before is unchanged")
    assert row_counts(loaded) == counts and contents(loaded) == before


@pytest.mark.parametrize("args", [
    ("readings", "--unit", "MWh"),
    ("readings", "--layout", "diagonal"),
    ("readings", "--timezone", "Mars/Olympus"),
    ("readings", "--ambiguous", "sometimes"),
    ("readings", "--implausible", "ignore"),
    ("weather",),
    ("weather", "--kind", "guessed"),
    ("weather", "--kind", "observed", "--timezone", "Europe/Londres"),
    ("weather", "--kind", "forecast", "--replace-range"),
    ("readings", "--delimiter", "x"),
    ("readings", "--decimal", ";"),
    ("readings", "--decimal", ","),  # with the default delimiter, a comma
    ("readings", "--encoding", "klingon"),
    ("buildings", "--delimiter", "::"),
    ("readings", "--register-unit", "Wh"),  # without --unit register
    ("readings", "--unit", "register", "--register-unit", "GWh"),
    ("readings", "--time-format", "dd/mm/yyyy"),
    ("readings", "--time-format", "%d/%m/%Y %H:%M", "--dayfirst"),
    ("buildings", "--columns", "Asset Name"),
    ("weather", "--kind", "observed", "--columns", "=site_id"),
], ids=lambda a: " ".join(a))
def test_options_that_do_not_exist_are_usage_errors(tmp_path, args):
    path = write(tmp_path / "x.csv", "ts,b1\n2024-02-05T00:00Z,1\n")
    warehouse = tmp_path / "w.duckdb"
    result = invoke("ingest", args[0], path, *args[1:], "--warehouse", warehouse)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and not warehouse.exists()


def test_a_missing_file_is_named(tmp_path, no_prefect_server):
    line = one_error_line(invoke("ingest", "readings", tmp_path / "nope.csv", "--warehouse", tmp_path / "w.duckdb"))
    assert line == f"error: file does not exist: {tmp_path / 'nope.csv'}"


def test_through_prefect(prefect_backend, tmp_path):
    warehouse = tmp_path / "w.duckdb"
    assert invoke("ingest", "buildings", write(tmp_path / "b.csv", BUILDINGS_CSV), "--warehouse", warehouse).exit_code == 0
    result = invoke("ingest", "readings", write(tmp_path / "r.csv", "ts,b3\n2024-02-05T00:00Z,1\n"), "--warehouse", warehouse)
    assert result.exit_code == 0, result.output
    assert row_counts(warehouse)["meter_readings"] == 1


def _cell(value) -> str:
    return "" if value is None or value != value else repr(float(value))


def _but_source(buildings: list[tuple]) -> list[tuple]:
    """``buildings`` rows without their ``source`` (the file's name: the 7th column)."""
    return [row[:6] + row[7:] for row in buildings]


def test_a_wide_local_time_export_of_real_readings_stores_what_the_archive_ingest_stores(
    tmp_path, cambridge_archive, no_prefect_server
):
    """Two real buildings over the October 2018 clock change, exported as an operator would:
    a wide CSV in local wall-clock time (the fall-back hour twice), blanks where the archive's
    zeros mark missing readings, the weather with UTC offsets. Ingested through the generic
    commands, the warehouse holds what ``wadiro ingest cambridge`` stores for those hours."""
    from tasks.ingest.cambridge_archive import load_cambridge

    ids, start, end = ["UCam_Building_b0", "UCam_Building_b7"], "2018-10-22", "2018-11-04"
    archive = tmp_path / "archive.duckdb"
    result = invoke("ingest", "cambridge", "--path", cambridge_archive, "--buildings", ",".join(ids),
                    "--start", start, "--end", end, "--warehouse", archive)
    assert result.exit_code == 0, result.output
    batch = load_cambridge(cambridge_archive, ids, pd.Timestamp(start).date(), pd.Timestamp(end).date())

    wide = batch.readings.to_pandas().pivot(index="ts", columns="building_id", values="kwh")[ids]
    local = wide.index.tz_convert("Europe/London").strftime("%Y-%m-%d %H:%M")
    assert list(local).count("2018-10-28 01:00") == 2
    export = write(tmp_path / "export.csv", "ts," + ",".join(ids) + "\n" + "".join(
        f"{t}," + ",".join(_cell(v) for v in row) + "\n" for t, row in zip(local, wide.to_numpy(), strict=True)))
    meta = batch.buildings.to_pandas()
    buildings = write(tmp_path / "buildings.csv", "building_id,site_id,timezone,holiday_country,holiday_subdiv\n"
                      + "".join(f"{r.building_id},{r.site_id},{r.timezone},{r.holiday_country},{r.holiday_subdiv}\n"
                                for r in meta.itertuples()))
    weather = batch.weather.to_pandas()
    feed = write(tmp_path / "weather.csv", "site_id,ts,temperature_c,irradiance_wm2,wind_speed_ms,humidity_pct\n"
                 + "".join(f"{r.site_id},{r.ts.isoformat()},{_cell(r.temperature_c)},{_cell(r.irradiance_wm2)},"
                           f"{_cell(r.wind_speed_ms)},{_cell(r.humidity_pct)}\n" for r in weather.itertuples()))

    generic = tmp_path / "generic.duckdb"
    for args in (("buildings", buildings), ("readings", export, "--timezone", "Europe/London"),
                 ("weather", feed, "--kind", "observed")):
        result = invoke("ingest", *args, "--warehouse", generic)
        assert result.exit_code == 0, result.output
    ours, theirs = contents(generic), contents(archive)
    assert len(theirs["meter_readings"]) == 2 * 14 * 24
    assert [r[:2] for r in ours["meter_readings"]] == [r[:2] for r in theirs["meter_readings"]]
    assert [r[2] for r in ours["meter_readings"]] == pytest.approx([r[2] for r in theirs["meter_readings"]],
                                                                   rel=1e-12, nan_ok=True)
    assert _but_source(ours["buildings"]) == _but_source(theirs["buildings"])
    assert len(ours["weather"]) == len(theirs["weather"]) == 14 * 24
    for mine, archived in zip(ours["weather"], theirs["weather"], strict=True):
        assert mine[:2] == archived[:2] and mine[6:] == archived[6:] == ("observed", None)
        assert list(mine[2:6]) == pytest.approx(list(archived[2:6]), rel=1e-12)


def test_the_issues_asset_register_and_dd_mm_yyyy_meter_export_of_real_buildings(
    tmp_path, cambridge_archive, no_prefect_server
):
    """Issue 30's operator: an asset register (``Asset Name, Site, ...``) and a meter export with
    ``Date/Time`` as ``dd/mm/yyyy HH:MM`` in local time, of two real buildings over the October
    2018 clock change, ingested with --columns and --time-format: the warehouse holds what
    ``wadiro ingest cambridge`` stores for those hours."""
    from tasks.ingest.cambridge_archive import load_cambridge

    ids, start, end = ["UCam_Building_b0", "UCam_Building_b7"], "2018-10-22", "2018-11-04"
    archive = tmp_path / "archive.duckdb"
    assert invoke("ingest", "cambridge", "--path", cambridge_archive, "--buildings", ",".join(ids),
                  "--start", start, "--end", end, "--warehouse", archive).exit_code == 0
    batch = load_cambridge(cambridge_archive, ids, pd.Timestamp(start).date(), pd.Timestamp(end).date())
    register = write(tmp_path / "assets.csv", "Asset Name,Site,Time zone,Country,Region,Floor area\n" + "".join(
        f"{r.building_id},{r.site_id},{r.timezone},{r.holiday_country},{r.holiday_subdiv},1200\n"
        for r in batch.buildings.to_pandas().itertuples()))
    wide = batch.readings.to_pandas().pivot(index="ts", columns="building_id", values="kwh")[ids]
    local = wide.index.tz_convert("Europe/London").strftime("%d/%m/%Y %H:%M")
    assert list(local).count("28/10/2018 01:00") == 2
    meter = write(tmp_path / "meter.csv", "Date/Time,Main meter b0,Main meter b7\n" + "".join(
        f"{t}," + ",".join(_cell(v) for v in row) + "\n" for t, row in zip(local, wide.to_numpy(), strict=True)))
    mapping = write(tmp_path / "meters.json", '{"Date/Time": "ts", "Main meter b0": "UCam_Building_b0", '
                    '"Main meter b7": "UCam_Building_b7"}')

    generic = tmp_path / "generic.duckdb"
    refused = invoke("ingest", "buildings", register, "--warehouse", generic)
    assert refused.exit_code == 1 and "missing required column(s) 'building_id'" in refused.output
    for args in (("buildings", register, "--columns", "Asset Name=building_id,Site=site_id,Time zone=timezone,"
                  "Country=holiday_country,Region=holiday_subdiv,Floor area="),
                 ("readings", meter, "--columns-file", mapping, "--time-format", "%d/%m/%Y %H:%M",
                  "--timezone", "Europe/London")):
        result = invoke("ingest", *args, "--warehouse", generic)
        assert result.exit_code == 0, result.output
    ours, theirs = contents(generic), contents(archive)
    assert [r[:2] for r in ours["meter_readings"]] == [r[:2] for r in theirs["meter_readings"]]
    assert [r[2] for r in ours["meter_readings"]] == pytest.approx([r[2] for r in theirs["meter_readings"]],
                                                                   rel=1e-12, nan_ok=True)
    assert _but_source(ours["buildings"]) == _but_source(theirs["buildings"])


def test_the_help_pages_say_what_a_file_replaces():
    readings = " ".join(invoke("ingest", "readings", "--help").output.split())
    assert "Only the hours the file holds change" in readings
    assert "a stored hour the file does not mention is never erased" in readings
    assert "--replace-range" in readings
    assert "Timestamps label the start of each interval" in readings
    weather = " ".join(invoke("ingest", "weather", "--help").output.split())
    assert "the latest issue per site and hour is kept" in weather


# --- a file with gaps never erases the stored hours between its rows (issue 18, item 2) ----------

B0 = "UCam_Building_b0"


@pytest.fixture
def real_two_months(tmp_path, cambridge_archive, no_prefect_server) -> Path:
    """Building b0 and the Bedford weather of January and February 2019 from the real archive."""
    warehouse = tmp_path / "w.duckdb"
    result = invoke("ingest", "cambridge", "--path", cambridge_archive, "--buildings", B0,
                    "--start", "2019-01-01", "--end", "2019-02-28", "--warehouse", warehouse)
    assert result.exit_code == 0, result.output
    return warehouse


def _changed(before: list[tuple], after: list[tuple]) -> tuple[dict, dict]:
    """The rows only ``before`` has, and those only ``after`` has, keyed by all but the values."""
    key = lambda row: (row[0], row[1], *row[6:]) if len(row) > 3 else row[:2]  # noqa: E731
    old, new = {key(r): r for r in before}, {key(r): r for r in after}
    return ({k: r for k, r in old.items() if new.get(k) != r},
            {k: r for k, r in new.items() if old.get(k) != r})


def test_a_readings_file_of_two_days_a_month_apart_changes_only_those_days(real_two_months, tmp_path):
    before = contents(real_two_months)
    days = pd.date_range("2019-01-10", periods=24, freq="h", tz="UTC").append(
        pd.date_range("2019-02-10", periods=24, freq="h", tz="UTC"))
    path = write(tmp_path / "two-days.csv", "building_id,ts,kwh\n" + "".join(
        f"{B0},{t:%Y-%m-%dT%H:%MZ},{40 + t.hour}\n" for t in days))
    result = invoke("ingest", "readings", path, "--warehouse", real_two_months)
    assert result.exit_code == 0, result.output
    assert "wrote 48 hourly readings (0 missing) for 1 building(s), 2019-01-10 00:00 to 2019-02-10 " \
           "23:00 UTC, replacing 48 stored in" in result.output
    after = contents(real_two_months)
    gone, new = _changed(before["meter_readings"], after["meter_readings"])
    assert len(before["meter_readings"]) == len(after["meter_readings"]) == 59 * 24
    assert set(gone) == set(new) == {(B0, t.to_pydatetime()) for t in days}
    assert {k: r[2] for k, r in new.items()} == {(B0, t.to_pydatetime()): 40.0 + t.hour for t in days}
    assert after["weather"] == before["weather"] and after["buildings"] == before["buildings"]
    again = invoke("ingest", "readings", path, "--warehouse", real_two_months)
    assert again.exit_code == 0 and contents(real_two_months) == after

    replaced = invoke("ingest", "readings", path, "--replace-range", "--warehouse", real_two_months)
    assert replaced.exit_code == 0, replaced.output
    assert ("replacing 48 stored; removed 720 stored hour(s) of the file's range that it does not hold "
            "(--replace-range)") in replaced.output
    kept = contents(real_two_months)["meter_readings"]
    assert len(kept) == 59 * 24 - 720
    assert not [r for r in kept if utc("2019-01-11 00:00") <= r[1] < utc("2019-02-10 00:00")]


def test_a_weather_file_of_two_rows_nine_days_apart_changes_only_those_hours(real_two_months, tmp_path):
    before = contents(real_two_months)
    path = write(tmp_path / "two-rows.csv", "site_id,ts,temperature_c,irradiance_wm2,wind_speed_ms\n"
                 "bedford,2019-02-01T12:00Z,5,100,3\nbedford,2019-02-10T12:00Z,6,,3\n")
    result = invoke("ingest", "weather", path, "--kind", "observed", "--warehouse", real_two_months)
    assert result.exit_code == 0, result.output
    assert ("wrote 2 observed weather hours for 1 site(s), replacing 2 stored; irradiance_wm2 blank in 1 "
            "of 2 rows, humidity_pct not in the file (stored as missing) in") in result.output
    after = contents(real_two_months)
    gone, new = _changed(before["weather"], after["weather"])
    assert len(after["weather"]) == len(before["weather"]) == 59 * 24
    assert set(gone) == set(new) == {("bedford", utc("2019-02-01 12:00"), "observed", None),
                                     ("bedford", utc("2019-02-10 12:00"), "observed", None)}
    assert [r[2:6] for r in sorted(new.values())] == [(5.0, 100.0, 3.0, None), (6.0, None, 3.0, None)]
    assert after["meter_readings"] == before["meter_readings"]

    replaced = invoke("ingest", "weather", path, "--kind", "observed", "--replace-range",
                      "--warehouse", real_two_months)
    assert replaced.exit_code == 0, replaced.output
    assert "removed 215 stored hour(s) of the file's range that it does not hold" in replaced.output
    assert len(contents(real_two_months)["weather"]) == 59 * 24 - 215


def test_a_new_buildings_wh_register_needs_its_unit_and_is_stored_at_its_real_level(tmp_path, no_prefect_server):
    # Issue 60: a 13th building (5.1 kWh/h) sent as a Wh register with --unit register alone was
    # stored 1,000x too high, exit 0. Declared as a 500 m2 general office: 95 kWh/m2/year x 500 /
    # 8,760 h = 5.422 kWh/h, so 5.1 is plausible and 5,100 (940.5x) is not.
    warehouse = tmp_path / "w.duckdb"
    buildings = write(tmp_path / "b.csv", "building_id,site_id,timezone,holiday_country,building_type,"
                      "floor_area_m2\nb13,s1,Europe/London,GB,general office,500\n")
    assert invoke("ingest", "buildings", buildings, "--warehouse", warehouse).exit_code == 0
    rises = [5000, 5100, 5200] * 56  # Wh a hour, a mean of 5,100
    register = [48_213_000 + sum(rises[:h]) for h in range(169)]
    times = pd.date_range("2024-03-11", periods=169, freq="h", tz="UTC")
    path = write(tmp_path / "r.csv", "building_id,ts,kwh\n" + "".join(
        f"b13,{t:%Y-%m-%dT%H:%MZ},{v}\n" for t, v in zip(times, register, strict=True)))
    before = contents(warehouse)
    line = one_error_line(invoke("ingest", "readings", path, "--unit", "register", "--warehouse", warehouse))
    assert line.startswith(f"error: {path}: --unit register needs the unit the register counts in: give "
                           "--register-unit kWh|Wh|MWh; Wh looks right: the register of building 'b13' rises by a "
                           "mean of 5,100 an hour, 5.1 kWh/h in Wh, plausible against 5.422 kWh/h, the level "
                           "of its declared 500 m2 of general office"), line
    line = one_error_line(invoke("ingest", "readings", path, "--unit", "register", "--register-unit", "kWh",
                                 "--warehouse", warehouse))
    assert ("building 'b13' is new (fewer than 24 stored readings within 28 days of the file's hours): a mean "
            "of 5,100 kWh/h is 941x 5.422 kWh/h") in line and "give --register-unit Wh" in line
    assert contents(warehouse) == before
    result = invoke("ingest", "readings", path, "--unit", "register", "--register-unit", "Wh",
                    "--warehouse", warehouse)
    assert result.exit_code == 0 and result.output.startswith("readings: wrote 168 hourly readings"), result.output
    stored = [v for b, _, v in contents(warehouse)["meter_readings"] if b == "b13"]
    assert sum(stored) / len(stored) == pytest.approx(5.1) and max(stored) == pytest.approx(5.2)
