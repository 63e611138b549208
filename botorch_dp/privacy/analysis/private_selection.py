r"""Privacy analysis of private selection (Papernot & Steinke, ICLR 2022).

Releasing the best of ``K`` runs of a mechanism, with ``K`` drawn from a truncated
negative binomial ``D_{η,γ}`` (η = 1: geometric, η = 0: logarithmic) or a Poisson
distribution, is Rényi-DP with the bounds of P&S Thm. 2 (truncated negative binomial)
and Thm. 6 (Poisson); ``analysis.rdp.rdp_to_epsilon`` converts them to ``(ε, δ)``.
Here each run is a μ₀-GDP Gaussian mechanism (private random search's noisy score,
``privacy.mechanisms.GaussianScoreMechanism``). Pure functions on floats (and numpy
arrays for the pmf); the method itself is ``baselines.private_random_search``.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from scipy.optimize import brentq
from scipy.special import gammaln

from botorch_dp.privacy.analysis.gdp import gdp_delta
from botorch_dp.privacy.analysis.rdp import rdp_to_epsilon
from botorch_dp.privacy.checks import (
    check_choice,
    check_delta,
    check_greater,
    check_positive,
    check_probability,
)

__all__ = [
    "DISTRIBUTIONS",
    "per_trial_mu_for_epsilon",
    "private_selection_epsilon",
    "private_selection_rdp",
    "sample_num_trials",
    "tnb_gamma_for_mean",
    "tnb_log_pmf",
    "tnb_mean",
]

DISTRIBUTIONS = ("truncated_negative_binomial", "poisson")


# ---------------------------------------------------------------------------- distributions
def tnb_mean(*, eta: float, gamma: float) -> float:
    r"""``E[K]`` of the truncated negative binomial ``D_{η,γ}`` (P&S, Def. 1).

    ``η(1 − γ) / (γ(1 − γ^η))`` for ``η ≠ 0`` and ``(1/γ − 1)/log(1/γ)`` for ``η = 0``
    (the logarithmic distribution); ``η = 1`` is the geometric distribution, mean ``1/γ``.
    """
    eta = check_greater(eta, "eta", -1.0)
    gamma = check_probability(gamma, "gamma")
    if eta == 0.0:
        return (1.0 / gamma - 1.0) / math.log(1.0 / gamma)
    return eta * (1.0 - gamma) / (gamma * (1.0 - gamma**eta))


@functools.lru_cache(maxsize=256)
def tnb_gamma_for_mean(*, eta: float, mean_trials: float) -> float:
    r"""The ``γ ∈ (0, 1)`` with ``E[K] = mean_trials`` under ``D_{η,γ}``.

    ``E[K]`` decreases from ``∞`` to ``1`` as ``γ`` goes from 0 to 1, so the root is
    unique for ``mean_trials > 1``.
    """
    mean_trials = check_greater(mean_trials, "mean_trials", 1.0)
    eta = check_greater(eta, "eta", -1.0)
    if eta == 1.0:
        return 1.0 / mean_trials
    f = lambda log_gamma: math.log(tnb_mean(eta=eta, gamma=math.exp(log_gamma))) - math.log(mean_trials)
    return math.exp(brentq(f, math.log(1e-300), math.log(1.0 - 1e-12), xtol=1e-14, rtol=1e-14))


def tnb_log_pmf(k: np.ndarray, *, eta: float, gamma: float) -> np.ndarray:
    r"""``log P[K = k]`` for ``k ≥ 1`` under ``D_{η,γ}``.

    ``P[K = k] = (1 − γ)^k / (γ^{−η} − 1) · Π_{ℓ<k} (ℓ + η)/(ℓ + 1)`` for ``η ≠ 0`` and
    ``(1 − γ)^k / (k log(1/γ))`` for ``η = 0``.
    """
    eta = check_greater(eta, "eta", -1.0)
    gamma = check_probability(gamma, "gamma")
    k = np.asarray(k, dtype=np.float64)
    log_q = k * math.log1p(-gamma)
    if eta == 0.0:
        return log_q - np.log(k) - math.log(math.log(1.0 / gamma))
    # Π_{ℓ<k} (ℓ+η)/(ℓ+1) = η Γ(k+η) / (Γ(1+η) Γ(k+1)); for η < 0 the product and the
    # normalizer γ^{−η} − 1 are both negative, so take absolute values of both.
    log_prod = math.log(abs(eta)) + gammaln(k + eta) - gammaln(1.0 + eta) - gammaln(k + 1.0)
    log_norm = math.log(abs(gamma ** (-eta) - 1.0))
    return log_q + log_prod - log_norm


def sample_num_trials(
    *, distribution: str, mean_trials: float, rng: np.random.Generator, tnb_eta: float = 1.0
) -> int:
    r"""Draw the number of trials ``K``.

    Args:
        distribution: ``"truncated_negative_binomial"`` (``K ≥ 1``) or ``"poisson"``
            (``K ≥ 0``).
        mean_trials: ``E[K]``.
        rng: Source of randomness; ``K`` must stay hidden (see
            ``baselines.private_random_search``).
        tnb_eta: ``η`` of the truncated negative binomial.

    Returns:
        ``K``.
    """
    check_choice(distribution, "distribution", DISTRIBUTIONS)
    mean_trials = check_positive(mean_trials, "mean_trials", allow_inf=False)
    if distribution == "poisson":
        return int(rng.poisson(mean_trials))
    gamma = tnb_gamma_for_mean(eta=tnb_eta, mean_trials=mean_trials)
    if tnb_eta > 0:
        # numpy's negative_binomial(η, γ) has P[k] ∝ Γ(k+η)/(Γ(η)k!) γ^η (1−γ)^k; truncate at 0
        while True:
            k = int(rng.negative_binomial(tnb_eta, gamma))
            if k >= 1:
                return k
    # η ∈ (−1, 0]: inverse CDF, walking the support in chunks (the tail can be very long)
    u, cumulative, start, chunk = rng.random(), 0.0, 1, 65536
    while True:
        ks = np.arange(start, start + chunk)
        pmf = np.exp(tnb_log_pmf(ks, eta=tnb_eta, gamma=gamma))
        cdf = cumulative + np.cumsum(pmf)
        i = int(np.searchsorted(cdf, u))
        if i < chunk or pmf[-1] == 0.0:  # found, or the rest of the tail underflows
            return int(ks[min(i, chunk - 1)])
        cumulative, start = float(cdf[-1]), start + chunk


# ---------------------------------------------------------------------------- accounting
def private_selection_rdp(
    order: float,
    *,
    per_trial_mu: float,
    mean_trials: float,
    distribution: str = "truncated_negative_binomial",
    tnb_eta: float = 1.0,
) -> float:
    r"""Rényi-DP ``ε'(λ)`` of releasing the best of ``K`` Gaussian-scored trials.

    Each trial is a Gaussian mechanism that is ``μ₀``-GDP, i.e. ``ρ = μ₀²/2``-zCDP and
    ``(λ, λρ)``-RDP at every order ``λ > 1``.

    - Truncated negative binomial ``D_{η,γ}`` (P&S Thm. 2):
      ``ε' = ε(λ) + (1+η)(1 − 1/λ̂) ε(λ̂) + (1+η) log(1/γ)/λ̂ + log E[K]/(λ − 1)``,
      minimized over ``λ̂ ≥ 1``; with ``ε(λ̂) = λ̂ρ`` the minimizer is
      ``λ̂ = max(1, sqrt(log(1/γ)/ρ))``.
    - Poisson with mean ``m`` (P&S Thm. 6): ``ε' = ε(λ) + m δ̂ + log(m)/(λ − 1)`` where the
      trial is ``(ε̂, δ̂)``-DP with ``e^ε̂ = 1 + 1/(λ − 1)``; ``δ̂`` is the Gaussian's exact
      privacy profile at that ``ε̂``.

    Args:
        order: ``λ > 1``.
        per_trial_mu: ``μ₀``, GDP parameter of one trial.
        mean_trials: ``E[K]``.
        distribution: ``"truncated_negative_binomial"`` or ``"poisson"``.
        tnb_eta: ``η ∈ (−1, ∞)`` of the truncated negative binomial.

    Returns:
        ``ε'(λ)``.
    """
    check_choice(distribution, "distribution", DISTRIBUTIONS)
    order = check_greater(order, "order", 1.0)
    per_trial_mu = check_positive(per_trial_mu, "per_trial_mu", allow_inf=False)
    mean_trials = check_positive(mean_trials, "mean_trials", allow_inf=False)
    rho = per_trial_mu**2 / 2.0
    base = order * rho
    if distribution == "poisson":
        eps_hat = math.log1p(1.0 / (order - 1.0))
        delta_hat = gdp_delta(per_trial_mu, eps_hat)
        return base + mean_trials * delta_hat + math.log(mean_trials) / (order - 1.0)
    gamma = tnb_gamma_for_mean(eta=tnb_eta, mean_trials=mean_trials)
    log_inv_gamma = math.log(1.0 / gamma)
    order_hat = max(1.0, math.sqrt(log_inv_gamma / rho))
    extra = (1.0 + tnb_eta) * ((order_hat - 1.0) * rho + log_inv_gamma / order_hat)
    return base + extra + math.log(mean_trials) / (order - 1.0)


def private_selection_epsilon(
    *,
    per_trial_mu: float,
    mean_trials: float,
    target_delta: float,
    distribution: str = "truncated_negative_binomial",
    tnb_eta: float = 1.0,
) -> float:
    r"""``ε`` at ``δ = target_delta`` of private selection (see ``private_selection_rdp``).

    Args:
        per_trial_mu: ``μ₀``, GDP parameter of one trial.
        mean_trials: ``E[K]``.
        target_delta: ``δ ∈ (0, 1)``.
        distribution: ``"truncated_negative_binomial"`` or ``"poisson"``.
        tnb_eta: ``η ∈ (−1, ∞)`` of the truncated negative binomial.

    Returns:
        ``ε ≥ 0``.
    """
    target_delta = check_delta(target_delta, "target_delta")
    rdp = functools.partial(
        private_selection_rdp,
        per_trial_mu=per_trial_mu, mean_trials=mean_trials, distribution=distribution, tnb_eta=tnb_eta,
    )
    return rdp_to_epsilon(rdp, target_delta)[0]


def per_trial_mu_for_epsilon(
    *,
    target_epsilon: float,
    target_delta: float,
    mean_trials: float,
    distribution: str = "truncated_negative_binomial",
    tnb_eta: float = 1.0,
) -> float:
    r"""The largest per-trial ``μ₀`` whose private selection is ``(target_epsilon, target_delta)``-DP.

    ``ε(μ₀)`` increases in ``μ₀``; the root is found by ``brentq`` on ``log μ₀``.

    Args:
        target_epsilon: ``ε > 0`` that the whole selection may spend.
        target_delta: ``δ ∈ (0, 1)``.
        mean_trials: ``E[K]``.
        distribution: ``"truncated_negative_binomial"`` or ``"poisson"``.
        tnb_eta: ``η ∈ (−1, ∞)`` of the truncated negative binomial.

    Returns:
        ``μ₀ > 0``.

    Raises:
        ValueError: If even a vanishing ``μ₀`` exceeds the target (the ``log E[K]`` term
            alone costs too much).
    """
    target_epsilon = check_positive(target_epsilon, "target_epsilon", allow_inf=False)
    target_delta = check_delta(target_delta, "target_delta")
    eps = lambda log_mu: private_selection_epsilon(
        per_trial_mu=math.exp(log_mu), mean_trials=mean_trials, target_delta=target_delta,
        distribution=distribution, tnb_eta=tnb_eta,
    ) - target_epsilon
    lo, hi = math.log(1e-6), math.log(1e2)
    if eps(lo) >= 0:
        raise ValueError(
            f"No per-trial budget reaches epsilon={target_epsilon} with E[K]={mean_trials} "
            f"({distribution}); allow a larger epsilon or fewer trials."
        )
    return math.exp(brentq(eps, lo, hi, xtol=1e-10))
