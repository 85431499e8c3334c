"""``wadiro export`` on a half-hourly ingest: a week's rows across both clock changes, the
half-hours of each hour summing to its forecast, shares following the building's own half-hour
profile (even where its readings came hourly), the hourly file reading back exactly as
``published_forecasts``, ids a spreadsheet would run escaped."""

from __future__ import annotations

from contextlib import contextmanager
from datetime import UTC, date, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import numpy as np
import pandas as pd
import pytest

from tasks.outputs.export import EXPORTED_NAMES
from tasks.protocol.intervals import QUANTILES, quantile_name
from tasks.warehouse.connection import connect
from tasks.warehouse.intra_hour import recent_sub_hourly, write_sub_hourly
from tasks.warehouse.portfolio_vintages import write_portfolio_vintages
from tests.cli_runs import invoke
from tests.rows import FORECAST_COLUMNS, insert_rows

LONDON = ZoneInfo("Europe/London")
SPRING, PLAIN, AUTUMN = date(2024, 3, 25), date(2024, 4, 8), date(2024, 10, 21)
"""The weeks with the spring clock change (167 hours), an ordinary one and the autumn one (169)."""
SHAPED, HOURLY, FORMULA = "shaped", "hourly", "=HYPERLINK(1)"
ADD_BUILDING = ("INSERT INTO buildings (building_id, site_id, timezone, holiday_country, "
                "holiday_subdiv, building_type, source) VALUES")
"""A building's row, its columns named (a later release adds more)."""




def _first_half(local_hour: int) -> float:
    """The shaped building's share of an hour in its first half-hour: 30 % in working hours."""
    return 0.3 if 8 <= local_hour < 18 else 0.5


def _week_hours(week: date) -> pd.DatetimeIndex:
    start = datetime(week.year, week.month, week.day, tzinfo=LONDON)
    end = start + timedelta(days=7)
    return pd.date_range(start.astimezone(timezone.utc), end.astimezone(timezone.utc),
                         freq="h", inclusive="left")


def _readings(week: date) -> pd.DataFrame:
    """Four weeks of half-hourly readings of the shaped building before ``week``."""
    rng = np.random.default_rng(week.toordinal())
    hours = pd.date_range(pd.Timestamp(week, tz=LONDON).tz_convert("UTC") - pd.Timedelta(weeks=4),
                          periods=4 * 168, freq="h")
    energy = rng.uniform(20, 60, len(hours))
    first = np.array([_first_half(t.tz_convert(LONDON).hour) for t in hours]) * energy
    ts = np.concatenate([hours, hours + pd.Timedelta(minutes=30)])
    kwh = np.concatenate([first, energy - first])
    return pd.DataFrame({"building_id": SHAPED, "ts": ts, "kwh": kwh}).sort_values("ts")


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory):
    folder = tmp_path_factory.mktemp("export")
    path = folder / "w.duckdb"
    (folder / "buildings.csv").write_text(
        "building_id,site_id,timezone,holiday_country\n"
        + "".join(f"{b},s,Europe/London,GB\n" for b in (SHAPED, HOURLY)))
    assert invoke("ingest", "buildings", folder / "buildings.csv", "--warehouse", path).exit_code == 0
    frames = [_readings(week) for week in (SPRING, PLAIN, AUTUMN)]
    for n, frame in enumerate(frames):
        file = folder / f"readings{n}.csv"
        frame.assign(ts=frame["ts"].dt.strftime("%Y-%m-%dT%H:%M:%SZ")).to_csv(file, index=False)
        result = invoke("ingest", "readings", file, "--warehouse", path)
        assert result.exit_code == 0, result.output
        assert "30-minute" in result.output
    with connect(path) as con:
        for frame in frames:  # what the readings ingest keeps of a sub-hourly file
            write_sub_hourly(con, recent_sub_hourly(frame, 30), own_transaction=True)
        for week in (SPRING, PLAIN, AUTUMN):
            hours = _week_hours(week)
            for b, level in ((SHAPED, 40.0), (HOURLY, 7.0), (FORMULA, 3.0)):
                y = level + np.sin(np.arange(len(hours)) / 5.0)
                con.execute("INSERT INTO publications (building_id, target_week, model, reason, "
                            "expected_ratio, run_id) VALUES (?, ?, 'gp', 't', 0.9, 'r')", [b, week])
                insert_rows(con, "forecasts", FORECAST_COLUMNS,
                            [[b, "gp", week, t.to_pydatetime(), v, "r", v - 1 / 3, v + 2 / 3,
                              max(v - 3, 0), v + 3] for t, v in zip(hours, y)])
        # quantiles between the bands, a kWh apart, non-crossing
        con.execute("UPDATE forecasts SET " + ", ".join(
            f"{quantile_name(level)} = y_hat + {offset}" for level, offset in zip(
                QUANTILES, (-3.0, -2.0, -1.0, -0.5, 0.0, 0.5, 1.0, 2.0, 3.0), strict=True)))
        con.execute(f"{ADD_BUILDING} (?, 's', 'Europe/London', 'GB', NULL, NULL, 't')",
                    [FORMULA])
    return path


