r"""Tests for botorch_dp.privacy.analysis.zcdp."""

import math

import dp_accounting
import numpy as np
import pytest

from botorch_dp.privacy.analysis.gdp import gdp_epsilon
from botorch_dp.privacy.analysis.zcdp import compose_zcdp, gaussian_zcdp, gdp_to_zcdp, zcdp_epsilon, zcdp_epsilon_cks

DELTAS = [1e-10, 1e-5, 1e-2]
MUS = [0.01, 0.1, 0.5, 1.0, 2.0, 10.0]


def test_parameters():
    assert gdp_to_zcdp(1.0) == 0.5
    assert gdp_to_zcdp(math.inf) == math.inf
    assert gdp_to_zcdp(0.0) == 0.0
    assert gaussian_zcdp(2.0, 4.0) == pytest.approx(2.0**2 / (2 * 4.0**2), rel=1e-15)
    # Gaussian mechanism: Δ/σ-GDP and Δ²/(2σ²)-zCDP agree through ρ = μ²/2.
    assert gaussian_zcdp(0.3, 1.7) == pytest.approx(gdp_to_zcdp(0.3 / 1.7), rel=1e-14)
    assert gaussian_zcdp(1.0, 0.0) == math.inf
    assert compose_zcdp([gaussian_zcdp(1.0, 5.0)] * 25) == pytest.approx(0.5, rel=1e-14)
    assert compose_zcdp([]) == 0.0


def test_bun_steinke_closed_form():
    # ρ = 1/2, δ = 1e-5: 0.5 + 2 sqrt(0.5 · log(1e5)).
    assert zcdp_epsilon(0.5, 1e-5) == pytest.approx(5.298526, abs=1e-5)
    assert zcdp_epsilon(0.0, 1e-5) == 0.0
    assert zcdp_epsilon(math.inf, 1e-5) == math.inf


def _cks_brute_force(rho, delta):
    alphas = 1.0 + np.geomspace(1e-4, 1e4, 200_001)
    values = alphas * rho + (np.log(1 / delta) + (alphas - 1) * np.log1p(-1 / alphas) - np.log(alphas)) / (alphas - 1)
    return max(float(values.min()), 0.0)


@pytest.mark.parametrize("delta", DELTAS)
def test_cks_ordering_and_optimality(delta):
    for mu in MUS:
        rho = gdp_to_zcdp(mu)
        cks = zcdp_epsilon_cks(rho, delta)
        # Tighter than Bun–Steinke, but still an upper bound on the exact Gaussian ε.
        assert cks <= zcdp_epsilon(rho, delta) + 1e-12
        assert cks >= gdp_epsilon(mu, delta) - 1e-12
        # The continuous optimum is at least as good as a dense grid, and close to it.
        brute = _cks_brute_force(rho, delta)
        assert cks <= brute + 1e-12
        assert cks == pytest.approx(brute, abs=1e-6)


def test_cks_matches_dp_accounting_rdp():
    # dp_accounting's RDP accountant uses the same RDP→DP conversion on a grid of
    # orders; for 25 Gaussian steps with noise multiplier 5 (ρ = 1/2) it can only be
    # slightly looser than the continuous optimum.
    accountant = dp_accounting.rdp.RdpAccountant()
    accountant.compose(dp_accounting.GaussianDpEvent(5.0), 25)
    theirs = accountant.get_epsilon(1e-5)
    ours = zcdp_epsilon_cks(0.5, 1e-5)
    assert ours <= theirs + 1e-9
    assert theirs - ours < 5e-3


def test_monotonicity():
    rhos = np.geomspace(1e-4, 50.0, 30)
    for convert in (zcdp_epsilon, zcdp_epsilon_cks):
        assert np.all(np.diff([convert(rho, 1e-5) for rho in rhos]) > 0)
        assert np.all(np.diff([convert(0.5, d) for d in np.geomspace(1e-12, 0.1, 30)]) < 0)
    assert zcdp_epsilon_cks(0.0, 1e-5) == 0.0
    assert zcdp_epsilon_cks(math.inf, 1e-5) == math.inf


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: gdp_to_zcdp(-1.0), "mu must be non-negative"),
        (lambda: gaussian_zcdp(-1.0, 1.0), "sensitivity"),
        (lambda: gaussian_zcdp(1.0, -1.0), "noise_std"),
        (lambda: zcdp_epsilon(-0.1, 1e-5), "rho must be non-negative"),
        (lambda: zcdp_epsilon(0.5, 0.0), "delta must lie"),
        (lambda: zcdp_epsilon_cks(0.5, 1.0), "delta must lie"),
        (lambda: zcdp_epsilon_cks(math.nan, 1e-5), "rho must be non-negative"),
        (lambda: compose_zcdp([0.1, -0.1]), "rho must be non-negative"),
    ],
)
def test_input_validation(call, match):
    with pytest.raises(ValueError, match=match):
        call()
