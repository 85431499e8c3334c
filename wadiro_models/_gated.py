"""A fitted network as a sum of gated affine units, the form the certificates work on.

Both forms of a fitted convex network are, in the units of the features and of y::

    f(x) = offset + scale * sum_i 1[a_i^T x + a0_i >= 0] * (w_i^T x + w0_i)

* the **gated form** (what ``predict`` computes): one unit per kept gate s_i, gated by the
  stored gate (a_i from s_i) with the value x_aug^T (nu_i - omega_i);
* the **ReLU form** (``to_relu_network()``): one unit per hidden neuron, gated by its own
  pre-activation z_j = W1_j^T x + b1_j with the value w2_j z_j, so the product is
  w2_j relu(z_j) and f is continuous.

The standardisation of X is folded into (a, a0, w, w0) and that of y into (scale, offset), so
the certificates take domains and perturbations in the features' own units.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._relu_network import ReluNetwork


@dataclass(frozen=True)
class GatedNetwork:
    """``offset + scale * sum_i 1[x @ A[:, i] + a0[i] >= 0] * (x @ W[:, i] + w0[i])``.

    ``A`` and ``W`` have shape (d, P); ``continuous`` says that each unit's value vanishes on
    its gate boundary (the ReLU form), so f has no jumps.
    """

    A: np.ndarray
    a0: np.ndarray
    W: np.ndarray
    w0: np.ndarray
    scale: float
    offset: float
    continuous: bool

    @property
    def n_features(self) -> int:
        return int(self.A.shape[0])

    @property
    def n_units(self) -> int:
        return int(self.A.shape[1])

    def gates(self, X: np.ndarray) -> np.ndarray:
        return np.atleast_2d(X) @ self.A + self.a0

    def predict(self, X: np.ndarray) -> np.ndarray:
        """f(X) with the estimators' convention: a unit is active where its gate is >= 0."""
        X = np.atleast_2d(np.asarray(X, dtype=float))
        active = self.gates(X) >= 0
        return self.offset + self.scale * np.einsum("np,np->n", active, X @ self.W + self.w0)


def gated_form(model) -> GatedNetwork:
    """The gated form of a fitted :class:`~wadiro_models.WaDiRoSCNN` or ``SCNN``."""
    scaling = model.standardization_
    A, a0 = scaling.fold_into_weights(model.gates_)
    W, w0 = scaling.fold_into_weights((model.nu_ - model.omega_).T)
    return GatedNetwork(
        A=A, a0=a0, W=W, w0=w0, scale=float(scaling.y_scale),
        offset=float(scaling.y_mean + scaling.y_scale * model.intercept_), continuous=False,
    )


def relu_form(network: ReluNetwork) -> GatedNetwork:
    """The gated form of a :class:`~wadiro_models.ReluNetwork` (units gated by themselves)."""
    W1, b1, w2 = network.W1, network.b1, network.w2
    return GatedNetwork(
        A=W1.copy(), a0=b1.copy(), W=W1 * w2[None, :], w0=b1 * w2, scale=1.0,
        offset=float(network.b2), continuous=True,
    )
