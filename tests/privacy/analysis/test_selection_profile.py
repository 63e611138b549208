r"""The privacy-profile bound of private selection (``analysis.selection_profile``): never below the
exact profile of the selection, found by enumeration on tiny discrete trials; exact for one trial;
tighter than Papernot–Steinke's RDP bound on Gaussian trials; the pointwise maximum of profiles."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy.stats import norm

from botorch_dp.privacy.analysis import private_selection_epsilon
from botorch_dp.privacy.analysis.private_selection_trials import tnb_gamma_for_mean, tnb_log_pmf
from botorch_dp.privacy.analysis.selection_profile import (
    PrivacyProfile,
    max_privacy_profile,
    selection_delta_pld,
    selection_epsilon_pld,
    selection_pgf_derivative,
)

GRID = np.linspace(0.0, 12.0, 2401)
# (distribution, E[K], max_trials, η)
CASES = [
    ("truncated_negative_binomial", 3.0, None, 1.0),
    ("truncated_negative_binomial", 3.0, None, 0.0),
    ("poisson", 2.5, None, 1.0),
    ("binomial", 2.0, 3, 1.0),
]


def _hockey(p: np.ndarray, p2: np.ndarray, eps: float) -> float:
    return float(np.maximum(p - math.exp(eps) * p2, 0.0).sum())


def _pgf(distribution: str, mean: float, n: int | None, eta: float):
    if distribution == "poisson":
        return lambda z: math.exp(mean * (z - 1.0))
    if distribution == "binomial":
        p = mean / n
        return lambda z: (1.0 - p + p * z) ** n
    g = tnb_gamma_for_mean(eta=eta, mean_trials=mean)
    if eta == 0.0:
        return lambda z: math.log(1.0 - (1.0 - g) * z) / math.log(g)
    return lambda z: ((1.0 - (1.0 - g) * z) ** (-eta) - 1.0) / (g ** (-eta) - 1.0)


def _selection_pmf(p: np.ndarray, order: tuple[int, ...], pgf) -> np.ndarray:
    r"""Exact pmf of the best of K trials (``⊥`` first, then the outputs worst to best in ``order``):
    ``P[best ≤ y] = φ(F(y))``."""
    cdf = np.cumsum(p[list(order)])
    below = np.concatenate([[0.0], cdf[:-1]])
    return np.array([pgf(0.0)] + [pgf(a) - pgf(b) for a, b in zip(cdf, below, strict=True)])


def _exact_selection_delta(p, p2, pgf, eps) -> float:
    r"""The selection's exact δ(ε), maximised over every ranking of the outputs and both directions."""
    return max(
        max(
            _hockey(_selection_pmf(p, o, pgf), _selection_pmf(p2, o, pgf), eps),
            _hockey(_selection_pmf(p2, o, pgf), _selection_pmf(p, o, pgf), eps),
        )
        for o in itertools.permutations(range(len(p)))
    )


def _profile(p, p2) -> PrivacyProfile:
    return PrivacyProfile(GRID, np.array([max(_hockey(p, p2, e), _hockey(p2, p, e)) for e in GRID]))


TRIALS = {
    "randomized response": (np.array([0.75, 0.25]), np.array([0.25, 0.75])),
    "three outputs": (np.array([0.5, 0.3, 0.2]), np.array([0.35, 0.3, 0.35])),
    "four outputs": (np.array([0.4, 0.3, 0.2, 0.1]), np.array([0.3, 0.2, 0.25, 0.25])),
}


def test_selection_pmf_matches_enumeration_of_every_run():
    r"""The pgf formula of the exact selection (used as the reference below) against enumeration of
    every ``K ≤ 3`` and every tuple of outputs of a binomial ``K``."""
    p, n, prob = np.array([0.5, 0.3, 0.2]), 3, 2.0 / 3.0
    order = (2, 0, 1)  # output 2 worst, output 1 best
    rank = {o: i for i, o in enumerate(order)}
    brute = np.zeros(4)
    for k in range(n + 1):
        pk = math.comb(n, k) * prob**k * (1 - prob) ** (n - k)
        if k == 0:
            brute[0] += pk
            continue
        for tup in itertools.product(range(3), repeat=k):
            best = max(tup, key=lambda o: rank[o])
            brute[1 + rank[best]] += pk * float(np.prod(p[list(tup)]))
    np.testing.assert_allclose(_selection_pmf(p, order, _pgf("binomial", 2.0, 3, 1.0)), brute, rtol=1e-12)


@pytest.mark.parametrize("name", sorted(TRIALS))
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-{c[3]}")
def test_bound_is_never_below_the_exact_selection_profile(name, case):
    distribution, mean, n, eta = case
    p, p2 = TRIALS[name]
    profile, pgf = _profile(p, p2), _pgf(distribution, mean, n, eta)
    for eps in (0.0, 0.2, 0.5, 0.9, 1.3, 2.0, 3.0):
        exact = _exact_selection_delta(p, p2, pgf, eps)
        bound = selection_delta_pld(
            profile, eps, distribution=distribution, expected_trials=mean, tnb_eta=eta, max_trials=n
        )
        assert bound >= exact - 1e-12, (name, case, eps, bound, exact)


