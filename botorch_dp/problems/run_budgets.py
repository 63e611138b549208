r"""What one training run of a tuning method may cost: a reference RDP curve, and its plans.

A run's budget is one reference AMP run (``AMPRunBudget``); a run at other
hyperparameters gets the smallest σ whose RDP curve lies below the reference at every
order of the ledger's grid (``amp_sigma_for_curve``), so any runs compose to at most a
multiple of the reference. ``plan_amp_runs`` and ``plan_amp_selection`` choose the
reference for ``k`` composed runs or for Papernot–Steinke selection (``selection_curve``)
at a target ``(ε, δ)``; ``dp_sgd_noise_for_selection`` does the same for honest DP-SGD
tuning, where every trial shares one noise multiplier.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, overload

import numpy as np
from scipy.optimize import brentq

from botorch_dp.privacy.analysis.objective_perturbation import amp_output_mu, amp_rdp
from botorch_dp.privacy.analysis.private_selection import private_selection_rdp_curve
from botorch_dp.privacy.analysis.rdp import DEFAULT_RDP_ORDERS, rdp_curve_epsilon
from botorch_dp.privacy.checks import check_delta, check_greater, check_positive

__all__ = [
    "AMPRunBudget",
    "amp_sigma_for_curve",
    "dp_sgd_curve",
    "dp_sgd_noise_for_selection",
    "plan_amp_budget",
    "plan_amp_runs",
    "plan_amp_selection",
    "selection_curve",
]

_ORDERS = np.asarray(DEFAULT_RDP_ORDERS, dtype=np.float64)
#: Largest σ/C that calibration considers (s = C/σ = 1e-9: the σ → ∞ limit in float64).
_MAX_SIGMA_OVER_CLIP = 1e9
_MAX_LAMBDA_STEPS = 2000


def _limit_curve(lam: float, *, beta: float, tau: float, sigma_out: float) -> np.ndarray:
    r"""``c + α s_g²/2`` on the grid: AMP's RDP curve as σ → ∞ (what λ alone costs)."""
    c = -math.log1p(-beta / lam)
    s_g = amp_output_mu(lam=lam, tau=tau, sigma_out=sigma_out)  # the output part as amp_rdp charges it
    return c + _ORDERS * (0.5 * s_g * s_g)


class RDPCurve(Protocol):
    r"""``α ↦ ε(α)``, at one order (a float) or at an array of orders (an array)."""

    @overload
    def __call__(self, alpha: float, /) -> float: ...

    @overload
    def __call__(self, alpha: np.ndarray, /) -> np.ndarray: ...


def _grid_cached(curve: Callable) -> RDPCurve:
    r"""``curve`` (vectorised over orders) evaluated once on ``DEFAULT_RDP_ORDERS``; the
    returned scalar function looks grid orders up and evaluates others directly."""
    values = dict(zip(_ORDERS.tolist(), np.asarray(curve(_ORDERS), dtype=np.float64).tolist(), strict=True))

    def cached(alpha):
        if np.ndim(alpha):
            return np.asarray([cached(a) for a in np.asarray(alpha, dtype=np.float64)])
        alpha = float(alpha)
        return values[alpha] if alpha in values else float(curve(alpha))

    return cached


def _smallest_sigma(
    excess: Callable[[float], float], scale: float, *, max_ratio: float = _MAX_SIGMA_OVER_CLIP, rtol: float = 1e-12
) -> float | None:
    r"""The smallest σ with ``excess(σ) ≤ 0`` for an ``excess`` that decreases in σ, or
    ``None`` when even ``σ = scale·max_ratio`` leaves it positive. Bisection on ``log σ``
    from ``σ = scale`` (relative tolerance ``rtol``); the returned σ satisfies the
    inequality exactly (it is nudged up past the tolerance)."""
    if excess(scale * max_ratio) > 0.0:
        return None
    f = lambda log_sigma: excess(math.exp(log_sigma))
    step = math.log(2.0)
    lo = hi = math.log(scale)
    if f(lo) > 0.0:  # bracket [lo, hi] with f(lo) > 0 >= f(hi), each value computed once
        hi = lo + step
        while f(hi) > 0.0:
            lo, hi = hi, hi + step
    else:
        lo = hi - step
        while f(lo) <= 0.0:
            lo, hi = lo - step, lo
            if lo < math.log(scale) - 200.0:
                return math.exp(hi)  # (almost) no noise needed
    sigma = math.exp(brentq(f, lo, hi, xtol=rtol, rtol=rtol, maxiter=500))
    while excess(sigma) > 0.0:
        sigma *= 1.0 + max(rtol, 1e-10)
    return sigma


