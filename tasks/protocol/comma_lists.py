"""Lists given as text, comma-separated, as the command line gives them (``--models svr,gp``).

The settings models split them themselves, so that a list reads the same from every entry
point: a command's options, a deployment's parameters, Python.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BeforeValidator


def split_commas(value: Any) -> Any:
    """``"a, b"`` or ``["a, b", "c"]`` -> ``("a", "b", "c")``; anything but text unchanged (the
    field validates it). Text that names nothing (``" , "``) is refused: an option left out
    takes its default."""
    texts = [value] if isinstance(value, str) else value
    if not isinstance(texts, list | tuple) or not all(isinstance(t, str) for t in texts):
        return value
    items = tuple(item.strip() for text in texts for item in text.split(",") if item.strip())
    if texts and not items:
        raise ValueError("the list is empty; leave the option out for its default")
    return items


CommaList = Annotated[tuple[str, ...], BeforeValidator(split_commas)]
"""A tuple of names, also given as comma-separated text."""
