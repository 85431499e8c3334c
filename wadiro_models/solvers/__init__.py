"""Solvers of the training program and the registry that names them.

``"clarabel"`` is the reference path (the program written in cvxpy, solved by Clarabel);
``"ipm"`` is the structure-exploiting interior-point method of :mod:`.ipm`, which hands what
it cannot solve accurately to the reference path. An estimator picks one by name
(``solver=``) and passes ``solver_options`` through :func:`configured_solver`.
"""

from ._clarabel import FORMULATIONS, solve_clarabel
from ._registry import SOLVERS, SolverEntry, configured_solver, get_solver
from .ipm import IpmOptions, solve_ipm

__all__ = [
    "FORMULATIONS",
    "SOLVERS",
    "IpmOptions",
    "SolverEntry",
    "configured_solver",
    "get_solver",
    "solve_clarabel",
    "solve_ipm",
]
