"""Settings of the interior-point solver (the fields ``solve_ipm`` accepts as options)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class IpmOptions:
    """Tolerances, limits and knobs of the interior-point method.

    ``feastol`` bounds the relative primal and dual residuals and ``reltol`` the relative
    duality gap at which the iterations stop. The returned weights must then pass an
    independent check (else the caller falls back): residuals at most ``accept_residual``,
    relative gap between the program's objective at the weights and the dual bound at most
    ``accept_gap``, largest constraint violation at most ``accept_violation``; a run that
    stalls just short of ``feastol`` is accepted when it passes that check.

    ``method`` is ``"hsd"`` (homogeneous embedding), ``"infeasible"`` (infeasible start) or
    ``"auto"`` (the first for l1, the second for l2); ``max_iter`` bounds its iterations.
    Each step goes the fraction ``step`` of the way to the cone's boundary, with separate
    primal and dual lengths in the infeasible start when ``separate_steps``. ``correctors``
    Gondzio correctors look
    ``gondzio_a * alpha + gondzio_b`` ahead and push products into
    ``[1/gondzio_band, gondzio_band] * sigma mu``. Once the worst of the relative residuals
    and gap is below ``refine_below``, up to ``refine`` steps of iterative refinement run
    while they halve the residual, down to ``refine_tol`` (relative). With ``fallback``
    an unsupported program or an answer that fails the check is solved again on the
    reference path; ``verbose`` prints one line per iteration.
    """

    feastol: float = 1e-8
    reltol: float = 1e-9
    max_iter: int = 150
    method: str = "auto"
    step: float = 0.99
    separate_steps: bool = True
    correctors: int = 3
    gondzio_a: float = 2.0
    gondzio_b: float = 0.2
    gondzio_band: float = 10.0
    refine: int = 4
    refine_tol: float = 1e-13
    refine_below: float = 1e-4
    accept_gap: float = 1e-7
    accept_residual: float = 1e-7
    accept_violation: float = 1e-8
    fallback: bool = True
    verbose: bool = False
