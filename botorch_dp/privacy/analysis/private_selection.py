r"""Privacy analysis of private selection (Papernot & Steinke, ICLR 2022).

Releasing the best of ``K`` runs of a mechanism, with ``K`` drawn from a truncated
negative binomial ``D_{η,γ}`` (η = 1: geometric, η = 0: logarithmic) or a Poisson
distribution, is Rényi-DP with the bounds of P&S Thm. 2 (truncated negative binomial)
and Thm. 6 (Poisson); ``analysis.rdp.rdp_to_epsilon`` converts them to ``(ε, δ)``. For a
binomial ``K ~ Binomial(m, γ)`` (Koskela, Redberg & Wang, ICML 2024) the bound is P&S's
generic probability-generating-function bound, derived and computed here
(``_pgf_selection_curve``) for any ``K`` with the mass of the empty output ``⊥`` (``K = 0``)
kept explicit.
The base mechanism (one run) is given by its RDP curve ``α ↦ ε(α)`` and, for the
Poisson bound, its privacy profile ``ε ↦ δ(ε)`` (``private_selection_rdp_generic``,
``private_selection_epsilon_generic``), e.g. an AMP training run
(``analysis.objective_perturbation``) or a DP-SGD run. The μ₀-GDP Gaussian score of
private random search (``privacy.mechanisms.GaussianScoreMechanism``) is the special
case ``private_selection_rdp``/``private_selection_epsilon``. Pure functions on floats; the
method itself is ``baselines.private_random_search``. The distributions of ``K`` (their means,
pmf and draws) are in ``private_selection_trials``, and stay importable from here.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence

import numpy as np

from botorch_dp.privacy.analysis.gdp import gdp_delta
from botorch_dp.privacy.analysis.private_selection_trials import (
    ALL_DISTRIBUTIONS,
    DISTRIBUTIONS,
    binomial_probability,
    num_trials_tail,
    poisson_mean_for_tail,
    sample_num_trials,
    tnb_gamma_for_mean,
    tnb_log_pmf,
    tnb_mean,
)
from botorch_dp.privacy.analysis.rdp import DEFAULT_RDP_ORDERS, rdp_curve_delta, rdp_curve_epsilon, rdp_to_epsilon
from botorch_dp.privacy.checks import check_choice, check_delta, check_greater, check_positive

__all__ = [
    "ALL_DISTRIBUTIONS",
    "DISTRIBUTIONS",
    "num_trials_tail",
    "per_trial_mu_for_epsilon",
    "poisson_mean_for_tail",
    "private_selection_epsilon",
    "private_selection_epsilon_generic",
    "private_selection_rdp",
    "private_selection_rdp_curve",
    "private_selection_rdp_generic",
    "sample_num_trials",
    "tnb_gamma_for_mean",
    "tnb_log_pmf",
    "tnb_mean",
]


# ---------------------------------------------------------------------------- accounting
RDPCurve = Callable[[float], float]

# log(λ̂ − 1) grid for the numerical minimisation over λ̂ in P&S Thm. 2, and its largest end
_HAT_START, _HAT_STOP, _HAT_POINTS, _HAT_LIMIT = math.log(1e-3), math.log(1e6), 241, math.log(1e15)


def _base_value(base_rdp: RDPCurve, order: float) -> float:
    r"""``base_rdp(order)`` as a float; a non-finite value (NaN, ``±inf``) reads as ``inf``.

    ``inf`` claims nothing at that order, so it is always a valid RDP bound. Opacus's
    ``compute_rdp`` overflows to NaN at large orders for some ``(q, σ, steps)`` (e.g.
    ``q = 0.0625``, ``σ = 3``, 240 steps: NaN from order ≈ 1091), where the true value is
    large; reading it as ``inf`` leaves every other order's bound intact. A finite negative
    value is refused (no Rényi divergence is negative).
    """
    value = float(base_rdp(order))
    if not math.isfinite(value):
        return math.inf
    if value < 0.0:
        raise ValueError(f"base_rdp must return values >= 0 (inf allowed); got {value!r} at order {order!r}.")
    return value


def _numerical_tnb_hat_term(base_rdp: RDPCurve, log_inv_gamma: float) -> float:
    r"""``min_{λ̂ ≥ 1} (1 − 1/λ̂) ε(λ̂) + log(1/γ)/λ̂`` for a general RDP curve.

    ``λ̂ = 1`` gives ``log(1/γ)`` (the first term vanishes; ``ε(1) ≤ ε(λ)`` is finite when
    the curve is). Otherwise a log-spaced grid of ``λ̂ − 1 ∈ [1e-3, 1e6]`` (extended up to
    ``1e15`` while the minimum is at its top), refined by a bounded scalar search between
    the neighbours of the best grid point. Any ``λ̂`` gives a valid bound, so an inexact
    minimum is only slightly loose, never wrong.
    """
    from scipy.optimize import minimize_scalar

    def g(x: float) -> float:
        order_hat = 1.0 + math.exp(x)
        return (1.0 - 1.0 / order_hat) * _base_value(base_rdp, order_hat) + log_inv_gamma / order_hat

    grid = list(np.linspace(_HAT_START, _HAT_STOP, _HAT_POINTS))
    values = [g(x) for x in grid]
    step = grid[1] - grid[0]
    while int(np.argmin(values)) == len(grid) - 1 and grid[-1] + step <= _HAT_LIMIT:
        more = [grid[-1] + step * k for k in range(1, 61) if grid[-1] + step * k <= _HAT_LIMIT]
        grid, values = grid + more, values + [g(x) for x in more]
    i = int(np.argmin(values))
    best = values[i]
    lo, hi = grid[max(i - 1, 0)], grid[min(i + 1, len(grid) - 1)]
    if math.isfinite(best) and hi > lo:
        res = minimize_scalar(g, bounds=(lo, hi), method="bounded", options={"xatol": 1e-10})
        best = min(best, float(res.fun))
    return min(best, log_inv_gamma)


def _zcdp_tnb_hat_term(rho: float, log_inv_gamma: float) -> float:
    r"""The λ̂-term of P&S Thm. 2 for the curve ``ε(λ) = λρ``: minimised in closed form at
    ``λ̂ = max(1, sqrt(log(1/γ)/ρ))``, value ``(λ̂ − 1)ρ + log(1/γ)/λ̂``."""
    order_hat = max(1.0, math.sqrt(log_inv_gamma / rho))
    return (order_hat - 1.0) * rho + log_inv_gamma / order_hat


# q' grid of the generic bound: dense in log scale near 0 and near 1; ε̂ grid of the tests' constraints
_TEST_POWERS = np.unique(np.concatenate([[0.0, 1.0], np.logspace(-16, 0, 700), 1.0 - np.logspace(-16, 0, 700)]))
_TEST_POWERS = _TEST_POWERS[(_TEST_POWERS >= 0.0) & (_TEST_POWERS <= 1.0)]
_EPS_HAT = np.concatenate([[0.0], np.geomspace(1e-4, 64.0, 320)])


def _most_power(base_delta: Callable[[float], float]) -> np.ndarray:
    r"""An upper bound on ``Q(g)`` over the tests ``g: Y → [0, 1]`` with ``Q'(g) = q'``, at each ``q'`` of
    ``_TEST_POWERS``: ``min_ε̂ min(e^ε̂ q' + δ(ε̂), 1 − e^{−ε̂}(1 − q' − δ(ε̂)))``, clipped to ``[q', 1]``.

    Both constraints hold for every test of an ``(ε̂, δ(ε̂))``-DP base (the second on the complement, in
    the direction ``Q' → Q``; ``base_delta`` bounds both directions), so minimising over a grid of
    ``ε̂`` gives an upper bound on the true most powerful test, never less. Non-decreasing in ``q'``.
    """
    deltas = np.array([min(1.0, max(0.0, float(base_delta(float(e))))) for e in _EPS_HAT])
    grow = np.exp(_EPS_HAT)
    qp = _TEST_POWERS[:, None]
    bound = np.minimum(qp * grow + deltas, 1.0 - (1.0 - qp - deltas) / grow).min(axis=1)
    return np.maximum.accumulate(np.clip(bound, _TEST_POWERS, 1.0))


def _pgf_selection_curve(
    base_rdp: RDPCurve,
    base_delta: Callable[[float], float],
    log_pgf_derivative: Callable[[np.ndarray], np.ndarray],
    log_pgf_zero: float,
) -> RDPCurve:
    r"""The Rényi-DP curve of the best of ``K`` runs for any ``K`` with pgf ``f(z) = E[z^K]``, ``f'``
    non-decreasing on ``[0, 1]`` (P&S's generic bound, with ``⊥`` kept):

    ``ε'(λ) = log(f(0) + e^{(λ−1) ε(λ)} S(λ)) / (λ − 1)``, ``S(λ) = sup f'(q)^λ f'(q')^{1−λ}`` over the
    pairs ``(q, q') = (Q(g), Q'(g))`` of one test ``g`` of the base's outputs.

    Derivation: break ties by an independent uniform label (a finer output; the selection of the
    coarser output is its post-processing), so ``F(y) = Q(< y)`` is continuous. The best of ``K`` is
    ``⊥`` with probability ``f(0)`` under both datasets, and has density ``a(y) = q(y) f'(F(y))``
    (``P[A ≤ y] = f(F(y))``); ``(F(y), F'(y))`` is the pair of the test ``1{· < y}``. Then
    ``e^{(λ−1) D_λ(A‖A')} = f(0) + ∫ q^λ q'^{1−λ} f'(F)^λ f'(F')^{1−λ} ≤ f(0) + S(λ) e^{(λ−1) ε(λ)}``.
    ``S`` is bounded by a grid of ``q'`` whose bins use their worst ends (``f'(q)`` at the most
    powerful test of the bin's upper end, ``_most_power``, and ``f'(q')`` at its lower end), so a coarse
    grid is looser, never wrong. ``K ≡ 1`` gives ``ε(λ)``; a Bernoulli ``K`` its exact mixture.

    Args:
        base_rdp: ``α ↦ ε(α)`` of one run.
        base_delta: ``ε ↦ δ(ε)`` of one run, both directions.
        log_pgf_derivative: ``x ↦ log f'(x)`` on numpy arrays in ``[0, 1]`` (``-inf`` allowed).
        log_pgf_zero: ``log f(0) = log P[K = 0]`` (``-inf`` when ``K ≥ 1``).
    """
    power = _most_power(base_delta)
    upper = log_pgf_derivative(power[1:])  # log f'(q) at each bin's upper end
    with np.errstate(divide="ignore"):
        lower = log_pgf_derivative(_TEST_POWERS[:-1])  # log f'(q') at its lower end

    def curve(order: float) -> float:
        order = check_greater(order, "order", 1.0)
        eps = _base_value(base_rdp, order)
        if not math.isfinite(eps):
            return math.inf
        with np.errstate(invalid="ignore"):
            terms = order * upper - (order - 1.0) * lower
        log_s = float(np.max(np.where(np.isnan(terms), math.inf, terms)))
        return float(np.logaddexp(log_pgf_zero, (order - 1.0) * eps + log_s)) / (order - 1.0)

    return curve


def _binomial_selection_curve(
    base_rdp: RDPCurve, base_delta: Callable[[float], float], *, mean_trials: float, binomial_rounds: int | None
) -> RDPCurve:
    r"""``_pgf_selection_curve`` of ``K ~ Binomial(m, γ)``: ``f(z) = (1 − γ + γz)^m``,
    ``log f'(x) = log(mγ) + (m − 1) log(1 − γ(1 − x))``, ``log f(0) = m log(1 − γ)``."""
    gamma = binomial_probability(mean_trials=mean_trials, binomial_rounds=binomial_rounds)
    m = int(binomial_rounds or 0)  # checked by binomial_probability: an integer >= 1

    def log_derivative(x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        if m == 1:  # f' ≡ γ (and 0 · log 0 would read NaN at γ = 1, x = 0)
            return np.full_like(x, math.log(gamma))
        with np.errstate(divide="ignore"):
            return math.log(m * gamma) + (m - 1) * np.log1p(-gamma * (1.0 - x))

    log_zero = m * math.log1p(-gamma) if gamma < 1.0 else -math.inf
    return _pgf_selection_curve(base_rdp, base_delta, log_derivative, log_zero)


def private_selection_rdp_curve(
    base_rdp: RDPCurve,
    *,
    base_delta: Callable[[float], float] | None = None,
    mean_trials: float,
    distribution: str = "truncated_negative_binomial",
    tnb_eta: float = 1.0,
    binomial_rounds: int | None = None,
    tnb_hat_term: Callable[[float], float] | None = None,
) -> RDPCurve:
    r"""The Rényi-DP curve ``λ ↦ ε'(λ)`` of releasing the best of ``K`` runs of a base mechanism.

    - Truncated negative binomial ``D_{η,γ}`` (P&S Thm. 2):
      ``ε'(λ) = ε(λ) + (1+η) min_{λ̂ ≥ 1} [(1 − 1/λ̂) ε(λ̂) + log(1/γ)/λ̂] + log E[K]/(λ − 1)``.
      The minimum does not depend on λ and is computed once.
    - Poisson with mean ``m`` (P&S Thm. 6):
      ``ε'(λ) = ε(λ) + m δ̂ + log(m)/(λ − 1)`` where the base is ``(ε̂, δ̂)``-DP at
      ``e^{ε̂} = 1 + 1/(λ − 1)``: ``δ̂ = base_delta(ε̂)``.
    - Binomial ``Binomial(m, γ)``, ``γ = E[K]/m``: the generic pgf bound of ``_pgf_selection_curve``
      over the tests the base's profile ``base_delta`` allows.

    Args:
        base_rdp: ``α ↦ ε(α)``, the RDP curve of one run (called with floats ``α > 1``;
            values ``≥ 0``, ``inf`` allowed).
        base_delta: ``ε ↦ δ(ε)``, the privacy profile of one run, used by the Poisson
            bound (e.g. ``objective_perturbation.amp_delta``, or ``gdp_delta`` for a
            Gaussian). ``None``: derived from ``base_rdp`` on ``DEFAULT_RDP_ORDERS`` by
            ``analysis.rdp.rdp_curve_delta`` (valid, looser).
        mean_trials: ``E[K]`` (``> 1`` for the truncated negative binomial).
        distribution: ``"truncated_negative_binomial"``, ``"poisson"`` or ``"binomial"``.
        tnb_eta: ``η ∈ (−1, ∞)`` of the truncated negative binomial.
        binomial_rounds: ``m`` of ``K ~ Binomial(m, E[K]/m)`` (required for ``"binomial"``).
        tnb_hat_term: Optional closed form of ``L ↦ min_{λ̂ ≥ 1} (1 − 1/λ̂) ε(λ̂) + L/λ̂``
            (``L = log(1/γ)``) for this base; ``None`` minimises numerically.

    Returns:
        The curve, a function of the order ``λ > 1``.
    """
    check_choice(distribution, "distribution", ALL_DISTRIBUTIONS)
    if not callable(base_rdp):
        raise ValueError(f"base_rdp must be a callable order -> epsilon, got {type(base_rdp).__name__}.")
    mean_trials = check_positive(mean_trials, "mean_trials", allow_inf=False)
    log_mean = math.log(mean_trials)

    if distribution in ("poisson", "binomial"):
        if base_delta is None:
            orders = np.asarray(DEFAULT_RDP_ORDERS)
            values = np.array([_base_value(base_rdp, float(a)) for a in orders])
            base_delta = lambda eps_hat: rdp_curve_delta(values, orders, eps_hat)[0]
        elif not callable(base_delta):
            raise ValueError(f"base_delta must be a callable epsilon -> delta, got {type(base_delta).__name__}.")
        if distribution == "binomial":
            return _binomial_selection_curve(
                base_rdp, base_delta, mean_trials=mean_trials, binomial_rounds=binomial_rounds
            )

        def poisson_curve(order: float) -> float:
            order = check_greater(order, "order", 1.0)
            eps_hat = math.log1p(1.0 / (order - 1.0))
            delta_hat = float(base_delta(eps_hat))
            if not 0.0 <= delta_hat <= 1.0:
                raise ValueError(f"base_delta must return a delta in [0, 1]; got {delta_hat!r} at {eps_hat!r}.")
            return _base_value(base_rdp, order) + mean_trials * delta_hat + log_mean / (order - 1.0)

        return poisson_curve

    gamma = tnb_gamma_for_mean(eta=tnb_eta, mean_trials=mean_trials)
    log_inv_gamma = math.log(1.0 / gamma)
    hat = _numerical_tnb_hat_term(base_rdp, log_inv_gamma) if tnb_hat_term is None else tnb_hat_term(log_inv_gamma)
    extra = (1.0 + tnb_eta) * hat

    def tnb_curve(order: float) -> float:
        order = check_greater(order, "order", 1.0)
        return _base_value(base_rdp, order) + extra + log_mean / (order - 1.0)

    return tnb_curve


def private_selection_rdp_generic(
    order: float,
    base_rdp: RDPCurve,
    *,
    base_delta: Callable[[float], float] | None = None,
    mean_trials: float,
    distribution: str = "truncated_negative_binomial",
    tnb_eta: float = 1.0,
    binomial_rounds: int | None = None,
    tnb_hat_term: Callable[[float], float] | None = None,
) -> float:
    r"""Rényi-DP ``ε'(λ)`` at one order of private selection over a base mechanism.

    ``private_selection_rdp_curve(base_rdp, ...)(order)``; see there for the bounds and
    the arguments. To evaluate many orders, build the curve once (the λ̂-minimisation of
    the truncated negative binomial bound is then done once).

    Args:
        order: ``λ > 1``.
        base_rdp: ``α ↦ ε(α)`` of one run.
        base_delta: ``ε ↦ δ(ε)`` of one run (Poisson bound; ``None``: from ``base_rdp``).
        mean_trials: ``E[K]``.
        distribution: ``"truncated_negative_binomial"``, ``"poisson"`` or ``"binomial"``.
        tnb_eta: ``η ∈ (−1, ∞)``.
        tnb_hat_term: Optional closed form of the λ̂-minimum (see the curve).

    Returns:
        ``ε'(λ)``.
    """
    order = check_greater(order, "order", 1.0)
    curve = private_selection_rdp_curve(
        base_rdp,
        base_delta=base_delta,
        mean_trials=mean_trials,
        distribution=distribution,
        tnb_eta=tnb_eta,
        binomial_rounds=binomial_rounds,
        tnb_hat_term=tnb_hat_term,
    )
    return curve(order)


def private_selection_epsilon_generic(
    base_rdp: RDPCurve,
    *,
    base_delta: Callable[[float], float] | None = None,
    mean_trials: float,
    target_delta: float,
    distribution: str = "truncated_negative_binomial",
    tnb_eta: float = 1.0,
    binomial_rounds: int | None = None,
    tnb_hat_term: Callable[[float], float] | None = None,
    orders: Sequence[float] | None = None,
) -> float:
    r"""``ε`` at ``δ = target_delta`` of private selection over a base mechanism.

    Converts ``private_selection_rdp_curve`` to ``(ε, δ)`` with the one rule of
    ``analysis.rdp``: over a continuous order (``rdp_to_epsilon``) when ``orders`` is
    ``None``, else on the given grid (``rdp_curve_epsilon``, e.g. ``DEFAULT_RDP_ORDERS``,
    the grid of the training ledger).

    Args:
        base_rdp: ``α ↦ ε(α)`` of one run.
        base_delta: ``ε ↦ δ(ε)`` of one run (Poisson bound; ``None``: from ``base_rdp``).
        mean_trials: ``E[K]``.
        target_delta: ``δ ∈ (0, 1)``.
        distribution: ``"truncated_negative_binomial"``, ``"poisson"`` or ``"binomial"``.
        tnb_eta: ``η ∈ (−1, ∞)``.
        tnb_hat_term: Optional closed form of the λ̂-minimum.
        orders: ``None`` (continuous) or a grid of orders ``> 1``.

    Returns:
        ``ε ≥ 0``.
    """
    target_delta = check_delta(target_delta, "target_delta")
    curve = private_selection_rdp_curve(
        base_rdp,
        base_delta=base_delta,
        mean_trials=mean_trials,
        distribution=distribution,
        tnb_eta=tnb_eta,
        binomial_rounds=binomial_rounds,
        tnb_hat_term=tnb_hat_term,
    )
    if orders is None:
        return rdp_to_epsilon(curve, target_delta)[0]
    return rdp_curve_epsilon([curve(float(a)) for a in orders], orders, target_delta)[0]


def _gaussian_score_base(per_trial_mu: float) -> dict:
    r"""The μ₀-GDP Gaussian trial as a base mechanism: RDP ``λρ`` (``ρ = μ₀²/2``), its exact
    profile ``gdp_delta(μ₀, ·)`` and the closed-form λ̂-term of P&S Thm. 2."""
    rho = per_trial_mu**2 / 2.0
    return dict(
        base_rdp=lambda order: order * rho,
        base_delta=functools.partial(gdp_delta, per_trial_mu),
        tnb_hat_term=functools.partial(_zcdp_tnb_hat_term, rho),
    )


def private_selection_rdp(
    order: float,
    *,
    per_trial_mu: float,
    mean_trials: float,
    distribution: str = "truncated_negative_binomial",
    tnb_eta: float = 1.0,
    binomial_rounds: int | None = None,
) -> float:
    r"""Rényi-DP ``ε'(λ)`` of releasing the best of ``K`` Gaussian-scored trials.

    Each trial is a Gaussian mechanism that is ``μ₀``-GDP, i.e. ``ρ = μ₀²/2``-zCDP and
    ``(λ, λρ)``-RDP at every order ``λ > 1``: ``private_selection_rdp_generic`` with that
    curve, the Gaussian's exact privacy profile for the Poisson bound, and the λ̂ of the
    truncated negative binomial bound in closed form, ``λ̂ = max(1, sqrt(log(1/γ)/ρ))``.

    Args:
        order: ``λ > 1``.
        per_trial_mu: ``μ₀``, GDP parameter of one trial.
        mean_trials: ``E[K]``.
        distribution: ``"truncated_negative_binomial"``, ``"poisson"`` or ``"binomial"``.
        tnb_eta: ``η ∈ (−1, ∞)`` of the truncated negative binomial.

    Returns:
        ``ε'(λ)``.
    """
    check_choice(distribution, "distribution", ALL_DISTRIBUTIONS)
    order = check_greater(order, "order", 1.0)
    per_trial_mu = check_positive(per_trial_mu, "per_trial_mu", allow_inf=False)
    return private_selection_rdp_generic(
        order,
        **_gaussian_score_base(per_trial_mu),
        mean_trials=mean_trials,
        distribution=distribution,
        tnb_eta=tnb_eta,
        binomial_rounds=binomial_rounds,
    )


def private_selection_epsilon(
    *,
    per_trial_mu: float,
    mean_trials: float,
    target_delta: float,
    distribution: str = "truncated_negative_binomial",
    tnb_eta: float = 1.0,
    binomial_rounds: int | None = None,
    orders: Sequence[float] | None = None,
) -> float:
    r"""``ε`` at ``δ = target_delta`` of private selection (see ``private_selection_rdp``).

    ``private_selection_epsilon_generic`` with the μ₀-GDP Gaussian trial as the base.

    Args:
        per_trial_mu: ``μ₀``, GDP parameter of one trial.
        mean_trials: ``E[K]``.
        target_delta: ``δ ∈ (0, 1)``.
        distribution: ``"truncated_negative_binomial"``, ``"poisson"`` or ``"binomial"``.
        tnb_eta: ``η ∈ (−1, ∞)`` of the truncated negative binomial.
        orders: ``None`` (continuous order) or a grid of orders ``> 1``.

    Returns:
        ``ε ≥ 0``.
    """
    target_delta = check_delta(target_delta, "target_delta")
    check_choice(distribution, "distribution", ALL_DISTRIBUTIONS)
    per_trial_mu = check_positive(per_trial_mu, "per_trial_mu", allow_inf=False)
    return private_selection_epsilon_generic(
        **_gaussian_score_base(per_trial_mu),
        mean_trials=mean_trials,
        target_delta=target_delta,
        distribution=distribution,
        tnb_eta=tnb_eta,
        binomial_rounds=binomial_rounds,
        orders=orders,
    )


def per_trial_mu_for_epsilon(
    *,
    target_epsilon: float,
    target_delta: float,
    mean_trials: float,
    distribution: str = "truncated_negative_binomial",
    tnb_eta: float = 1.0,
    binomial_rounds: int | None = None,
    orders: Sequence[float] | None = None,
) -> float:
    r"""The largest per-trial ``μ₀`` whose private selection is ``(target_epsilon, target_delta)``-DP.

    ``ε(μ₀)`` increases in ``μ₀``; the root is found by ``brentq`` on ``log μ₀``. With
    ``orders=None`` the RDP curve is converted over a continuous order (the tightest bound);
    a caller that charges a ledger passes the ledger's grid (``TRAINING_RDP_ORDERS``), so that
    the ledger's own conversion of the charged curve also reads at most ``target_epsilon``
    (the continuous optimum can sit between grid orders, where the grid reads a little more).

    Args:
        target_epsilon: ``ε > 0`` that the whole selection may spend.
        target_delta: ``δ ∈ (0, 1)``.
        mean_trials: ``E[K]``.
        distribution: ``"truncated_negative_binomial"``, ``"poisson"`` or ``"binomial"``.
        tnb_eta: ``η ∈ (−1, ∞)`` of the truncated negative binomial.
        orders: ``None`` (continuous order) or the grid of orders the guarantee is read on.

    Returns:
        ``μ₀ > 0``.

    Raises:
        ValueError: If even a vanishing ``μ₀`` exceeds the target (the ``log E[K]`` term
            alone costs too much).
    """
    from scipy.optimize import brentq

    target_epsilon = check_positive(target_epsilon, "target_epsilon", allow_inf=False)
    target_delta = check_delta(target_delta, "target_delta")
    eps = lambda log_mu: (
        private_selection_epsilon(
            per_trial_mu=math.exp(log_mu),
            mean_trials=mean_trials,
            target_delta=target_delta,
            distribution=distribution,
            tnb_eta=tnb_eta,
            binomial_rounds=binomial_rounds,
            orders=orders,
        )
        - target_epsilon
    )
    lo, hi = math.log(1e-6), math.log(1e2)
    if eps(lo) >= 0:
        raise ValueError(
            f"No per-trial budget reaches epsilon={target_epsilon} with E[K]={mean_trials} "
            f"({distribution}); allow a larger epsilon or fewer trials."
        )
    root = brentq(eps, lo, hi, xtol=1e-10)
    while eps(root) > 0:  # brentq's root may sit a rounding error above: step to the side within the target
        root -= 1e-10
    return math.exp(root)
