r"""The users as a data source (botorch_dp/optim/users.py): in memory and in partitions alike,
``clipped_sum`` is the brute-force ``Σ_i W y_i · min(1, B/‖W y_i‖)`` with the count of users past ``B``,
and ``clamped_loss_sums`` is ``Σ_i clamp(ℓ_i, 0, C)`` per candidate; the in-memory users need the told
losses and refuse a NaN before answering."""

import pytest
import torch

from botorch_dp.distributed import InProcessPartitions
from botorch_dp.distributed.synthetic import synthetic_partitions
from botorch_dp.optim.users import InMemoryUsers, PartitionedUsers, Users

SIZES, DIM = [3, 5, 4], 2


def _setting():
    parts = synthetic_partitions(SIZES, DIM, seed=11)
    g = torch.Generator().manual_seed(0)
    batches = [
        torch.rand(3, DIM, generator=g, dtype=torch.float64),
        torch.rand(2, DIM, generator=g, dtype=torch.float64),
    ]
    blocks = tuple(torch.cat([part(X) for part in parts], dim=1) for X in batches)
    W = torch.randn(DIM, 5, generator=g, dtype=torch.float64)
    return parts, batches, blocks, W


def _brute_force(W, Y, bound):
    total, clipped = torch.zeros(W.shape[0], dtype=torch.float64), 0
    for i in range(Y.shape[1]):  # one user at a time, written out
        g = W @ Y[:, i]
        norm = float(g.norm())
        clipped += norm > bound
        total += g * min(1.0, bound / norm)
    return total, clipped


@pytest.mark.parametrize("chunk_size", [None, 2])
def test_both_sources_give_the_brute_force_clipped_sum_and_count(chunk_size):
    parts, batches, blocks, W = _setting()
    memory = InMemoryUsers(blocks[:1], chunk_size).with_batch(blocks[1])
    partitioned = PartitionedUsers(InProcessPartitions(parts), chunk_size)
    partitioned.prepare(batches)
    Y = torch.cat(blocks)
    norms = (W @ Y).norm(dim=0)
    bound = float(norms.median())  # some users clipped, some not
    expected, num_clipped = _brute_force(W, Y, bound)
    assert 0 < num_clipped < sum(SIZES)
    for users in (memory, partitioned):
        assert isinstance(users, Users) and users.num_users == sum(SIZES)
        answer = users.clipped_sum(W, bound)
        torch.testing.assert_close(answer.total, expected, rtol=1e-12, atol=1e-12)
        assert answer.num_clipped == num_clipped and answer.bound == bound
    torch.testing.assert_close(memory.losses(), Y, rtol=0, atol=0)
    assert memory.raw_losses and not partitioned.raw_losses


def test_both_sources_give_the_clamped_loss_sums():
    parts, _, _, _ = _setting()
    points = torch.tensor([[0.3, 0.3], [0.9, 0.1], [0.0, 1.0]], dtype=torch.float64)
    losses = torch.cat([part(points) for part in parts], dim=1)
    clip = float(losses.median())
    expected = losses.clamp(0.0, clip).sum(-1)
    memory = InMemoryUsers((losses,))
    torch.testing.assert_close(memory.clamped_loss_sums(points, losses, clip), expected, rtol=1e-12, atol=1e-12)
    partitioned = PartitionedUsers(InProcessPartitions(parts))
    torch.testing.assert_close(partitioned.clamped_loss_sums(points, None, clip), expected, rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="need the candidates' told losses"):
        memory.clamped_loss_sums(points, None, clip)


def test_a_nan_loss_is_refused_before_any_answer():
    _, _, blocks, W = _setting()
    bad = blocks[0].clone()
    bad[1, 2] = float("nan")
    with pytest.raises(ValueError, match="non-finite values.*nothing was released"):
        InMemoryUsers((bad, blocks[1])).clipped_sum(W, 1.0)