def _export(warehouse, out, *args) -> pd.DataFrame:
    result = invoke("export", "--out", out, "--warehouse", warehouse, *args)
    assert result.exit_code == 0, result.output
    return pd.read_csv(out) if out.suffix == ".csv" else pd.read_parquet(out)


def _published(warehouse, week) -> pd.DataFrame:
    with connect(warehouse, read_only=True) as con:
        return con.execute("SELECT * FROM published_forecasts WHERE target_week = ? "
                           "ORDER BY building_id, ts", [week]).df()


@pytest.mark.parametrize("week, hours", [(SPRING, 167), (PLAIN, 168), (AUTUMN, 169)])
def test_half_hours_per_week_and_hour_sums(warehouse, tmp_path, week, hours):
    rows = _export(warehouse, tmp_path / "e.csv", "--resolution", "30", "--week", week,
                   "--buildings", f"{SHAPED},{HOURLY}")
    assert rows.groupby("building_id").size().tolist() == [2 * hours, 2 * hours]
    rows["hour"] = pd.to_datetime(rows["period_start_utc"], utc=True).dt.floor("h")
    split = ["y_hat", "y_lo_80", "y_hi_95", "y_q2.5", "y_q50", "y_q97.5"]
    sums = rows.groupby(["building_id", "hour"], as_index=False)[split].sum()
    published = _published(warehouse, week).rename(columns=EXPORTED_NAMES)
    published["hour"] = published["ts"].dt.tz_convert("UTC")
    joined = sums.merge(published[["building_id", "hour", *split]],
                        on=["building_id", "hour"], suffixes=("", "_hour"))
    assert len(joined) == 2 * hours
    for column in split:  # every quantile split over the periods like the forecast
        assert np.abs(joined[column] - joined[f"{column}_hour"]).max() <= 1e-9


@pytest.mark.parametrize("week, day, periods, by_hand", [
    # 31 March 2024: GMT to BST at 01:00 GMT; 23 hours, 46 periods. 01:00 UTC is 02:00 BST,
    # an hour after local midnight in real time: period 3.
    (SPRING, "2024-03-31", 46, {"2024-03-31T00:00:00Z": 1, "2024-03-31T01:00:00Z": 3,
                                "2024-03-31T22:30:00Z": 46}),
    (PLAIN, "2024-04-10", 48, {"2024-04-09T23:00:00Z": 1, "2024-04-10T22:30:00Z": 48,
                               "2024-04-10T23:00:00Z": 1}),
    # 27 October 2024: BST to GMT at 01:00 GMT; 25 hours, 50 periods, from 23:00 UTC the day
    # before; 01:00-01:30 GMT (the repeated hour's second pass) is period 5.
    (AUTUMN, "2024-10-27", 50, {"2024-10-26T23:00:00Z": 1, "2024-10-27T01:00:00Z": 5,
                                "2024-10-27T23:30:00Z": 50}),
])
def test_half_hours_carry_their_gb_settlement_date_and_period(warehouse, tmp_path, week, day,
                                                              periods, by_hand):
    rows = _export(warehouse, tmp_path / "e.csv", "--resolution", "30", "--week", week,
                   "--buildings", SHAPED)
    on_day = rows[rows["settlement_date"] == day]
    assert on_day["settlement_period"].tolist() == list(range(1, periods + 1))
    at = rows.set_index("period_start_utc")
    assert {ts: at.loc[ts, "settlement_period"] for ts in by_hand} == by_hand
    hourly = _export(warehouse, tmp_path / "h.csv", "--week", week, "--buildings", SHAPED)
    assert "settlement_period" not in hourly  # settlement periods are half-hours