def test_the_brute_force_reference_can_exceed_one_trial():
    r"""The check above has teeth: the selection's exact δ is well above one trial's (a bound that
    forgot the selection, ``δ_Q(ε)``, fails it at ε = 1 for randomized response)."""
    p, p2 = TRIALS["randomized response"]
    exact = _exact_selection_delta(p, p2, _pgf("truncated_negative_binomial", 3.0, None, 1.0), 1.0)
    assert exact > 3.0 * float(_profile(p, p2).delta(1.0))


def test_one_trial_gives_the_trial_profile():
    r"""``K ≡ 1`` (binomial with ``n = 1``, ``p = 1``): ``ψ ≡ 1`` and the bound is ``δ_Q(ε)``."""
    profile = _profile(*TRIALS["three outputs"])
    for eps in (0.0, 0.1, 0.4, 0.8):
        got = selection_delta_pld(profile, eps, distribution="binomial", expected_trials=1.0, max_trials=1)
        assert got == pytest.approx(float(profile.delta(eps)), rel=1e-12, abs=1e-15)


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-{c[3]}")
def test_pgf_derivative_against_the_pmf(case):
    distribution, mean, n, eta = case
    psi = selection_pgf_derivative(distribution=distribution, expected_trials=mean, tnb_eta=eta, max_trials=n)
    k = np.arange(0, 400)
    if distribution == "poisson":
        from scipy.stats import poisson

        pmf = poisson.pmf(k, mean)
    elif distribution == "binomial":
        from scipy.stats import binom

        pmf = binom.pmf(k, n, mean / n)
    else:
        pmf = np.concatenate(
            [[0.0], np.exp(tnb_log_pmf(k[1:], eta=eta, gamma=tnb_gamma_for_mean(eta=eta, mean_trials=mean)))]
        )
    for v in (0.0, 0.1, 0.5, 1.0):
        z = 1.0 - v
        direct = float(np.sum(k[1:] * pmf[1:] * z ** (k[1:] - 1)))
        assert float(psi(np.array(v))) == pytest.approx(direct, rel=1e-9)
    assert float(psi(np.array(0.0))) == pytest.approx(mean, rel=1e-9)


def _gaussian_profile(mu: float) -> PrivacyProfile:
    eps = np.linspace(0.0, 40.0, 4001)
    return PrivacyProfile(eps, np.clip(norm.cdf(-eps / mu + mu / 2) - np.exp(eps) * norm.cdf(-eps / mu - mu / 2), 0, 1))


@pytest.mark.parametrize("mu", [0.3, 1.0])
@pytest.mark.parametrize("mean", [5.0, 20.0])
def test_gaussian_trial_profile_bound_beats_rdp_for_tnb(mu, mean):
    r"""μ-GDP trials, K geometric: the profile bound is below P&S's RDP bound, and above one trial's ε."""
    profile = _gaussian_profile(mu)
    single = profile.epsilon(1e-5)
    pld = selection_epsilon_pld(profile, expected_trials=mean, delta=1e-5)
    rdp = private_selection_epsilon(per_trial_mu=mu, mean_trials=mean, target_delta=1e-5)
    assert single < pld < rdp


def test_max_profile_bounds_each_and_gives_a_larger_selection_bound():
    a, b = _gaussian_profile(0.3), _gaussian_profile(0.5)
    both = max_privacy_profile([a, b])
    np.testing.assert_array_equal(both.deltas, np.maximum(a.deltas, b.deltas))
    for profile in (a, b):
        assert selection_epsilon_pld(both, expected_trials=10.0, delta=1e-5) >= selection_epsilon_pld(
            profile, expected_trials=10.0, delta=1e-5
        )


def test_profile_reads_conservatively_and_refuses_bad_input():
    profile = PrivacyProfile(np.array([0.0, 1.0, 2.0]), np.array([0.5, 0.1, 0.01]))
    assert float(profile.delta(1.5)) == 0.1  # the grid point below: an upper bound
    assert float(profile.delta(9.0)) == 0.01
    assert profile.epsilon(0.1) == 1.0 and profile.epsilon(1e-3) == math.inf
    with pytest.raises(ValueError, match="epsilons must start at 0"):
        PrivacyProfile(np.array([0.5, 1.0]), np.array([0.5, 0.1]))
    with pytest.raises(ValueError, match="deltas must lie"):
        PrivacyProfile(np.array([0.0, 1.0]), np.array([1.5, 0.1]))
    with pytest.raises(ValueError, match="max_trials"):
        selection_delta_pld(profile, 1.0, distribution="binomial", expected_trials=2.0)
    with pytest.raises(ValueError, match="distribution"):
        selection_delta_pld(profile, 1.0, distribution="uniform", expected_trials=2.0)
