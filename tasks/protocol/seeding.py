"""Stable seeds, so that a rerun of the same (building, week, model) reproduces its tuning."""

from __future__ import annotations

import hashlib
from datetime import date


def stable_seed(*parts: str | date | int) -> int:
    """A 32-bit seed from the parts' text, identical across processes and Python versions.

    Python's built-in ``hash`` is salted per process, so it cannot be used here.
    """
    text = "|".join(p.isoformat() if isinstance(p, date) else str(p) for p in parts)
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "big")