def test_shares_follow_the_buildings_own_half_hour_profile(warehouse, tmp_path):
    rows = _export(warehouse, tmp_path / "e.csv", "--resolution", "30", "--week", PLAIN,
                   "--buildings", f"{SHAPED},{HOURLY}")
    start = pd.to_datetime(rows["period_start"].str[:19])  # local wall clock of each period
    rows["first"] = start.dt.minute == 0
    rows["hour_key"] = rows["period_start_utc"].str[:13]
    share = rows["y_hat"] / rows.groupby(["building_id", "hour_key"])["y_hat"].transform("sum")
    first = rows[rows["first"]].assign(share=share[rows["first"]], local_hour=start.dt.hour)
    shaped = first[first["building_id"] == SHAPED]
    assert np.allclose(shaped["share"], shaped["local_hour"].map(_first_half), atol=1e-12)
    assert np.allclose(first[first["building_id"] == HOURLY]["share"], 0.5, atol=1e-12)


def test_quarter_hours_split_the_stored_half_hours_evenly(warehouse, tmp_path):
    rows = _export(warehouse, tmp_path / "q.parquet", "--resolution", "15", "--week", PLAIN,
                   "--buildings", SHAPED)
    assert len(rows) == 4 * 168
    local = pd.to_datetime(rows["period_start"].str[:19])
    working = rows[(local.dt.hour == 10)]
    quarters = working.groupby(local.dt.minute)["y_hat"].sum()
    total = quarters.sum()
    assert np.allclose(quarters.to_numpy() / total, [0.15, 0.15, 0.35, 0.35])


def test_the_hourly_export_reads_back_as_published_forecasts(warehouse, tmp_path):
    rows = _export(warehouse, tmp_path / "e.csv", "--week", AUTUMN,
                   "--buildings", f"{SHAPED},{HOURLY}")
    published = _published(warehouse, AUTUMN)
    published = published[published["building_id"] != FORMULA].reset_index(drop=True)
    assert len(rows) == len(published) == 2 * 169
    instants = pd.to_datetime(rows["period_start"], utc=True)
    assert (instants == pd.to_datetime(rows["period_start_utc"], utc=True)).all()
    assert (instants.to_numpy() == published["ts"].dt.tz_convert("UTC").to_numpy()).all()
    for column in ("y_hat", "y_lo_80", "y_hi_80", "y_lo_95", "y_hi_95"):
        assert (rows[column].to_numpy() == published[column].to_numpy()).all(), column
    # a column per quantile level, named by its percent, after the bands
    names = [quantile_name(level, ".") for level in QUANTILES]
    assert names == ["y_q2.5", "y_q5", "y_q10", "y_q25", "y_q50", "y_q75", "y_q90", "y_q95",
                     "y_q97.5"]
    assert list(rows.columns[-len(names):]) == names
    for level, name in zip(QUANTILES, names, strict=True):
        assert (rows[name].to_numpy() == published[quantile_name(level)].to_numpy()).all()
    assert (rows["model"] == published["model"]).all()
    # the autumn Sunday's 01:00 comes twice, once in summer time, once in winter time
    repeated = rows[(rows["building_id"] == SHAPED) & (rows["local_time"] == "2024-10-27 01:00")]
    assert repeated["period_start"].tolist() == ["2024-10-27T01:00:00+01:00",
                                                 "2024-10-27T01:00:00+00:00"]


