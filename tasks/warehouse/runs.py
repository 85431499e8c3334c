"""The ``runs`` table: one row per forecasting run, opened when it starts and closed when it ends.

:class:`RunSummary` is a run's bookkeeping: how many building-weeks it forecast, skipped or
failed, and why, and what each published (a learned forecast, persistence chosen on its merit,
persistence because nothing learned could be trusted: *degraded*, a forecast *held* out of every
bid because its level was an order of magnitude off the building's, or nothing). It is returned
to the caller and written as the run's counts, so a degraded or held week is never reported
healthy.

*Degraded* has that one meaning everywhere: the week's published forecast is persistence
because no learned forecast could be trusted or run. A building-week whose models ran on
*reduced inputs* (a weather input left out, flagged readings treated as missing) is named as
such, whatever it published.
"""

from __future__ import annotations

import os
import socket
from collections import Counter
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from typing import Any

import duckdb
import psutil

from tasks.errors import RunStoppedError
from tasks.protocol.forecasting import BuildingWeekResult
from tasks.protocol.publication import DEGRADED, HELD, HELD_PREFIX
from tasks.warehouse.connection import transaction
from tasks.warehouse.results import to_json

DEGRADED_KEPT = 1000
"""How many degraded, held or reduced-input building-weeks a run's summary names, each (its
artifacts show them all up to this; the command line the first
:data:`~flows.cli.DEGRADED_SHOWN`)."""


@dataclass(frozen=True)
class DegradedWeek:
    """A building-week that was forecast, and what degraded it, held it or reduced its
    inputs."""

    building_id: str
    week: date
    why: str

    def line(self) -> str:
        return f"{self.building_id} {self.week}: {self.why}"


