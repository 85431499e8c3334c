"""Typed errors raised by the modelling library.

Every error names its cause (which input, which sample, which solver status) so that a
pipeline can record why a model was not fitted instead of storing a silently wrong model.
The data errors subclass :class:`ValueError` so that scikit-learn's conventions hold.
"""

from __future__ import annotations


class WadiroModelError(Exception):
    """Base class of every error raised by ``wadiro_models``."""


class InvalidInputError(WadiroModelError, ValueError):
    """Input data or a parameter is unusable (NaN, infinite, wrong shape or length)."""


class InsufficientDataError(InvalidInputError):
    """Too few samples (or no usable activation pattern) to fit the model."""


class InfeasibleConstraintsError(WadiroModelError, ValueError):
    """The physical constraints admit no prediction at all (e.g. lower bound above upper)."""


class SolverError(WadiroModelError, RuntimeError):
    """The solver failed or returned a status that cannot be trusted.

    ``status`` is the solver's status string (``"failed"``, ``"optimal_inaccurate"``, ...).
    """

    def __init__(self, message: str, *, status: str | None = None) -> None:
        super().__init__(message)
        self.status = status


class SolverNotAvailableError(WadiroModelError, LookupError):
    """An unknown solver name, a solver whose module cannot be imported, or a solver that
    does not support a feature of the program (e.g. a lasso penalty)."""


class UnknownModelError(WadiroModelError, KeyError):
    """A model name that is not in the registry."""

    def __str__(self) -> str:  # KeyError quotes its argument; keep the message readable
        return str(self.args[0]) if self.args else ""


class InaccurateSolutionWarning(UserWarning):
    """A fit was accepted although the solver only reached reduced accuracy."""
