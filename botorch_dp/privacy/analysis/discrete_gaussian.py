r"""The discrete Gaussian on a public power-of-two grid (Canonne, Kamath & Steinke 2020): the grid,
the sensitivity after rounding to it, and the μ-GDP and zCDP bounds that the ledger charges.

A release of a ``d``-vector ``m`` of L2 sensitivity ``Δ`` rounds it to the grid ``γ = 2^j``
coordinate-wise, ``M = round(m/γ)``, adds ``k ~ N_Z(0, s²)^d`` (integer ``s``, drawn exactly,
``mechanisms._noise``) and releases ``γ (M + k)``, exactly representable in float64. Rounding
moves each coordinate by at most ``1/2`` grid step, so ``‖M − M′‖₂ ≤ Δ/γ + √d``: the grid
sensitivity is ``Δ′ = Δ + √d γ``. Each 1-D discrete Gaussian with integer shift ``v`` is
dominated by the Gaussian trade-off curve ``G_{(v/s)(1 + 1/s²)}`` (checked numerically,
``discrete_gaussian_log_delta`` against ``G_μ``'s profile, for ``s ≤ 1000`` and ``v ≤ 2s`` in
``tests/privacy/analysis/test_discrete_gaussian.py``; the plain ``v/s`` fails there by a margin in
``log δ`` that shrinks like ``1/s²``, as does the correction's slack; the releases' ``s ≈ 2^20``
rest on that trend, not on a proof),
and GDP composes over the independent coordinates, so the release is ``μ′``-GDP with
``μ′ = (Δ′/σ)(1 + 1/s²)``, ``σ = γ s``. It is also ``Δ′²/(2σ²)``-zCDP (CKS Thm. 14), the
cross-check. ``calibrate_discrete_gaussian`` picks the grid from public quantities only and
the smallest integer ``s`` with ``μ′ ≤ μ``, so the ledger charges the planned ``μ``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.special import logsumexp

from botorch_dp.privacy.checks import check_nonnegative, check_positive, check_positive_int

__all__ = [
    "GRID_BITS",
    "MAX_DISCRETE_GAUSSIAN_SCALE",
    "DiscreteGaussianNoise",
    "calibrate_discrete_gaussian",
    "discrete_gaussian_grid",
    "discrete_gaussian_log_delta",
    "discrete_gaussian_mu",
    "discrete_gaussian_zcdp",
    "grid_sensitivity",
]

#: ``σ/γ ∈ [2^20, 2^21)`` by default: the grid is about a millionth of the noise.
GRID_BITS = 20

#: The largest integer scale ``s`` the exact sampler takes (its int64 arithmetic needs ``2s² < 2^50``).
MAX_DISCRETE_GAUSSIAN_SCALE = 2**24

#: Released integers stay below ``2^52`` in magnitude, so ``γ (M + k)`` is exact in float64.
_MAX_GRID_STEPS = 2.0**52

#: The grid may be refined (by at most 2 bits) until rounding costs at most ``2^-12`` of ``Δ``.
_ROUNDING_SHARE = 2.0**-12


@dataclass(frozen=True)
class DiscreteGaussianNoise:
    r"""The calibrated noise of one discrete-Gaussian release.

    Attributes:
        grid: ``γ``, a power of two; every released value is an integer multiple of it.
        scale: ``s``, the integer scale of ``k ~ N_Z(0, s²)`` (in grid steps).
        sensitivity: ``Δ′ = Δ + √d γ``, the L2 sensitivity of the rounded statistic.
        mu: ``μ′ = (Δ′/σ)(1 + 1/s²)``, the release's GDP parameter (at most the planned ``μ``).
    """

    grid: float
    scale: int
    sensitivity: float
    mu: float

    @property
    def noise_std(self) -> float:
        r"""``σ = γ s`` (exact: a power of two times an integer below ``2^25``)."""
        return self.grid * self.scale


def _floor_log2(x: float) -> int:
    return math.frexp(x)[1] - 1


def discrete_gaussian_grid(
    noise_std: float, *, sensitivity: float, dim: float, magnitude_bound: float | None = None
) -> float:
    r"""The public grid ``γ = 2^j`` for noise ``σ₀`` on a ``d``-coordinate statistic.

    ``j = floor(log2 σ₀) − GRID_BITS``; refined by up to 2 bits while ``√d γ > 2^-12 Δ``
    (small per-release ``μ`` or large ``d``: the rounding would cost noise), then raised while
    ``magnitude_bound + 128 σ₀ ≥ 2^52 γ`` (so the released integers stay below ``2^52``). Only
    public quantities enter.

    Args:
        noise_std: ``σ₀ > 0``, finite (the continuous noise ``Δ/μ``).
        sensitivity: ``Δ > 0``, finite.
        dim: ``d > 0``, the number of coordinates (a float: GOE counts ``k²/2``).
        magnitude_bound: A public bound on every ``|m_i|`` (``None``: no bound known; the
            release then clamps ``|M|`` to ``2^52``).

    Returns:
        ``γ``, a power of two.
    """
    noise_std = check_positive(noise_std, "noise_std (σ₀)", allow_inf=False)
    sensitivity = check_positive(sensitivity, "sensitivity (Δ)", allow_inf=False)
    dim = check_positive(dim, "dim (d)", allow_inf=False)
    top = _floor_log2(noise_std)
    exponent = top - GRID_BITS
    # at most 2 bits: σ₀/γ < 2^23 leaves room for the √d/μ that rounding adds to s (s <= 2^24)
    while math.sqrt(dim) * math.ldexp(1.0, exponent) > _ROUNDING_SHARE * sensitivity and exponent > top - 22:
        exponent -= 1
    if magnitude_bound is not None:
        bound = check_nonnegative(magnitude_bound, "magnitude_bound", allow_inf=False) + 128.0 * noise_std
        while bound >= math.ldexp(_MAX_GRID_STEPS, exponent):
            exponent += 1
    if not -1000 <= exponent <= 900:
        raise ValueError(
            f"noise_std (σ₀) = {noise_std!r} needs the grid 2^{exponent}, outside [2^-1000, 2^900]: "
            "the released values would not be exact float64 numbers. Nothing was released."
        )
    return math.ldexp(1.0, exponent)


def grid_sensitivity(sensitivity: float, grid: float, dim: float) -> float:
    r"""``Δ′ = Δ + √d γ``: the L2 sensitivity after coordinate-wise rounding to the grid ``γ``
    (each side moves by at most ``γ/2`` per coordinate)."""
    return check_positive(sensitivity, "sensitivity (Δ)", allow_inf=False) + math.sqrt(
        check_positive(dim, "dim (d)", allow_inf=False)
    ) * check_positive(grid, "grid (γ)", allow_inf=False)


def discrete_gaussian_mu(rounded_sensitivity: float, grid: float, scale: int) -> float:
    r"""``μ′ = (Δ′/(γ s))(1 + 1/s²)``: the GDP parameter of ``γ (M + N_Z(0, s²)^d)`` whose
    rounded statistic ``M`` has L2 sensitivity ``Δ′``."""
    scale = check_positive_int(scale, "scale (s)")
    shift = check_positive(rounded_sensitivity, "rounded_sensitivity (Δ′)", allow_inf=False) / check_positive(
        grid, "grid (γ)", allow_inf=False
    )
    return shift / scale * (1.0 + 1.0 / scale**2)


def discrete_gaussian_zcdp(rounded_sensitivity: float, noise_std: float) -> float:
    r"""``ρ = Δ′²/(2σ²)``: the zCDP of the ``d``-dim discrete Gaussian (CKS 2020, Thm. 14)."""
    ratio = check_positive(rounded_sensitivity, "rounded_sensitivity (Δ′)", allow_inf=False) / check_positive(
        noise_std, "noise_std (σ)", allow_inf=False
    )
    return 0.5 * ratio * ratio


def calibrate_discrete_gaussian(
    *, sensitivity: float, mu: float, dim: float, magnitude_bound: float | None = None
) -> DiscreteGaussianNoise:
    r"""The grid and the smallest integer scale that make a ``d``-coordinate release ``μ``-GDP.

    ``γ = discrete_gaussian_grid(Δ/μ, ...)``, ``Δ′ = Δ + √d γ``, and ``s`` the smallest
    integer with ``(Δ′/(γ s))(1 + 1/s²) ≤ μ (1 − 2^-40)`` (the margin covers float rounding
    in ``Δ′``). So ``σ = γ s ≥ Δ/μ``, larger by about ``√d γ/μ + γ``: a relative
    ``2^-20 (1 + √d/μ)`` at the default grid.

    Args:
        sensitivity: ``Δ > 0``, finite: the statistic's L2 sensitivity.
        mu: ``μ > 0``, finite: the planned GDP parameter of this release.
        dim: ``d > 0``: the number of coordinates.
        magnitude_bound: A public bound on every ``|m_i|`` (see ``discrete_gaussian_grid``).

    Returns:
        The ``DiscreteGaussianNoise`` (its ``mu`` is ``μ′ ≤ μ``).
    """
    sensitivity = check_positive(sensitivity, "sensitivity (Δ)", allow_inf=False)
    mu = check_positive(mu, "mu (μ)", allow_inf=False)
    grid = discrete_gaussian_grid(sensitivity / mu, sensitivity=sensitivity, dim=dim, magnitude_bound=magnitude_bound)
    rounded = grid_sensitivity(sensitivity, grid, dim)
    target = mu * (1.0 - 2.0**-40)
    scale = max(1, math.ceil(rounded / grid / target))
    while discrete_gaussian_mu(rounded, grid, scale) > target:
        scale += 1
    if scale > MAX_DISCRETE_GAUSSIAN_SCALE:
        raise ValueError(
            f"The discrete Gaussian for sensitivity (Δ) = {sensitivity!r}, mu (μ) = {mu!r}, dim (d) = {dim!r} "
            f"needs the scale s = {scale} > 2^24 grid steps (√d/μ is too large for the exact sampler). "
            "Nothing was released."
        )
    return DiscreteGaussianNoise(grid, scale, rounded, discrete_gaussian_mu(rounded, grid, scale))


def discrete_gaussian_log_delta(epsilon: float, *, scale: float, shift: int) -> float:
    r"""``log δ(ε)`` of ``N_Z(0, s²)`` against ``N_Z(v, s²)``: the exact privacy profile of the
    1-D discrete Gaussian with integer shift ``v`` (by symmetry, either direction).

    ``δ(ε) = Σ_x max(0, p(x) − e^ε p(x − v)) = Σ_{x: L(x) > ε} p(x)(1 − e^{ε − L(x)})`` with the
    privacy loss ``L(x) = (v² − 2vx)/(2s²)``; every term is non-negative, summed in log space
    over ``|x| ≤ 60 s + v`` (the rest has mass below ``e^{-1800}``).

    Args:
        epsilon: ``ε ≥ 0``, finite.
        scale: ``s > 0`` (any real; the sampler uses integers).
        shift: ``v ≥ 1``.

    Returns:
        ``log δ(ε)`` (``-inf`` where ``δ = 0``).
    """
    epsilon = check_nonnegative(epsilon, "epsilon (ε)", allow_inf=False)
    scale = check_positive(scale, "scale (s)", allow_inf=False)
    shift = check_positive_int(shift, "shift (v)")
    reach = math.ceil(60.0 * scale) + shift
    x = np.arange(-reach, reach + 1, dtype=np.float64)
    log_p = -(x * x) / (2.0 * scale * scale)
    log_p -= logsumexp(log_p)
    loss = (shift * shift - 2.0 * shift * x) / (2.0 * scale * scale)
    above = loss > epsilon
    if not above.any():
        return -math.inf
    terms = log_p[above] + np.log(-np.expm1(epsilon - loss[above]))
    return float(logsumexp(terms))
