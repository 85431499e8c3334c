"""One status check for every convex estimator: a solver's answer becomes a fit, a warning or
a typed error.

Every solver path reports its outcome in one vocabulary:

``"optimal"``
    Solved to the solver's tolerances.
``"optimal_inaccurate"``
    Stopped at reduced accuracy; kept only with ``accept_inaccurate=True``.
``"infeasible"``
    No point satisfies the constraints.
``"unbounded"``
    The objective is unbounded below.
``"failed"``
    The solver crashed, hit a limit or returned no point.
"""

from __future__ import annotations

import warnings
from typing import Protocol

from .exceptions import InaccurateSolutionWarning, InfeasibleConstraintsError, SolverError


class SolverOutcome(Protocol):
    """What :func:`check_solution` reads from a solver's answer."""

    status: str
    solver: str
    info: dict

    @property
    def finite(self) -> bool:
        """Whether every returned weight is finite."""
        ...


def check_solution(
    solution: SolverOutcome, *, accept_inaccurate: bool, constrained: bool
) -> None:
    """Raise unless ``solution`` may become a fitted model; warn when it is kept inexactly.

    ``constrained`` says whether the program has physical constraints, which turns an
    infeasible status into :class:`InfeasibleConstraintsError`. Call it from an estimator's
    ``_fit`` (:class:`~wadiro_models._validation.Regressor`): the warning then points at the
    caller of ``fit``.
    """
    status = solution.status
    if status == "infeasible" and constrained:
        raise InfeasibleConstraintsError(
            f"solver {solution.solver!r}: no model satisfies the physical constraints "
            "(lower_bound/upper_bound/ramp on the training samples, bound_lower/bound_upper "
            "at the bound points)"
        )
    if status == "optimal_inaccurate" and accept_inaccurate:
        warnings.warn(
            f"solver {solution.solver!r} stopped at reduced accuracy "
            "(optimal_inaccurate); accepted because accept_inaccurate=True",
            InaccurateSolutionWarning,
            # check_solution <- _fit <- _timed_fit <- fit <- _fit_context's wrapper <- caller
            stacklevel=6,
        )
    elif status != "optimal":
        detail = solution.info.get("error", "")
        raise SolverError(
            f"solver {solution.solver!r} returned status {status!r}"
            + (f": {detail}" if detail else "")
            + (
                "; pass accept_inaccurate=True to keep such fits"
                if status == "optimal_inaccurate"
                else ""
            ),
            status=status,
        )
    if not solution.finite:
        raise SolverError(
            f"solver {solution.solver!r} reported {status!r} but returned non-finite weights",
            status="failed",
        )
