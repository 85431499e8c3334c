"""Stability certification (paper, Section 6): the largest output change under a small input
perturbation, as an exact mixed-integer linear program solved by HiGHS (``scipy.optimize.milp``).

For a fitted network f (:mod:`wadiro_models._gated`), a box domain X and a perturbation set
E = {e : ||e / rho||_p <= 1} (``rho`` the per-feature radius; a feature with radius 0 is held
fixed)::

    L_eps = sup { |f(x + e) - f(x)| : x in X, x + e in X, e in E }

E is symmetric (e in E <=> -e in E), so swapping x and x + e shows that
L_eps = sup f(x + e) - f(x): one MILP, no binary for the absolute value.

The search can be stopped by a time limit or a node limit (branch-and-bound nodes per solve);
``l_eps`` is then HiGHS's dual bound, still certified. A node limit gives the same numbers on
every run. The MILP is exact but grows hard quickly: networks of 5 gates are solved in a
fraction of a second, networks of 15 to 35 gates on 8 features leave a gap after a minute
(README, "Guarantees of a fit").

Parts: the box (:mod:`._domain`), per-unit bounds and ``unit_bounds`` (:mod:`._bounds`), the
MILP (:mod:`._milp`), attained deviations (:mod:`._witness`), the MILP's search until optimal or
out of limits (:mod:`._search`), the entry (:mod:`._certificate`).
"""

from ._certificate import StabilityCertificate, certify_stability

__all__ = ["StabilityCertificate", "certify_stability"]
