r"""The hidden number of trials of private selection (Papernot & Steinke, ICLR 2022): the
truncated negative binomial ``D_{η,γ}`` (η = 1: geometric, η = 0: logarithmic), the
Poisson distribution and the binomial ``Binomial(m, γ)`` (Koskela, Redberg & Wang, ICML 2024:
``m`` public rounds, each run with probability ``γ = E[K]/m``), their means and pmf, the
parameter that gives a mean or a tail, and the draw of ``K``. The Rényi-DP bounds that use
them are in ``private_selection`` (which re-exports these names). Pure functions on floats (and
numpy arrays for the pmf).
"""

from __future__ import annotations

import functools
import math

import numpy as np
from scipy.special import gammaln

from botorch_dp.privacy.checks import (
    check_choice,
    check_greater,
    check_nonnegative_int,
    check_positive,
    check_probability,
)

__all__ = [
    "ALL_DISTRIBUTIONS",
    "DISTRIBUTIONS",
    "binomial_probability",
    "num_trials_tail",
    "poisson_mean_for_tail",
    "sample_num_trials",
    "tnb_gamma_for_mean",
    "tnb_log_pmf",
    "tnb_mean",
]

DISTRIBUTIONS = ("truncated_negative_binomial", "poisson")
"""The distributions of the hidden number of trials of the selections over validation scores (baselines)."""

ALL_DISTRIBUTIONS = (*DISTRIBUTIONS, "binomial")
"""Those and the binomial, which ``sample_num_trials``, ``num_trials_tail`` and the Rényi-DP bound
(``private_selection.private_selection_rdp_curve``) accept with its number of rounds ``binomial_rounds``."""


def binomial_probability(*, mean_trials: float, binomial_rounds: int | None) -> float:
    r"""``γ = E[K]/m`` of ``K ~ Binomial(m, γ)``, checked: ``m`` a positive integer, ``0 < E[K] ≤ m``.

    Raises:
        ValueError: naming ``binomial_rounds`` (missing or not a positive integer) or ``mean_trials``.
    """
    if (
        binomial_rounds is None
        or isinstance(binomial_rounds, bool)
        or not isinstance(binomial_rounds, (int, np.integer))
    ):
        raise ValueError(
            f"binomial_rounds must be an integer m >= 1 (the public number of rounds of K ~ Binomial(m, E[K]/m)) "
            f"with distribution='binomial', got {binomial_rounds!r}."
        )
    if binomial_rounds < 1:
        raise ValueError(f"binomial_rounds must be >= 1, got {binomial_rounds!r}.")
    mean_trials = check_positive(mean_trials, "mean_trials", allow_inf=False)
    if mean_trials > binomial_rounds:
        raise ValueError(
            f"mean_trials={mean_trials!r} exceeds binomial_rounds={binomial_rounds!r}: E[K] = m * gamma <= m."
        )
    return mean_trials / int(binomial_rounds)


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
    from scipy.optimize import brentq

    mean_trials = check_greater(mean_trials, "mean_trials", 1.0)
    eta = check_greater(eta, "eta", -1.0)
    if eta == 1.0:
        return 1.0 / mean_trials
    f = lambda log_gamma: math.log(tnb_mean(eta=eta, gamma=math.exp(log_gamma))) - math.log(mean_trials)
    return math.exp(brentq(f, math.log(1e-300), math.log(1.0 - 1e-12), xtol=1e-14, rtol=1e-14))


def poisson_mean_for_tail(*, threshold: int, probability: float) -> float:
    r"""The mean ``m`` of ``K ~ Poisson(m)`` with ``P[K > threshold] = probability``.

    ``P[K > k]`` increases continuously in ``m`` from 0 to 1, so the root (``brentq``) is
    unique. The paper's honest DP-SGD uses ``P[K > 10] = 0.9``, i.e. ``m ≈ 15.4066``.

    Args:
        threshold: ``k ≥ 0``, an integer.
        probability: ``p ∈ (0, 1)``.

    Returns:
        ``m > 0``.
    """
    from scipy.optimize import brentq
    from scipy.stats import poisson

    threshold = check_nonnegative_int(threshold, "threshold")
    probability = check_probability(probability, "probability")
    excess = lambda mean: float(poisson.sf(threshold, mean)) - probability
    hi = threshold + 1.0
    while excess(hi) < 0.0:
        hi *= 2.0
    return float(brentq(excess, 1e-300, hi, xtol=1e-14, rtol=1e-15, maxiter=500))


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


def num_trials_tail(
    *,
    distribution: str,
    mean_trials: float,
    threshold: int,
    tnb_eta: float = 1.0,
    binomial_rounds: int | None = None,
) -> float:
    r"""``P[K > threshold]`` for the number of trials ``K`` of ``sample_num_trials``.

    Poisson: ``scipy.stats.poisson.sf``; binomial: ``scipy.stats.binom.sf`` (0 for ``threshold ≥ m``).
    Truncated negative binomial: ``1 − Σ_{k=1}^{threshold}
    P[K = k]`` (``tnb_log_pmf``), clamped to ``[0, 1]`` (``(1 − γ)^threshold`` for ``η = 1``).
    A padded selection (``max_trials = threshold``) runs longer than its public maximum, and
    its length then shows ``K``, with this probability.
    """
    check_choice(distribution, "distribution", ALL_DISTRIBUTIONS)
    mean_trials = check_positive(mean_trials, "mean_trials", allow_inf=False)
    threshold = check_nonnegative_int(threshold, "threshold")
    if distribution == "binomial":
        from scipy.stats import binom

        gamma = binomial_probability(mean_trials=mean_trials, binomial_rounds=binomial_rounds)
        return float(binom.sf(threshold, int(binomial_rounds or 0), gamma))  # checked: an integer >= 1
    if distribution == "poisson":
        from scipy.stats import poisson

        return float(poisson.sf(threshold, mean_trials))
    gamma = tnb_gamma_for_mean(eta=tnb_eta, mean_trials=mean_trials)
    if tnb_eta == 1.0:
        return math.exp(threshold * math.log1p(-gamma))
    if threshold == 0:
        return 1.0
    head = float(np.exp(tnb_log_pmf(np.arange(1, threshold + 1), eta=tnb_eta, gamma=gamma)).sum())
    return min(max(1.0 - head, 0.0), 1.0)


def sample_num_trials(
    *,
    distribution: str,
    mean_trials: float,
    rng: np.random.Generator,
    tnb_eta: float = 1.0,
    binomial_rounds: int | None = None,
) -> int:
    r"""Draw the number of trials ``K``.

    Args:
        distribution: ``"truncated_negative_binomial"`` (``K ≥ 1``), ``"poisson"``
            (``K ≥ 0``) or ``"binomial"`` (``0 ≤ K ≤ binomial_rounds``).
        mean_trials: ``E[K]``.
        rng: Source of randomness; ``K`` must stay hidden (see
            ``baselines.private_random_search``).
        tnb_eta: ``η`` of the truncated negative binomial.
        binomial_rounds: ``m`` of the binomial (required for it).

    Returns:
        ``K``.
    """
    check_choice(distribution, "distribution", ALL_DISTRIBUTIONS)
    mean_trials = check_positive(mean_trials, "mean_trials", allow_inf=False)
    if distribution == "binomial":
        gamma = binomial_probability(mean_trials=mean_trials, binomial_rounds=binomial_rounds)
        return int(rng.binomial(int(binomial_rounds or 0), gamma))  # checked: an integer >= 1
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