def test_ids_a_spreadsheet_would_run_are_escaped(warehouse, tmp_path):
    rows = _export(warehouse, tmp_path / "e.csv", "--week", PLAIN, "--buildings", FORMULA)
    assert set(rows["building_id"]) == {"'" + FORMULA}


def test_the_portfolio_half_hours_sum_to_its_hour(warehouse, tmp_path):
    rows = _export(warehouse, tmp_path / "p.csv", "--resolution", "30", "--week", PLAIN,
                   "--portfolios", "all")
    hourly = _export(warehouse, tmp_path / "h.csv", "--week", PLAIN, "--portfolios", "all")
    assert len(rows) == 2 * len(hourly) == 2 * 168
    assert (hourly["n_buildings"] == 3).all() and (hourly["n_buildings_expected"] == 3).all()
    rows["hour_key"] = rows["period_start_utc"].str[:13]
    sums = rows.groupby("hour_key")["y_hat"].sum().to_numpy()
    assert np.abs(sums - hourly["y_hat"].to_numpy()).max() <= 1e-9
    # the portfolio's first half-hour share: the buildings' shares weighted by their forecasts
    published = _published(warehouse, PLAIN)
    hour = published[published["ts"].dt.tz_convert(LONDON).dt.hour == 10].groupby("ts")
    by_building = hour.apply(lambda f: f.set_index("building_id")["y_hat"], include_groups=False)
    expected = ((0.3 * by_building[SHAPED] + 0.5 * by_building[HOURLY]
                 + 0.5 * by_building[FORMULA]) / by_building.sum(axis=1)).to_numpy()
    first = rows[rows["local_time"].str.endswith("10:00")]["y_hat"].to_numpy()
    total = hourly[hourly["local_time"].str.endswith("10:00")]["y_hat"].to_numpy()
    assert np.allclose(first / total, expected)


@pytest.mark.parametrize("args, says", [
    (("--portfolios", "nope"), "unknown portfolio(s) 'nope'"),
    (("--buildings", "nope"), "nope"),
    (("--resolution", "20"), "the periods are 60, 30, 15 minutes"),
    (("--week", "2019-01-07"), "nothing published for the week of 2019-01-07"),
    # issue 46: a Tuesday said "nothing published"
    (("--week", "2024-04-09"), "--week 2024-04-09 is a Tuesday, not a Monday: a week is given "
                               "by its local Monday; the week holding 2024-04-09 is --week "
                               "2024-04-08"),
    (("--week", "2024-04-14"), "the week holding 2024-04-14 is --week 2024-04-08"),
])
def test_bad_requests_are_one_line(warehouse, tmp_path, args, says):
    result = invoke("export", "--out", tmp_path / "x.csv", "--warehouse", warehouse, *args)
    assert result.exit_code == 1 and result.output.startswith("error: ") and says in result.output
    assert len(result.output.strip().splitlines()) == 1
    assert not (tmp_path / "x.csv").exists()


@pytest.mark.parametrize("refused", ["file", "folder"])
def test_an_output_it_may_not_write_is_named_not_its_temporary_file(warehouse, tmp_path,
                                                                     monkeypatch, refused):
    # Issue 46: the line named ".e.csv.XXXX.part" and advised about the warehouse. The
    # operating system's refusal is simulated (the tests may run as root, who may write anything).
    import tasks.outputs.output_files as output_files

    out = tmp_path / "e.csv"
    out.write_text("kept\n")

    def refuse(*args, **kwargs):
        target = args[0] if refused == "folder" else args[1]
        raise PermissionError(13, "Permission denied", str(target))

    if refused == "folder":
        monkeypatch.setattr(output_files.tempfile, "mkstemp",
                            lambda **kw: refuse(str(tmp_path / ".e.csv.x.part")))
    else:
        monkeypatch.setattr(output_files.os, "replace", refuse)
    result = invoke("export", "--out", out, "--warehouse", warehouse, "--week", PLAIN)
    assert result.exit_code == 1, result.output
    assert result.output.strip() == (
        f"error: cannot write {out}: the file or its folder {tmp_path} may not be written "
        "(Permission denied); give --out a file in a folder you can write to; nothing was "
        "written")
    assert out.read_text() == "kept\n" and sorted(p.name for p in tmp_path.iterdir()) == ["e.csv"]


