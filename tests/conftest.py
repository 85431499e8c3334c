"""Shared fixtures: the real archive's location and a Prefect test backend."""

from __future__ import annotations

from pathlib import Path

import pytest

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
CAMBRIDGE_ARCHIVE = SHARED_DATA / "cambridge-estates"


@pytest.fixture(scope="session")
def cambridge_archive() -> Path:
    """Root of the real Cambridge Estates archive (``../shared/data/cambridge-estates``)."""
    if not (CAMBRIDGE_ARCHIVE / "building_data").is_dir():
        pytest.skip(f"real archive not present at {CAMBRIDGE_ARCHIVE}")
    return CAMBRIDGE_ARCHIVE


@pytest.fixture(scope="session")
def prefect_backend():
    """Run flows against Prefect's throw-away test backend (one per test session)."""
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness():
        yield
