r"""Private random search with a random number of trials (Papernot & Steinke, ICLR 2022).

The number of trials ``K`` is drawn from a truncated negative binomial or a Poisson
distribution; each trial scores a uniform random ``θ`` by a Gaussian-noised mean of
clipped per-user losses; only the best (``θ``, noisy score) pair is released. The
guarantee is Papernot & Steinke's Rényi-DP bound (their Thm. 2 for the truncated
negative binomial, Thm. 6 for the Poisson), converted to ``(ε, δ)``-DP.
"""

from __future__ import annotations

import functools
import math
import secrets
from typing import Callable

import numpy as np
import torch
from scipy.optimize import brentq, minimize_scalar
from scipy.special import gammaln

from botorch_dp.baselines.base import (
    BaselineGuarantee,
    BaselineHistory,
    BaselineResult,
    Objective,
    evaluate_losses,
    uniform_points,
)
from botorch_dp.privacy.mechanisms import GaussianScoreMechanism
from botorch_dp.utils import check_bounds
from botorch_dp.privacy.analysis.gdp import gdp_delta

DISTRIBUTIONS = ("truncated_negative_binomial", "poisson")


# ---------------------------------------------------------------------------- distributions
def tnb_mean(*, eta: float, gamma: float) -> float:
    r"""``E[K]`` of the truncated negative binomial ``D_{η,γ}`` (P&S, Def. 1).

    ``η(1 − γ) / (γ(1 − γ^η))`` for ``η ≠ 0`` and ``(1/γ − 1)/log(1/γ)`` for ``η = 0``
    (the logarithmic distribution); ``η = 1`` is the geometric distribution, mean ``1/γ``.
    """
    _check_tnb(eta, gamma)
    if eta == 0.0:
        return (1.0 / gamma - 1.0) / math.log(1.0 / gamma)
    return eta * (1.0 - gamma) / (gamma * (1.0 - gamma**eta))


@functools.lru_cache(maxsize=256)
def tnb_gamma_for_mean(*, eta: float, mean_trials: float) -> float:
    r"""The ``γ ∈ (0, 1)`` with ``E[K] = mean_trials`` under ``D_{η,γ}``.

    ``E[K]`` decreases from ``∞`` to ``1`` as ``γ`` goes from 0 to 1, so the root is
    unique for ``mean_trials > 1``.
    """
    if not mean_trials > 1.0:
        raise ValueError(f"mean_trials must exceed 1 for the truncated negative binomial, got {mean_trials}.")
    if eta == 1.0:
        return 1.0 / mean_trials
    f = lambda log_gamma: math.log(tnb_mean(eta=eta, gamma=math.exp(log_gamma))) - math.log(mean_trials)
    return math.exp(brentq(f, math.log(1e-300), math.log(1.0 - 1e-12), xtol=1e-14, rtol=1e-14))


