r"""Sums of per-user quantities across users and partitions, as the mechanisms receive them:
``ClippedSum`` (``Σ_i clip_B(W y_i)`` and the count within ``B`` from the same pass), the
partitions' ``ClippedPartialSum`` and ``ClampedPartialSum`` combined in a fixed order after
checks, and the clamped loss sums of the evaluated selections. SENSITIVE until noised.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from botorch_dp.privacy.checks import check_positive
from botorch_dp.privacy.mechanisms._clipping import NonfiniteLosses, _clipped_sum

__all__ = [
    "ClampedPartialSum",
    "ClippedPartialSum",
    "ClippedSum",
    "clamped_loss_sums",
    "clipped_partial_sum",
    "clipped_sum",
    "combine_clamped_sums",
    "combine_partial_sums",
]


@dataclass(frozen=True)
class ClippedPartialSum:
    r"""One partition's ``Σ_{i ∈ P} clip_B(A y_i)``: SENSITIVE until noised.

    It travels from the partition to the driver, so that channel must be trusted (or
    encrypted) like the process holding the losses.

    Attributes:
        total: The ``d`` sum of the partition's clipped per-user estimates.
        num_users: ``n_P``, the partition's number of users (public, like ``n``).
        num_clipped: How many of them were clipped (NON-PRIVATE; only for diagnostics).
    """

    total: Tensor
    num_users: int
    num_clipped: int


def clipped_partial_sum(
    A: Tensor,
    Y: Tensor | Sequence[Tensor],
    clip_bound: float,
    chunk_size: int | None = None,
    *,
    nonfinite: NonfiniteLosses = "refuse",
) -> ClippedPartialSum:
    r"""``Σ_i clip_B(A y_i)`` over one partition's users, as the in-process release forms it.

    The same chunked, overflow-safe computation as ``clipped_mean_gradient`` (the sum
    before the division by ``n``): a partition holding all users, or each partition holding
    one chunk of ``chunk_size`` users, gives the in-process sum bit for bit.

    Args:
        A: The ``d x N`` public gradient weights ``∇k(θ, D) K⁻¹``.
        Y: The partition's ``N x n_P`` losses at ``D`` (sensitive), or its row blocks.
        clip_bound: ``B > 0``.
        chunk_size: Users per chunk; pass the driver's (``None``: ``default_chunk_size``
            of this partition, which differs from that of all ``n`` users).
        nonfinite: ``"refuse"`` or ``"zero_user"``; see ``clipped_mean_gradient``.

    Returns:
        The partition's ``ClippedPartialSum``.
    """
    check_positive(clip_bound, "clip_bound (B)", allow_inf=False)
    total, num_clipped, _ = _clipped_sum(A, Y, clip_bound, chunk_size, nonfinite=nonfinite)
    n = Y.shape[-1] if isinstance(Y, Tensor) else Y[0].shape[-1]
    return ClippedPartialSum(total=total, num_users=int(n), num_clipped=int(num_clipped))


@dataclass(frozen=True)
class ClippedSum:
    r"""``Σ_i clip_B(W y_i)`` over every user: SENSITIVE until a mechanism noises it.

    What ``optim.users.Users.clipped_sum`` answers and the gradient, count and preconditioner
    mechanisms release from (only ``privacy.mechanisms`` reads ``total`` and ``num_clipped``).

    Attributes:
        total: The ``k`` sum of the clipped estimates.
        bound: ``B``, the bound they were clipped at (public).
        num_users: ``n`` (public).
        num_clipped: How many estimates were clipped (SENSITIVE; ``n − num_clipped`` users lie
            within ``B``, adaptive clipping's count, from the same pass).
    """

    total: Tensor
    bound: float
    num_users: int
    num_clipped: int

    def mean(self) -> Tensor:
        r"""``(1/n) Σ_i clip_B(W y_i)``."""
        return self.total / self.num_users

    @property
    def within(self) -> int:
        r"""``#{i : ‖W y_i‖ ≤ B}`` (SENSITIVE)."""
        return self.num_users - self.num_clipped


def clipped_sum(
    W: Tensor,
    Y: Tensor | Sequence[Tensor],
    clip_bound: float,
    chunk_size: int | None = None,
    *,
    nonfinite: NonfiniteLosses = "refuse",
) -> ClippedSum:
    r"""The ``ClippedSum`` of every user's ``clip_B(W y_i)`` (``clipped_mean_gradient``'s pass, which
    also counts the clipped users: a user whose estimate's norm overflows counts as clipped,
    a user zeroed by ``"zero_user"`` as within, as in ``count_within_clip``).

    Args:
        W: A ``k x N`` tensor of finite public weights (``A``, or ``Ṽᵀ A`` under a projection).
        Y: The ``N x n`` losses (sensitive), or their row blocks.
        clip_bound: ``B > 0``.
        chunk_size: Users per chunk (``None``: ``default_chunk_size``).
        nonfinite: ``"refuse"`` or ``"zero_user"``.
    """
    check_positive(clip_bound, "clip_bound (B)", allow_inf=False)
    total, num_clipped, _ = _clipped_sum(W, Y, clip_bound, chunk_size, nonfinite=nonfinite)
    n = Y.shape[-1] if isinstance(Y, Tensor) else Y[0].shape[-1]
    return ClippedSum(total=total, bound=float(clip_bound), num_users=int(n), num_clipped=int(num_clipped))


def combine_partial_sums(partials: Sequence[ClippedPartialSum], clip_bound: float, num_users: int) -> ClippedSum:
    r"""The partitions' partial sums added in the order given (a fixed order), each checked first.

    A broken or tampered partition is refused before anything is released: each ``s_P`` must
    be a finite ``k``-vector of norm at most ``n_P B`` (a sum of ``n_P`` vectors clipped to
    ``B``), and the ``n_P`` must add up to ``num_users``.
    """
    if len(partials) == 0:
        raise ValueError("partials: no partial sums were given; nothing was released.")
    d = partials[0].total.shape[-1] if isinstance(partials[0].total, Tensor) else None
    for p, partial in enumerate(partials):
        s = partial.total
        if not isinstance(s, Tensor) or s.dim() != 1 or s.shape[0] != d or not bool(torch.isfinite(s).all()):
            raise ValueError(
                f"partials[{p}]: the partial sum must be a finite d-vector (d = {d}); nothing was released."
            )
        if float(torch.linalg.vector_norm(s)) > partial.num_users * clip_bound * (1.0 + 1e-9):
            raise ValueError(
                f"partials[{p}]: the partial sum's norm exceeds n_P·B, so it is not a sum of clipped "
                "estimates; nothing was released."
            )
    total_users = sum(int(partial.num_users) for partial in partials)
    if total_users != num_users:
        raise ValueError(
            f"partials: the partitions hold {total_users} users, the mechanism expects n = {num_users}; "
            "nothing was released."
        )
    total = partials[0].total.new_zeros(d)
    for partial in partials:  # fixed order
        total = total + partial.total
    return ClippedSum(
        total=total,
        bound=float(clip_bound),
        num_users=int(num_users),
        num_clipped=sum(int(partial.num_clipped) for partial in partials),
    )


def clamped_loss_sums(
    losses: Tensor | Sequence[Tensor], loss_clip: float, chunk_size: int, *, nonfinite: NonfiniteLosses = "refuse"
) -> Tensor:
    r"""Per candidate, ``Σ_i min(max(ℓ_i, 0), C)`` (SENSITIVE), summed chunk by chunk of users.

    The chunks are ``chunk_size`` users wide and added in order, so partitions that hold one
    chunk each give the in-process sums bit for bit. A non-finite loss is refused
    (``"refuse"``) or counts 0 (``"zero_user"``: that user's term of that sum is 0).

    Args:
        losses: The ``q x n`` losses of the candidates, or their column blocks (partitions).
        loss_clip: ``C > 0``.
        chunk_size: Users per chunk.
        nonfinite: ``"refuse"`` or ``"zero_user"``.

    Returns:
        A ``q`` float64 tensor.
    """
    parts = [losses] if isinstance(losses, Tensor) else list(losses)
    total = None
    for part in parts:
        part = part.detach().to(torch.float64)
        bad = ~torch.isfinite(part)
        if bool(bad.any()):
            if nonfinite != "zero_user":
                raise ValueError(
                    "The losses contain non-finite values (NaN or inf); nothing was released. "
                    "This refusal reveals that some user's loss was not finite."
                )
            part = part.masked_fill(bad, 0.0)
        for start in range(0, part.shape[-1], chunk_size):
            chunk = part[:, start : start + chunk_size].clamp(min=0.0, max=loss_clip).sum(-1)
            total = chunk if total is None else total + chunk
    if total is None:
        raise ValueError(
            f"losses must hold at least one user, got {len(parts)} blocks of shapes "
            f"{[tuple(p.shape) for p in parts]}; nothing was released."
        )
    return total


@dataclass(frozen=True)
class ClampedPartialSum:
    r"""One partition's clamped loss sums ``Σ_{i ∈ P} clamp(ℓ_i, 0, C)`` per candidate: SENSITIVE.

    Attributes:
        total: The ``q`` sums.
        num_users: ``n_P`` (public).
    """

    total: Tensor
    num_users: int


def combine_clamped_sums(partials: Sequence[ClampedPartialSum], loss_clip: float, num_users: int) -> Tensor:
    r"""The partitions' clamped loss sums added in the order given, each checked first (a finite
    ``q``-vector in ``[0, n_P C]``; the ``n_P`` add up to ``num_users``): a broken or tampered
    partition is refused before anything is released."""
    if len(partials) == 0:
        raise ValueError("partials: no clamped sums were given; nothing was released.")
    q = partials[0].total.shape[0] if isinstance(partials[0].total, Tensor) else None
    for p, partial in enumerate(partials):
        s = partial.total
        if not isinstance(s, Tensor) or s.dim() != 1 or s.shape[0] != q or not bool(torch.isfinite(s).all()):
            raise ValueError(
                f"partials[{p}]: the clamped sums must be a finite q-vector (q = {q}); nothing was released."
            )
        if bool((s < 0).any()) or bool((s > partial.num_users * loss_clip * (1.0 + 1e-9)).any()):
            raise ValueError(f"partials[{p}]: a clamped sum lies outside [0, n_P·C]; nothing was released.")
    if sum(int(partial.num_users) for partial in partials) != num_users:
        raise ValueError(f"partials: the partitions do not hold n = {num_users} users; nothing was released.")
    total = partials[0].total
    for partial in partials[1:]:  # fixed order
        total = total + partial.total
    return total
