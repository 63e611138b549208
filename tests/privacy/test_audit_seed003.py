"""Audits of Menart et al.'s releases (noisy norm, exponential selection): sound, and able to catch broken ones."""

import math

import pytest
import torch

from botorch_dp.privacy import audit
from botorch_dp.privacy.analysis.gdp import pure_dp_to_gdp_mu
from botorch_dp.privacy.mechanisms import AdaptiveGaussianGradientMechanism, ExponentialLossSelection, SelectionRelease


class QuarterNoiseNorm(AdaptiveGaussianGradientMechanism):
    """A broken norm release: a quarter of the noise its μ needs (true μ is 4× the claim)."""

    @property
    def sensitivity(self) -> float:
        return super().sensitivity / 4


class NoGumbel(ExponentialLossSelection):
    """A broken selection: the argmin of the scores, without the Gumbel noise."""

    def release(self, losses, *, nonfinite="refuse"):
        scores = losses.clamp(0.0, self.loss_clip).mean(-1)
        return SelectionRelease(index=int(torch.argmin(scores)), cost=super().release(losses).cost)


class FourfoldEpsilon(ExponentialLossSelection):
    """A broken selection: sampled at 4ε while claiming ε."""

    def __init__(self, *, epsilon, **kwargs):
        super().__init__(epsilon=4 * epsilon, **kwargs)


def test_norm_release_audit_is_tight_and_catches_too_little_noise():
    honest = audit.audit_norm_release(num_runs=1200, norm_mu=0.8, seed=1)
    assert honest.claimed_mu == 0.8 and honest.empirical_mu_lower <= 0.8
    assert abs(honest.empirical_mu - 0.8) < 0.2  # the worst-case neighbours reach the claim
    broken = audit.audit_norm_release(num_runs=400, norm_mu=0.8, mechanism_class=QuarterNoiseNorm, seed=1)
    assert broken.empirical_mu_lower > 0.8


def test_exponential_selection_audit_is_sound_and_catches_broken_samplers():
    honest = audit.audit_exponential_selection(num_runs=2000, epsilon=1.0, seed=2)
    assert honest.claimed_mu == pytest.approx(pure_dp_to_gdp_mu(1.0))
    assert honest.empirical_mu_lower <= honest.claimed_mu
    # two candidates: each outcome's log-ratio is ε/2, i.e. randomized response at ε/2
    assert abs(honest.empirical_mu - pure_dp_to_gdp_mu(0.5)) < 0.25
    for broken_class in (NoGumbel, FourfoldEpsilon):
        broken = audit.audit_exponential_selection(num_runs=400, epsilon=1.0, mechanism_class=broken_class, seed=2)
        assert broken.empirical_mu_lower > broken.claimed_mu, broken_class.__name__
    assert math.isfinite(honest.threshold)
