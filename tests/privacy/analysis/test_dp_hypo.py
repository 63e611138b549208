r"""Tests for botorch_dp.privacy.analysis.dp_hypo: the DP-HyPO Rényi-DP bound.

The bound is checked against Papernot–Steinke at ratio 1 (order by order), against its
closed form written out by hand for Gaussian trials, for monotonicity, and against the
exact Rényi divergence of an adaptive best-of-K search computed by dynamic programming
(two candidates, an adversarial density that follows the incumbent)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.special import logsumexp
from scipy.stats import norm

from botorch_dp.privacy.analysis.dp_hypo import (
    adaptivity_log_factors,
    check_ratio_bounds,
    dp_hypo_epsilon,
    dp_hypo_epsilon_generic,
    dp_hypo_per_trial_mu_for_epsilon,
    dp_hypo_rdp,
    dp_hypo_rdp_curve,
)
from botorch_dp.privacy.analysis.gdp import gdp_delta, gdp_epsilon
from botorch_dp.privacy.analysis.private_selection import (
    private_selection_epsilon,
    private_selection_epsilon_generic,
    private_selection_rdp,
    private_selection_rdp_curve,
    tnb_gamma_for_mean,
)
from botorch_dp.privacy.analysis.rdp import DEFAULT_RDP_ORDERS

ORDERS = [1.01, 1.5, 2.0, 3.7, 8.0, 32.0, 512.0]
CASES = [
    ("truncated_negative_binomial", 1.0),
    ("truncated_negative_binomial", 0.0),
    ("truncated_negative_binomial", -0.5),
    ("truncated_negative_binomial", 2.5),
    ("poisson", 1.0),
]


@pytest.mark.parametrize("distribution, eta", CASES)
def test_ratio_one_is_papernot_steinke_at_every_order(distribution, eta):
    for mu0, mean in [(0.3, 10.0), (1.0, 3.0), (2.5, 40.0)]:
        kw = dict(mean_trials=mean, distribution=distribution, tnb_eta=eta)
        for order in ORDERS:
            ps = private_selection_rdp(order, per_trial_mu=mu0, **kw)
            assert dp_hypo_rdp(order, per_trial_mu=mu0, ratio_upper=1.0, **kw) == ps
            assert dp_hypo_rdp(order, per_trial_mu=mu0, ratio_upper=1.0, ratio_lower=1.0, **kw) == ps
        assert dp_hypo_epsilon(per_trial_mu=mu0, ratio_upper=1.0, target_delta=1e-5, **kw) == pytest.approx(
            private_selection_epsilon(per_trial_mu=mu0, target_delta=1e-5, **kw), rel=1e-12
        )


def test_ratio_one_is_papernot_steinke_for_a_generic_base_curve():
    laplace = lambda a: 0.5 * a * 0.3**2 + 0.01 * a  # any RDP curve
    for distribution in ("truncated_negative_binomial", "poisson"):
        kw = dict(mean_trials=7.0, distribution=distribution)
        hypo = dp_hypo_rdp_curve(laplace, ratio_upper=1.0, **kw)
        ps = private_selection_rdp_curve(laplace, **kw)
        assert [hypo(a) for a in ORDERS] == [ps(a) for a in ORDERS]
        assert dp_hypo_epsilon_generic(
            laplace, ratio_upper=1.0, target_delta=1e-6, orders=DEFAULT_RDP_ORDERS, **kw
        ) == (private_selection_epsilon_generic(laplace, target_delta=1e-6, orders=DEFAULT_RDP_ORDERS, **kw))


def test_gaussian_geometric_closed_form_by_hand():
    # ε'(λ) = λρ + 2[(λ̂ − 1)ρ + log(1/γ)/λ̂] + log m/(λ − 1)
    #         + λ/(λ − 1)(log C + 2 log(1/c)) + log(1/c) + 2 log C,   γ = 1/m, λ̂ = max(1, sqrt(log(1/γ)/ρ))
    for mu0, m, C, c in [(0.5, 10.0, 2.0, 0.5), (1.0, 4.0, 1.25, 0.75), (0.1, 100.0, 3.0, 0.2)]:
        rho, log_inv_gamma = mu0**2 / 2, math.log(m)
        hat = max(1.0, math.sqrt(log_inv_gamma / rho))
        for order in ORDERS:
            expected = (
                order * rho
                + 2 * ((hat - 1) * rho + log_inv_gamma / hat)
                + math.log(m) / (order - 1)
                + order / (order - 1) * (math.log(C) + 2 * math.log(1 / c))
                + math.log(1 / c)
                + 2 * math.log(C)
            )
            got = dp_hypo_rdp(order, per_trial_mu=mu0, mean_trials=m, ratio_upper=C, ratio_lower=c)
            assert got == pytest.approx(expected, rel=1e-12)


def test_gaussian_poisson_closed_form_by_hand():
    # ε'(λ) = λρ + m δ̂ + log m/(λ − 1) + λ/(λ − 1)(log C + mκ) + log(1/c) + mκ,
    # δ̂ = δ_GDP(μ₀; log(1 + 1/(λ − 1))), κ = (C − 1)(1 − c)/(C − c)
    mu0, m, C, c = 0.7, 6.0, 2.0, 0.4
    kappa = (C - 1) * (1 - c) / (C - c)
    for order in ORDERS:
        delta_hat = gdp_delta(mu0, math.log1p(1 / (order - 1)))
        expected = (
            order * mu0**2 / 2
            + m * delta_hat
            + math.log(m) / (order - 1)
            + order / (order - 1) * (math.log(C) + m * kappa)
            + math.log(1 / c)
            + m * kappa
        )
        got = dp_hypo_rdp(order, per_trial_mu=mu0, mean_trials=m, ratio_upper=C, ratio_lower=c, distribution="poisson")
        assert got == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("distribution, eta", CASES)
def test_monotone_in_the_ratio_bound(distribution, eta):
    kw = dict(per_trial_mu=0.8, mean_trials=12.0, distribution=distribution, tnb_eta=eta)
    ratios = [1.0, 1.01, 1.5, 2.0, 4.0, 16.0]
    for order in ORDERS:
        values = [dp_hypo_rdp(order, ratio_upper=r, **kw) for r in ratios]
        assert all(a < b for a, b in zip(values, values[1:], strict=False))
        lowers = [1.0, 0.9, 0.5, 0.1]  # smaller c: a larger class, a larger bound
        values = [dp_hypo_rdp(order, ratio_upper=2.0, ratio_lower=c, **kw) for c in lowers]
        assert all(a < b for a, b in zip(values, values[1:], strict=False))
    eps = [dp_hypo_epsilon(ratio_upper=r, target_delta=1e-5, **kw) for r in ratios]
    assert all(a < b for a, b in zip(eps, eps[1:], strict=False))


def test_adaptivity_factors_vanish_only_at_ratio_one():
    assert adaptivity_log_factors(ratio_upper=1.0, mean_trials=5.0) == (0.0, 0.0)
    assert adaptivity_log_factors(ratio_upper=1.0, mean_trials=5.0, distribution="poisson") == (0.0, 0.0)
    # C = 1 with c < 1 is a degenerate class (only the prior itself), but the bound stays valid
    log_u, log_inv_l = adaptivity_log_factors(ratio_upper=2.0, ratio_lower=0.5, mean_trials=5.0, tnb_eta=1.0)
    assert log_u == pytest.approx(math.log(2) + 2 * math.log(2)) and log_inv_l == pytest.approx(3 * math.log(2))


# ------------------------------------------------------------- exact divergence by dynamic programming
def _adaptive_output(means, *, pmf, ratio_upper, grid):
    r"""Exact output distribution (candidate, score cell) of best-of-K with two candidates,
    unit-variance Gaussian scores discretised to ``grid`` cells (lower is better; a tie keeps
    the incumbent), prior (1/2, 1/2) and the adaptive density "the incumbent's candidate with
    probability C/2": π_j/π_0 ∈ {C, 2 − C}."""
    edges = np.concatenate([[-np.inf], 0.5 * (grid[1:] + grid[:-1]), [np.inf]])
    z = edges[None, :] - np.asarray(means)[:, None]
    # 2 x G cell masses, from the CDF below the mean and the survival function above (no cancellation)
    q = np.where(z[:, 1:] <= 0.0, np.diff(norm.cdf(z), axis=1), -np.diff(norm.sf(z), axis=1))
    q_geq = np.cumsum(q[:, ::-1], axis=1)[:, ::-1]  # P[new cell ≥ y]
    follow = np.array([[ratio_upper / 2, 1 - ratio_upper / 2], [1 - ratio_upper / 2, ratio_upper / 2]])
    g = 0.5 * q  # after one trial
    out = pmf[0] * g
    for p_k in pmf[1:]:
        g_gt = np.cumsum(g[:, ::-1], axis=1)[:, ::-1] - g  # incumbent strictly worse than y
        kept = g * (follow @ q_geq)
        new = q * (follow.T @ g_gt)
        g = kept + new
        out = out + p_k * g
    return out


