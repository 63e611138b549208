r"""Privacy analysis of DP-HyPO: private selection with an adaptive, ratio-bounded sampling density.

DP-HyPO (Wang, Gao, Zhang, Su and Shen, "DP-HyPO: An Adaptive Private Hyperparameter
Optimization Framework", NeurIPS 2023) runs a random number ``K`` of trials, as in
Papernot & Steinke (2022), but trial ``j`` draws its hyperparameter ``λ_j`` from a density
``π_j`` chosen from the (hidden) outputs of the earlier trials, under the constraint

    ``c ≤ π_j(λ)/π_0(λ) ≤ C``  for every ``λ`` (``c ≤ 1 ≤ C``, ``π_0`` the prior),

and releases the best trial. Its Rényi-DP curve is the Papernot–Steinke curve of the
non-adaptive search with prior ``π_0`` (``analysis.private_selection``) plus an adaptivity
term that vanishes at ``c = C = 1``:

    ``ε_HyPO(λ) = ε_PS(λ) + (λ/(λ − 1)) log U + log(1/L)``

with, for ``K`` truncated negative binomial ``D_{η,γ}`` and for ``K ~ Poisson(m)``,

    ``U = C c^{−(1+η)}``, ``L = c C^{−(1+η)}``;   ``U = C e^{mκ}``, ``L = c e^{−mκ}``,
    ``κ = (C − 1)(1 − c)/(C − c)`` (``κ = 0`` when ``C = 1`` or ``c = 1``).

Derivation (written here because the paper's text was not available to this project; the
structure follows the paper — bound the adaptive output density by the non-adaptive one
using the ratio constraint, then apply P&S — but the constants are this module's own and
may be looser than the paper's). Scores are continuous (Gaussian noise), so ties have
probability 0 (for a base with ties, an independent uniform tie-break makes them so without
changing its RDP). Let ``f(λ, y) = π_0(λ) q_λ(y)`` be one non-adaptive trial's output
density on a dataset and ``F(y)`` its probability of scoring worse than ``y``. Given any
history, an adaptive trial scores worse than ``y`` with probability
``∫ π_j(λ) P[q_λ worse than y] dλ ∈ [a(y), b(y)]``, ``a = max(cF, 1 − C(1 − F))``,
``b = min(CF, 1 − c(1 − F))``, and outputs ``(λ, y)`` with density ``∈ [c f, C f]``.
Multiplying the conditional bounds along the trials, the output density of the adaptive
best-of-``K`` satisfies ``c f φ'(a) ≤ p ≤ C f φ'(b)`` with ``φ`` the probability generating
function of ``K``, while the non-adaptive one is exactly ``p_PS = f φ'(F)``. For the
truncated negative binomial ``φ'(x) ∝ (1 − (1 − γ)x)^{−(1+η)}``, and
``1 − (1 − γ)b ≥ c(1 − (1 − γ)F)``, ``1 − (1 − γ)a ≤ C(1 − (1 − γ)F)``; for the Poisson
``φ'(x) ∝ e^{mx}`` and ``|b − F|, |a − F| ≤ κ``. Hence ``p_D ≤ U p_PS,D`` and
``p_D′ ≥ L p_PS,D′`` pointwise (the ``K = 0`` atom of the Poisson is the same on both sides
and ``U^λ L^{1−λ} ≥ 1``), so ``∫ p_D^λ p_D′^{1−λ} ≤ U^λ L^{1−λ} ∫ p_PS,D^λ p_PS,D′^{1−λ}``:
the curve above. Pure functions on floats; the method is ``baselines.dp_hypo``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from botorch_dp.privacy.analysis.private_selection import (
    DISTRIBUTIONS,
    private_selection_rdp,
    private_selection_rdp_curve,
)
from botorch_dp.privacy.analysis.rdp import DEFAULT_RDP_ORDERS, rdp_curve_epsilon, rdp_to_epsilon
from botorch_dp.privacy.checks import check_choice, check_delta, check_greater, check_positive

__all__ = [
    "adaptivity_log_factors",
    "check_ratio_bounds",
    "dp_hypo_epsilon",
    "dp_hypo_epsilon_generic",
    "dp_hypo_per_trial_mu_for_epsilon",
    "dp_hypo_rdp",
    "dp_hypo_rdp_curve",
]

RDPCurve = Callable[[float], float]


def check_ratio_bounds(ratio_upper: float, ratio_lower: float | None = None) -> tuple[float, float]:
    r"""``(C, c)`` of the density-ratio class ``c ≤ π/π_0 ≤ C``, checked.

    A density and its prior both integrate to 1, so the class is non-empty only for
    ``c ≤ 1 ≤ C``.

    Args:
        ratio_upper: ``C ≥ 1``, finite.
        ratio_lower: ``c ∈ (0, 1]``; ``None``: ``1/C`` (a symmetric bound on ``|log π/π_0|``).

    Returns:
        ``(C, c)`` as floats.
    """
    upper = check_positive(ratio_upper, "ratio_upper (C)", allow_inf=False)
    if upper < 1.0:
        raise ValueError(
            f"ratio_upper (C) must be >= 1 (a density cannot lie below its prior everywhere), got {upper!r}."
        )
    if ratio_lower is None:
        return upper, 1.0 / upper
    lower = check_positive(ratio_lower, "ratio_lower (c)", allow_inf=False)
    if lower > 1.0:
        raise ValueError(f"ratio_lower (c) must be <= 1 (a density cannot exceed its prior everywhere), got {lower!r}.")
    return upper, lower


def adaptivity_log_factors(
    *,
    ratio_upper: float,
    ratio_lower: float | None = None,
    mean_trials: float,
    distribution: str = "truncated_negative_binomial",
    tnb_eta: float = 1.0,
) -> tuple[float, float]:
    r"""``(log U, log(1/L))``: the adaptive output density is at most ``U`` times the
    non-adaptive one on the first dataset and at least ``L`` times it on the second
    (see the module docstring).

    Args:
        ratio_upper: ``C ≥ 1``.
        ratio_lower: ``c ∈ (0, 1]`` (``None``: ``1/C``).
        mean_trials: ``E[K]`` (the Poisson factors depend on it).
        distribution: ``"truncated_negative_binomial"`` or ``"poisson"``.
        tnb_eta: ``η ∈ (−1, ∞)`` of the truncated negative binomial.

    Returns:
        ``(log U, log(1/L))``, both ``≥ 0`` and both ``0`` when ``C = c = 1``.
    """
    check_choice(distribution, "distribution", DISTRIBUTIONS)
    upper, lower = check_ratio_bounds(ratio_upper, ratio_lower)
    mean_trials = check_positive(mean_trials, "mean_trials", allow_inf=False)
    log_upper, log_inv_lower = math.log(upper), -math.log(lower)
    if distribution == "poisson":
        kappa = 0.0 if upper == lower else (upper - 1.0) * (1.0 - lower) / (upper - lower)
        return log_upper + mean_trials * kappa, log_inv_lower + mean_trials * kappa
    power = 1.0 + check_greater(tnb_eta, "tnb_eta", -1.0)
    return log_upper + power * log_inv_lower, log_inv_lower + power * log_upper


def dp_hypo_rdp_curve(
    base_rdp: RDPCurve,
    *,
    base_delta: Callable[[float], float] | None = None,
    mean_trials: float,
    ratio_upper: float,
    ratio_lower: float | None = None,
    distribution: str = "truncated_negative_binomial",
    tnb_eta: float = 1.0,
    tnb_hat_term: Callable[[float], float] | None = None,
) -> RDPCurve:
    r"""The Rényi-DP curve ``λ ↦ ε'(λ)`` of DP-HyPO over a base mechanism.

    ``ε'(λ) = ε_PS(λ) + (λ/(λ − 1)) log U + log(1/L)`` where ``ε_PS`` is
    ``private_selection_rdp_curve`` with the same arguments (the non-adaptive search with
    the prior) and ``(log U, log(1/L))`` is ``adaptivity_log_factors``. At
    ``C = c = 1`` it is ``ε_PS`` exactly.

    Args:
        base_rdp: ``α ↦ ε(α)``, the RDP curve of one trial at any fixed hyperparameter.
        base_delta: ``ε ↦ δ(ε)`` of one trial (Poisson bound; ``None``: from ``base_rdp``).
        mean_trials: ``E[K]``.
        ratio_upper: ``C ≥ 1``.
        ratio_lower: ``c ∈ (0, 1]`` (``None``: ``1/C``).
        distribution: ``"truncated_negative_binomial"`` or ``"poisson"``.
        tnb_eta: ``η ∈ (−1, ∞)``.
        tnb_hat_term: Optional closed form of P&S's λ̂-minimum (see
            ``private_selection_rdp_curve``).

    Returns:
        The curve, a function of the order ``λ > 1``.
    """
    log_u, log_inv_l = adaptivity_log_factors(
        ratio_upper=ratio_upper,
        ratio_lower=ratio_lower,
        mean_trials=mean_trials,
        distribution=distribution,
        tnb_eta=tnb_eta,
    )
    selection = private_selection_rdp_curve(
        base_rdp,
        base_delta=base_delta,
        mean_trials=mean_trials,
        distribution=distribution,
        tnb_eta=tnb_eta,
        tnb_hat_term=tnb_hat_term,
    )

    def curve(order: float) -> float:
        order = check_greater(order, "order", 1.0)
        return selection(order) + order / (order - 1.0) * log_u + log_inv_l

    return curve


def dp_hypo_epsilon_generic(
    base_rdp: RDPCurve,
    *,
    mean_trials: float,
    ratio_upper: float,
    target_delta: float,
    ratio_lower: float | None = None,
    base_delta: Callable[[float], float] | None = None,
    distribution: str = "truncated_negative_binomial",
    tnb_eta: float = 1.0,
    tnb_hat_term: Callable[[float], float] | None = None,
    orders: Sequence[float] | None = None,
) -> float:
    r"""``ε`` at ``δ = target_delta`` of DP-HyPO over a base mechanism.

    ``dp_hypo_rdp_curve`` converted with the one rule of ``analysis.rdp``: over a
    continuous order (``rdp_to_epsilon``) when ``orders`` is ``None``, else on the grid
    (``rdp_curve_epsilon``, e.g. ``DEFAULT_RDP_ORDERS``, the ledger's grid).

    Args:
        base_rdp: ``α ↦ ε(α)`` of one trial.
        mean_trials: ``E[K]``.
        ratio_upper: ``C ≥ 1``.
        target_delta: ``δ ∈ (0, 1)``.
        ratio_lower: ``c ∈ (0, 1]`` (``None``: ``1/C``).
        base_delta: ``ε ↦ δ(ε)`` of one trial (Poisson bound).
        distribution: ``"truncated_negative_binomial"`` or ``"poisson"``.
        tnb_eta: ``η ∈ (−1, ∞)``.
        tnb_hat_term: Optional closed form of P&S's λ̂-minimum.
        orders: ``None`` (continuous) or a grid of orders ``> 1``.

    Returns:
        ``ε ≥ 0``.
    """
    target_delta = check_delta(target_delta, "target_delta")
    curve = dp_hypo_rdp_curve(
        base_rdp,
        base_delta=base_delta,
        mean_trials=mean_trials,
        ratio_upper=ratio_upper,
        ratio_lower=ratio_lower,
        distribution=distribution,
        tnb_eta=tnb_eta,
        tnb_hat_term=tnb_hat_term,
    )
    if orders is None:
        return rdp_to_epsilon(curve, target_delta)[0]
    return rdp_curve_epsilon([curve(float(a)) for a in orders], orders, target_delta)[0]


def dp_hypo_rdp(
    order: float,
    *,
    per_trial_mu: float,
    mean_trials: float,
    ratio_upper: float,
    ratio_lower: float | None = None,
    distribution: str = "truncated_negative_binomial",
    tnb_eta: float = 1.0,
) -> float:
    r"""Rényi-DP ``ε'(λ)`` of DP-HyPO with μ₀-GDP Gaussian scores (``GaussianScoreMechanism``).

    ``private_selection_rdp`` (base curve ``λμ₀²/2``, closed-form λ̂, exact Gaussian
    profile for the Poisson bound) plus the adaptivity term of ``dp_hypo_rdp_curve``.

    Args:
        order: ``λ > 1``.
        per_trial_mu: ``μ₀``, GDP parameter of one trial.
        mean_trials: ``E[K]``.
        ratio_upper: ``C ≥ 1``.
        ratio_lower: ``c ∈ (0, 1]`` (``None``: ``1/C``).
        distribution: ``"truncated_negative_binomial"`` or ``"poisson"``.
        tnb_eta: ``η ∈ (−1, ∞)``.

    Returns:
        ``ε'(λ)``.
    """
    order = check_greater(order, "order", 1.0)
    log_u, log_inv_l = adaptivity_log_factors(
        ratio_upper=ratio_upper,
        ratio_lower=ratio_lower,
        mean_trials=mean_trials,
        distribution=distribution,
        tnb_eta=tnb_eta,
    )
    selection = private_selection_rdp(
        order, per_trial_mu=per_trial_mu, mean_trials=mean_trials, distribution=distribution, tnb_eta=tnb_eta
    )
    return selection + order / (order - 1.0) * log_u + log_inv_l


def dp_hypo_epsilon(
    *,
    per_trial_mu: float,
    mean_trials: float,
    ratio_upper: float,
    target_delta: float,
    ratio_lower: float | None = None,
    distribution: str = "truncated_negative_binomial",
    tnb_eta: float = 1.0,
    orders: Sequence[float] | None = None,
) -> float:
    r"""``ε`` at ``δ = target_delta`` of DP-HyPO with μ₀-GDP Gaussian scores.

    Args:
        per_trial_mu: ``μ₀``.
        mean_trials: ``E[K]``.
        ratio_upper: ``C ≥ 1``.
        target_delta: ``δ ∈ (0, 1)``.
        ratio_lower: ``c ∈ (0, 1]`` (``None``: ``1/C``).
        distribution: ``"truncated_negative_binomial"`` or ``"poisson"``.
        tnb_eta: ``η ∈ (−1, ∞)``.
        orders: ``None`` (continuous order) or a grid (e.g. ``DEFAULT_RDP_ORDERS``).

    Returns:
        ``ε ≥ 0``.
    """
    target_delta = check_delta(target_delta, "target_delta")
    per_trial_mu = check_positive(per_trial_mu, "per_trial_mu", allow_inf=False)
    curve = lambda order: dp_hypo_rdp(
        order,
        per_trial_mu=per_trial_mu,
        mean_trials=mean_trials,
        ratio_upper=ratio_upper,
        ratio_lower=ratio_lower,
        distribution=distribution,
        tnb_eta=tnb_eta,
    )
    if orders is None:
        return rdp_to_epsilon(curve, target_delta)[0]
    return rdp_curve_epsilon([curve(float(a)) for a in orders], orders, target_delta)[0]


def dp_hypo_per_trial_mu_for_epsilon(
    *,
    target_epsilon: float,
    target_delta: float,
    mean_trials: float,
    ratio_upper: float,
    ratio_lower: float | None = None,
    distribution: str = "truncated_negative_binomial",
    tnb_eta: float = 1.0,
    orders: Sequence[float] | None = DEFAULT_RDP_ORDERS,
) -> float:
    r"""The largest per-trial ``μ₀`` whose DP-HyPO run is ``(target_epsilon, target_delta)``-DP.

    ``dp_hypo_epsilon`` increases in ``μ₀``; its root is found by ``brentq`` on ``log μ₀``
    and, if rounding left it above the target, moved just below, so the returned ``μ₀``
    never exceeds the target. The DP-HyPO twin of
    ``private_selection.per_trial_mu_for_epsilon``.

    Args:
        target_epsilon: ``ε > 0`` that the whole run may spend.
        target_delta: ``δ ∈ (0, 1)``.
        mean_trials, ratio_upper, ratio_lower, distribution, tnb_eta: As ``dp_hypo_epsilon``.
        orders: The order grid (default ``DEFAULT_RDP_ORDERS``, the ledger's and what
            ``baselines.dp_hypo`` reports); ``None``: continuous order.

    Returns:
        ``μ₀ > 0``.

    Raises:
        ValueError: If even a vanishing ``μ₀`` exceeds the target.
    """
    from scipy.optimize import brentq

    target_epsilon = check_positive(target_epsilon, "target_epsilon", allow_inf=False)

    def gap(log_mu: float) -> float:
        return (
            dp_hypo_epsilon(
                per_trial_mu=math.exp(log_mu),
                mean_trials=mean_trials,
                ratio_upper=ratio_upper,
                ratio_lower=ratio_lower,
                target_delta=target_delta,
                distribution=distribution,
                tnb_eta=tnb_eta,
                orders=orders,
            )
            - target_epsilon
        )

    lo, hi, xtol = math.log(1e-6), math.log(1e2), 1e-12
    if gap(lo) >= 0:
        raise ValueError(
            f"DP-HyPO cannot reach epsilon={target_epsilon} with E[K]={mean_trials} and ratio {ratio_upper}; "
            "allow a larger epsilon, fewer trials or a smaller ratio."
        )
    root = brentq(gap, lo, hi, xtol=xtol)
    if gap(root) > 0:  # brentq's root is within xtol on either side: step to the safe side
        root -= 2 * xtol
    return math.exp(root)