def target_weeks_text(weeks: Sequence[date]) -> str:
    """A run's target weeks as its ``runs`` row names them: ``2024-04-22``, ``5 weeks,
    2024-03-04 to 2024-04-01``."""
    if len(weeks) == 1:
        return str(weeks[0])
    if not weeks:
        return "no week"
    return f"{len(weeks)} weeks, {min(weeks)} to {max(weeks)}"


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
    learned: int = 0
    persistence: int = 0
    degraded: int = 0
    unpublished: int = 0
    held: int = 0
    """Building-weeks whose forecast was held out of every bid (:data:`~tasks.protocol.
    publication.HELD`): stored, never exported or summed into a portfolio."""
    degraded_causes: Counter[str] = field(default_factory=Counter)
    """Why building-weeks were degraded: the window's status when it was not ``ok``, else
    ``learned models not trusted``."""
    left_out: Counter[str] = field(default_factory=Counter)
    """Building-weeks whose window left each weather input out."""
    flagged_hours: int = 0
    """Readings flagged as implausible (not accepted) in the building-weeks' windows, treated
    as missing (an hour in the windows of two weeks counts twice)."""
    not_ok: Counter[str] = field(default_factory=Counter)
    """Building-weeks per window status other than ``ok`` (why the learned models could not
    forecast them)."""
    degraded_weeks: list[DegradedWeek] = field(default_factory=list)
    """The first :data:`DEGRADED_KEPT` degraded building-weeks, each with what degraded it (all
    of them are counted above and in ``window_status`` / ``publications``)."""
    reduced_weeks: list[DegradedWeek] = field(default_factory=list)
    """The first :data:`DEGRADED_KEPT` building-weeks forecast from reduced inputs (a weather
    input left out, flagged readings treated as missing), each with what was reduced."""
    held_weeks: list[DegradedWeek] = field(default_factory=list)
    """The first :data:`DEGRADED_KEPT` held building-weeks, each with why."""

    def counts(self) -> dict[str, int]:
        return {"building_weeks": self.building_weeks, "ok": self.ok,
                "skipped": self.skipped, "failed": self.failed, "learned": self.learned,
                "persistence": self.persistence, "degraded": self.degraded,
                "unpublished": self.unpublished, "held": self.held}

    def add(self, results: Sequence[BuildingWeekResult]) -> None:
        for res in results:
            self.building_weeks += 1
            self.model_failures += res.n_failed_models
            self.left_out.update(list(res.left_out))
            self.flagged_hours += int(res.coverage.get("n_flagged_hours") or 0)
            if res.status != "ok":
                self.not_ok[res.status] += 1
            self._keep_degraded(res)
            if res.status == "ok":
                self.ok += 1
            elif res.status == "failed":
                self.failed += 1
                self.failures.append(f"{res.building_id} {res.week}: {res.reason}")
            else:
                self.skipped += 1
            if res.publication is None:
                self.unpublished += res.status != "failed"
                continue
            outcome = res.publication.outcome
            setattr(self, outcome, getattr(self, outcome) + 1)
            if outcome == HELD and len(self.held_weeks) < DEGRADED_KEPT:
                self.held_weeks.append(DegradedWeek(
                    res.building_id, res.week,
                    res.publication.reason.removeprefix(f"{HELD_PREFIX}: ")))
            if outcome == DEGRADED:
                self.degraded_causes[res.status if res.status != "ok"
                                     else "learned models not trusted"] += 1

    def _keep_degraded(self, res: BuildingWeekResult) -> None:
        """Name ``res`` among the degraded building-weeks if it published a degraded forecast,
        and among those forecast from reduced inputs if its inputs were."""
        if (res.publication is not None and res.publication.outcome == DEGRADED
                and len(self.degraded_weeks) < DEGRADED_KEPT):
            cause = (f"{res.status}: {res.reason}" if res.status != "ok"
                     else res.publication.reason)
            self.degraded_weeks.append(DegradedWeek(res.building_id, res.week,
                                                    f"persistence published ({cause})"))
        reduced = [f"{name} left out: {reason}" for name, reason in res.left_out.items()]
        flagged = int(res.coverage.get("n_flagged_hours") or 0)
        if flagged:
            reduced.append(f"{flagged} flagged reading(s) treated as missing")
        if reduced and len(self.reduced_weeks) < DEGRADED_KEPT:
            self.reduced_weeks.append(DegradedWeek(res.building_id, res.week,
                                                   "; ".join(reduced)))

    @property
    def healthy(self) -> bool:
        """Whether every building-week published a forecast that was not degraded and none
        failed (what ``--strict`` asks of a run)."""
        return not (self.degraded or self.unpublished or self.failed or self.held)

    def weeks_text(self) -> str:
        """The run's target weeks: ``the week of 2024-04-22``, ``5 weeks, 2024-03-04 to
        2024-04-01``."""
        named = target_weeks_text(self.weeks)
        return f"the week of {named}" if len(self.weeks) == 1 else named

    def degradations(self) -> str:
        """What degraded building-weeks and what reduced their inputs, by cause (``""``:
        nothing): ``degraded: `` persistence published because no learned forecast could be
        trusted (by the window's status or ``learned models not trusted``), then ``reduced
        inputs: `` weather inputs left out, flagged readings treated as missing."""
        parts = []
        if self.degraded_causes:
            parts.append("degraded: " + ", ".join(
                f"{n} {cause}" for cause, n in self.degraded_causes.most_common()))
        reduced = []
        if self.left_out:
            reduced.append("weather inputs left out: " + ", ".join(
                f"{name} in {n}" for name, n in self.left_out.most_common()))
        if self.flagged_hours:
            reduced.append(f"{self.flagged_hours} flagged reading(s) treated as missing")
        if reduced:
            parts.append("reduced inputs: " + "; ".join(reduced))
        return "; ".join(parts)

    def not_ok_causes(self) -> str:
        """``12 no_weather, 1 too_few_hours``: building-weeks per window status other than ok."""
        return ", ".join(f"{n} {status}" for status, n in self.not_ok.most_common()) or "none"

    def line(self) -> str:
        causes = ", ".join(f"{n} {cause}" for cause, n in self.degraded_causes.most_common())
        published = self.learned + self.persistence + self.degraded
        held = f"{self.held} held out of every bid (an order of magnitude off), " \
            if self.held else ""
        text = (f"{self.building_weeks} building-weeks of {self.weeks_text()}: "
                f"{published} published: {self.learned} learned, {self.persistence} "
                f"persistence, {self.degraded} degraded{f' ({causes})' if causes else ''}; "
                f"{held}{self.unpublished} not published, {self.failed} failed, "
                f"{self.model_failures} model fit(s) failed")
        if self.left_out:
            inputs = ", ".join(f"{name} in {n}" for name, n in self.left_out.most_common())
            text += f"; reduced inputs: weather inputs left out: {inputs}"
        if self.flagged_hours:
            text += (f"; {'' if self.left_out else 'reduced inputs: '}{self.flagged_hours} "
                     "flagged reading(s) treated as missing")
        return text

    def degraded_message(self) -> str | None:
        """The run's message when it degraded building-weeks (None when it did not)."""
        if not (self.degraded or self.unpublished):
            return None
        causes = ", ".join(f"{n} {cause}" for cause, n in self.degraded_causes.most_common())
        return (f"{self.degraded} of {self.building_weeks} building-weeks published a degraded "
                f"forecast{f' ({causes})' if causes else ''}, {self.unpublished} none")

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
        if self.held:
            return "completed_with_held", self.held_message()
        return "completed", self.degraded_message()

    def held_message(self) -> str | None:
        """What the run held out of every bid (None: nothing)."""
        if not self.held:
            return None
        named = ", ".join(f"{week.building_id} {week.week}" for week in self.held_weeks[:20])
        more = f" and {self.held - 20} more" if self.held > 20 else ""
        return (f"{self.held} of {self.building_weeks} building-weeks held out of every bid, "
                f"their forecast an order of magnitude off the building's level ({named}{more}; "
                f"why: publications.reason of run {self.run_id})")


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
    con: duckdb.DuckDBPyConnection, *, run_id: str, flow: str, parameters: dict, code_version: str,
    weeks: Sequence[date] = (),
) -> None:
    """The run's row with status ``running``, its target weeks and the process that runs it
    (host and pid: :func:`close_abandoned_runs`), replacing a row of the same id."""
    with transaction(con):
        con.execute("DELETE FROM runs WHERE run_id = ?", [run_id])
        con.execute(
            "INSERT INTO runs (run_id, flow, started_at, status, parameters, code_version, "
            "target_weeks, host, pid) VALUES (?, ?, ?, 'running', ?, ?, ?, ?, ?)",
            [run_id, flow, datetime.now(UTC), to_json(parameters), code_version,
             target_weeks_text(weeks) if weeks else None, socket.gethostname(), os.getpid()],
        )


