"""The ``portfolio_forecasts`` and ``portfolio_scores`` views against a plain-Python
recomputation of what the docs say (sum the buildings' published forecasts; sum their errors per
past hour, scale hours missing a few buildings, take the weighted conformal quantile of the sums,
or in a first week the symmetric one), and against
properties computed by hand: errors that cancel between buildings give a band of zero width,
errors that move together the sum of their bands; a building without a forecast is counted."""

from __future__ import annotations

import math
from datetime import UTC, date, datetime, timedelta

import numpy as np
import pandas as pd
import pytest

from tasks.protocol.intervals import QUANTILE_COLUMNS, QUANTILES, quantile_name
from tasks.warehouse.connection import connect
from tasks.warehouse.portfolio_sql import (
    HALFLIFE_WEEKS,
    MIN_PRESENT_SHARE,
    RECORD_WEEKS,
    read_portfolio_forecasts,
    read_portfolio_scores,
)
from tasks.warehouse.portfolio_vintages import VINTAGE_COLUMNS, write_portfolio_vintages
from tasks.warehouse.schema import ensure_schema
from tests.rows import FORECAST_COLUMNS, insert_rows

VINTAGE_ROWS = [c for c in VINTAGE_COLUMNS if c not in ("timezone", "run_id", "issued_at")]
"""The columns of a vintage that are the view's."""

W0 = date(2024, 1, 1)
HOURS = 168
ADD_BUILDING = ("INSERT INTO buildings (building_id, site_id, timezone, holiday_country, "
                "holiday_subdiv, building_type, source) VALUES")
"""A building's row, its columns named (a later release adds more)."""


def _ts(week: date, hour: int) -> datetime:
    return datetime(week.year, week.month, week.day, tzinfo=UTC) + timedelta(hours=hour)


def _week_hours(week: date) -> list[datetime]:
    return [_ts(week, h) for h in range(HOURS)]


def _write(path, *, buildings, portfolios, published, readings, validation):
    """``published``: {(building, week): y_hat array}; ``readings``: {building: {ts: kwh}};
    ``validation``: {(building, week): {ts: error}}."""
    with connect(path) as con:
        ensure_schema(con)
        for b in buildings:
            con.execute(f"{ADD_BUILDING} (?, 's', 'UTC', 'GB', NULL, NULL, 't')", [b])
        for p, members in portfolios.items():
            insert_rows(con, "portfolios", ["portfolio_id", "building_id"],
                        [[p, b] for b in members])
        insert_rows(con, "publications", ["building_id", "target_week", "model", "reason",
                                           "expected_ratio", "run_id"],
                    [[b, week, "gp", "test", 0.9, "r"] for b, week in published])
        insert_rows(con, "forecasts", ["building_id", "model", "target_week", "ts", "y_hat",
                                       "run_id", "y_lo_80", "y_hi_80", "y_lo_95", "y_hi_95"],
                    [[b, "gp", week, t, float(v), "r", v - 2.0, v + 2.0, v - 5.0, v + 5.0]
                     for (b, week), y in published.items()
                     for t, v in zip(_week_hours(week), y, strict=True)])
        insert_rows(con, "meter_readings", ["building_id", "ts", "kwh"],
                    [[b, t, v] for b, hours in readings.items() for t, v in hours.items()])
        insert_rows(con, "validation_errors", ["building_id", "target_week", "model", "ts",
                                               "error", "run_id"],
                    [[b, week, "gp", t, e, "r"] for (b, week), errs in validation.items()
                     for t, e in errs.items()])