def tnb_log_pmf(k: np.ndarray, *, eta: float, gamma: float) -> np.ndarray:
    r"""``log P[K = k]`` for ``k ≥ 1`` under ``D_{η,γ}``.

    ``P[K = k] = (1 − γ)^k / (γ^{−η} − 1) · Π_{ℓ<k} (ℓ + η)/(ℓ + 1)`` for ``η ≠ 0`` and
    ``(1 − γ)^k / (k log(1/γ))`` for ``η = 0``.
    """
    _check_tnb(eta, gamma)
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
        rng: Source of randomness; ``K`` must stay hidden (see ``private_random_search``).
        tnb_eta: ``η`` of the truncated negative binomial.

    Returns:
        ``K``.
    """
    _check_distribution(distribution)
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
    _check_distribution(distribution)
    if not order > 1.0:
        raise ValueError(f"order (λ) must exceed 1, got {order}.")
    if not per_trial_mu > 0 or math.isinf(per_trial_mu):
        raise ValueError(f"per_trial_mu must be positive and finite, got {per_trial_mu}.")
    if not mean_trials > 0:
        raise ValueError(f"mean_trials must be positive, got {mean_trials}.")
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


def rdp_to_epsilon(rdp: Callable[[float], float], delta: float) -> tuple[float, float]:
    r"""Convert a Rényi-DP curve to ``(ε, δ)``-DP (Canonne, Kamath & Steinke 2020, Prop. 12).

    ``ε = min_{λ > 1} ε'(λ) + log(1 − 1/λ) − (log δ + log λ)/(λ − 1)``; this is never
    larger than the classical ``ε'(λ) + log(1/δ)/(λ − 1)``. The minimum is taken over a
    log-spaced grid of ``λ − 1 ∈ [1e-3, 1e5]`` and refined with a bounded scalar search.

    Args:
        rdp: ``λ ↦ ε'(λ)``.
        delta: Target ``δ ∈ (0, 1)``.

    Returns:
        ``(ε, λ)``: the ``ε`` and the order at which it is attained.
    """
    if not 0 < delta < 1:
        raise ValueError(f"delta must be in (0, 1), got {delta}.")
    log_delta = math.log(delta)

    def objective(log_order_minus_one: float) -> float:
        order = 1.0 + math.exp(log_order_minus_one)
        return rdp(order) + math.log1p(-1.0 / order) - (log_delta + math.log(order)) / (order - 1.0)

    grid = np.linspace(math.log(1e-3), math.log(1e5), 321)
    values = [objective(x) for x in grid]
    i = int(np.argmin(values))
    lo, hi = grid[max(i - 1, 0)], grid[min(i + 1, len(grid) - 1)]
    best_x, best = grid[i], values[i]
    if hi > lo:
        res = minimize_scalar(objective, bounds=(lo, hi), method="bounded", options={"xatol": 1e-9})
        if res.fun < best:
            best_x, best = float(res.x), float(res.fun)
    return max(best, 0.0), 1.0 + math.exp(best_x)


def private_selection_epsilon(
    *,
    per_trial_mu: float,
    mean_trials: float,
    target_delta: float,
    distribution: str = "truncated_negative_binomial",
    tnb_eta: float = 1.0,
) -> float:
    r"""``ε`` at ``δ = target_delta`` of private random search (see ``private_selection_rdp``)."""
    rdp = lambda order: private_selection_rdp(
        order, per_trial_mu=per_trial_mu, mean_trials=mean_trials, distribution=distribution, tnb_eta=tnb_eta
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

    Raises:
        ValueError: If even a vanishing ``μ₀`` exceeds the target (the ``log E[K]`` term
            alone costs too much).
    """
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


