r"""Argument checks shared by the objective-perturbation bounds, and the parameters they derive.

Every public function of the package checks its arguments here: ``(L, β, λ, σ)`` become
``(c, s) = (−log(1 − β/λ), L/σ)``, ``(τ, σ_out)`` become the output part's charged
``s_g = (2τ/(λ σ_out) + 2⁻¹⁴)(1 + 2⁻²⁷)`` (the output is released on a grid, ``output_grid``), an ε
may be any real number but NaN, and RDP orders must be finite and above 1.
"""

from __future__ import annotations

import math

import numpy as np

from botorch_dp.privacy.checks import check_nonnegative, check_positive

_LOG2 = math.log(2.0)

#: ``η``: the grid of AMP's released output keeps the rounding term ``√d γ`` at most ``η σ_out``
#: (``output_grid.amp_output_grid``), so the output part's sensitivity over ``σ_out`` is charged as
#: ``2τ/(λ σ_out) + η`` whatever ``d``.
AMP_GRID_SHARE = 2.0**-14

#: ``1 + 2⁻²⁷``: covers the discrete Gaussian's domination factor ``1 + 1/s²`` (``s ≥ 2¹⁴``, so at
#: most ``1 + 2⁻²⁸``) and float rounding in the charged ``s_g``.
_OUTPUT_MU_FACTOR = 1.0 + 2.0**-27


def _objpert_params(clip: float, beta: float, lam: float, sigma: float) -> tuple[float, float]:
    r"""Check ``(L, β, λ, σ)`` and return ``(c, s) = (−log(1 − β/λ), L/σ)``."""
    clip = check_positive(clip, "clip", allow_inf=False)
    beta = check_nonnegative(beta, "beta", allow_inf=False)
    lam = check_positive(lam, "lam", allow_inf=False)
    if not lam > beta:
        raise ValueError(f"lam must exceed beta (λ > β), got lam={lam!r} and beta={beta!r}.")
    sigma = check_positive(sigma, "sigma", allow_inf=False)
    return -math.log1p(-beta / lam), clip / sigma


def _output_noise_param(lam: float, tau: float, sigma_out: float) -> float:
    r"""Check ``(τ, σ_out)`` and return the output part's charged GDP parameter (λ already checked).

    ``s_g = (2τ/(λ σ_out) + η)(1 + 2⁻²⁷)``, ``η = AMP_GRID_SHARE``: the released output is
    ``γ (round(θ̃/γ) + k)``, ``k ~ N_Z(0, s²)^d`` with ``γ s ≥ σ_out``, whose rounded centre has L2
    sensitivity ``Δ′ = 2τ/λ + √d γ ≤ 2τ/λ + η σ_out``; it is ``(Δ′/(γ s))(1 + 1/s²)``-GDP
    (``analysis.discrete_gaussian``) and ``(Δ′/(γ s))²/2``-zCDP, both at most this ``s_g``
    (``output_grid.amp_output_noise`` computes the exact values for a given ``d``).
    """
    tau = check_nonnegative(tau, "tau", allow_inf=False)
    sigma_out = check_positive(sigma_out, "sigma_out", allow_inf=False)
    return (2.0 * tau / (float(lam) * sigma_out) + AMP_GRID_SHARE) * _OUTPUT_MU_FACTOR


def _check_epsilon(epsilon: float, name: str = "epsilon") -> float:
    r"""A real ε (negative allowed: a profile is defined on the whole line; NaN refused)."""
    try:
        value = float(epsilon)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{name} must be a real number, got {epsilon!r}.") from err
    if isinstance(epsilon, bool) or math.isnan(value):
        raise ValueError(f"{name} must be a real number, got {epsilon!r}.")
    return value


def _check_orders(alpha: float | np.ndarray) -> np.ndarray:
    r"""``α`` as a float64 array, every entry finite and ``> 1``."""
    try:
        arr = np.asarray(alpha, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise ValueError(f"alpha must be a number or an array of numbers, got {alpha!r}.") from err
    if isinstance(alpha, bool) or arr.size == 0 or not np.all(np.isfinite(arr) & (arr > 1.0)):
        raise ValueError(f"alpha must be finite and exceed 1 (every entry), got {alpha!r}.")
    return arr


def _scalar_or_array(value: np.ndarray, like: float | np.ndarray) -> float | np.ndarray:
    return float(value) if np.ndim(like) == 0 else value
