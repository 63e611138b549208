"""The DP-GIBO audit designs (botorch_dp/audit/loop.py and the rows built on it): on the
library's own NON-PRIVATE diagnostics, every neighbour pair moves the clipped mean by exactly
what the row's docstring says, whatever batch the public search picks."""

import math

import pytest
import torch

from botorch_dp.audit.gradient import overflowing_user
from botorch_dp.audit.loop import LARGE_SLOPE, audit_config, drive, linear_users, seeded_noise_allowed, unit_direction
from botorch_dp.gradient_gp import GradientGP
from botorch_dp.optim import DPGIBO
from botorch_dp.optim.subspace import FixedSubspace
from botorch_dp.privacy.mechanisms import gram_sqrt

SEEDS = range(4)


def unnoised(objective, **options):
    """The clipped means (t x d) and clip fractions of one seeded run per seed (diagnostics on)."""
    out = []
    with seeded_noise_allowed():
        for seed in SEEDS:
            opt = DPGIBO(audit_config(seed=seed, record_non_private_diagnostics=True, **options))
            diagnostics = drive(opt, objective).diagnostics
            out.append((diagnostics.unnoised_gradients, diagnostics.clip_fractions))
    return out


@pytest.mark.parametrize("overflow", [False, True])
def test_gradient_design_moves_the_clipped_mean_by_the_sensitivity(overflow):
    n, B = 5, 1.0
    d_prime = overflowing_user(n) if overflow else linear_users([LARGE_SLOPE] + [0.0] * (n - 1))
    for sign, objective in ((-1.0, linear_users([-LARGE_SLOPE] + [0.0] * (n - 1))), (1.0, d_prime)):
        for mean, fractions in unnoised(objective, num_iterations=2):
            assert torch.allclose(mean, torch.full((2, 1), sign * B / n, dtype=torch.float64), rtol=1e-12, atol=0)
            assert fractions == [1 / n, 1 / n]


def test_adaptive_norm_design_has_norms_delta_apart():
    n = 5
    for sign, norm in ((-1.0, (n - 2) / n), (1.0, 1.0)):
        objective = linear_users([sign * LARGE_SLOPE] + [LARGE_SLOPE] * (n - 1))
        for mean, _ in unnoised(objective, num_iterations=2, noise_schedule="adaptive_norm", norm_mu_fraction=0.5):
            assert mean.shape == (2, 1)
            assert torch.allclose(mean, torch.full_like(mean, norm), rtol=1e-15, atol=0)


def test_projected_design_clips_to_plus_minus_b_in_the_subspace():
    v = torch.tensor([1.0, 1.0], dtype=torch.float64) / math.sqrt(2.0)
    w = torch.tensor([1.0, -1.0], dtype=torch.float64) / math.sqrt(2.0)
    n, oracle = 5, FixedSubspace(v.unsqueeze(-1))
    for sign, direction in ((-1.0, v), (1.0, v + w)):  # the D′ user's losses lie partly outside span(v)
        directions = v.expand(n, 2).clone()
        directions[0] = direction / direction.norm()
        objective = linear_users([sign * LARGE_SLOPE * float(direction.norm())] + [0.0] * (n - 1), directions)
        for mean, _ in unnoised(objective, dim=2, subspace=oracle):
            assert torch.allclose(mean[0], sign / n * v, rtol=1e-12, atol=1e-15)  # lifted: Ṽ(∓B/n)


def test_preconditioner_design_is_near_the_worst_case_of_the_gram_square_root():
    n, B = 100, 1.0
    directions = torch.zeros(n, 2, dtype=torch.float64)
    directions[:, 0] = 1.0
    directions[0] = torch.tensor([0.0, 1.0], dtype=torch.float64)
    means = [
        unnoised(linear_users([sign * LARGE_SLOPE] + [LARGE_SLOPE] * (n - 1), directions), dim=2)
        for sign in (-1.0, 1.0)
    ]
    for (m, _), (m_prime, _) in zip(*means, strict=True):  # the same seed: the same public batch on D and D′
        assert float((m_prime - m).norm()) == pytest.approx(2 * B / n, rel=1e-12)
        difference = gram_sqrt(m_prime[0].unsqueeze(-1)) - gram_sqrt(m[0].unsqueeze(-1))
        # within 1% of the Frobenius bound √2·Δ (t = 1), along E = (e₁e₂ᵀ + e₂e₁ᵀ)/√2
        assert 0.99 * math.sqrt(2) * 2 * B / n < float(difference.norm()) <= math.sqrt(2) * 2 * B / n
        E = torch.tensor([[0.0, 1.0], [1.0, 0.0]], dtype=torch.float64) / math.sqrt(2.0)
        assert float((difference * E).sum()) > 0.99 * float(difference.norm())


def test_clip_count_design_counts_n_minus_one_and_n_within_the_bound():
    n = 5
    for first, clipped in ((LARGE_SLOPE, 1 / n), (0.0, 0.0)):
        objective = linear_users([first] + [0.25] * (n - 1))
        for _, fractions in unnoised(objective, clip_bound="adaptive", clip_init=1.0, privacy_mu=math.sqrt(2)):
            assert fractions == [clipped]


def test_the_overflowing_user_overflows_a_plain_matrix_product():
    with seeded_noise_allowed():
        opt = DPGIBO(audit_config(seed=0))
    X = opt.ask()
    y = overflowing_user(5)(X)[:, 0]
    assert torch.isfinite(y).all() and float(y.abs().min()) > 1e307
    A = GradientGP(X, opt.kernel, opt.noise_variance, jitter=opt.config.jitter).gradient_weights(opt.theta)
    assert not torch.isfinite(A @ y).all()  # the unscaled product is inf: only a scaled clip is finite


def test_linear_users_and_unit_direction():
    X = torch.tensor([[0.5, -0.25]], dtype=torch.float64)
    expected = torch.tensor([[0.5, -0.25]], dtype=torch.float64) / math.sqrt(2)
    assert torch.allclose(linear_users([2.0, -1.0])(X), expected)
    assert float(unit_direction(3).norm()) == pytest.approx(1.0)
    assert torch.isfinite(linear_users([1e307])(torch.ones(1, 2, dtype=torch.float64))).all()
