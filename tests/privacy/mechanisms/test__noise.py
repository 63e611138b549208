r"""The only module that draws privacy noise: the OS-entropy samplers' distributions and tails (issue
28, item 6), the per-release μ it accepts, and the Gaussian releases on a public grid (issue 40,
item 1: the statistic rounded to the grid plus exact discrete Gaussian integers).

Statistical tests use fixed bounds whose false-failure probability is about 10⁻⁶ or
less each (stated at every bound). The support tests drive the public samplers with
all-zero OS bits (replacing ``os.urandom``), the deepest draw there is; the 53-bit
Box–Muller sampler of before fails them (its largest ``|Z|`` is 8.65, its Gumbels span
``[−3.62, 37.43]``).
"""

from __future__ import annotations

import math
import os
import re

import numpy as np
import pytest
import torch
from scipy.special import log_ndtr, ndtri_exp
from scipy.stats import chisquare, gumbel_r, kstest, norm

import botorch_dp.privacy.mechanisms._noise as mechanisms
from botorch_dp.privacy.mechanisms import GaussianGradientMechanism
from botorch_dp.privacy.mechanisms._noise import (
    MAX_OS_ENTROPY_RELEASE_MU,
    OS_ENTROPY_NORMAL_MAX_ABS,
    _gumbel_from_half_uniform,
    _half_uniform_from_bits,
    _half_uniform_from_words,
    _normal_from_half_uniform,
    _os_entropy_half_uniform,
    draw_gaussian,
    os_entropy_gumbel,
    os_entropy_normal,
    os_entropy_uniform,
)
from botorch_dp.privacy.mechanisms.scores import gumbel_max_index

N = 200_000
LN2 = math.log(2.0)


def _dkw_bound(n: int, alpha: float = 1e-6) -> float:
    r"""``ε`` with ``P(sup |F_n − F| > ε) ≤ 2 exp(−2nε²) = alpha`` (DKW, Massart's constant)."""
    return math.sqrt(math.log(2.0 / alpha) / (2.0 * n))


def _urandom_from(first: bytes):
    r"""A stand-in for ``os.urandom``: ``first`` (zero-padded) on the first call, then zeros."""
    calls = []

    def fake(count: int) -> bytes:
        calls.append(count)
        head = first if len(calls) == 1 else b""
        return (head + bytes(count))[:count]

    return fake


def _words(*values: int) -> bytes:
    return torch.tensor(values, dtype=torch.int64).numpy().tobytes()


# ----------------------------------------------------------------------- distribution
def test_os_entropy_normal_is_standard_normal():
    x = os_entropy_normal(N)
    assert x.shape == (N,) and x.dtype == torch.float64
    assert kstest(x.numpy(), "norm").statistic < _dkw_bound(N)
    bound = 5.5 / math.sqrt(N)  # 5.5 standard errors: two-sided 4e-8
    assert abs(float(x.mean())) < bound
    assert abs(float(x.var()) - 1.0) < bound * math.sqrt(2.0)  # Var(s²) ≈ 2/n
    assert abs(float((x > 0).double().mean()) - 0.5) < bound * 0.5  # the sign is fair


def test_os_entropy_uniform_and_gumbel_have_their_distributions():
    u = os_entropy_uniform(N)
    assert bool((u > 0).all() and (u < 1).all())
    assert kstest(u.numpy(), "uniform").statistic < _dkw_bound(N)
    g = os_entropy_gumbel(N)
    assert g.dtype == torch.float64 and bool(torch.isfinite(g).all())
    assert kstest(g.numpy(), gumbel_r.cdf).statistic < _dkw_bound(N)


def test_draws_are_not_reproducible():
    for draw in (os_entropy_normal, os_entropy_uniform, os_entropy_gumbel):
        assert not torch.equal(draw(8), draw(8))
    assert os_entropy_normal(0).shape == (0,) and os_entropy_gumbel(0).shape == (0,)


