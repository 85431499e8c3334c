"""What a run checks as it starts, and where it writes (issue 30): the operator's warehouse
from ``WADIRO_WAREHOUSE`` (every command's default, and a scheduled run's), a missing warehouse
named in one line and never created, target weeks no one could mean refused up front, readings
dated in the future ignored by the choice of the week, a foreign ``.wal`` named with its fix."""

from __future__ import annotations

import io
import json
import logging
import shutil
import sys
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import duckdb
import pytest
from prefect.utilities.callables import parameter_schema

from flows.engine import one_line_input_errors, run_flow
from flows.forecast import backfill_flow, weekly_forecast_flow
from flows.settings import BackfillSettings, WeeklySettings
from tasks.errors import WeekNotForecastError
from tasks.ingest.synthetic_fleet import FleetSpec, ingest_synthetic
from tasks.warehouse.connection import WarehouseMissingError, connect
from tasks.warehouse.run_dates import (
    EARLIEST_WEEK,
    ImplausibleWeekError,
    check_plausible_weeks,
    latest_plausible_week,
)
from tests.cli_runs import invoke, one_error_line
from tests.flows.processes import local_env
from tests.flows.warehouse_rows import make_warehouse

MODELS = "seasonal_naive"


@pytest.fixture(scope="module")
def fleet(tmp_path_factory) -> Path:
    """Three buildings' 14 weeks to Sunday 2024-04-07 (weather observed to then)."""
    return make_warehouse(tmp_path_factory.mktemp("fleet") / "w.duckdb", buildings=3)


@pytest.fixture
def warehouse(fleet, tmp_path) -> Path:
    return Path(shutil.copy(fleet, tmp_path / "operator.duckdb"))


@pytest.fixture
def no_variable(monkeypatch):
    monkeypatch.delenv("WADIRO_WAREHOUSE", raising=False)


def runs(warehouse: Path) -> list[tuple]:
    with connect(warehouse, read_only=True) as con:
        return con.execute("SELECT flow, status FROM runs ORDER BY started_at").fetchall()


# --- WADIRO_WAREHOUSE --------------------------------------------------------------------------

def test_a_scheduled_style_run_writes_to_the_warehouse_the_variable_names(
    warehouse, tmp_path, monkeypatch, no_prefect_server
):
    # As a worker runs a scheduled flow run: no parameters at all, the default settings made
    # when the module was imported, the variable set in the environment (here: afterwards).
    # Its week is the one of now (the fleet's readings end in 2024): it is named, with no
    # history to forecast it from, and no earlier week is forecast instead.
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("WADIRO_WAREHOUSE", str(warehouse))
    today = datetime.now(UTC).date()
    with pytest.raises(WeekNotForecastError) as raised:
        run_flow(weekly_forecast_flow, prefect=False)
    summary = raised.value.summary
    assert summary.building_weeks == 3 and summary.ok == 0
    assert summary.weeks[0] - today < timedelta(days=8) and summary.weeks[0].weekday() == 0
    assert f"the week of {summary.weeks[0]} could not be forecast" in str(raised.value)
    assert runs(warehouse) == [("forecast", "completed")]
    assert not (tmp_path / "warehouse.duckdb").exists()


def test_every_command_defaults_to_the_variable(warehouse, tmp_path, monkeypatch,
                                               no_prefect_server):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("WADIRO_WAREHOUSE", str(warehouse))
    result = invoke("backfill", "--start", "2024-04-01", "--end", "2024-04-01", "--models", MODELS)
    assert result.exit_code == 0, result.output
    listed = invoke("runs")
    assert listed.exit_code == 0 and "backfill" in listed.output, listed.output
    assert invoke("quality", "--limit", "1").exit_code == 0
    assert runs(warehouse) == [("backfill", "completed")]
    assert not (tmp_path / "warehouse.duckdb").exists()


