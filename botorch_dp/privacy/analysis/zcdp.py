r"""Zero-concentrated differential privacy (zCDP) and its conversions to (ε, δ)-DP.

Pure functions on floats. ρ-zCDP (Bun & Steinke 2016) bounds every Rényi divergence of
order α > 1 by αρ. The Gaussian mechanism with ℓ2-sensitivity Δ and noise σ is
Δ²/(2σ²)-zCDP, and μ-GDP implies (μ²/2)-zCDP. Converting zCDP to (ε, δ)-DP is only an
upper bound on the exact ε of a Gaussian mechanism (``analysis.gdp.gdp_epsilon``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from botorch_dp.privacy.analysis.rdp import rdp_to_epsilon
from botorch_dp.privacy.checks import check_delta, check_nonnegative, check_positive

__all__ = ["compose_zcdp", "gaussian_zcdp", "gdp_to_zcdp", "zcdp_epsilon", "zcdp_epsilon_cks"]


def gdp_to_zcdp(mu: float) -> float:
    r"""The zCDP parameter implied by μ-GDP: ρ = μ²/2.

    Args:
        mu: The GDP parameter μ ≥ 0 (``math.inf`` allowed).

    Returns:
        ρ = μ²/2 (``math.inf`` for μ = inf).
    """
    mu = check_nonnegative(mu, "mu")
    return 0.5 * mu * mu


def gaussian_zcdp(sensitivity: float, noise_std: float) -> float:
    r"""zCDP parameter of one Gaussian mechanism: ρ = Δ²/(2σ²).

    This is the standard constant of Bun & Steinke (2016, Prop. 1.6); Menart et al. charge
    its Gaussian steps with a different constant, which is not used here.

    Args:
        sensitivity: The ℓ2-sensitivity Δ > 0.
        noise_std: The noise standard deviation σ ≥ 0 (0 gives ρ = inf).

    Returns:
        ρ ≥ 0.
    """
    sensitivity = check_positive(sensitivity, "sensitivity", allow_inf=False)
    noise_std = check_nonnegative(noise_std, "noise_std")
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
    return math.fsum(check_nonnegative(rho, "rho") for rho in rhos)


def zcdp_epsilon(rho: float, delta: float) -> float:
    r"""Bun–Steinke conversion: ρ-zCDP implies (ρ + 2 sqrt(ρ log(1/δ)), δ)-DP.

    Args:
        rho: The zCDP parameter ρ ≥ 0 (``math.inf`` allowed).
        delta: The target δ in (0, 1).

    Returns:
        ε ≥ 0 (Bun & Steinke 2016, Prop. 1.3).
    """
    rho = check_nonnegative(rho, "rho")
    delta = check_delta(delta)
    if math.isinf(rho):
        return math.inf
    return rho + 2.0 * math.sqrt(rho * math.log(1.0 / delta))


def zcdp_epsilon_cks(rho: float, delta: float) -> float:
    r"""Tighter conversion of Canonne, Kamath & Steinke (2020, Prop. 12).

    ρ-zCDP is (α, αρ)-RDP at every order α > 1, so this is ``analysis.rdp.rdp_to_epsilon``
    on the curve α ↦ αρ:
    ε = min over α > 1 of αρ + (log(1/δ) + (α−1) log(1 − 1/α) − log α)/(α − 1).
    It never exceeds ``zcdp_epsilon`` (every extra term is ≤ 0 for α > 1).

    Args:
        rho: The zCDP parameter ρ ≥ 0 (``math.inf`` allowed).
        delta: The target δ in (0, 1).

    Returns:
        ε ≥ 0.
    """
    rho = check_nonnegative(rho, "rho")
    delta = check_delta(delta)
    if math.isinf(rho):
        return math.inf
    if rho == 0.0:
        return 0.0
    return rdp_to_epsilon(lambda order: order * rho, delta)[0]
