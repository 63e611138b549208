r"""Clipped sums of per-user gradient estimates, exact and overflow-safe: the one place per-user
losses meet each other (``clipped_sum``, ``clipped_mean_gradient``, the partitions'
``clipped_partial_sum``). Their results are SENSITIVE until a mechanism noises them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np
import torch
from torch import Tensor

#: ``"refuse"``: non-finite losses raise before any release; ``"zero_user"``: such users contribute 0.
NonfiniteLosses = Literal["refuse", "zero_user"]


def _pow2_exponents(x: Tensor, dim: int) -> Tensor:
    r"""Integer ``e`` with ``max |x| < 2^e`` along ``dim`` (0 for an all-zero slice)."""
    return torch.frexp(_max_abs(x, dim)).exponent.to(torch.int64)


def _max_abs(x: Tensor, dim: int) -> Tensor:
    r"""``max |x|`` along ``dim`` without allocating ``|x|`` (NaN if the slice has one)."""
    return torch.maximum(x.amax(dim=dim), -x.amin(dim=dim))


def _scale_columns(x: Tensor, e: Tensor) -> Tensor:
    r"""``x · 2^e`` with one exponent per column: one multiplication by exact powers of two
    when every ``2^e`` is a normal float64, else the two-step ``_ldexp``."""
    if bool((e.abs() < 1000).all()):
        return x * torch.ldexp(torch.ones(e.shape, dtype=x.dtype, device=x.device), e)
    return _ldexp(x, e)


def _ldexp(x: Tensor, e: Tensor) -> Tensor:
    r"""``x · 2^e`` exactly, in two halves so that no factor ``2^e`` overflows on its own."""
    half = torch.div(e, 2, rounding_mode="floor")
    return torch.ldexp(torch.ldexp(x, half), e - half)


def _clip_scaled(G_scaled: Tensor, e: Tensor, clip_bound: float) -> tuple[Tensor, Tensor]:
    r"""Clip the rows ``g_i = G_scaled_i · 2^{e_i}`` to norm ``B`` without forming ``g_i``
    when it would overflow.

    A clipped row is ``g_i B/‖g_i‖ = G_scaled_i B/‖G_scaled_i‖`` (the power of two
    cancels); an unclipped row is ``G_scaled_i · 2^{e_i}``, finite because ``‖g_i‖ ≤ B``.
    Scaling by powers of two is exact, so in the normal floating-point range this gives
    the same bits as clipping ``g_i`` directly.
    """
    scaled_norms = G_scaled.norm(dim=-1)  # finite: the caller scaled the inputs
    clipped = _ldexp(scaled_norms, e) > clip_bound  # the true norm may be inf here; fine
    factor = (clip_bound / scaled_norms).unsqueeze(-1)  # inf for a zero row, never used then
    rows = torch.where(clipped.unsqueeze(-1), G_scaled * factor, _ldexp(G_scaled, e.unsqueeze(-1)))
    return rows, clipped


def clip_rows(G: Tensor, clip_bound: float) -> tuple[Tensor, Tensor]:
    r"""Clip each row to Euclidean norm at most ``B``: ``ĝ_i = g_i · min(1, B/‖g_i‖)``.

    Exact for every finite row, including rows whose norm overflows float64.

    Args:
        G: An ``n x d`` tensor of finite per-user gradients.
        clip_bound: ``B > 0``.

    Returns:
        The ``n x d`` clipped rows and an ``n`` boolean tensor marking clipped rows.
    """
    e = _pow2_exponents(G, dim=-1)
    return _clip_scaled(_ldexp(G, -e.unsqueeze(-1)), e, clip_bound)


def clipped_mean_gradient(
    A: Tensor,
    Y: Tensor | Sequence[Tensor],
    clip_bound: float,
    chunk_size: int | None = None,
    *,
    nonfinite: NonfiniteLosses = "refuse",
) -> tuple[Tensor, int]:
    r"""``ḡ = (1/n) Σ_i clip(A y_i)``, computed in chunks of users.

    ``A = ∇k(θ, D) K⁻¹`` is shared by all users, so each chunk costs one ``d x N`` by
    ``N x chunk`` product. Replacing one user's losses moves ``ḡ`` by at most ``2B/n``.

    Overflow-safe and exact for every finite input (up to the float64 maximum): each chunk
    is first formed directly, ``A y_i`` and a norm per user; a user whose product or norm
    overflowed (the norm is then not finite, which the check below sees for every such
    user) is formed again from losses scaled by a power of two that brings their largest
    magnitude into ``[0.5, 1)`` (``_clipped_sum_scaled``), and the clipping rule is
    applied exactly. Scaling by a power of two is exact, so both forms give the same bits
    wherever nothing under- or overflows; the direct one is only used when ``B`` is far
    above the underflow range (``_direct_product_is_safe``), so that a norm's rounding
    near zero can never decide whether a user is clipped. Which users take the scaled form
    depends on their losses, so the time of a call does too (it is not part of the
    release).

    ``Y`` may be given as a list of row blocks (one per batch, ``b_t x n`` each, stacking
    to ``N x n``): they are never stacked; ``A y_i`` is accumulated block by block (the
    last bits can differ from those of one product with the stacked matrix).

    Args:
        A: A ``d x N`` tensor of finite gradient weights.
        Y: An ``N x n`` tensor of per-user losses at the points of ``D`` (sensitive),
            or a sequence of row blocks of it.
        clip_bound: ``B > 0``.
        chunk_size: Users per chunk: the extra memory is about ``2d x chunk_size`` floats
            (``N x chunk_size`` more for users formed from scaled losses). ``None``
            (default): ``default_chunk_size(n, d)``.
        nonfinite: ``"refuse"`` (default): a NaN or ``inf`` loss raises ``ValueError``
            (the refusal reveals that some loss was not finite). ``"zero_user"``: every user
            with a non-finite loss in ``Y`` contributes 0 (``n`` unchanged, so the
            sensitivity ``2B/n`` and the guarantee hold for every input).

    Returns:
        The ``d`` tensor ``ḡ`` (sensitive: not yet noised) and the number of clipped users.
    """
    total, num_clipped, _ = _clipped_sum(A, Y, clip_bound, chunk_size, nonfinite=nonfinite)
    return total / (Y.shape[-1] if isinstance(Y, Tensor) else Y[0].shape[-1]), num_clipped


def _checked_blocks(A: Tensor, Y: Tensor | Sequence[Tensor]) -> tuple[Tensor, list[Tensor], int]:
    r"""``A`` and the row blocks of ``Y`` (empty blocks dropped), detached (sensitive, never
    differentiated), and ``n``; refuses non-finite weights and blocks that do not stack to
    an ``N x n`` matrix matching ``A`` (``d x N``)."""
    if not torch.isfinite(A).all():
        raise ValueError("The gradient weights A are not finite; nothing was released.")
    blocks = [Y] if isinstance(Y, Tensor) else [b for b in Y if b.shape[0] > 0] or list(Y[:1])
    n = blocks[0].shape[-1]
    if any(b.shape[-1] != n for b in blocks) or sum(b.shape[0] for b in blocks) != A.shape[-1]:
        raise ValueError("The loss blocks must stack to an N x n matrix matching A (d x N).")
    return A.detach(), [b.detach() for b in blocks], n


def _without_nonfinite_users(parts: Sequence[Tensor], bad: Tensor, nonfinite: NonfiniteLosses) -> Sequence[Tensor]:
    r"""The row blocks ``parts`` of some users' losses with the users flagged in ``bad`` (a
    non-finite loss) refused (``"refuse"``) or zeroed (``"zero_user"``: they contribute as
    ``A·0 = 0``)."""
    if not bool(bad.any()):
        return parts
    if nonfinite != "zero_user":
        raise ValueError(
            "The losses contain non-finite values (NaN or inf); nothing was released. "
            "This refusal reveals that some user's loss was not finite."
        )
    return [Y_t.masked_fill(bad, 0.0) for Y_t in parts]


def _clipped_sum(
    A: Tensor,
    Y: Tensor | Sequence[Tensor],
    clip_bound: float,
    chunk_size: int | None,
    *,
    nonfinite: NonfiniteLosses = "refuse",
    direct: bool = True,
) -> tuple[Tensor, int, int]:
    r"""``Σ_i clip(A y_i)`` (``d``), the number of clipped users, and the number of users
    formed from scaled losses (``direct=False``: all of them, the reference path)."""
    A, blocks, n = _checked_blocks(A, Y)
    total = A.new_zeros(A.shape[0])
    num_clipped = num_scaled = 0
    if A.shape[-1] == 0:  # no evaluations yet (an empty first batch): every A y_i is 0
        return total, 0, 0
    direct = direct and _direct_product_is_safe(clip_bound, A.dtype)
    if chunk_size is None:
        chunk_size = default_chunk_size(n, A.shape[0])
    A_parts = A.split([b.shape[0] for b in blocks], dim=-1)
    check_losses = not bool(A.ne(0).all())  # see _clipped_sum_direct
    # two d x chunk buffers reused by every chunk (fresh ones would be allocated and freed each time)
    workspace = A.new_empty(2, A.shape[0] * min(chunk_size, n)) if direct else None
    for start in range(0, n, chunk_size):
        parts = [b[:, start : start + chunk_size] for b in blocks]  # this chunk's users in every batch
        if workspace is not None:  # direct
            part, clipped, scaled = _clipped_sum_direct(
                A, A_parts, parts, clip_bound, nonfinite, check_losses, workspace
            )
        else:
            (part, clipped), scaled = _clipped_sum_scaled(A, parts, clip_bound, nonfinite), parts[0].shape[-1]
        total = total + part
        num_clipped += clipped
        num_scaled += scaled
    return total, num_clipped, num_scaled


def default_chunk_size(num_users: int, dim: int) -> int:
    r"""Users per chunk when none is given: at least 4096, so that the few dozen tensor
    operations per chunk cost little next to its arithmetic; at most 65536, an eighth of
    the users (so the temporaries stay a small fraction of the loss matrix), and what keeps
    the chunk's two ``d x chunk`` float64 temporaries within 4 MiB (cache-sized: measured
    on a 2-core AMD EPYC at ``d = 10``, 16–32k users per chunk beat 64k by 2–3×).

    Args:
        num_users: ``n``.
        dim: ``d``, the rows of ``A``.
    """
    return max(4096, min(65536, num_users // 8, 2**18 // max(dim, 1)))


def _direct_product_is_safe(clip_bound: float, dtype: torch.dtype) -> bool:
    r"""Whether the unscaled product may be used: ``B ≥ tiny^{1/4}`` (``2^-255.5`` in
    float64). Then ``B² ≥ √tiny``, so squares that underflow (absolute error at most the
    smallest subnormal each) move a sum of squares near ``B²`` by far less than its
    rounding: the clip decision is the exact rule's."""
    return clip_bound >= torch.finfo(dtype).tiny ** 0.25


