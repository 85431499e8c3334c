"""The box X and the perturbation radii, checked, and their map onto internal units."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._gated import GatedNetwork
from ..exceptions import InvalidInputError


@dataclass(frozen=True)
class _Domain:
    """The box and the perturbation radii, and the map to internal units z = (x - c) / r."""

    lower: np.ndarray
    upper: np.ndarray
    radius: np.ndarray  # per-feature rho, features' units; 0 = fixed
    norm: str

    @property
    def center(self) -> np.ndarray:
        return (self.lower + self.upper) / 2

    @property
    def half_width(self) -> np.ndarray:
        half = (self.upper - self.lower) / 2
        return np.where(half > 0, half, 1.0)

    @property
    def z_lower(self) -> np.ndarray:
        return np.where(self.upper > self.lower, -1.0, 0.0)

    @property
    def z_upper(self) -> np.ndarray:
        return np.where(self.upper > self.lower, 1.0, 0.0)

    @property
    def z_radius(self) -> np.ndarray:
        """rho in internal units; 0 where the feature is fixed or the domain has no width."""
        return np.where(self.upper > self.lower, self.radius / self.half_width, 0.0)

    def to_original(self, z: np.ndarray) -> np.ndarray:
        return np.clip(self.center + self.half_width * z, self.lower, self.upper)


def _domain(net: GatedNetwork, domain, eps, norm: str) -> _Domain:
    d = net.n_features
    try:
        lower, upper = (np.asarray(bound, dtype=float) for bound in domain)
    except (TypeError, ValueError):
        raise InvalidInputError(
            "domain must be a pair (lower, upper) of per-feature bounds") from None
    lower, upper = np.broadcast_to(lower, (d,)).copy(), np.broadcast_to(upper, (d,)).copy()
    radius = np.broadcast_to(np.asarray(eps, dtype=float), (d,)).copy()
    if not (np.isfinite(lower).all() and np.isfinite(upper).all()):
        raise InvalidInputError("the domain must be a bounded box (finite bounds)")
    if (upper < lower).any():
        raise InvalidInputError("every domain upper bound must be >= its lower bound")
    if not np.isfinite(radius).all() or (radius < 0).any():
        raise InvalidInputError("eps must be finite and >= 0 (0 holds a feature fixed)")
    if norm not in ("inf", "1", "2"):
        raise InvalidInputError(f"norm must be 'inf', '1' or '2', not {norm!r}")
    return _Domain(lower, upper, radius, norm)
