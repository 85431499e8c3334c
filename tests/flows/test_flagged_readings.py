"""A bad reading never reaches a bid (issue 46): three hours of a meter stuck at five times a
building's daytime level are named by the ingest, left out of the next week's forecast and of the
week's score, and used once an operator accepts them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tasks.warehouse.connection import connect
from tests.cli_runs import invoke
from tests.flows.warehouse_rows import FAST_MODELS, WEEKS, make_warehouse
from tests.tasks.ingest.test_meter_flags import STUCK, B, stored_week, week_file

SCORED, NEXT = WEEKS  # the week holding the stuck hours, and the week after it


def backfill(warehouse: Path) -> str:
    """``wadiro backfill`` of :data:`B` over both weeks; what it printed."""
    run = invoke("backfill", "--start", WEEKS[0], "--end", WEEKS[-1], "--buildings", B,
                 "--models", ",".join(FAST_MODELS), "--trials", 2, "--runner", "threads",
                 "--certify-nodes", 0, "--warehouse", warehouse)
    assert run.exit_code == 0, run.output
    return run.output


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict:
    """The same fleet three ways: the stuck hours ingested (flagged), ingested blank (removed),
    and flagged then accepted; each backfilled over both weeks."""
    from flows import engine

    folder = tmp_path_factory.mktemp("flagged")
    base = make_warehouse(folder / "base.duckdb", buildings=2)
    week = stored_week(base)
    stuck = round(5 * week.loc[week["ts"].dt.hour.between(8, 17), "kwh"].mean(), 1)
    made: dict = {"stuck": stuck}
    with pytest.MonkeyPatch.context() as patch:  # no Prefect server: the commands run directly
        patch.setattr(engine, "configured_api_url", lambda: "")
        for name, value in (("flagged", stuck), ("removed", None)):
            warehouse = folder / f"{name}.duckdb"
            warehouse.write_bytes(base.read_bytes())
            ingest = invoke("ingest", "readings", week_file(folder, week, value, f"{name}.csv"),
                            "--warehouse", warehouse)
            assert ingest.exit_code == 0, ingest.output
            made[name] = {"warehouse": warehouse, "ingest": ingest.output,
                          "summary": backfill(warehouse)}
        accepted = folder / "accepted.duckdb"
        accepted.write_bytes(made["flagged"]["warehouse"].read_bytes())
        made["scores_before_accepting"] = scores(accepted)
        accept = invoke("accept-readings", "--building", B, "--start", "2024-03-26T10:00",
                        "--end", "2024-03-26T12:00", "--warehouse", accepted)
        assert accept.exit_code == 0, accept.output
        made["accepted"] = {"warehouse": accepted, "accept": accept.output,
                            "rescored": scores(accepted), "summary": backfill(accepted)}
    return made


def published(warehouse: Path, week) -> pd.DataFrame:
    with connect(warehouse, read_only=True) as con:
        frame = con.execute("SELECT ts, y_hat, reason FROM published_forecasts WHERE "
                            "building_id = ? AND target_week = ? ORDER BY ts", [B, week]).df()
    return frame.set_index(pd.to_datetime(frame["ts"], utc=True))


def scores(warehouse: Path) -> dict[str, tuple]:
    with connect(warehouse, read_only=True) as con:
        rows = con.execute("SELECT model, mae, n_hours FROM scores WHERE building_id = ? AND "
                           "target_week = ?", [B, SCORED]).fetchall()
    return {model: (mae, n) for model, mae, n in rows}


def next_week_hours(warehouse: Path) -> list[pd.Timestamp]:
    """The stuck hours' local wall-clock hours a week later, in UTC (a clock change between)."""
    with connect(warehouse, read_only=True) as con:
        zone = con.execute("SELECT timezone FROM buildings WHERE building_id = ?",
                           [B]).fetchone()[0]
    return [(pd.Timestamp(ts).tz_convert(zone).tz_localize(None) + pd.Timedelta(days=7))
            .tz_localize(zone).tz_convert("UTC") for ts in STUCK]