def amp_sigma_for_curve(
    reference: np.ndarray, *, lam: float, clip: float, beta: float, tau: float, sigma_out: float
) -> float | None:
    r"""The smallest σ whose AMP run lies below a reference RDP curve at every grid order.

    ``amp_rdp(α; σ, λ, C, β, τ, σ_out) ≤ reference(α)`` for every ``α`` of
    ``DEFAULT_RDP_ORDERS`` (the ledger's grid). AMP's curve decreases in σ at every order
    (``s = C/σ``), so the smallest such σ is found by bisection on ``log σ``.

    Args:
        reference: The reference curve's values on ``DEFAULT_RDP_ORDERS``.
        lam: ``λ > β``.
        clip: ``C``.
        beta: ``β``.
        tau: ``τ``.
        sigma_out: ``σ_out``.

    Returns:
        σ, or ``None`` when no σ works at this λ: the σ → ∞ limit ``c + α s_g²/2``
        (``c = −log(1 − β/λ)``, ``s_g = 2τ/(λσ_out)``) already meets the reference.
    """
    reference = np.asarray(reference, dtype=np.float64)
    if reference.shape != _ORDERS.shape:
        raise ValueError(f"reference must hold one value per order of DEFAULT_RDP_ORDERS ({_ORDERS.size}).")
    lam = check_greater(lam, "lam (λ > β)", beta)
    if np.any(_limit_curve(lam, beta=beta, tau=tau, sigma_out=sigma_out) >= reference):
        return None
    params = dict(clip=clip, beta=beta, lam=lam, tau=tau, sigma_out=sigma_out)
    return _smallest_sigma(lambda sigma: float(np.max(amp_rdp(_ORDERS, sigma=sigma, **params) - reference)), clip)


@dataclass(frozen=True)
class AMPRunBudget:
    r"""What ONE AMP training run of a tuning method may cost: a reference RDP curve.

    The reference is the RDP curve of an AMP run at ``(σ, λ)`` (with the public ``C``,
    ``β``, ``τ``, ``σ_out``). A run at another ``(λ', C')`` gets the smallest ``σ'`` whose
    curve lies below the reference at every order of ``DEFAULT_RDP_ORDERS``
    (``sigma_at``), so ``k`` runs at any hyperparameters compose (in the ledger, on that
    grid) to at most ``k`` times the reference, and a random choice of hyperparameters
    per run costs at most the reference (Rényi divergence is jointly quasi-convex).

    Attributes:
        sigma, lam: The reference run's ``σ`` and ``λ``.
        clip, beta, tau, sigma_out: The public AMP constants of the reference.
        description: How the reference was chosen (public).
    """

    sigma: float
    lam: float
    clip: float
    beta: float
    tau: float
    sigma_out: float
    description: str = ""

    @property
    def privacy_parameters(self) -> dict[str, float]:
        return {
            "clip": self.clip,
            "beta": self.beta,
            "lam": self.lam,
            "sigma": self.sigma,
            "tau": self.tau,
            "sigma_out": self.sigma_out,
        }

    def rdp(self, alpha: float | np.ndarray) -> float | np.ndarray:
        r"""The reference curve ``ε(α)`` (``amp_rdp`` at the reference run)."""
        return amp_rdp(alpha, **self.privacy_parameters)

    def rdp_values(self) -> np.ndarray:
        r"""The reference curve on ``DEFAULT_RDP_ORDERS``."""
        return np.asarray(self.rdp(_ORDERS), dtype=np.float64)

    def epsilon(self, delta: float, num_runs: float = 1.0) -> float:
        r"""``ε`` at ``δ`` of ``num_runs`` times the reference curve, converted on
        ``DEFAULT_RDP_ORDERS`` (``num_runs`` may be fractional: runs of weight ≠ 1)."""
        num_runs = check_positive(num_runs, "num_runs", allow_inf=False)
        return rdp_curve_epsilon(num_runs * self.rdp_values(), _ORDERS, check_delta(delta))[0]

    def sigma_at(self, lam: float, clip: float | None = None, weight: float = 1.0) -> float | None:
        r"""σ of a run at ``(λ, C)`` whose curve lies below ``weight`` times the reference
        (``amp_sigma_for_curve``); ``None`` when ``λ`` is too small for any σ. ``C``
        defaults to the reference's; ``weight > 1`` gives a run a larger share."""
        clip = self.clip if clip is None else check_positive(clip, "clip (C)", allow_inf=False)
        weight = check_positive(weight, "weight", allow_inf=False)
        return amp_sigma_for_curve(
            weight * self.rdp_values(), lam=lam, clip=clip, beta=self.beta, tau=self.tau, sigma_out=self.sigma_out
        )

    def min_lam(self) -> float:
        r"""The infimum of the ``λ`` at which some σ meets the budget (``sigma_at`` is finite
        strictly above it): where the σ → ∞ limit ``c + α s_g²/2`` touches the reference."""
        ref = self.rdp_values()
        gap = lambda log_lam: float(
            np.max(_limit_curve(math.exp(log_lam), beta=self.beta, tau=self.tau, sigma_out=self.sigma_out) - ref)
        )
        lo = math.log(self.beta) + 1e-12
        return math.exp(brentq(gap, lo, math.log(self.lam), xtol=1e-13, rtol=1e-13))


