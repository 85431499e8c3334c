"""A run's progress, shown where its user looks: a bar in a terminal, log lines where standard
error is not a terminal (cron, CI, ``| tee``, a Prefect worker's output), an artifact in
Prefect."""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable
from types import TracebackType
from typing import TextIO

from prefect.artifacts import create_progress_artifact, update_progress_artifact
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
)

LINE_EVERY_S = 60.0
"""Without a terminal, a line at the first batch finished after this long without one."""

LINES_PER_RUN = 10
"""Without a terminal, a line each time another tenth of the run's building-weeks is done."""


class RunProgress:
    """Building-weeks done out of ``total``: a Prefect progress artifact (``{label}-progress``)
    when the run reports to Prefect (``artifact``); on ``stream`` (standard error), a progress
    bar when it is a terminal, else a line such as ``forecast: 120/1000 building-weeks done
    (12 %), 3.1 min`` each time the count passes a multiple of ``every_n`` (a tenth of the run),
    ``every_s`` seconds after the last line (at a batch's end, or while the run waits for a long
    batch: the same count again), and when the run is done."""

    def __init__(self, label: str, total: int, *, artifact: bool = True,
                 stream: TextIO | None = None, every_s: float = LINE_EVERY_S,
                 every_n: int | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.label = label
        self.total = total
        self._artifact = create_progress_artifact(
            0.0, key=f"{label}-progress", description="building-weeks done (%)"
        ) if artifact else None
        self._stream = stream if stream is not None else sys.stderr
        console = Console(file=self._stream)
        self._lines = not console.is_terminal
        columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                   TimeElapsedColumn())
        self._bar = Progress(*columns, console=console, disable=self._lines)
        self._bar_task = self._bar.add_task("building-weeks", total=total)
        self._every_s = every_s
        self._every_n = every_n or max(1, math.ceil(total / LINES_PER_RUN))
        self._clock = clock
        self._began = self._last_time = clock()
        self._last_done = 0
        self._shown = 0

    def __enter__(self) -> RunProgress:
        self._bar.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self._bar.stop()

    def update(self, done: int) -> None:
        """``done`` building-weeks are done: a batch came back, or (the same count again) the
        run is still waiting for one, which writes a line after a quiet ``every_s``."""
        if self._lines:
            self._maybe_line(done)
        if done == self._shown:
            return
        self._shown = done
        self._bar.update(self._bar_task, completed=done)
        if self._artifact is not None:
            update_progress_artifact(self._artifact, 100.0 * done / max(self.total, 1))

    def line(self, done: int) -> str:
        """``forecast: 120/1000 building-weeks done (12 %), 3.1 min``."""
        share = 100 * done // max(self.total, 1)
        minutes = (self._clock() - self._began) / 60.0
        return (f"{self.label}: {done}/{self.total} building-weeks done ({share} %), "
                f"{minutes:.1f} min")

    def _maybe_line(self, done: int) -> None:
        now = self._clock()
        due = (done >= self.total or done // self._every_n > self._last_done // self._every_n
               or now - self._last_time >= self._every_s)
        quiet = now - self._last_time >= self._every_s
        if due and (done > self._last_done or quiet):
            print(self.line(done), file=self._stream, flush=True)
            self._last_done, self._last_time = done, now
