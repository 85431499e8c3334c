"""A forecasting run's compute step as a Prefect task, and its Prefect artifacts.

The run's storage steps are the warehouse's (:class:`~tasks.warehouse.run_store.RunStore`);
what is here exists because of Prefect: the task a batch computes in, and the tables an
operator finds on the flow run's page.
"""

from __future__ import annotations

from prefect import task
from prefect.artifacts import create_table_artifact
from prefect.cache_policies import NO_CACHE

from tasks.outputs.report import run_leaderboard
from tasks.protocol.batch import run_batch
from tasks.warehouse.connection import connect
from tasks.warehouse.issued import validation_leaderboard
from tasks.warehouse.run_store import OpenRun
from tasks.warehouse.runs import NotForecast, RunSummary

forecast_batch = task(name="forecast-batch", task_run_name="forecast-batch-{label}",
                      cache_policy=NO_CACHE)(run_batch)
"""The compute step, the one Prefect task of a run (a task run per batch in Prefect's UI). No
input caching: hashing a batch's hourly frames would cost more than it could save, and a rerun
must recompute. Its function is the protocol's own (``forecast_batch.fn``): a worker process
that runs it without Prefect imports the protocol, not Prefect or this module."""


NOT_FORECAST_ARTIFACT_ROWS = 1000
"""Rows of the not-forecast artifact at most (a large backfill's are all in ``window_status``)."""


def publish_not_forecast(run: OpenRun, rows: list[NotForecast]) -> None:
    """The run's building-weeks that could not be forecast as a Prefect table artifact
    (``<label>-not-forecast``; an empty table when every one could)."""
    table = [row.record() for row in rows[:NOT_FORECAST_ARTIFACT_ROWS]] or [
        {"building_id": "", "target_week": "", "status": "",
         "reason": "every building-week was forecast", "published": ""}]
    if len(rows) > NOT_FORECAST_ARTIFACT_ROWS:
        table.append({"building_id": "", "target_week": "", "status": "",
                      "reason": f"and {len(rows) - NOT_FORECAST_ARTIFACT_ROWS} more in "
                                "window_status", "published": ""})
    create_table_artifact(
        table=table,
        key=f"{run.label}-not-forecast",
        description=f"Building-weeks of run {run.run_id} the learned models could not forecast",
    )


def publish_outcomes(run: OpenRun, summary: RunSummary) -> None:
    """What the run published, as a Prefect table artifact (``<label>-outcomes``): building-weeks
    by outcome (learned, persistence, degraded and why, not published, failed) and the weather
    inputs left out, so a degraded week shows where an operator looks."""
    table = [{"outcome": name, "building_weeks": n, "detail": detail} for name, n, detail in (
        ("learned", summary.learned, "a learned model or a combination of at least two"),
        ("persistence", summary.persistence, "chosen over trusted learned models"),
        ("degraded", summary.degraded, ", ".join(
            f"{n} {cause}" for cause, n in summary.degraded_causes.most_common())
            or "persistence because no learned forecast could be trusted"),
        ("held", summary.held, "an order of magnitude off the building's level: never bid"),
        ("not published", summary.unpublished, "no load at the same hours in the last weeks"),
        ("failed", summary.failed, "; ".join(summary.failures[:5])),
    )]
    table += [{"outcome": f"reduced inputs: weather input left out: {name}", "building_weeks": n,
               "detail": "the models were fitted without it"}
              for name, n in summary.left_out.most_common()]
    create_table_artifact(table=table, key=f"{run.label}-outcomes",
                          description=f"What run {run.run_id} published: {summary.line()}")
    for key, weeks, none, what in (
            ("degraded", summary.degraded_weeks, "no building-week was degraded",
             "that published persistence because no learned forecast could be trusted"),
            ("held", summary.held_weeks, "no building-week was held",
             "held out of every bid: their forecast an order of magnitude off the building's "
             "level"),
            ("reduced-inputs", summary.reduced_weeks,
             "no building-week was forecast from reduced inputs",
             "forecast from reduced inputs (a weather input left out, flagged readings treated "
             "as missing)")):
        table = [{"building_id": d.building_id, "target_week": d.week.isoformat(), "why": d.why}
                 for d in weeks] or [{"building_id": "", "target_week": "", "why": none}]
        create_table_artifact(table=table, key=f"{run.label}-{key}",
                              description=f"Building-weeks of run {run.run_id} {what}, and why")


def publish_leaderboard(warehouse: str, run: OpenRun) -> None:
    """This run's leaderboard as a Prefect table artifact (``<label>-leaderboard``): its scores
    or, for a week not yet over (the weekly run's: nothing to score yet), how each model did on
    the week before it, its validation week, as the command line prints it (none when neither
    exists)."""
    with connect(warehouse, read_only=True) as con:
        board = run_leaderboard(con, run.run_id)
        description = f"Leaderboard of run {run.run_id}"
        if board.empty:
            board = validation_leaderboard(con, run.run_id)
            description = (f"Run {run.run_id}: the models on the validation week (the week "
                           "before the one forecast, fitted on the weeks before it), MAE "
                           "relative to seasonal naive's; the forecast week is scored once its "
                           "readings are ingested")
    if not board.empty:
        create_table_artifact(table=board.round(4).to_dict(orient="records"),
                              key=f"{run.label}-leaderboard", description=description)
