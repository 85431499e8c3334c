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


@pytest.mark.slow
def test_portfolio_bands_are_calibrated_on_real_buildings(tmp_path, cambridge_archive):
    bench = _benchmark()
    warehouse = bench.backfilled_warehouse(tmp_path, list(bench.BUILDINGS), bench.START,
                                           bench.END, cambridge_archive)
    table = bench.calibration_table(warehouse)
    print(table.to_string(index=False))
    assert set(table["portfolio_id"]) == {"all", "third"}
    with_record = table[table["weeks"] == bench.WITH_RECORD].set_index("portfolio_id")
    assert (with_record["n_weeks"] == 24).all()  # every week but the backfill's first
    assert bench.misses(table, bench.WITH_RECORD) == []
    assert bench.misses(table, bench.FIRST) == []
    first = table[table["weeks"] == bench.FIRST].set_index("portfolio_id")
    assert (first["n_weeks"] == 25).all()


@pytest.mark.slow
def test_the_benchmark_prints_the_table(tmp_path, cambridge_archive):
    """The benchmark's own command line, on a shorter range (10 consecutive weeks)."""
    out = subprocess.run(
        [sys.executable, str(BENCHMARK), "--start", "2019-03-04", "--end", "2019-05-06",
         "--buildings", "UCam_Building_b0,UCam_Building_b1,UCam_Building_b3",
         "--keep", str(tmp_path)], capture_output=True, text=True, check=True, timeout=1200)
    assert "every week with a record" in out.stdout and "goals (" in out.stdout