def _reference(buildings, portfolios, published, readings, validation) -> pd.DataFrame:
    """What the docs say, in plain Python: one row per (portfolio, week, hour)."""
    members = {"all": list(buildings), **portfolios}
    out = []
    for p, mem in members.items():
        for week in sorted({w for _, w in published}):
            summed = [b for b in mem if (b, week) in published]
            if not summed:
                continue
            weight = {b: float(np.mean(published[b, week])) for b in summed}
            total = sum(weight.values())
            samples, record_weeks = [], set()
            groups = [({t: e for t, e in validation.get((b, week), {}).items()}, b, None)
                      for b in summed]
            for k in range(1, RECORD_WEEKS + 1):
                earlier = week - timedelta(weeks=k)
                for b in summed:
                    if (b, earlier) in published:
                        errs = {t: readings[b][t] - y for t, y in
                                zip(_week_hours(earlier), published[b, earlier], strict=True)
                                if t in readings.get(b, {})}
                        groups.append((errs, b, earlier))
            by_source: dict = {}
            for errs, b, source in groups:
                for t, e in errs.items():
                    s = by_source.setdefault((source is None, t), [0.0, 0.0, source])
                    s[0] += e
                    s[1] += weight[b]
            for error, present, source in by_source.values():
                if present >= MIN_PRESENT_SHARE * total:
                    age = 1 if source is None else (week - source).days // 7
                    samples.append((error * total / present, 0.5 ** ((age - 1) / HALFLIFE_WEEKS)))
                    if source is not None:
                        record_weeks.add(source)

            def offset(level, samples=samples, signed=bool(record_weeks)):
                """The quantile minus the total, by the docs' definitions."""
                if len(samples) < 24:
                    return None
                if not signed:  # first week: the central interval's conformal half width
                    ranked = sorted(abs(e) for e, _ in samples)
                    central = round(abs(2 * level - 1), 12)
                    half = 0.0 if central == 0 else float(
                        ranked[min(math.ceil((len(ranked) + 1) * central), len(ranked)) - 1])
                    return half if level >= 0.5 else -half
                ranked = sorted(samples)
                weight = sum(w for _, w in ranked)
                up, down, total_up, total_down = [], [], 0.0, 0.0
                for (e, w), (f, v) in zip(ranked, reversed(ranked), strict=True):
                    total_up, total_down = total_up + w, total_down + v
                    up.append((e, total_up))  # the weight at or below e
                    down.append((f, total_down))  # the weight at or above f
                if level == 0.5:  # the errors whose weight below and above reach half
                    low = next(e for e, c in up if c >= weight / 2 - 1e-9)
                    high = next(f for f, c in down if c >= weight / 2 - 1e-9)
                    return (low + high) / 2
                if level > 0.5:
                    return next((e for e, c in up if c >= level * (weight + 1) - 1e-9),
                                ranked[-1][0])
                return next((f for f, c in down if c >= (1 - level) * (weight + 1) - 1e-9),
                            ranked[0][0])

            for h, t in enumerate(_week_hours(week)):
                y = sum(published[b, week][h] for b in summed)
                actual = ([readings.get(b, {}).get(t) for b in summed])
                row = {"portfolio_id": p, "target_week": week, "ts": t, "y_hat": y,
                       "n_buildings": len(summed), "n_buildings_expected": len(mem),
                       "actual_kwh": None if None in actual else sum(actual),
                       "n_calibration_hours": len(samples), "n_record_weeks": len(record_weeks)}
                for level in QUANTILES:
                    e = offset(level)
                    side = min if level < 0.5 else max if level > 0.5 else (lambda v, _: v)
                    row[quantile_name(level)] = None if e is None else max(side(y + e, y), 0.0)
                for band, (low, high) in ((80, ("y_q10", "y_q90")), (95, ("y_q2_5", "y_q97_5"))):
                    row[f"y_lo_{band}"], row[f"y_hi_{band}"] = row[low], row[high]
                out.append(row)
    return pd.DataFrame(out)


