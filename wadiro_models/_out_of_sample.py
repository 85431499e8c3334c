"""Out-of-sample guarantees of a fitted convex network (paper, Section 4, Propositions 3 and 4).

Notation of :mod:`wadiro_models._program` (program units: standardised X and y, X with its bias
column). With the output bias, a fit's weights and its samples are::

    beta    = (vec nu, vec(-omega), b, -1)              (b left out without an intercept)
    z       = (x, 1, y)                                 an original sample, x = (x_std, 1)
    z_hat   = (vec(x d^T), vec(x d^T), 1, y)            the modified sample, d = 1[x^T S >= 0]

so that |beta^T z_hat| = |y_hat - y| (Lemma 1). ``||.||`` is the Wasserstein ground norm (l1 or
l2) and ``||.||_*`` its dual (l_inf or l2). With N training samples, B_* >= ||beta||_*,
R_hat >= ||z_hat|| and R >= ||z|| on the support of the data, and delta in (0, 1), with
probability at least 1 - delta over the sample::

    Prop. 3 (modified samples):  E|beta^T z_hat| <= L_N + 2 B_* R_hat / sqrt(N)
                                                    + B_* R_hat sqrt(8 ln(2 / delta) / N)
    Prop. 4 (original samples):  E|beta^T z_hat| <= L_N + 2 psi / sqrt(N)
                                                    + B_* R_hat sqrt(8 ln(2 / delta) / N)

with L_N = (1/N) sum_j |beta^T z_hat_j| the training error and psi = B_* 2 P R (l1) or
B_* sqrt(2 P) R (l2), P the number of gates. Both bound the expected absolute error in program
units (multiply by the scale of y for its units). The paper's z has no entry for the output
bias; here it has one (the constant 1), which keeps its step ||z_hat|| <= 2 P ||z|| (l1) and
||z_hat||_2 <= sqrt(2 P) ||z||_2 true when the bias is fitted.

The bounds on the data are a box in the units of the features and of y, by default the
training data's range (``feature_min_`` ... ``target_max_``); a guarantee about new data needs
bounds that hold for new data, so pass them when they are known. Then:

* R = max ||z|| over the box (exact: each coordinate at its largest magnitude);
* R_hat = max ||z_hat|| over the box, bounded as (2 n S_1 + 1 + T) for l1 and
  sqrt(2 n S_2^2 + 1 + T^2) for l2, where S_p = max ||x||_p, T = max |y| and n is the largest
  number of gates active together somewhere in the box (a small MILP; n <= P, so R_hat <= psi /
  B_*);
* B_* = ||beta||_* of the fitted weights, as the paper takes it. Strictly, the Rademacher
  bound holds for a class fixed before seeing the data; pass ``weight_bound`` chosen in advance
  (any value >= ||beta||_*) for the textbook statement.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp
from sklearn.utils.validation import check_is_fitted

from ._program import beta_dual_norm
from .exceptions import InvalidInputError


@dataclass(frozen=True)
class OutOfSampleBound:
    """Both propositions' bounds for one fit, every term kept (program units unless noted).

    Attributes
    ----------
    delta : float
        The bounds hold with probability at least 1 - delta over the training sample.
    norm : {"l1", "l2"}
        The Wasserstein ground norm on samples (its dual norm measures the weights).
    n_samples : int
        N, the training samples.
    n_gates : int
        P, the kept gates.
    training_loss : float
        L_N, the mean absolute training error.
    weight_bound : float
        B_* (>= ||beta||_*).
    sample_bound : float
        R (>= ||z|| on the data's box).
    modified_sample_bound : float
        R_hat (>= ||z_hat|| on the data's box).
    max_active_gates : int
        n, the most gates active together in the box (used for R_hat).
    psi : float
        The bound on any sample's loss used in Proposition 4.
    y_scale : float
        The scale of y: multiply a bound by it for the units of y.
    """

    delta: float
    norm: str
    n_samples: int
    n_gates: int
    training_loss: float
    weight_bound: float
    sample_bound: float
    modified_sample_bound: float
    max_active_gates: int
    psi: float
    y_scale: float

    @property
    def confidence_term(self) -> float:
        """B_* R_hat sqrt(8 ln(2 / delta) / N), shared by both propositions."""
        return (self.weight_bound * self.modified_sample_bound
                * math.sqrt(8 * math.log(2 / self.delta) / self.n_samples))

    @property
    def modified(self) -> float:
        """Proposition 3: the bound on E|beta^T z_hat| under the modified-sample assumption."""
        complexity = 2 * self.weight_bound * self.modified_sample_bound / math.sqrt(self.n_samples)
        return self.training_loss + complexity + self.confidence_term

    @property
    def original(self) -> float:
        """Proposition 4: the bound from the original samples' bound R."""
        return self.training_loss + 2 * self.psi / math.sqrt(self.n_samples) + self.confidence_term

    @property
    def bound(self) -> float:
        """The tighter of the two, in program units."""
        return min(self.modified, self.original)

    @property
    def bound_y(self) -> float:
        """:attr:`bound` in the units of y (a mean absolute error)."""
        return self.bound * self.y_scale

    def exceedance_probability(self, zeta: float) -> float:
        """Proposition 3's tail bound: P(|beta^T z_hat| >= L_N + zeta), for zeta above the
        bound's excess over L_N (1 otherwise)."""
        excess = self.modified - self.training_loss
        if zeta <= excess:
            return 1.0
        return min(1.0, self.modified / (self.training_loss + zeta))


def max_active_gates(gates: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> int:
    """The most columns of ``gates`` ((d + 1, P), on (x, 1)) with x^T s_i >= 0 at one x in
    the box [lower, upper] (program units): max sum gamma s.t. gamma_i = 1 => x^T s_i >= 0."""
    d = gates.shape[0] - 1
    S, s0 = gates[:-1], gates[-1]
    lo_g = s0 + np.minimum(S * lower[:, None], S * upper[:, None]).sum(axis=0)
    hi_g = s0 + np.maximum(S * lower[:, None], S * upper[:, None]).sum(axis=0)
    always, never = lo_g >= 0, hi_g < 0
    free = np.flatnonzero(~always & ~never)
    if free.size == 0:
        return int(always.sum())
    # variables: x (d), gamma (free); x^T s_i + s0_i >= lo_g_i (1 - gamma_i)
    n = d + free.size
    A = np.zeros((free.size, n))
    A[:, :d] = S[:, free].T
    A[np.arange(free.size), d + np.arange(free.size)] = lo_g[free]
    c = np.zeros(n)
    c[d:] = -1.0
    integrality = np.r_[np.zeros(d), np.ones(free.size)]
    result = milp(c, integrality=integrality,
                  bounds=Bounds(np.r_[lower, np.zeros(free.size)],
                                np.r_[upper, np.ones(free.size)]),
                  constraints=[LinearConstraint(A, lo_g[free] - s0[free], np.inf)],
                  options={"disp": False})
    if result.status != 0:
        return int(always.sum() + free.size)  # no answer: every gate may be active
    # the solver's bound, rounded up, stays an upper bound if the search was inexact
    return int(always.sum() + math.ceil(-result.mip_dual_bound - 1e-6))


def out_of_sample_bound(
    model,
    delta: float = 0.05,
    *,
    norm: str | None = None,
    feature_bounds: tuple | None = None,
    target_bounds: tuple | None = None,
    weight_bound: float | None = None,
) -> OutOfSampleBound:
    """The paper's bounds on the expected out-of-sample error (Propositions 3 and 4) of a
    fitted WaDiRoSCNN or SCNN (its method ``out_of_sample_bound``).

    See the module docstring for the statement and every term.

    Parameters
    ----------
    delta : float, default=0.05
        The bounds hold with probability at least ``1 - delta`` over the training sample.
    norm : {"l1", "l2"}, default=None
        Ground norm of the samples (its dual measures the weights); default: the
        estimator's ``wasserstein`` norm, ``"l1"`` for :class:`SCNN`.
    feature_bounds : pair of array-like of shape (n_features,), default=None
        Per-feature lower and upper bounds of the data, in the features' units;
        default: the training range (``feature_min_``, ``feature_max_``).
    target_bounds : pair of float, default=None
        Lower and upper bounds of y; default: the training range.
    weight_bound : float, default=None
        B_*, at least the fitted weights' dual norm (the default).

    Returns
    -------
    bound : OutOfSampleBound
        ``modified`` (Prop. 3) and ``original`` (Prop. 4) in program units (standardised
        y), ``bound_y`` in the units of y, and every term.
    """
    check_is_fitted(model)
    if not 0 < delta < 1:
        raise InvalidInputError(f"delta must be in (0, 1), got {delta}")
    norm = norm or getattr(model, "wasserstein", "l1")
    if norm not in ("l1", "l2"):
        raise InvalidInputError(f"norm must be 'l1' or 'l2', not {norm!r}")
    scaling = model.standardization_
    if feature_bounds is None:
        feature_bounds = (model.feature_min_, model.feature_max_)
    if target_bounds is None:
        target_bounds = (model.target_min_, model.target_max_)
    x_lo, x_hi = (np.broadcast_to(np.asarray(b, float), model.feature_min_.shape)
                  for b in feature_bounds)
    y_lo, y_hi = (float(b) for b in target_bounds)
    if (x_hi < x_lo).any() or y_hi < y_lo:
        raise InvalidInputError("every upper bound must be >= its lower bound")
    # program units
    zx_lo, zx_hi = scaling.transform_X(x_lo), scaling.transform_X(x_hi)
    x_mag = np.r_[np.maximum(np.abs(zx_lo), np.abs(zx_hi)), 1.0]  # x = (x_std, 1)
    y_mag = max(abs(scaling.level(y_lo)), abs(scaling.level(y_hi)))
    bias = [1.0] if model.fit_intercept else []
    order = 1 if norm == "l1" else 2
    R = float(np.linalg.norm(np.r_[x_mag, bias, y_mag], ord=order))
    n_active = max_active_gates(model.gates_, zx_lo, zx_hi)
    P = int(model.n_gates_)
    if norm == "l1":
        R_hat = 2 * n_active * float(x_mag.sum()) + len(bias) + y_mag
    else:
        R_hat = math.sqrt(2 * n_active * float(np.sum(x_mag**2)) + len(bias) + y_mag**2)
    dual = float(beta_dual_norm(
        model.nu_, model.omega_, model.intercept_, model.fit_intercept, norm))
    if weight_bound is None:
        weight_bound = dual
    elif weight_bound < dual:
        raise InvalidInputError(
            f"weight_bound {weight_bound} is below the fitted weights' dual norm {dual}")
    psi = weight_bound * (2 * P * R if norm == "l1" else math.sqrt(2 * P) * R)
    return OutOfSampleBound(
        delta=float(delta), norm=norm, n_samples=int(model.n_samples_fit_), n_gates=P,
        training_loss=float(model.training_loss_), weight_bound=float(weight_bound),
        sample_bound=R, modified_sample_bound=float(R_hat), max_active_gates=n_active,
        psi=float(psi), y_scale=float(scaling.y_scale),
    )