def _clipped_sum_direct(
    A: Tensor,
    A_parts: Sequence[Tensor],
    parts: Sequence[Tensor],
    clip_bound: float,
    nonfinite: NonfiniteLosses,
    check_losses: bool,
    workspace: Tensor,
) -> tuple[Tensor, int, int]:
    r"""``Σ clip(A y_i)`` over ``c`` users from the unscaled product ``Σ_t A_t Y_t`` of the
    batches' column blocks ``A_t`` of ``A`` and ``b_t x c`` row blocks ``Y_t`` of the losses
    (``_product``). Users whose product or norm overflowed, or who have a non-finite loss,
    are formed by ``_clipped_sum_scaled`` instead (which refuses or zeroes the latter).
    Returns the sum, the number clipped and the number formed from scaled losses.

    Same bits as ``_clipped_sum_scaled`` whenever no value under- or overflows: the product
    is the same sequence of operations on operands scaled by exact powers of two, the norm
    is ``torch.linalg.vector_norm``'s (``_column_norms``), and the factor ``B/‖g_i‖`` and the
    product with it are the scaled ones times exact powers of two.

    A NaN or inf loss always shows as a non-finite norm when no weight is 0: each of that
    user's ``A_jk y_ik`` is then NaN or inf, and so is every ``(A y_i)_j``. A product routine
    may skip zero weights (the reference BLAS does), so when ``A`` has a zero
    (``check_losses``) the losses are tested as well. ``workspace`` is a ``2 x (d c)`` buffer,
    or larger, that is overwritten.
    """
    shape = (A.shape[0], parts[0].shape[-1])
    G = _product(A_parts, parts, out=workspace[0, : shape[0] * shape[1]].view(shape))  # d x c
    norms = _column_norms(G, squares=workspace[1, : shape[0] * shape[1]].view(shape))
    scaled_sum, scaled_clipped, num_scaled = None, 0, 0
    # One test for the chunk: a NaN or inf makes the sum non-finite (an overflowing sum of
    # large norms or losses only sends the chunk to the per-user test below).
    test = norms.sum()
    if check_losses:
        test = test + sum(Y_t.sum() for Y_t in parts)
    if not bool(test.isfinite()):
        special = norms.isfinite().logical_not_()  # overflowed, or a non-finite loss
        for Y_t in parts:
            special |= Y_t.isfinite().all(0).logical_not_()
        G.masked_fill_(special, 0.0)  # these users come from the scaled path instead
        norms.masked_fill_(special, 0.0)
        scaled_sum, scaled_clipped = _clipped_sum_scaled(A, [Y_t[:, special] for Y_t in parts], clip_bound, nonfinite)
        num_scaled = int(special.sum())
    clipped = norms > clip_bound
    G.mul_(torch.where(clipped, clip_bound / norms, 1.0))  # g_i B/‖g_i‖ or g_i itself
    total = G.sum(1)
    if scaled_sum is not None:
        total = total + scaled_sum
    return total, int(clipped.sum()) + scaled_clipped, num_scaled


