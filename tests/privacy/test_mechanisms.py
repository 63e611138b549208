import math

import pytest
import torch

from botorch_dp.privacy.checks import check_losses
from botorch_dp.privacy.mechanisms import (
    GaussianGradientMechanism,
    GaussianScoreMechanism,
    clip_rows,
    clipped_mean_gradient,
)


def test_clip_rows_closed_form():
    G = torch.tensor([[3.0, 4.0], [0.3, 0.4], [0.0, 0.0]], dtype=torch.float64)
    clipped, was = clip_rows(G, 1.0)
    torch.testing.assert_close(clipped, torch.tensor([[0.6, 0.8], [0.3, 0.4], [0.0, 0.0]], dtype=torch.float64))
    assert was.tolist() == [True, False, False]


def test_chunked_mean_equals_direct():
    g = torch.Generator().manual_seed(0)
    A = torch.randn(4, 9, generator=g, dtype=torch.float64)
    Y = torch.randn(9, 103, generator=g, dtype=torch.float64)
    direct = clip_rows((A @ Y).T, 0.7)[0].mean(0)
    for chunk in (1, 10, 103, 5000):
        mean, k = clipped_mean_gradient(A, Y, 0.7, chunk_size=chunk)
        torch.testing.assert_close(mean, direct)
        assert k == int(((A @ Y).T.norm(dim=-1) > 0.7).sum())


def test_replace_one_sensitivity_is_at_most_2B_over_n():
    """Changing one user's losses arbitrarily moves the clipped mean by <= 2B/n."""
    g = torch.Generator().manual_seed(1)
    B, n = 1.5, 40
    worst = 0.0
    for trial in range(200):
        A = torch.randn(3, 6, generator=g, dtype=torch.float64)
        Y = torch.randn(6, n, generator=g, dtype=torch.float64) * 5
        Y2 = Y.clone()
        i = trial % n
        Y2[:, i] = torch.randn(6, generator=g, dtype=torch.float64) * 10 ** (trial % 5)
        d = (clipped_mean_gradient(A, Y, B)[0] - clipped_mean_gradient(A, Y2, B)[0]).norm()
        worst = max(worst, float(d))
        assert d <= 2 * B / n + 1e-12
    # the bound is nearly attained by opposite, heavily clipped gradients
    A = torch.eye(2, dtype=torch.float64)
    Y = torch.zeros(2, n, dtype=torch.float64)
    Y2 = Y.clone()
    Y[0, 0], Y2[0, 0] = 100.0, -100.0
    d = (clipped_mean_gradient(A, Y, B)[0] - clipped_mean_gradient(A, Y2, B)[0]).norm()
    assert math.isclose(float(d), 2 * B / n, rel_tol=1e-12)


def test_check_losses():
    good = torch.zeros(2, 3, dtype=torch.float64)
    check_losses(good, 2)
    with pytest.raises(ValueError, match="shape"):
        check_losses(torch.zeros(3, dtype=torch.float64), 2)
    with pytest.raises(ValueError, match="shape"):
        check_losses(torch.zeros(3, 3, dtype=torch.float64), 2)
    with pytest.raises(ValueError, match="at least one user"):
        check_losses(torch.zeros(2, 0, dtype=torch.float64), 2)
    with pytest.raises(ValueError, match="stay fixed"):
        check_losses(good, 2, num_users=4)
    bad = good.clone()
    bad[1, 2] = float("nan")
    with pytest.raises(ValueError, match=r"non-finite.*\[1\]"):
        check_losses(bad, 2)
    bad[1, 2] = float("inf")
    with pytest.raises(ValueError, match="non-finite"):
        check_losses(bad, 2)
    with pytest.raises(ValueError, match="floating"):
        check_losses(torch.zeros(2, 3, dtype=torch.int64), 2)


def test_score_mechanism_closed_form_and_noise_scale():
    g = torch.Generator().manual_seed(5)
    mech = GaussianScoreMechanism(loss_clip=2.0, per_trial_mu=0.5, generator=g)
    losses = torch.tensor([[-1.0, 1.0, 5.0, 0.5]] * 4000, dtype=torch.float64)  # clipped mean 0.875
    rel = mech.release(losses)
    assert rel.noise_std == pytest.approx(2.0 / (4 * 0.5))
    assert rel.cost.mu == 0.5 and rel.cost.count == 4000
    m = rel.scores.numel()
    assert abs(float(rel.scores.mean()) - 0.875) < 5 * rel.noise_std / math.sqrt(m)
    assert abs(float(rel.scores.std()) / rel.noise_std - 1) < 5 / math.sqrt(2 * m)
    with pytest.raises(ValueError, match="loss_clip"):
        GaussianScoreMechanism(loss_clip=math.inf, per_trial_mu=1.0)
    with pytest.raises(ValueError, match="per_trial_mu"):
        GaussianScoreMechanism(loss_clip=1.0, per_trial_mu=0.0)


