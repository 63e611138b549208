"""The empirical privacy audit: sound on correct mechanisms, and able to catch broken ones."""

import math

import pytest
import torch

from botorch_dp.privacy import audit
from botorch_dp.privacy.mechanisms import GaussianGradientMechanism


class HalvedNoise(GaussianGradientMechanism):
    """A broken mechanism: half the noise its μ needs (true μ is twice the claim)."""

    @property
    def noise_std(self) -> float:
        return super().noise_std / 2


class UnsafeClip(GaussianGradientMechanism):
    """The pre-fix clipping rule: A @ y overflows to inf, inf * 0 = NaN on D′ only."""

    def release(self, A, Y, *, diagnostics=False):
        G = (A @ Y).T
        norms = G.norm(dim=-1, keepdim=True)
        mean = (G * (self.clip_bound / norms).clamp(max=1.0)).sum(0) / self.num_users
        noise = self.sample_noise(mean.shape[0], dtype=mean.dtype)
        released = super().release(A, torch.zeros_like(Y))
        released.gradient = mean + noise
        return released


def test_rates_to_mu_closed_form():
    # the Gaussian trade-off curve of 1-GDP passes through (α, β) = (Φ(-0.5), Φ(-0.5))
    a = 0.3085375387259869
    assert audit.gdp_mu_from_rates(a, a) == pytest.approx(1.0, rel=1e-12)
    assert audit.gdp_mu_from_rates(1.0, 0.0) == 0.0  # the trivial test proves nothing
    assert audit.gdp_mu_from_rates(0.6, 0.5) == 0.0
    # Clopper-Pearson: 0 successes in n has upper bound 1 - (1 - c)^(1/n)
    assert audit.clopper_pearson_upper(0, 100, 0.95) == pytest.approx(1 - 0.05 ** (1 / 100), rel=1e-10)


@pytest.mark.parametrize("mu,steps", [(1.0, 1), (2.0, 4)])
def test_correct_gradient_release_is_tight_and_never_over_claimed(mu, steps):
    result = audit.audit_gradient_release(num_runs=2000, privacy_mu=mu, num_steps=steps, seed=1)
    claimed = mu / math.sqrt(steps)
    assert result.claimed_mu == pytest.approx(claimed)
    assert result.empirical_mu_lower <= claimed
    # the mechanism spends what it claims: the point estimate is close to the claim
    assert abs(result.empirical_mu - claimed) < 0.25 * claimed


def test_halved_noise_is_detected():
    result = audit.audit_gradient_release(num_runs=2000, mechanism_class=HalvedNoise, seed=2)
    assert result.empirical_mu_lower > result.claimed_mu


def test_overflow_audit_is_sound_and_detects_the_old_clipping_rule():
    fixed = audit.audit_gradient_release(num_runs=2000, loss_scale_d_prime=1e307, seed=3)
    assert fixed.empirical_mu_lower <= fixed.claimed_mu
    assert abs(fixed.empirical_mu - fixed.claimed_mu) < 0.25  # the huge user is clipped, not dropped
    broken = audit.audit_gradient_release(
        num_runs=2000, loss_scale_d_prime=1e307, mechanism_class=UnsafeClip, seed=3
    )
    assert broken.false_negative_rate == 0.0  # D′ always yields a NaN release
    assert broken.empirical_mu_lower > broken.claimed_mu


def test_score_release_is_tight():
    result = audit.audit_score_release(num_runs=2000, per_trial_mu=0.5, seed=4)
    assert result.empirical_mu_lower <= 0.5
    assert abs(result.empirical_mu - 0.5) < 0.15


def test_loop_audit_is_sound_and_has_power():
    honest = audit.audit_dp_gibo(num_runs=30, seed=5)
    assert honest.empirical_mu_lower <= honest.claimed_mu
    # a run noised for μ = 100 but claiming μ = 1 is caught with the same few runs
    leaky = audit.audit_dp_gibo(num_runs=30, privacy_mu=100.0, claimed_mu=1.0, seed=5)
    assert leaky.empirical_mu_lower > 1.0


def test_run_audit_refuses_bad_settings():
    sample = lambda num, seed: torch.zeros(num)  # noqa: E731
    with pytest.raises(ValueError, match="num_runs"):
        audit.run_audit("x", sample, sample, 1.0, num_runs=2)
    with pytest.raises(ValueError, match="confidence"):
        audit.run_audit("x", sample, sample, 1.0, num_runs=10, confidence=1.0)