def test_binades_of_the_half_uniforms_are_geometric():
    r"""``u`` lies in ``[2^{-(k+2)}, 2^{-(k+1)})`` with probability ``2^{-(k+1)}``: the deep
    binades come at the right rate (χ² over ``k = 0..14`` and the rest, p > 1e-6), and within
    a binade ``u`` is uniform (its scaled mantissa passes a KS test)."""
    n = 2**20
    u, sign = _os_entropy_half_uniform(n)
    assert bool((u > 0).all() and (u < 0.5).all())
    mantissa, exponent = torch.frexp(u)  # u = mantissa · 2^exponent, mantissa in [1/2, 1)
    k = (-exponent - 1).clamp(max=15)
    counts = torch.bincount(k, minlength=16).double().numpy()
    expected = n * np.array([2.0 ** -(j + 1) for j in range(15)] + [2.0**-15])
    assert chisquare(counts, expected).pvalue > 1e-6
    # P(u < 2^-16) = 2^-15: 32 expected of 2^20, and none at all has probability e^-32
    assert int((u < 2.0**-16).sum()) > 0
    assert kstest(2.0 * mantissa.numpy() - 1.0, "uniform").statistic < _dkw_bound(n)
    assert abs(float((sign != 0).double().mean()) - 0.5) < 5.5 * 0.5 / math.sqrt(n)


# ----------------------------------------------------------------------- support
def test_the_smallest_uniform_gives_the_largest_normal_magnitude(monkeypatch):
    r"""The transform at the deepest bits: ``u = 2⁻¹⁰⁷⁴`` and ``|Z| = −Φ⁻¹(2⁻¹⁰⁷⁴) ≥ 37``."""
    smallest = _half_uniform_from_bits(torch.tensor([1072, 1072]), torch.tensor([0, 0]))
    assert smallest.tolist() == [2.0**-1074] * 2
    z = _normal_from_half_uniform(smallest, torch.tensor([0, mechanisms._SIGN_BIT]))
    assert z.tolist() == [-OS_ENTROPY_NORMAL_MAX_ABS, OS_ENTROPY_NORMAL_MAX_ABS]
    assert OS_ENTROPY_NORMAL_MAX_ABS >= 37.0
    assert OS_ENTROPY_NORMAL_MAX_ABS == pytest.approx(-float(ndtri_exp(-1074 * LN2)), rel=1e-15)
    # all-zero bit strings stop at k = 1072 after a bounded number of rounds
    calls = []

    def zeros(count: int) -> torch.Tensor:
        calls.append(count)
        return torch.zeros(count, dtype=torch.int64)

    monkeypatch.setattr(mechanisms, "_os_entropy_words", zeros)
    u, sign = _half_uniform_from_words(torch.tensor([0, mechanisms._SIGN_BIT]), torch.tensor([0, 0]))
    assert u.tolist() == [2.0**-1074, 2.0**-1074] and sign.tolist() == [0, mechanisms._SIGN_BIT]
    assert len(calls) == math.ceil((1072 - 53) / 53)


def test_os_entropy_normal_reaches_beyond_37_on_the_deepest_bits(monkeypatch):
    r"""All-zero OS bits give the deepest draw; Box–Muller's would be ``√(2 ln 2⁵⁴) = 8.65``."""
    monkeypatch.setattr(os, "urandom", _urandom_from(b""))
    z = os_entropy_normal(3)
    assert bool((z.abs() >= 37.0).all()), z
    assert float(z.abs().max()) == OS_ENTROPY_NORMAL_MAX_ABS


