r"""The discrete Gaussian on a public grid (issue 40, item 1): the accounting (its μ′-GDP bound
against the exact privacy profile), the exact sampler (against its pmf) and the release.

Statistical tests use fixed seeds and bounds with a false-failure probability below about
``10⁻⁶`` each (stated at each bound).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.special import log_ndtr
from scipy.stats import chisquare

from botorch_dp.privacy.analysis.discrete_gaussian import (
    MAX_DISCRETE_GAUSSIAN_SCALE,
    calibrate_discrete_gaussian,
    discrete_gaussian_grid,
    discrete_gaussian_log_delta,
    discrete_gaussian_mu,
    discrete_gaussian_zcdp,
    grid_sensitivity,
)
from botorch_dp.privacy.mechanisms import _noise
from botorch_dp.privacy.mechanisms._discrete_gaussian import (
    _bernoulli_exp,
    _uniform_below,
    discrete_gaussian_from_words,
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


# ----------------------------------------------------------------------- the sampler
def _seeded_words(seed: int):
    return _noise._word_source(torch.Generator().manual_seed(seed), False)


def test_uniform_below_rejects_words_past_the_last_whole_multiple():
    words = iter([torch.tensor([2**62 - 1, 5]), torch.tensor([7])])  # 2^62 − 1 ≥ limit for bound 3
    out = _uniform_below(torch.tensor([3, 3]), lambda n: next(words)[:n])
    assert out.tolist() == [7 % 3, 5 % 3]


def test_bernoulli_exp_matches_its_probability():
    words = _seeded_words(1)
    n = 40_000
    for num, den in [(0, 1), (1, 3), (1, 1), (5, 2), (7, 3)]:
        hits = _bernoulli_exp(torch.full((n,), num), torch.full((n,), den), words)
        p = math.exp(-num / den)
        assert abs(float(hits.double().mean()) - p) < 5 * math.sqrt(p * (1 - p) / n) + 1e-12  # 5 sd: 6e-7


@pytest.mark.parametrize("scale", [1, 2, 3])
def test_sampler_matches_the_exact_pmf(scale):
    n = 30_000
    draws = discrete_gaussian_from_words(n, scale, _seeded_words(scale)).numpy()
    top = 4 * scale
    support = np.arange(-top, top + 1)
    full = np.arange(-60 * scale, 60 * scale + 1)
    weights = np.exp(-(full**2) / (2 * scale**2))
    pmf = weights / weights.sum()
    expected = np.array([pmf[np.abs(full) > top].sum()] + [pmf[full == k][0] for k in support]) * n
    counts = np.array([(np.abs(draws) > top).sum()] + [(draws == k).sum() for k in support])
    assert chisquare(counts, expected).pvalue > 1e-6


def test_sampler_at_the_release_scale_has_the_right_mean_and_variance():
    scale, n = 2**20 + 12345, 20_000
    for words in (_seeded_words(7), _noise._word_source(None, False)):
        x = discrete_gaussian_from_words(n, scale, words).double() / scale
        assert abs(float(x.mean())) < 5 / math.sqrt(n)  # 5 sd
        assert abs(float(x.var()) - 1) < 5 * math.sqrt(2 / n)  # 5 sd of the sample variance
        assert float((x.abs() < 1).double().mean()) == pytest.approx(0.6827, abs=5 * math.sqrt(0.22 / n))


def test_sampler_is_reproducible_from_a_seeded_generator_and_not_from_os_entropy():
    a = _noise.discrete_gaussian_integers(50, 2**20, generator=torch.Generator().manual_seed(3))
    b = _noise.discrete_gaussian_integers(50, 2**20, generator=torch.Generator().manual_seed(3))
    assert torch.equal(a, b) and a.dtype == torch.int64
    assert not torch.equal(_noise.discrete_gaussian_integers(50, 2**20), _noise.discrete_gaussian_integers(50, 2**20))
    with pytest.raises(ValueError, match="scale"):
        _noise.discrete_gaussian_integers(3, 2**24 + 1)


# ----------------------------------------------------------------------- the release
def test_release_is_the_grid_rounded_statistic_plus_grid_integers():
    m = torch.tensor([0.0, 1e-3, -0.25, 1 / 3], dtype=torch.float64)
    released, noise = _noise.release_gaussian(
        m, sensitivity=0.02, mu=0.5, generator=torch.Generator().manual_seed(0), secure_rng=False
    )
    assert noise is not None and noise.mu <= 0.5
    steps = released / noise.grid
    assert torch.equal(steps, steps.round())  # every released value is an exact multiple of γ
    k = _noise.discrete_gaussian_integers(4, noise.scale, generator=torch.Generator().manual_seed(0))
    assert torch.equal(steps.to(torch.int64), torch.round(m / noise.grid).to(torch.int64) + k)
    same, _ = _noise.release_gaussian(
        m, sensitivity=0.02, mu=0.5, generator=torch.Generator().manual_seed(0), secure_rng=False
    )
    assert torch.equal(same, released)
    exact, none = _noise.release_gaussian(m, sensitivity=0.02, mu=math.inf, generator=None, secure_rng=False)
    assert none is None and torch.equal(exact, m)
    with pytest.raises(ValueError, match="not finite"):
        _noise.release_gaussian(torch.tensor([math.nan]), sensitivity=1.0, mu=1.0, generator=None, secure_rng=False)


def test_release_noise_has_the_calibrated_scale():
    m = torch.zeros(20_000, dtype=torch.float64)
    released, noise = _noise.release_gaussian(m, sensitivity=1.0, mu=10.0, generator=None, secure_rng=True)
    assert noise is not None
    assert float(released.std()) / noise.noise_std == pytest.approx(1.0, abs=5 * math.sqrt(0.5 / 20_000))


def test_goe_release_is_symmetric_on_the_grid_with_the_goe_scales():
    G = torch.zeros(60, 60, dtype=torch.float64)
    out, noise = _noise.release_goe(
        G, sensitivity=1.0, mu=1.0, generator=torch.Generator().manual_seed(2), secure_rng=False
    )
    assert noise is not None and torch.equal(out, out.T)
    assert torch.equal(out / noise.grid, (out / noise.grid).round())
    sigma = noise.noise_std
    off = out[torch.triu_indices(60, 60, offset=1).unbind()]
    assert float(off.std()) / sigma == pytest.approx(1.0, abs=5 * math.sqrt(0.5 / off.numel()))
    assert float(out.diagonal().std()) / sigma == pytest.approx(
        math.sqrt(2), abs=5 * math.sqrt(2) * math.sqrt(0.5 / 60)
    )
    assert noise.sensitivity == pytest.approx(1.0 + 60 / math.sqrt(2) * noise.grid, rel=1e-15)
