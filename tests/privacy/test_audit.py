"""The empirical privacy audit: sound on correct mechanisms, and able to catch broken ones
(DP-GIBO's validation-side mechanisms and AMP training)."""

import math

import numpy as np
import pytest
import torch
from scipy.stats import norm

from botorch_dp.privacy import audit
from botorch_dp.privacy.analysis.gdp import gdp_delta
from botorch_dp.privacy.analysis.objective_perturbation import amp_epsilon, calibrate_amp
from botorch_dp.privacy.mechanisms import (
    GaussianGradientMechanism,
    ObjectivePerturbationMechanism,
    ObjectivePerturbationRelease,
)
from botorch_dp.privacy.seeding import PrivacyWarning
from botorch_dp.training.objective_perturbation import AMPConfig, fit_amp


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


# ---------------------------------------------------------------------------- AMP (training side)
class DroppedPerturbation(ObjectivePerturbationMechanism):
    """A broken AMP: the objective perturbation b is drawn but not used (only output noise)."""

    def perturbation(self):
        return super().perturbation() * 0.0


class AMPHalvedNoise(ObjectivePerturbationMechanism):
    """A broken AMP: b and the output noise both at half their std (twice the true μ)."""

    def perturbation(self):
        return super().perturbation() / 2

    def release(self, theta_tilde, gradient):
        released = super().release(theta_tilde, gradient)
        theta_tilde = theta_tilde.to(released.theta)
        return ObjectivePerturbationRelease(theta=theta_tilde + (released.theta - theta_tilde) / 2, cost=released.cost)


def _amp_mu_lin(loss="squared", clip=0.1, sigma_out=0.015, tau=5e-5):
    beta = {"squared": 1.0, "logistic": 0.25}[loss]
    sigma, lam = calibrate_amp(1.0, 1e-5, clip=clip, beta=beta, sigma_out=sigma_out, tau=tau)
    return clip / math.sqrt(sigma**2 + lam**2 * sigma_out**2), sigma, lam


def test_tradeoff_from_a_gaussian_profile_is_the_gaussian_curve():
    # μ-GDP is (ε, δ_G(ε))-DP for every ε and conversely (Dong, Roth & Su 2022), so the profile gives back G_μ
    mu = 0.7
    curve = audit.tradeoff_from_profile(lambda e: gdp_delta(mu, e), np.linspace(0.0, 6.0, 1201))
    alphas = np.array([1e-4, 1e-2, 0.2, 0.5, 0.9])
    exact = norm.cdf(norm.isf(alphas) - mu)
    assert np.all(curve(alphas) <= exact + 1e-12)  # a grid is lenient, never stricter
    np.testing.assert_allclose(curve(alphas), exact, atol=2e-4)
    assert [audit.tradeoff_mu(a, f) for a, f in zip(alphas, curve(alphas))] == pytest.approx([mu] * 5, abs=3e-3)
    assert audit.tradeoff_mu(0.3, 0.0) == math.inf


def test_epsilon_lower_from_rates_closed_form():
    assert audit.epsilon_lower_from_rates(0.01, 0.9, 1e-5) == pytest.approx(math.log((1 - 1e-5 - 0.9) / 0.01))
    assert audit.epsilon_lower_from_rates(0.9, 0.01, 0.0) == pytest.approx(math.log(0.1 / 0.01))
    assert audit.epsilon_lower_from_rates(0.5, 0.5, 1e-5) == 0.0
    assert audit.epsilon_lower_from_rates(0.0, 0.5, 1e-5) == math.inf


