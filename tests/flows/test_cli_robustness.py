"""Commands as a careless or hostile user runs them: no Prefect server, several at once on a busy
machine, empty lists, impossible numbers, a warehouse that is empty, missing or damaged, and
building ids that are not file names."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest

from tasks.ingest.synthetic_fleet import FleetSpec, ingest_synthetic
from tasks.warehouse.connection import connect
from tests.cli_runs import invoke, one_error_line
from tests.flows.processes import WADIRO, local_env
from tests.flows.warehouse_rows import FAST_MODELS, WEEKS, make_warehouse
from tests.tasks.ingest.test_ingest_cambridge import electricity_file, snapshot, write_archive  # noqa: E402

WEATHER_FILE = Path("aux_data", "MetOffice Weather Data", "processed_data", "bedford", "2019.csv")




def runs_of(warehouse: Path) -> list[tuple]:
    with duckdb.connect(str(warehouse), read_only=True) as con:
        tables = {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
        return con.execute("SELECT status FROM runs").fetchall() if "runs" in tables else []


@pytest.fixture(scope="module")
def fleet(tmp_path_factory) -> Path:
    return make_warehouse(tmp_path_factory.mktemp("fleet") / "w.duckdb", buildings=2)


@pytest.fixture(scope="module")
def scored(tmp_path_factory, fleet) -> Path:
    """The fleet with one week forecast and scored (seasonal naive)."""
    from flows.engine import run_flow
    from flows.forecast import backfill_flow
    from flows.settings import BackfillSettings

    warehouse = tmp_path_factory.mktemp("scored") / "w.duckdb"
    shutil.copy(fleet, warehouse)
    run_flow(backfill_flow, prefect=False, start=WEEKS[-1], end=WEEKS[-1],
             settings=BackfillSettings(warehouse=str(warehouse), models=FAST_MODELS[-1:],
                                       runner="threads"))
    return warehouse


# --- 1. no temporary server: commands do not depend on one -------------------------------------

def test_commands_run_without_any_prefect_server(tmp_path, wadiro_process):
    """Prefect's temporary server forbidden (it would be the only API): ingest and backfill
    still run, through no Prefect API at all."""
    env = local_env(PREFECT_SERVER_ALLOW_EPHEMERAL_MODE="false")
    warehouse = tmp_path / "w.duckdb"
    ingest = wadiro_process.run(
        ["ingest", "synthetic", "--buildings", "2", "--start", "2024-01-01", "--weeks", "14",
         "--warehouse", str(warehouse)], env=env, capture_output=True, text=True, timeout=300)
    assert ingest.returncode == 0, ingest.stderr[-3000:]
    backfill = wadiro_process.run(
        ["backfill", "--start", WEEKS[-1].isoformat(), "--end", WEEKS[-1].isoformat(),
         "--models", "seasonal_naive", "--runner", "threads", "--warehouse", str(warehouse)],
        env=env, capture_output=True, text=True, timeout=300)
    assert backfill.returncode == 0, backfill.stderr[-3000:]
    assert (f"2 building-weeks of the week of {WEEKS[-1].isoformat()}: 2 published: 0 learned, "
            "2 persistence, 0 degraded" in backfill.stdout)
    assert runs_of(warehouse) == [("completed",)]  # the run's history: the warehouse's runs table
    history = wadiro_process.run(["runs", "--warehouse", warehouse], env=env,
                                 capture_output=True, text=True, timeout=300)
    assert history.returncode == 0 and " backfill  completed " in history.stdout, history.stderr


_BURN = "import time\nend = time.time() + 600\nwhile time.time() < end: pass\n"


@pytest.mark.slow
def test_three_commands_at_once_on_a_busy_machine_all_succeed(tmp_path, cambridge_archive):
    """Two CPU-bound processes per core, and three ingests of a year of the archive at once."""
    burners = [subprocess.Popen([sys.executable, "-c", _BURN]) for _ in range(2 * os.cpu_count())]
    try:
        time.sleep(1.0)
        commands = [subprocess.Popen(
            [WADIRO, "ingest", "cambridge", "--path", str(cambridge_archive), "--start", "2018-01-01",
             "--end", "2018-12-31", "--warehouse", str(tmp_path / f"w{i}.duckdb")],
            env=local_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for i in range(3)]
        for command in commands:
            out, err = command.communicate(timeout=900)
            assert command.returncode == 0, err[-3000:]
            assert out.startswith("cambridge: wrote ")
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()


# --- 6. empty lists and other invalid options: refused before any row is written -------------

@pytest.mark.parametrize("args", [
    ("forecast", "--buildings", ""),
    ("forecast", "--models", ""),
    ("backfill", "--start", "2024-03-25", "--end", "2024-04-01", "--buildings", " , "),
    ("backfill", "--start", "2024-03-25", "--end", "2024-04-01", "--models", ","),
    ("forecast", "--feature-set", "bogus"),
    ("forecast", "--workers", "0"),
    ("forecast", "--lock-wait-minutes", "-1"),
    ("report", "--buildings", ""),
    ("ingest", "cambridge", "--path", "nowhere", "--buildings", ""),
    ("ingest", "cambridge", "--path", "nowhere", "--implausible", "ignore"),
], ids=lambda a: " ".join(a))
def test_invalid_options_are_refused_before_anything_is_written(args, tmp_path):
    warehouse = tmp_path / "w.duckdb"
    result = invoke(*args, "--warehouse", str(warehouse))
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert not warehouse.exists()  # not even created


# --- 7. impossible numbers do not slip into the warehouse --------------------------------------

def _set_cell(path: Path, line: int, column: int, value: str) -> None:
    lines = path.read_text().splitlines()
    cells = lines[line - 1].split(",")
    cells[column] = value
    lines[line - 1] = ",".join(cells)
    path.write_text("\n".join(lines) + "\n")


IMPOSSIBLE = [
    ("electricity", 1, "inf", "'equipment load [kWh]': inf is not a finite value"),
    ("electricity", 1, "1e300", "'equipment load [kWh]': 1e+300 is not"),
    ("electricity", 1, "-50.5", "'equipment load [kWh]': -50.5 is not"),
    ("electricity", 1, "nan", "'equipment load [kWh]': nan is not"),
    ("weather", 1, "inf", "'air_temperature [degC]': inf is not"),
    ("weather", 1, "1e300", "'air_temperature [degC]': 1e+300 is not"),
    ("weather", 3, "-999", "'glbl_irad_amt [W/m2]': -999 is not"),
]


@pytest.fixture
def archive_and_warehouse(tmp_path, no_prefect_server):
    archive = write_archive(tmp_path / "archive")
    warehouse = tmp_path / "w.duckdb"
    assert invoke("ingest", "cambridge", "--path", str(archive), "--warehouse", str(warehouse)).exit_code == 0
    return archive, warehouse


@pytest.mark.parametrize(("where", "column", "value", "message"), IMPOSSIBLE,
                         ids=[f"{w}-{v}" for w, _, v, _ in IMPOSSIBLE])
def test_an_impossible_value_is_refused_naming_file_line_and_column(
    archive_and_warehouse, where, column, value, message, no_prefect_server
):
    archive, warehouse = archive_and_warehouse
    before = snapshot(warehouse)
    path = electricity_file(archive, building=1) if where == "electricity" else archive / WEATHER_FILE
    _set_cell(path, 4001, column, value)
    line = one_error_line(invoke("ingest", "cambridge", "--path", str(archive),
                                 "--warehouse", str(warehouse)))
    assert f"{path}: line 4001, column {message}" in line
    assert "--implausible missing" in line  # and what to do about it
    assert snapshot(warehouse) == before


def test_impossible_values_can_be_stored_as_missing_and_are_counted(
    archive_and_warehouse, no_prefect_server
):
    archive, warehouse = archive_and_warehouse
    _set_cell(electricity_file(archive, building=1), 4001, 1, "-50.5")
    _set_cell(archive / WEATHER_FILE, 4001, 1, "1e300")
    _set_cell(archive / WEATHER_FILE, 4002, 3, "-999")
    result = invoke("ingest", "cambridge", "--path", str(archive), "--implausible", "missing",
                    "--warehouse", str(warehouse))
    assert result.exit_code == 0, result.output
    assert "; 3 implausible value(s) stored as missing" in result.output
    with connect(warehouse, read_only=True) as con:
        assert con.execute("SELECT min(kwh) >= 0, count(*) - count(kwh) FROM meter_readings "
                           "WHERE building_id = 'UCam_Building_b1'").fetchone() == (True, 88 + 1)
        assert con.execute("SELECT max(temperature_c) < 60, min(irradiance_wm2) >= 0, "
                           "count(*) - count(temperature_c), count(*) - count(irradiance_wm2) "
                           "FROM weather").fetchone() == (True, True, 1, 1)


# --- 8. one clear line for a missing, empty or damaged warehouse ---------------------------------

@pytest.fixture(scope="module")
def readings_only(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("readings") / "w.duckdb"
    ingest_synthetic(path, FleetSpec(buildings=2, start=WEEKS[0], weeks=1, seed=1))
    return path


def test_forecast_on_an_empty_warehouse_says_to_ingest_first(tmp_path, no_prefect_server):
    empty = tmp_path / "empty.duckdb"
    duckdb.connect(str(empty)).close()
    line = one_error_line(invoke("forecast", "--warehouse", str(empty)))
    assert "has no table 'buildings'" in line and "wadiro ingest" in line
    missing = one_error_line(invoke("forecast", "--warehouse", str(tmp_path / "nowhere.duckdb")))
    assert "does not exist" in missing and "wadiro ingest" in missing
    assert not (tmp_path / "nowhere.duckdb").exists()


@pytest.mark.parametrize("command", [
    ("forecast", "--models", "seasonal_naive", "--runner", "threads"),
    ("demo", "--buildings", "1"),
    ("ingest", "synthetic", "--buildings", "1", "--start", "2024-01-01", "--weeks", "1"),
    ("runs",), ("report",), ("export", "--out", "x.csv"),
], ids=lambda c: c[0] if c[0] != "ingest" else "ingest")
def test_a_warehouse_link_that_loops_is_one_line(command, tmp_path, no_prefect_server,
                                                 monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "loop.duckdb").symlink_to("loop.duckdb")
    result = invoke(*command, "--warehouse", "loop.duckdb")
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    last = result.output.strip().splitlines()[-1]  # the demo says what it generates first
    assert last.startswith("error: warehouse loop.duckdb is a symbolic link that loops back")


@pytest.mark.parametrize("tables", ["none", "readings only"])
def test_report_without_results_says_to_forecast_first(tables, readings_only, tmp_path):
    warehouse = readings_only
    if tables == "none":
        warehouse = tmp_path / "empty.duckdb"
        duckdb.connect(str(warehouse)).close()
    line = one_error_line(invoke("report", "--out", str(tmp_path / "out"), "--warehouse", str(warehouse)))
    assert "wadiro forecast" in line and "wadiro backfill" in line
    assert not (tmp_path / "out").exists()


def _truncate(path: Path) -> None:
    os.truncate(path, path.stat().st_size * 2 // 5)


def _overwrite(path: Path) -> None:
    with path.open("r+b") as file:
        file.seek(100 * 4096)
        file.write(os.urandom(100 * 4096))


def _garbage(path: Path) -> None:
    path.write_bytes(os.urandom(5000))


@pytest.mark.parametrize("damage", [_truncate, _overwrite, _garbage])
@pytest.mark.parametrize("command", [
    ("forecast", "--models", "seasonal_naive", "--runner", "threads"),
    ("backfill", "--start", WEEKS[0].isoformat(), "--end", WEEKS[-1].isoformat(), "--models",
     "seasonal_naive", "--runner", "threads"),
    ("report",),
    ("quality",),
    ("ingest", "synthetic", "--buildings", "1", "--start", "2024-01-01", "--weeks", "1"),
], ids=lambda c: c[0] if c[0] != "ingest" else "ingest")
def test_a_damaged_warehouse_is_one_line_naming_what_to_do(
    scored, tmp_path, damage, command, no_prefect_server
):
    warehouse = tmp_path / "damaged.duckdb"
    shutil.copy(scored, warehouse)
    damage(warehouse)
    args = [*command, "--warehouse", str(warehouse)]
    if command[0] == "report":
        args += ["--out", str(tmp_path / "out")]
    line = one_error_line(invoke(*args))
    assert f"warehouse {warehouse}" in line
    assert "damaged" in line or "has no table" in line  # what survives a cut may be empty
    assert "restore it from a backup" in line or "wadiro ingest" in line


# --- 8. report files named safely from building ids -------------------------------------------

HOSTILE_IDS = ["../../x", "B" * 255, "b/c", ".hidden", "con:1", "ÜML id", "x" * 300]


@pytest.fixture(scope="module")
def hostile(tmp_path_factory, scored) -> Path:
    """A warehouse with scored forecasts for buildings whose ids are not file names."""
    warehouse = tmp_path_factory.mktemp("hostile") / "w.duckdb"
    shutil.copy(scored, warehouse)
    with connect(warehouse) as con:
        [source] = con.execute("SELECT building_id FROM buildings LIMIT 1").fetchone()
        for hostile_id in HOSTILE_IDS:
            for table in ("buildings", "meter_readings", "forecasts", "scores"):
                columns = [c for c in con.execute(f"SELECT * FROM {table} LIMIT 0").df().columns
                           if c != "building_id"]
                con.execute(f"INSERT INTO {table} (building_id, {', '.join(columns)}) "
                            f"SELECT ?, {', '.join(columns)} FROM {table} WHERE building_id = ?",
                            [hostile_id, source])
    return warehouse


def test_report_file_names_stay_inside_out_bounded_and_unique(hostile, tmp_path):
    out = tmp_path / "deep" / "out"
    result = invoke("report", "--out", str(out), "--buildings", ",".join(HOSTILE_IDS),
                    "--warehouse", str(hostile))
    assert result.exit_code == 0, result.output
    plots = sorted((out / "plots").iterdir())
    assert len(plots) == len(HOSTILE_IDS)  # one each, none overwritten
    assert all(p.parent == out / "plots" and p.suffix == ".png" for p in plots)
    assert all(len(p.name) <= 100 and not p.name.startswith(".") for p in plots)
    written = {p for p in tmp_path.rglob("*") if p.is_file()}
    assert written == {*plots, out / "leaderboard.csv", out / "building_errors.csv",
                       out / "data_quality.csv", out / "report.html", out / "next_week.csv",
                       out / "accuracy.csv", out / "portfolio_scores.csv"}
