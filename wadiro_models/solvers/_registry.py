"""Solver registry: a name -> a callable that solves a :class:`ScnnProgram`.

Solvers are imported lazily, so a missing optional module only fails when it is asked for.
Each entry also states which optional program features it implements; a program that needs
one it lacks is refused up front instead of being solved wrongly.
"""

from __future__ import annotations

import functools
import importlib
from dataclasses import dataclass

from .._program import ScnnProgram, ScnnSolver
from ..exceptions import SolverNotAvailableError


@dataclass(frozen=True)
class SolverEntry:
    """Where a solver lives (``"module:attribute"``) and the optional features it supports."""

    target: str
    supports_penalty: bool = False


SOLVERS: dict[str, SolverEntry] = {
    "clarabel": SolverEntry(
        "wadiro_models.solvers._clarabel:solve_clarabel", supports_penalty=True
    ),
    # the fast path hands penalised programs to the reference path itself
    "ipm": SolverEntry("wadiro_models.solvers.ipm:solve_ipm", supports_penalty=True),
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


def check_supports(name: str, program: ScnnProgram) -> None:
    """Raise if solver ``name`` does not implement a feature ``program`` uses."""
    if program.has_penalty and not _entry(name).supports_penalty:
        capable = sorted(n for n, e in SOLVERS.items() if e.supports_penalty)
        raise SolverNotAvailableError(
            f"solver {name!r} does not implement the {program.regularizer!r} penalty; "
            f"use one of {capable}"
        )


def configured_solver(name: str, options: dict | None = None) -> ScnnSolver:
    """``get_solver(name)`` with ``options`` bound as keyword arguments (solver settings)."""
    solver = get_solver(name)
    return functools.partial(solver, **options) if options else solver
