r"""Tests for botorch_dp.privacy.analysis.private_selection_trials: the truncated negative
binomial's pmf sums to one with the requested mean, its special cases by hand (geometric,
logarithmic), sampled ``K`` have the right mean (fixed seed), and the Poisson mean for a tail
probability inverts scipy's survival function."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import poisson

from botorch_dp.privacy.analysis.private_selection_trials import (
    poisson_mean_for_tail,
    sample_num_trials,
    tnb_gamma_for_mean,
    tnb_log_pmf,
    tnb_mean,
)


@pytest.mark.parametrize("eta", [-0.5, 0.0, 1.0, 2.5])
def test_tnb_pmf_normalized_with_requested_mean(eta):
    gamma = tnb_gamma_for_mean(eta=eta, mean_trials=20.0)
    assert tnb_mean(eta=eta, gamma=gamma) == pytest.approx(20.0)
    ks = np.arange(1, 400_000)
    p = np.exp(tnb_log_pmf(ks, eta=eta, gamma=gamma))
    assert p.sum() == pytest.approx(1.0, abs=1e-8)
    assert (ks * p).sum() == pytest.approx(20.0, rel=1e-6)


def test_tnb_special_cases_by_hand():
    # η = 1: geometric P[K = k] = γ(1 − γ)^{k−1}; η = 0: logarithmic (1 − γ)^k / (k log(1/γ))
    g = 0.2
    ks = np.array([1, 2, 5])
    np.testing.assert_allclose(np.exp(tnb_log_pmf(ks, eta=1.0, gamma=g)), g * (1 - g) ** (ks - 1))
    np.testing.assert_allclose(np.exp(tnb_log_pmf(ks, eta=0.0, gamma=g)), (1 - g) ** ks / (ks * math.log(1 / g)))
    assert tnb_gamma_for_mean(eta=1.0, mean_trials=10.0) == pytest.approx(0.1)


@pytest.mark.parametrize(
    "distribution,eta", [("truncated_negative_binomial", 1.0), ("truncated_negative_binomial", 0.0), ("poisson", 1.0)]
)
def test_sampled_number_of_trials_has_the_right_mean(distribution, eta):
    rng = np.random.default_rng(0)
    ks = np.array(
        [sample_num_trials(distribution=distribution, mean_trials=8.0, rng=rng, tnb_eta=eta) for _ in range(4000)]
    )
    if distribution != "poisson":
        assert ks.min() >= 1
    # sd of K is at most ~ mean here; standard error of the mean ≲ 8/sqrt(4000) = 0.13
    assert ks.mean() == pytest.approx(8.0, abs=0.5)


def test_poisson_mean_for_tail():
    m = poisson_mean_for_tail(threshold=10, probability=0.9)
    assert m == pytest.approx(15.4066, abs=5e-5)  # spec §3.8 (paper: ≈ 15.4)
    assert poisson.sf(10, m) == pytest.approx(0.9, rel=1e-12)
    assert poisson_mean_for_tail(threshold=0, probability=0.5) == pytest.approx(
        math.log(2.0), rel=1e-12
    )  # P[K > 0] = 1 − e^{−m}


@pytest.mark.parametrize(
    "distribution,eta", [("truncated_negative_binomial", 1.0), ("truncated_negative_binomial", 0.0), ("poisson", 1.0)]
)
@pytest.mark.privacy_fast
def test_sampled_number_of_trials_follows_its_pmf(distribution, eta):
    # the fast twin of the (slow) mean test above, issue 40 item 6: seeded draws against the pmf, chi-square
    # on the cells 1..7 (0..7 for the Poisson) and the tail; η = 0 draws by inverse CDF (slower): 150 draws
    # on the cells 1..4
    rng = np.random.default_rng(1)
    slow = distribution != "poisson" and eta <= 0
    draws, last = (150, 4) if slow else (600, 7)
    ks = np.array(
        [sample_num_trials(distribution=distribution, mean_trials=4.0, rng=rng, tnb_eta=eta) for _ in range(draws)]
    )
    if distribution == "poisson":
        cells = np.arange(0, last + 1)
        pmf = poisson.pmf(cells, 4.0)
    else:
        cells = np.arange(1, last + 1)
        pmf = np.exp(tnb_log_pmf(cells, eta=eta, gamma=tnb_gamma_for_mean(eta=eta, mean_trials=4.0)))
    expected = len(ks) * np.append(pmf, 1.0 - pmf.sum())
    observed = np.append([(ks == k).sum() for k in cells], (ks > cells[-1]).sum())
    from scipy.stats import chi2

    statistic = float(((observed - expected) ** 2 / expected).sum())
    assert statistic < chi2.ppf(1 - 1e-4, len(cells)), (observed, expected)
