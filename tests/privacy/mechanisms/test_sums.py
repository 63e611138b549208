r"""Sums across users and partitions (``privacy.mechanisms.sums``): the clipped sum against a
per-user brute force, the partitions' partial sums combined into the in-process sum bit for bit,
the clamped loss sums against their closed form, and every check on a partition's sum refusing
a broken or tampered one before anything is released.
"""

from __future__ import annotations

import math

import pytest
import torch

from botorch_dp.privacy.mechanisms.sums import (
    ClampedPartialSum,
    ClippedPartialSum,
    clamped_loss_sums,
    clipped_partial_sum,
    clipped_sum,
    combine_clamped_sums,
    combine_partial_sums,
)


def _case(seed: int, d: int = 3, N: int = 5, n: int = 23) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    W = torch.randn(d, N, generator=g, dtype=torch.float64)
    Y = torch.randn(N, n, generator=g, dtype=torch.float64) * 10.0 ** torch.randint(-2, 3, (1, n), generator=g)
    return W, Y


def _brute_clipped_sum(W: torch.Tensor, Y: torch.Tensor, bound: float) -> tuple[torch.Tensor, int]:
    r"""``Σ_i clip_B(W y_i)`` one user at a time, and how many were clipped."""
    total, clipped = torch.zeros(W.shape[0], dtype=torch.float64), 0
    for i in range(Y.shape[1]):
        g = W @ Y[:, i]
        norm = float(g.norm())
        clipped += norm > bound
        total += g * min(1.0, bound / norm) if norm > 0 else g
    return total, clipped


@pytest.mark.parametrize("seed", range(3))
def test_clipped_sum_is_the_per_user_brute_force(seed):
    W, Y = _case(seed)
    norms = (W @ Y).norm(dim=0).sort().values
    bound = float(norms[11:13].mean())  # between two users' norms: 11 of 23 clipped
    got = clipped_sum(W, Y, bound, chunk_size=4)
    total, clipped = _brute_clipped_sum(W, Y, bound)
    torch.testing.assert_close(got.total, total, rtol=1e-12, atol=1e-12)
    assert got.num_clipped == clipped and 0 < clipped < Y.shape[1]
    assert got.within == Y.shape[1] - clipped and got.bound == bound and got.num_users == Y.shape[1]
    torch.testing.assert_close(got.mean(), total / Y.shape[1], rtol=1e-12, atol=1e-12)


def test_partitions_of_one_chunk_each_combine_to_the_in_process_sum_bit_for_bit():
    W, Y = _case(4, n=30)
    whole = clipped_sum(W, Y, 0.8, chunk_size=7)
    partials = [clipped_partial_sum(W, Y[:, s : s + 7], 0.8, chunk_size=7) for s in range(0, 30, 7)]
    assert [p.num_users for p in partials] == [7, 7, 7, 7, 2]
    combined = combine_partial_sums(partials, 0.8, 30)
    assert torch.equal(combined.total, whole.total)
    assert combined.num_clipped == whole.num_clipped and combined.num_users == 30 and combined.bound == 0.8
    # row blocks of the losses give the same sum as the whole matrix
    blocks = clipped_partial_sum(W, [Y[:2, :7], Y[2:, :7]], 0.8, chunk_size=7)
    assert torch.equal(blocks.total, partials[0].total)


def _partial(values, n_p: int = 2) -> ClippedPartialSum:
    return ClippedPartialSum(total=torch.tensor(values, dtype=torch.float64), num_users=n_p, num_clipped=0)


@pytest.mark.parametrize(
    "partials, n, match",
    [
        ([], 2, "no partial sums"),
        ([_partial([1.0, 0.0]), _partial([math.nan, 0.0])], 4, r"partials\[1\]: .*finite d-vector"),
        ([_partial([1.0, 0.0]), _partial([1.0, 0.0, 0.0])], 4, r"partials\[1\]: .*finite d-vector \(d = 2\)"),
        ([_partial([2.0, 0.1])], 2, r"partials\[0\]: .*exceeds n_P·B"),  # ‖s‖ > n_P B = 2
        ([_partial([1.0, 0.0]), _partial([0.0, 1.0])], 5, "hold 4 users, the mechanism expects n = 5"),
    ],
)
def test_a_broken_partial_sum_is_refused_naming_its_partition(partials, n, match):
    with pytest.raises(ValueError, match=match):
        combine_partial_sums(partials, 1.0, n)
    assert combine_partial_sums([_partial([2.0, 0.0])], 1.0, 2).total.tolist() == [2.0, 0.0]  # n_P B itself passes


def test_clamped_loss_sums_are_the_closed_form_in_any_chunks_and_blocks():
    g = torch.Generator().manual_seed(5)
    losses = 3 * torch.randn(4, 20, generator=g, dtype=torch.float64)
    expected = losses.clamp(0.0, 2.0).sum(-1)
    torch.testing.assert_close(clamped_loss_sums(losses, 2.0, 20), expected, rtol=1e-14, atol=0.0)
    by_chunks = clamped_loss_sums(losses, 2.0, 5)
    by_blocks = clamped_loss_sums([losses[:, :5], losses[:, 5:10], losses[:, 10:]], 2.0, 5)
    assert torch.equal(by_chunks, by_blocks)  # partitions holding one chunk each: the same bits
    partials = [ClampedPartialSum(clamped_loss_sums(losses[:, s : s + 5], 2.0, 5), 5) for s in range(0, 20, 5)]
    assert torch.equal(combine_clamped_sums(partials, 2.0, 20), by_chunks)


def test_nonfinite_losses_are_refused_or_count_zero():
    losses = torch.tensor([[1.0, math.nan, 0.5], [math.inf, -1.0, 3.0]], dtype=torch.float64)
    with pytest.raises(ValueError, match="non-finite"):
        clamped_loss_sums(losses, 1.0, 2)
    assert clamped_loss_sums(losses, 1.0, 2, nonfinite="zero_user").tolist() == [1.5, 1.0]
    with pytest.raises(ValueError, match="at least one user"):
        clamped_loss_sums(torch.zeros(2, 0, dtype=torch.float64), 1.0, 2)


@pytest.mark.parametrize(
    "totals, n, match",
    [
        ([[0.5, 1.0], [-0.1, 0.0]], 4, r"partials\[1\]: .*outside \[0, n_P·C\]"),
        ([[0.5, 2.5], [0.0, 0.0]], 4, r"partials\[0\]: .*outside \[0, n_P·C\]"),  # n_P C = 2
        ([[0.5, 1.0], [math.inf, 0.0]], 4, r"partials\[1\]: .*finite q-vector"),
        ([[0.5, 1.0], [0.0, 0.0]], 3, "do not hold n = 3 users"),
    ],
)
def test_a_broken_clamped_sum_is_refused_naming_its_partition(totals, n, match):
    partials = [ClampedPartialSum(torch.tensor(t, dtype=torch.float64), 2) for t in totals]
    with pytest.raises(ValueError, match=match):
        combine_clamped_sums(partials, 1.0, n)
    with pytest.raises(ValueError, match="no clamped sums"):
        combine_clamped_sums([], 1.0, n)
