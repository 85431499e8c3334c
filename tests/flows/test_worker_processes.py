"""Worker processes of the ``processes`` runner start from a fork server that imported the
protocol once: a worker has the protocol loaded before its first batch, and never Prefect or the
report's plotting (each spawned worker used to import all three, seconds of CPU apiece)."""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
from types import SimpleNamespace

import pytest

from flows.engine import RUNNERS
from tasks.protocol.batch import run_batch
from tasks.protocol.config import ForecastConfig

pytestmark = [
    pytest.mark.skipif("forkserver" not in multiprocessing.get_all_start_methods(),
                       reason="no fork server on this platform (workers are spawned)"),
    pytest.mark.usefixtures("worker_processes"),  # the processes runner itself, not threads
]


def _in_worker(expression: str) -> object:
    """``expression`` evaluated in the one worker of a run's executor, after it ran the compute
    step as a run submits it (an empty batch)."""
    settings = SimpleNamespace(runner="processes", workers=1)
    with RUNNERS["processes"].local(settings) as executor:
        assert executor.submit(run_batch, [], ForecastConfig(),
                               "empty").result(timeout=120) == []
        # eval is a builtin: the worker imports nothing more to run it
        return executor.submit(eval, expression).result(timeout=120)


def test_a_worker_has_the_protocol_loaded_and_not_prefect_or_plotting():
    loaded = set(_in_worker("sorted(__import__('sys').modules)"))
    # an empty batch loads no model: these came from the fork server
    assert {"tasks.protocol.batch", "sklearn", "wadiro_models",
            "wadiro_models._wadiro_scnn", "wadiro_models._baselines",
            "wadiro_models.certification", "holidays.countries.united_kingdom"} <= loaded
    assert not {m for m in loaded if m.split(".")[0] in ("prefect", "matplotlib")}


def test_the_runs_own_process_imports_no_model_library():
    """The command line and the flows import the protocol's types and settings, not
    scikit-learn, SciPy or cvxpy: only the workers fit models."""
    code = ("import sys, flows.cli, flows.forecast, "
            "flows.settings; "
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'sklearn', 'scipy', 'cvxpy'}))")
    shown = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           check=True).stdout
    assert shown.strip() == "[]"


def test_a_worker_is_forked_by_the_fork_server_not_by_the_run():
    parent = _in_worker("__import__('os').getppid()")
    assert parent != os.getpid()
    assert _in_worker("__import__('multiprocessing').parent_process().pid") == os.getpid()
