"""Helpers of the tests that start ``wadiro`` as a real process and signal it."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import psutil

WADIRO = os.environ.get("WADIRO_TEST_COMMAND", str(Path(sys.executable).parent / "wadiro"))
"""The command under test; point ``WADIRO_TEST_COMMAND`` at another build's ``wadiro`` to see
how it behaves in these tests."""


def local_env(**extra: str) -> dict[str, str]:
    """The environment of a command without a configured Prefect server."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API_")}
    return {**env, "PREFECT_SERVER_ANALYTICS_ENABLED": "false", **extra}


def start(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.Popen:
    """``wadiro *args`` in a session of its own (its workers join that session)."""
    return subprocess.Popen([WADIRO, *args], env=env, cwd=cwd, start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def session_processes(session: int) -> list[int]:
    """Live processes of a session (a command started by :func:`start` and everything it
    started, even once they outlive it)."""
    pids = []
    for proc in psutil.process_iter(["status"]):
        with contextlib.suppress(OSError):  # gone meanwhile
            if proc.info["status"] != psutil.STATUS_ZOMBIE and os.getsid(proc.pid) == session:
                pids.append(proc.pid)
    return pids


def wait_until_gone(session: int, within_s: float) -> list[int]:
    """The session's processes still alive after ``within_s`` seconds (none, hopefully)."""
    deadline = time.monotonic() + within_s
    while (alive := session_processes(session)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return alive


def kill_session(session: int) -> None:
    """Clean up after a failed test: SIGKILL whatever is left of the session."""
    for pid in session_processes(session):
        with contextlib.suppress(psutil.NoSuchProcess):
            psutil.Process(pid).kill()


def count_rows(warehouse: Path, sql: str) -> int:
    """A short read-only query (-1 while the file is locked or not there yet)."""
    try:
        with duckdb.connect(str(warehouse), read_only=True) as con:
            return con.execute(sql).fetchone()[0]
    except duckdb.Error:
        return -1


def wait_for_rows(proc: subprocess.Popen, warehouse: Path, sql: str, at_least: int,
                  within_s: float) -> int:
    """Poll until ``sql`` counts ``at_least`` rows; fails if the command ends first."""
    deadline = time.monotonic() + within_s
    while (n := count_rows(warehouse, sql)) < at_least:
        if proc.poll() is not None:
            raise AssertionError(f"command ended early ({proc.returncode}): {proc.stderr.read()[-3000:]}")
        if time.monotonic() > deadline:
            raise AssertionError(f"fewer than {at_least} rows after {within_s} s")
        time.sleep(0.3)
    return n


WORK_POOL = "wadiro"
"""The process work pool the deployment tests create on their Prefect server."""


def prefect_cli(env: dict[str, str], *args: str, cwd: Path, timeout: float = 300) -> str:
    """``prefect ARGS`` from this environment; its output, after asserting it succeeded."""
    done = subprocess.run([str(Path(sys.executable).parent / "prefect"), *args], env=env,
                          cwd=cwd, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"prefect {' '.join(args)}:\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
    return done.stdout + done.stderr
