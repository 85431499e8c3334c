"""The operator's trial, as the commands run it on the real archive (b0 and b7, the week of
2019-03-18): one blank weather input in the forecast file costs that input, not the week, and a
week with no weather is published as persistence, counted as degraded where an operator looks
(the run's summary line, ``wadiro runs``, ``--strict``'s exit code)."""

from __future__ import annotations

from datetime import date, timedelta

import numpy as np
import pandas as pd
import pytest

from tasks.ingest.cambridge_archive import load_cambridge
from tasks.warehouse.connection import connect
from tests.cli_runs import invoke

BUILDINGS = ("UCam_Building_b0", "UCam_Building_b7")
WEEK = date(2019, 3, 18)
MODELS = "gbr,wadiro_linreg,seasonal_naive,day_type_naive,ensemble"
INPUTS = ("temperature_c", "irradiance_wm2", "wind_speed_ms", "humidity_pct")


def _forecast_file(archive, out, *, blank: dict[str, int], issued: str):
    """The week's weather forecast for the site, from the archive's observations, with the first
    ``blank[input]`` hours of each named input left blank."""
    batch = load_cambridge(archive, [BUILDINGS[0]], WEEK, WEEK + timedelta(days=6))
    week = batch.weather.to_pandas()
    week = week[week["ts"] >= pd.Timestamp(WEEK, tz="UTC")].head(168).reset_index(drop=True)
    assert len(week) == 168
    for column, hours in blank.items():
        week.loc[: hours - 1, column] = np.nan
    week["ts"] = [t.isoformat() for t in week["ts"]]
    week["issued_at"] = issued
    week[["site_id", "ts", *INPUTS, "issued_at"]].to_csv(out, index=False)
    return out


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory, cambridge_archive):
    folder = tmp_path_factory.mktemp("trust")
    path = folder / "w.duckdb"
    result = invoke("ingest", "cambridge", "--path", cambridge_archive, "--buildings",
                    ",".join(BUILDINGS), "--start", WEEK - timedelta(weeks=16),
                    "--end", WEEK - timedelta(days=1), "--warehouse", path)
    assert result.exit_code == 0, result.output
    return path


def _ingest_forecast(archive, warehouse, name, **kwargs):
    file = _forecast_file(archive, warehouse.parent / name, **kwargs)
    result = invoke("ingest", "weather", file, "--kind", "forecast", "--warehouse", warehouse)
    assert result.exit_code == 0, result.output


def test_blank_wind_is_left_out_and_learned_forecasts_are_published(
        warehouse, cambridge_archive, no_prefect_server):
    _ingest_forecast(cambridge_archive, warehouse, "wind.csv", blank={"wind_speed_ms": 161},
                     issued="2019-03-17T18:00:00Z")
    result = invoke("forecast", "--as-of", f"{WEEK} 06:00", "--models", MODELS, "--trials", "2",
                    "--runner", "threads", "--warehouse", warehouse)
    assert result.exit_code == 0, result.output
    assert "2 published: 2 learned, 0 persistence, 0 degraded" in result.output
    assert "weather inputs left out: wind_speed_ms in 2" in result.output
    with connect(warehouse, read_only=True) as con:
        rows = con.execute(
            "SELECT p.outcome, w.left_out FROM publications p JOIN window_status w "
            "USING (building_id, target_week) WHERE target_week = ?", [WEEK]).fetchall()
    assert len(rows) == 2
    for outcome, left_out in rows:
        assert outcome == "learned"
        assert left_out == "wind_speed_ms missing for 161 of 168 target-week hours"


def test_a_week_without_weather_is_degraded_loudly(warehouse, cambridge_archive,
                                                   no_prefect_server):
    _ingest_forecast(cambridge_archive, warehouse, "none.csv",
                     blank=dict.fromkeys(INPUTS, 161), issued="2019-03-17T20:00:00Z")
    result = invoke("forecast", "--week", WEEK, "--models", MODELS, "--trials", "2",
                    "--runner", "threads", "--strict", "--warehouse", warehouse)
    assert result.exit_code == 3, result.output
    assert "2 published: 0 learned, 0 persistence, 2 degraded (2 no_weather)" in result.output
    assert result.output.strip().splitlines()[-1].startswith(
        "error: --strict: 2 of 2 building-weeks published a degraded forecast (2 no_weather)")
    with connect(warehouse, read_only=True) as con:
        published = con.execute(
            "SELECT p.model, p.outcome, p.expected_ratio, p.ensemble_members, m.validation_mae, "
            "n.validation_mae FROM publications p "
            "JOIN model_fits m USING (building_id, target_week, model) "
            "JOIN model_fits n ON n.building_id = p.building_id "
            "AND n.target_week = p.target_week AND n.model = 'seasonal_naive' "
            "WHERE p.target_week = ?", [WEEK]).fetchall()
        run = con.execute("SELECT status, n_learned, n_degraded, message FROM runs "
                          "ORDER BY started_at DESC LIMIT 1").fetchone()
    for model, outcome, expected, members, own, naive in published:
        assert model in ("seasonal_naive", "day_type_naive") and outcome == "degraded"
        assert members is None  # no ensemble of persistence forecasts under another name
        assert expected == pytest.approx(min(own / naive, 1.0) if model != "seasonal_naive"
                                         else 1.0)
    assert run[:3] == ("completed", 0, 2) and "2 no_weather" in run[3]
    history = invoke("runs", "--warehouse", warehouse)
    assert history.exit_code == 0
    newest = history.output.splitlines()[0]
    assert "2 building-weeks: 0 learned, 0 persistence, 2 degraded, 0 not published" in newest