def _renyi(p, p_prime, order):
    mask = p > 0
    assert np.all(p_prime[mask] > 0)
    return float(logsumexp(order * np.log(p[mask]) + (1 - order) * np.log(p_prime[mask]))) / (order - 1)


@pytest.mark.parametrize("distribution", ["truncated_negative_binomial", "poisson"])
def test_bound_dominates_the_exact_divergence_of_an_adaptive_search(distribution):
    mu0, mean, C = 1.0, 4.0, 1.6
    grid = np.linspace(-9.0, 9.0, 1201)
    ks = np.arange(1, 150)
    if distribution == "poisson":
        from scipy.stats import poisson

        pmf = poisson.pmf(ks, mean)  # K = 0 is the same atom on both sides: it only adds e^{-m}
        atom = math.exp(-mean)
    else:
        gamma = tnb_gamma_for_mean(eta=1.0, mean_trials=mean)
        pmf, atom = gamma * (1 - gamma) ** (ks - 1), 0.0
    worst_gap = math.inf
    for means, means_prime in [((0.0, 0.0), (mu0, -mu0)), ((0.0, 0.0), (-mu0, -mu0)), ((0.5, -0.5), (-0.5, 0.5))]:
        for ratio in (1.0, C):
            p = _adaptive_output(means, pmf=pmf, ratio_upper=ratio, grid=grid)
            p_prime = _adaptive_output(means_prime, pmf=pmf, ratio_upper=ratio, grid=grid)
            assert p.sum() + atom == pytest.approx(1.0, abs=1e-9)
            p, p_prime = np.append(p.ravel(), atom), np.append(p_prime.ravel(), atom)
            for order in (1.5, 2.0, 4.0, 8.0, 16.0):
                exact = max(_renyi(p, p_prime, order), _renyi(p_prime, p, order))
                bound = dp_hypo_rdp(
                    order,
                    per_trial_mu=mu0,
                    mean_trials=mean,
                    ratio_upper=ratio,
                    ratio_lower=2 - ratio,
                    distribution=distribution,
                )
                assert exact <= bound
                worst_gap = min(worst_gap, bound - exact)
    assert worst_gap < 5.0  # the comparison is not vacuous