def test_a_file_without_write_permission_is_not_replaced(warehouse, tmp_path, monkeypatch):
    out = tmp_path / "e.csv"
    out.write_text("kept\n")
    out.chmod(0o444)
    import tasks.outputs.export as export

    monkeypatch.setattr(export.os, "access", lambda path, mode: False)  # as for a non-root user
    result = invoke("export", "--out", out, "--warehouse", warehouse, "--week", PLAIN)
    assert result.exit_code == 1 and result.output.strip() == (
        f"error: cannot write {out}: the file is not writable (permissions); give --out a file "
        "in a folder you can write to; nothing was written"), result.output
    assert out.read_text() == "kept\n"


ISSUED = datetime(2024, 4, 8, 6, tzinfo=UTC)
"""When the fixture's run is taken to have closed: Monday 07:00 in London (summer time)."""


def _as_issued(warehouse, tmp_path):
    """A copy of the warehouse whose forecasts are kept as issued, with their validation errors
    (the portfolio then has bands), and whose portfolios' vintages were written at
    :data:`ISSUED`, as a run's close writes them."""
    copy = tmp_path / "issued.duckdb"
    copy.write_bytes(warehouse.read_bytes())
    with connect(copy) as con:
        con.execute("SET threads = 1")
        con.execute("INSERT INTO issued_forecasts BY NAME SELECT f.*, ?::TIMESTAMPTZ AS "
                    "issued_at, 'learned' AS outcome, 't' AS reason FROM forecasts f", [ISSUED])
        con.execute("INSERT INTO validation_errors SELECT building_id, target_week, model, "
                    "ts - INTERVAL 7 DAY, sin(epoch(ts) / 3600.0), run_id FROM forecasts")
        assert write_portfolio_vintages(con, "r", ISSUED) == 167 + 168 + 169  # `all`, 3 weeks
    return copy


def _bytes(warehouse, out, *args) -> bytes:
    result = invoke("export", "--out", out, "--warehouse", warehouse, "--portfolios", "all",
                    "--week", PLAIN, *args)
    assert result.exit_code == 0, result.output
    return out.read_bytes()


@contextmanager
def _one_thread(*args, **kwargs):
    """A connection on one thread: sums of three buildings, added in parallel, may differ in
    their last bit from one query to the next (see ``test_export_streamed``)."""
    with connect(*args, **kwargs) as con:
        con.execute("SET threads = 1")
        yield con


