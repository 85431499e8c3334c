"""Gate vectors and ReLU activation patterns (paper, Section 2.2).

A gate s (a column of S) splits the samples by the hyperplane x_aug^T s = 0; its activation
pattern is the column 1[X_aug s >= 0]. The convex network has one nu-neuron and one
omega-neuron per kept gate.
"""

from __future__ import annotations

import math

import numpy as np


def augment(X: np.ndarray) -> np.ndarray:
    """X with a trailing column of ones (the hidden-layer bias)."""
    return np.hstack([X, np.ones((X.shape[0], 1), dtype=X.dtype)])


def n_gate_samples(max_neurons: int) -> int:
    """Gaussian gates to draw: each yields two neurons, so ceil(max_neurons / 2)."""
    return math.ceil(max_neurons / 2)


def sample_gates(n_inputs: int, n_gates: int, random_state: object) -> np.ndarray:
    """Draw S ~ N(0, I) with shape (n_inputs, n_gates); n_inputs counts the bias row.
    ``random_state`` is a Generator or RandomState (drawn from as it is), or a seed."""
    if not isinstance(random_state, (np.random.Generator, np.random.RandomState)):
        random_state = np.random.default_rng(random_state)
    return random_state.standard_normal((n_inputs, n_gates))


def activation_patterns(X_aug: np.ndarray, gates: np.ndarray) -> np.ndarray:
    """D = 1[X_aug S >= 0] as a boolean (N, P) array."""
    return X_aug @ gates >= 0


def distinct_gates(X_aug: np.ndarray, gates: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Keep the gates whose patterns on X_aug are distinct and not all zero.

    Returns ``(kept_gates, patterns)``; among gates with the same pattern the first drawn is
    kept, and the drawing order is preserved (so a seed gives the same network every time).
    """
    patterns = activation_patterns(X_aug, gates)
    _, first = np.unique(patterns, axis=1, return_index=True)
    keep = np.sort(first)
    keep = keep[patterns[:, keep].any(axis=0)]
    return gates[:, keep], patterns[:, keep]
