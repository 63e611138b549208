r"""Tests for botorch_dp.privacy.analysis.objective_perturbation.calibration: the analytic Gaussian σ
oracles and the spec's calibration table C3 (seeds-002-004.md, computed independently of this
code): σ is the smallest noise meeting ε at the returned λ, and no smaller λ of the walk works."""

from __future__ import annotations

import math

import pytest

from botorch_dp.privacy.analysis.gdp import gdp_mu
from botorch_dp.privacy.analysis.objective_perturbation import amp_rdp_epsilon, calibrate_amp


def test_analytic_gaussian_sigma_oracles():
    # σ_G = 1/μ for the μ-GDP that is exactly (ε, δ)-DP (sensitivity 1)
    for epsilon, expected in [(0.1, 30.7496), (1.0, 3.7306), (8.0, 0.6002)]:
        assert 1.0 / gdp_mu(epsilon, 1e-5) == pytest.approx(expected, abs=5e-5)


# C3 with C = √2, β = 0.5, σ_out = 0.15, f = 1.3, δ = 1e-5: (ε, τ, σ or None, j), λ = (2β/ε)·1.05^j
CALIBRATION = [
    (0.1, 5e-4, 56.30, 34, 52.53),
    (1.0, 5e-4, 6.852, 27, 3.7335),
    (8.0, 5e-4, 1.094, 34, 0.6567),
    (0.1, 0.01, None, 35, 55.16),
    (1.0, 0.01, None, 29, 4.116),
    (8.0, 0.01, None, 35, 0.6895),
]


@pytest.mark.parametrize("epsilon,tau,sigma_expected,j,lam_expected", CALIBRATION)
def test_calibration_table(epsilon, tau, sigma_expected, j, lam_expected):
    kw = dict(clip=math.sqrt(2.0), beta=0.5, sigma_out=0.15, tau=tau)
    sigma, lam = calibrate_amp(epsilon, 1e-5, **kw)
    assert lam == pytest.approx((1.0 / epsilon) * 1.05**j, rel=1e-12)
    # the spec prints λ to 4 significant digits (5 for 3.7335)
    assert lam == pytest.approx(lam_expected, rel=1e-3)
    if sigma_expected is not None:
        assert sigma == pytest.approx(sigma_expected, rel=1e-3)  # spec: 4 significant digits
    amp_kw = dict(clip=kw["clip"], beta=0.5, sigma_out=0.15, tau=tau)
    # σ is the smallest noise meeting ε at this λ ...
    assert amp_rdp_epsilon(1e-5, lam=lam, sigma=sigma, **amp_kw) == pytest.approx(epsilon, rel=1e-9)
    assert amp_rdp_epsilon(1e-5, lam=lam, sigma=0.999 * sigma, **amp_kw) > epsilon
    # ... within 1.3 σ_G, and at the previous λ the smallest σ was above 1.3 σ_G (no off-by-one λ)
    sigma_gauss = kw["clip"] / gdp_mu(epsilon, 1e-5)
    assert sigma <= 1.3 * sigma_gauss
    lam_prev = lam / 1.05
    if lam_prev > 0.5:
        assert amp_rdp_epsilon(1e-5, lam=lam_prev, sigma=1.3 * sigma_gauss, **amp_kw) > epsilon


def test_input_validation():
    calls = [
        (lambda: calibrate_amp(0.0, 1e-5, clip=1.0, beta=0.5, sigma_out=0.1, tau=1e-3), "epsilon"),
        (lambda: calibrate_amp(1.0, 1e-5, clip=1.0, beta=0.5, sigma_out=0.1, tau=1e-3, factor=1.0), "factor"),
        (lambda: calibrate_amp(1.0, 1e-5, clip=1.0, beta=0.0, sigma_out=0.1, tau=1e-3), "beta"),
    ]
    for call, match in calls:
        with pytest.raises(ValueError, match=match):
            call()
