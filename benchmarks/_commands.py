"""Measuring ``wadiro`` commands as a user runs them: the installed command as a child process,
its CPU with every process it started, its wall time and memory, and what its run wrote.

CPU is user + system time from ``getrusage(RUSAGE_CHILDREN)``, taken after the child and every
process it started have ended. Worker processes forked by a fork server are not waited for by the
command itself (the server outlives it by a moment); this process is made their reaper (Linux's
child subreaper), waits for them, and so counts their CPU too.
"""

from __future__ import annotations

import ctypes
import os
import resource
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

from tasks.warehouse.connection import connect

WADIRO = [str(Path(sys.executable).with_name("wadiro"))]  # the installed command


def wadiro(*args: str, quiet: bool = False) -> None:
    """Run one ``wadiro`` command; stop the benchmark if it fails."""
    out = subprocess.DEVNULL if quiet else None
    before = _children()
    subprocess.run([*WADIRO, *args], check=True, stdout=out)
    _reap_descendants(before)  # its CPU is not the next measured command's


class TreeMemory:
    """Peak resident memory of a process and its descendants, sampled on a thread."""

    def __init__(self, pid: int, every: float = 0.2) -> None:
        self.root, self.every = psutil.Process(pid), every
        self.peak_total = self.peak_one = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while not self._stop.is_set():
            try:
                procs = [self.root, *self.root.children(recursive=True)]
            except psutil.Error:
                return
            sizes = []
            for proc in procs:
                try:
                    sizes.append(proc.memory_info().rss)
                except psutil.Error:
                    continue
            if sizes:
                self.peak_total = max(self.peak_total, sum(sizes))
                self.peak_one = max(self.peak_one, max(sizes))
            self._stop.wait(self.every)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


PR_SET_CHILD_SUBREAPER = 36


def _adopt_orphans() -> None:
    """Make this process the reaper of its descendants' orphans, so that their CPU is counted."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        adopted = libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        adopted = False
    if not adopted:
        print("warning: cannot adopt orphaned worker processes here (not Linux?): the CPU of "
              "workers started through a fork server is not counted", file=sys.stderr)


_adopt_orphans()


def _children() -> set[int]:
    """This process's children now (a caller such as a test run may have its own, unrelated)."""
    return {child.pid for child in psutil.Process().children()}


def _reap_descendants(before: set[int], within_s: float = 30.0) -> None:
    """Wait until every process left by the last command has ended (and its CPU is counted):
    the children this process has gained since ``before`` (the command's adopted orphans), not
    the children it already had."""
    deadline = time.monotonic() + within_s
    while True:
        left = _children() - before
        if not left:
            return
        for pid in left:
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass  # reaped already, or not ours after all
        if not _children() - before:
            return
        if time.monotonic() > deadline:
            raise SystemExit(f"processes left behind by the command after {within_s:.0f} s")
        time.sleep(0.05)


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


@dataclass(frozen=True)
class Measured:
    """One command: wall seconds, CPU seconds of its process tree, peak memory (bytes)."""

    wall: float
    cpu: float
    peak_total: int
    peak_one: int


def measure(*args: str, quiet: bool = True) -> Measured:
    """Run ``wadiro ARGS`` as a child process and measure it; stop if it fails."""
    before = _children()
    cpu0, wall0 = children_cpu(), time.perf_counter()
    child = subprocess.Popen([*WADIRO, *args], stdout=subprocess.DEVNULL if quiet else None,
                             stderr=subprocess.DEVNULL if quiet else None)
    memory = TreeMemory(child.pid)
    code = child.wait()
    wall = time.perf_counter() - wall0
    _reap_descendants(before)
    cpu = children_cpu() - cpu0
    memory.stop()
    if code != 0:
        raise SystemExit(f"wadiro {' '.join(args)} failed with exit code {code}")
    return Measured(wall, cpu, memory.peak_total, memory.peak_one)


@dataclass(frozen=True)
class RunFacts:
    """What the latest runs wrote: their building-weeks by status, the protocol's CPU in the
    workers (``window_status.compute_time_s``) and, per model, its stages' seconds summed."""

    run_ids: tuple[str, ...]
    status: dict[str, int]
    inside: float
    by_model: list[tuple]
    """(model, ok, failed, tuning s, fit s, certify s, certified, validation tuned / refit /
    issued), most expensive first."""

    @property
    def building_weeks(self) -> int:
        return sum(self.status.values())


def latest_run(warehouse: Path, runs: int = 1) -> RunFacts:
    """The facts of the latest ``runs`` runs of ``warehouse``, summed."""
    with connect(warehouse, read_only=True) as con:
        run_ids = [row[0] for row in con.execute(
            "SELECT run_id FROM runs ORDER BY started_at DESC LIMIT ?", [runs]).fetchall()]
        status = dict(con.execute(
            "SELECT status, count(*) FROM window_status WHERE run_id IN (SELECT unnest(?)) "
            "GROUP BY 1", [run_ids]).fetchall())
        inside = con.execute("SELECT coalesce(sum(compute_time_s), 0) FROM window_status "
                             "WHERE run_id IN (SELECT unnest(?))", [run_ids]).fetchone()[0]
        by_model = con.execute(
            """SELECT model, count(*) FILTER (WHERE status = 'ok'),
                      count(*) FILTER (WHERE status <> 'ok'),
                      coalesce(sum(tuning_time_s), 0), coalesce(sum(fit_time_s), 0),
                      coalesce(sum(certify_time_s), 0), count(certify_time_s),
                      count(*) FILTER (WHERE validation_source = 'tuning'),
                      count(*) FILTER (WHERE validation_source = 'refit'),
                      count(*) FILTER (WHERE validation_source = 'issued')
               FROM model_fits WHERE run_id IN (SELECT unnest(?))
               GROUP BY model ORDER BY 4 + 5 + 6 DESC""",
            [run_ids]).fetchall()
    return RunFacts(tuple(run_ids), status, inside, by_model)


def print_stages(facts: RunFacts, n: int) -> None:
    """Per model, seconds per building-week in each stage (wall seconds in the workers, which
    run one per core, so close to their CPU)."""
    print(f"{'model':<16}{'tuning':>9}{'fit':>9}{'certify':>9}{'certified':>11}{'failed':>8}"
          f"   validation: tuned / refit / issued")
    for model, _ok, failed, tuning, fit, certify, certified, *sources in facts.by_model:
        print(f"{model:<16}{tuning / n:>9.3f}{fit / n:>9.3f}{certify / n:>9.3f}{certified:>11}"
              f"{failed:>8}   {' / '.join(str(k) for k in sources)}")
