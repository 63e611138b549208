r"""Rényi differential privacy (RDP): the one conversion of an RDP curve to (ε, δ)-DP.

Pure functions on floats. A mechanism is (λ, ε'(λ))-RDP when the Rényi divergence of
order λ > 1 between its output distributions on neighbouring datasets is at most ε'(λ).
ρ-zCDP is the curve ε'(λ) = λρ (``analysis.zcdp.zcdp_epsilon_cks``); private selection
has the Papernot–Steinke curves of ``analysis.private_selection``. Both are converted
here.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np
from scipy.optimize import minimize_scalar

from botorch_dp.privacy.checks import check_delta

__all__ = ["rdp_to_epsilon"]

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