@pytest.fixture(scope="module")
def random_fleet(tmp_path_factory):
    """Four buildings over four weeks: a common and an own error each, some readings missing
    (one building's whole day: hours then missing 1/6 of the energy, still counted, scaled
    up), b3 without a forecast of the last week, b2 without validation errors one week."""
    rng = np.random.default_rng(7)
    buildings = ["b0", "b1", "b2", "b3"]
    size = {"b0": 10.0, "b1": 30.0, "b2": 5.0, "b3": 50.0}
    weeks = [W0 + timedelta(weeks=k) for k in range(4)]
    published, readings, validation = {}, {b: {} for b in buildings}, {}
    common = rng.normal(0, 1, (len(weeks) + 1) * HOURS)
    for b in buildings:
        for k, week in enumerate(weeks):
            if b == "b3" and k == 3:
                continue
            y = size[b] * (1 + 0.3 * np.sin(np.arange(HOURS) / 24 * 2 * np.pi))
            published[b, week] = y
            shared = common[(k + 1) * HOURS:(k + 2) * HOURS]
            actual = y + size[b] * (0.05 * shared + 0.03 * rng.normal(0, 1, HOURS))
            for h, t in enumerate(_week_hours(week)):
                if not (b == "b1" and k == 1 and 24 <= h < 48) and not (b == "b0" and h == 5):
                    readings[b][t] = float(actual[h])
            if not (b == "b2" and k == 2):
                before = _week_hours(week - timedelta(weeks=1))
                errs = size[b] * (0.05 * common[k * HOURS:(k + 1) * HOURS]
                                  + 0.03 * rng.normal(0, 1, HOURS))
                validation[b, week] = {t: float(e) for t, e in zip(before, errs, strict=True)
                                       if t.hour != 3}
    facts = dict(buildings=buildings, portfolios={"third": ["b1", "b2"], "big": ["b1", "b3"]},
                 published=published, readings=readings, validation=validation)
    path = tmp_path_factory.mktemp("portfolio") / "w.duckdb"
    _write(path, **facts)
    return path, facts


def test_the_view_equals_the_plain_recomputation(random_fleet):
    path, facts = random_fleet
    with connect(path, read_only=True) as con:
        view = read_portfolio_forecasts(con)
    expected = _reference(**facts)
    assert len(view) == len(expected) == 3 * 4 * HOURS  # every portfolio, week and hour
    view = view.assign(ts=view["ts"].dt.tz_convert("UTC"),
                       target_week=pd.to_datetime(view["target_week"]).dt.date)
    key = ["portfolio_id", "target_week", "ts"]
    merged = view.merge(expected.assign(ts=pd.to_datetime(expected["ts"], utc=True)), on=key,
                        suffixes=("", "_ref"))
    assert len(merged) == len(view)
    for column in ("y_hat", "y_lo_80", "y_hi_80", "y_lo_95", "y_hi_95", "actual_kwh",
                   *QUANTILE_COLUMNS):
        got, want = merged[column].astype(float), merged[f"{column}_ref"].astype(float)
        assert np.allclose(got, want, rtol=1e-12, atol=1e-9, equal_nan=True), column
    for column in ("n_buildings", "n_buildings_expected", "n_calibration_hours", "n_record_weeks"):
        assert (merged[column] == merged[f"{column}_ref"]).all(), column


def test_a_building_without_a_forecast_is_counted_not_dropped(random_fleet):
    path, _ = random_fleet
    with connect(path, read_only=True) as con:
        last = read_portfolio_forecasts(con, ["all", "big"], [W0 + timedelta(weeks=3)])
    counts = last.groupby("portfolio_id")[["n_buildings", "n_buildings_expected"]].max()
    assert counts.loc["all"].tolist() == [3, 4] and counts.loc["big"].tolist() == [1, 2]


def test_the_first_week_is_calibrated_by_its_validation_week_alone(random_fleet):
    path, _ = random_fleet
    with connect(path, read_only=True) as con:
        rows = read_portfolio_forecasts(con, ["all"]).drop_duplicates("target_week")
    # week 0: the validation week's hours (168 less the 7 hours at 03:00 without errors)
    assert rows["n_record_weeks"].tolist() == [0, 1, 2, 3]
    assert rows["n_calibration_hours"].iloc[0] == HOURS - 7


