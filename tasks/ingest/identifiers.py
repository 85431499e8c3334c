"""Building and site ids an operator's file may hold: printable text.

An id is typed into ``--buildings``, printed in summaries, written into reports and matched in
SQL. A control character (NUL, a line break, a tab, any other of Unicode's category Cc) or a
character that reorders the text around it (the bidirectional overrides and isolates, U+202A to
U+202E and U+2066 to U+2069, and the marks U+200E, U+200F, U+061C) makes an id that cannot be
typed, prints as something it is not (``b1<U+202E>2b`` shows as ``b1b2``), or, for NUL, can
never be selected. Such an id is refused at ingest, naming the line, the column and the
character's code point.

Ids starting with ``=``, ``+``, ``@`` or ``-`` are accepted: they are text like any other here,
and whatever writes them into a spreadsheet-bound CSV escapes them.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tasks.ingest.errors import MalformedSourceError

__all__ = ["UNPRINTABLE", "check_id_names", "unprintable_at", "unprintable_problem"]

UNPRINTABLE = "[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]"
"""Characters an id may not hold (a regular expression's class, RE2 and Python alike)."""
_UNPRINTABLE = re.compile(UNPRINTABLE)


def unprintable_problem(value: str, what: str) -> str | None:
    """Why ``value`` cannot be a ``what`` (e.g. ``building id``), or ``None`` when it can."""
    found = _UNPRINTABLE.search(value)
    if found is None:
        return None
    char = found.group()
    name = unicodedata.name(char, "a control character")
    return (f"{what} {value!r} holds U+{ord(char):04X} ({name.lower()}) at character "
            f"{found.start() + 1}: ids are printable text, with no control or text-direction "
            "characters; fix the id")


def unprintable_at(values: pa.Array | pa.ChunkedArray) -> int | None:
    """The index of the first of ``values`` (strings) that holds a character
    :data:`UNPRINTABLE` names, or ``None``."""
    hits = pc.fill_null(pc.match_substring_regex(values, UNPRINTABLE), False)
    if not pc.any(hits).as_py():
        return None
    return int(np.flatnonzero(hits.to_numpy(zero_copy_only=False))[0])


def check_id_names(path: Path, names: Sequence[str], what: str) -> None:
    """Refuse a column name (a wide file's building id) that holds such a character."""
    for position, name in enumerate(names, start=1):
        problem = unprintable_problem(name, what)
        if problem is not None:
            raise MalformedSourceError(f"{path}: column {position} of the header: {problem}")
