"""The ``runs`` table: one row per forecasting run, opened when it starts and closed when it ends.

:class:`RunSummary` is a run's bookkeeping: how many building-weeks it forecast, skipped or
failed, and why. It is returned to the caller and written as the run's counts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timezone
from typing import Any

import duckdb
from wadiro_fleet.tasks.errors import RunStoppedError
from wadiro_fleet.tasks.protocol.forecasting import BuildingWeekResult
from wadiro_fleet.tasks.warehouse.connection import transaction
from wadiro_fleet.tasks.warehouse.results import to_json


@dataclass
class RunSummary:
    """What a forecasting run did, for the command line and the ``runs`` table."""

    run_id: str
    weeks: list[date]
    building_weeks: int = 0
    ok: int = 0
    skipped: int = 0
    failed: int = 0
    failures: list[str] = field(default_factory=list)
    model_failures: int = 0

    def counts(self) -> dict[str, int]:
        return {"building_weeks": self.building_weeks, "ok": self.ok,
                "skipped": self.skipped, "failed": self.failed}

    def add(self, results: Sequence[BuildingWeekResult]) -> None:
        for res in results:
            self.building_weeks += 1
            self.model_failures += res.n_failed_models
            if res.status == "ok":
                self.ok += 1
            elif res.status == "failed":
                self.failed += 1
                self.failures.append(f"{res.building_id} {res.week}: {res.reason}")
            else:
                self.skipped += 1

    def line(self) -> str:
        return (f"{self.building_weeks} building-weeks over {len(self.weeks)} week(s): "
                f"{self.ok} ok, {self.skipped} skipped, {self.failed} failed, "
                f"{self.model_failures} model fit(s) failed")

    def final_status(self, error: BaseException | None = None) -> tuple[str, str | None]:
        """The run's status and message: the stop's own status when it was stopped on purpose
        (``interrupted`` by a signal, ``crashed`` when its Prefect server was lost), ``crashed``
        on any other error, ``completed_with_failures`` when a building-week failed, else
        ``completed``."""
        if isinstance(error, RunStoppedError):
            return error.status, str(error)
        if error is not None:
            return "crashed", f"{type(error).__name__}: {error}"
        if self.failed:
            return "completed_with_failures", "; ".join(self.failures[:20])
        return "completed", None


@dataclass(frozen=True)
class NotForecast:
    """A building-week of a run that the learned models could not forecast, and why."""

    building_id: str
    week: date
    status: str
    reason: str
    published: str | None
    """The model published instead (seasonal naive), or None: no forecast at all."""

    def line(self) -> str:
        instead = (f"published {self.published} instead" if self.published
                   else "no forecast published")
        return f"{self.building_id} {self.week}: {self.status}: {self.reason} ({instead})"

    def record(self) -> dict[str, Any]:
        return {"building_id": self.building_id, "target_week": self.week.isoformat(),
                "status": self.status, "reason": self.reason,
                "published": self.published or ""}


def not_forecast_rows(con: duckdb.DuckDBPyConnection, run_id: str) -> list[NotForecast]:
    """The run's building-weeks whose window status is not ``ok``, from ``window_status``."""
    rows = con.execute(
        """
        SELECT w.building_id, w.target_week, w.status, coalesce(w.reason, ''), p.model
        FROM window_status w
        LEFT JOIN publications p USING (building_id, target_week)
        WHERE w.run_id = ? AND w.status <> 'ok'
        ORDER BY w.target_week, w.building_id
        """, [run_id]).fetchall()
    return [NotForecast(*row) for row in rows]


def record_run_start(
    con: duckdb.DuckDBPyConnection, *, run_id: str, flow: str, parameters: dict, code_version: str
) -> None:
    """The run's row with status ``running`` (replacing a row of the same id)."""
    with transaction(con):
        con.execute("DELETE FROM runs WHERE run_id = ?", [run_id])
        con.execute(
            "INSERT INTO runs (run_id, flow, started_at, status, parameters, code_version) "
            "VALUES (?, ?, ?, 'running', ?, ?)",
            [run_id, flow, datetime.now(timezone.utc), to_json(parameters), code_version],
        )


def record_run_end(
    con: duckdb.DuckDBPyConnection,
    summary: RunSummary,
    error: BaseException | None = None,
    *,
    outcome: tuple[str, str | None] | None = None,
) -> str:
    """Close the run's row with its counts and final status (see :meth:`RunSummary.final_status`,
    or ``outcome`` as (status, message) when it was decided earlier); returns the status."""
    status, message = outcome if outcome is not None else summary.final_status(error)
    counts = summary.counts()
    con.execute(
        "UPDATE runs SET finished_at = ?, status = ?, n_building_weeks = ?, n_ok = ?, "
        "n_skipped = ?, n_failed = ?, message = ? WHERE run_id = ?",
        [
            datetime.now(timezone.utc), status, counts["building_weeks"], counts["ok"],
            counts["skipped"], counts["failed"], message, summary.run_id,
        ],
    )
    return status


__all__ = ["NotForecast", "RunSummary", "not_forecast_rows", "record_run_end", "record_run_start"]
