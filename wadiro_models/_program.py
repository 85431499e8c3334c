"""The WaDiRo-SCNN training program as plain data, and the result a solver returns.

Kept apart from the estimators (scikit-learn side) and from the solvers (cvxpy + Clarabel
reference path, structure-exploiting interior point) so that a solver can be swapped without
touching the estimators. Everything is expressed in *program units*: if the estimator
standardises X and y, the program holds the standardised data and the bounds converted exactly.

The program (paper, Proposition 1 with biases), with X the N x (d+1) data already augmented by a
column of ones and D the N x P activation patterns::

    minimise    radius * ||beta||_*  +  (1/N) * sum_j |y_hat_j - y_j|
    y_hat_j   = sum_i D_ji * x_j^T (nu_i - omega_i) + b
    beta      = (vec nu, vec(-omega), b, -1)      (b omitted when fit_intercept is False)
    s.t.        (2 D_i - 1) * (X nu_i)    >= 0     for every gate i
                (2 D_i - 1) * (X omega_i) >= 0
                lower_j <= y_hat_j <= upper_j       (physical bounds, optional)
                |y_hat_j - y_hat_{j-1}| <= ramp_j   (ramp limits, optional)

``||.||_*`` is the dual of the Wasserstein ground norm: l_inf for ``"l1"`` (an LP), l2 for
``"l2"`` (an SOCP).

The plain and regularised convex networks of the paper's comparisons are the same program
with ``radius = 0`` plus an optional penalty ``lambda_reg * r(vec nu, vec omega)`` added to the
objective (``r`` = l1 norm for ``"lasso"``, squared l2 norm for ``"ridge"``; b is not
penalised). Solvers that do not implement the penalty must refuse such a program.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Protocol

import numpy as np

Wasserstein = Literal["l1", "l2"]
Regularizer = Literal["lasso", "ridge"]


@dataclass(frozen=True)
class ScnnProgram:
    """One instance of the training program, in program units.

    Attributes
    ----------
    X : (N, d+1) features, the last column all ones (the hidden-layer bias).
    y : (N,) labels.
    patterns : (N, P) boolean activation patterns D, duplicate and all-zero columns removed.
    radius : Wasserstein ball radius (>= 0).
    wasserstein : ground norm of the Wasserstein metric, ``"l1"`` or ``"l2"``.
    fit_intercept : whether the output bias b is a variable (else fixed at 0 and not in beta).
    lower, upper : (N,) bounds on y_hat, ``-inf`` / ``+inf`` where absent; ``None`` if none at all.
    ramp : (N-1,) limits on |y_hat_j - y_hat_{j-1}|, ``inf`` where absent; ``None`` if none.
    regularizer : optional penalty on (vec nu, vec omega): ``"lasso"`` or ``"ridge"``.
    lambda_reg : weight of that penalty (ignored when ``regularizer`` is ``None``).
    """

    X: np.ndarray
    y: np.ndarray
    patterns: np.ndarray
    radius: float
    wasserstein: Wasserstein = "l1"
    fit_intercept: bool = True
    lower: np.ndarray | None = None
    upper: np.ndarray | None = None
    ramp: np.ndarray | None = None
    regularizer: Regularizer | None = None
    lambda_reg: float = 0.0

    @property
    def n_samples(self) -> int:
        return int(self.X.shape[0])

    @property
    def n_gates(self) -> int:
        return int(self.patterns.shape[1])

    @property
    def n_features(self) -> int:
        """Columns of X, the bias column included (d + 1)."""
        return int(self.X.shape[1])

    @property
    def has_penalty(self) -> bool:
        return self.regularizer is not None and self.lambda_reg > 0

    @property
    def has_physical_constraints(self) -> bool:
        return self.lower is not None or self.upper is not None or self.ramp is not None


@dataclass
class ScnnSolution:
    """What a solver returns: the weights, the optimal value and how trustworthy it is.

    ``status`` is one of ``"optimal"``, ``"optimal_inaccurate"``, ``"infeasible"``,
    ``"unbounded"``, ``"failed"``; ``solver`` names the path that produced the weights
    (e.g. ``"clarabel"``, ``"ipm"``, or ``"ipm->clarabel"`` after a fallback).
    Residuals are relative (scaled) and ``None`` where the solver does not report them.
    """

    nu: np.ndarray
    omega: np.ndarray
    b: float
    objective: float
    status: str
    solver: str
    solve_time: float
    iterations: int | None = None
    primal_residual: float | None = None
    dual_residual: float | None = None
    duality_gap: float | None = None
    info: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status == "optimal"


class ScnnSolver(Protocol):
    """A callable that solves a :class:`ScnnProgram`.

    ``warm_start`` is an earlier solution of a program with the same data (e.g. another TPE
    trial of the same window); solvers that cannot use it ignore it.
    """

    def __call__(
        self, program: ScnnProgram, *, warm_start: ScnnSolution | None = None
    ) -> ScnnSolution: ...


def predictions(program: ScnnProgram, nu: np.ndarray, omega: np.ndarray, b: float) -> np.ndarray:
    """y_hat = sum_i D_i X (nu_i - omega_i) + b, vectorised."""
    return np.einsum("np,np->n", program.patterns, program.X @ (nu - omega).T) + b


def objective_value(program: ScnnProgram, nu: np.ndarray, omega: np.ndarray, b: float) -> float:
    """The program's objective evaluated at a point (independent of any solver)."""
    parts = [nu.ravel(), -omega.ravel()]
    if program.fit_intercept:
        parts.append(np.array([b]))
    parts.append(np.array([-1.0]))
    beta = np.concatenate(parts)
    dual = np.max(np.abs(beta)) if program.wasserstein == "l1" else np.linalg.norm(beta)
    residual = predictions(program, nu, omega, b) - program.y
    value = program.radius * dual + np.mean(np.abs(residual))
    if program.has_penalty:
        weights = np.concatenate([nu.ravel(), omega.ravel()])
        if program.regularizer == "lasso":
            penalty = np.sum(np.abs(weights))
        else:
            penalty = np.sum(weights**2)
        value += program.lambda_reg * penalty
    return float(value)


def max_constraint_violation(program: ScnnProgram, nu: np.ndarray, omega: np.ndarray,
                             b: float) -> float:
    """Largest violation of any constraint of the program at a point (0 when feasible)."""
    sign = 2.0 * program.patterns - 1.0
    worst = [0.0, -np.min(sign * (program.X @ nu.T)), -np.min(sign * (program.X @ omega.T))]
    y_hat = predictions(program, nu, omega, b)
    if program.lower is not None:
        worst.append(np.max(program.lower - y_hat))
    if program.upper is not None:
        worst.append(np.max(y_hat - program.upper))
    if program.ramp is not None and program.n_samples > 1:
        worst.append(np.max(np.abs(np.diff(y_hat)) - program.ramp))
    return float(max(worst))