def test_gumbel_max_can_choose_a_candidate_700_below_the_best(monkeypatch):
    r"""Deepest bits: the first Gumbel is at its lower end, the second (upper half) at its
    upper end, so ``G₁ − G₀ = 744.44 + 6.61`` and the candidate with log-weight −700 wins.
    With 53-bit uniforms the Gumbels span only ``[−3.62, 37.43]`` and it never could."""
    fake = _urandom_from(_words(0, mechanisms._SIGN_BIT, 0, 0))  # a-words, then b-words
    monkeypatch.setattr(os, "urandom", fake)
    assert gumbel_max_index(torch.tensor([0.0, -700.0], dtype=torch.float64)) == 1
    monkeypatch.setattr(os, "urandom", _urandom_from(_words(0, mechanisms._SIGN_BIT, 0, 0)))
    g = os_entropy_gumbel(2)
    assert g[0] == pytest.approx(-math.log(1074 * LN2), abs=1e-12)
    assert g[1] == pytest.approx(1074 * LN2, rel=1e-15)


def test_fast_binades_equal_the_bitwise_construction():
    r"""The float-conversion shortcut gives the same bits as ``_half_uniform_from_bits``,
    for strings starting with 0 to 52 zeros (the low 53 bits of ``b``, shifted right)."""
    a = mechanisms._os_entropy_words(100_000)
    b = (mechanisms._os_entropy_words(100_000) & (2**53 - 1)) >> torch.randint(0, 53, (100_000,))
    head = b & (2**53 - 1)
    keep = head != 0
    assert int(mechanisms._leading_zeros(head[keep]).max()) == 52
    u, sign = _half_uniform_from_words(a[keep], b[keep])
    k = mechanisms._leading_zeros(head[keep])
    assert torch.equal(u, _half_uniform_from_bits(k, a[keep] & (2**52 - 1)))
    assert torch.equal(sign, a[keep] & mechanisms._SIGN_BIT)


def test_deep_draws_continue_the_bit_string(monkeypatch):
    r"""53 zero bits, then further words: ``k`` adds up across words."""
    more = iter([torch.tensor([1, 0]), torch.tensor([2**52])])  # 52 zeros; 53 zeros, then 0 zeros
    monkeypatch.setattr(mechanisms, "_os_entropy_words", lambda count: next(more)[:count])
    u, _ = _half_uniform_from_words(torch.tensor([5, 7]), torch.tensor([0, 0]))
    assert u.tolist() == [2.0**-107 * (1 + 5 * 2.0**-52), 2.0**-108 * (1 + 7 * 2.0**-52)]


def _binade_samples() -> torch.Tensor:
    ks = [0, 1, 10, 26, 27, 52, 53, 200, 500, 800, 1000, 1020, 1021, 1040, 1060, 1071, 1072]
    mantissas = [0, 2**51 + 12345, 2**52 - 1]
    return _half_uniform_from_bits(torch.tensor([k for k in ks for _ in mantissas]), torch.tensor(mantissas * len(ks)))


def test_the_transforms_are_accurate_down_to_the_smallest_uniform():
    r"""Against ``mpmath`` across the binades, subnormals included: ``Φ⁻¹(u)`` (torch's
    ``ndtri``) and both halves of the Gumbel transform, to 1e-14 relative."""
    mpmath = pytest.importorskip("mpmath")
    mpmath.mp.dps = 40
    u = _binade_samples()
    lower, upper = torch.zeros_like(u, dtype=torch.int64), torch.full_like(u, mechanisms._SIGN_BIT, dtype=torch.int64)
    z = _normal_from_half_uniform(u, lower)
    g_lower, g_upper = _gumbel_from_half_uniform(u, lower), _gumbel_from_half_uniform(u, upper)
    for ui, zi, gl, gu in zip(u.tolist(), z.tolist(), g_lower.tolist(), g_upper.tolist(), strict=True):
        x = mpmath.mpf(ui)
        target = mpmath.log(x)
        ref = mpmath.findroot(lambda t, target=target: mpmath.log(mpmath.ncdf(t)) - target, -mpmath.sqrt(-2 * target))
        assert abs(zi - ref) <= 1e-14 * abs(ref), (ui, zi, ref)
        for got, want in ((gl, -mpmath.log(-mpmath.log(x))), (gu, -mpmath.log(-mpmath.log1p(-x)))):
            assert abs(got - want) <= 1e-14 * abs(want), (ui, got, want)