def test_scores_count_only_hours_whose_every_summed_reading_is_in(random_fleet):
    path, facts = random_fleet
    with connect(path, read_only=True) as con:
        scores = read_portfolio_scores(con, ["third"])
        rows = read_portfolio_forecasts(con, ["third"])
    week1 = scores.set_index(pd.to_datetime(scores["target_week"]).dt.date).loc[
        W0 + timedelta(weeks=1)]
    assert week1["n_hours"] == HOURS - 24  # b1's missing day
    scored = rows[rows["actual_kwh"].notna()]
    by_week = scored.groupby("target_week")
    inside = ((scored["actual_kwh"] >= scored["y_lo_80"])
              & (scored["actual_kwh"] <= scored["y_hi_80"])).groupby(scored["target_week"]).mean()
    assert np.allclose(scores["coverage_80"].to_numpy(), inside.to_numpy())
    mae = by_week.apply(lambda f: (f["actual_kwh"] - f["y_hat"]).abs().mean(), include_groups=False)
    assert np.allclose(scores["mae"].to_numpy(), mae.to_numpy())
    assert np.allclose(scores["buildings_width_80"], 2 * 4.0)  # two buildings, each 4 kWh wide


def _paired(tmp_path, sign: float):
    """Two buildings whose validation errors are e and sign * e at every hour."""
    hours = _week_hours(W0 - timedelta(weeks=1))
    errors = np.linspace(-3.0, 3.0, HOURS)
    facts = dict(buildings=["a", "b"], portfolios={},
                 published={("a", W0): np.full(HOURS, 20.0), ("b", W0): np.full(HOURS, 20.0)},
                 readings={}, validation={("a", W0): dict(zip(hours, errors, strict=True)),
                                          ("b", W0): dict(zip(hours, sign * errors, strict=True))})
    _write(tmp_path / "w.duckdb", **facts)
    with connect(tmp_path / "w.duckdb", read_only=True) as con:
        return read_portfolio_forecasts(con, ["all"]).iloc[0]


def test_errors_that_cancel_give_a_band_of_no_width(tmp_path):
    row = _paired(tmp_path, -1.0)
    assert row["y_hat"] == 40.0 and row["y_lo_80"] == row["y_hi_80"] == 40.0


def test_errors_that_move_together_give_the_sum_of_the_bands(tmp_path):
    row = _paired(tmp_path, 1.0)
    one = np.sort(np.abs(np.linspace(-3.0, 3.0, HOURS)))  # a building's own absolute errors
    rank = math.ceil((HOURS + 1) * 0.95)  # the 161st smallest of 168
    assert row["y_hi_95"] - row["y_hat"] == pytest.approx(2 * one[rank - 1])
    assert row["y_hat"] - row["y_lo_95"] == pytest.approx(2 * one[rank - 1])


def test_a_lean_is_followed_once_a_record_shows_it_never_from_a_first_week_alone(tmp_path):
    """A building that always uses more than forecast (errors 1 ... 4 kWh): its portfolio's
    first week is symmetric around the total (the validation week's lean is not trusted), the
    next week, with the first one's published errors in its record, ranks the summed errors tail
    by tail: the median above the total, the lower levels at the total (none crosses it)."""
    week1 = W0 + timedelta(weeks=1)
    lean = np.linspace(1.0, 4.0, HOURS)
    facts = dict(
        buildings=["a"], portfolios={},
        published={("a", W0): np.full(HOURS, 20.0), ("a", week1): np.full(HOURS, 20.0)},
        readings={"a": dict(zip(_week_hours(W0), 20.0 + lean, strict=True))},
        validation={(("a", week)): dict(zip(_week_hours(week - timedelta(weeks=1)), lean,
                                            strict=True)) for week in (W0, week1)})
    _write(tmp_path / "w.duckdb", **facts)
    with connect(tmp_path / "w.duckdb", read_only=True) as con:
        rows = read_portfolio_forecasts(con, ["all"]).drop_duplicates("target_week")
    first, second = rows.iloc[0], rows.iloc[1]
    assert (first["n_record_weeks"], second["n_record_weeks"]) == (0, 1)
    assert first["y_q50"] == 20.0
    assert first["y_q90"] - 20.0 == pytest.approx(20.0 - first["y_q10"])
    assert first["y_q90"] > 20.0
    assert second["y_q50"] == pytest.approx(22.5, abs=0.02)  # the middle of 1 ... 4
    assert second["y_q2_5"] == second["y_q25"] == 20.0
    assert second["y_q97_5"] <= 24.0