def test_the_variable_is_read_where_the_run_starts_and_given_values_win(warehouse, monkeypatch):
    monkeypatch.delenv("WADIRO_WAREHOUSE", raising=False)
    imported = WeeklySettings()  # as the flow's default is made, at import
    monkeypatch.setenv("WADIRO_WAREHOUSE", str(warehouse))
    assert imported.resolved().warehouse == str(warehouse)
    assert WeeklySettings.model_validate({"trials": 2}).warehouse == str(warehouse)  # partial JSON
    assert WeeklySettings(warehouse="given.duckdb").resolved().warehouse == "given.duckdb"
    # The deployments' parameter schema says "the worker's default", not this machine's.
    schema = parameter_schema(weekly_forecast_flow.fn).model_dump()
    assert schema["properties"]["settings"]["default"]["warehouse"] is None
    assert BackfillSettings(warehouse="x.duckdb").model_dump(mode="json")["warehouse"] == "x.duckdb"


@pytest.mark.parametrize("variable", [None, "elsewhere/operator.duckdb"])
def test_a_missing_warehouse_is_named_in_one_line_and_never_created(
    tmp_path, monkeypatch, no_prefect_server, variable
):
    monkeypatch.chdir(tmp_path)
    if variable is None:
        monkeypatch.delenv("WADIRO_WAREHOUSE", raising=False)
        missing, origin = tmp_path / "warehouse.duckdb", "the default; WADIRO_WAREHOUSE is not set"
    else:
        monkeypatch.setenv("WADIRO_WAREHOUSE", variable)
        missing, origin = tmp_path / variable, "from WADIRO_WAREHOUSE"
    how = ("set WADIRO_WAREHOUSE or give --warehouse (a deployment: WADIRO_WAREHOUSE in the "
           "worker's environment, or settings.warehouse)")
    for args in (("forecast",), ("forecast", "--week", "2024-04-01"),
                 ("backfill", "--start", "2024-03-25", "--end", "2024-04-01")):
        line = one_error_line(invoke(*args, "--models", MODELS))
        assert line == (f"error: warehouse {missing} does not exist ({origin}, relative to "
                        f"{tmp_path}): {how}; for a new warehouse, run `wadiro ingest "
                        "cambridge`, `wadiro ingest synthetic`, or `wadiro ingest buildings` then "
                        "`readings` and `weather` with your own files first")
    line = one_error_line(invoke("load-pending"))
    assert line.startswith(f"error: warehouse {missing} does not exist ({origin}")
    assert line.endswith("kept results are loaded only into the warehouse whose runs kept them")
    assert list(tmp_path.rglob("*.duckdb*")) == []  # nothing created, not even by load-pending


@pytest.mark.parametrize("blank", ["", "  "])
def test_a_blank_variable_is_named_and_never_taken_for_a_folder_or_the_default(
    tmp_path, warehouse, monkeypatch, no_prefect_server, blank
):
    # Issue 46: WADIRO_WAREHOUSE= gave "warehouse . is a folder" (`forecast`: ran on, or asked
    # for, ./warehouse.duckdb, "WADIRO_WAREHOUSE is not set").
    monkeypatch.chdir(tmp_path)
    shutil.copy(warehouse, tmp_path / "warehouse.duckdb")  # the default must not be taken
    monkeypatch.setenv("WADIRO_WAREHOUSE", blank)
    (tmp_path / "b.csv").write_text("building_id,site_id,timezone,holiday_country\n"
                                    "x1,s1,Europe/London,GB\n")
    expected = ("error: WADIRO_WAREHOUSE is set but empty, so it names no warehouse; set it to "
                "the warehouse file (export WADIRO_WAREHOUSE=/path/to/warehouse.duckdb), unset "
                "it (unset WADIRO_WAREHOUSE) for warehouse.duckdb in the working directory, or "
                "give --warehouse")
    for args in (("runs",), ("quality",), ("ingest", "buildings", "b.csv"),
                 ("forecast", "--models", MODELS), ("load-pending",)):
        assert one_error_line(invoke(*args)) == expected, args
    assert runs(tmp_path / "warehouse.duckdb") == []  # the default was not run on
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b.csv", "operator.duckdb",
                                                          "warehouse.duckdb"]
    assert invoke("runs", "--warehouse", warehouse).exit_code == 0  # --warehouse still wins


def test_a_flow_run_without_its_warehouse_fails_before_writing_anything(tmp_path,
                                                                         no_variable):
    settings = BackfillSettings(warehouse=str(tmp_path / "nope.duckdb"), models=[MODELS])
    with pytest.raises(FileNotFoundError, match="nope.duckdb does not exist"):
        run_flow(backfill_flow, prefect=False, start=date(2024, 4, 1), end=date(2024, 4, 1),
                 settings=settings)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", ["report", "quality", "runs", "load-pending", "forecast"])