ABANDONED = "abandoned"
"""The status of a run whose process ended without closing it (killed, out of disk or memory,
a power cut): what it wrote before stands, its counts are not known."""

STAGED = "staged"
"""How ``wadiro runs`` shows a run whose process ended with its results kept beside a locked
warehouse: not abandoned, it closes with its own status when ``wadiro load-pending`` loads
them."""


def process_gone(host: str | None, pid: int | None, started_at: datetime) -> bool:
    """Whether the process that ran a run started at ``started_at`` on ``host`` with ``pid``
    is known to be gone: it ran on this host and no process has that pid, or the one that has
    it started after the run (the pid was given again). A run of another host (or of a release
    that did not record its process) is never judged gone."""
    if host != socket.gethostname() or pid is None:
        return False
    try:
        started = psutil.Process(pid).create_time()
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        return True
    except psutil.Error:  # access denied: a process is there
        return False
    return started > started_at.timestamp() + 1.0


def close_abandoned_runs(con: duckdb.DuckDBPyConnection,
                         staged: Collection[str] = ()) -> list[str]:
    """Close as :data:`ABANDONED` every ``running`` run whose process is gone
    (:func:`process_gone`) and that has no results ``staged`` beside the warehouse (those
    close with their own status when loaded); returns their ids."""
    rows = con.execute("SELECT run_id, host, pid, started_at FROM runs "
                       "WHERE status = 'running'").fetchall()
    gone = [run_id for run_id, host, pid, started in rows
            if run_id not in staged and process_gone(host, pid, started)]
    for run_id in gone:
        con.execute(
            "UPDATE runs SET status = ?, message = ? WHERE run_id = ? AND status = 'running'",
            [ABANDONED, "its process ended without closing the run (killed, out of disk or "
             "memory): the building-weeks it wrote before stand, the others were not written; "
             "run the command again", run_id])
    return gone


def record_run_end(
    con: duckdb.DuckDBPyConnection,
    summary: RunSummary,
    error: BaseException | None = None,
    *,
    outcome: tuple[str, str | None] | None = None,
    degradations: str | None = None,
) -> str:
    """Close the run's row with its counts, what degraded it and its final status (see
    :meth:`RunSummary.final_status`, or ``outcome`` as (status, message) and ``degradations``
    when they were decided earlier, by a run whose closing record was staged); returns the
    status."""
    status, message = outcome if outcome is not None else summary.final_status(error)
    degradations = degradations if outcome is not None else summary.degradations() or None
    counts = summary.counts()
    con.execute(
        "UPDATE runs SET finished_at = ?, status = ?, n_building_weeks = ?, n_ok = ?, "
        "n_skipped = ?, n_failed = ?, message = ?, n_learned = ?, n_persistence = ?, "
        "n_degraded = ?, n_unpublished = ?, degradations = ?, n_held = ? WHERE run_id = ?",
        [
            datetime.now(UTC), status, counts["building_weeks"], counts["ok"],
            counts["skipped"], counts["failed"], message, counts["learned"],
            counts["persistence"], counts["degraded"], counts["unpublished"],
            degradations, counts["held"], summary.run_id,
        ],
    )
    return status