def plan_amp_budget(
    epsilon: float,
    *,
    total_epsilon: Callable[[Callable[[np.ndarray], np.ndarray]], float],
    lam_start: float,
    clip: float,
    beta: float,
    tau: float,
    sigma_out: float,
    factor: float = 1.3,
    description: str = "",
) -> AMPRunBudget:
    r"""A reference run for a method whose total cost is a function of one run's RDP curve.

    ``total_epsilon(curve)`` is the method's ``ε`` when every run has the RDP curve
    ``curve`` (a function of an array of orders), e.g. ``k`` runs composed, or private
    selection over a random number of runs. The rule follows the authors' calibration
    (spec C3) with another yardstick: ``σ_∞``, the smallest σ meeting ``ε`` in the limit
    ``λ → ∞`` (no ``c`` and no output-noise term; the least noise any λ needs). Starting at
    ``λ = lam_start``: find the smallest σ with ``total_epsilon(amp curve at (σ, λ)) ≤ ε``
    (bisection on ``log σ``; it decreases to ``σ_∞`` as λ grows) and accept ``(σ, λ)`` as
    soon as ``σ ≤ factor · σ_∞``, else ``λ ← 1.05 λ``. As σ(λ) decreases in λ, the first
    accepted step of the 1.05-grid is found by bisection over the step index. (C3's yardstick, the Gaussian σ of
    the same budget, cannot be approached by composed AMP runs: the folded-normal part of
    ObjPert's privacy loss, mean ``s√(2/π)`` per run, adds up linearly in the number of
    runs.)

    Args:
        epsilon: The method's total ``ε``.
        total_epsilon: ``curve ↦ ε`` of the method (increasing in the curve).
        lam_start: First ``λ`` tried (``λ ≤ β`` are skipped).
        clip, beta, tau, sigma_out: Public AMP constants.
        factor: ``f > 1``.
        description: Kept in the returned budget.

    Returns:
        The ``AMPRunBudget`` at the accepted ``(σ, λ)``.

    Raises:
        ValueError: If no ``λ`` within 2000 steps of 1.05 is accepted.
    """
    epsilon = check_positive(epsilon, "epsilon", allow_inf=False)
    factor = check_greater(factor, "factor", 1.0)
    clip = check_positive(clip, "clip (C)", allow_inf=False)
    beta = check_positive(beta, "beta (β)", allow_inf=False)
    tau = check_positive(tau, "tau (τ)", allow_inf=False)
    sigma_out = check_positive(sigma_out, "sigma_out (σ_out)", allow_inf=False)
    lam_start = check_positive(lam_start, "lam_start", allow_inf=False)

    def curve_at(sigma: float, lam: float, tau_: float) -> RDPCurve:
        return _grid_cached(
            functools.partial(amp_rdp, clip=clip, beta=beta, lam=lam, sigma=sigma, tau=tau_, sigma_out=sigma_out)
        )

    def sigma_at(lam: float, tau_: float) -> float | None:
        return _smallest_sigma(lambda sigma: total_epsilon(curve_at(sigma, lam, tau_)) - epsilon, clip)

    sigma_inf = sigma_at(beta * 1e12, 1e-300)  # c ≈ 1e-12, s_g ≈ 0: the λ → ∞ limit
    if sigma_inf is None:
        raise ValueError(f"No AMP run meets epsilon = {epsilon:g} even as lambda -> infinity.")

    def accepted(step: int) -> bool:
        # σ(λ) ≤ f σ_∞ iff the total at σ = f σ_∞ is within ε (the total decreases in σ)
        lam = lam_start * 1.05**step
        return lam > beta and total_epsilon(curve_at(factor * sigma_inf, lam, tau)) <= epsilon

    # σ(λ) decreases in λ (the curve decreases in λ at every σ), so the accepted steps form
    # a tail of 0, 1, 2, …: find its first step by doubling, then bisection.
    hi = 0
    while not accepted(hi):
        if hi >= _MAX_LAMBDA_STEPS:
            raise ValueError(
                f"plan_amp_budget found no lambda with sigma <= factor * sigma_inf within {_MAX_LAMBDA_STEPS} "
                "steps; increase factor or sigma_out, or decrease tau."
            )
        hi = min(2 * hi + 1, _MAX_LAMBDA_STEPS)
    lo = -1  # invariant: step lo is not accepted (or is before 0), step hi is
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if accepted(mid):
            hi = mid
        else:
            lo = mid
    lam = lam_start * 1.05**hi
    sigma = sigma_at(lam, tau)
    if sigma is None:  # never: accepted(hi) says factor * sigma_inf meets epsilon at this lambda
        raise ValueError(f"No AMP run meets epsilon = {epsilon:g} at lambda = {lam:g}.")
    return AMPRunBudget(
        sigma=sigma, lam=lam, clip=clip, beta=beta, tau=tau, sigma_out=sigma_out, description=description
    )