def test_help_says_a_missing_warehouse_is_refused(command):
    text = " ".join(invoke(command, "--help").output.replace("│", " ").split())
    assert "created on first use" not in text and "must exist" in text
    assert "WADIRO_WAREHOUSE" in text


@pytest.mark.parametrize("command", [("ingest", "synthetic"), ("demo",)])
def test_help_of_the_commands_that_create_one_says_so(command):
    text = " ".join(invoke(*command, "--help").output.replace("│", " ").split())
    assert "created on first use" in text and "WADIRO_WAREHOUSE" in text


# --- target weeks ----------------------------------------------------------------------------

@pytest.mark.parametrize("args", [
    ("forecast", "--week", "9999-12-27"),
    ("backfill", "--start", "2024-03-25", "--end", "9999-12-27"),
    ("backfill", "--start", "1900-01-01", "--end", "2024-04-01"),
])
def test_a_week_no_one_could_mean_is_refused_before_anything_is_written(
    warehouse, args, no_prefect_server
):
    before = runs(warehouse)
    line = one_error_line(invoke(*args, "--models", MODELS, "--warehouse", warehouse))
    assert " is outside the weeks a run forecasts, 1970-01-05 to " in line
    assert line.endswith("(a year after today); check the year")
    assert runs(warehouse) == before


def test_the_plausible_weeks_are_1970_to_a_year_after_today():
    today = date(2026, 11, 27)  # a Friday
    latest = latest_plausible_week(today)
    assert latest.weekday() == 0 and timedelta(weeks=52) < latest - today <= timedelta(weeks=53)
    check_plausible_weeks([EARLIEST_WEEK, latest, date(2024, 4, 1)], today)
    for week in (EARLIEST_WEEK - timedelta(weeks=1), latest + timedelta(weeks=1)):
        with pytest.raises(ImplausibleWeekError, match=week.isoformat()):
            check_plausible_weeks([week], today)


# --- readings dated in the future ------------------------------------------------------------

@pytest.fixture(scope="module")
def live_fleet(tmp_path_factory) -> Path:
    """14 weeks of readings to Sunday 2024-04-07 and the next week's weather forecast: a weekly
    run forecasts the week of 2024-04-08."""
    path = tmp_path_factory.mktemp("live") / "w.duckdb"
    ingest_synthetic(path, FleetSpec(buildings=3, start=date(2024, 1, 1), weeks=14,
                                     forecast_weeks=1, seed=3))
    return path


@pytest.mark.parametrize("year", [2099, 9999])
def test_readings_dated_in_the_future_do_not_move_the_week(live_fleet, tmp_path, year,
                                                           no_prefect_server, wadiro_process):
    warehouse = Path(shutil.copy(live_fleet, tmp_path / "w.duckdb"))
    with duckdb.connect(str(warehouse)) as con:
        con.execute("INSERT INTO meter_readings VALUES ('synthetic_b00001', ?, 5.0)",
                    [datetime(year, 6, 1, tzinfo=UTC)])
    done = wadiro_process.run(["forecast", "--as-of", "2024-04-08 06:00", "--models", MODELS,
                               "--warehouse", warehouse],
                              capture_output=True, text=True, env=local_env(), timeout=300)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-3000:]
    assert "3 building-weeks of the week of 2024-04-08: 3 published" in done.stdout
    with connect(warehouse, read_only=True) as con:
        weeks = con.execute("SELECT DISTINCT target_week FROM window_status").fetchall()
    assert weeks == [(date(2024, 4, 8),)]  # not last week again


def test_when_every_reading_is_in_the_future_the_run_says_so(live_fleet, tmp_path,
                                                              no_prefect_server):
    warehouse = Path(shutil.copy(live_fleet, tmp_path / "w.duckdb"))
    with duckdb.connect(str(warehouse)) as con:
        con.execute("UPDATE meter_readings SET ts = ts + INTERVAL 100 YEAR")
    result = invoke("forecast", "--as-of", "2024-04-08 06:00", "--models", MODELS,
                    "--warehouse", warehouse)
    assert result.exit_code == 4, result.output
    [line] = [line for line in result.output.splitlines() if line.startswith("error: ")]
    assert "Traceback" not in result.output and line.startswith("error: the week of 2024-04-08 could not be forecast by the learned "
                           "models for any of the 3 building(s)")