def test_the_ingest_names_the_stuck_run(runs):
    output = runs["flagged"]["ingest"]
    assert (f"flagged: {B}: stuck_high, 2024-03-26 10:00 to 12:00 GMT, 3 hour(s) at "
            f"{runs['stuck']:,.6g} kWh") in output
    assert "flagged 3 implausible reading(s) of 1 building(s)" in output
    assert "flagged" not in runs["removed"]["ingest"]


def test_next_weeks_forecast_is_that_of_the_history_without_them(runs):
    flagged = published(runs["flagged"]["warehouse"], NEXT)
    removed = published(runs["removed"]["warehouse"], NEXT)
    hours = next_week_hours(runs["flagged"]["warehouse"])
    assert len(flagged) == len(removed) == 168
    at = flagged.loc[hours, "y_hat"].to_numpy()
    without = removed.loc[hours, "y_hat"].to_numpy()
    assert np.all(np.abs(at - without) <= 0.10 * without)
    assert np.all(at < runs["stuck"] / 2)  # nowhere near the stuck value
    assert flagged["reason"].iloc[0].endswith(
        "; 3 flagged reading(s) in its history treated as missing")
    assert "flagged" not in removed["reason"].iloc[0]
    assert published(runs["flagged"]["warehouse"], SCORED)["reason"].iloc[0].endswith(
        "; 3 flagged reading(s) of the target week left out of its scores")


def test_the_weeks_score_leaves_them_out(runs):
    flagged, removed = (scores(runs[name]["warehouse"]) for name in ("flagged", "removed"))
    assert set(flagged) == set(FAST_MODELS)
    for model in FAST_MODELS:
        assert flagged[model][1] == removed[model][1]  # the same hours scored
        assert flagged[model][0] == pytest.approx(removed[model][0], rel=1e-9)
    # by hand: the stored seasonal naive forecast against the readings but the stuck ones
    with connect(runs["flagged"]["warehouse"], read_only=True) as con:
        frame = con.execute(
            "SELECT f.ts, f.y_hat, m.kwh FROM forecasts f JOIN meter_readings m "
            "USING (building_id, ts) WHERE f.building_id = ? AND f.model = 'seasonal_naive' "
            "AND f.target_week = ?", [B, SCORED]).df()
    frame["ts"] = pd.to_datetime(frame["ts"], utc=True)
    kept = frame[~frame["ts"].isin(STUCK)].dropna()
    assert len(frame.dropna()) - len(kept) == 3
    assert flagged["seasonal_naive"] == pytest.approx(
        (float(np.mean(np.abs(kept["y_hat"] - kept["kwh"]))), len(kept)), rel=1e-9)


def test_the_run_counts_the_flagged_hours(runs):
    summary = runs["flagged"]["summary"]
    assert "; reduced inputs: 6 flagged reading(s) treated as missing" in summary  # 3 in each week's window
    assert "flagged" not in runs["removed"]["summary"]
    listed = invoke("runs", "--warehouse", runs["flagged"]["warehouse"])
    assert listed.exit_code == 0 and "; reduced inputs: 6 flagged reading(s) treated as missing" in listed.output
    assert "flagged" not in invoke("runs", "--warehouse", runs["removed"]["warehouse"]).output


def test_accepted_readings_are_scored_and_forecast_from(runs):
    assert "accepted 3 flagged reading(s)" in runs["accepted"]["accept"]
    before, after = runs["scores_before_accepting"], runs["accepted"]["rescored"]
    assert all(after[model][1] == before[model][1] + 3 for model in FAST_MODELS)
    assert after["seasonal_naive"][0] > before["seasonal_naive"][0]
    hours = next_week_hours(runs["accepted"]["warehouse"])
    with connect(runs["accepted"]["warehouse"], read_only=True) as con:
        naive = con.execute("SELECT ts, y_hat FROM forecasts WHERE building_id = ? AND "
                            "model = 'seasonal_naive' AND target_week = ? ORDER BY ts",
                            [B, NEXT]).df()
    naive = naive.set_index(pd.to_datetime(naive["ts"], utc=True))
    assert list(naive.loc[hours, "y_hat"]) == [runs["stuck"]] * 3  # last week's load, as read
    assert "flagged" not in published(runs["accepted"]["warehouse"], NEXT)["reason"].iloc[0]