# ----------------------------------------------------------------------- accepted μ
def test_truncation_mass_at_the_largest_accepted_mu_is_below_1e_30():
    mu = MAX_OS_ENTROPY_RELEASE_MU
    # one coordinate carrying the whole shift: mass Φ̄(z_max − μ)
    assert log_ndtr(-(OS_ENTROPY_NORMAL_MAX_ABS - mu)) < math.log(1e-30)
    # d coordinates, each an exact normal except with probability 2^-1073:
    # Φ̄(Φ̄⁻¹(d·2⁻¹⁰⁷³) − μ) + d·2⁻¹⁰⁷³
    for d in (1, 10**9, 10**16):
        log_t = math.log(d) - 1073 * LN2
        z_t = -float(ndtri_exp(log_t))
        assert math.exp(log_ndtr(-(z_t - mu))) + math.exp(log_t) < 1e-30
    # and the constant is not slack by much: 5 % more μ would not do
    assert log_ndtr(-(OS_ENTROPY_NORMAL_MAX_ABS - 1.05 * mu)) > math.log(1e-30)


def _no_draw(count: int) -> bytes:
    raise AssertionError("os.urandom was called")


@pytest.mark.parametrize("mu", [MAX_OS_ENTROPY_RELEASE_MU * (1 + 1e-12), 27.0, 1e9])
def test_a_larger_per_release_mu_is_refused_before_anything_is_drawn(monkeypatch, mu):
    monkeypatch.setattr(os, "urandom", _no_draw)
    with pytest.raises(ValueError, match=re.escape(f"release_mu (per-release μ) = {mu!r}")):
        os_entropy_normal(4, release_mu=mu)
    with pytest.raises(ValueError, match="MAX_OS_ENTROPY_RELEASE_MU"):
        draw_gaussian(4, 0.1, None, False, torch.float64, None, release_mu=mu)
    with pytest.raises(ValueError, match="release_mu"):
        draw_gaussian(4, 0.1, torch.Generator().manual_seed(0), True, torch.float64, None, release_mu=mu)


@pytest.mark.parametrize("mu", [0.0, -1.0, math.nan])
def test_an_invalid_per_release_mu_is_refused(monkeypatch, mu):
    monkeypatch.setattr(os, "urandom", _no_draw)
    with pytest.raises(ValueError, match="release_mu"):
        os_entropy_normal(4, release_mu=mu)


def test_accepted_mu_inf_and_the_seeded_path_are_unchanged(monkeypatch):
    assert os_entropy_normal(4, release_mu=MAX_OS_ENTROPY_RELEASE_MU).shape == (4,)
    assert os_entropy_normal(4, release_mu=0.5).shape == (4,)
    assert os_entropy_normal(4, release_mu=math.inf).shape == (4,)
    # μ = inf: std 0, zeros, nothing drawn
    monkeypatch.setattr(os, "urandom", _no_draw)
    zeros = draw_gaussian(3, 0.0, None, False, torch.float64, None, release_mu=math.inf)
    assert torch.equal(zeros, torch.zeros(3, dtype=torch.float64))
    # a seeded generator is not the OS-entropy sampler: no check, torch.randn's numbers
    g1, g2 = torch.Generator().manual_seed(4), torch.Generator().manual_seed(4)
    drawn = draw_gaussian(5, 0.5, g1, False, torch.float64, None, release_mu=1e9)
    assert torch.equal(drawn, 0.5 * torch.randn(5, generator=g2, dtype=torch.float64))


def test_normal_tail_frequencies_beyond_three_sigma():
    r"""``P(|Z| > 3) = 2Φ̄(3)``: 540 expected of 2·10⁵; Poisson 5.5σ bounds."""
    x = os_entropy_normal(N)
    expected = N * 2.0 * norm.sf(3.0)
    count = int((x.abs() > 3.0).sum())
    assert abs(count - expected) < 5.5 * math.sqrt(expected)