@pytest.mark.parametrize("labels", [[-1.0], [-1.0, 1.0]])
def test_amp_audit_runs_are_fit_amp_runs(labels):
    # one coordinate of the audit's packed mechanism is one 1-D fit_amp run with the same b
    mu_lin, sigma, lam = _amp_mu_lin()
    config = AMPConfig(lam=lam, sigma=sigma, loss="squared", clip=0.1, feature_bound=1.0, fit_intercept=False,
                       sigma_out=0.015, tau=5e-5)
    X, y = torch.ones(len(labels), 1, dtype=torch.float64), torch.tensor(labels, dtype=torch.float64)
    for seed in range(3):
        mechanism = ObjectivePerturbationMechanism(dim=1, generator=torch.Generator().manual_seed(seed),
                                                   **config.privacy_parameters)
        b = mechanism.perturbation()
        ours = audit._solve_separable(X[:, 0], y, b, config, tolerance=1e-6)
        with pytest.warns(PrivacyWarning):
            fit = fit_amp(X, y, config, generator=torch.Generator().manual_seed(seed), nonprivate_diagnostics=True)
        assert torch.equal(fit.nonprivate_diagnostics.perturbation, b)
        # both are within τ/λ of the exact perturbed minimiser; on the linear pieces it is (−b − Σ slopes)/λ
        exact = (-b + 0.1 * (len(labels) - 2 * labels.count(-1.0))) / lam
        assert abs(float(ours - fit.nonprivate_diagnostics.theta_tilde)) <= 2 * 5e-5 / lam
        assert abs(float(ours - exact)) <= 5e-5 / lam


@pytest.mark.parametrize("loss", ["squared", "logistic"])
def test_amp_audit_releases_are_the_gaussian_pair_of_the_linear_design(loss):
    # on D the release is N(−C/λ, σ²/λ² + σ_out²), on D′ N(0, same): exactly mu_lin-GDP
    config, sample_d, sample_d_prime = audit._amp_design(
        ObjectivePerturbationMechanism, epsilon=1.0, delta=1e-5, loss=loss, clip=0.1, sigma_out=0.015, tau=5e-5
    )
    mu_lin, sigma, lam = _amp_mu_lin(loss)
    assert (config.sigma, config.lam) == (sigma, lam)
    num = 100_000
    d, d_prime = sample_d(num, 11), sample_d_prime(num, 12)
    std = math.sqrt(sigma**2 / lam**2 + 0.015**2)
    for sample, mean in ((d, -0.1 / lam), (d_prime, 0.0)):
        assert abs(float(sample.mean()) - mean) < 4 * std / math.sqrt(num)
        assert float(sample.std()) == pytest.approx(std, rel=4 * math.sqrt(0.5 / num))
        # Gaussian to the tails: the 1e-4 and 1 - 1e-4 quantiles
        q = torch.quantile(sample, torch.tensor([1e-4, 1 - 1e-4], dtype=torch.float64))
        assert torch.allclose(q, mean + std * torch.tensor([-3.719, 3.719], dtype=torch.float64), atol=0.2 * std)


@pytest.mark.parametrize("loss", ["squared", "logistic"])
def test_amp_audit_is_sound_and_has_power(loss):
    result = audit.audit_amp_release(num_runs=100_000, loss=loss, seed=6)
    mu_lin, sigma, lam = _amp_mu_lin(loss)
    assert result.mechanism == "amp_release"
    assert result.empirical_mu_lower <= result.claimed_mu
    assert result.empirical_epsilon_lower <= result.claimed_epsilon
    beta = {"squared": 1.0, "logistic": 0.25}[loss]
    assert result.claimed_epsilon == pytest.approx(
        amp_epsilon(1e-5, clip=0.1, beta=beta, lam=lam, sigma=sigma, tau=5e-5, sigma_out=0.015), rel=1e-12
    )
    # the claimed curve lies above the true one (mu_lin), not absurdly far
    assert mu_lin < result.claimed_mu < 1.6 * mu_lin


def test_amp_audit_detects_a_dropped_objective_perturbation():
    result = audit.audit_amp_release(num_runs=10_000, mechanism_class=DroppedPerturbation, seed=7)
    assert result.empirical_mu_lower > result.claimed_mu
    assert result.empirical_epsilon_lower > result.claimed_epsilon


def test_amp_audit_detects_halved_noise():
    # the double spends 2 mu_lin ≈ 0.40 against a claimed curve at ≈ 0.26-0.33
    result = audit.audit_amp_release(num_runs=100_000, mechanism_class=AMPHalvedNoise, seed=1)
    assert result.empirical_mu_lower > result.claimed_mu


def test_amp_audit_refuses_an_unclipped_design():
    with pytest.raises(ValueError, match="clip"):
        audit.audit_amp_release(num_runs=100, clip=1.5)
