"""The code version recorded with every run: package version plus the git commit when known."""

from __future__ import annotations

import subprocess
from functools import cache
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

PACKAGE = "wadiro-fleet"


@cache
def code_version() -> str:
    try:
        text = version(PACKAGE)
    except PackageNotFoundError:
        text = "unknown"
    root = Path(__file__).resolve().parent.parent
    try:
        commit = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short=12", "HEAD"],
            capture_output=True, text=True, timeout=5, check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True, text=True, timeout=5, check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return text
    return f"{text}+g{commit}{'.dirty' if dirty else ''}"
