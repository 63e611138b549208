r"""Zero-concentrated differential privacy (zCDP) and its conversions to (ε, δ)-DP.

Pure functions on floats. ρ-zCDP (Bun & Steinke 2016) bounds every Rényi divergence of
order α > 1 by αρ. The Gaussian mechanism with ℓ2-sensitivity Δ and noise σ is
Δ²/(2σ²)-zCDP, and μ-GDP implies (μ²/2)-zCDP. Converting zCDP to (ε, δ)-DP is only an
upper bound on the exact ε of a Gaussian mechanism (``analysis.gdp.gdp_epsilon``).
"""

from __future__ import annotations

import math
from typing import Iterable

from scipy.optimize import minimize_scalar

from botorch_dp.privacy.analysis.gdp import _check_delta

__all__ = [
    "compose_zcdp",
    "gaussian_zcdp",
    "gdp_to_zcdp",
    "zcdp_epsilon",
    "zcdp_epsilon_cks",
]


def _check_rho(rho: float) -> float:
    rho = float(rho)
    if math.isnan(rho) or rho < 0.0:
        raise ValueError(f"rho must be non-negative (math.inf allowed), got {rho!r}.")
    return rho


def gdp_to_zcdp(mu: float) -> float:
    r"""The zCDP parameter implied by μ-GDP: ρ = μ²/2.

    Args:
        mu: The GDP parameter μ > 0 (``math.inf`` allowed).

    Returns:
        ρ = μ²/2 (``math.inf`` for μ = inf).
    """
    mu = float(mu)
    if math.isnan(mu) or mu <= 0.0:
        raise ValueError(f"mu must be positive (math.inf allowed), got {mu!r}.")
    return 0.5 * mu * mu


def gaussian_zcdp(sensitivity: float, noise_std: float) -> float:
    r"""zCDP parameter of one Gaussian mechanism: ρ = Δ²/(2σ²).

    This is the standard constant of Bun & Steinke (2016, Prop. 1.6); seed 003 charges
    its Gaussian steps with a different constant, which is not used here.

    Args:
        sensitivity: The ℓ2-sensitivity Δ > 0.
        noise_std: The noise standard deviation σ ≥ 0 (0 gives ρ = inf).

    Returns:
        ρ ≥ 0.
    """
    sensitivity = float(sensitivity)
    if not sensitivity > 0.0 or math.isinf(sensitivity):
        raise ValueError(f"sensitivity must be positive and finite, got {sensitivity!r}.")
    noise_std = float(noise_std)
    if math.isnan(noise_std) or noise_std < 0.0:
        raise ValueError(f"noise_std must be non-negative, got {noise_std!r}.")
    if noise_std == 0.0:
        return math.inf
    return sensitivity * sensitivity / (2.0 * noise_std * noise_std)


def compose_zcdp(rhos: Iterable[float]) -> float:
    r"""Compose zCDP guarantees: ρ = Σ_t ρ_t.

    Args:
        rhos: An iterable of per-mechanism zCDP parameters ρ_t ≥ 0.

    Returns:
        The zCDP parameter of the adaptive composition (0.0 for an empty iterable).
    """
    return math.fsum(_check_rho(rho) for rho in rhos)


def zcdp_epsilon(rho: float, delta: float) -> float:
    r"""Bun–Steinke conversion: ρ-zCDP implies (ρ + 2 sqrt(ρ log(1/δ)), δ)-DP.

    Args:
        rho: The zCDP parameter ρ ≥ 0 (``math.inf`` allowed).
        delta: The target δ in (0, 1).

    Returns:
        ε ≥ 0 (Bun & Steinke 2016, Prop. 1.3).
    """
    rho = _check_rho(rho)
    delta = _check_delta(delta)
    if math.isinf(rho):
        return math.inf
    return rho + 2.0 * math.sqrt(rho * math.log(1.0 / delta))


def _cks_objective(alpha: float, rho: float, log_inv_delta: float) -> float:
    # αρ + (log(1/δ) + (α−1) log(1 − 1/α) − log α) / (α − 1)
    return (
        alpha * rho
        + (log_inv_delta - math.log(alpha)) / (alpha - 1.0)
        + math.log1p(-1.0 / alpha)
    )


def zcdp_epsilon_cks(rho: float, delta: float) -> float:
    r"""Tighter conversion of Canonne, Kamath & Steinke (2020, Prop. 12).

    ε = min over α > 1 of αρ + (log(1/δ) + (α−1) log(1 − 1/α) − log α)/(α − 1).
    The minimum is found with ``scipy.optimize.minimize_scalar`` over log(α − 1); the
    value at the Bun–Steinke order α = 1 + sqrt(log(1/δ)/ρ) is kept as a candidate, so
    the result never exceeds ``zcdp_epsilon`` (every extra term is ≤ 0 for α > 1).

    Args:
        rho: The zCDP parameter ρ ≥ 0 (``math.inf`` allowed).
        delta: The target δ in (0, 1).

    Returns:
        ε ≥ 0.
    """
    rho = _check_rho(rho)
    delta = _check_delta(delta)
    if math.isinf(rho):
        return math.inf
    if rho == 0.0:
        return 0.0
    log_inv_delta = -math.log(delta)

    def objective(log_alpha_minus_one: float) -> float:
        return _cks_objective(1.0 + math.exp(log_alpha_minus_one), rho, log_inv_delta)

    x_bs = 0.5 * (math.log(log_inv_delta) - math.log(rho))
    result = minimize_scalar(
        objective,
        bounds=(x_bs - 12.0, x_bs + 12.0),
        method="bounded",
        options={"xatol": 1e-10},
    )
    epsilon = min(float(result.fun), objective(x_bs))
    return max(epsilon, 0.0)
