"""The exponential-mechanism selection row (botorch_dp/audit/selection.py): a fault in its Gumbel
noise, made at the one place selection randomness is drawn (``privacy.mechanisms._noise.draw_gumbel``)."""

import math

import pytest
import torch

from botorch_dp.audit.selection import audit_exponential_selection
from botorch_dp.audit.statistics import gdp_mu_from_rates
from botorch_dp.privacy.analysis.gdp import pure_dp_to_gdp_mu
from botorch_dp.privacy.mechanisms import _noise


def scale_gumbel(monkeypatch, factor):
    """Gumbel noise times ``factor`` (sampling at ε/factor)."""
    draw = _noise.draw_gumbel

    def scaled(size, generator, secure_rng):
        return factor * draw(size, generator, secure_rng)

    monkeypatch.setattr(_noise, "draw_gumbel", scaled)


@pytest.mark.parametrize("factor", [0.5, 0.25])
def test_the_patch_scales_the_gumbel_noise(monkeypatch, factor):
    generator = torch.Generator().manual_seed(3)
    plain = _noise.draw_gumbel(1000, generator, False)
    scale_gumbel(monkeypatch, factor)
    patched = _noise.draw_gumbel(1000, generator.manual_seed(3), False)
    assert torch.allclose(patched, factor * plain, rtol=1e-12, atol=0)


def test_why_a_twofold_fault_cannot_show_with_two_candidates():
    # at 2ε the two-candidate exponential mechanism is randomized response at ε, and the ledger's
    # charge for pure ε-DP is the exact GDP μ of randomized response at ε: nothing to exceed
    eps = 1.0
    rate = 1 / (1 + math.exp(eps))  # P(choose the worse candidate) at 2ε: e^{-ε}/(1 + e^{-ε})
    assert gdp_mu_from_rates(rate, rate) == pytest.approx(pure_dp_to_gdp_mu(eps), rel=1e-12)


def test_a_fourfold_fault_in_the_gumbel_noise_is_caught(monkeypatch):
    scale_gumbel(monkeypatch, 0.25)  # sampling at 4ε: randomized response at 2ε, μ ≈ 2.36 against 1.23
    result = audit_exponential_selection(num_runs=300, seed=0)
    assert result.claimed_mu == pytest.approx(pure_dp_to_gdp_mu(1.0))
    assert result.empirical_mu_lower > result.claimed_mu, result