def test_published_hours_are_read_from_the_publications_own_vintage(random_fleet, tmp_path):
    """A publication's hours come from its run's vintage in ``issued_forecasts`` (not another
    run's vintage), else, where no vintage was kept (an earlier release's run), from
    ``forecasts``: with the forecasts of the vintaged half deleted and an earlier run's
    different vintage beside every one, the portfolios are what they were."""
    path, _ = random_fleet
    copy = tmp_path / "w.duckdb"
    copy.write_bytes(path.read_bytes())
    with connect(copy, read_only=True) as con:
        before = read_portfolio_forecasts(con)
    with connect(copy) as con:
        columns = ", ".join(FORECAST_COLUMNS)
        vintage = (f"SELECT {columns}, TIMESTAMPTZ '2024-03-01 06:00+00' AS issued_at, "
                   "'published' AS outcome, 'test' AS reason FROM forecasts")
        con.execute(f"INSERT INTO issued_forecasts ({columns}, issued_at, outcome, reason) "
                    f"{vintage} WHERE building_id IN ('b0', 'b3') OR target_week = ?", [W0])
        con.execute(f"INSERT INTO issued_forecasts ({columns}, issued_at, outcome, reason) "
                    f"SELECT * REPLACE (y_hat + 100.0 AS y_hat, 'r0' AS run_id, "
                    f"TIMESTAMPTZ '2024-02-01 06:00+00' AS issued_at) FROM ({vintage})")
        con.execute("DELETE FROM forecasts WHERE building_id IN ('b0', 'b3') OR target_week = ?",
                    [W0])
        left = con.execute("SELECT count(*) FROM forecasts").fetchone()[0]
    with connect(copy, read_only=True) as con:
        after = read_portfolio_forecasts(con)
    assert 0 < left < 4 * 4 * HOURS  # some building-weeks have no vintage, some no forecast
    pd.testing.assert_frame_equal(after, before)


def test_a_week_without_enough_calibration_hours_has_no_band_on_either_side(tmp_path):
    """Fewer than 24 calibration hours give no band: both bounds NULL (the lower one was 0,
    ``greatest`` skipping the missing half width)."""
    _write(tmp_path / "w.duckdb", buildings=["a"], portfolios={},
           published={("a", W0): np.full(HOURS, 5.0)}, readings={}, validation={})
    with connect(tmp_path / "w.duckdb", read_only=True) as con:
        rows = read_portfolio_forecasts(con)
    assert len(rows) == HOURS and (rows["n_calibration_hours"] == 0).all()
    assert rows[["y_lo_80", "y_hi_80", "y_lo_95", "y_hi_95"]].isna().all().all()

def test_a_read_of_chosen_weeks_equals_the_view(random_fleet):
    """Reading some weeks computes only them (and their records), with the same numbers."""
    path, _ = random_fleet
    weeks = [W0 + timedelta(weeks=1), W0 + timedelta(weeks=3)]
    with connect(path, read_only=True) as con:
        view = con.execute("SELECT * FROM portfolio_forecasts WHERE target_week IN (?, ?) "
                           "ORDER BY portfolio_id, target_week, ts", weeks).df()
        chosen = read_portfolio_forecasts(con, None, weeks)
        scores = con.execute("SELECT * FROM portfolio_scores ORDER BY portfolio_id, "
                             "target_week").df()
        scores_read = read_portfolio_scores(con)
    pd.testing.assert_frame_equal(view.reset_index(drop=True), chosen.reset_index(drop=True),
                                  check_dtype=False)
    pd.testing.assert_frame_equal(scores, scores_read, check_dtype=False)


