"""The training program, stated once for the whole library, and the result a solver returns.

Every other module (estimators, the cvxpy reference path, the interior-point method) uses this
notation and refers here instead of restating the program.

Notation::

    N, d       samples, features
    X          (N, d + 1) data in program units, the last column all ones (the hidden bias);
               estimator code calls it X_aug because there X is the raw (N, d) input
    P          kept gates, i.e. distinct, not all-zero activation patterns
    D          (N, P) activation patterns, D_ji = 1[x_j^T s_i >= 0]; D_i is its column i
    nu, omega  (P, d + 1) convex weights; row i holds the two neurons of gate i
    b          output bias (fixed at 0, and left out of beta, when fit_intercept is False)
    X_hat      (N, P (d + 1)) lifted features [D_1 * X, ..., D_P * X] (paper, Lemma 1):
               X_hat[j, i (d + 1) + k] = D_ji X_jk
    y_hat      = sum_i D_i * (X (nu_i - omega_i)) + b = X_hat vec(nu - omega) + b
               (vec is row-major: gate by gate)
    beta       = (vec nu, vec(-omega), b, -1)
    radius     radius of the Wasserstein ball (the paper's epsilon), >= 0
    ||.||_*    dual of the Wasserstein ground norm: l_inf for ``"l1"``, l2 for ``"l2"``
    M          bound points: inputs that are not training samples (e.g. the week to forecast)
    X_B, D_B   (M, d + 1) their data in program units (last column all ones) and (M, P) their
               activation patterns under the same gates, D_B[k, i] = 1[x_k^T s_i >= 0]
    y_hat_B    = sum_i D_B,i * (X_B (nu_i - omega_i)) + b, the network's output there

In code, ``n_gates``/``P`` count gates and ``n_cols``/``d1`` count the columns of X (d + 1).

The program (paper, Proposition 1 with the biases of its closing remark, plus the physical
constraints of Section 5), in program units::

    minimise    radius * ||beta||_*  +  (1/N) sum_j |y_hat_j - y_j|
    s.t.        (2 D_i - 1) * (X nu_i)    >= 0      for every gate i (elementwise)
                (2 D_i - 1) * (X omega_i) >= 0
                lower_j <= y_hat_j <= upper_j        physical bounds, where given
                |y_hat_j - y_hat_{j-1}| <= ramp_j    ramp limits, where given
                lower_B,k <= y_hat_B,k <= upper_B,k  bounds at the bound points, where given

The bound points add only those bound rows: no residual (they are not samples, so they are
not in the objective) and no gate-cone rows (the cones stay on the training samples, as in
Lemma 1). y_hat_B,k is exactly what ``predict`` returns at x_k, so a fitted network honours
the bounds there, whatever the signs of x_k^T nu_i and x_k^T omega_i.

With the l1 ground norm it is an LP, with l2 an SOCP. Both dual norms ignore the signs of
the entries, so solvers may bound (vec nu, vec omega, b, 1) instead of beta.

The plain and regularised convex networks of the paper's comparisons are the same program
with ``radius = 0`` plus an optional penalty ``lambda_reg * r(vec nu, vec omega)`` added to the
objective (``r`` = l1 norm for ``"lasso"``, squared l2 norm for ``"ridge"``; b is not
penalised). Solvers that do not implement the penalty must refuse such a program.

"Program units": if an estimator standardises X and y, the program holds the standardised data
and the bounds converted exactly (see :mod:`wadiro_models._scaling`). A solver works on a
:class:`ScnnProgram` only, so it can be swapped without touching the estimators.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Protocol

import numpy as np

from .exceptions import InvalidInputError

Wasserstein = Literal["l1", "l2"]
Regularizer = Literal["lasso", "ridge"]


@dataclass(frozen=True)
class ScnnProgram:
    """One instance of the training program (module docstring), in program units.

    An estimator's ``build_program(X, y)`` returns the one its ``fit`` solves; construct one
    directly for a program of your own.

    Attributes
    ----------
    X : ndarray of shape (N, d + 1)
        Data, the last column all ones.
    y : ndarray of shape (N,)
        Labels.
    patterns : ndarray of shape (N, P), dtype bool
        Activation patterns D, duplicate and all-zero columns removed.
    radius : float
        Radius of the Wasserstein ball (>= 0).
    wasserstein : {"l1", "l2"}, default="l1"
        Ground norm of the Wasserstein metric.
    fit_intercept : bool, default=True
        Whether the output bias b is a variable (else fixed at 0 and not in beta).
    lower, upper : ndarray of shape (N,) or None, default=None
        Bounds on y_hat, ``-inf`` / ``+inf`` where absent; ``None`` if there are none at all.
    ramp : ndarray of shape (N - 1,) or None, default=None
        Limits on ``|y_hat_j - y_hat_{j-1}|``, ``inf`` where absent; ``None`` if none.
    regularizer : {"lasso", "ridge"} or None, default=None
        Optional penalty on (vec nu, vec omega).
    lambda_reg : float, default=0.0
        Weight of that penalty (ignored when ``regularizer`` is None).
    bound_X : ndarray of shape (M, d + 1) or None, default=None
        Bound points X_B, the last column all ones; ``None`` if there are none.
    bound_patterns : ndarray of shape (M, P), dtype bool, or None, default=None
        Their activation patterns D_B under the gates of ``patterns``.
    bound_lower, bound_upper : ndarray of shape (M,) or None, default=None
        Bounds on y_hat_B, ``-inf`` / ``+inf`` where absent; ``None`` if there are none.
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
    bound_X: np.ndarray | None = None
    bound_patterns: np.ndarray | None = None
    bound_lower: np.ndarray | None = None
    bound_upper: np.ndarray | None = None

    def __post_init__(self) -> None:
        if self.bound_X is None and self.bound_patterns is None:
            if self.bound_lower is not None or self.bound_upper is not None:
                raise InvalidInputError("bound_lower/bound_upper given without bound points")
            return
        if self.bound_X is None or self.bound_patterns is None:
            raise InvalidInputError("bound_X and bound_patterns go together")
        M = self.bound_X.shape[0]
        if self.bound_X.shape != (M, self.n_cols):
            raise InvalidInputError(
                f"bound_X has shape {self.bound_X.shape}, expected (M, {self.n_cols})"
            )
        if self.bound_patterns.shape != (M, self.n_gates):
            raise InvalidInputError(
                f"bound_patterns has shape {self.bound_patterns.shape}, "
                f"expected ({M}, {self.n_gates})"
            )
        for name in ("bound_lower", "bound_upper"):
            values = getattr(self, name)
            if values is not None and np.shape(values) != (M,):
                raise InvalidInputError(
                    f"{name} has shape {np.shape(values)}, expected ({M},)"
                )

    @property
    def n_samples(self) -> int:
        return int(self.X.shape[0])

    @property
    def n_bound_points(self) -> int:
        """M, the bound points (0 when there are none)."""
        return 0 if self.bound_X is None else int(self.bound_X.shape[0])

    @property
    def n_gates(self) -> int:
        return int(self.patterns.shape[1])

    @property
    def n_cols(self) -> int:
        """Columns of X, the bias column included: d + 1."""
        return int(self.X.shape[1])

    @property
    def has_penalty(self) -> bool:
        return self.regularizer is not None and self.lambda_reg > 0

    @property
    def has_physical_constraints(self) -> bool:
        on_samples = self.lower is not None or self.upper is not None or self.ramp is not None
        return on_samples or self.has_bound_points

    @property
    def has_bound_points(self) -> bool:
        """Whether some bound point has a bound (finite or not)."""
        bounded = self.bound_lower is not None or self.bound_upper is not None
        return self.n_bound_points > 0 and bounded


