r"""What a release returns (``privacy.mechanisms.releases``): the costs. ``PureDPCost.mu`` is checked
against the spec's values and, independently, as the smallest GDP ``μ`` whose trade-off curve lies
below the ε-DP one (randomized response's, the worst ε-DP pair), touching it at its symmetric point.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import norm

from botorch_dp.privacy.mechanisms import PrivacyCost, PureDPCost, RDPCost


@pytest.mark.parametrize("epsilon, value", [(0.1, 0.12531), (0.5, 0.62389), (1.0, 1.23204), (2.0, 2.35796)])
def test_pure_cost_converts_to_the_spec_gdp_values(epsilon, value):
    assert PureDPCost(epsilon).mu == pytest.approx(value, abs=5e-6)


def _gdp_tradeoff(mu: float, alpha: np.ndarray) -> np.ndarray:
    r"""``G_μ(α) = Φ(Φ⁻¹(1 − α) − μ)``."""
    return norm.cdf(norm.ppf(1 - alpha) - mu)


def _pure_dp_tradeoff(epsilon: float, alpha: np.ndarray) -> np.ndarray:
    r"""``f_ε(α) = max(0, 1 − e^ε α, e^{−ε}(1 − α))``, the trade-off curve of ε-DP (Dong et al., Prop. 2.5)."""
    return np.maximum.reduce([np.zeros_like(alpha), 1 - math.exp(epsilon) * alpha, math.exp(-epsilon) * (1 - alpha)])


@pytest.mark.parametrize("epsilon", [0.01, 0.3, 1.0, 2.5, 6.0])
def test_pure_cost_is_the_tightest_gdp_mu_covering_epsilon_dp(epsilon):
    mu = PureDPCost(epsilon).mu
    alpha = np.linspace(1e-9, 1 - 1e-9, 20_001)
    gap = _pure_dp_tradeoff(epsilon, alpha) - _gdp_tradeoff(mu, alpha)
    assert gap.min() >= -1e-12  # μ-GDP is no stronger than ε-DP anywhere: the charge covers the release
    touch = 1 / (1 + math.exp(epsilon))  # the kink of f_ε
    assert _gdp_tradeoff(mu, np.array([touch]))[0] == pytest.approx(touch, rel=1e-9)  # f_ε(α) = α there
    # a μ any smaller no longer covers ε-DP at the kink
    assert _gdp_tradeoff(mu * (1 - 1e-6), np.array([touch]))[0] > touch


def test_costs_are_frozen_values_with_one_release_by_default():
    cost = PrivacyCost(mu=0.5)
    assert cost.count == 1 and cost == PrivacyCost(0.5, 1) and cost != PrivacyCost(0.5, 2)
    with pytest.raises(AttributeError):
        cost.mu = 1.0
    curve = RDPCost(rdp=lambda alpha: alpha / 2, description="Gaussian, σ = 1")
    assert curve.rdp(4.0) == 2.0 and math.isinf(PrivacyCost(math.inf).mu)