def test_a_warehouse_of_an_earlier_release_reads_without_writing(tmp_path):
    """Read-only, a warehouse made before portfolios has neither their tables nor the views,
    nor vintages or meter flags: the reads still give ``all`` (calibrated by its record
    alone)."""
    facts = dict(buildings=["a"], portfolios={},
                 published={("a", W0 + timedelta(weeks=k)): np.full(HOURS, 5.0 + k)
                            for k in range(2)},
                 readings={"a": {t: 6.0 + (t.hour % 3) for k in range(2)
                                 for t in _week_hours(W0 + timedelta(weeks=k))}},
                 validation={})
    path = tmp_path / "w.duckdb"
    _write(path, **facts)
    with connect(path) as con:
        for view in ("portfolio_scores", "portfolio_forecasts", "portfolio_members"):
            con.execute(f"DROP VIEW {view}")
        con.execute("DROP TABLE portfolios")
        con.execute("DROP TABLE validation_errors")
        con.execute("DROP TABLE issued_forecasts")
        con.execute("DROP TABLE meter_flags")
    with connect(path, read_only=True) as con:
        rows = read_portfolio_forecasts(con)
    second = rows[pd.to_datetime(rows["target_week"]).dt.date == W0 + timedelta(weeks=1)]
    assert set(rows["portfolio_id"]) == {"all"} and len(rows) == 2 * HOURS
    assert (second["n_record_weeks"] == 1).all() and second["y_hi_80"].notna().all()


def _largest_step(con) -> int:
    """The most rows any step (not a table scan) of the last query produced."""
    import json

    def steps(node):
        yield node
        for child in node.get("children", []):
            yield from steps(child)

    plan = json.loads(con.get_profiling_information(format="json"))
    return max(n.get("intermediate_rows", 0) for top in plan["operator"] for n in steps(top)
               if n.get("type") != "TABLE_SCAN")


def test_two_portfolios_of_many_are_computed_from_their_own_buildings(tmp_path):
    # Issue 46: exporting two portfolios of 100,000 computed all of them (7.5 GB). Their rows
    # are the same as the view's, and no step of the query is larger than the fleet's hours of
    # the week (it was every portfolio's members' hours: 1,000 x 4 x 168).
    rng = np.random.default_rng(5)
    buildings = [f"b{i:02d}" for i in range(12)]
    chosen = {"north": ["b00", "b01"], "south": ["b02", "b03", "b04"]}
    others, seen = {"twin": ["b01", "b00"]}, {tuple(m) for m in chosen.values()}
    while len(others) < 1000:  # as many different sets of buildings
        members = tuple(sorted(rng.choice(buildings, int(rng.integers(2, 7)), replace=False)))
        if members not in seen:
            seen.add(members)
            others[f"p{len(others):04d}"] = list(members)
    published = {(b, W0): rng.uniform(10, 50, HOURS) for b in buildings}
    validation = {(b, W0): {t: float(rng.normal()) for t in _week_hours(W0 - timedelta(weeks=1))}
                  for b in buildings}
    path = tmp_path / "w.duckdb"
    _write(path, buildings=buildings, portfolios={**chosen, **others}, published=published,
           readings={}, validation=validation)
    with connect(path, read_only=True) as con:
        con.execute("SET enable_profiling = 'no_output'")
        con.execute("SET profiling_mode = 'detailed'")
        rows = read_portfolio_forecasts(con, ["north", "south"], [W0])
        largest = _largest_step(con)
        con.execute("SET enable_profiling = 'no_output'")
        view = con.execute("SELECT * FROM portfolio_forecasts WHERE portfolio_id IN "
                           "('north', 'south') ORDER BY portfolio_id, ts").df()
        everyone = _largest_step(con)
    assert largest <= len(buildings) * HOURS < 100 * len(buildings) * HOURS < everyone
    assert len(rows) == len(view) == 2 * HOURS
    for column in ("y_hat", "y_lo_80", "y_hi_95", "n_buildings", "n_calibration_hours"):
        assert np.allclose(rows[column].astype(float), view[column].astype(float)), column
    with connect(path, read_only=True) as con:  # the same buildings: computed once, both rows
        twins = read_portfolio_scores(con, ["twin", "north", "south"])
    assert twins["portfolio_id"].tolist() == ["north", "south", "twin"]
    assert twins.iloc[0, 1:].equals(twins.iloc[2, 1:])


T1 = datetime(2024, 3, 1, 6, tzinfo=UTC)
T2 = T1 + timedelta(days=1)
LAST = W0 + timedelta(weeks=3)
VINTAGE = ("SELECT * FROM issued_portfolio_forecasts WHERE run_id = ? "
           "ORDER BY portfolio_id, target_week, ts")


