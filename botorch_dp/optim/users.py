r"""The users as a data source: the primitives every option needs, wherever the losses live.

A step never touches losses itself; it asks its ``Users`` for a ``clipped_sum`` (for the
gradient) or ``clamped_loss_sums`` (for the evaluated selections), both SENSITIVE and handed
straight to a mechanism. ``InMemoryUsers`` holds the told loss blocks (one per batch of ``D``);
``PartitionedUsers`` asks a ``distributed.PartitionedObjective`` whose partitions keep their
users' losses (in process or on Dask) and adds their answers in partition order, so every
option works on partitions. Only the unsafe fitting path needs the raw losses, which only
``InMemoryUsers`` offers (``raw_losses``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import torch
from torch import Tensor

from botorch_dp.distributed.partitions import PartitionedObjective
from botorch_dp.privacy.mechanisms import NonfiniteLosses, default_chunk_size
from botorch_dp.privacy.mechanisms.sums import (
    ClippedSum,
    clamped_loss_sums,
    clipped_sum,
    combine_clamped_sums,
    combine_partial_sums,
)

__all__ = ["InMemoryUsers", "PartitionedUsers", "Users"]


@runtime_checkable
class Users(Protocol):
    r"""Where a run's users are, and the sensitive primitives asked of them."""

    @property
    def num_users(self) -> int:
        r"""``n``, the number of users."""
        ...

    @property
    def raw_losses(self) -> bool:
        r"""Whether the raw losses are held here (``InMemoryUsers``), not in partitions."""
        ...

    def clipped_sum(self, W: Tensor, bound: float) -> ClippedSum:
        r"""``Σ_i clip_B(W y_i)`` over every user for a public ``k x N`` ``W`` (``A = ∇k(θ, D)K⁻¹``, or
        ``Ṽᵀ A``), with the number of users within ``B`` from the same pass."""
        ...

    def clamped_loss_sums(self, points: Tensor, losses: Tensor | None, loss_clip: float) -> Tensor:
        r"""Per row of ``points``, ``Σ_i clamp(ℓ_i, 0, C)`` (``losses``: the told ones, if any)."""
        ...


def _chunk(chunk_size: int | None, num_users: int, dim: int) -> int:
    return chunk_size if chunk_size is not None else default_chunk_size(num_users, dim)


@dataclass(frozen=True)
class InMemoryUsers:
    r"""The told per-user losses, one ``b_t x n`` block per batch of ``D`` (SENSITIVE).

    Attributes:
        blocks: The loss blocks in batch order (never stacked).
        chunk_size: Users per chunk (``None``: ``default_chunk_size``).
        nonfinite: ``"refuse"`` or ``"zero_user"``.
    """

    blocks: tuple[Tensor, ...]
    chunk_size: int | None = None
    nonfinite: NonfiniteLosses = "refuse"
    raw_losses = True

    @property
    def num_users(self) -> int:
        return int(self.blocks[0].shape[1])

    def with_batch(self, losses: Tensor) -> InMemoryUsers:
        r"""These users with one more batch's ``b x n`` losses."""
        return InMemoryUsers((*self.blocks, losses), self.chunk_size, self.nonfinite)

    def losses(self) -> Tensor:
        r"""The ``N x n`` losses stacked (the unsafe fitting path only)."""
        return torch.cat(self.blocks)

    def clipped_sum(self, W: Tensor, bound: float) -> ClippedSum:
        return clipped_sum(W, list(self.blocks), bound, self.chunk_size, nonfinite=self.nonfinite)

    def clamped_loss_sums(self, points: Tensor, losses: Tensor | None, loss_clip: float) -> Tensor:
        if losses is None:
            raise ValueError("In-memory users need the candidates' told losses.")
        return clamped_loss_sums(
            losses, loss_clip, _chunk(self.chunk_size, losses.shape[-1], points.shape[-1]), nonfinite=self.nonfinite
        )


@dataclass(frozen=True)
class PartitionedUsers:
    r"""Users held by the partitions of a ``PartitionedObjective``: each partition answers for
    its own users and the driver adds the answers in partition order (no loss reaches it).

    Attributes:
        partitions: The ``PartitionedObjective`` (holding the losses at the batches last
            given to ``prepare``).
        chunk_size: The driver's users per chunk (``None``: ``default_chunk_size`` of all ``n``),
            so that the partitions' arithmetic is the in-process one.
        nonfinite: ``"refuse"`` or ``"zero_user"``.
    """

    partitions: PartitionedObjective
    chunk_size: int | None = None
    nonfinite: NonfiniteLosses = "refuse"
    raw_losses = False

    @property
    def num_users(self) -> int:
        return int(self.partitions.num_users)

    def prepare(self, batches: Sequence[Tensor]) -> None:
        r"""Make the partitions hold their users' losses at exactly these batches (checked
        there: bad losses raise a ``ValueError`` naming the partition, before anything is released)."""
        self.partitions.evaluate(batches, nonfinite=self.nonfinite)

    def clipped_sum(self, W: Tensor, bound: float) -> ClippedSum:
        chunk = _chunk(self.chunk_size, self.num_users, W.shape[0])
        partials = self.partitions.partial_sums(W, clip_bound=bound, chunk_size=chunk, nonfinite=self.nonfinite)
        return combine_partial_sums(partials, bound, self.num_users)

    def clamped_loss_sums(self, points: Tensor, losses: Tensor | None, loss_clip: float) -> Tensor:
        chunk = _chunk(self.chunk_size, self.num_users, points.shape[-1])
        partials = self.partitions.clamped_loss_sums(
            points, loss_clip=loss_clip, chunk_size=chunk, nonfinite=self.nonfinite
        )
        return combine_clamped_sums(partials, loss_clip, self.num_users)
