"""Progress as lines where standard error is not a terminal (cron, CI, ``| tee``): issue 30."""

from __future__ import annotations

import io
import re

from flows.progress import RunProgress
from tests.flows.processes import local_env
from tests.flows.warehouse_rows import make_warehouse

LINE = re.compile(r"^backfill: (\d+)/(\d+) building-weeks done \((\d+) %\), ([\d.]+) min$")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_line_every_tenth_of_the_run_or_after_a_quiet_minute_and_at_the_end():
    stream, clock = io.StringIO(), Clock()
    with RunProgress("forecast", 1000, artifact=False, stream=stream, clock=clock) as progress:
        for done, at in ((40, 10), (99, 20), (100, 30), (150, 40), (160, 100), (200, 110),
                         (1000, 190)):
            clock.now = 1000.0 + at
            progress.update(done)
    assert stream.getvalue().splitlines() == [
        "forecast: 100/1000 building-weeks done (10 %), 0.5 min",  # a tenth
        "forecast: 160/1000 building-weeks done (16 %), 1.7 min",  # a minute since the last
        "forecast: 200/1000 building-weeks done (20 %), 1.8 min",  # the next tenth
        "forecast: 1000/1000 building-weeks done (100 %), 3.2 min",  # the end
    ]


def test_a_run_waiting_for_a_long_batch_says_so_each_quiet_minute():
    stream, clock = io.StringIO(), Clock()
    with RunProgress("forecast", 1000, artifact=False, stream=stream, clock=clock) as progress:
        for done, at in ((100, 30), (100, 60), (100, 89), (100, 90), (100, 120), (100, 151),
                         (300, 160)):
            clock.now = 1000.0 + at
            progress.update(done)  # the same count again: the run polls while it waits
    assert stream.getvalue().splitlines() == [
        "forecast: 100/1000 building-weeks done (10 %), 0.5 min",
        "forecast: 100/1000 building-weeks done (10 %), 1.5 min",  # a quiet minute
        "forecast: 100/1000 building-weeks done (10 %), 2.5 min",  # and another
        "forecast: 300/1000 building-weeks done (30 %), 2.7 min",
    ]


def test_every_batch_of_a_small_run_is_a_line():
    stream = io.StringIO()
    with RunProgress("backfill", 3, artifact=False, stream=stream, clock=Clock()) as progress:
        for done in (1, 1, 3):  # a batch of failures counts nothing new: no second line
            progress.update(done)
    assert [LINE.sub(r"\1/\2 \3", line) for line in stream.getvalue().splitlines()] == [
        "1/3 33", "3/3 100"]


def test_a_command_without_a_terminal_writes_progress_lines(tmp_path, wadiro_process):
    warehouse = make_warehouse(tmp_path / "w.duckdb", buildings=3)
    done = wadiro_process.run(
        ["backfill", "--start", "2024-03-25", "--end", "2024-04-01", "--models",
         "seasonal_naive", "--batch-size", "1", "--workers", "1", "--warehouse", str(warehouse)],
        capture_output=True, text=True, env=local_env(), timeout=300)  # a pipe, as under cron
    assert done.returncode == 0, done.stderr[-3000:]
    counts = [tuple(map(int, m.groups()[:2])) for line in done.stderr.splitlines()
              if (m := LINE.match(line))]
    assert counts == [(2, 6), (4, 6), (6, 6)], done.stderr  # a batch is one building x 2 weeks
    assert "\x1b[" not in done.stderr  # no terminal codes: a bar would draw with them
