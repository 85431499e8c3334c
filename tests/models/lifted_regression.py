"""Lemma 1's lifted linear regression, built independently of the library's solver.

Each sample becomes z_j = (vec(x_j d_j^T), vec(x_j d_j^T), 1, y_j) and the network is one
weight vector beta = (vec nu, vec(-omega), b) (the fixed -1 is added in the dual norm).
The l1 variant is solved as an explicit LP with SciPy's HiGHS, the l2 variant with cvxpy.
"""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import scipy.sparse as sp
from scipy.optimize import linprog

TIGHT = {"tol_gap_abs": 1e-10, "tol_gap_rel": 1e-10, "tol_feas": 1e-10}


def lifted_samples(X_aug: np.ndarray, D: np.ndarray) -> np.ndarray:
    """Rows (vec(x_j d_j^T), vec(x_j d_j^T), 1): column-major vec stacks d_ji * x_j per gate."""
    n = X_aug.shape[0]
    half = np.vstack([np.kron(D[j], X_aug[j]) for j in range(n)])
    return np.hstack([half, half, np.ones((n, 1))])


def cone_matrix(X_aug: np.ndarray, D: np.ndarray) -> sp.csr_matrix:
    """Block-diagonal A with A @ vec(nu) >= 0 <=> (2D_i - 1) X nu_i >= 0 for every gate i."""
    blocks = [sp.csr_matrix((2.0 * D[:, i] - 1.0)[:, None] * X_aug) for i in range(D.shape[1])]
    return sp.block_diag(blocks, format="csr")


def solve_lifted_l1_lp(X_aug, y, D, radius, lower=None, upper=None, ramp=None) -> float:
    """min radius*a + mean(c): -a <= beta_k <= a, a >= 1, |Z beta - y| <= c, cones, limits."""
    n = X_aug.shape[0]
    Z = lifted_samples(X_aug, D)
    k = Z.shape[1]  # 2*P*p + 1
    half = (k - 1) // 2
    A = cone_matrix(X_aug, D)
    # variable order: beta (k), a (1), c (n)
    cost = np.concatenate([np.zeros(k), [radius], np.full(n, 1.0 / n)])
    eye_k = sp.eye(k)
    col_a = sp.csr_matrix(np.ones((k, 1)))
    rows = [
        sp.hstack([eye_k, -col_a, sp.csr_matrix((k, n))]),  # beta - a <= 0
        sp.hstack([-eye_k, -col_a, sp.csr_matrix((k, n))]),  # -beta - a <= 0
        sp.hstack([sp.csr_matrix(Z), sp.csr_matrix((n, 1)), -sp.eye(n)]),  # Z beta - c <= y
        sp.hstack([sp.csr_matrix(-Z), sp.csr_matrix((n, 1)), -sp.eye(n)]),  # -Z beta - c <= -y
        # nu cones: -A beta_nu <= 0 ; omega stored as -omega: A beta_om <= 0
        sp.hstack([-A, sp.csr_matrix((A.shape[0], half + 1 + 1 + n))]),
        sp.hstack([sp.csr_matrix((A.shape[0], half)), A, sp.csr_matrix((A.shape[0], 2 + n))]),
    ]
    rhs = [np.zeros(k), np.zeros(k), y, -y, np.zeros(A.shape[0]), np.zeros(A.shape[0])]
    pad = sp.csr_matrix((n, 1 + n))
    if lower is not None:
        keep = np.isfinite(lower)
        rows.append(sp.hstack([sp.csr_matrix(-Z[keep]), pad[keep]]))
        rhs.append(-lower[keep])
    if upper is not None:
        keep = np.isfinite(upper)
        rows.append(sp.hstack([sp.csr_matrix(Z[keep]), pad[keep]]))
        rhs.append(upper[keep])
    if ramp is not None:
        step = sp.csr_matrix(Z[1:] - Z[:-1])
        rows += [sp.hstack([step, pad[1:]]), sp.hstack([-step, pad[1:]])]
        rhs += [ramp, ramp]
    bounds = [(None, None)] * k + [(1.0, None)] + [(0.0, None)] * n
    res = linprog(
        cost,
        A_ub=sp.vstack(rows, format="csr"),
        b_ub=np.concatenate(rhs),
        bounds=bounds,
        method="highs",
        options={"primal_feasibility_tolerance": 1e-10, "dual_feasibility_tolerance": 1e-10},
    )
    assert res.status == 0, res.message
    return float(res.fun)


def solve_lifted_cvxpy(
    X_aug, y, D, radius, wasserstein, lower=None, upper=None, regularizer=None, lambda_reg=0.0
) -> float:
    """The same lifted regression as an SOCP (or LP) in cvxpy, solved tightly by Clarabel.

    ``regularizer`` adds the paper's lasso (l1) or ridge (squared l2) penalty on
    (vec nu, vec(-omega)), i.e. on beta without b.
    """
    n = X_aug.shape[0]
    Z = lifted_samples(X_aug, D)
    k = Z.shape[1]
    half = (k - 1) // 2
    A = cone_matrix(X_aug, D)
    beta = cp.Variable(k)
    full = cp.hstack([beta, -np.ones(1)])
    dual = cp.norm(full, "inf") if wasserstein == "l1" else cp.norm(full, 2)
    y_hat = Z @ beta
    constraints = [A @ beta[:half] >= 0, A @ beta[half : 2 * half] <= 0]
    if lower is not None:
        constraints.append(y_hat >= lower)
    if upper is not None:
        constraints.append(y_hat <= upper)
    objective = cp.sum(cp.abs(y_hat - y)) / n
    if radius > 0:
        objective = objective + radius * dual
    if regularizer == "lasso":
        objective = objective + lambda_reg * cp.norm(beta[: 2 * half], 1)
    elif regularizer == "ridge":
        objective = objective + lambda_reg * cp.sum_squares(beta[: 2 * half])
    problem = cp.Problem(cp.Minimize(objective), constraints)
    problem.solve(solver=cp.CLARABEL, **TIGHT)
    assert problem.status == cp.OPTIMAL, problem.status
    return float(problem.value)
