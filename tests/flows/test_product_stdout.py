"""Standard output holds the product's own lines only: what a compiled library writes to file
descriptor 1 itself (a solver's log) goes to standard error (issue 60)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import os, subprocess, sys
from flows.cli import echo, product_stdout_only
product_stdout_only()
os.write(1, b"HighsMipSolverData: a library's note\\n")  # as C code writes it
subprocess.run([sys.executable, "-c", "import os; os.write(1, b'a worker note\\\\n')"])
echo("the product's line")
"""


def test_a_librarys_own_writes_go_to_standard_error():
    done = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, check=True)
    assert done.stdout == "the product's line\n"
    assert "HighsMipSolverData: a library's note" in done.stderr
    assert "a worker note" in done.stderr
