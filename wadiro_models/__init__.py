"""WaDiRo-SCNN modelling library: scikit-learn estimators, solvers, search spaces.

Pure library: numpy, scipy, cvxpy, clarabel and scikit-learn only (no files, no pipeline).

The names below load on first use (PEP 562): a process that reads only the search spaces or the
exceptions (a command line parsing its options) does not import scikit-learn, SciPy and cvxpy,
a second or more of CPU per process.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._baselines import GaussianProcessBaseline, LinearSVRBaseline
    from ._boosting import GradientBoostingModel
    from ._constraints import PhysicalLimits, physical_limits
    from ._out_of_sample import OutOfSampleBound
    from ._program import (
        ScnnProgram,
        ScnnSolution,
        ScnnSolver,
        max_constraint_violation,
        objective_value,
        predictions,
    )
    from ._relu_network import ReluNetwork
    from ._scnn import SCNN
    from ._wadiro_linreg import WaDiRoLinearRegression
    from ._wadiro_scnn import WaDiRoSCNN
    from .certification import StabilityCertificate, certify_stability
    from .exceptions import (
        InaccurateSolutionWarning,
        InfeasibleConstraintsError,
        InsufficientDataError,
        InvalidInputError,
        SolverError,
        SolverNotAvailableError,
        UnknownModelError,
        WadiroModelError,
    )
    from .registry import REGISTRY, SEARCH_SPACES, ModelEntry, make_model
    from .search_spaces import Categorical, IntUniform, LogUniform
    from .solvers import SOLVERS, IpmOptions, get_solver, solve_clarabel, solve_ipm

_EXPORTS: dict[str, tuple[str, ...]] = {
    "._baselines": ("GaussianProcessBaseline", "LinearSVRBaseline"),
    "._boosting": ("GradientBoostingModel",),
    "._constraints": ("PhysicalLimits", "physical_limits"),
    "._out_of_sample": ("OutOfSampleBound",),
    "._program": ("ScnnProgram", "ScnnSolution", "ScnnSolver", "max_constraint_violation",
                  "objective_value", "predictions"),
    "._relu_network": ("ReluNetwork",),
    "._scnn": ("SCNN",),
    "._wadiro_linreg": ("WaDiRoLinearRegression",),
    "._wadiro_scnn": ("WaDiRoSCNN",),
    ".certification": ("StabilityCertificate", "certify_stability"),
    ".exceptions": ("InaccurateSolutionWarning", "InfeasibleConstraintsError",
                    "InsufficientDataError", "InvalidInputError", "SolverError",
                    "SolverNotAvailableError", "UnknownModelError", "WadiroModelError"),
    ".registry": ("REGISTRY", "SEARCH_SPACES", "ModelEntry", "make_model"),
    ".search_spaces": ("Categorical", "IntUniform", "LogUniform"),
    ".solvers": ("SOLVERS", "IpmOptions", "get_solver", "solve_clarabel", "solve_ipm"),
}
"""Submodule -> the names this package exports from it."""

_SOURCE = {name: module for module, names in _EXPORTS.items() for name in names}
"""Exported name -> its submodule (the names of ``__all__``)."""

__all__ = [
    "REGISTRY",
    "SCNN",
    "SEARCH_SPACES",
    "SOLVERS",
    "Categorical",
    "GaussianProcessBaseline",
    "GradientBoostingModel",
    "InaccurateSolutionWarning",
    "InfeasibleConstraintsError",
    "InsufficientDataError",
    "IntUniform",
    "InvalidInputError",
    "IpmOptions",
    "LinearSVRBaseline",
    "LogUniform",
    "ModelEntry",
    "OutOfSampleBound",
    "PhysicalLimits",
    "ReluNetwork",
    "ScnnProgram",
    "ScnnSolution",
    "ScnnSolver",
    "SolverError",
    "SolverNotAvailableError",
    "StabilityCertificate",
    "UnknownModelError",
    "WaDiRoLinearRegression",
    "WaDiRoSCNN",
    "WadiroModelError",
    "certify_stability",
    "get_solver",
    "make_model",
    "max_constraint_violation",
    "objective_value",
    "physical_limits",
    "predictions",
    "solve_clarabel",
    "solve_ipm",
]


def __getattr__(name: str) -> Any:
    module = _SOURCE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