def _copy(path, tmp_path):
    copy = tmp_path / "w.duckdb"
    copy.write_bytes(path.read_bytes())
    return copy


def _without(published: dict, left_out) -> dict:
    return {key: y for key, y in published.items() if key != left_out}


def test_a_held_publication_is_left_out_of_the_sums(random_fleet, tmp_path):
    """A building-week whose publication is held (never bid) is summed nowhere: the
    portfolios are those of a warehouse without its forecast, the building still expected
    (issue 60); the vintages written then are the same."""
    path, facts = random_fleet
    held = ("b1", W0 + timedelta(weeks=2))
    copy = _copy(path, tmp_path)
    with connect(copy) as con:
        con.execute("UPDATE publications SET outcome = 'held' WHERE building_id = ? "
                    "AND target_week = ?", list(held))
        view = read_portfolio_forecasts(con)
        write_portfolio_vintages(con, "r", T1)
        issued = con.execute(f"SELECT {', '.join(VINTAGE_ROWS)} FROM "
                             "issued_portfolio_forecasts ORDER BY portfolio_id, target_week, "
                             "ts").df()
    expected = _reference(**{**facts, "published": _without(facts["published"], held)})
    merged = view.assign(ts=view["ts"].dt.tz_convert("UTC"),
                         target_week=pd.to_datetime(view["target_week"]).dt.date).merge(
        expected.assign(ts=pd.to_datetime(expected["ts"], utc=True)),
        on=["portfolio_id", "target_week", "ts"], suffixes=("", "_ref"))
    assert len(merged) == len(view) == 3 * 4 * HOURS
    for column in ("y_hat", "y_lo_80", "y_hi_95", "n_buildings", "n_buildings_expected",
                   "n_calibration_hours", "n_record_weeks"):
        assert np.allclose(merged[column].astype(float), merged[f"{column}_ref"].astype(float),
                           rtol=1e-12, atol=1e-9, equal_nan=True), column
    week = view[(view["portfolio_id"] == "third")
                & (pd.to_datetime(view["target_week"]).dt.date == held[1])]
    assert (week["n_buildings"] == 1).all() and (week["n_buildings_expected"] == 2).all()
    pd.testing.assert_frame_equal(issued, view[list(issued.columns)], check_dtype=False)



def _republish_b0(con, run_id: str, shift: float) -> None:
    """``run_id`` publishes b0's last week again, ``shift`` kWh higher every hour, as a run
    writes it: its publication and its vintage."""
    con.execute("UPDATE publications SET run_id = ? WHERE building_id = 'b0' AND target_week = ?",
                [run_id, LAST])
    con.execute("INSERT INTO issued_forecasts BY NAME SELECT * REPLACE (? AS run_id, "
                "y_hat + ? AS y_hat), ?::TIMESTAMPTZ AS issued_at, 'learned' AS outcome, "
                "'test' AS reason FROM forecasts WHERE building_id = 'b0' AND target_week = ?",
                [run_id, shift, T2, LAST])


