"""Solver registry: a name -> a callable that solves a :class:`ScnnProgram`.

Solvers are imported lazily, so a missing optional module only fails when it is asked for.
A registered solver solves every :class:`ScnnProgram` (penalty, bounds, ramps and bound points
included), if need be by handing it to the reference path as ``"ipm"`` does.
"""

from __future__ import annotations

import functools
import importlib
from dataclasses import dataclass

from .._program import ScnnSolver
from ..exceptions import SolverNotAvailableError


@dataclass(frozen=True)
class SolverEntry:
    """Where a solver lives (``"module:attribute"``)."""

    target: str


SOLVERS: dict[str, SolverEntry] = {
    "clarabel": SolverEntry("wadiro_models.solvers._clarabel:solve_clarabel"),
    # the fast path hands penalised and radius-0 programs to the reference path itself
    "ipm": SolverEntry("wadiro_models.solvers.ipm:solve_ipm"),
}


def _entry(name: str) -> SolverEntry:
    try:
        return SOLVERS[name]
    except KeyError:
        known = ", ".join(sorted(SOLVERS))
        raise SolverNotAvailableError(f"unknown solver {name!r}; known solvers: {known}") from None


def get_solver(name: str) -> ScnnSolver:
    """The solver registered under ``name``, imported on first use."""
    module_name, attribute = _entry(name).target.split(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise SolverNotAvailableError(
            f"solver {name!r} is registered but its module {module_name!r} cannot be "
            f"imported: {exc}"
        ) from exc
    try:
        return getattr(module, attribute)
    except AttributeError:
        raise SolverNotAvailableError(
            f"solver {name!r}: module {module_name!r} has no attribute {attribute!r}"
        ) from None


def configured_solver(name: str, options: dict | None = None) -> ScnnSolver:
    """``get_solver(name)`` with ``options`` bound as keyword arguments (solver settings)."""
    solver = get_solver(name)
    return functools.partial(solver, **options) if options else solver