@dataclass
class ScnnSolution:
    """What a solver returns: the weights, the optimal value and how trustworthy it is.

    ``status`` is one of the statuses of :mod:`wadiro_models._status`; ``solver`` names the
    path that produced the weights (e.g. ``"clarabel"``, ``"ipm"``, or ``"ipm->clarabel"``
    after a fallback). Residuals are relative (scaled) and ``None`` where the solver does not
    report them.
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

    @classmethod
    def without_point(cls, program: ScnnProgram, **outcome: object) -> ScnnSolution:
        """A solution of ``program`` that holds no point (NaN weights and objective), e.g. a
        failed solve's; ``outcome`` holds the other fields (status, solver, ...)."""
        nan = np.full((program.n_gates, program.n_cols), np.nan)
        return cls(nu=nan, omega=nan.copy(), b=float("nan"), objective=float("nan"), **outcome)

    @property
    def ok(self) -> bool:
        return self.status == "optimal"

    @property
    def finite(self) -> bool:
        """Whether nu, omega and b are all finite."""
        weights = np.isfinite(self.nu).all() and np.isfinite(self.omega).all()
        return bool(weights and np.isfinite(self.b))


class ScnnSolver(Protocol):
    """A callable that solves a :class:`ScnnProgram`.

    ``warm_start`` is an earlier solution of a program with the same data (e.g. another TPE
    trial of the same window); solvers that cannot use it ignore it.
    """

    def __call__(
        self, program: ScnnProgram, *, warm_start: ScnnSolution | None = None
    ) -> ScnnSolution: ...


