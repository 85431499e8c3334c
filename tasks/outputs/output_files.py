"""Files the product writes for people and their spreadsheets: CSV text cells that a
spreadsheet cannot run as a formula, and writes that never follow a link out of their folder.

*Formula injection*: a spreadsheet opening a CSV runs a cell that starts with ``=``, ``+``,
``-`` or ``@`` (and, in some, a tab or carriage return) as a formula; building ids are operator
data and may start so. Such text cells are written with a leading ``'`` (OWASP's advice), which
spreadsheets show as text and do not store; numbers are left as they are.

*Links*: a file is written beside its final name and renamed onto it, which replaces a link
planted under that name instead of writing through it, and a folder inside the output folder
that is a link is refused: nothing is written outside the folder the user gave.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

import pandas as pd

from tasks.errors import PipelineError

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
"""What a spreadsheet reads as the start of a formula."""

OUTPUT_MEMORY = "2GB"
"""DuckDB's memory while a report or an export is made (``SET memory_limit``): its joins and
sorts spill to disk beyond it (a 10,000-building fleet's report took 2.5 GB without; at 1 GB
its data-quality windows spilled and took twice as long)."""


class OutputFolderError(PipelineError):
    """An output folder or file that cannot be written safely (a link, a file, not writable)."""


def safe_text(value: object) -> object:
    """``value`` with a leading ``'`` when it is text a spreadsheet would run as a formula."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def safe_cells(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with every text cell made safe (:func:`safe_text`); other columns as they are
    (a column of text only is checked at once, not cell by cell)."""
    out = frame.copy()
    for column in out.columns:
        values = out[column]
        if values.dtype != object and not pd.api.types.is_string_dtype(values):
            continue
        kind = pd.api.types.infer_dtype(values, skipna=True)
        if kind != "empty" and (kind != "string" or values.str.startswith(FORMULA_STARTS)
                                .fillna(False).to_numpy(bool).any()):
            out[column] = values.map(safe_text)
    return out


def _checked_folder(root: Path, relative: Path) -> Path:
    """The folder ``root / relative.parent``, created if needed, each part below ``root`` a real
    folder (not a link)."""
    folder = root
    for part in relative.parent.parts:
        folder = folder / part
        if folder.is_symlink():
            raise OutputFolderError(
                f"{folder} is a symbolic link: nothing is written outside {root}; remove the "
                "link or choose another folder")
        if folder.exists() and not folder.is_dir():
            raise OutputFolderError(f"{folder} is a file where a folder is needed; remove it or "
                                    "choose another folder")
        folder.mkdir(exist_ok=True)
    return folder


@contextmanager
def open_beside(root: Path, relative: str | Path) -> Iterator[BinaryIO]:
    """A binary stream that becomes ``root / relative`` without following a link: written beside
    it and renamed onto the name when the block ends (a link there is replaced, its target
    untouched); nothing is left if the block fails. A large file is written as it is made."""
    relative = Path(relative)
    if relative.is_absolute() or ".." in relative.parts:
        raise OutputFolderError(f"{relative} is not a name inside {root}")
    folder = _checked_folder(root, relative)
    target = folder / relative.name
    if target.is_dir() and not target.is_symlink():
        raise OutputFolderError(f"{target} is a folder; remove it or choose another folder")
    handle, temporary = tempfile.mkstemp(dir=folder, prefix=f".{relative.name}.", suffix=".part")
    try:
        os.fchmod(handle, 0o666 & ~_umask())  # as an ordinary new file (mkstemp makes it 0600)
        with os.fdopen(handle, "wb") as stream:
            yield stream
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def write_bytes(root: Path, relative: str | Path, data: bytes) -> Path:
    """Write ``data`` as ``root / relative`` (:func:`open_beside`)."""
    with open_beside(root, relative) as stream:
        stream.write(data)
    return root / relative


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_text(root: Path, relative: str | Path, text: str) -> Path:
    """:func:`write_bytes` of UTF-8 text."""
    return write_bytes(root, relative, text.encode("utf-8"))


def csv_text(frame: pd.DataFrame, **to_csv: object) -> str:
    """``frame`` as RFC 4180 CSV text: no index, text cells made safe (:func:`safe_cells`),
    lines ended by CRLF, so that a cell holding a line break of either kind is quoted (with
    ``\n`` line ends a lone ``\r`` in an id would go unquoted and split its row)."""
    return safe_cells(frame).to_csv(index=False, lineterminator="\r\n",  # type: ignore[call-overload]
                                    **to_csv)


def write_csv(root: Path, relative: str | Path, frame: pd.DataFrame, **to_csv: object) -> Path:
    """``frame`` as CSV (:func:`csv_text`) at ``root / relative``."""
    return write_text(root, relative, csv_text(frame, **to_csv))
