"""The non-convex one-hidden-layer ReLU network equivalent to a convex network.

Paper, eq. (map1)-(map2): a gate's nu_i != 0 gives a neuron with input weights
nu_i / sqrt(||nu_i||_2) and output weight +sqrt(||nu_i||_2); omega_i != 0 gives one with
omega_i / sqrt(||omega_i||_2) and output weight -sqrt(||omega_i||_2). The last entry of each
weight vector multiplies the bias column, so it becomes the hidden bias. Standardisation of X
and y is folded into the weights, so the network maps raw inputs to predictions in y units.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._scaling import Standardization


@dataclass(frozen=True)
class ReluNetwork:
    """f(X) = relu(X @ W1 + b1) @ w2 + b2, with W1 (d, m), b1 (m,), w2 (m,), b2 a float."""

    W1: np.ndarray
    b1: np.ndarray
    w2: np.ndarray
    b2: float

    @property
    def n_hidden(self) -> int:
        return int(self.w2.shape[0])

    def predict(self, X: np.ndarray) -> np.ndarray:
        hidden = np.maximum(np.asarray(X, dtype=float) @ self.W1 + self.b1, 0.0)
        return hidden @ self.w2 + self.b2

    __call__ = predict


def relu_network(
    nu: np.ndarray,
    omega: np.ndarray,
    b: float,
    scaling: Standardization,
    *,
    rtol: float = 1e-10,
) -> ReluNetwork:
    """Map convex weights (program units, shape (P, d+1)) to a :class:`ReluNetwork`.

    A neuron is dropped as zero when its weight norm is at most ``rtol`` times the largest
    norm (interior-point solutions are never exactly zero).
    """
    weights = np.vstack([nu, omega])
    signs = np.concatenate([np.ones(len(nu)), -np.ones(len(omega))])
    norms = np.linalg.norm(weights, axis=1)
    largest = norms.max(initial=0.0)
    keep = norms > rtol * largest if largest > 0 else np.zeros(norms.shape, dtype=bool)
    root = np.sqrt(norms[keep])
    layer = (weights[keep] / root[:, None]).T  # (d+1, m), in standardised units
    W1, b1 = scaling.fold_into_weights(layer)
    w2 = signs[keep] * root * scaling.y_scale
    b2 = float(scaling.y_mean + scaling.y_scale * b)
    return ReluNetwork(W1=W1, b1=b1, w2=w2, b2=b2)