def plan_amp_runs(
    epsilon: float,
    delta: float,
    *,
    num_runs: float,
    clip: float = math.sqrt(2.0),
    beta: float = 0.5,
    tau: float = 5e-4,
    sigma_out: float = 0.15,
    factor: float = 1.3,
) -> AMPRunBudget:
    r"""A per-run budget for ``num_runs`` AMP runs composed in RDP to ``(ε, δ)``.

    ``plan_amp_budget`` with the total ``rdp_curve_epsilon(k · ε_run, δ)`` on
    ``DEFAULT_RDP_ORDERS`` (what the ledger computes for ``k`` runs) and the first
    ``λ = 2βk/ε`` (where ``k c ≈ ε/2``). ``k`` counts reference-run units and may be
    fractional: e.g. ``T·b`` evaluation runs of weight 1 and a final run of weight ``w``
    (``AMPRunBudget.sigma_at(..., weight=w)``) need ``k = T·b + w``.

    Args:
        epsilon: Total training ``ε`` of the ``k`` runs.
        delta: ``δ``.
        num_runs: ``k > 0``, the planned number of (weighted) training runs.
        clip, beta, tau, sigma_out: Public AMP constants (defaults: the authors', unit
            rows with a bias feature).
        factor: ``f`` of ``plan_amp_budget``.

    Returns:
        The ``AMPRunBudget``: ``k`` runs held to it cost at most ``ε`` at ``δ``.
    """
    epsilon = check_positive(epsilon, "epsilon", allow_inf=False)
    delta = check_delta(delta)
    k = check_positive(num_runs, "num_runs", allow_inf=False)
    total = lambda curve: rdp_curve_epsilon(k * np.asarray(curve(_ORDERS)), _ORDERS, delta)[0]
    return plan_amp_budget(
        epsilon,
        total_epsilon=total,
        lam_start=2.0 * beta * k / epsilon,
        clip=clip,
        beta=beta,
        tau=tau,
        sigma_out=sigma_out,
        factor=factor,
        description=f"each AMP run below (a weight times) one reference RDP curve; {k:g} reference runs composed "
        f"in RDP give epsilon = {epsilon:g} at delta = {delta:g}",
    )


def plan_amp_selection(
    epsilon: float,
    delta: float,
    *,
    mean_trials: float,
    distribution: str = "poisson",
    tnb_eta: float = 1.0,
    clip: float = math.sqrt(2.0),
    beta: float = 0.5,
    tau: float = 5e-4,
    sigma_out: float = 0.15,
    factor: float = 1.3,
) -> AMPRunBudget:
    r"""A per-trial budget for Papernot–Steinke selection over AMP trials at ``(ε, δ)``.

    ``plan_amp_budget`` with the total ``ε`` of ``selection_curve`` (P&S Thm. 2 or 6 with
    the trial's RDP curve as base, converted on ``DEFAULT_RDP_ORDERS``) and the first
    ``λ = 2β/ε``. Every trial held to the returned budget (any λ, chosen at random) is
    below its reference curve, so the selection costs at most ``ε`` on the training data.

    Args:
        epsilon: Training ``ε`` of the whole selection.
        delta: ``δ``.
        mean_trials: ``E[K]``.
        distribution: ``"poisson"`` or ``"truncated_negative_binomial"``.
        tnb_eta: ``η`` of the truncated negative binomial.
        clip, beta, tau, sigma_out, factor: As in ``plan_amp_runs``.

    Returns:
        The ``AMPRunBudget``.
    """
    epsilon = check_positive(epsilon, "epsilon", allow_inf=False)
    delta = check_delta(delta)

    def total(curve: Callable) -> float:
        return rdp_curve_epsilon(
            selection_curve(curve, mean_trials=mean_trials, distribution=distribution, tnb_eta=tnb_eta), _ORDERS, delta
        )[0]

    return plan_amp_budget(
        epsilon,
        total_epsilon=total,
        lam_start=2.0 * beta / epsilon,
        clip=clip,
        beta=beta,
        tau=tau,
        sigma_out=sigma_out,
        factor=factor,
        description=f"each AMP trial below one reference RDP curve; Papernot-Steinke selection ({distribution}, "
        f"E[K] = {mean_trials:g}) over reference trials gives epsilon = {epsilon:g} at delta = {delta:g}",
    )