def _clipped_sum_scaled(
    A: Tensor, parts: Sequence[Tensor], clip_bound: float, nonfinite: NonfiniteLosses
) -> tuple[Tensor, int]:
    r"""``Σ clip(A y_i)`` and the number clipped over ``c`` users (the ``b_t x c`` row blocks
    ``parts`` of their losses), each user's losses scaled by the power of two that brings
    their largest magnitude into ``[0.5, 1)``, and ``A`` by the one that brings its largest
    magnitude there: the scaled ``A y_i`` (entries at most ``N``) and its norm never
    overflow, for any finite losses and weights. Non-finite losses raise, or
    (``"zero_user"``) those users give 0."""
    largest = _max_abs(parts[0], dim=0)  # per user, over all rows; NaN or inf if the user has such a loss
    for Y_t in parts[1:]:
        largest = torch.maximum(largest, _max_abs(Y_t, dim=0))
    bad = ~torch.isfinite(largest)  # users with a non-finite loss
    if bool(bad.any()):
        parts = _without_nonfinite_users(parts, bad, nonfinite)  # those users contribute clip(A·0) = 0
        largest = largest.masked_fill(bad, 0.0)
    e = torch.frexp(largest).exponent.to(torch.int64)  # one exponent per user
    a = int(torch.frexp(A.abs().max()).exponent)  # one for A (public), so that huge weights cannot overflow
    A_scaled = torch.ldexp(A, A.new_tensor(-a)) if abs(a) < 1000 else _ldexp(A, A.new_tensor(-a))
    A_parts = A_scaled.split([Y_t.shape[0] for Y_t in parts], dim=-1)
    G_scaled = _product(A_parts, [_scale_columns(Y_t, -e) for Y_t in parts]).transpose(0, 1)  # c x d, |entries| ≤ N
    clipped, was_clipped = _clip_scaled(G_scaled, e + a, clip_bound)
    return clipped.sum(0), int(was_clipped.sum())