# --- a foreign .wal --------------------------------------------------------------------------

def test_a_foreign_wal_file_is_named_with_its_fix(warehouse, tmp_path, no_prefect_server):
    other = tmp_path / "other.duckdb"
    with duckdb.connect(str(other)) as con:  # a log left behind by another database
        con.execute("SET checkpoint_threshold = '1TB'")
        con.execute("CREATE TABLE t AS SELECT 1 AS x")
        shutil.copy(tmp_path / "other.duckdb.wal", tmp_path / "operator.duckdb.wal")
    log = tmp_path / "operator.duckdb.wal"
    line = one_error_line(invoke("runs", "--warehouse", warehouse))
    assert line == (f"error: warehouse {warehouse} cannot be opened: its write-ahead log {log} "
                    f"does not fit it (Failure while replaying WAL file \"{log}\": WAL does not "
                    "match database file.): it belongs to another database (it was copied or "
                    "restored without its warehouse, or the warehouse was replaced without it); "
                    f"move it aside, e.g. `mv {log} {log}.foreign`, and the warehouse opens as "
                    "of its last checkpoint")
    log.rename(tmp_path / "operator.duckdb.wal.foreign")
    assert invoke("runs", "--warehouse", warehouse).output.strip() == "no runs yet"


# --- the weekly run's leaderboard artifact ---------------------------------------------------

def test_the_weekly_run_publishes_its_leaderboard(live_fleet, tmp_path, prefect_backend,
                                                  no_variable):
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    warehouse = Path(shutil.copy(live_fleet, tmp_path / "w.duckdb"))
    summary = weekly_forecast_flow(as_of=datetime(2024, 4, 8, 6),
                                   settings={"warehouse": str(warehouse),
                                             "models": ["svr", "seasonal_naive"], "trials": 1})
    assert summary.weeks == [date(2024, 4, 8)]  # not over yet: nothing of it can be scored
    with get_client(sync_client=True) as client:
        boards = [a for a in client.read_artifacts(artifact_filter=ArtifactFilter(
            key=ArtifactFilterKey(any_=["forecast-leaderboard"])))
            if summary.run_id in (a.description or "")]
    assert len(boards) == 1 and "validation week" in boards[0].description
    rows = json.loads(boards[0].data) if isinstance(boards[0].data, str) else boards[0].data
    with connect(warehouse, read_only=True) as con:
        validated = dict(con.execute(
            "SELECT model, count(*) FROM model_fits WHERE run_id = ? AND status = 'ok' "
            "AND validation_mae IS NOT NULL GROUP BY model", [summary.run_id]).fetchall())
    assert {r["model"]: r["building_weeks"] for r in rows} == validated
    assert {r["model"] for r in rows} >= {"svr", "seasonal_naive"}
    naive = next(r for r in rows if r["model"] == "seasonal_naive")
    assert naive["mae_vs_naive"] == 1.0


# --- Prefect's logs of an input error --------------------------------------------------------

def _record_of(error: BaseException) -> logging.LogRecord:
    try:
        raise error
    except BaseException:
        return logging.LogRecord("prefect.engine", logging.ERROR, __file__, 1,
                                 "Execution of flow run %r exited with unexpected exception",
                                 ("f00",), sys.exc_info())


def test_prefect_logs_a_pipeline_error_as_one_line_and_any_other_with_its_traceback():
    one_line_input_errors()
    handler = logging.StreamHandler(io.StringIO())
    logger = logging.getLogger("prefect.engine")
    logger.addHandler(handler)
    try:
        logger.handle(_record_of(FileNotFoundError("a bug's own error")))
        logger.handle(_record_of(WarehouseMissingError("warehouse /x/y.duckdb does not exist")))
    finally:
        logger.removeHandler(handler)
    printed = handler.stream.getvalue().splitlines()
    assert printed[0] == "Execution of flow run 'f00' exited with unexpected exception"
    assert printed[1] == "Traceback (most recent call last):"  # not a pipeline error: kept
    assert printed[-1] == ("Execution of flow run 'f00' exited with unexpected exception: "
                           "warehouse /x/y.duckdb does not exist")
    assert printed[-2].startswith("FileNotFoundError")