def test_adaptive_search_can_exceed_the_non_adaptive_divergence():
    # the adversarial density makes the search leak more than P&S's search with the prior:
    # the extra term of the bound is not just slack
    mu0, mean = 1.0, 4.0
    grid = np.linspace(-9.0, 9.0, 1201)
    ks = np.arange(1, 150)
    gamma = tnb_gamma_for_mean(eta=1.0, mean_trials=mean)
    pmf = gamma * (1 - gamma) ** (ks - 1)
    divergences = []
    for ratio in (1.0, 1.9):
        p = _adaptive_output((0.0, 0.0), pmf=pmf, ratio_upper=ratio, grid=grid).ravel()
        p_prime = _adaptive_output((-mu0, mu0), pmf=pmf, ratio_upper=ratio, grid=grid).ravel()
        divergences.append(_renyi(p_prime, p, 8.0))
    assert divergences[1] > divergences[0]


def test_refusals_name_the_argument():
    with pytest.raises(ValueError, match="ratio_upper"):
        check_ratio_bounds(0.9)
    with pytest.raises(ValueError, match="ratio_upper"):
        check_ratio_bounds(math.inf)
    with pytest.raises(ValueError, match="ratio_upper"):
        check_ratio_bounds(float("nan"))
    with pytest.raises(ValueError, match="ratio_lower"):
        check_ratio_bounds(2.0, 1.5)
    with pytest.raises(ValueError, match="ratio_lower"):
        check_ratio_bounds(2.0, 0.0)
    with pytest.raises(ValueError, match="distribution"):
        dp_hypo_rdp(2.0, per_trial_mu=1.0, mean_trials=3.0, ratio_upper=2.0, distribution="uniform")
    with pytest.raises(ValueError, match="order"):
        dp_hypo_rdp(1.0, per_trial_mu=1.0, mean_trials=3.0, ratio_upper=2.0)
    with pytest.raises(ValueError, match="tnb_eta"):
        adaptivity_log_factors(ratio_upper=2.0, mean_trials=3.0, tnb_eta=-1.0)
    with pytest.raises(ValueError, match="per_trial_mu"):
        dp_hypo_epsilon(per_trial_mu=0.0, mean_trials=3.0, ratio_upper=2.0, target_delta=1e-5)
    with pytest.raises(ValueError, match="target_delta"):
        dp_hypo_epsilon(per_trial_mu=1.0, mean_trials=3.0, ratio_upper=2.0, target_delta=0.0)
    with pytest.raises(ValueError, match="mean_trials"):
        dp_hypo_rdp_curve(lambda a: a, mean_trials=-1.0, ratio_upper=2.0)


