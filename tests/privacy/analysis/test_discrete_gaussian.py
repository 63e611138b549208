r"""The discrete Gaussian's accounting on a public grid (issue 40, item 1): its μ′-GDP bound against
the exact privacy profile (brute-force summation), the calibration and the public grid. The
sampler is tested in ``tests/privacy/mechanisms/test__discrete_gaussian.py``, the release in
``tests/privacy/mechanisms/test__noise.py``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.special import log_ndtr

from botorch_dp.privacy.analysis.discrete_gaussian import (
    MAX_DISCRETE_GAUSSIAN_SCALE,
    calibrate_discrete_gaussian,
    discrete_gaussian_grid,
    discrete_gaussian_log_delta,
    discrete_gaussian_mu,
    discrete_gaussian_zcdp,
    grid_sensitivity,
)


def _log_gdp_delta(mu: float, epsilon: float) -> float:
    r"""``log δ(ε)`` of ``G_μ``, computed here independently: ``Φ(a)(1 − e^{ε + log Φ(b) − log Φ(a)})``."""
    a, b = log_ndtr(-epsilon / mu + mu / 2), log_ndtr(-epsilon / mu - mu / 2)
    exponent = min(epsilon + b - a, 0.0)
    return -math.inf if exponent == 0.0 else float(a + math.log(-math.expm1(exponent)))


def _log_delta_by_brute_force(epsilon: float, scale: float, shift: int) -> float:
    r"""``log Σ_x max(0, p(x) − e^ε p(x − v))`` by direct summation in float64 (small ``s`` only)."""
    x = np.arange(-40 * scale - shift, 40 * scale + shift + 1)
    w = np.exp(-(x**2) / (2 * scale**2))
    p, q = w / w.sum(), np.exp(-((x - shift) ** 2) / (2 * scale**2)) / w.sum()
    return math.log(np.maximum(p - math.exp(epsilon) * q, 0.0).sum())


# ----------------------------------------------------------------------- accounting
def test_exact_profile_equals_brute_force_summation():
    for scale, shift, epsilon in [(1.0, 1, 0.0), (2.0, 3, 0.5), (3.0, 1, 0.1), (5.0, 10, 2.0)]:
        got = discrete_gaussian_log_delta(epsilon, scale=scale, shift=shift)
        assert got == pytest.approx(_log_delta_by_brute_force(epsilon, scale, shift), rel=1e-9)


@pytest.mark.parametrize("scale", [1, 2, 3, 5, 10, 30, 100, 1000])
def test_the_charged_mu_dominates_the_discrete_gaussian_at_every_epsilon(scale):
    r"""``δ_disc(ε) ≤ δ_{G_μ′}(ε)`` with ``μ′ = (v/s)(1 + 1/s²)``, over a grid of ``ε`` reaching
    ``δ ≈ 1e-250``; exact sums in log space on both sides. Without the factor ``1 + 1/s²``
    the discrete side is larger at ``s = 1`` (checked in the next test)."""
    for shift in sorted({1, 2, 3, 5, 10, 2 * scale}):
        mu = discrete_gaussian_mu(shift, 1.0, scale)
        for epsilon in np.linspace(0.0, mu * mu / 2 + 30 * mu, 61):
            disc = discrete_gaussian_log_delta(float(epsilon), scale=scale, shift=shift)
            cont = _log_gdp_delta(mu, float(epsilon))
            assert disc <= cont + 1e-9, (scale, shift, float(epsilon), disc, cont)


def test_without_the_correction_the_plain_ratio_does_not_dominate_at_small_scale():
    scale, shift = 1, 10
    worst = max(
        discrete_gaussian_log_delta(float(e), scale=scale, shift=shift) - _log_gdp_delta(shift / scale, float(e))
        for e in np.linspace(0.0, 110.0, 45)
    )
    assert worst > 0.5  # log δ_disc exceeds log δ_GDP by more than 0.5 somewhere


def test_calibration_charges_at_most_the_planned_mu_and_is_tight():
    for sensitivity, mu, dim in [(0.04, 0.2, 5), (1.0, 1.0, 1), (2e-3, 0.09, 1), (0.3, 0.05, 400), (1e-9, 3.0, 2)]:
        noise = calibrate_discrete_gaussian(sensitivity=sensitivity, mu=mu, dim=dim)
        sigma0 = sensitivity / mu
        assert math.log2(noise.grid) == int(math.log2(noise.grid))  # a power of two
        assert 2**20 <= noise.scale <= MAX_DISCRETE_GAUSSIAN_SCALE
        assert noise.sensitivity == pytest.approx(sensitivity + math.sqrt(dim) * noise.grid, rel=1e-15)
        assert noise.mu <= mu and noise.mu > mu * (1 - 2.0**-18)  # charged μ covers it, barely
        assert noise.noise_std >= sigma0 and noise.noise_std < sigma0 * (1 + 2.0**-17 * (1 + math.sqrt(dim) / mu))
        # zCDP cross-check: ρ = Δ′²/(2σ²) ≤ μ′²/2
        assert discrete_gaussian_zcdp(noise.sensitivity, noise.noise_std) <= noise.mu**2 / 2
        # the rounding costs at most 2^-12 of Δ (or the grid is refined the most, to below 2^-22 σ₀)
        assert math.sqrt(dim) * noise.grid <= 2.0**-12 * sensitivity or noise.grid <= 2.0**-22 * sigma0
    # a small μ on many coordinates: the refined grid still leaves s within the sampler's range
    for dim, mu in [(10**4, 0.05), (10**6, 0.01), (100, 0.001), (100, 0.00099), (10**4, 0.0013)]:
        for sensitivity in (1.0, 1.9, 1.999, 2.0475):  # σ₀ low and high in its binade (2047.5 at μ = 0.001)
            assert calibrate_discrete_gaussian(sensitivity=sensitivity, mu=mu, dim=dim).scale <= 2**24


def test_the_grid_is_public_and_keeps_the_released_integers_below_2_52():
    grid = discrete_gaussian_grid(0.1, sensitivity=0.01, dim=1)
    assert grid == 2.0**-24  # floor(log2 0.1) = -4, minus 20 bits
    coarse = discrete_gaussian_grid(0.1, sensitivity=0.01, dim=1, magnitude_bound=1e12)
    assert (1e12 + 12.8) < 2.0**52 * coarse and (1e12 + 12.8) >= 2.0**51 * coarse
    assert grid_sensitivity(1.0, 2.0**-10, 16) == 1.0 + 4 * 2.0**-10
    with pytest.raises(ValueError, match="noise_std"):
        discrete_gaussian_grid(1e-305, sensitivity=1e-305, dim=1)
    with pytest.raises(ValueError, match="scale s"):
        calibrate_discrete_gaussian(sensitivity=1.0, mu=1e-9, dim=10**6)