def selection_curve(
    base_rdp: Callable[[float], float], *, mean_trials: float, distribution: str = "poisson", tnb_eta: float = 1.0
) -> np.ndarray:
    r"""The Papernot–Steinke RDP curve of selecting the best of ``K`` runs of a base
    mechanism, on ``DEFAULT_RDP_ORDERS`` (``private_selection_rdp_curve``; the Poisson
    bound takes the base's δ from its RDP curve on the same grid).

    Args:
        base_rdp: ``α ↦ ε(α)`` of one run.
        mean_trials: ``E[K]``.
        distribution: ``"poisson"`` or ``"truncated_negative_binomial"``.
        tnb_eta: ``η`` of the truncated negative binomial.

    Returns:
        The curve's values on ``DEFAULT_RDP_ORDERS``.
    """
    curve = private_selection_rdp_curve(base_rdp, mean_trials=mean_trials, distribution=distribution, tnb_eta=tnb_eta)
    return np.array([curve(float(a)) for a in _ORDERS])


def dp_sgd_curve(*, noise_multiplier: float, sample_rate: float, steps: int) -> RDPCurve:
    r"""The RDP curve ``α ↦ ε(α)`` of one DP-SGD run (``accountants.dp_sgd_rdp``), evaluated
    once on ``DEFAULT_RDP_ORDERS`` (Opacus is imported here, not with the module)."""
    from botorch_dp.privacy.accountants import dp_sgd_rdp

    def curve(alpha):
        alphas = np.atleast_1d(np.asarray(alpha, dtype=np.float64))
        values = dp_sgd_rdp(noise_multiplier=noise_multiplier, sample_rate=sample_rate, steps=steps, orders=alphas)
        return values if np.ndim(alpha) else float(values[0])

    return _grid_cached(curve)


def dp_sgd_noise_for_selection(
    epsilon: float,
    delta: float,
    *,
    sample_rate: float,
    steps: int,
    mean_trials: float,
    distribution: str = "poisson",
    tnb_eta: float = 1.0,
) -> float:
    r"""The smallest DP-SGD noise multiplier whose P&S selection is ``(ε, δ)``-DP.

    "Honest" DP-SGD tuning (Redberg, Koskela & Wang, §5): every trial is a DP-SGD run with the same
    ``(σ, q, T)``; the selection's curve is ``selection_curve`` of the run's
    ``compute_rdp`` curve, converted on ``DEFAULT_RDP_ORDERS``; it decreases in σ, so σ is
    found by bisection on ``log σ``.

    Args:
        epsilon: Training ``ε`` of the selection.
        delta: ``δ``.
        sample_rate: Poisson rate ``q``.
        steps: Steps ``T`` per run.
        mean_trials, distribution, tnb_eta: The selection's number of trials.

    Returns:
        The noise multiplier σ.
    """
    epsilon = check_positive(epsilon, "epsilon", allow_inf=False)
    delta = check_delta(delta)

    def excess(sigma: float) -> float:
        curve = dp_sgd_curve(noise_multiplier=sigma, sample_rate=sample_rate, steps=steps)
        values = selection_curve(curve, mean_trials=mean_trials, distribution=distribution, tnb_eta=tnb_eta)
        return rdp_curve_epsilon(values, _ORDERS, delta)[0] - epsilon

    # compute_rdp slows down for huge noise at large q: search σ ≤ 1e4 to 5 digits
    sigma = _smallest_sigma(excess, 1.0, max_ratio=1e4, rtol=1e-5)
    if sigma is None:
        raise ValueError(
            f"No DP-SGD noise multiplier up to 1e4 reaches epsilon = {epsilon:g} with E[K] = {mean_trials:g}."
        )
    return sigma
