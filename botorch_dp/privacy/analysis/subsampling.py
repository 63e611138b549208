r"""Privacy amplification by Poisson subsampling of a whole mechanism, in Rényi DP.

``poisson_subsampled_rdp`` bounds the RDP curve of ``M ∘ S_γ``: draw a Poisson subset of the
data (each record independently with probability γ), then run ANY mechanism ``M`` on it. Cheap
tuning (``methods.cheap_tuning``) uses it with ``M`` = every tuning training on one subset drawn
once, so the amplification covers the composed tuning phase, never each trial separately.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
from scipy.special import gammaln, logsumexp

from botorch_dp.privacy.checks import check_positive_int

__all__ = ["poisson_subsampled_rdp", "zhu_wang_bound"]


def zhu_wang_bound(base_rdp: np.ndarray, sample_rate: float) -> np.ndarray:
    r"""Zhu & Wang (ICML 2019, "Poisson subsampled Rényi differential privacy", Thm. 6) at α = 2, …, A.

    For any mechanism ``M`` that is ``(ℓ, ε(ℓ))``-RDP under add/remove-one neighbouring, ``M``
    run on a Poisson subsample of rate γ is ``(α, ε'(α))``-RDP (add/remove-one) at every
    integer ``α ≥ 2`` with

    ``ε'(α) = 1/(α−1) · log[ (1−γ)^{α−1}(αγ − γ + 1) + C(α,2) γ² (1−γ)^{α−2} e^{ε(2)}
    + 3 Σ_{ℓ=3}^{α} C(α,ℓ) γ^ℓ (1−γ)^{α−ℓ} e^{(ℓ−1) ε(ℓ)} ]``.

    Computed in log space; a non-finite (or NaN, Opacus's overflow) ``ε(ℓ)`` makes every order
    ``α ≥ ℓ`` infinite (a valid bound).

    Args:
        base_rdp: ``ε(ℓ)`` at ``ℓ = 2, 3, …, A`` (an ``A − 1`` array, ``A ≥ 2``).
        sample_rate: γ in (0, 1].

    Returns:
        An ``A − 1`` float64 array: ``ε'(α)`` at ``α = 2, …, A``.
    """
    eps = np.asarray(base_rdp, dtype=np.float64).reshape(-1)
    if eps.size < 1:
        raise ValueError("base_rdp must hold ε(ℓ) for ℓ = 2, …, A (at least one value).")
    eps = np.where(np.isnan(eps), math.inf, eps)
    gamma = float(sample_rate)
    if not 0.0 < gamma <= 1.0:
        raise ValueError(f"sample_rate must be in (0, 1], got {sample_rate!r}.")
    if gamma == 1.0:
        return eps.copy()
    top = eps.size + 1
    log_g, log_1g = math.log(gamma), math.log1p(-gamma)
    ells = np.arange(2, top + 1, dtype=np.float64)  # ℓ = 2..A
    # (ℓ − 1) ε(ℓ), with the factor 3 folded in for ℓ ≥ 3; an infinite ε(ℓ) stays infinite
    with np.errstate(invalid="ignore"):
        moment = (ells - 1.0) * eps + np.where(ells >= 3, math.log(3.0), 0.0)
    out = np.empty(eps.size)
    for i, alpha in enumerate(ells):
        ell = ells[: i + 1]  # 2..α
        log_binom = gammaln(alpha + 1) - gammaln(ell + 1) - gammaln(alpha - ell + 1)
        terms = log_binom + ell * log_g + (alpha - ell) * log_1g + moment[: i + 1]
        first = (alpha - 1.0) * log_1g + math.log(alpha * gamma - gamma + 1.0)
        total = logsumexp(np.append(terms, first))
        out[i] = max(float(total), 0.0) / (alpha - 1.0)
    return out


def poisson_subsampled_rdp(
    base_rdp: Callable[[np.ndarray], np.ndarray],
    *,
    sample_rate: float,
    orders: Sequence[float] | np.ndarray,
    max_integer_order: int = 128,
) -> np.ndarray:
    r"""RDP curve of ``M ∘ S_γ`` on ``orders``: ``M`` run on a Poisson subsample of rate γ.

    At an integer order ``α ≤ max_integer_order`` the bound is ``min(ε(α), zhu_wang_bound)``
    (both are valid: subsampling never hurts, by quasi-convexity of the Rényi divergence). At
    a non-integer order it is the bound at ``⌈α⌉`` (RDP is non-decreasing in α, so the value
    at ``⌈α⌉`` bounds it; orders in (1, 2) take the value at 2), so ``base_rdp`` is asked only
    for integer orders. Orders above ``max_integer_order`` keep ``M``'s own curve (no
    amplification claimed there).

    Args:
        base_rdp: ``orders ↦ ε(orders)``: ``M``'s RDP curve (add/remove-one), vectorised over
            a 1-d array of orders (e.g. a sum of ``dp_sgd_rdp`` curves).
        sample_rate: γ in (0, 1], each record's probability of being in the subset.
        orders: The orders ``α > 1`` to evaluate (e.g. ``TRAINING_RDP_ORDERS``).
        max_integer_order: ``A``: the amplification is computed at the integer orders 2..A
            (cost ``O(A²)``).

    Returns:
        A float64 array of ``ε'(α) ≥ 0`` (``inf`` allowed), one per order.
    """
    grid = np.asarray(orders, dtype=np.float64).reshape(-1)
    if grid.size == 0 or not np.all(np.isfinite(grid) & (grid > 1.0)):
        raise ValueError(f"orders must be a non-empty list of finite orders > 1, got {orders!r}.")
    top = check_positive_int(max_integer_order, "max_integer_order")
    if top < 2:
        raise ValueError(f"max_integer_order must be at least 2, got {max_integer_order!r}.")
    integers = np.arange(2, top + 1, dtype=np.float64)
    above = np.unique(grid[grid > top])
    values = np.asarray(base_rdp(np.concatenate([integers, above])), dtype=np.float64).reshape(-1)
    values = np.where(np.isnan(values), math.inf, values)
    base_int, base_above = values[: integers.size], values[integers.size :]
    amplified = np.minimum(base_int, zhu_wang_bound(base_int, sample_rate))
    out = np.empty(grid.size)
    inside = grid <= top
    ceiling = np.maximum(np.ceil(grid[inside] - 1e-12), 2.0)
    out[inside] = amplified[(ceiling - 2).astype(int)]
    out[~inside] = base_above[np.searchsorted(above, grid[~inside])]
    return np.maximum(out, 0.0)
