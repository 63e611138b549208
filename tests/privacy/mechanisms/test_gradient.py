r"""The Gaussian gradient mechanism (botorch_dp/privacy/mechanisms/gradient.py): noise of standard
deviation ``2B√T/(nμ)`` (fixed-seed χ² bound), the same scale from OS entropy, no noise and its
diagnostics at ``μ = ∞``, refusals naming the parameter, and each release's cost ``μ/√T``; and
Menart et al.'s per-release-μ gradient and norm releases (``AdaptiveGaussianGradientMechanism``),
against ``clipped_mean_gradient`` and noise of standard deviation ``Δ/μ``."""

from __future__ import annotations

import math

import pytest
import torch

from botorch_dp.privacy.mechanisms import (
    AdaptiveGaussianGradientMechanism,
    GaussianGradientMechanism,
    PrivacyCost,
    clipped_mean_gradient,
)
from botorch_dp.privacy.mechanisms._noise import release_gaussian


def test_noise_std_statistical():
    """Empirical std of the released noise matches 2B√T/(nμ) (fixed seed, chi-square bound)."""
    B, n, mu, T, d = 2.0, 100, 0.8, 16, 50
    expected = 2 * B * math.sqrt(T) / (n * mu)
    mech = GaussianGradientMechanism(
        clip_bound=B, num_users=n, privacy_mu=mu, num_steps=T, generator=torch.Generator().manual_seed(0)
    )
    assert math.isclose(mech.noise_std, expected)
    assert math.isclose(mech.step_mu, mu / math.sqrt(T))
    A = torch.zeros(d, 3, dtype=torch.float64)
    Y = torch.zeros(3, n, dtype=torch.float64)
    draws = torch.stack([mech.release(A, Y).gradient for _ in range(200)])  # 10,000 samples
    m = draws.numel()
    std = float(draws.pow(2).mean().sqrt())
    # sum of squares / σ² ~ χ²_m: 5-sigma band on the standard deviation ≈ 1 ± 5/sqrt(2m)
    assert abs(std / expected - 1) < 5 / math.sqrt(2 * m)
    assert abs(float(draws.mean())) < 5 * expected / math.sqrt(m)


def test_secure_rng_has_the_same_scale():
    mech = GaussianGradientMechanism(clip_bound=1.0, num_users=10, privacy_mu=1.0, num_steps=4, secure_rng=True)
    A, Y = torch.zeros(100, 3, dtype=torch.float64), torch.zeros(3, 10, dtype=torch.float64)
    w = torch.stack([mech.release(A, Y).gradient for _ in range(20)])
    assert abs(float(w.std()) / mech.noise_std - 1) < 5 / math.sqrt(2 * w.numel())


def test_non_private_and_diagnostics():
    mech = GaussianGradientMechanism(clip_bound=1.0, num_users=2, privacy_mu=math.inf, num_steps=3)
    assert mech.noise_std == 0.0
    A = torch.eye(2, dtype=torch.float64)
    Y = torch.tensor([[3.0, 0.1], [4.0, 0.2]], dtype=torch.float64)
    rel = mech.release(A, Y, diagnostics=True)
    torch.testing.assert_close(rel.gradient, torch.tensor([0.35, 0.5], dtype=torch.float64))
    assert rel.diagnostics.clip_fraction == 0.5
    assert rel.cost.mu == math.inf
    assert mech.release(A, Y).diagnostics is None


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(clip_bound=0.0), "clip_bound"),
        (dict(clip_bound=-1.0), "clip_bound"),
        (dict(num_users=0), "num_users"),
        (dict(privacy_mu=0.0), "privacy_mu"),
        (dict(privacy_mu=-2.0), "privacy_mu"),
        (dict(num_steps=0), "num_steps"),
    ],
)
def test_mechanism_refuses_bad_parameters(kwargs, match):
    args = dict(clip_bound=1.0, num_users=3, privacy_mu=1.0, num_steps=2) | kwargs
    with pytest.raises(ValueError, match=match):
        GaussianGradientMechanism(**args)


def test_release_returns_its_cost():
    mech = GaussianGradientMechanism(clip_bound=1.0, num_users=4, privacy_mu=2.0, num_steps=16)
    rel = mech.release(torch.eye(2, dtype=torch.float64), torch.ones(2, 4, dtype=torch.float64))
    assert rel.cost.mu == pytest.approx(0.5) and rel.cost.count == 1


def _data(seed: int = 0, d: int = 3, N: int = 5, n: int = 30) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(d, N, generator=g, dtype=torch.float64), 3 * torch.randn(N, n, generator=g, dtype=torch.float64)


def test_clipped_mean_is_the_modules_clipped_mean_and_infinite_mu_releases_it_exactly():
    A, Y = _data()
    mech = AdaptiveGaussianGradientMechanism(clip_bound=0.7, num_users=30)
    assert mech.sensitivity == pytest.approx(2 * 0.7 / 30)
    step = mech.clipped_mean(A, Y)
    mean, _ = clipped_mean_gradient(A, Y, 0.7)
    norm = step.release_norm(math.inf)
    grad = step.release_gradient(math.inf, diagnostics=True)
    assert norm.norm == float(mean.norm()) and norm.noise_std == 0.0
    assert torch.equal(grad.gradient, mean) and torch.equal(grad.diagnostics.unnoised_gradient, mean)
    assert norm.cost == PrivacyCost(mu=math.inf) and grad.cost == PrivacyCost(mu=math.inf)


def test_each_step_releases_its_norm_and_gradient_at_most_once():
    A, Y = _data()
    step = AdaptiveGaussianGradientMechanism(clip_bound=1.0, num_users=30).clipped_mean(A, Y)
    step.release_norm(0.5)
    step.release_gradient(0.5)
    with pytest.raises(RuntimeError, match="norm was already released"):
        step.release_norm(0.5)
    with pytest.raises(RuntimeError, match="gradient was already released"):
        step.release_gradient(0.5)


