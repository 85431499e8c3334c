"""Shared fixtures: the real archive's location and a Prefect test backend; the test tiers.

The tiers (pyproject.toml's ``markers``; ``.ci/run`` runs every one of them):

* **fast**: every test without one of the markers below; ``.venv/bin/pytest`` runs them.
* **integration**: a test that starts a server, a browser, a Dask cluster, worker processes
  or the ``wadiro`` command as a process of its own. It is put there by the fixtures it asks for
  (``INTEGRATION_FIXTURES``), never by hand: ``-m integration``.
* **contract**: scikit-learn's estimator checks on the estimators' other configurations (one
  configuration per class runs in the fast tier): ``-m contract``.
* **slow**: marked by hand, long runs (the real archive at scale, real servers and killed
  processes): ``-m slow``.

Every test is in exactly one tier: a slow test that asks for a server stays in slow only.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

for _variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    # One BLAS and OpenMP thread, as a run's batches have (tasks/protocol/batch.py), from the
    # session's start: otherwise a test's speed depends on whether a batch ran in this process
    # before it, and on two busy cores two OpenMP threads can make a small fit ten times slower.
    os.environ.setdefault(_variable, "1")

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
CAMBRIDGE_ARCHIVE = SHARED_DATA / "cambridge-estates"

TIERS = ("slow", "integration", "contract")
"""The marked tiers; the fast tier is every other test."""

INTEGRATION_FIXTURES = frozenset({
    "prefect_backend",  # Prefect's test server (prefect_test_harness)
    "prefect_server",  # `prefect server start` in a process of its own
    "dask_cluster",  # a Dask scheduler and two workers
    "browser",  # headless Chromium
    "wadiro_process",  # the `wadiro` command in a process of its own
    "worker_processes",  # the processes runner's fork server and workers
})
"""Fixtures that start a server, a browser or a cluster: a test that asks for one, directly or
through another fixture, is in the integration tier."""


def pytest_collection_modifyitems(config, items):
    """Put each test asking for an ``INTEGRATION_FIXTURES`` fixture in the integration tier
    (unless it is slow), and check that no test is in two tiers."""
    for item in items:
        if INTEGRATION_FIXTURES.intersection(getattr(item, "fixturenames", ())) and not (
            item.get_closest_marker("slow")
        ):
            item.add_marker(pytest.mark.integration)
        tiers = [name for name in TIERS if item.get_closest_marker(name)]
        if len(tiers) > 1:
            raise pytest.UsageError(f"{item.nodeid} is in the tiers {tiers}; a test is in one")


@pytest.fixture(scope="session")
def cambridge_archive() -> Path:
    """Root of the real Cambridge Estates archive (``../shared/data/cambridge-estates``)."""
    if not (CAMBRIDGE_ARCHIVE / "building_data").is_dir():
        pytest.skip(f"real archive not present at {CAMBRIDGE_ARCHIVE}")
    return CAMBRIDGE_ARCHIVE


@pytest.fixture
def wadiro_process():
    """The ``wadiro`` command as a process of its own, as an operator runs it:
    ``wadiro_process.run(args, **subprocess_run_options)`` waits for it,
    ``wadiro_process.start(args, env, cwd)`` starts it in a session of its own;
    ``wadiro_process.command`` is the executable, for a script that runs it."""
    import subprocess
    from types import SimpleNamespace

    from tests.flows.processes import WADIRO, start

    return SimpleNamespace(
        run=lambda args, **options: subprocess.run([WADIRO, *map(str, args)], **options),
        start=start, command=WADIRO)


@pytest.fixture
def worker_processes():
    """The test runs the processes runner's real fork server and worker processes (a run in the
    tests' own process otherwise computes on threads: tests/flows/conftest.py)."""


@pytest.fixture(scope="session")
def prefect_backend():
    """Run flows against Prefect's throw-away test backend (one per test session). Its server
    may take long to start on a busy two-core machine: it is given two minutes, not 30 s."""
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=120):
        yield