def lifted_features(program: ScnnProgram) -> np.ndarray:
    """X_hat, shape (N, P (d + 1)): ``X_hat[j, i (d + 1) + k] = D_ji X_jk``."""
    return lifted_rows(program.X, program.patterns)


def lifted_rows(X: np.ndarray, patterns: np.ndarray) -> np.ndarray:
    """Lifted features ``[D_1 * X, ..., D_P * X]`` of some rows X, D their patterns (as X_hat)."""
    N, P, d1 = X.shape[0], patterns.shape[1], X.shape[1]
    return (patterns.astype(float)[:, :, None] * X[:, None, :]).reshape(N, P * d1)


def predictions(program: ScnnProgram, nu: np.ndarray, omega: np.ndarray, b: float) -> np.ndarray:
    """y_hat = sum_i D_i * (X (nu_i - omega_i)) + b, without forming X_hat."""
    return np.einsum("np,np->n", program.patterns, program.X @ (nu - omega).T) + b


def bound_predictions(
    program: ScnnProgram, nu: np.ndarray, omega: np.ndarray, b: float
) -> np.ndarray:
    """y_hat_B = sum_i D_B,i * (X_B (nu_i - omega_i)) + b at the bound points ((0,) if none)."""
    if program.bound_X is None:
        return np.zeros(0)
    gated = program.bound_X @ (nu - omega).T
    return np.einsum("mp,mp->m", program.bound_patterns, gated) + b


def beta_dual_norm(
    nu: np.ndarray, omega: np.ndarray, b: float, fit_intercept: bool, wasserstein: str
) -> np.floating:
    """||beta||_* of a point, beta = (vec nu, vec(-omega), b, -1) with b left out when
    ``fit_intercept`` is False (row-major vec): l_inf for ``"l1"``, l2 for ``"l2"``."""
    parts = [nu.ravel(), -omega.ravel()]
    if fit_intercept:
        parts.append(np.array([b]))
    parts.append(np.array([-1.0]))
    beta = np.concatenate(parts)
    return np.max(np.abs(beta)) if wasserstein == "l1" else np.linalg.norm(beta)


def objective_value(program: ScnnProgram, nu: np.ndarray, omega: np.ndarray, b: float) -> float:
    """The program's objective evaluated at a point (independent of any solver)."""
    dual = beta_dual_norm(nu, omega, b, program.fit_intercept, program.wasserstein)
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


def physical_violation(program: ScnnProgram, nu: np.ndarray, omega: np.ndarray,
                       b: float) -> float:
    """Largest violation of the program's physical constraints at a point: bounds, ramps and
    bound points, not the gate cones (0 when they hold or there are none)."""
    worst = [0.0]
    y_hat = predictions(program, nu, omega, b)
    if program.lower is not None:
        worst.append(np.max(program.lower - y_hat))
    if program.upper is not None:
        worst.append(np.max(y_hat - program.upper))
    if program.ramp is not None and program.n_samples > 1:
        worst.append(np.max(np.abs(np.diff(y_hat)) - program.ramp))
    if program.has_bound_points:
        y_hat_B = bound_predictions(program, nu, omega, b)
        if program.bound_lower is not None:
            worst.append(np.max(program.bound_lower - y_hat_B))
        if program.bound_upper is not None:
            worst.append(np.max(y_hat_B - program.bound_upper))
    return float(max(worst))


def max_constraint_violation(program: ScnnProgram, nu: np.ndarray, omega: np.ndarray,
                             b: float) -> float:
    """Largest violation of any constraint of the program at a point (0 when feasible)."""
    sign = 2.0 * program.patterns - 1.0
    cones = max(-np.min(sign * (program.X @ nu.T)), -np.min(sign * (program.X @ omega.T)))
    return float(max(0.0, cones, physical_violation(program, nu, omega, b)))
