"""The pipeline's errors: one base class, so a caller catches every input problem at once.

Each error names its cause (which file, id, week or setting). Most also subclass the built-in
error a Python user would expect (``ValueError`` for a bad value, ``LookupError`` for an
unknown name), so ``except ValueError`` keeps working where it did.
"""

from __future__ import annotations


class PipelineError(Exception):
    """Base class of every error the pipeline raises about its inputs or its warehouse."""


class UnknownBuildingError(PipelineError, LookupError):
    """Building ids that the warehouse (or the archive being ingested) does not hold."""


class UnknownSiteError(PipelineError, LookupError):
    """Weather for site ids that no building in the warehouse refers to."""


class EmptySelectionError(PipelineError, ValueError):
    """A run that would cover no building or no week."""


class BuildingDataError(PipelineError, ValueError):
    """One building's stored data cannot be used (a duplicated or off-hour reading, ...).

    A run records such a building as failed and goes on with the others.
    """


class RunStoppedError(PipelineError):
    """A run stopped before its end on purpose: a signal (Ctrl-C, SIGTERM) asked it to, or it
    lost the Prefect server it reports to. What it had finished is written; the message says
    what happened and what to do.

    ``status`` is what the ``runs`` table records (``interrupted`` or ``crashed``) and
    ``exit_code`` the command line's exit status (128 + the signal's number after a signal).
    """

    def __init__(self, message: str, *, status: str = "interrupted", exit_code: int = 1) -> None:
        super().__init__(message)
        self.status = status
        self.exit_code = exit_code


class DegradedRunError(PipelineError):
    """A run asked to be strict (``--strict``) that published a degraded forecast or none, or
    failed a building-week. Everything it computed is written; it ends in error (exit code 3,
    a failed flow run) so that a scheduler alerts. ``summary`` is the run's summary."""

    exit_code = 3

    def __init__(self, message: str, summary: object) -> None:
        super().__init__(message)
        self.summary = summary


class WeekNotForecastError(DegradedRunError):
    """A weekly run that could not forecast the week it was asked for with the learned models
    for any building (no weather for the week, no history before it). What it could do is
    written (each building-week's reason in ``window_status``, persistence published where last
    week's load exists); it ends in error (exit code 4) and never forecasts another week."""

    exit_code = 4


class HeldBidsError(DegradedRunError):
    """A run that held a building-week's forecast out of every bid: its level was an order of
    magnitude off what is known of the building (:mod:`~tasks.protocol.bid_check`). Everything
    is written (the held forecast too, marked ``held``); it ends in error (exit code 5, a
    failed flow run), strict or not, so that no one bids without looking at the building."""

    exit_code = 5


class ConflictingWeekError(PipelineError, ValueError):
    """A weekly run given both the week to forecast and the time to choose it from."""