def test_a_vintage_is_the_view_as_issued_and_a_later_run_adds_its_own(random_fleet, tmp_path):
    """Written by the view's own SQL: the rows of every portfolio-week the run published,
    with the buildings each summed. A later run of one building-week adds a vintage of the
    portfolios holding it, that week only; the first stays byte for byte, and
    ``portfolio_as_of`` gives each in its time."""
    path, facts = random_fleet
    copy = _copy(path, tmp_path)
    with connect(copy) as con:
        view = read_portfolio_forecasts(con)
        assert write_portfolio_vintages(con, "r", T1) == 3 * 4 * HOURS
        first = con.execute(VINTAGE, ["r"]).df()
        summed = con.execute("SELECT portfolio_id, target_week, building_id, forecast_run_id "
                             "FROM issued_portfolio_buildings ORDER BY ALL").fetchall()
        _republish_b0(con, "r2", 10.0)
        assert write_portfolio_vintages(con, "r2", T2) == HOURS  # `all` of the last week
        assert write_portfolio_vintages(con, "r2", T2 + timedelta(hours=1)) == 0  # once
        again = con.execute(VINTAGE, ["r"]).df()
        second = con.execute(VINTAGE, ["r2"]).df()
        latest = read_portfolio_forecasts(con, ["all"], [LAST])
        at_first = con.execute("SELECT * FROM portfolio_as_of(?) ORDER BY ALL", [T1]).df()
        at_second = con.execute("SELECT * FROM portfolio_as_of(?) ORDER BY ALL", [T2]).df()
    columns = list(VINTAGE_ROWS)
    pd.testing.assert_frame_equal(first[columns], view[columns], check_dtype=False)
    assert (first["run_id"] == "r").all() and (first["issued_at"] == T1).all()
    assert (first["timezone"] == "UTC").all()
    members = {"all": facts["buildings"], **facts["portfolios"]}
    assert summed == sorted((p, w, b, "r") for p, bs in members.items() for b in bs
                            for w in {w for _, w in facts["published"]}
                            if (b, w) in facts["published"])
    pd.testing.assert_frame_equal(again, first)  # never rewritten
    pd.testing.assert_frame_equal(second[columns], latest[columns], check_dtype=False)
    old = first[(first["portfolio_id"] == "all")
                & (pd.to_datetime(first["target_week"]).dt.date == LAST)]
    assert np.allclose(second["y_hat"], old["y_hat"].to_numpy() + 10.0)
    assert len(at_first) == len(at_second) == 3 * 4 * HOURS
    assert set(at_first["run_id"]) == {"r"} and (at_second["run_id"] == "r2").sum() == HOURS


def test_vintages_are_scored_against_the_readings_of_the_buildings_they_summed(
        random_fleet, tmp_path):
    """``portfolio_vintage_scores`` against sums by hand of each vintage's own buildings'
    readings (an hour counts once every one of them has a reading), whatever the portfolio
    holds today; each portfolio-week's vintages numbered in issue order."""
    path, facts = random_fleet
    copy = _copy(path, tmp_path)
    with connect(copy) as con:
        write_portfolio_vintages(con, "r", T1)
        _republish_b0(con, "r2", 10.0)
        write_portfolio_vintages(con, "r2", T2)
        con.execute("DELETE FROM portfolios WHERE portfolio_id = 'third' AND building_id = 'b2'")
        vintages = con.execute("SELECT * FROM issued_portfolio_forecasts").df()
        scores = con.execute("SELECT * FROM portfolio_vintage_scores").df()
    members = {"all": facts["buildings"], **facts["portfolios"]}
    readings = facts["readings"]
    assert len(scores) == 3 * 4 + 1
    for _, row in scores.iterrows():
        week = pd.Timestamp(row["target_week"]).date()
        summed = [b for b in members[row["portfolio_id"]] if (b, week) in facts["published"]]
        rows = vintages[(vintages["portfolio_id"] == row["portfolio_id"])
                        & (vintages["run_id"] == row["run_id"])
                        & (pd.to_datetime(vintages["target_week"]).dt.date == week)]
        errors, actuals = [], []
        for ts, y in zip(rows["ts"].dt.tz_convert("UTC"), rows["y_hat"], strict=True):
            hour = ts.to_pydatetime()
            if all(hour in readings[b] for b in summed):
                actual = sum(readings[b][hour] for b in summed)
                errors.append(y - actual)
                actuals.append(actual)
        assert row["n_hours"] == len(errors) > 0
        assert row["mae"] == pytest.approx(np.mean(np.abs(errors)), rel=1e-12)
        assert row["rmse"] == pytest.approx(np.sqrt(np.mean(np.square(errors))), rel=1e-12)
        assert row["mean_actual"] == pytest.approx(np.mean(actuals), rel=1e-12)
        assert row["vintage"] == (2 if row["run_id"] == "r2" else 1)
    third = scores[scores["portfolio_id"] == "third"]
    assert (third["n_buildings"] == 2).all()  # b2 was summed then, so its readings count
