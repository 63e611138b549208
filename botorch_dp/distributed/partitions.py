r"""Users held in partitions: the ``PartitionedObjective`` protocol and its in-process backend.

DP-GIBO's per-user estimate is ``g_i = A y_i`` with ``A = ∇k(θ, D)K⁻¹`` public, so each
partition of users can keep its own loss rows and send one ``d``-vector per step: the sum
of its CLIPPED estimates (``privacy.mechanisms.clipped_partial_sum``). The driver
(``DPGIBO.tell_partitioned``) adds the partial sums in partition order and draws the noise
once (``privacy.mechanisms.release_partial_sums``). Per step:

1. ``evaluate(batches)``: the driver sends the points of every batch of ``D_t`` (public);
   each partition evaluates its users' losses at the batches it does not hold yet (a
   retried or resumed step re-sends the same batches, so nothing is evaluated twice, and a
   partition that lost its rows recomputes them), checks them, and keeps them.
2. ``partial_sums(A, ...)``: the driver sends ``A`` (``d x |D|``, public); each partition
   returns its ``ClippedPartialSum`` (sensitive until noised: the channel must be trusted).

Nothing is released by a partition; the one release of a step is the driver's, checked
against the ledger first and recorded once. ``InProcessPartitions`` keeps the rows in this
process (the reference, and what the Dask backend is compared with bit for bit);
``distributed.dask.DaskPartitions`` keeps them on Dask workers.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import torch
from torch import Tensor

from botorch_dp.privacy.checks import check_losses, check_positive_int
from botorch_dp.privacy.mechanisms import ClippedPartialSum, NonfiniteLosses, clipped_partial_sum
from botorch_dp.privacy.mechanisms.sums import ClampedPartialSum, clamped_loss_sums

__all__ = ["InProcessPartitions", "PartitionedObjective", "UserPartition", "evaluate_partition", "matching_prefix"]


@runtime_checkable
class UserPartition(Protocol):
    r"""One partition's users, evaluated where their data lives.

    Attributes:
        num_users: ``n_P``, the number of users of this partition (public).
    """

    num_users: int

    def __call__(self, X: Tensor) -> Tensor:
        r"""The ``b x n_P`` per-user losses (SENSITIVE) at the ``b x d`` points ``X``."""
        ...


@runtime_checkable
class PartitionedObjective(Protocol):
    r"""``P`` partitions of users that keep their own loss rows over ``D_t``.

    Attributes:
        num_partitions: ``P``.
        num_users: ``n = Σ_P n_P`` (public, like ``n`` of an in-process run).
    """

    num_partitions: int
    num_users: int

    def evaluate(self, batches: Sequence[Tensor], *, nonfinite: NonfiniteLosses = "refuse") -> None:
        r"""Make every partition hold its users' losses at exactly these batches.

        Args:
            batches: The ``b_t x d`` points of the batches of ``D`` in order (public). A
                partition keeps the rows of the longest prefix it already holds with the
                same points and evaluates the rest (a retry evaluates nothing again).
            nonfinite: ``"refuse"``: a NaN or inf loss raises ``ValueError`` naming the
                partition, and no partition's rows change. ``"zero_user"``: kept (zeroed
                when clipped).
        """
        ...

    def partial_sums(
        self, A: Tensor, *, clip_bound: float, chunk_size: int, nonfinite: NonfiniteLosses = "refuse"
    ) -> list[ClippedPartialSum]:
        r"""Each partition's ``Σ_{i ∈ P} clip_B(A y_i)`` over the rows it holds, in partition order.

        Args:
            A: The ``d x |D|`` public gradient weights (``|D|`` = the rows of the batches
                last given to ``evaluate``).
            clip_bound: ``B``.
            chunk_size: Users per chunk (the driver's, so that the arithmetic is the
                in-process release's).
            nonfinite: As in ``evaluate``.
        """
        ...

    def clamped_loss_sums(
        self, points: Tensor, *, loss_clip: float, chunk_size: int, nonfinite: NonfiniteLosses = "refuse"
    ) -> list[ClampedPartialSum]:
        r"""Each partition's ``Σ_{i ∈ P} clamp(ℓ_i, 0, C)`` at each row of ``points`` (evaluated for
        this call, not kept), in partition order: what an evaluated selection of the returned
        iterate releases from.

        Args:
            points: The ``q x d`` candidates (public).
            loss_clip: ``C``.
            chunk_size: Users per chunk (the driver's).
            nonfinite: As in ``evaluate``.
        """
        ...


def partition_clamped_sums(
    partition: UserPartition, points: Tensor, index: int, loss_clip: float, chunk_size: int, nonfinite: NonfiniteLosses
) -> ClampedPartialSum:
    r"""Partition ``index``'s clamped loss sums at ``points`` (runs where its data is)."""
    losses = evaluate_partition(partition, points, index, nonfinite)
    return ClampedPartialSum(
        clamped_loss_sums(losses, loss_clip, chunk_size, nonfinite=nonfinite), int(partition.num_users)
    )


def matching_prefix(held: Sequence[Tensor], batches: Sequence[Tensor]) -> int:
    r"""How many leading batches of ``held`` equal those of ``batches`` (same points, bit for bit)."""
    k = 0
    for a, b in zip(held, batches, strict=False):  # a prefix: the two may differ in length
        if a.shape != b.shape or not torch.equal(a, b):
            break
        k += 1
    return k


def evaluate_partition(
    partition: UserPartition, points: Tensor, index: int, nonfinite: NonfiniteLosses = "refuse"
) -> Tensor:
    r"""Partition ``index``'s checked ``b x n_P`` float64 losses at ``points`` (runs where its data is).

    Raises:
        ValueError: Naming the partition and the problem (shape, number of users,
            non-finite values), before anything is kept or released.
    """
    n_p = check_positive_int(partition.num_users, f"num_users of partition {index}")
    if points.shape[0] == 0:
        return torch.empty(0, n_p, dtype=torch.float64)
    losses = partition(points)
    try:
        check_losses(losses, points.shape[0], n_p, nonfinite=nonfinite)
    except ValueError as err:
        raise ValueError(f"partition {index}: {err}") from None
    return losses.detach().to(dtype=torch.float64, device="cpu").clone()


class InProcessPartitions:
    r"""``PartitionedObjective`` whose partitions keep their rows in this process.

    Args:
        partitions: The ``UserPartition`` objects, in the fixed order of the partial sums.
    """

    def __init__(self, partitions: Sequence[UserPartition]) -> None:
        if len(partitions) == 0:
            raise ValueError("partitions: at least one partition is needed.")
        self.partitions = list(partitions)
        self.num_partitions = len(self.partitions)
        self.num_users = sum(
            check_positive_int(p.num_users, f"num_users of partition {i}") for i, p in enumerate(self.partitions)
        )
        self._points: list[Tensor] = []
        self._rows: list[list[Tensor]] = [[] for _ in self.partitions]

    def evaluate(self, batches: Sequence[Tensor], *, nonfinite: NonfiniteLosses = "refuse") -> None:
        batches = [b.detach().to(torch.float64).clone() for b in batches]
        keep = matching_prefix(self._points, batches)
        new = [
            [evaluate_partition(part, b, i, nonfinite) for b in batches[keep:]]
            for i, part in enumerate(self.partitions)
        ]  # all checked before any partition's rows change
        self._rows = [rows[:keep] + added for rows, added in zip(self._rows, new, strict=True)]
        self._points = batches

    def partial_sums(
        self, A: Tensor, *, clip_bound: float, chunk_size: int, nonfinite: NonfiniteLosses = "refuse"
    ) -> list[ClippedPartialSum]:
        return [clipped_partial_sum(A, rows, clip_bound, chunk_size, nonfinite=nonfinite) for rows in self._rows]

    def clamped_loss_sums(
        self, points: Tensor, *, loss_clip: float, chunk_size: int, nonfinite: NonfiniteLosses = "refuse"
    ) -> list[ClampedPartialSum]:
        points = points.detach().to(torch.float64).clone()
        return [
            partition_clamped_sums(p, points, i, loss_clip, chunk_size, nonfinite)
            for i, p in enumerate(self.partitions)
        ]
