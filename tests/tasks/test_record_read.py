"""``benchmarks/record_read.py`` runs as documented on a tiny fleet: the record of 16 weeks reads
twice the stored forecasts of 8 (7 models a building-week), and its set-up
(``portfolio_cost.fabricate_results``) writes rows the warehouse of this release takes."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

BENCHMARK = Path(__file__).resolve().parents[2] / "benchmarks" / "record_read.py"


def test_the_benchmark_reads_16_weeks_of_forecasts_twice_as_many_as_8():
    out = subprocess.run([sys.executable, str(BENCHMARK), "--buildings", "3", "--batch", "2"],
                         capture_output=True, text=True, check=True, timeout=300).stdout
    counts = {int(w): int(n.replace(",", "")) for w, n in
              re.findall(r"^\s*(\d+) weeks\s+([\d,]+)", out, flags=re.MULTILINE)}
    assert counts == {8: 3 * 7 * 8, 16: 3 * 7 * 16}
    assert "16 weeks against 8:" in out
