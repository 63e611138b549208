r"""Tests for botorch_dp.privacy.analysis.objective_perturbation.rdp_curves: the spec's RDP oracles
(§3.8, seeds-002-004.md, computed independently of this code), the k-fold composition against
dp_accounting, numerical integration of the folded normal's MGF, the gap to the Gaussian curve,
and AMP's curve as ObjPert's plus the output Gaussian's."""

from __future__ import annotations

import math

import dp_accounting
import numpy as np
import pytest
from scipy.integrate import quad
from scipy.stats import norm

from botorch_dp.privacy.analysis.objective_perturbation import (
    amp_rdp,
    amp_rdp_epsilon,
    objpert_rdp,
    objpert_rdp_epsilon,
)
from botorch_dp.privacy.analysis.rdp import rdp_curve_epsilon

from .cases import AMP_MC, AMP_MC_S_G, FIG1_LEFT, FIG1_RIGHT, FIG4, ORDERS
from .cases import c_s as _c_s


@pytest.mark.parametrize("alpha,expected", [(1.5, 0.2345776), (2.0, 0.2384361), (8.0, 0.2982851), (32.0, 0.7136529)])
def test_rdp_oracles(alpha, expected):
    # spec prints 7 decimals: half a unit in the last place
    assert objpert_rdp(alpha, **FIG1_LEFT) == pytest.approx(expected, abs=5e-8)


@pytest.mark.parametrize("k,expected,tol", [(10, 3.2479, 5e-5), (100, 24.662, 5e-4)])
def test_k_fold_rdp_oracles(k, expected, tol):
    # Fig. 4 setting; k runs compose by summing the RDP curves on the grid
    values = k * objpert_rdp(ORDERS, **FIG4)
    eps, _ = rdp_curve_epsilon(values, ORDERS, 1e-5)
    assert eps == pytest.approx(expected, abs=tol)
    # the same conversion as dp_accounting's on the same grid
    theirs, _ = dp_accounting.rdp.compute_epsilon(list(ORDERS), list(values), 1e-5)
    assert eps == pytest.approx(theirs, rel=1e-12)


@pytest.mark.parametrize("params", [FIG1_LEFT, FIG1_RIGHT, dict(clip=math.sqrt(2.0), beta=0.5, lam=3.0, sigma=0.7)])
def test_rdp_equals_numerical_integration_of_the_folded_normal_mgf(params):
    c, s = _c_s(**params)
    alphas = np.array([1.001, 1.5, 2.0, 8.0, 32.0, 100.0])
    values = objpert_rdp(alphas, **params)  # arrays in, arrays out
    assert values.shape == alphas.shape
    for alpha, value in zip(alphas, values, strict=True):
        t = alpha - 1.0
        # E[e^{t|X|}], X ~ N(0, s²): 2 ∫₀^∞ φ_s(x) e^{tx} dx = e^m · 2 ∫₀^∞ φ_s(x) e^{tx − m} dx, m = t²s²/2
        # (the integrand in log space; split at its peak t s²)
        shift, peak = t * t * s * s / 2.0, t * s * s
        f = lambda x, t=t, shift=shift: 2.0 * math.exp(norm.logpdf(x, scale=s) + t * x - shift)
        mgf = sum(quad(f, lo, hi, epsabs=0.0, epsrel=1e-13, limit=200)[0] for lo, hi in ((0.0, peak), (peak, math.inf)))
        by_quad = c + s * s / 2.0 + (math.log(mgf) + shift) / t
        assert value == pytest.approx(by_quad, rel=1e-12)
        assert value == objpert_rdp(float(alpha), **params)
    # α → 1 limit (spec E4.3): c + s²/2 + s√(2/π)
    assert objpert_rdp(1.0 + 1e-10, **params) == pytest.approx(c + s * s / 2.0 + s * math.sqrt(2.0 / math.pi), rel=1e-9)


def test_rdp_above_gaussian_with_gap_decreasing_to_c():
    for params in (FIG1_LEFT, FIG1_RIGHT, FIG4):
        c, s = _c_s(**params)
        alphas = np.concatenate([ORDERS, [1e3, 1e4, 1e6]])
        gap = objpert_rdp(alphas, **params) - alphas * s * s / 2.0
        assert np.all(gap > c)
        assert np.all(np.diff(gap) < 0)
        assert gap[-1] - c == pytest.approx(math.log(2.0) / (1e6 - 1.0), rel=1e-3)  # log(2Φ(·)) → log 2


def test_amp_rdp_is_objpert_plus_output_gaussian():
    # the output part at the grid-enlarged s_g (cases.grid_s_g), not the paper's 2τ/(λσ_out) = 0.05
    s_g = AMP_MC_S_G
    assert 0.05 < s_g < 0.05 + 2.0**-13
    gaussian = amp_rdp(ORDERS, **AMP_MC) - objpert_rdp(ORDERS, **FIG1_LEFT)
    np.testing.assert_allclose(gaussian, ORDERS * s_g**2 / 2.0, rtol=1e-10)
    # that Gaussian part, converted by our grid rule, equals dp_accounting's RDP accountant
    accountant = dp_accounting.rdp.RdpAccountant(orders=list(ORDERS))
    accountant.compose(dp_accounting.GaussianDpEvent(1.0 / s_g))
    assert rdp_curve_epsilon(ORDERS * s_g**2 / 2.0, ORDERS, 1e-5)[0] == pytest.approx(
        accountant.get_epsilon(1e-5), rel=1e-12
    )
    # and the whole AMP curve's conversion equals dp_accounting's on the same values
    values = amp_rdp(ORDERS, **AMP_MC)
    theirs, _ = dp_accounting.rdp.compute_epsilon(list(ORDERS), list(values), 1e-5)
    assert amp_rdp_epsilon(1e-5, **AMP_MC) == pytest.approx(theirs, rel=1e-12)


def test_input_validation():
    good = dict(FIG1_LEFT)
    calls = [
        (lambda: objpert_rdp(1.0, **good), "alpha"),
        (lambda: objpert_rdp(np.array([2.0, 0.5]), **good), "alpha"),
        (lambda: objpert_rdp(math.inf, **good), "alpha"),
        (lambda: objpert_rdp(2.0, **dict(good, lam=1.0)), "lam must exceed beta"),
        (lambda: objpert_rdp(2.0, **dict(good, clip=0.0)), "clip"),
        (lambda: objpert_rdp(2.0, **dict(good, clip=math.inf)), "clip"),
        (lambda: objpert_rdp(2.0, **dict(good, sigma=-1.0)), "sigma"),
        (lambda: objpert_rdp(2.0, **dict(good, sigma=math.nan)), "sigma"),
        (lambda: objpert_rdp(2.0, **dict(good, beta=-1.0)), "beta"),
        (lambda: amp_rdp(2.0, **good, tau=-1.0, sigma_out=0.1), "tau"),
        (lambda: amp_rdp(2.0, **good, tau=0.1, sigma_out=0.0), "sigma_out"),
        (lambda: objpert_rdp_epsilon(1.5, **good), "delta"),
    ]
    for call, match in calls:
        with pytest.raises(ValueError, match=match):
            call()
