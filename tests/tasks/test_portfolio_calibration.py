"""Portfolio bands on the real archive (issue 31's "must show"): 15 real buildings backfilled
over 25 consecutive weeks with the ``wadiro`` command and the deployed protocol; the portfolio
``all`` and a named portfolio of a third of the buildings. With a track record the 80 % band
covers 75-85 % of the hours and the 95 % band 90-97 %, the 80 % band at most 0.8 times as wide
as the buildings' bands added up; bands calibrated by the validation week alone (a portfolio's
first week), measured over every week, meet the same goals. The benchmark
``benchmarks/portfolio_calibration.py`` prints the table (docs/warehouse.md, "Portfolios")."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARK = Path(__file__).resolve().parents[2] / "benchmarks" / "portfolio_calibration.py"


def _benchmark():
    sys.path.insert(0, str(BENCHMARK.parent))
    spec = importlib.util.spec_from_file_location("portfolio_calibration", BENCHMARK)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def backfilled(tmp_path_factory, cambridge_archive):
    """The benchmark's set-up, made once: 15 real buildings backfilled over 25 weeks."""
    bench = _benchmark()
    folder = tmp_path_factory.mktemp("portfolio-calibration")
    return bench.backfilled_warehouse(folder, list(bench.BUILDINGS), bench.START, bench.END,
                                      cambridge_archive)


@pytest.mark.slow
def test_portfolio_bands_are_calibrated_on_real_buildings(backfilled):
    bench = _benchmark()
    table = bench.calibration_table(backfilled)
    print(table.to_string(index=False))
    assert set(table["portfolio_id"]) == {"all", "third"}
    with_record = table[table["weeks"] == bench.WITH_RECORD].set_index("portfolio_id")
    assert (with_record["n_weeks"] == 24).all()  # every week but the backfill's first
    assert bench.misses(table, bench.WITH_RECORD) == []
    assert bench.misses(table, bench.FIRST) == []
    first = table[table["weeks"] == bench.FIRST].set_index("portfolio_id")
    assert (first["n_weeks"] == 25).all()


@pytest.mark.slow
def test_the_benchmark_prints_the_table(backfilled):
    """The benchmark's own command line, on the warehouse made above (``--warehouse``)."""
    out = subprocess.run([sys.executable, str(BENCHMARK), "--warehouse", str(backfilled)],
                         capture_output=True, text=True, check=True, timeout=600)
    assert "15 real buildings, portfolios 'all' and 'third' (5 buildings)" in out.stdout
    assert "made before (2019-01-07 to 2019-06-24)" in out.stdout
    assert "every week with a record" in out.stdout
    assert "goals (every week with a record): met" in out.stdout
