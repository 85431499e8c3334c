"""Synthetic regression data with out-of-distribution outliers (paper, Sections 7 and 8.1).

* :data:`BENCHMARK_FUNCTIONS`: McCormick, Picheny-Goldstein-Price (PGP), Keane and Ackley,
  as the ``benchmark-functions`` package defines them, with its suggested bounds (one interval
  for every dimension): McCormick on [-3, 4]^2, PGP on [-2, 2]^2, Keane on [0, 10]^d, Ackley on
  [-32.768, 32.768]^d (d = 4 in the paper).
* :func:`sliced_wasserstein`: the Monte Carlo sliced Wasserstein distance of order t between
  two equally weighted samples of the same size.
* :func:`sliced_wasserstein_outliers`: the paper's generator. Outlier m is drawn until
  SW_t(P_N+1 u O_m-1, P_N u O_m-1 u {z}) >= phi, where P_N+1 adds a fresh clean sample: the
  candidate must move the empirical distribution at least phi further than a clean sample
  would. Candidates take features uniform on the domain and a label uniform on
  [-L k, L k], k growing by ``k_multiplier`` after each rejection (the published code's
  scheme).
* :func:`make_outlier_experiment`: a data set of the paper's corruption table (Experiments A,
  B and C): train/validation/test split 60/20/20, outliers added to the training set only (A)
  or spread at random over training and validation (B, C), Gaussian noise on the features and
  labels of training and validation, a clean test set.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import MappingProxyType

import numpy as np


def mccormick(X: np.ndarray) -> np.ndarray:
    x1, x2 = X[:, 0], X[:, 1]
    return np.sin(x1 + x2) + (x1 - x2) ** 2 - 1.5 * x1 + 2.5 * x2 + 1.0


def picheny_goldstein_price(X: np.ndarray) -> np.ndarray:
    x1, x2 = 4.0 * X[:, 0] - 2.0, 4.0 * X[:, 1] - 2.0
    a = 1.0 + (x1 + x2 + 1.0) ** 2 * (
        19.0 - 14.0 * x1 + 3.0 * x1**2 - 14.0 * x2 + 6.0 * x1 * x2 + 3.0 * x2**2)
    b = 30.0 + (2.0 * x1 - 3.0 * x2) ** 2 * (
        18.0 - 32.0 * x1 + 12.0 * x1**2 + 48.0 * x2 - 36.0 * x1 * x2 + 27.0 * x2**2)
    return (np.log(a * b) - 8.693) / 2.427


def keane(X: np.ndarray) -> np.ndarray:
    cos2 = np.cos(X) ** 2
    numerator = np.abs(np.sum(cos2**2, axis=1) - 2.0 * np.prod(cos2, axis=1))
    denominator = np.sqrt(np.sum(np.arange(1, X.shape[1] + 1) * X**2, axis=1))
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(denominator > 0, -numerator / denominator, 0.0)


def ackley(X: np.ndarray, a: float = 20.0, b: float = 0.2, c: float = 2 * np.pi) -> np.ndarray:
    d = X.shape[1]
    return (-a * np.exp(-b * np.sqrt(np.sum(X**2, axis=1) / d))
            - np.exp(np.sum(np.cos(c * X), axis=1) / d) + a + np.e)


@dataclass(frozen=True)
class BenchmarkFunction:
    """A benchmark function, its dimension and its domain [low, high]^dimension."""

    name: str
    function: Callable[[np.ndarray], np.ndarray]
    dimension: int
    low: float
    high: float

    def __call__(self, X: np.ndarray) -> np.ndarray:
        return self.function(np.atleast_2d(np.asarray(X, dtype=float)))

    def sample(self, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        X = rng.uniform(self.low, self.high, size=(n, self.dimension))
        return X, self(X)


BENCHMARK_FUNCTIONS = MappingProxyType({
    "McCormick": BenchmarkFunction("McCormick", mccormick, 2, -3.0, 4.0),
    "PGP": BenchmarkFunction("PGP", picheny_goldstein_price, 2, -2.0, 2.0),
    "Keane": BenchmarkFunction("Keane", keane, 4, 0.0, 10.0),
    "Ackley": BenchmarkFunction("Ackley", ackley, 4, -32.768, 32.768),
})
"""The paper's four functions (Ackley and Keane in four dimensions, as in its Appendix B)."""


def _projections(dimension: int, n_projections: int, seed: int) -> np.ndarray:
    theta = np.random.default_rng(seed).standard_normal((dimension, n_projections))
    return theta / np.linalg.norm(theta, axis=0, keepdims=True)


def sliced_wasserstein(
    U: np.ndarray, V: np.ndarray, *, n_projections: int = 100, order: float = 2.0,
    seed: int = 0,
) -> float:
    """(1/L sum_l W_t(theta_l^T U, theta_l^T V)^t)^(1/t) for two samples of equal size.

    The directions theta_l are uniform on the unit sphere, drawn from ``seed``; in one
    dimension W_t between equally weighted samples of equal size matches sorted values.
    """
    U, V = np.atleast_2d(U), np.atleast_2d(V)
    if U.shape != V.shape:
        raise ValueError(f"samples of the same shape needed, got {U.shape} and {V.shape}")
    theta = _projections(U.shape[1], n_projections, seed)
    gaps = np.sort(U @ theta, axis=0) - np.sort(V @ theta, axis=0)
    return float(np.mean(np.abs(gaps) ** order) ** (1.0 / order))