def test_noise_is_the_generators_grid_release_at_sensitivity_and_mu():
    r"""Exact: the norm is ``release_gaussian(‖ḡ‖, Δ, μ_N)`` and the gradient
    ``release_gaussian(ḡ, Δ, μ)`` on the generator's draws (norm first, then gradient)."""
    A, Y = _data(d=4)
    mean, _ = clipped_mean_gradient(A, Y, 1.0)
    delta, norm_mu, grad_mu = 2.0 / 30, 0.3, 1.7
    mech = AdaptiveGaussianGradientMechanism(clip_bound=1.0, num_users=30, generator=torch.Generator().manual_seed(3))
    step = mech.clipped_mean(A, Y)
    norm, grad = step.release_norm(norm_mu), step.release_gradient(grad_mu)
    g = torch.Generator().manual_seed(3)
    common = dict(sensitivity=delta, generator=g, secure_rng=False, magnitude_bound=1.0)
    norm_expected, _ = release_gaussian(mean.norm().reshape(1), mu=norm_mu, **common)
    grad_expected, _ = release_gaussian(mean, mu=grad_mu, **common)
    assert norm.noise_std == pytest.approx(delta / norm_mu, rel=1e-15) and mech.noise_std(grad_mu) == delta / grad_mu
    assert norm.norm == float(norm_expected[0]) and torch.equal(grad.gradient, grad_expected)


def test_noise_std_is_sensitivity_over_mu_statistically():
    A, Y = _data(d=50, N=3)
    mech = AdaptiveGaussianGradientMechanism(clip_bound=1.0, num_users=30, generator=torch.Generator().manual_seed(3))
    mean, _ = clipped_mean_gradient(A, Y, 1.0)
    norm_mu, grad_mu = 0.3, 1.7
    norms, grads = [], []
    for _ in range(600):
        step = mech.clipped_mean(A, Y)
        r, g = step.release_norm(norm_mu), step.release_gradient(grad_mu)
        assert r.cost.mu == norm_mu and g.cost.mu == grad_mu
        norms.append(r.norm)
        grads.append(g.gradient - mean)
    delta = 2.0 / 30
    norms_t, noise = torch.tensor(norms), torch.stack(grads)
    # 600 scalars and 30 000 coordinates: relative s.e. of a sample std ≈ 2.9% and 0.4%
    assert float(norms_t.std()) == pytest.approx(delta / norm_mu, rel=0.12)
    assert float(norms_t.mean()) == pytest.approx(float(mean.norm()), abs=4 * delta / norm_mu / math.sqrt(600))
    assert float(noise.std()) == pytest.approx(delta / grad_mu, rel=0.02)


def test_a_release_at_step_mu_has_the_fixed_mechanisms_noise():
    r"""With the same generator state, a release at ``μ/√T`` draws the same normal vector
    as the fixed schedule's mechanism (same noise path, same scale)."""
    A, Y = _data()
    fixed = GaussianGradientMechanism(
        clip_bound=1.0, num_users=30, privacy_mu=2.0, num_steps=9, generator=torch.Generator().manual_seed(5)
    ).release(A, Y)
    adaptive = AdaptiveGaussianGradientMechanism(
        clip_bound=1.0, num_users=30, generator=torch.Generator().manual_seed(5)
    )
    released = adaptive.clipped_mean(A, Y).release_gradient(2.0 / 3.0)
    torch.testing.assert_close(released.gradient, fixed.gradient, rtol=1e-15, atol=1e-15)
    assert released.cost.mu == pytest.approx(fixed.cost.mu, rel=1e-15)


def test_bad_input_is_refused_before_any_noise_is_drawn():
    A, Y = _data()
    gen = torch.Generator().manual_seed(1)
    mech = AdaptiveGaussianGradientMechanism(clip_bound=1.0, num_users=30, generator=gen)
    state = gen.get_state()
    with pytest.raises(ValueError, match="Expected 30 users"):
        mech.clipped_mean(A, Y[:, :5])
    bad = Y.clone()
    bad[0, 3] = math.nan
    with pytest.raises(ValueError, match="non-finite"):
        mech.clipped_mean(A, bad)
    step = mech.clipped_mean(A, Y)
    for mu in (0.0, -1.0, math.nan):
        with pytest.raises(ValueError, match="mu"):
            step.release_norm(mu)
    assert torch.equal(gen.get_state(), state)
    with pytest.raises(ValueError, match="clip_bound"):
        AdaptiveGaussianGradientMechanism(clip_bound=math.inf, num_users=3)


def test_norm_release_sensitivity_is_at_most_2B_over_n():
    r"""Replacing one user's losses arbitrarily moves ``‖ḡ‖`` by at most ``2B/n``."""
    g = torch.Generator().manual_seed(2)
    B, n = 0.8, 12
    mech = AdaptiveGaussianGradientMechanism(clip_bound=B, num_users=n)
    worst = 0.0
    for _ in range(150):
        A = torch.randn(3, 4, generator=g, dtype=torch.float64)
        Y = 4 * torch.randn(4, n, generator=g, dtype=torch.float64)
        Y2 = Y.clone()
        Y2[:, 0] = 50 * torch.randn(4, generator=g, dtype=torch.float64)
        a = mech.clipped_mean(A, Y).release_norm(math.inf).norm
        b = mech.clipped_mean(A, Y2).release_norm(math.inf).norm
        worst = max(worst, abs(a - b))
    assert worst <= 2 * B / n * (1 + 1e-12)
    assert worst > 1.5 * B / n  # the search comes near the bound
