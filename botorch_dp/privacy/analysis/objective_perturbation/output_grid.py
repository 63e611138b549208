r"""The public grid of AMP's released output and the discrete Gaussian drawn on it.

AMP releases ``γ (M + k)`` with ``M = round(θ̃/γ)`` coordinate-wise and ``k ~ N_Z(0, s²)^d``
drawn exactly (``mechanisms._noise``), like every other Gaussian release of the package. The
grid is a power of two from public quantities only:

    ``γ = 2^(⌊log₂ σ_out⌋ − 14 − ⌈log₂ √d⌉)``,  ``s = ⌈σ_out/γ⌉``,

so ``√d γ ≤ 2⁻¹⁴ σ_out`` (``AMP_GRID_SHARE``), ``γ s ≥ σ_out``, and ``σ_out/γ ∈ [2¹⁴ √d, 2¹⁶ √d)``:
the grid is at least ``2¹⁴ √d`` times finer than the noise. Rounding moves each coordinate by at
most ``γ/2``, so the rounded centre's L2 sensitivity is ``Δ′ = 2τ/λ + √d γ ≤ 2τ/λ + 2⁻¹⁴ σ_out``,
and the charged ``s_g = (2τ/(λ σ_out) + 2⁻¹⁴)(1 + 2⁻²⁷)`` (``_params._output_noise_param``, used by
``amp_rdp``, ``amp_delta`` and ``calibrate_amp``) bounds both ``Δ′/(γ s)`` (the zCDP/RDP of the
discrete Gaussian, Canonne, Kamath & Steinke 2020, Thm. 14) and the μ ``(Δ′/(γ s))(1 + 1/s²)``
that dominates it (``analysis.discrete_gaussian``) for every ``d ≤ AMP_MAX_DIM``. The exact
sampler takes ``s ≤ 2²⁴``, hence ``d ≤ 2¹⁸``; its running time does not depend on ``s``.
"""

from __future__ import annotations

import math

from botorch_dp.privacy.analysis.discrete_gaussian import DiscreteGaussianNoise, discrete_gaussian_mu, grid_sensitivity
from botorch_dp.privacy.analysis.objective_perturbation._params import AMP_GRID_SHARE, _output_noise_param
from botorch_dp.privacy.checks import check_positive, check_positive_int

__all__ = ["AMP_GRID_SHARE", "AMP_MAX_DIM", "amp_output_grid", "amp_output_mu", "amp_output_noise"]

#: The largest ``d`` whose output grid keeps the scale ``s`` within the exact sampler's ``2²⁴``.
AMP_MAX_DIM = 2**18

_GRID_BITS = 14  # log₂(1/AMP_GRID_SHARE)


def amp_output_grid(*, dim: int, sigma_out: float) -> float:
    r"""The public grid ``γ = 2^(⌊log₂ σ_out⌋ − 14 − ⌈log₂ √d⌉)`` of AMP's ``d`` released parameters.

    Args:
        dim: ``d``, the number of parameters, ``1 ≤ d ≤ AMP_MAX_DIM``.
        sigma_out: ``σ_out > 0``, finite.

    Returns:
        ``γ``, a power of two with ``√d γ ≤ 2⁻¹⁴ σ_out``.

    Raises:
        ValueError: ``d > AMP_MAX_DIM``, or a ``σ_out`` whose grid is not a normal float64.
    """
    dim = check_positive_int(dim, "dim (d)")
    if dim > AMP_MAX_DIM:
        raise ValueError(
            f"dim (d) = {dim} exceeds AMP_MAX_DIM = {AMP_MAX_DIM}: AMP's output grid would need a discrete "
            "Gaussian scale above 2^24, beyond the exact sampler. Nothing was released."
        )
    sigma_out = check_positive(sigma_out, "sigma_out (σ_out)", allow_inf=False)
    half_log_dim = ((dim - 1).bit_length() + 1) // 2  # the smallest k with 4^k ≥ d
    exponent = math.frexp(sigma_out)[1] - 1 - _GRID_BITS - half_log_dim
    if not -1000 <= exponent <= 900:
        raise ValueError(
            f"sigma_out (σ_out) = {sigma_out!r} needs AMP's output grid 2^{exponent}, outside [2^-1000, 2^900]. "
            "Nothing was released."
        )
    return math.ldexp(1.0, exponent)


def amp_output_mu(*, lam: float, tau: float, sigma_out: float) -> float:
    r"""The output part's charged ``s_g = (2τ/(λ σ_out) + 2⁻¹⁴)(1 + 2⁻²⁷)``: its GDP parameter and
    the ``√(2ρ)`` of its zCDP, for every ``d ≤ AMP_MAX_DIM``."""
    return _output_noise_param(check_positive(lam, "lam (λ)", allow_inf=False), tau, sigma_out)


def amp_output_noise(*, dim: int, lam: float, tau: float, sigma_out: float) -> DiscreteGaussianNoise:
    r"""The discrete Gaussian of AMP's output release for ``d`` parameters.

    Args:
        dim: ``d``, ``1 ≤ d ≤ AMP_MAX_DIM``.
        lam: ``λ > 0``.
        tau: ``τ > 0``, the gradient-norm tolerance.
        sigma_out: ``σ_out > 0``.

    Returns:
        ``DiscreteGaussianNoise(γ, s, Δ′, μ′)`` with ``Δ′ = 2τ/λ + √d γ`` and
        ``μ′ = (Δ′/(γ s))(1 + 1/s²) ≤ amp_output_mu(...)``.
    """
    grid = amp_output_grid(dim=dim, sigma_out=sigma_out)
    lam = check_positive(lam, "lam (λ)", allow_inf=False)
    tau = check_positive(tau, "tau (τ)", allow_inf=False)
    scale = math.ceil(sigma_out / grid)
    rounded = grid_sensitivity(2.0 * tau / lam, grid, dim)
    mu = discrete_gaussian_mu(rounded, grid, scale)
    if not mu <= amp_output_mu(lam=lam, tau=tau, sigma_out=sigma_out):  # holds by construction; checked anyway
        raise RuntimeError(f"AMP's output noise μ′ = {mu!r} exceeds its charged bound; nothing was released.")
    return DiscreteGaussianNoise(grid, scale, rounded, mu)