def sliced_wasserstein_outliers(
    signal: np.ndarray,
    n_outliers: int,
    function: BenchmarkFunction,
    rng: np.random.Generator,
    *,
    threshold: float = 0.05,
    label_scale: float = 2.0,
    k_multiplier: float = 1.5,
    n_projections: int = 100,
    order: float = 2.0,
    seed: int = 42,
    max_tries: int = 200,
) -> np.ndarray:
    """``n_outliers`` rows (features, label) that each move the data by at least ``threshold``.

    ``signal`` holds the clean samples as rows (features then label). Each outlier is compared
    with a fresh clean sample of ``function`` against the signal and the outliers drawn so far
    (Section 7); the projections are fixed by ``seed`` for the whole run.
    """
    theta = _projections(signal.shape[1], n_projections, seed)
    base = np.sort(np.asarray(signal, dtype=float) @ theta, axis=0)  # (n, L), sorted
    columns = np.arange(n_projections)
    outliers = []
    for _ in range(n_outliers):
        x_clean, y_clean = function.sample(1, rng)
        clean = np.r_[x_clean[0], y_clean] @ theta
        reference = np.sort(np.vstack([base, clean]), axis=0)  # (n + 1, L)
        # inserting c at rank r of a column leaves base[:r] against reference[:r] and
        # base[r:] against reference[r + 1:]: prefix and suffix sums give every rank at once
        before = np.vstack([np.zeros(n_projections),
                            np.cumsum(np.abs(base - reference[:-1]) ** order, axis=0)])
        after = np.vstack([np.cumsum((np.abs(base - reference[1:]) ** order)[::-1], axis=0)
                           [::-1], np.zeros(n_projections)])
        k = 1.0
        for _ in range(max_tries):
            x = rng.uniform(function.low, function.high, size=function.dimension)
            y = rng.uniform(-label_scale * k, label_scale * k)
            candidate = np.r_[x, y]
            c = candidate @ theta
            rank = np.array([np.searchsorted(base[:, j], c[j]) for j in columns])
            total = (before[rank, columns] + np.abs(c - reference[rank, columns]) ** order
                     + after[rank, columns])
            distance = np.mean(total / (base.shape[0] + 1)) ** (1.0 / order)
            if distance >= threshold:
                break
            k *= k_multiplier
        else:
            raise RuntimeError(f"no outlier reached the threshold in {max_tries} draws")
        outliers.append(candidate)
        base = np.sort(np.vstack([base, c]), axis=0)
    return np.array(outliers).reshape(n_outliers, signal.shape[1])


EXPERIMENTS = MappingProxyType({
    # name: (outlier share, where: "train" or "train+validation")
    "A": (0.4, "train"),
    "B": (0.1, "train+validation"),
    "C": (0.4, "train+validation"),
})
"""The paper's corruption table: outliers relative to the corrupted part's clean samples."""


@dataclass(frozen=True)
class OutlierDataset:
    """Train, validation and test sets of one function and experiment (raw units)."""

    function: str
    experiment: str
    X_train: np.ndarray
    y_train: np.ndarray
    X_val: np.ndarray
    y_val: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    n_outliers_train: int
    n_outliers_val: int


def make_outlier_experiment(
    function: str,
    experiment: str,
    *,
    n_samples: int = 2000,
    noise: float = 0.05,
    seed: int = 0,
    threshold: float = 0.05,
) -> OutlierDataset:
    """One data set of the paper's Experiment A, B or C for a benchmark function.

    ``n_samples`` clean samples are split 60/20/20; outliers are
    ``share * len(corrupted clean part)`` rows from :func:`sliced_wasserstein_outliers`,
    appended to the training set (A) or spread at random over training and validation in
    proportion to their sizes (B, C). Gaussian noise of standard deviation ``noise`` (the
    published code's 0.05, in raw units) is added to the features and labels of training and
    validation, outliers included; the test set stays clean.
    """
    spec = BENCHMARK_FUNCTIONS[function]
    share, where = EXPERIMENTS[experiment]
    rng = np.random.default_rng(seed)
    X, y = spec.sample(n_samples, rng)
    order = rng.permutation(n_samples)
    n_train, n_val = int(0.6 * n_samples), int(0.2 * n_samples)
    train, val, test = np.split(order, [n_train, n_train + n_val])
    corrupted = train if where == "train" else np.r_[train, val]
    signal = np.column_stack([X[corrupted], y[corrupted]])
    n_out = int(round(share * len(corrupted)))
    outliers = sliced_wasserstein_outliers(signal, n_out, spec, rng, threshold=threshold)
    if where == "train":
        to_train = np.ones(n_out, dtype=bool)
    else:
        to_train = rng.permutation(n_out) < round(n_out * n_train / (n_train + n_val))
    clean = []
    for rows, mask in ((train, to_train), (val, ~to_train)):
        clean += [np.vstack([X[rows], outliers[mask, :-1]]), np.r_[y[rows], outliers[mask, -1]]]
    # the noise is drawn for X_train, y_train, X_val, y_val in turn
    X_train, y_train, X_val, y_val = (part + rng.normal(0, noise, part.shape) for part in clean)
    return OutlierDataset(
        function=function, experiment=experiment, X_train=X_train, y_train=y_train,
        X_val=X_val, y_val=y_val, X_test=X[test], y_test=y[test],
        n_outliers_train=int(to_train.sum()), n_outliers_val=int((~to_train).sum()),
    )