@pytest.mark.parametrize("resolution", ["60", "30", "15"])
def test_a_portfolio_as_issued_is_exported_as_it_was_then(warehouse, tmp_path, monkeypatch,
                                                          resolution):
    """Issue 60: ``--portfolios --as-of`` gives the file the export wrote at the time, bands and
    the shaped building's half-hours included, after the week was published again; an as-of
    without an offset is the portfolio's wall clock."""
    import tasks.outputs.export as export

    monkeypatch.setattr(export, "connect", _one_thread)
    copy = _as_issued(warehouse, tmp_path)
    then = _bytes(copy, tmp_path / "then.csv", "--resolution", resolution)
    with connect(copy) as con:  # a re-run publishes the shaped building twice as high
        con.execute("UPDATE forecasts SET y_hat = 2 * y_hat, y_hi_95 = 2 * y_hi_95, "
                    "run_id = 'r2' WHERE building_id = ? AND target_week = ?", [SHAPED, PLAIN])
        con.execute("UPDATE publications SET run_id = 'r2' WHERE building_id = ? AND "
                    "target_week = ?", [SHAPED, PLAIN])
    latest = _bytes(copy, tmp_path / "latest.csv", "--resolution", resolution)
    as_bid = _bytes(copy, tmp_path / "bid.csv", "--resolution", resolution,
                    "--as-of", (ISSUED + timedelta(hours=1)).isoformat())
    wall_clock = _bytes(copy, tmp_path / "wall.csv", "--resolution", resolution,
                        "--as-of", "2024-04-08 07:00")  # London: 06:00 UTC
    assert latest != then and as_bid == then and wall_clock == then
    rows = pd.read_csv(tmp_path / "bid.csv")
    assert rows[["y_lo_80", "y_hi_80", "y_lo_95", "y_hi_95", "y_q2.5", "y_q50", "y_q97.5"]].notna(
    ).all().all()
    early = invoke("export", "--out", tmp_path / "x.csv", "--warehouse", copy, "--portfolios",
                   "all", "--as-of", "2024-04-08 06:59")
    assert early.exit_code == 1 and "no portfolio forecast is kept as issued by" in early.output


def test_a_held_building_is_left_out_of_the_portfolio_and_its_split(warehouse, tmp_path):
    """Issue 60: a held publication is never bid: not in the portfolio's total, nor in the
    shares its hours are split by."""
    copy = tmp_path / "held.duckdb"
    copy.write_bytes(warehouse.read_bytes())
    with connect(copy) as con:
        con.execute("UPDATE publications SET outcome = 'held' WHERE building_id = ? AND "
                    "target_week = ?", [HOURLY, PLAIN])
    rows = _export(copy, tmp_path / "p.csv", "--resolution", "30", "--week", PLAIN,
                   "--portfolios", "all")
    hourly = _export(copy, tmp_path / "h.csv", "--week", PLAIN, "--portfolios", "all")
    assert (hourly["n_buildings"] == 2).all() and (hourly["n_buildings_expected"] == 3).all()
    published = _published(copy, PLAIN)
    kept = published[published["building_id"] != HOURLY].groupby("ts")["y_hat"].sum()
    assert np.allclose(hourly["y_hat"].to_numpy(), kept.to_numpy())
    hour = published[published["ts"].dt.tz_convert(LONDON).dt.hour == 10].groupby("ts")
    by_building = hour.apply(lambda f: f.set_index("building_id")["y_hat"], include_groups=False)
    expected = ((0.3 * by_building[SHAPED] + 0.5 * by_building[FORMULA])
                / (by_building[SHAPED] + by_building[FORMULA])).to_numpy()
    first = rows[rows["local_time"].str.endswith("10:00")]["y_hat"].to_numpy()
    total = hourly[hourly["local_time"].str.endswith("10:00")]["y_hat"].to_numpy()
    assert np.allclose(first / total, expected)


def test_a_warehouse_an_earlier_release_made_exports_with_empty_quantiles(warehouse, tmp_path):
    """Read without writing since (its views have no quantile columns): the export is the one
    it made, with the quantile columns empty (issue 60's probe: a traceback)."""
    copy = tmp_path / "earlier.duckdb"
    copy.write_bytes(warehouse.read_bytes())
    with connect(copy) as con:
        con.execute("CREATE OR REPLACE VIEW published_forecasts AS SELECT f.building_id, "
                    "f.target_week, f.ts, p.model, f.y_hat, f.y_lo_80, f.y_hi_80, f.y_lo_95, "
                    "f.y_hi_95, p.reason, p.run_id FROM publications p JOIN forecasts f "
                    "USING (building_id, target_week, model)")
    rows = _export(copy, tmp_path / "e.csv", "--week", PLAIN, "--buildings", SHAPED)
    assert len(rows) == 168 and rows["y_hat"].notna().all()
    assert rows[[quantile_name(level, ".") for level in QUANTILES]].isna().all().all()
