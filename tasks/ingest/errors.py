"""Errors of reading source files into the warehouse; each names the file, id or cause."""

from __future__ import annotations

from tasks.errors import PipelineError


class IngestError(PipelineError, ValueError):
    """Input that cannot be ingested; the message names the file, id or cause."""


class SourceNotFoundError(IngestError):
    """A path the archive layout needs does not exist."""


class MalformedSourceError(IngestError):
    """A file is truncated, has the wrong header, non-numeric values or impossible timestamps."""


class DuplicateTimestampError(MalformedSourceError):
    """A file lists the same timestamp more than once."""


class EmptyRangeError(IngestError):
    """The requested date range selects nothing."""
