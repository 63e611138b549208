"""The audit's statistics (botorch_dp/audit/statistics.py): rates to μ, Clopper–Pearson bounds,
trade-off curves, and run_audit on exactly Gaussian releases (sound, tight, able to catch 2×)."""

import math

import numpy as np
import pytest
import torch
from scipy.stats import norm

from botorch_dp.audit import statistics as stats
from botorch_dp.privacy.analysis.gdp import gdp_delta


def gaussian_sampler(mean: float, std: float = 1.0):
    """Exactly Gaussian 'releases' N(mean, std²), reporting a claim of 1 per run."""

    def sample(num, seed):
        x = mean + std * torch.randn(num, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
        return stats.Observations(x, torch.ones(num, dtype=torch.float64))

    return sample


def test_rates_to_mu_closed_form():
    # the Gaussian trade-off curve of 1-GDP passes through (α, β) = (Φ(-0.5), Φ(-0.5))
    a = 0.3085375387259869
    assert stats.gdp_mu_from_rates(a, a) == pytest.approx(1.0, rel=1e-12)
    assert stats.gdp_mu_from_rates(1.0, 0.0) == 0.0  # the trivial test proves nothing
    assert stats.gdp_mu_from_rates(0.6, 0.5) == 0.0
    # Clopper-Pearson: 0 successes in n has upper bound 1 - (1 - c)^(1/n)
    assert stats.clopper_pearson_upper(0, 100, 0.95) == pytest.approx(1 - 0.05 ** (1 / 100), rel=1e-10)
    with pytest.raises(ValueError, match="rates"):
        stats.gdp_mu_from_rates(-0.1, 0.5)


def test_a_zero_rate_is_no_finite_mu_and_never_a_number_near_37():
    # issue 28 item 9.5: a rate of 0 used to be clamped to 1e-300, reporting μ ≈ 37-39
    assert stats.gdp_mu_from_rates(0.0, 0.5) == math.inf
    assert stats.gdp_mu_from_rates(0.5, 0.0) == math.inf
    assert stats.gdp_mu_from_rates(0.0, 1.0) == 0.0  # α + β ≥ 1 still proves nothing
    # the point estimate counts no observed error as half an error
    assert stats.point_rate(0, 150) == pytest.approx(1 / 300)
    assert stats.point_rate(3, 150) == pytest.approx(3 / 150)
    with pytest.raises(ValueError, match="runs"):
        stats.point_rate(0, 0)


def test_perfectly_separated_runs_give_a_finite_honest_point_estimate():
    d = stats.Observations(torch.zeros(300, dtype=torch.float64))
    d_prime = stats.Observations(torch.ones(300, dtype=torch.float64))
    result = stats.assess("separated", d, d_prime, 1.0)
    assert result.false_positive_rate == 0.0 and result.false_negative_rate == 0.0
    # 0 errors in 150 counted runs: the point estimate is at rates 1/300, not 0
    assert result.empirical_mu == pytest.approx(2 * norm.isf(1 / 300), rel=1e-12)
    assert 5.0 < result.empirical_mu < 6.0
    # the lower bound uses Clopper-Pearson bounds (1 - 0.025^(1/150) each) and stays below it
    each = 1 - 0.025 ** (1 / 150)
    assert result.empirical_mu_lower == pytest.approx(2 * norm.isf(each), rel=1e-9)
    assert result.empirical_mu_lower < result.empirical_mu
    assert result.leaks


def test_tradeoff_from_a_gaussian_profile_is_the_gaussian_curve():
    # μ-GDP is (ε, δ_G(ε))-DP for every ε and conversely (Dong, Roth & Su 2022), so the profile gives back G_μ
    mu = 0.7
    curve = stats.tradeoff_from_profile(lambda e: gdp_delta(mu, e), np.linspace(0.0, 6.0, 1201))
    alphas = np.array([1e-4, 1e-2, 0.2, 0.5, 0.9])
    exact = norm.cdf(norm.isf(alphas) - mu)
    assert np.all(curve(alphas) <= exact + 1e-12)  # a grid is lenient, never stricter
    np.testing.assert_allclose(curve(alphas), exact, atol=2e-4)
    assert [stats.tradeoff_mu(a, f) for a, f in zip(alphas, curve(alphas), strict=True)] == pytest.approx(
        [mu] * 5, abs=3e-3
    )
    assert stats.tradeoff_mu(0.3, 0.0) == math.inf


def test_epsilon_lower_from_rates_closed_form():
    assert stats.epsilon_lower_from_rates(0.01, 0.9, 1e-5) == pytest.approx(math.log((1 - 1e-5 - 0.9) / 0.01))
    assert stats.epsilon_lower_from_rates(0.9, 0.01, 0.0) == pytest.approx(math.log(0.1 / 0.01))
    assert stats.epsilon_lower_from_rates(0.5, 0.5, 1e-5) == 0.0
    assert stats.epsilon_lower_from_rates(0.0, 0.5, 1e-5) == math.inf


def test_run_audit_is_sound_tight_and_catches_a_halved_std_on_gaussian_releases():
    honest = stats.run_audit("g", gaussian_sampler(0.0), gaussian_sampler(1.0), num_runs=4000, seed=1)
    assert honest.claimed_mu == 1.0  # read from the runs' reports
    assert honest.empirical_mu_lower <= 1.0
    assert abs(honest.empirical_mu - 1.0) < 0.15
    leaky = stats.run_audit("g", gaussian_sampler(0.0, 0.5), gaussian_sampler(1.0, 0.5), num_runs=300, seed=1)
    assert leaky.empirical_mu_lower > leaky.claimed_mu == 1.0


def test_the_claim_is_the_largest_reported_and_must_be_reported():
    def claiming(mu):
        return lambda num, seed: stats.Observations(torch.zeros(num), torch.full((num,), mu, dtype=torch.float64))

    result = stats.run_audit("c", claiming(0.5), claiming(0.8), num_runs=10)
    assert result.claimed_mu == 0.8
    silent = lambda num, seed: torch.zeros(num)  # noqa: E731
    with pytest.raises(ValueError, match="claimed mu"):
        stats.run_audit("c", silent, silent, num_runs=10)
    assert stats.run_audit("c", silent, silent, 2.0, num_runs=10).claimed_mu == 2.0  # given explicitly
    nan = lambda num, seed: stats.Observations(torch.zeros(num), torch.full((num,), math.nan))  # noqa: E731
    with pytest.raises(ValueError, match="NaN"):
        stats.run_audit("c", nan, nan, num_runs=10)


def test_run_audit_refuses_bad_settings():
    sample = lambda num, seed: torch.zeros(num)  # noqa: E731
    with pytest.raises(ValueError, match="num_runs"):
        stats.run_audit("x", sample, sample, 1.0, num_runs=2)
    with pytest.raises(ValueError, match="confidence"):
        stats.run_audit("x", sample, sample, 1.0, num_runs=10, confidence=1.0)
    with pytest.raises(ValueError, match="statistics"):
        stats.run_audit("x", lambda num, seed: torch.zeros(num + 1), sample, 1.0, num_runs=10)


def test_a_nan_on_d_prime_only_is_flagged():
    nan_d_prime = lambda num, seed: torch.full((num,), math.nan)  # noqa: E731
    result = stats.run_audit("nan", lambda num, seed: torch.zeros(num), nan_d_prime, 1.0, num_runs=400)
    assert result.false_negative_rate == 0.0 and result.leaks
