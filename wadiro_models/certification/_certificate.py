"""The result and the entry point: nothing moving, the unit-sum bound, or the MILP's search
(:mod:`._search`)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Literal

import numpy as np

from .._gated import GatedNetwork, gated_form, relu_form
from .._relu_network import ReluNetwork
from ..exceptions import InvalidInputError
from ._bounds import _unit_bounds, _unit_sum_bound
from ._domain import _Domain, _domain
from ._search import _Bound, _by_milp
from ._witness import _sampled_lower

Norm = Literal["inf", "1", "2"]
Form = Literal["gated", "relu"]


@dataclass(frozen=True)
class StabilityCertificate:
    """The result of :func:`certify_stability`, in the units of y.

    Attributes
    ----------
    l_eps : float
        Certified upper bound on L_eps: the MILP's optimum when ``status == "optimal"``,
        otherwise the solver's best bound when it stopped.
    lower : float
        The largest deviation |f(x) - f(x_perturbed)| found at an actual pair of points.
    status : {"optimal", "time_limit", "node_limit", "cut_limit"}
        ``"optimal"``: ``l_eps`` is L_eps (to a relative gap of 1e-6, and, for l2, a relative
        ball tolerance of 1e-6); ``"time_limit"`` / ``"node_limit"``: the time or node limit
        stopped the search and ``l_eps`` is only an upper bound; ``"cut_limit"``: the l2 outer
        approximation used its cuts before converging (``l_eps`` an upper bound).
    solve_time : float
        Wall-clock seconds spent building and solving.
    form : {"gated", "relu"}
    norm : {"inf", "1", "2"}
    x, x_perturbed : ndarray of shape (n_features,) or None
        The witness pair attaining ``lower`` (features' units).
    n_units : int
        Gated units of the network (gates, or hidden ReLU neurons).
    n_binaries : int
        Binary variables left after fixing the units whose gate has one sign on the domain.
    node_count : int
        Branch-and-bound nodes (summed over the l2 cuts' solves).
    n_cuts : int
        Tangent cuts added for the l2 ball (0 for the other norms).
    method : {"milp", "unit_bounds"}
        How ``l_eps`` was bounded (see :func:`certify_stability`).
    """

    l_eps: float
    lower: float
    status: str
    solve_time: float
    form: str
    norm: str
    x: np.ndarray | None = None
    x_perturbed: np.ndarray | None = None
    n_units: int = 0
    n_binaries: int = 0
    node_count: int = 0
    n_cuts: int = 0
    method: str = "milp"

    @property
    def gap(self) -> float:
        """``l_eps - lower`` (0 up to round-off when the supremum is attained)."""
        return float(self.l_eps - self.lower)

    @property
    def relative_gap(self) -> float:
        return float(self.gap / self.l_eps) if self.l_eps > 0 else 0.0


def _network(model, form: str) -> GatedNetwork:
    if isinstance(model, GatedNetwork):
        return model
    if isinstance(model, ReluNetwork):
        return relu_form(model)
    if not hasattr(model, "gates_"):
        raise InvalidInputError(
            "certify_stability needs a fitted WaDiRoSCNN or SCNN, or a ReluNetwork"
        )
    if form == "relu":
        return relu_form(model.to_relu_network())
    if form != "gated":
        raise InvalidInputError(f"form must be 'gated' or 'relu', not {form!r}")
    return gated_form(model)


def certify_stability(
    model,
    domain=None,
    eps: float | np.ndarray = 0.0,
    norm: Norm = "inf",
    time_limit: float | None = None,
    *,
    node_limit: int | None = None,
    form: Form = "gated",
    method: str = "milp",
) -> StabilityCertificate:
    """Certify L_eps = sup |f(x + e) - f(x)| over x, x + e in ``domain`` and e in the ball.

    Solved exactly as a mixed-integer linear program with HiGHS; how every activation region
    is covered, how the big-M constants are derived and how gate boundaries are treated is in
    the module docstring of :mod:`wadiro_models.certification._milp`. In short: the gated form
    jumps on gate hyperplanes, L_eps is then a supremum approached from the inactive side
    (it does not vanish as eps -> 0), and the certificate is that supremum; the ReLU form is
    continuous.

    Parameters
    ----------
    model : fitted WaDiRoSCNN or SCNN, or ReluNetwork
        The network to certify. A ``ReluNetwork`` (``model.to_relu_network()``) is always
        certified in its ReLU form.
    domain : pair of array-like of shape (n_features,), or None
        Per-feature lower and upper bounds of X in the units of the features the model was
        fitted on. None: the training data's range (``feature_min_``, ``feature_max_``).
    eps : float or array-like of shape (n_features,)
        Perturbation radius in the same units, one for all features or one per feature; E is
        ``{e : ||e / eps||_norm <= 1}`` with e_k = 0 where eps_k = 0 (the feature is held
        fixed). A scalar eps with ``norm="1"`` is the ball sum |e_k| <= eps.
    norm : {"inf", "1", "2"}, default="inf"
        The perturbation set: a box, an l1 ball or an l2 ball (outer approximation by tangent
        cuts, see :mod:`._milp`).
    time_limit : float, default=None
        Seconds for the solver. When it stops the search, ``status`` is ``"time_limit"``,
        ``l_eps`` the certified upper bound and ``lower`` the best deviation found.
    node_limit : int, default=None
        Branch-and-bound nodes per MILP solve. Unlike a time limit, a node limit gives the
        same certificate on every run; when it stops the search, ``status`` is
        ``"node_limit"`` and ``l_eps`` the certified upper bound.
    form : {"gated", "relu"}, default="gated"
        Certify the network as ``predict`` computes it (gated by the stored gates), or its
        mapped ReLU network (``to_relu_network()``, continuous).
    method : {"milp", "unit_bounds"}, default="milp"
        ``"milp"``: the exact MILP (above). ``"unit_bounds"``: the sum over units of each
        unit's largest possible change (from the MILP's own per-unit constants, a few small
        LPs): a true upper bound, never below the MILP's, computed in milliseconds rather than
        seconds, but looser because it lets every unit take its worst case at its own point;
        ``status`` is then ``"unit_bounds"``, and time and node limits do not apply.

    Returns
    -------
    certificate : StabilityCertificate
        ``l_eps`` (upper bound), ``lower`` (attained), ``status``, ``solve_time``, the gap
        and the witness pair, in the units of y.
    """
    started = time.perf_counter()
    net = _network(model, form)
    dom = _domain(net, _given_or_training_range(model, domain), eps, norm)
    if not np.any(dom.z_radius > 0):  # nothing moves: f(x + 0) = f(x)
        found = _Bound(0.0, 0.0, "optimal", dom.center, dom.center)
    elif method == "unit_bounds":
        found = _by_unit_bounds(net, dom)
    elif method == "milp":
        found = _by_milp(net, dom, started, time_limit, node_limit)
    else:
        raise InvalidInputError(f"method must be 'milp' or 'unit_bounds', not {method!r}")
    return StabilityCertificate(
        **{**vars(found), "l_eps": float(found.l_eps), "lower": float(found.lower)},
        solve_time=time.perf_counter() - started, form="relu" if net.continuous else "gated",
        norm=norm, n_units=net.n_units,
    )


def _given_or_training_range(model: object, domain: object) -> object:
    """``domain``, or when None the model's training range."""
    if domain is not None:
        return domain
    if not hasattr(model, "feature_min_"):
        raise InvalidInputError("give a domain: this model does not store its training range")
    return (model.feature_min_, model.feature_max_)


def _by_unit_bounds(net: GatedNetwork, dom: _Domain) -> _Bound:
    """The sum of the units' largest changes (see ``method`` of :func:`certify_stability`),
    never below a deviation attained at sampled pairs."""
    bound = _unit_sum_bound(_unit_bounds(net, dom), dom)
    lower, x, x_perturbed = _sampled_lower(net, dom)
    return _Bound(max(bound * net.scale, lower), lower, "unit_bounds", x, x_perturbed,
                  method="unit_bounds")
