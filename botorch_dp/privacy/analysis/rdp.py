r"""Rényi differential privacy (RDP): the one conversion of an RDP curve to (ε, δ)-DP.

Pure functions on floats. A mechanism is (λ, ε'(λ))-RDP when the Rényi divergence of
order λ > 1 between its output distributions on neighbouring datasets is at most ε'(λ).
ρ-zCDP is the curve ε'(λ) = λρ (``analysis.zcdp.zcdp_epsilon_cks``); private selection
has the Papernot–Steinke curves of ``analysis.private_selection``. Both are converted
here, minimising over a continuous order (``rdp_to_epsilon``). Curves known only on a
grid of orders (composed by summing, as a ledger does) are converted with the same rule
on that grid (``rdp_curve_epsilon``, usually on ``DEFAULT_RDP_ORDERS``); the inverse
question, δ at a given ε, is ``rdp_curve_delta``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from botorch_dp.privacy.checks import check_delta, check_nonnegative

__all__ = ["DEFAULT_RDP_ORDERS", "rdp_curve_delta", "rdp_curve_epsilon", "rdp_to_epsilon"]

#: The public grid of Rényi orders on which RDP curves are evaluated and composed:
#: Opacus's default orders (1.1, 1.2, …, 10.9 and 12, 13, …, 63) plus 80, 128, 256 and
#: 512, because a small ε is attained at a large order.
DEFAULT_RDP_ORDERS: tuple[float, ...] = tuple(
    [1.0 + x / 10.0 for x in range(1, 100)] + [float(a) for a in range(12, 64)] + [80.0, 128.0, 256.0, 512.0]
)

# The starting grid of log(λ − 1), and how far it may be extended when the minimum
# lies on one of its ends (tiny or huge ρ).
_GRID_START, _GRID_STOP, _GRID_POINTS = math.log(1e-3), math.log(1e5), 321
_GRID_LIMITS = (math.log(1e-12), math.log(1e300))


def rdp_to_epsilon(rdp: Callable[[float], float], delta: float) -> tuple[float, float]:
    r"""Convert a Rényi-DP curve to ``(ε, δ)``-DP (Canonne, Kamath & Steinke 2020, Prop. 12).

    ``ε = min_{λ > 1} ε'(λ) + log(1 − 1/λ) − (log δ + log λ)/(λ − 1)``; this is never
    larger than the classical ``ε'(λ) + log(1/δ)/(λ − 1)``. The minimum is taken over a
    log-spaced grid of ``λ − 1 ∈ [1e-3, 1e5]``, extended with the same spacing while
    the minimum lies on an end of the grid (up to ``λ − 1 ∈ [1e-12, 1e300]``), and
    refined with a bounded scalar search between the neighbours of the best grid point.

    Args:
        rdp: ``λ ↦ ε'(λ)``, the RDP curve of the mechanism.
        delta: Target ``δ ∈ (0, 1)``.

    Returns:
        ``(ε, λ)``: the ``ε ≥ 0`` and the order at which it is attained.
    """
    from scipy.optimize import minimize_scalar

    log_delta = math.log(check_delta(delta))

    def objective(log_order_minus_one: float) -> float:
        order = 1.0 + math.exp(log_order_minus_one)
        return rdp(order) + math.log1p(-1.0 / order) - (log_delta + math.log(order)) / (order - 1.0)

    grid = np.linspace(_GRID_START, _GRID_STOP, _GRID_POINTS)
    values = [objective(x) for x in grid]
    step = grid[1] - grid[0]
    while True:
        i = int(np.argmin(values))
        if i == len(grid) - 1:
            more = grid[-1] + step * np.arange(1, _GRID_POINTS)
            more = more[more <= _GRID_LIMITS[1]]
            grid, values = np.concatenate([grid, more]), values + [objective(x) for x in more]
        elif i == 0:
            more = grid[0] - step * np.arange(_GRID_POINTS - 1, 0, -1)
            more = more[more >= _GRID_LIMITS[0]]
            grid, values = np.concatenate([more, grid]), [objective(x) for x in more] + values
            i += len(more)
        else:
            break
        if len(more) == 0:  # the minimum is at a limit of the search
            break
    lo, hi = grid[max(i - 1, 0)], grid[min(i + 1, len(grid) - 1)]
    best_x, best = grid[i], values[i]
    if hi > lo:
        res = minimize_scalar(objective, bounds=(lo, hi), method="bounded", options={"xatol": 1e-9})
        if res.fun < best:
            best_x, best = float(res.x), float(res.fun)
    return max(best, 0.0), 1.0 + math.exp(best_x)


def _check_curve(rdp_values: object, orders: object) -> tuple[np.ndarray, np.ndarray]:
    r"""``(values, orders)`` as float64 arrays of one shape, orders finite ``> 1``, values ``≥ 0``."""
    rdp_values = np.asarray(rdp_values, dtype=np.float64)
    orders = np.asarray(orders, dtype=np.float64)
    if orders.ndim != 1 or orders.size == 0:
        raise ValueError(f"orders must be a non-empty 1-d sequence, got shape {orders.shape}.")
    if rdp_values.shape != orders.shape:
        raise ValueError(
            f"rdp_values must have one value per order: shape {rdp_values.shape} vs orders {orders.shape}."
        )
    if not np.all(np.isfinite(orders) & (orders > 1.0)):
        raise ValueError("orders must be finite and exceed 1.")
    if np.any(np.isnan(rdp_values)) or np.any(rdp_values < 0.0):
        raise ValueError("rdp_values must be non-negative (math.inf allowed), not NaN.")
    return rdp_values, orders


def rdp_curve_epsilon(
    rdp_values: Sequence[float] | np.ndarray, orders: Sequence[float] | np.ndarray, delta: float
) -> tuple[float, float]:
    r"""Convert an RDP curve known on a grid of orders to ``(ε, δ)``-DP.

    The same rule as ``rdp_to_epsilon`` (Canonne, Kamath & Steinke 2020, Prop. 12; Balle
    et al. 2020, Thm. 21), minimised over the given orders only:
    ``ε = min_i ε'(λ_i) + log(1 − 1/λ_i) − (log δ + log λ_i)/(λ_i − 1)``, floored at 0.
    Use it for curves composed on a fixed public grid (sum the per-mechanism values
    order by order first), e.g. ``DEFAULT_RDP_ORDERS``; on a grid the minimum can only
    be larger than ``rdp_to_epsilon``'s continuous one.

    Args:
        rdp_values: ``ε'(λ_i) ≥ 0`` at each order (``math.inf`` allowed: no guarantee at
            that order), a sequence of the same length as ``orders``.
        orders: The orders ``λ_i > 1`` (finite).
        delta: Target ``δ ∈ (0, 1)``.

    Returns:
        ``(ε, λ)``: the ``ε ≥ 0`` and the grid order at which it is attained
        (``(math.inf, math.nan)`` when every value is infinite).
    """
    log_delta = math.log(check_delta(delta))
    rdp_values, orders = _check_curve(rdp_values, orders)
    eps = rdp_values + np.log1p(-1.0 / orders) - (log_delta + np.log(orders)) / (orders - 1.0)
    if np.all(np.isinf(eps)):
        return math.inf, math.nan
    i = int(np.argmin(eps))
    return max(float(eps[i]), 0.0), float(orders[i])


def rdp_curve_delta(
    rdp_values: Sequence[float] | np.ndarray, orders: Sequence[float] | np.ndarray, epsilon: float
) -> tuple[float, float]:
    r"""The δ at a given ε implied by an RDP curve known on a grid of orders.

    The inverse of ``rdp_curve_epsilon``'s rule (Canonne, Kamath & Steinke 2020, Prop. 12):
    ``log δ = min_i (λ_i − 1)(ε'(λ_i) − ε + log(1 − 1/λ_i)) − log λ_i``, and also at most
    the total-variation bound ``δ ≤ δ(0) ≤ sqrt(1 − e^{−ε'(λ_i)})`` (Bretagnolle–Huber,
    as ``KL ≤ ε'(λ)``), as in ``dp_accounting.rdp.compute_delta``.

    Args:
        rdp_values: ``ε'(λ_i) ≥ 0`` at each order (``math.inf`` allowed).
        orders: The orders ``λ_i > 1`` (finite).
        epsilon: ``ε ≥ 0``.

    Returns:
        ``(δ, λ)``: ``δ ∈ [0, 1]`` and the grid order that attains it.
    """
    rdp_values, orders = _check_curve(rdp_values, orders)
    epsilon = check_nonnegative(epsilon, "epsilon", allow_inf=False)
    with np.errstate(divide="ignore"):
        log_tv = np.where(rdp_values == 0.0, -np.inf, 0.5 * np.log1p(-np.exp(-rdp_values)))
    log_cks = (orders - 1.0) * (rdp_values - epsilon + np.log1p(-1.0 / orders)) - np.log(orders)
    log_delta = np.minimum(log_tv, log_cks)
    i = int(np.argmin(log_delta))
    return min(math.exp(float(log_delta[i])), 1.0), float(orders[i])
