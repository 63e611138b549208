"""The clipped sums of per-user estimates clip_B(A y_i) (``privacy.mechanisms._clipping``): closed
forms, the replace-one sensitivity 2B/n, exactness against 900-digit decimal arithmetic, and
the two ways of forming clip(A y_i): directly, and from losses scaled by a power of two.

The direct product is the fast path; the scaled one is exact for every finite input. They
must give the same bits wherever nothing overflows, and every user whose direct product or
norm could overflow must be formed by the scaled path (then the release is exact and finite).
"""

import math

import pytest
import torch

from botorch_dp.privacy.mechanisms import (
    GaussianGradientMechanism,
    clip_rows,
    clipped_mean_gradient,
)
from botorch_dp.privacy.mechanisms._clipping import _clipped_sum, _column_norms, _direct_product_is_safe


def _random_case(g: torch.Generator):
    d = int(torch.randint(1, 13, (1,), generator=g))
    n = int(torch.randint(1, 200, (1,), generator=g))
    sizes = torch.randint(0, 5, (int(torch.randint(1, 5, (1,), generator=g)),), generator=g).tolist()
    sizes[0] = max(sizes[0], 1)
    A = torch.randn(d, sum(sizes), generator=g, dtype=torch.float64) * 10.0 ** float(
        torch.randint(-3, 4, (1,), generator=g)
    )
    # users of very different magnitudes (1e-30 to 1e30), none near over- or underflow
    Y = torch.randn(sum(sizes), n, generator=g, dtype=torch.float64) * 10.0 ** torch.randint(
        -30, 31, (1, n), generator=g
    )
    Y[:, :: max(n // 5, 1)] = 0.0  # and some all-zero users
    return (
        A,
        list(Y.split(sizes)),
        float(10.0 ** torch.randint(-3, 4, (1,), generator=g)),
        int(torch.randint(1, 250, (1,), generator=g)),
    )


@pytest.mark.parametrize("seed", range(4))
def test_direct_and_scaled_paths_give_the_same_bits(seed):
    g = torch.Generator().manual_seed(seed)
    num_clipped = num_unclipped = 0
    for _ in range(40):
        A, blocks, B, chunk = _random_case(g)
        direct, clipped, rescaled = _clipped_sum(A, blocks, B, chunk)
        scaled, clipped_scaled, all_rescaled = _clipped_sum(A, blocks, B, chunk, direct=False)
        assert rescaled == 0 and all_rescaled == blocks[0].shape[1]  # the paths really differ
        assert torch.equal(direct, scaled) and clipped == clipped_scaled
        num_clipped, num_unclipped = num_clipped + clipped, num_unclipped + blocks[0].shape[1] - clipped
    assert num_clipped > 100 and num_unclipped > 100  # both branches of the rule were compared


def test_column_norms_have_the_bits_of_vector_norm():
    g = torch.Generator().manual_seed(7)
    for d in (1, 2, 3, 10, 40, 103):
        G = torch.randn(d, 500, generator=g, dtype=torch.float64) * 10.0 ** torch.randint(
            -150, 150, (1, 500), generator=g
        )
        G[:, 0] = 0.0
        assert torch.equal(_column_norms(G), torch.linalg.vector_norm(G, dim=0))
    assert torch.equal(
        _column_norms(torch.tensor([[1e200], [3.0]], dtype=torch.float64)),
        torch.tensor([math.inf], dtype=torch.float64),
    )


def _exact_num_clipped(A, Y, clip_bound):
    """Brute force in 900-digit decimal arithmetic: how many users have ‖A y_i‖ > B."""
    from decimal import Decimal, localcontext

    with localcontext() as ctx:
        ctx.prec, ctx.Emax, ctx.Emin = 900, 10**6, -(10**6)
        A_ = [[Decimal(a) for a in row] for row in A.tolist()]
        squares = [
            sum(sum(a * Decimal(v) for a, v in zip(row, col, strict=True)) ** 2 for row in A_) for col in Y.T.tolist()
        ]
        return sum(s > Decimal(clip_bound) ** 2 for s in squares)


def _direct_norm_overflows(A, Y):
    """Brute force, user by user: does the unscaled A y_i or its norm overflow?"""
    return [not math.isfinite(float(torch.linalg.vector_norm(A @ Y[:, i]))) for i in range(Y.shape[1])]


@pytest.mark.parametrize("seed", range(3))
def test_users_that_could_overflow_take_the_scaled_path_and_are_clipped_exactly(seed):
    g = torch.Generator().manual_seed(seed)
    A = torch.randn(3, 5, generator=g, dtype=torch.float64)
    Y = torch.randn(5, 12, generator=g, dtype=torch.float64)
    Y[:, 0] = 1e307
    Y[:, 1] = torch.tensor([1e200, -1e200, 3.0, 0.0, -1.0], dtype=torch.float64)
    Y[:, 2] = torch.tensor([FMAX, -FMAX, FMAX, -FMAX, 1.0], dtype=torch.float64)  # mixed signs at the maximum
    Y[2, 3] = -FMAX
    Y[:, 4] = 1e-3 * Y[:, 4]  # ordinary users, one unclipped
    Y[:, 5] = 1e150  # large, but neither A y_i nor its squares overflow: the direct path is exact
    overflows = _direct_norm_overflows(A, Y)
    assert overflows[:4] == [True] * 4 and not overflows[5] and not any(overflows[4:])
    for chunk in (1, 5, 12):
        total, clipped, rescaled = _clipped_sum(A, [Y[:2], Y[2:]], 0.7, chunk)
        assert rescaled == 4  # exactly the users whose direct product overflows
        assert torch.isfinite(total).all()
        torch.testing.assert_close(total / 12, _exact_clipped_mean(A, Y, 0.7), rtol=1e-12, atol=1e-300)
        assert clipped == _exact_num_clipped(A, Y, 0.7)
    mech = GaussianGradientMechanism(
        clip_bound=0.7, num_users=12, privacy_mu=1.0, num_steps=1, generator=torch.Generator().manual_seed(0)
    )
    assert torch.isfinite(mech.release(A, Y).gradient).all()


def test_huge_gradient_weights_take_the_scaled_path():
    A = torch.tensor([[1e300, -1e300], [1e300, 1e300]], dtype=torch.float64)
    Y = torch.tensor([[1e10, 1.0, 0.0], [2e10, -1.0, 0.0]], dtype=torch.float64)
    total, clipped, rescaled = _clipped_sum(A, Y, 2.0, 4096)
    assert rescaled == 2 and clipped == 2 == _exact_num_clipped(A, Y, 2.0)  # the zero user: direct, unclipped
    torch.testing.assert_close(total / 3, _exact_clipped_mean(A, Y, 2.0), rtol=1e-12, atol=0.0)


def test_a_clip_bound_near_the_underflow_range_uses_the_scaled_path_only():
    assert _direct_product_is_safe(2.0**-255, torch.float64)
    assert not _direct_product_is_safe(2.0**-256, torch.float64)
    assert not _direct_product_is_safe(1e-10, torch.float32) and _direct_product_is_safe(1e-7, torch.float32)
    # B = 1e-160: the squares of gradients near B underflow (1e-320), so the direct norm
    # could not tell 0.9 B from 1.1 B; every user goes through the scaled path
    B = 1e-160
    A = torch.eye(2, dtype=torch.float64)
    Y = torch.tensor(
        [[0.9e-160, 1.1e-160, 0.6e-160, 0.6e-160, 5e-324], [0.0, 0.0, 0.79e-160, 0.81e-160, 0.0]], dtype=torch.float64
    )
    total, clipped, rescaled = _clipped_sum(A, Y, B, 4096)
    assert rescaled == 5 and clipped == _exact_num_clipped(A, Y, B) == 2
    torch.testing.assert_close(total / 5, _exact_clipped_mean(A, Y, B), rtol=1e-12, atol=0.0)


@pytest.mark.parametrize("zero_weights", [False, True])
def test_nonfinite_losses_are_refused_or_zeroed_on_either_path(zero_weights):
    g = torch.Generator().manual_seed(3)
    A = torch.randn(2, 4, generator=g, dtype=torch.float64)
    if zero_weights:  # the NaN and inf meet only zero weights: a product may skip them
        A[:, 1] = A[:, 3] = 0.0
    Y = torch.randn(4, 9, generator=g, dtype=torch.float64)
    Y[1, 2], Y[3, 7] = math.nan, -math.inf
    zeroed = Y.clone()
    zeroed[:, [2, 7]] = 0.0
    for chunk in (2, 9):
        with pytest.raises(ValueError, match="non-finite"):
            clipped_mean_gradient(A, Y, 0.5, chunk)
        got = clipped_mean_gradient(A, [Y[:1], Y[1:]], 0.5, chunk, nonfinite="zero_user")
        want = clipped_mean_gradient(A, [zeroed[:1], zeroed[1:]], 0.5, chunk)
        assert torch.equal(got[0], want[0]) and got[1] == want[1]


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
