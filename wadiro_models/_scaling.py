"""Standardisation of X and y inside ``fit``, undone in ``predict``.

Zero-variance columns keep scale 1 (they become all-zero columns instead of NaN). Physical
limits convert exactly: a level l (bound) becomes (l - mean_y) / scale_y, a step r (ramp)
becomes r / scale_y.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def _safe_scale(std: np.ndarray, mean: np.ndarray) -> np.ndarray:
    tiny = 10 * np.finfo(float).eps * np.maximum(np.abs(mean), 1.0)
    return np.where(std > tiny, std, 1.0)


@dataclass(frozen=True)
class Standardization:
    """Per-column mean/scale of X and mean/scale of y (identity when disabled)."""

    x_mean: np.ndarray
    x_scale: np.ndarray
    y_mean: float
    y_scale: float

    @classmethod
    def fit(cls, X: np.ndarray, y: np.ndarray, enabled: bool = True) -> Standardization:
        d = X.shape[1]
        if not enabled:
            return cls(np.zeros(d), np.ones(d), 0.0, 1.0)
        x_mean, y_mean = X.mean(axis=0), np.array(y.mean())
        x_scale = _safe_scale(X.std(axis=0), x_mean)
        y_scale = _safe_scale(np.array(y.std()), y_mean)
        return cls(x_mean, x_scale, float(y_mean), float(y_scale))

    def transform_X(self, X: np.ndarray) -> np.ndarray:
        return (X - self.x_mean) / self.x_scale

    def transform_y(self, y: np.ndarray) -> np.ndarray:
        return (y - self.y_mean) / self.y_scale

    def inverse_y(self, y: np.ndarray) -> np.ndarray:
        return y * self.y_scale + self.y_mean

    level = transform_y  # a bound on y in program units (infinities stay infinite)

    def linear_to_original(self, w: np.ndarray, b: float) -> tuple[np.ndarray, float]:
        """(coef, intercept) in original units of a linear model y_std = x_std @ w + b."""
        # y = y_mean + y_scale * (((x - x_mean) / x_scale) @ w + b)
        coef = self.y_scale * w / self.x_scale
        intercept = self.y_mean + self.y_scale * (b - (self.x_mean / self.x_scale) @ w)
        return coef, float(intercept)

    def fold_into_weights(self, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(d + 1, P) weights on standardised, augmented inputs -> (d, P) and (P,) on raw inputs."""
        linear, bias = weights[:-1], weights[-1]
        # ((x - m) / s) @ L + c  =  x @ (L / s) + (c - (m / s) @ L)
        A = linear / self.x_scale[:, None]
        a0 = bias - (self.x_mean / self.x_scale) @ linear
        return A, a0

    def step(self, value: np.ndarray) -> np.ndarray:
        """A limit on a difference of y (a ramp) in program units."""
        return value / self.y_scale