# ---------------------------------------------------------------------------- the method
def private_random_search(
    objective: Objective,
    bounds: torch.Tensor,
    *,
    mean_trials: float,
    per_trial_mu: float,
    loss_clip: float,
    distribution: str = "truncated_negative_binomial",
    tnb_eta: float = 1.0,
    target_delta: float = 1e-5,
    fallback: torch.Tensor | None = None,
    seed: int = 0,
    secure_rng: bool = False,
    batch_size: int = 32,
) -> BaselineResult:
    r"""Private random search: release the best of ``K`` privately scored uniform points.

    ``K`` is drawn from ``distribution`` with mean ``mean_trials``. Trial ``j`` draws
    ``θ_j`` uniformly from the box (data independent) and scores it by

        ``s_j = (1/n) Σ_i min(max(ℓ_i(θ_j), 0), C) + N(0, (C/(n μ₀))²)``;

    replacing one user moves the clipped mean by at most ``C/n``, so each trial is
    ``μ₀``-GDP. The pair ``(θ_j, s_j)`` with the smallest ``s_j`` is released. The
    guarantee (``private_selection_epsilon``) needs ``K``, the other trials and their
    scores to stay hidden: they are kept in the non-public ``history`` only. With the
    Poisson distribution ``K = 0`` can occur; then ``fallback`` (default: the box
    centre) is returned.

    Args:
        objective: A ``PerUserProblem`` or a callable ``q x d -> q x n`` per-user losses.
        bounds: ``2 x d`` box.
        mean_trials: ``E[K]``, the expected number of evaluations.
        per_trial_mu: ``μ₀``, GDP parameter of one trial (see ``per_trial_mu_for_epsilon``).
        loss_clip: ``C > 0``; per-user losses are clipped to ``[0, C]``.
        distribution: ``"truncated_negative_binomial"`` or ``"poisson"``.
        tnb_eta: ``η`` of the truncated negative binomial (1: geometric).
        target_delta: ``δ`` at which ``ε`` is reported.
        fallback: ``d`` tensor returned when ``K = 0`` (data independent).
        seed: Seed of ``K``, the trial points and the noise.
        secure_rng: Draw ``K`` and the noise from OS entropy (not reproducible).
        batch_size: Trials evaluated per call of ``objective``.

    Returns:
        A ``BaselineResult``: ``theta`` and ``history.extras["released_score"]`` are the
        private release; ``num_evaluations`` (= ``K``), ``history.points`` and
        ``history.extras["noisy_scores"]`` must NOT be published (``history.public`` is
        ``False``).
    """
    bounds = check_bounds(bounds)
    _check_distribution(distribution)
    if secure_rng:
        rng = np.random.default_rng(secrets.randbits(128))
        noise_gen = torch.Generator().manual_seed(secrets.randbits(63))
    else:
        rng = np.random.default_rng([int(seed), 0])
        noise_gen = torch.Generator().manual_seed(int(seed) * 7919 + 1)
    point_gen = torch.Generator().manual_seed(int(seed))
    mechanism = GaussianScoreMechanism(loss_clip=loss_clip, per_trial_mu=per_trial_mu, generator=noise_gen)
    K = sample_num_trials(distribution=distribution, mean_trials=mean_trials, rng=rng, tnb_eta=tnb_eta)

    X = uniform_points(bounds, K, point_gen)
    scores, n, noise_std = [], None, None
    for chunk in X.split(batch_size) if K else ():
        losses = evaluate_losses(objective, chunk, n)
        n = losses.shape[1]
        release = mechanism.release(losses)
        scores.append(release.scores)
        noise_std = release.noise_std
    d = bounds.shape[1]
    if K == 0:
        theta = bounds.mean(0) if fallback is None else torch.as_tensor(fallback, dtype=torch.float64).reshape(d)
        scores_t, running, released_score = torch.empty(0, dtype=torch.float64), torch.empty(0, dtype=torch.long), None
    else:
        scores_t = torch.cat(scores)
        running = torch.cummin(scores_t, 0).indices
        theta = X[running[-1]].clone()
        released_score = float(scores_t[running[-1]])

    epsilon, order = rdp_to_epsilon(
        lambda o: private_selection_rdp(
            o, per_trial_mu=per_trial_mu, mean_trials=mean_trials, distribution=distribution, tnb_eta=tnb_eta
        ),
        target_delta,
    )
    details = {
        "distribution": distribution,
        "mean_trials": float(mean_trials),
        "per_trial_mu": float(per_trial_mu),
        "loss_clip": float(loss_clip),
        "noise_std": noise_std,
        "rdp_order": order,
    }
    if distribution == "truncated_negative_binomial":
        details.update(tnb_eta=float(tnb_eta), tnb_gamma=tnb_gamma_for_mean(eta=tnb_eta, mean_trials=mean_trials))
    guarantee = BaselineGuarantee(
        epsilon=epsilon,
        delta=target_delta,
        mu=None,
        description=(
            f"Papernot & Steinke (2022) private selection, K ~ {distribution} with E[K] = {mean_trials:g}, "
            f"each trial {per_trial_mu:.4g}-GDP (Gaussian on the [0, C]-clipped mean loss); "
            "Rényi-DP bound converted to (ε, δ) with Canonne-Kamath-Steinke Prop. 12. "
            "Holds only while K and the other trials stay hidden."
        ),
        details=details,
    )
    history = BaselineHistory(
        iterates=X[running] if K else X,
        evaluations=torch.arange(1, K + 1),
        points=X,
        mean_losses=None,
        public=False,
        extras={"noisy_scores": scores_t, "released_score": released_score},
    )
    return BaselineResult(theta=theta, num_evaluations=K, guarantee=guarantee, history=history)


def _check_distribution(distribution: str) -> None:
    if distribution not in DISTRIBUTIONS:
        raise ValueError(f"distribution must be one of {DISTRIBUTIONS}, got {distribution!r}.")


def _check_tnb(eta: float, gamma: float) -> None:
    if not eta > -1.0:
        raise ValueError(f"tnb_eta (η) must exceed -1, got {eta}.")
    if not 0.0 < gamma < 1.0:
        raise ValueError(f"gamma (γ) must be in (0, 1), got {gamma}.")
