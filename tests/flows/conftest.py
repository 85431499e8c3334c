"""Fixtures of the flow and command-line tests."""

from __future__ import annotations

import logging
import os

import pytest

_CLI_ENV_DEFAULTS = ("PREFECT_SERVER_ANALYTICS_ENABLED", "PREFECT_LOGGING_LEVEL")


@pytest.fixture(autouse=True)
def _restore_process_state():
    """The CLI quiets Prefect's loggers and sets env defaults; undo both after each test."""
    names = ("prefect", "prefect.flow_runs", "prefect.task_runs")
    levels = {name: logging.getLogger(name).level for name in names}
    env = {name: os.environ.get(name) for name in _CLI_ENV_DEFAULTS}
    yield
    for name, level in levels.items():
        logging.getLogger(name).setLevel(level)
    for name, value in env.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
