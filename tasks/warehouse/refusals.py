"""The machine's refusals -- a full disk, a file-size limit, a read-only folder, too little
memory -- as one line that names the cause and what to do.

Such a refusal can come from any step that writes or allocates: DuckDB (its message carries the
operating system's reason as text), pyarrow staging a batch, numpy or pandas (``MemoryError``).
What failed was being written in a transaction, or aside and renamed into place once complete,
so what was stored before stays as it was: the line says so.
"""

from __future__ import annotations

import errno
import re
from concurrent.futures import BrokenExecutor
from dataclasses import dataclass

from tasks.errors import PipelineError


class ResourceError(PipelineError):
    """The machine refused a write or an allocation; the message names the cause and the fix."""


@dataclass(frozen=True)
class _Cause:
    errnos: tuple[int, ...]
    markers: tuple[str, ...]
    """Lower-case text that names the cause in a library's message (DuckDB's, Arrow's)."""
    what: str
    fix: str


_CAUSES = (
    _Cause((errno.ENOSPC, errno.EDQUOT), ("no space left on device", "disk quota exceeded"),
           "the disk is full", "free space on the disk that holds it, then run the command again"),
    _Cause((errno.EFBIG,), ("file too large",),
           "a file-size limit stopped the write",
           "raise the limit (`ulimit -f`, or the service's LimitFSIZE), then run the command "
           "again"),
    _Cause((errno.EROFS,), ("read-only file system",),
           "its folder is on a read-only file system",
           "give a warehouse in a folder you can write to (DuckDB writes a .wal file beside it)"),
    _Cause((errno.EACCES, errno.EPERM), ("permission denied", "operation not permitted"),
           "its folder or file is not open to this user (permissions)",
           "give a warehouse in a folder you can write to (DuckDB writes a .wal file beside it), "
           "or fix the permissions (`ls -l`; `lsattr` for a folder made immutable)"),
    _Cause((errno.ENOMEM,), ("out of memory", "cannot allocate memory", "failed to allocate",
                             "allocation failure", "malloc of size", "bad_alloc",
                             "failed to map segment", "can't start new thread",
                             "failed to launch worker thread"),
           "the process ran out of memory",
           "raise the memory limit (`ulimit -v`, the service's MemoryMax) or free memory; a "
           "forecasting run also needs less with fewer --workers or a smaller --batch-size"),
)

UNCHANGED = "what was stored before is unchanged"


_WRAPPING_FAILED = re.compile(r"^Unknown error: Wrapping .* failed$", re.DOTALL)
"""What pyarrow says when Python could not make an object of a value it converts (it clears
Python's ``MemoryError`` and raises a bare ``ArrowException``): out of memory."""


def out_of_memory(error: BaseException) -> bool:
    """Whether ``error`` says the process ran out of memory, as Python, DuckDB or pyarrow
    say it."""
    return _cause(error) is _CAUSES[-1]


def _cause(error: BaseException) -> _Cause | None:
    if isinstance(error, MemoryError):  # Arrow's ArrowMemoryError is one too
        return _CAUSES[-1]
    if type(error).__module__.startswith("pyarrow") and _WRAPPING_FAILED.match(str(error)):
        return _CAUSES[-1]
    number = getattr(error, "errno", None)
    text = str(error).lower()
    for cause in _CAUSES:
        if number in cause.errnos or any(marker in text for marker in cause.markers):
            return cause
    return None


def _detail(error: BaseException) -> str:
    """The library's own words, first line, without DuckDB's error-class prefixes."""
    lines = str(error).strip().splitlines()
    if not lines:
        return type(error).__name__
    line = lines[0]
    for prefix in ("TransactionContext Error: ", "Failed to commit: ", "IO Error: ",
                   "Out of Memory Error: "):
        line = line.replace(prefix, "")
    return line


def resource_error(error: BaseException, doing: str) -> ResourceError | None:
    """``error`` as a :class:`ResourceError` when the machine refused a write or an allocation
    (``doing`` says what was being done, e.g. ``"cannot write warehouse w.duckdb"``); ``None``
    for any other error."""
    if isinstance(error, ResourceError):
        return error
    cause = _cause(error)
    if cause is None:
        return None
    return ResourceError(f"{doing}: {cause.what} ({_detail(error)}); {cause.fix}; {UNCHANGED}")


MACHINE_ERRORS = (OSError, MemoryError, BrokenExecutor, RuntimeError, ImportError)
"""What a command line catches to ask :func:`machine_refusal` for one line."""


def machine_refusal(error: BaseException) -> str | None:
    """One line for an error of :data:`MACHINE_ERRORS` that reached the command line
    untranslated: any ``OSError``, ``MemoryError`` or broken worker pool, and a ``RuntimeError``
    or ``ImportError`` that says the machine refused (a thread that cannot start, a library that
    cannot be mapped into memory); ``None`` for any other (a bug: its traceback is wanted)."""
    filename = getattr(error, "filename", None)
    refused = resource_error(error, f"cannot write {filename}" if filename else "stopped")
    if refused is not None:
        return str(refused)
    if isinstance(error, BrokenExecutor):
        return ("a worker process ended abruptly (killed, or out of memory); the batches "
                "finished before are written; run the command again (with fewer --workers if "
                "memory is short)")
    if not isinstance(error, OSError):
        return None
    reason = getattr(error, "strerror", None) or _detail(error)
    return f"{filename}: {reason}" if filename else reason
