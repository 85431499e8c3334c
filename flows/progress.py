"""A run's progress, shown where its user looks: a bar in a terminal, an artifact in Prefect."""

from __future__ import annotations

import sys
from types import TracebackType

from prefect.artifacts import create_progress_artifact, update_progress_artifact
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
)


class RunProgress:
    """Building-weeks done out of ``total``: a Prefect progress artifact (``{label}-progress``)
    when the run reports to Prefect (``artifact``) and, when standard error is a terminal, a
    progress bar."""

    def __init__(self, label: str, total: int, *, artifact: bool = True) -> None:
        self.total = total
        self._artifact = create_progress_artifact(
            0.0, key=f"{label}-progress", description="building-weeks done (%)"
        ) if artifact else None
        console = Console(file=sys.stderr)
        columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                   TimeElapsedColumn())
        self._bar = Progress(*columns, console=console, disable=not console.is_terminal)
        self._bar_task = self._bar.add_task("building-weeks", total=total)

    def __enter__(self) -> RunProgress:
        self._bar.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self._bar.stop()

    def update(self, done: int) -> None:
        self._bar.update(self._bar_task, completed=done)
        if self._artifact is not None:
            update_progress_artifact(self._artifact, 100.0 * done / max(self.total, 1))
