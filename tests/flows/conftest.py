"""Fixtures of the flow and command-line tests."""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

_CLI_ENV_DEFAULTS = ("PREFECT_SERVER_ANALYTICS_ENABLED", "PREFECT_LOGGING_LEVEL")
BIN = Path(sys.executable).parent


@pytest.fixture(autouse=True)
def _restore_process_state():
    """The CLI quiets Prefect's loggers, sets env defaults and a stop request; undo all after
    each test."""
    from flows.stopping import STOP

    names = ("prefect", "prefect.flow_runs", "prefect.task_runs")
    levels = {name: logging.getLogger(name).level for name in names}
    env = {name: os.environ.get(name) for name in _CLI_ENV_DEFAULTS}
    yield
    STOP.reset()
    STOP.may_end_process = False  # the command line sets it; this process must not be ended
    for name, level in levels.items():
        logging.getLogger(name).setLevel(level)
    for name, value in env.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@pytest.fixture(autouse=True)
def _threads_for_the_default_runner(request, monkeypatch):
    """A run in this process that leaves the runner at its default (processes) runs its batches
    on threads: the same code on the same settings (the runs table still records processes),
    without a fork server and worker processes to start for each run. The tests about
    processes, stopping and the fork server ask for ``worker_processes`` and keep real ones (so
    does every ``wadiro`` started as a process of its own)."""
    if "worker_processes" in request.fixturenames:
        return
    from flows import engine

    monkeypatch.setitem(engine.RUNNERS, "processes", engine.RUNNERS["threads"])


@pytest.fixture
def no_prefect_server(monkeypatch):
    """Commands run as they do without ``PREFECT_API_URL``: directly, no Prefect API at all
    (even when another test of the session has started Prefect's test server)."""
    from flows import engine

    monkeypatch.setattr(engine, "configured_api_url", lambda: "")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def prefect_server(tmp_path):
    """A Prefect server on a free loopback port with its own home; the CLI's environment."""
    port = _free_port()
    env = {**os.environ, "PREFECT_HOME": str(tmp_path / "prefect-home"),
           "PREFECT_API_URL": f"http://127.0.0.1:{port}/api",
           "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "PREFECT_UI_ENABLED": "false"}
    log = (tmp_path / "server.log").open("wb")
    server = subprocess.Popen(
        [str(BIN / "prefect"), "server", "start", "--host", "127.0.0.1", "--port", str(port)],
        stdout=log, stderr=subprocess.STDOUT, env=env, cwd=tmp_path, start_new_session=True,
    )
    env["WADIRO_TEST_SERVER_PID"] = str(server.pid)
    try:
        deadline = time.monotonic() + 120
        while True:
            assert server.poll() is None, (tmp_path / "server.log").read_text()[-3000:]
            try:
                if httpx.get(f"{env['PREFECT_API_URL']}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "Prefect server did not start within 120 s"
            time.sleep(0.5)
        yield env
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(timeout=30)
        log.close()