def _product(A_parts: Sequence[Tensor], parts: Sequence[Tensor], out: Tensor | None = None) -> Tensor:
    r"""``Σ_t A_t Y_t`` (``d x c``), accumulated block by block in ``out`` (or a fresh tensor):
    the loss blocks are never stacked (the bits can differ in the last place from one
    product with the stacked matrix)."""
    G = torch.mm(A_parts[0], parts[0], out=out)
    for A_t, Y_t in zip(A_parts[1:], parts[1:], strict=True):
        G.addmm_(A_t, Y_t)
    return G


def _column_norms(G: Tensor, squares: Tensor | None = None) -> Tensor:
    r"""The Euclidean norm of each column of a ``d x c`` tensor, with the bits of
    ``torch.linalg.vector_norm(G, dim=0)``: squares summed in row order, then a correctly
    rounded square root. That reduction is not vectorized on CPU (about 15× slower), and
    torch's CPU ``sqrt`` (MKL VML) is within 1 ulp but not correctly rounded; numpy's is.
    ``squares``: an optional ``d x c`` buffer to work in (the result is a view of it)."""
    if G.shape[0] == 0:
        return G.new_zeros(G.shape[1])
    squares = torch.mul(G, G, out=squares)
    total = squares[0]
    for row in squares[1:]:
        total += row
    if total.device.type == "cpu":
        array = total.numpy()
        np.sqrt(array, out=array)
        return total
    return total.sqrt_()


