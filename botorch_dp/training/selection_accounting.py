r"""Accounting of private selection over whole DP-SGD training runs: RDP (Papernot & Steinke, ICLR
2022) and the tighter privacy-profile bound (``analysis.selection_profile``), with the choice between them.

One trial is one DP-SGD run (Poisson rate ``q``, ``T`` steps, noise multiplier ``σ``); its
Rényi-DP curve on the ledger's grid ``TRAINING_RDP_ORDERS`` is Opacus's ``compute_rdp``
(``trial_rdp_curve``). Trials that differ in epochs or batch size are all bounded by the
pointwise maximum of their curves over the search space's possible run shapes (public).
The selection's curve is P&S Thm. 2 (truncated negative binomial ``K``), Thm. 6
(Poisson ``K``) or the generic pgf bound (binomial ``K``, ``private_selection``) of that
reference curve (``selection_rdp_curve``), and
``calibrate_selection_noise`` finds the ``σ`` whose selection meets a target ``(ε, δ)``
when converted on the grid, as the ledger converts it. Pure functions of public numbers.

The privacy-profile accounting (``choose_selection_accounting``): the trial's profile is the
pointwise maximum over the run shapes of dp_accounting's PLD profile (``trial_privacy_profile``),
the selection's ``δ(ε)`` bound is ``selection_delta_pld``, and ``calibrate_selection_noise_profile``
finds the smallest ``σ`` meeting the target by it. It is charged as one ``(ε, δ)`` statement
(``ApproximateDP``), so it is used only where it is tighter than RDP at the same ``σ`` (the cross-check).

Overflow: ``compute_rdp`` overflows to ``inf`` or NaN at large orders for some ``(q, σ, T)``;
every non-finite value is read as ``inf``, a valid (vacuous) bound at that order.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from scipy.optimize import brentq

from botorch_dp.privacy.analysis.dp_sgd_selection import dp_sgd_privacy_profile
from botorch_dp.privacy.analysis.private_selection import ALL_DISTRIBUTIONS, private_selection_rdp_curve
from botorch_dp.privacy.analysis.rdp import rdp_curve_delta, rdp_curve_epsilon
from botorch_dp.privacy.analysis.selection_profile import (
    PrivacyProfile,
    max_privacy_profile,
    selection_delta_pld,
    selection_epsilon_pld,
)
from botorch_dp.privacy.checks import check_choice, check_delta, check_greater, check_positive
from botorch_dp.privacy.ledger import TRAINING_RDP_ORDERS

__all__ = [
    "ACCOUNTINGS",
    "SelectionAccounting",
    "calibrate_selection_noise",
    "calibrate_selection_noise_profile",
    "choose_selection_accounting",
    "selection_accounting_at",
    "dp_sgd_runs_epsilon",
    "grid_hat_term",
    "selection_epsilon",
    "selection_profile_epsilon",
    "selection_rdp_curve",
    "trial_privacy_profile",
    "trial_rdp_curve",
]

_ORDERS = np.asarray(TRAINING_RDP_ORDERS, dtype=np.float64)
#: The noise multipliers the calibration searches between.
_SIGMA_RANGE = (1e-2, 1e4)


def trial_rdp_curve(noise_multiplier: float, shapes: Sequence[tuple[float, int]]) -> np.ndarray:
    r"""The reference RDP curve of one trial: the pointwise maximum over the possible run shapes.

    Args:
        noise_multiplier: DP-SGD ``σ > 0`` of every trial.
        shapes: The ``(sample_rate, steps)`` of every run a trial can be (non-empty); the
            maximum over them bounds every trial.

    Returns:
        A float64 array with one ``ε(α) ≥ 0`` per order of ``TRAINING_RDP_ORDERS`` (non-finite
        values of ``compute_rdp`` become ``inf``).
    """
    from botorch_dp.privacy.accountants import dp_sgd_rdp

    if not shapes:
        raise ValueError("shapes must list at least one (sample_rate, steps) run shape.")
    curve = np.zeros_like(_ORDERS)
    with np.errstate(all="ignore"):
        for sample_rate, steps in shapes:
            values = dp_sgd_rdp(
                noise_multiplier=noise_multiplier, sample_rate=sample_rate, steps=int(steps), orders=_ORDERS
            )
            curve = np.maximum(curve, np.where(np.isfinite(values), values, math.inf))
    return curve


def grid_hat_term(trial_rdp: Sequence[float] | np.ndarray) -> Callable[[float], float]:
    r"""P&S Thm. 2's ``L ↦ min_{λ̂ ≥ 1} (1 − 1/λ̂) ε(λ̂) + L/λ̂`` over ``λ̂ ∈ {1} ∪ TRAINING_RDP_ORDERS``.

    Any ``λ̂ ≥ 1`` gives a valid bound, so minimising over the grid is valid (at most slightly
    looser than over all ``λ̂``) and never evaluates ``compute_rdp`` off the grid, where it
    overflows. ``λ̂ = 1`` gives ``L``.
    """
    values = np.asarray(trial_rdp, dtype=np.float64)

    def hat(log_inv_gamma: float) -> float:
        with np.errstate(invalid="ignore"):
            terms = (1.0 - 1.0 / _ORDERS) * values + log_inv_gamma / _ORDERS
        terms = np.where(np.isnan(terms), math.inf, terms)
        return float(min(log_inv_gamma, float(np.min(terms))))

    return hat


def selection_rdp_curve(
    trial_rdp: Sequence[float] | np.ndarray,
    *,
    mean_trials: float,
    distribution: str = "truncated_negative_binomial",
    tnb_eta: float = 1.0,
    binomial_rounds: int | None = None,
) -> np.ndarray:
    r"""The selection's RDP curve on ``TRAINING_RDP_ORDERS`` from one trial's curve on the same grid.

    ``privacy.analysis.private_selection.private_selection_rdp_curve`` with the trial's curve
    as the base: Thm. 2 with the λ̂-minimum over the grid (``grid_hat_term``), or Thm. 6 with the
    trial's δ̂ derived from its curve on the grid (``rdp_curve_delta``).

    Args:
        trial_rdp: ``ε(α)`` of one trial at each grid order (``inf`` allowed).
        mean_trials: ``E[K] > 1``.
        distribution: ``"truncated_negative_binomial"``, ``"poisson"`` or ``"binomial"``.
        tnb_eta: ``η`` of the truncated negative binomial.
        binomial_rounds: ``m`` of ``K ~ Binomial(m, E[K]/m)`` (required for ``"binomial"``).

    Returns:
        A float64 array, one value per grid order.
    """
    check_choice(distribution, "distribution", ALL_DISTRIBUTIONS)
    check_greater(mean_trials, "mean_trials", 1.0)
    values = np.asarray(trial_rdp, dtype=np.float64)
    if values.shape != _ORDERS.shape or np.any(np.isnan(values)) or np.any(values < 0):
        raise ValueError(f"trial_rdp must be {_ORDERS.size} values >= 0 (inf allowed), one per grid order.")
    lookup = dict(zip(_ORDERS.tolist(), values.tolist(), strict=True))

    def base_rdp(order: float) -> float:
        if order not in lookup:
            raise ValueError(f"the trial's curve is known on TRAINING_RDP_ORDERS only, not at order {order!r}.")
        return lookup[order]

    curve = private_selection_rdp_curve(
        base_rdp,
        base_delta=lambda eps_hat: min(1.0, rdp_curve_delta(values, _ORDERS, eps_hat)[0]),
        mean_trials=mean_trials,
        distribution=distribution,
        tnb_eta=tnb_eta,
        binomial_rounds=binomial_rounds,
        tnb_hat_term=grid_hat_term(values),
    )
    return np.array([curve(float(a)) for a in _ORDERS])


def selection_epsilon(selection_rdp: Sequence[float] | np.ndarray, delta: float) -> float:
    r"""``ε`` at ``delta`` of a curve on ``TRAINING_RDP_ORDERS``, converted as the ledger converts it."""
    return rdp_curve_epsilon(np.asarray(selection_rdp, dtype=np.float64), _ORDERS, check_delta(delta))[0]


def dp_sgd_runs_epsilon(
    noise_multiplier: float, sample_rate: float, steps: int, delta: float, *, num_runs: int = 1
) -> float:
    r"""``ε`` at ``delta`` of ``num_runs`` DP-SGD runs of one shape composed (RDP on ``TRAINING_RDP_ORDERS``,
    converted as the ledger converts it; ``num_runs = 1``: one run alone).

    Args:
        noise_multiplier: Each run's ``σ``.
        sample_rate: Each run's Poisson rate ``q``.
        steps: Each run's number of steps ``T``.
        delta: ``δ``.
        num_runs: How many such runs compose (``≥ 1``).

    Returns:
        ``ε`` (``inf`` where the curve is vacuous at every order).
    """
    if isinstance(num_runs, bool) or not isinstance(num_runs, int) or num_runs < 1:
        raise ValueError(f"num_runs must be an integer >= 1, got {num_runs!r}.")
    return selection_epsilon(num_runs * trial_rdp_curve(noise_multiplier, [(sample_rate, steps)]), delta)


def calibrate_selection_noise(
    *,
    target_epsilon: float,
    target_delta: float,
    shapes: Sequence[tuple[float, int]],
    mean_trials: float,
    distribution: str = "truncated_negative_binomial",
    tnb_eta: float = 1.0,
    binomial_rounds: int | None = None,
    rtol: float = 0.005,
) -> float:
    r"""The DP-SGD ``σ`` of every trial whose selection is ``(target_epsilon, target_delta)``-DP.

    The selection's ε (``selection_epsilon`` of ``selection_rdp_curve`` of
    ``trial_rdp_curve(σ, shapes)``) decreases in ``σ`` (every order's value does), so ``σ`` is
    found by ``brentq`` on ``log σ``, aimed at the middle of ``[(1 − rtol)·target, target]``, and
    checked to lie at or below the target.

    Args:
        target_epsilon: ``ε > 0`` of the whole selection on the training records.
        target_delta: ``δ ∈ (0, 1)``.
        shapes: The possible ``(sample_rate, steps)`` of a trial.
        mean_trials: ``E[K] > 1``.
        distribution: ``"truncated_negative_binomial"``, ``"poisson"`` or ``"binomial"``.
        tnb_eta: ``η`` of the truncated negative binomial.
        binomial_rounds: ``m`` of ``K ~ Binomial(m, E[K]/m)`` (required for ``"binomial"``).
        rtol: Relative accuracy of the ε reached (below the target).

    Returns:
        ``σ > 0``.

    Raises:
        ValueError: No ``σ`` up to ``1e4`` reaches the target (the ``log E[K]`` terms alone cost more).
    """
    target_epsilon = check_positive(target_epsilon, "target_epsilon", allow_inf=False)
    target_delta = check_delta(target_delta, "target_delta")
    shapes = tuple((float(q), int(t)) for q, t in shapes)
    return _calibrated(
        target_epsilon, target_delta, shapes, float(mean_trials), distribution, float(tnb_eta), rtol, binomial_rounds
    )


@functools.lru_cache(maxsize=64)
def _calibrated(
    target_epsilon: float,
    target_delta: float,
    shapes: tuple[tuple[float, int], ...],
    mean_trials: float,
    distribution: str,
    tnb_eta: float,
    rtol: float,
    binomial_rounds: int | None = None,
) -> float:
    r"""``calibrate_selection_noise`` on checked, hashable arguments (a pure function: cached)."""

    def epsilon(sigma: float) -> float:
        trial = trial_rdp_curve(sigma, shapes)
        curve = selection_rdp_curve(
            trial, mean_trials=mean_trials, distribution=distribution, tnb_eta=tnb_eta, binomial_rounds=binomial_rounds
        )
        return selection_epsilon(curve, target_delta)

    lo, hi = _SIGMA_RANGE
    if epsilon(hi) > target_epsilon:
        raise ValueError(
            f"epsilon={target_epsilon!r}: even the noise multiplier {hi:g} gives the selection (E[K] = "
            f"{mean_trials:g}, {distribution}) a larger epsilon at delta={target_delta:g}; the selection's "
            "own terms in E[K] cost more. Allow a larger epsilon or fewer expected trials. Nothing was trained."
        )
    # bracket from σ = 1 downwards (compute_rdp is slow at tiny σ): ε(lo) > target ≥ ε(hi)
    lo = 1.0
    while epsilon(lo) <= target_epsilon:
        if lo <= _SIGMA_RANGE[0]:
            return lo
        lo, hi = max(lo / 4.0, _SIGMA_RANGE[0]), lo
    # aim at the middle of the accepted band; ε(σ) is continuous (a minimum of continuous terms) and
    # decreasing, so brentq on log σ converges; an infinite ε is capped to keep its arithmetic finite
    aim = (1.0 - rtol / 2.0) * target_epsilon
    root = brentq(lambda x: min(epsilon(math.exp(x)), 1e6) - aim, math.log(lo), math.log(hi), xtol=2e-4)
    sigma = math.exp(root)
    for _ in range(200):  # a rounding error above the target: step to the side of more noise
        if epsilon(sigma) <= target_epsilon:
            return sigma
        sigma *= 1.0 + 1e-6
    raise RuntimeError(f"The calibration of the selection's noise multiplier did not converge (sigma={sigma!r}).")


# ------------------------------------------------------------------ the privacy-profile accounting
#: How a selection's ε is accounted: ``"profile"`` (its privacy-profile bound, charged as one
#: ``(ε, δ)``), ``"rdp"`` (Papernot–Steinke's RDP curve, charged as a curve), ``"auto"`` (the profile
#: where it is tighter and the ledger can take it, else RDP).
ACCOUNTINGS: tuple[str, ...] = ("auto", "profile", "rdp")
_PROFILE_DISTRIBUTIONS = ALL_DISTRIBUTIONS


@functools.lru_cache(maxsize=16)
def trial_privacy_profile(noise_multiplier: float, shapes: tuple[tuple[float, int], ...]) -> PrivacyProfile:
    r"""The reference privacy profile of one trial: the pointwise maximum over the run shapes of
    dp_accounting's PLD profile (``analysis.dp_sgd_selection.dp_sgd_privacy_profile``, both directions).

    Args:
        noise_multiplier: DP-SGD ``σ > 0`` of every trial.
        shapes: ``(sample_rate, steps)`` of every run a trial can be (non-empty).

    Returns:
        A ``PrivacyProfile`` on ``PROFILE_EPSILONS``.
    """
    if not shapes:
        raise ValueError("shapes must list at least one (sample_rate, steps) run shape.")
    return max_privacy_profile(
        [dp_sgd_privacy_profile(noise_multiplier=noise_multiplier, sample_rate=q, steps=int(t)) for q, t in shapes]
    )


def selection_profile_epsilon(
    noise_multiplier: float,
    *,
    delta: float,
    shapes: Sequence[tuple[float, int]],
    mean_trials: float,
    distribution: str = "truncated_negative_binomial",
    tnb_eta: float = 1.0,
    binomial_rounds: int | None = None,
) -> float:
    r"""``ε`` at ``delta`` of the selection's privacy-profile bound (``selection_epsilon_pld``) over the
    reference trial profile at ``σ = noise_multiplier`` (rounded up to ``1e-4``)."""
    profile = trial_privacy_profile(float(noise_multiplier), tuple((float(q), int(t)) for q, t in shapes))
    return selection_epsilon_pld(
        profile,
        distribution=distribution,
        expected_trials=mean_trials,
        delta=check_delta(delta),
        tnb_eta=tnb_eta,
        max_trials=binomial_rounds,
    )


def calibrate_selection_noise_profile(
    *,
    target_epsilon: float,
    target_delta: float,
    shapes: Sequence[tuple[float, int]],
    mean_trials: float,
    distribution: str = "truncated_negative_binomial",
    tnb_eta: float = 1.0,
    binomial_rounds: int | None = None,
    start: float | None = None,
    rtol: float = 0.005,
) -> float:
    r"""The smallest DP-SGD ``σ`` (to ``rtol``) whose selection meets ``(target_epsilon, target_delta)``
    by the privacy-profile bound: ``selection_delta_pld(profile(σ), target_epsilon) ≤ target_delta``.

    The bound at a fixed ``ε`` decreases in ``σ`` (the trial's profile does), so ``σ`` is bracketed
    downwards from ``start`` (e.g. the RDP-calibrated ``σ``; default 1) and bisected on ``log σ`` until
    the bracket is within ``rtol``; the upper end, which meets the target, is returned.

    Args:
        target_epsilon: ``ε > 0`` of the whole selection on the training records.
        target_delta: ``δ ∈ (0, 1)``.
        shapes: The possible ``(sample_rate, steps)`` of a trial.
        mean_trials: ``E[K] > 1``.
        distribution: ``"truncated_negative_binomial"``, ``"poisson"`` or ``"binomial"``.
        tnb_eta: ``η`` of the truncated negative binomial.
        binomial_rounds: ``m`` of ``K ~ Binomial(m, E[K]/m)`` (required for ``"binomial"``).
        start: A first guess of ``σ`` (default 1).
        rtol: Relative width of the final bracket on ``σ``.

    Returns:
        ``σ > 0``.

    Raises:
        ValueError: No ``σ`` up to ``1e4`` meets the target.
    """
    target_epsilon = check_positive(target_epsilon, "target_epsilon", allow_inf=False)
    target_delta = check_delta(target_delta, "target_delta")
    check_choice(distribution, "distribution", _PROFILE_DISTRIBUTIONS)
    shapes = tuple((float(q), int(t)) for q, t in shapes)
    start = 1.0 if start is None else check_positive(start, "start", allow_inf=False)
    args = (target_epsilon, target_delta, shapes, float(mean_trials), distribution, float(tnb_eta))
    return _calibrated_profile(*args, float(start), float(rtol), binomial_rounds)


@functools.lru_cache(maxsize=64)
def _calibrated_profile(
    target_epsilon: float,
    target_delta: float,
    shapes: tuple[tuple[float, int], ...],
    mean_trials: float,
    distribution: str,
    tnb_eta: float,
    start: float,
    rtol: float,
    binomial_rounds: int | None = None,
) -> float:
    def meets(sigma: float) -> bool:
        profile = trial_privacy_profile(sigma, shapes)
        bound = selection_delta_pld(
            profile,
            target_epsilon,
            distribution=distribution,
            expected_trials=mean_trials,
            tnb_eta=tnb_eta,
            max_trials=binomial_rounds,
        )
        return bound <= target_delta

    hi = min(max(start, _SIGMA_RANGE[0]), _SIGMA_RANGE[1])
    while not meets(hi):  # the bracket's upper end: up from start
        if hi >= _SIGMA_RANGE[1]:
            raise ValueError(
                f"epsilon={target_epsilon!r}: even the noise multiplier {hi:g} gives the selection (E[K] = "
                f"{mean_trials:g}, {distribution}) a larger epsilon at delta={target_delta:g} by its privacy "
                "profile. Allow a larger epsilon or fewer expected trials. Nothing was trained."
            )
        hi = min(hi * 2.0, _SIGMA_RANGE[1])
    lo = hi / 1.25
    while meets(lo):  # ... and its lower end: down from it
        if lo <= _SIGMA_RANGE[0]:
            return lo
        lo, hi = max(lo / 1.25, _SIGMA_RANGE[0]), lo
    while hi / lo > 1.0 + rtol:
        mid = math.sqrt(lo * hi)
        lo, hi = (lo, mid) if meets(mid) else (mid, hi)
    return hi


@dataclass(frozen=True)
class SelectionAccounting:
    r"""How a selection over DP-SGD runs is accounted and charged (``choose_selection_accounting``).

    Attributes:
        accounting: ``"profile"`` (charged as one ``(ε, δ)``: the privacy-profile bound) or ``"rdp"``
            (charged as the Papernot–Steinke RDP curve).
        reason: Why (in words).
        noise_multiplier: DP-SGD ``σ`` of every trial.
        epsilon: The selection's ``ε`` at ``delta`` by the accounting used (what is charged and stated).
        rdp_curve: The selection's RDP curve at ``σ`` on ``TRAINING_RDP_ORDERS`` (the cross-check; the
            charge when ``accounting == "rdp"``).
        rdp_epsilon: Its ``ε`` at ``delta`` (``≥ epsilon`` when the profile is used).
        rdp_noise_multiplier: The ``σ`` the RDP calibration alone gives (``≥ noise_multiplier``;
            ``noise_multiplier`` itself for a selection charged at a given ``σ``: ``selection_accounting_at``).
    """

    accounting: str
    reason: str
    noise_multiplier: float
    epsilon: float
    rdp_curve: np.ndarray
    rdp_epsilon: float
    rdp_noise_multiplier: float


def choose_selection_accounting(
    *,
    accounting: str,
    target_epsilon: float,
    target_delta: float,
    shapes: Sequence[tuple[float, int]],
    mean_trials: float,
    distribution: str = "truncated_negative_binomial",
    tnb_eta: float = 1.0,
    binomial_rounds: int | None = None,
    profile_refused: str | None = None,
) -> SelectionAccounting:
    r"""Calibrate every trial's ``σ`` by the accounting asked for and say what is charged.

    ``"rdp"``: ``calibrate_selection_noise``. ``"profile"``: ``calibrate_selection_noise_profile``,
    with the RDP bound as a cross-check — the profile's ``ε`` at that ``σ`` must not exceed the RDP
    ``ε`` at the same ``σ``, else the RDP calibration is used (and said). ``"auto"``: the profile where
    it gives a smaller ``σ`` than RDP and ``profile_refused`` is None, else RDP.

    Args:
        accounting: One of ``ACCOUNTINGS``.
        target_epsilon, target_delta: The selection's target ``(ε, δ)`` on the training records.
        shapes: The possible ``(sample_rate, steps)`` of a trial.
        mean_trials: ``E[K] > 1``.
        distribution: ``"truncated_negative_binomial"``, ``"poisson"`` or ``"binomial"``.
        tnb_eta: ``η`` of the truncated negative binomial.
        binomial_rounds: ``m`` of ``K ~ Binomial(m, E[K]/m)`` (required for ``"binomial"``).
        profile_refused: Why the ledger cannot take a profile charge (``None``: it can); ``"profile"``
            is then refused (``ValueError``) and ``"auto"`` uses RDP.

    Returns:
        A ``SelectionAccounting``.
    """
    check_choice(accounting, "accounting", ACCOUNTINGS)
    if accounting == "profile" and profile_refused is not None:
        raise ValueError(f"accounting='profile': {profile_refused} Use accounting='rdp' (or 'auto').")
    k_args: dict[str, Any] = dict(
        mean_trials=mean_trials, distribution=distribution, tnb_eta=tnb_eta, binomial_rounds=binomial_rounds
    )
    sigma_rdp = calibrate_selection_noise(
        target_epsilon=target_epsilon, target_delta=target_delta, shapes=shapes, **k_args
    )

    def rdp_at(sigma: float) -> tuple[np.ndarray, float]:
        curve = selection_rdp_curve(trial_rdp_curve(sigma, shapes), **k_args)
        return curve, selection_epsilon(curve, target_delta)

    def rdp(reason: str) -> SelectionAccounting:
        curve, eps = rdp_at(sigma_rdp)
        return SelectionAccounting("rdp", reason, sigma_rdp, eps, curve, eps, sigma_rdp)

    if accounting == "rdp":
        return rdp("accounting='rdp' was asked for")
    if profile_refused is not None:
        return rdp(f"accounting='auto' uses RDP: {profile_refused}")
    sigma = calibrate_selection_noise_profile(
        target_epsilon=target_epsilon, target_delta=target_delta, shapes=shapes, start=sigma_rdp, **k_args
    )
    eps = selection_profile_epsilon(sigma, delta=target_delta, shapes=shapes, **k_args)
    curve, rdp_eps = rdp_at(sigma)
    if eps > rdp_eps or eps > target_epsilon:
        return rdp(
            f"the privacy-profile bound (epsilon = {eps:.4g} at noise_multiplier = {sigma:.4g}) was not below "
            f"the RDP bound ({rdp_eps:.4g}) at the same noise, so the RDP calibration is used"
        )
    if accounting == "auto" and sigma >= sigma_rdp:
        return rdp(
            f"accounting='auto' uses RDP: the profile bound needs no less noise ({sigma:.4g} >= {sigma_rdp:.4g})"
        )
    reason = (
        f"accounting={accounting!r}: the privacy-profile bound needs noise_multiplier = {sigma:.4g} against "
        f"{sigma_rdp:.4g} by RDP for epsilon <= {target_epsilon:g}; cross-check: RDP states epsilon = "
        f"{rdp_eps:.4g} >= {eps:.4g} at the same noise"
    )
    return SelectionAccounting("profile", reason, sigma, eps, curve, rdp_eps, sigma_rdp)


def selection_accounting_at(
    *,
    noise_multiplier: float,
    accounting: str,
    target_epsilon: float,
    target_delta: float,
    shapes: Sequence[tuple[float, int]],
    mean_trials: float,
    distribution: str = "truncated_negative_binomial",
    tnb_eta: float = 1.0,
    binomial_rounds: int | None = None,
    profile_refused: str | None = None,
    name: str = "noise_multiplier",
) -> SelectionAccounting:
    r"""The charge of a selection whose reference trial has a GIVEN ``σ`` (not calibrated), checked
    against the target ``(ε, δ)``.

    Used where the space searches the noise multiplier: the reference is the space's least ``σ``, whose
    curve bounds every trial's (a noisier run is a post-processing of it). The accounting is chosen as in
    ``choose_selection_accounting`` at that ``σ``: ``"rdp"``; ``"profile"`` where its ``ε`` is at most
    RDP's at the same ``σ`` (the cross-check; else RDP, said); ``"auto"``: the profile where it is
    tighter and ``profile_refused`` is None, else RDP.

    Args:
        noise_multiplier: The reference trial's ``σ > 0``.
        accounting: One of ``ACCOUNTINGS``.
        target_epsilon, target_delta: The selection's budget ``(ε, δ)`` on the training records; the
            charge's ``ε`` must be at most ``target_epsilon``.
        shapes: The possible ``(sample_rate, steps)`` of a trial.
        mean_trials, distribution, tnb_eta, binomial_rounds: ``K``'s distribution.
        profile_refused: Why the ledger cannot take a profile charge (``None``: it can).
        name: What ``noise_multiplier`` is called in the error (the argument the caller gave).

    Returns:
        A ``SelectionAccounting`` at ``σ = noise_multiplier`` (``epsilon ≤ target_epsilon``).

    Raises:
        ValueError: ``σ`` is below the least noise at which the selection meets the target (the error
            names that least ``σ``, calibrated by ``choose_selection_accounting``), or
            ``accounting="profile"`` where the ledger refuses it.
    """
    sigma = check_positive(noise_multiplier, name, allow_inf=False)
    target_epsilon = check_positive(target_epsilon, "target_epsilon", allow_inf=False)
    target_delta = check_delta(target_delta, "target_delta")
    check_choice(accounting, "accounting", ACCOUNTINGS)
    if accounting == "profile" and profile_refused is not None:
        raise ValueError(f"accounting='profile': {profile_refused} Use accounting='rdp' (or 'auto').")
    k_args: dict[str, Any] = dict(
        mean_trials=mean_trials, distribution=distribution, tnb_eta=tnb_eta, binomial_rounds=binomial_rounds
    )
    curve = selection_rdp_curve(trial_rdp_curve(sigma, shapes), **k_args)
    rdp_eps = selection_epsilon(curve, target_delta)
    charge = SelectionAccounting(
        "rdp",
        f"accounting={accounting!r} at the given {name} = {sigma:.6g}: RDP",
        sigma,
        rdp_eps,
        curve,
        rdp_eps,
        sigma,
    )
    if accounting == "auto" and profile_refused is not None:
        charge = replace(charge, reason=f"accounting='auto' uses RDP: {profile_refused}")
    elif accounting != "rdp":
        eps = selection_profile_epsilon(sigma, delta=target_delta, shapes=shapes, **k_args)
        if eps <= rdp_eps:
            reason = (
                f"accounting={accounting!r}: the privacy-profile bound states epsilon = {eps:.4g} at the given "
                f"{name} = {sigma:.6g}; cross-check: RDP states epsilon = {rdp_eps:.4g} >= {eps:.4g} there"
            )
            charge = SelectionAccounting("profile", reason, sigma, eps, curve, rdp_eps, sigma)
        else:
            charge = replace(
                charge,
                reason=f"the privacy-profile bound (epsilon = {eps:.4g}) was not below the RDP bound ({rdp_eps:.4g}) "
                f"at {name} = {sigma:.6g}, so RDP is used",
            )
    if charge.epsilon > target_epsilon:
        least = choose_selection_accounting(
            accounting=accounting,
            target_epsilon=target_epsilon,
            target_delta=target_delta,
            shapes=shapes,
            profile_refused=profile_refused,
            **k_args,
        ).noise_multiplier
        raise ValueError(
            f"{name}={sigma:g}: below {least:.4g}, the least noise multiplier at which the selection (E[K] = "
            f"{mean_trials:g}, {distribution}) meets epsilon={target_epsilon:g} at delta={target_delta:g} "
            f"(at {sigma:g} it states epsilon = {charge.epsilon:.4g}); search noise_multiplier at or above "
            f"{least:.4g}, or allow a larger epsilon. Nothing was trained."
        )
    return charge
