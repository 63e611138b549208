r"""The Gaussian gradient mechanism (botorch_dp/privacy/mechanisms/gradient.py): noise of standard
deviation ``2B√T/(nμ)`` (fixed-seed χ² bound), the same scale from OS entropy, no noise and its
diagnostics at ``μ = ∞``, refusals naming the parameter, and each release's cost ``μ/√T``."""

import math

import pytest
import torch

from botorch_dp.privacy.mechanisms import GaussianGradientMechanism


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