# ----------------------------------------------------------------------- the grid release (issue 40)
def test_sampler_is_reproducible_from_a_seeded_generator_and_not_from_os_entropy():
    a = mechanisms.discrete_gaussian_integers(50, 2**20, generator=torch.Generator().manual_seed(3))
    b = mechanisms.discrete_gaussian_integers(50, 2**20, generator=torch.Generator().manual_seed(3))
    assert torch.equal(a, b) and a.dtype == torch.int64
    assert not torch.equal(
        mechanisms.discrete_gaussian_integers(50, 2**20), mechanisms.discrete_gaussian_integers(50, 2**20)
    )
    with pytest.raises(ValueError, match="scale"):
        mechanisms.discrete_gaussian_integers(3, 2**24 + 1)


def test_release_is_the_grid_rounded_statistic_plus_grid_integers():
    m = torch.tensor([0.0, 1e-3, -0.25, 1 / 3], dtype=torch.float64)
    released, noise = mechanisms.release_gaussian(
        m, sensitivity=0.02, mu=0.5, generator=torch.Generator().manual_seed(0), secure_rng=False
    )
    assert noise is not None and noise.mu <= 0.5
    steps = released / noise.grid
    assert torch.equal(steps, steps.round())  # every released value is an exact multiple of γ
    k = mechanisms.discrete_gaussian_integers(4, noise.scale, generator=torch.Generator().manual_seed(0))
    assert torch.equal(steps.to(torch.int64), torch.round(m / noise.grid).to(torch.int64) + k)
    same, _ = mechanisms.release_gaussian(
        m, sensitivity=0.02, mu=0.5, generator=torch.Generator().manual_seed(0), secure_rng=False
    )
    assert torch.equal(same, released)
    exact, none = mechanisms.release_gaussian(m, sensitivity=0.02, mu=math.inf, generator=None, secure_rng=False)
    assert none is None and torch.equal(exact, m)
    with pytest.raises(ValueError, match="not finite"):
        mechanisms.release_gaussian(torch.tensor([math.nan]), sensitivity=1.0, mu=1.0, generator=None, secure_rng=False)


def test_release_noise_has_the_calibrated_scale():
    m = torch.zeros(20_000, dtype=torch.float64)
    released, noise = mechanisms.release_gaussian(m, sensitivity=1.0, mu=10.0, generator=None, secure_rng=True)
    assert noise is not None
    assert float(released.std()) / noise.noise_std == pytest.approx(1.0, abs=5 * math.sqrt(0.5 / 20_000))


def test_goe_release_is_symmetric_on_the_grid_with_the_goe_scales():
    G = torch.zeros(60, 60, dtype=torch.float64)
    out, noise = mechanisms.release_goe(
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


def test_os_entropy_noise_is_standard_normal_and_never_repeats():
    from scipy.stats import kstest

    from botorch_dp.privacy.mechanisms import os_entropy_normal

    x = os_entropy_normal(20_001)
    assert x.shape == (20_001,) and x.dtype == torch.float64
    assert kstest(x.numpy(), "norm").pvalue > 1e-6  # fails by chance once in a million runs
    assert not torch.equal(os_entropy_normal(8), os_entropy_normal(8))
    # without a generator the mechanism draws from OS entropy: two releases differ
    mech = GaussianGradientMechanism(clip_bound=1.0, num_users=3, privacy_mu=1.0, num_steps=1)
    A, Y = torch.eye(2, dtype=torch.float64), torch.zeros(2, 3, dtype=torch.float64)
    assert not torch.equal(mech.release(A, Y).gradient, mech.release(A, Y).gradient)


def test_uniforms_are_in_the_open_unit_interval_and_os_entropy_is_not_reproducible():
    u = os_entropy_uniform(100_000)
    assert u.dtype == torch.float64 and bool((u > 0).all() and (u < 1).all())
    assert abs(float(u.mean()) - 0.5) < 5 * math.sqrt(1 / 12 / 100_000)
    assert not torch.equal(os_entropy_uniform(8), os_entropy_uniform(8))
    assert os_entropy_uniform(0).shape == (0,)