def _exact_clipped_mean(A, Y, clip_bound):
    """Brute force in 900-digit decimal arithmetic: g_i = A y_i, clipped to B, averaged."""
    from decimal import Decimal, localcontext

    with localcontext() as ctx:
        ctx.prec = 900
        ctx.Emax, ctx.Emin = 10**6, -(10**6)
        A_ = [[Decimal(float(a)) for a in row] for row in A.tolist()]
        B = Decimal(clip_bound)
        total = [Decimal(0)] * len(A_)
        n = Y.shape[1]
        for i in range(n):
            y = [Decimal(float(v)) for v in Y[:, i].tolist()]
            g = [sum(a * v for a, v in zip(row, y, strict=True)) for row in A_]
            norm = sum(x * x for x in g).sqrt()
            factor = min(Decimal(1), B / norm) if norm > 0 else Decimal(1)
            total = [t + x * factor for t, x in zip(total, g, strict=True)]
        return torch.tensor([float(t / n) for t in total], dtype=torch.float64)


FMAX = torch.finfo(torch.float64).max
EXTREME = [0.0, -0.0, 5e-324, -2.2e-308, 1e-300, 1e154, -1e154, 1e300, 1e307, -1e307, FMAX, -FMAX]


@pytest.mark.parametrize("seed", range(6))
def test_clipped_mean_is_exact_for_any_finite_losses(seed):
    g = torch.Generator().manual_seed(seed)
    A = torch.randn(3, 4, generator=g, dtype=torch.float64) * 10.0 ** torch.randint(-3, 4, (3, 1), generator=g)
    picks = torch.randint(0, len(EXTREME), (4, 7), generator=g)
    Y = torch.tensor(EXTREME, dtype=torch.float64)[picks] * torch.rand(4, 7, generator=g, dtype=torch.float64)
    Y[:, 0] = torch.tensor([FMAX, -FMAX, FMAX, 1.0], dtype=torch.float64)  # mixed signs at the float64 maximum
    Y[:, 1] = 1e-3 * torch.randn(4, generator=g, dtype=torch.float64)  # an ordinary, unclipped user
    mean, _ = clipped_mean_gradient(A, Y, 0.7, chunk_size=3)
    assert torch.isfinite(mean).all()
    torch.testing.assert_close(mean, _exact_clipped_mean(A, Y, 0.7), rtol=1e-12, atol=1e-300)
    mech = GaussianGradientMechanism(
        clip_bound=0.7, num_users=7, privacy_mu=1.0, num_steps=1, generator=torch.Generator().manual_seed(0)
    )
    assert torch.isfinite(mech.release(A, Y).gradient).all()


def test_clip_rows_handles_rows_whose_norm_overflows():
    G = torch.tensor([[FMAX, FMAX], [3.0, 4.0], [-0.0, 5e-324]], dtype=torch.float64)
    clipped, was = clip_rows(G, 1.0)
    torch.testing.assert_close(clipped[0], torch.tensor([2**-0.5, 2**-0.5], dtype=torch.float64))
    torch.testing.assert_close(clipped[1], torch.tensor([0.6, 0.8], dtype=torch.float64))
    assert torch.equal(clipped[2], G[2]) and was.tolist() == [True, True, False]


def test_scaled_product_gives_the_same_bits_as_the_direct_one():
    g = torch.Generator().manual_seed(11)
    A = torch.randn(4, 9, generator=g, dtype=torch.float64)
    Y = torch.randn(9, 50, generator=g, dtype=torch.float64) * 10.0 ** torch.randint(-4, 5, (1, 50), generator=g)
    G = (A @ Y).T
    norms = G.norm(dim=-1, keepdim=True)
    direct = (G * (0.5 / norms).clamp(max=1.0)).sum(0) / 50  # the textbook rule, no overflow here
    assert torch.equal(clipped_mean_gradient(A, Y, 0.5, chunk_size=50)[0], direct)


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


def test_explicit_noise_seed_warns_and_is_reproducible():
    from botorch_dp.privacy.seeding import PrivacyWarning, noise_generator

    assert noise_generator(None) is None
    with pytest.warns(PrivacyWarning, match="reproducible"):
        g1 = noise_generator(3)
    with pytest.warns(PrivacyWarning):
        g2, other = noise_generator(3), noise_generator(3, stream=1)
    assert torch.equal(torch.randn(4, generator=g1), torch.randn(4, generator=g2))
    assert not torch.equal(torch.randn(4, generator=g1), torch.randn(4, generator=other))