def count_within_clip(
    A: Tensor,
    Y: Tensor | Sequence[Tensor],
    clip_bound: float,
    chunk_size: int | None = None,
    *,
    nonfinite: NonfiniteLosses = "refuse",
) -> int:
    r"""``#{i : ‖A y_i‖ ≤ B}`` (SENSITIVE: release it only through ``GaussianClipCountMechanism``).

    Each user's term is an indicator of that user's own losses (``A`` and ``B`` are public),
    so replacing one user moves the count by at most 1. A user whose estimate's norm
    overflows float64 (only possible for finite losses when it is far above ``B``) counts
    as above ``B``; with ``nonfinite="zero_user"`` a user with a non-finite loss has the
    estimate 0 (as in ``clipped_mean_gradient``) and counts as within.

    Args:
        A: A ``d x N`` tensor of finite gradient weights (public).
        Y: An ``N x n`` tensor of per-user losses (sensitive), or a sequence of row blocks.
        clip_bound: ``B > 0``.
        chunk_size: Users per chunk (``None``: ``default_chunk_size``).
        nonfinite: ``"refuse"`` (default: a NaN or ``inf`` loss raises ``ValueError``) or
            ``"zero_user"``.

    Returns:
        The count, an integer in ``[0, n]``.
    """
    A, blocks, n = _checked_blocks(A, Y)
    if A.shape[-1] == 0:  # no evaluations yet: every estimate is 0
        return n
    if chunk_size is None:
        chunk_size = default_chunk_size(n, A.shape[0])
    A_parts = A.split([b.shape[0] for b in blocks], dim=-1)
    count = 0
    for start in range(0, n, chunk_size):
        parts: Sequence[Tensor] = [b[:, start : start + chunk_size] for b in blocks]
        bad = torch.zeros(parts[0].shape[-1], dtype=torch.bool, device=A.device)
        for Y_t in parts:
            bad |= Y_t.isfinite().all(0).logical_not_()
        parts = _without_nonfinite_users(parts, bad, nonfinite)
        norms = _column_norms(_product(A_parts, parts))  # NaN or inf when a product overflowed
        count += int((norms <= clip_bound).sum())  # NaN compares False: above B
    return count