def test_per_trial_mu_is_the_largest_within_the_target_and_refuses_an_unreachable_one():
    # the calibration the loss-against-dimension benchmark uses (ratio 2, E[K] = 40, target of mu = 1)
    kw = dict(mean_trials=40.0, ratio_upper=2.0, target_delta=1e-5, tnb_eta=1.0, orders=DEFAULT_RDP_ORDERS)
    target = gdp_epsilon(1.0, 1e-5)
    mu0 = dp_hypo_per_trial_mu_for_epsilon(target_epsilon=target, **kw)
    assert dp_hypo_epsilon(per_trial_mu=mu0, **kw) <= target
    assert dp_hypo_epsilon(per_trial_mu=mu0 * 1.001, **kw) > target
    assert math.isfinite(mu0) and mu0 > 0
    # and the MLP benchmark's (ratio 1.2, E[K] = 20, epsilon 2): the target is hit
    mu0 = dp_hypo_per_trial_mu_for_epsilon(target_epsilon=2.0, target_delta=1e-5, mean_trials=20.0, ratio_upper=1.2)
    eps = dp_hypo_epsilon(
        per_trial_mu=mu0,
        mean_trials=20.0,
        ratio_upper=1.2,
        ratio_lower=1 / 1.2,
        target_delta=1e-5,
        orders=DEFAULT_RDP_ORDERS,
    )
    assert eps == pytest.approx(2.0, rel=1e-8) and eps <= 2.0
    with pytest.raises(ValueError, match="cannot reach"):
        dp_hypo_per_trial_mu_for_epsilon(target_epsilon=2.0, target_delta=1e-5, mean_trials=60.0, ratio_upper=2.0)


