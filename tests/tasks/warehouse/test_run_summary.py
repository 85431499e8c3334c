"""A run's summary names the week(s) it forecast and every building-week that something
degraded, with the building and the reason (issue 46: degraded means loud everywhere)."""

from __future__ import annotations

from datetime import date

import pandas as pd

from tasks.protocol.forecasting import BuildingWeekResult
from tasks.protocol.publication import DEGRADED, LEARNED, Publication
from tasks.warehouse.runs import DEGRADED_KEPT, RunSummary

WEEK = date(2024, 4, 1)


def _result(building: str, status: str = "ok", *, outcome: str = LEARNED, left_out=None,
            flagged: int = 0, reason: str = "") -> BuildingWeekResult:
    return BuildingWeekResult(
        building, WEEK, status, reason, {"n_flagged_hours": flagged}, pd.Series([], dtype=float),
        publication=Publication("ensemble" if outcome == LEARNED else "seasonal_naive",
                                "why it was chosen", outcome=outcome),
        left_out=left_out or {})


def test_each_degraded_building_week_is_named_with_what_degraded_it():
    summary = RunSummary(run_id="r", weeks=[WEEK])
    summary.add([
        _result("clean"),
        _result("windless", left_out={"wind_speed_ms": "missing for 161 of 168 hours"}),
        _result("stuck", flagged=3),
        _result("untrusted", outcome=DEGRADED),
        _result("dark", "no_weather", outcome=DEGRADED, reason="weather for 0 of 168 hours"),
    ])
    # degraded means one thing: persistence published because nothing learned was trusted
    assert [d.line() for d in summary.degraded_weeks] == [
        "untrusted 2024-04-01: persistence published (why it was chosen)",
        "dark 2024-04-01: persistence published (no_weather: weather for 0 of 168 hours)",
    ]
    assert [d.line() for d in summary.reduced_weeks] == [
        "windless 2024-04-01: wind_speed_ms left out: missing for 161 of 168 hours",
        "stuck 2024-04-01: 3 flagged reading(s) treated as missing",
    ]
    assert summary.line().startswith("5 building-weeks of the week of 2024-04-01: 5 published: "
                                     "3 learned, 0 persistence, 2 degraded")
    assert summary.line().endswith("; reduced inputs: weather inputs left out: wind_speed_ms in "
                                   "1; 3 flagged reading(s) treated as missing")
    assert summary.degradations() == (
        "degraded: 1 learned models not trusted, 1 no_weather; reduced inputs: weather inputs "
        "left out: wind_speed_ms in 1; 3 flagged reading(s) treated as missing")
    assert summary.not_ok_causes() == "1 no_weather"


def test_the_named_ones_are_bounded_the_counts_are_not():
    summary = RunSummary(run_id="r", weeks=[WEEK, date(2024, 4, 8)])
    summary.add([_result(f"b{i}", flagged=1) for i in range(DEGRADED_KEPT + 5)])
    assert len(summary.reduced_weeks) == DEGRADED_KEPT
    assert summary.flagged_hours == DEGRADED_KEPT + 5
    assert summary.weeks_text() == "2 weeks, 2024-04-01 to 2024-04-08"
