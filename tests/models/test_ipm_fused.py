"""The interior-point solver's shortcuts, each against the plain operation it stands for: the
Newton solve that also returns ``G dx``, the right-hand side with the output shift folded into
``G^T``, the gate blocks' Cholesky and LU paths, and the Newton step with and without
refinement."""

from __future__ import annotations

import numpy as np
import pytest

from wadiro_models import WaDiRoSCNN
from wadiro_models._program import lifted_features
from wadiro_models.solvers.ipm._lifted import LiftedProgram
from wadiro_models.solvers.ipm._newton import NormalEquations, newton_step
from wadiro_models.solvers.ipm._options import IpmOptions


def program(wasserstein: str, ramp: bool = False, fit_intercept: bool = True, bound: bool = False):
    rng = np.random.default_rng(7)
    X = rng.standard_normal((80, 3))
    y = np.sin(2 * X[:, 0]) + X[:, 1] * X[:, 2] + 0.3 * rng.standard_normal(80)
    model = WaDiRoSCNN(radius=0.05, max_neurons=10, wasserstein=wasserstein,
                       lower_bound=np.quantile(y, 0.3), fit_intercept=fit_intercept,
                       ramp=np.full(79, 0.8) if ramp else None, random_state=3)
    if bound:
        X_bound = rng.standard_normal((12, 3))
        return model.build_program(X, y, bound_X=X_bound, bound_lower=np.quantile(y, 0.3))
    return model.build_program(X, y)


def interior(lifted: LiftedProgram, rng: np.random.Generator) -> np.ndarray:
    cones = lifted.cones
    v = rng.random(cones.size) * 3 + 0.01
    if cones.n_soc:
        soc = rng.standard_normal(cones.n_soc)
        soc[0] = np.linalg.norm(soc[1:]) + 0.5
        v[cones.n_lp :] = soc
    return v


CASES = [("l1", False, True, False), ("l2", False, True, False), ("l1", True, True, False),
         ("l2", False, False, True), ("l1", True, False, True)]


@pytest.fixture(params=CASES, ids=lambda c: "-".join(map(str, c)))
def setup(request):
    wasserstein, ramp, fit_intercept, bound = request.param
    lifted = LiftedProgram(program(wasserstein, ramp, fit_intercept, bound))
    rng = np.random.default_rng(11)
    scaling = lifted.cones.nt_scaling(interior(lifted, rng), interior(lifted, rng))
    return lifted, scaling, rng


def test_solve_also_returns_G_dx(setup):
    lifted, scaling, rng = setup
    normal = NormalEquations(lifted, scaling)
    r = rng.standard_normal(lifted.layout.size)
    gx = np.empty(lifted.cones.size)
    dx = normal.solve(r, gx)
    np.testing.assert_allclose(dx, normal.solve(r), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(gx, lifted.G(dx), rtol=1e-12, atol=1e-12 * np.abs(gx).max())


def test_the_shift_folded_into_GT_is_the_solves_own(setup):
    lifted, scaling, rng = setup
    lay = lifted.layout
    normal = NormalEquations(lifted, scaling)
    z = rng.standard_normal(lifted.cones.size)
    shift = rng.standard_normal(lay.n_samples)
    plain, shifted = lifted.GT(z), lifted.GT(z, shift=shift)
    X_hat = lifted_features(lifted.program)
    expected = plain.copy()
    expected[lay.nu] -= X_hat.T @ shift
    expected[lay.omega] += X_hat.T @ shift
    expected[lay.b] -= shift.sum()
    np.testing.assert_allclose(shifted, expected, rtol=1e-12, atol=1e-12)
    # a right-hand side r = bx - G^T z, and the same with G^T's product carrying the shift
    bx = rng.standard_normal(lay.size)
    r = bx - plain
    folded = bx - lifted.GT(z, shift=normal.output_shift(r[lay.t]))
    np.testing.assert_allclose(normal.solve(folded, folded=True), normal.solve(r),
                               rtol=1e-9, atol=1e-11)


def test_gate_blocks_cholesky_and_lu_paths_agree(setup):
    lifted, scaling, rng = setup
    normal = NormalEquations(lifted, scaling)
    blocks = normal.blocks
    assert blocks.factor is not None
    r = rng.standard_normal((lifted.layout.n_gates, lifted.layout.n_cols))
    via_cholesky = blocks.solve_one(r)
    blocks.factor = None  # what a block too close to singular for Cholesky takes
    np.testing.assert_allclose(blocks.solve_one(r), via_cholesky, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("parts", ["all", "no_bx_bz", "no_q"])
@pytest.mark.parametrize("refine", [False, True])
def test_newton_step_satisfies_its_three_equations(setup, parts, refine):
    """G^T dz = bx, G dx + ds = bz and W dz + W^{-1} ds = q, with and without refinement
    (the two paths compute dz and the scaled parts in different orders)."""
    lifted, scaling, rng = setup
    normal = NormalEquations(lifted, scaling)
    normal.refine = refine
    m, n = lifted.cones.size, lifted.layout.size
    bx = None if parts == "no_bx_bz" else rng.standard_normal(n)
    bz = None if parts == "no_bx_bz" else rng.standard_normal(m)
    q = None if parts == "no_q" else rng.standard_normal(m)
    dx, ds, dz, ds_t, dz_t = newton_step(lifted, normal, scaling, bx, bz, q, IpmOptions())
    zero_m, zero_n = np.zeros(m), np.zeros(n)
    bx_, bz_, q_ = (zero_n if bx is None else bx), (zero_m if bz is None else bz), (
        zero_m if q is None else q)
    np.testing.assert_allclose(lifted.GT(dz), bx_, atol=1e-7 * max(1.0, np.abs(bx_).max()))
    np.testing.assert_allclose(lifted.G(dx) + ds, bz_, atol=1e-10 * max(1.0, np.abs(bz_).max()))
    np.testing.assert_allclose(ds_t + dz_t, q_, atol=1e-12 * max(1.0, np.abs(q_).max()))
    np.testing.assert_allclose(ds_t, scaling.apply_inverse(ds), rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(dz_t, scaling.apply(dz), rtol=1e-9, atol=1e-9)