# ------------------------------------------------- issue 40, item 6: the bound at a ratio ≠ 1, every path
def _gamma(eta, mean):
    r"""γ of the truncated negative binomial with mean ``mean``, solved here from its mean
    ``E[K] = η(1 − γ)/(γ(1 − γ^η))`` (η ≠ 0), independently of ``tnb_gamma_for_mean``."""
    from scipy.optimize import brentq

    return brentq(lambda g: eta * (1 - g) / (g * (1 - g**eta)) - mean, 1e-12, 1 - 1e-12, xtol=1e-15)


def _paper_bound(order, rho, mean, C, c, eta):
    r"""DP-HyPO's curve for ρ-zCDP Gaussian trials and K ~ D_{η,γ}, written out: Papernot–Steinke's
    Thm. 2, ε(λ) + (1 + η)(1 − 1/λ̂)ε(λ̂) + (1 + η) log(1/γ)/λ̂ + log E[K]/(λ − 1) minimised over λ̂
    (ε(λ̂) = λ̂ρ, so λ̂ = max(1, √(log(1/γ)/ρ))), plus the adaptivity terms λ/(λ − 1) log U + log(1/L)
    with U = C c^{−(1+η)}, L = c C^{−(1+η)}."""
    log_inv_gamma = -math.log(_gamma(eta, mean))
    hat = max(1.0, math.sqrt(log_inv_gamma / rho))
    selection = order * rho + (1 + eta) * ((hat - 1) * rho + log_inv_gamma / hat) + math.log(mean) / (order - 1)
    log_u = math.log(C) + (1 + eta) * math.log(1 / c)
    log_inv_l = math.log(1 / c) + (1 + eta) * math.log(C)
    return selection + order / (order - 1) * log_u + log_inv_l


@pytest.mark.privacy_fast
@pytest.mark.parametrize("eta", [1.0, 2.5])
def test_every_path_of_the_bound_at_a_ratio_other_than_one_is_the_papers_formula(eta):
    # the closed form (dp_hypo_rdp), the curve over a generic base (dp_hypo_rdp_curve) and both ε's,
    # at C ≠ 1 and c ≠ 1/C, where the log(1/L) term is material (far above the tolerance)
    mu0, mean, C, c = 0.6, 8.0, 2.0, 0.6
    rho = mu0**2 / 2
    generic = dp_hypo_rdp_curve(lambda a: a * rho, mean_trials=mean, ratio_upper=C, ratio_lower=c, tnb_eta=eta)
    for order in ORDERS:
        expected = _paper_bound(order, rho, mean, C, c, eta)
        assert math.log(1 / c) + (1 + eta) * math.log(C) > 1e-3 * expected
        kw = dict(mean_trials=mean, ratio_upper=C, ratio_lower=c, tnb_eta=eta)
        assert dp_hypo_rdp(order, per_trial_mu=mu0, **kw) == pytest.approx(expected, rel=1e-9)
        assert generic(order) == pytest.approx(expected, rel=1e-6)
    orders = np.asarray(DEFAULT_RDP_ORDERS, dtype=np.float64)
    curve = np.array([_paper_bound(a, rho, mean, C, c, eta) for a in orders])
    # the conversion of analysis.rdp on the grid: min over α of ε(α) + log((α − 1)/α) − (log δ + log α)/(α − 1)
    delta = 1e-6
    expected_eps = float(
        np.min(curve + np.log((orders - 1) / orders) - (math.log(delta) + np.log(orders)) / (orders - 1))
    )
    kw = dict(
        mean_trials=mean, ratio_upper=C, ratio_lower=c, tnb_eta=eta, target_delta=delta, orders=DEFAULT_RDP_ORDERS
    )
    assert dp_hypo_epsilon(per_trial_mu=mu0, **kw) == pytest.approx(expected_eps, rel=1e-9)
    assert dp_hypo_epsilon_generic(lambda a: a * rho, **kw) == pytest.approx(expected_eps, rel=1e-6)
