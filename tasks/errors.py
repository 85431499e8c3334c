"""The pipeline's errors: one base class, so a caller catches every input problem at once.

Each error names its cause (which file, id, week or setting). Most also subclass the built-in
error a Python user would expect (``ValueError`` for a bad value, ``LookupError`` for an
unknown name), so ``except ValueError`` keeps working where it did.
"""

from __future__ import annotations


class PipelineError(Exception):
    """Base class of every error the pipeline raises about its inputs or its warehouse."""


class UnknownBuildingError(PipelineError, LookupError):
    """Building ids that the warehouse (or the archive being ingested) does not hold."""

    def __str__(self) -> str:  # LookupError would repr() the message
        return str(self.args[0]) if self.args else ""


class EmptySelectionError(PipelineError, ValueError):
    """A run that would cover no building or no week."""


class BuildingDataError(PipelineError, ValueError):
    """One building's stored data cannot be used (a duplicated or off-hour reading, ...).

    A run records such a building as failed and goes on with the others.
    """


__all__ = ["BuildingDataError", "EmptySelectionError", "PipelineError", "UnknownBuildingError"]
