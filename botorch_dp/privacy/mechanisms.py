r"""The privacy boundary: the one module where per-user losses meet each other or noise.

Every release of the package is a call into this module and returns the released value
together with its privacy cost (``PrivacyCost``). A release made inside a charged step
(``PrivacyLedger.charge``) takes the step's ``meter`` and records its cost through it
immediately before its noise is drawn (``_charged``), so the ledger holds a record whenever
the noise exists; without a meter the caller is responsible for the accounting.

- ``GaussianGradientMechanism``: DP-GIBO's and noisy GD's gradient release. Per-user
  gradient estimates ``A y_i`` are clipped to ``B``, averaged and noised with std
  ``2B√T/(nμ)`` (Sopa et al., Thm. 3.1).
- ``GaussianScoreMechanism``: private random search's score of one trial, the mean of the
  ``[0, C]``-clipped per-user losses plus Gaussian noise (sensitivity ``C/n``).
- ``GaussianClipCountMechanism``: adaptive clipping's noisy count of the users whose
  gradient estimate lies within the clip bound (sensitivity 1; Andrew et al. 2021).

Nothing computed from per-user losses leaves this module un-noised, except clearly
labelled non-private diagnostics returned only on request.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch
from torch import Tensor

from botorch_dp.privacy.analysis.gdp import gaussian_noise_std_for_mu
from botorch_dp.privacy.checks import check_positive, check_positive_int
from botorch_dp.privacy.ledger.events import Gaussian, PrivacyEvent, PureDP
from botorch_dp.privacy.ledger.meter import Meter, TrainingMeter

#: ``"refuse"``: non-finite losses raise before any release; ``"zero_user"``: such users contribute 0.
NonfiniteLosses = Literal["refuse", "zero_user"]


def _charged(
    meter: Meter | None, part: str, event: PrivacyEvent, *, release_mu: float | None = None,
    generator: torch.Generator | None = None, secure_rng: bool = False,
) -> None:
    r"""Record a release's cost through its step's meter; called immediately before the draw.

    A Gaussian release from OS entropy at a finite per-release ``release_mu`` above
    ``MAX_OS_ENTROPY_RELEASE_MU`` is refused here first (``ValueError``: the sampler's
    truncation would void the guarantee, see ``os_entropy_normal``), and a meter refuses an
    event above its bound: either way nothing is recorded or drawn.
    """
    if (release_mu is not None and (secure_rng or generator is None) and math.isfinite(release_mu)
            and release_mu > MAX_OS_ENTROPY_RELEASE_MU):
        raise ValueError(
            f"release_mu (per-release μ) = {release_mu!r} exceeds MAX_OS_ENTROPY_RELEASE_MU = "
            f"{MAX_OS_ENTROPY_RELEASE_MU}: the OS-entropy normal sampler's support ends at |Z| = "
            f"{OS_ENTROPY_NORMAL_MAX_ABS:.2f}, so at this μ the release would not be μ-GDP (truncation "
            "mass above 1e-30). Use a smaller μ per release (more steps, or a smaller budget). Nothing was released."
        )
    if meter is not None:
        meter.record(part, event)


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


def _without_nonfinite_users(parts: list[Tensor], bad: Tensor, nonfinite: NonfiniteLosses) -> list[Tensor]:
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
        if direct:
            part, clipped, scaled = _clipped_sum_direct(A, A_parts, parts, clip_bound, nonfinite, check_losses, workspace)
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


def _clipped_sum_scaled(A: Tensor, parts: Sequence[Tensor], clip_bound: float, nonfinite: NonfiniteLosses) -> tuple[Tensor, int]:
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
    A_scaled = torch.ldexp(A, A.new_tensor(-a)) if abs(a) < 1000 else _ldexp(A, torch.tensor(-a))
    A_parts = A_scaled.split([Y_t.shape[0] for Y_t in parts], dim=-1)
    G_scaled = _product(A_parts, [_scale_columns(Y_t, -e) for Y_t in parts]).transpose(0, 1)  # c x d, |entries| ≤ N
    clipped, was_clipped = _clip_scaled(G_scaled, e + a, clip_bound)
    return clipped.sum(0), int(was_clipped.sum())


def _product(A_parts: Sequence[Tensor], parts: Sequence[Tensor], out: Tensor | None = None) -> Tensor:
    r"""``Σ_t A_t Y_t`` (``d x c``), accumulated block by block in ``out`` (or a fresh tensor):
    the loss blocks are never stacked (the bits can differ in the last place from one
    product with the stacked matrix)."""
    G = torch.mm(A_parts[0], parts[0], out=out)
    for A_t, Y_t in zip(A_parts[1:], parts[1:]):
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


@dataclass(frozen=True)
class PrivacyCost:
    r"""What a release spent, as returned by every mechanism of this module.

    Attributes:
        mu: GDP parameter of each release (``math.inf``: no guarantee, no noise).
        count: Number of releases of that ``mu`` the call made (e.g. one score per trial).
    """

    mu: float
    count: int = 1


@dataclass(frozen=True)
class ReleaseDiagnostics:
    r"""NON-PRIVATE values of one gradient release. Never publish these.

    Attributes:
        unnoised_gradient: The ``d`` clipped mean before noise.
        clip_fraction: Fraction of users whose estimate was clipped.
        noise_norm: ``‖noise‖``.
    """

    unnoised_gradient: Tensor
    clip_fraction: float
    noise_norm: float


@dataclass
class GradientRelease:
    r"""One privatized gradient, its cost and, only if requested, non-private diagnostics.

    Attributes:
        gradient: The ``d`` released gradient ``ḡ + noise`` (public).
        cost: The ``PrivacyCost`` of this release (``μ/√T``-GDP).
        diagnostics: ``None`` unless requested; then NON-PRIVATE ``ReleaseDiagnostics``.
    """

    gradient: Tensor
    cost: PrivacyCost
    diagnostics: ReleaseDiagnostics | None = None


class GaussianGradientMechanism:
    r"""Clip per-user gradient estimates, average them, add Gaussian noise.

    Args:
        clip_bound: ``B``, the per-user clipping norm.
        num_users: ``n``, the (public) number of users.
        privacy_mu: ``μ``, the total GDP budget of the ``T`` releases (``inf``: no noise).
        num_steps: ``T``, the number of releases the budget is split over.
        generator: Source of the noise; its state is part of the loop's checkpoint.
        secure_rng: Draw the noise from the operating system's entropy even if a
            ``generator`` is given (without one, the noise always comes from OS entropy).
        chunk_size: Users per chunk when forming ``A Y`` (``None``: ``default_chunk_size``).
    """

    def __init__(
        self,
        *,
        clip_bound: float,
        num_users: int,
        privacy_mu: float,
        num_steps: int,
        generator: torch.Generator | None = None,
        secure_rng: bool = False,
        chunk_size: int | None = None,
    ) -> None:
        self.clip_bound = check_positive(clip_bound, "clip_bound (B)", allow_inf=False)
        self.privacy_mu = check_positive(privacy_mu, "privacy_mu (μ)")
        self.num_steps = check_positive_int(num_steps, "num_steps (T)")
        self.num_users = check_positive_int(num_users, "num_users (n)")
        self.generator = generator
        self.secure_rng = secure_rng
        self.chunk_size = None if chunk_size is None else check_positive_int(chunk_size, "chunk_size (user_chunk_size)")

    @property
    def sensitivity(self) -> float:
        r"""Replace-one L2 sensitivity ``2B/n`` of the clipped mean."""
        return 2.0 * self.clip_bound / self.num_users

    @property
    def noise_std(self) -> float:
        r"""Noise standard deviation per coordinate, ``2B√T/(nμ)`` (0 when ``μ = inf``)."""
        return gaussian_noise_std_for_mu(self.sensitivity, self.privacy_mu, self.num_steps)

    @property
    def noise_multiplier(self) -> float:
        r"""``noise_std`` over the sensitivity, ``√T/μ`` (Opacus's convention; 0: no noise)."""
        return gaussian_noise_std_for_mu(1.0, self.privacy_mu, self.num_steps)

    @property
    def step_mu(self) -> float:
        r"""GDP parameter ``μ/√T`` of one release."""
        return self.privacy_mu / math.sqrt(self.num_steps)

    def sample_noise(self, d: int, dtype: torch.dtype = torch.float64, device: torch.device | None = None) -> Tensor:
        r"""A ``d`` tensor ``N(0, noise_std² I)`` on ``device``."""
        return _gaussian(d, self.noise_std, self.generator, self.secure_rng, dtype, device, release_mu=self.step_mu)

    def release(
        self,
        A: Tensor,
        Y: Tensor | Sequence[Tensor],
        *,
        diagnostics: bool = False,
        nonfinite: NonfiniteLosses = "refuse",
        meter: Meter | None = None,
        part: str = "grad",
    ) -> GradientRelease:
        r"""Privatize the average clipped per-user gradient ``(1/n) Σ clip(A y_i)``.

        Args:
            A: A ``d x N`` tensor ``∇k(θ, D) K⁻¹`` (public: depends on ``D`` and ``θ``).
            Y: An ``N x n`` tensor of per-user losses at ``D`` (sensitive), or a sequence of
                its row blocks (see ``clipped_mean_gradient``).
            diagnostics: Also return NON-PRIVATE diagnostics.
            nonfinite: ``"refuse"`` (default) or ``"zero_user"``; see ``clipped_mean_gradient``.
            meter: The charged step's meter: ``Gaussian(μ/√T)`` is recorded as ``part``
                just before the noise is drawn.
            part: The release's part of its step.

        Returns:
            A ``GradientRelease``.
        """
        n = Y.shape[-1] if isinstance(Y, Tensor) else Y[0].shape[-1]
        if n != self.num_users:
            raise ValueError(f"Expected {self.num_users} users, got {n}.")
        mean, num_clipped = clipped_mean_gradient(
            A, Y, self.clip_bound, self.chunk_size, nonfinite=nonfinite
        )
        _charged(meter, part, Gaussian(self.step_mu), release_mu=self.step_mu, generator=self.generator,
                 secure_rng=self.secure_rng)
        noise = self.sample_noise(mean.shape[0], dtype=mean.dtype, device=mean.device)
        released = (mean + noise).detach()
        info = None
        if diagnostics:
            info = ReleaseDiagnostics(
                unnoised_gradient=mean.detach().clone(),
                clip_fraction=num_clipped / self.num_users,
                noise_norm=float(noise.norm()),
            )
        return GradientRelease(gradient=released, cost=PrivacyCost(mu=self.step_mu), diagnostics=info)


def _gaussian(
    size: int,
    std: float,
    generator: torch.Generator | None,
    secure_rng: bool,
    dtype: torch.dtype,
    device: torch.device | None,
    *,
    release_mu: float | None = None,
) -> Tensor:
    r"""``size`` draws of ``N(0, std²)``: the only place privacy noise is sampled.

    ``generator=None`` (the default everywhere) or ``secure_rng`` draws from the operating
    system's entropy (``os_entropy_normal``); a generator is used only when the caller seeded
    one explicitly (tests, reproductions), which ``seeding.noise_generator`` warns about.

    ``release_mu``, the release's per-release GDP parameter ``μ = Δ/std``, is optional: when a
    caller passes it, a finite ``μ > MAX_OS_ENTROPY_RELEASE_MU`` is refused on the OS-entropy
    path before anything is drawn (see ``os_entropy_normal``). A caller that does not pass it
    is not checked. ``std = 0`` (``μ = inf``) returns zeros and draws nothing.
    """
    if std == 0.0:
        return torch.zeros(size, dtype=dtype, device=device)
    if secure_rng or generator is None:
        w = os_entropy_normal(size, dtype=dtype, device=device, release_mu=release_mu)
    elif device is not None and generator.device != torch.device(device):
        # a generator lives on one device: draw there, then move (same numbers everywhere)
        w = torch.randn(size, generator=generator, dtype=dtype, device=generator.device).to(device)
    else:
        w = torch.randn(size, generator=generator, dtype=dtype, device=device)
    return std * w


#: Leading zero bits beyond which the OS-entropy uniforms stop counting: ``u`` is then
#: ``2⁻¹⁰⁷⁴``, the smallest positive float64 (probability ``2⁻¹⁰⁷³`` per draw).
_OS_ENTROPY_MAX_ZEROS = 1072

#: The largest ``|Z|`` that ``os_entropy_normal`` can return, ``−Φ⁻¹(2⁻¹⁰⁷⁴) = 38.4674…``.
OS_ENTROPY_NORMAL_MAX_ABS = 38.467405617144344

#: The largest finite per-release GDP parameter ``μ = Δ/σ`` that ``os_entropy_normal``
#: (and ``_gaussian`` on its OS-entropy path) accepts when told the release's ``μ``:
#: the truncation mass ``Φ̄(38.467 − 26) ≈ 5·10⁻³⁶`` is below ``10⁻³⁰`` (see ``os_entropy_normal``).
MAX_OS_ENTROPY_RELEASE_MU = 26.0

_SIGN_BIT = -(2**63)  # int64 with only bit 63 set
_EXPONENT_BITS = 0x7FF << 52
_LOW_52, _LOW_53 = 2**52 - 1, 2**53 - 1


def _os_entropy_words(count: int) -> Tensor:
    r"""``count`` int64 words of 64 random bits each from ``os.urandom``."""
    if count == 0:
        return torch.zeros(0, dtype=torch.int64)
    return torch.frombuffer(bytearray(os.urandom(8 * count)), dtype=torch.int64)


def _leading_zeros(field: Tensor) -> Tensor:
    r"""Leading zero bits of 53-bit fields (``0 <= field < 2^53``: the float64 conversion is
    exact, so ``frexp`` gives the bit length)."""
    return 53 - torch.frexp(field.to(torch.float64)).exponent.to(torch.int64)


def _half_uniform_from_bits(zeros: Tensor, mantissa: Tensor) -> Tensor:
    r"""``u = 2^{-(k+2)} (1 + m 2^{-52})`` for ``k = zeros`` (``0 <= k <= 1072``) and 52-bit ``m``.

    Built from its bit pattern, so ``u`` is exact for ``k <= 1020`` (normal floats) and
    correctly rounded to the subnormal grid beyond; ``u`` lies in ``[2⁻¹⁰⁷⁴, 1/2)``.
    """
    excess = (zeros - 1020).clamp(min=0)  # binades below the normal range, at most 52
    normal = (((1021 - zeros + excess) << 52) | mantissa).view(torch.float64)
    return normal * ((1023 - excess) << 52).view(torch.float64)


def _half_uniform_from_words(a: Tensor, b: Tensor) -> tuple[Tensor, Tensor]:
    r"""Uniforms on ``(0, 1/2)`` with full float64 precision near 0, and fair sign bits, from
    two random int64 words per draw (see ``_os_entropy_half_uniform``).

    ``a`` gives the 52 mantissa bits ``m`` and, in bit 63, the sign (returned as an int64
    that is 0 or has only bit 63 set). ``b``'s low 53 bits begin a random bit string whose
    count of leading zeros ``k`` has ``P(k) = 2^{-(k+1)}``; ``u = 2^{-(k+2)} (1 + m 2^{-52})``,
    i.e. ``u`` is uniform on ``(0, 1/2)`` rounded down to 52 bits in its binade. When those
    53 bits are all zero (probability ``2⁻⁵³`` per draw), the string goes on with the low 53
    bits of further words from ``_os_entropy_words``, for just those draws, round after
    round, until a one appears or ``k`` reaches 1072 (``u = 2⁻¹⁰⁷⁴``, at most 20 rounds).
    """
    mantissa, sign, head = a & _LOW_52, a & _SIGN_BIT, b & _LOW_53
    # head >= 1 (k = 53 - bitlen(head) <= 52): head's binade, scaled by 2^-54, is u's binade
    u = ((head.to(torch.float64).view(torch.int64) & _EXPONENT_BITS) | mantissa).view(torch.float64) * 2.0**-54
    all_zero = head == 0
    if bool(all_zero.any()):  # probability size·2^-53; otherwise no branch depends on the draws
        index = all_zero.nonzero().reshape(-1)
        zeros = torch.full_like(index, 53)
        still = torch.arange(index.numel())
        while still.numel() > 0:
            more = _os_entropy_words(still.numel()) & _LOW_53
            zeros[still] += _leading_zeros(more)
            still = still[(more == 0) & (zeros[still] < _OS_ENTROPY_MAX_ZEROS)]
        u[index] = _half_uniform_from_bits(zeros.clamp(max=_OS_ENTROPY_MAX_ZEROS), mantissa[index])
    return u, sign


def _os_entropy_half_uniform(size: int) -> tuple[Tensor, Tensor]:
    r"""``size`` float64 uniforms on ``(0, 1/2)``, exact to 52 bits in every binade down to
    ``2⁻¹⁰⁷⁴``, and ``size`` independent fair signs, from ``os.urandom`` (16 bytes per draw).

    Returns ``(u, sign)``; ``sign`` is an int64 tensor, 0 or ``−2⁶³`` (only bit 63 set).
    See ``_half_uniform_from_words`` for the construction. Its branch for the deep draws
    (past 53 zero bits) is the only Python-level branch that depends on the draws, and it is
    taken with probability ``size·2⁻⁵³``. That is why a whole second word starts the zero
    count: starting it in the 11 spare bits of the first would take the branch for 1 draw in
    2048, and its time would tell whether some ``|Z|`` exceeded 3.3. (Element-wise
    floating-point timing is not addressed.)
    """
    words = _os_entropy_words(2 * size).reshape(2, size)
    return _half_uniform_from_words(words[0], words[1])


def os_entropy_normal(
    size: int,
    *,
    dtype: torch.dtype = torch.float64,
    device: torch.device | None = None,
    release_mu: float | None = None,
) -> Tensor:
    r"""``size`` standard normal draws from the operating system's entropy (inverse CDF).

    ``Z = ±Φ⁻¹(u)`` with a random sign and ``u`` uniform on ``(0, 1/2)`` at full float64
    precision down to ``2⁻¹⁰⁷⁴`` (``_os_entropy_half_uniform``: a geometric binade from
    random bits and 52 random mantissa bits); ``Φ⁻¹`` is ``torch.special.ndtri``, accurate
    to a few ulps over that whole range. The draws are as unpredictable as the OS source
    and are not reproducible. The largest possible magnitude is
    ``OS_ENTROPY_NORMAL_MAX_ABS = −Φ⁻¹(2⁻¹⁰⁷⁴) ≈ 38.47``; the exact normal exceeds it with
    probability ``2Φ̄(38.47) ≈ 10⁻³²³``.

    Truncation and the accepted ``μ``: noise bounded by ``z_max = 38.47`` is not exactly
    Gaussian. For a release with per-release GDP parameter ``μ = Δ/σ``, the outputs that a
    neighbour can produce and the data set itself cannot have mass at most
    ``Φ̄(z_max − μ)`` (one coordinate carrying the whole shift is the worst case); more
    generally, the sampler equals an exact normal draw except with probability ``2⁻¹⁰⁷³``
    per coordinate (up to float64 rounding, which this bound does not cover), so a
    ``d``-coordinate release's trade-off curve is within
    ``Φ̄(Φ⁻¹(1 − d·2⁻¹⁰⁷³) − μ) + d·2⁻¹⁰⁷³`` of ``G_μ``. At ``μ ≤ MAX_OS_ENTROPY_RELEASE_MU
    = 26`` both are below ``10⁻³⁰`` (``Φ̄(12.47) ≈ 5·10⁻³⁶``; the second for any
    ``d ≤ 10¹⁶``). A finite ``release_mu`` above 26 therefore raises ``ValueError`` before
    anything is drawn; ``release_mu=None`` (no ``μ`` given) or ``inf`` is not checked.

    Args:
        size: Number of draws.
        dtype: Output dtype (the draws are made in float64).
        device: Output device (the draws are made on the CPU).
        release_mu: The per-release GDP parameter of the release the draws are for.

    Returns:
        A ``size`` tensor of independent ``N(0, 1)`` draws.
    """
    if release_mu is not None:
        release_mu = check_positive(release_mu, "release_mu (per-release μ)")
        if math.isfinite(release_mu) and release_mu > MAX_OS_ENTROPY_RELEASE_MU:
            raise ValueError(
                f"release_mu (per-release μ) = {release_mu!r} exceeds MAX_OS_ENTROPY_RELEASE_MU = "
                f"{MAX_OS_ENTROPY_RELEASE_MU}: the OS-entropy normal sampler's support ends at "
                f"|Z| = {OS_ENTROPY_NORMAL_MAX_ABS:.2f}, so at this μ the truncation mass "
                "Φ̄(z_max − μ) would exceed 1e-30 and the release would not be μ-GDP. "
                "Nothing was drawn."
            )
    return _normal_from_half_uniform(*_os_entropy_half_uniform(size)).to(dtype=dtype, device=device)


def _normal_from_half_uniform(u: Tensor, sign: Tensor) -> Tensor:
    r"""``Φ⁻¹(u)`` (negative for ``u < 1/2``) with its sign flipped where ``sign`` has bit 63 set."""
    return (torch.special.ndtri(u).view(torch.int64) ^ sign).view(torch.float64)


@dataclass
class ScoreRelease:
    r"""Noised scores of ``q`` trials and their cost (each trial ``μ₀``-GDP)."""

    scores: Tensor
    cost: PrivacyCost
    noise_std: float


class GaussianScoreMechanism:
    r"""Score trials by the noised mean of ``[0, C]``-clipped per-user losses.

    ``s_j = (1/n) Σ_i min(max(ℓ_i(θ_j), 0), C) + N(0, (C/(n μ₀))²)``: replacing one user
    moves the clipped mean by at most ``C/n``, so each score is ``μ₀``-GDP. Private random
    search (Papernot & Steinke, 2022) releases the best of a random number of such trials.

    Args:
        loss_clip: ``C > 0``, finite.
        per_trial_mu: ``μ₀ > 0``, finite.
        generator: Source of the noise.
        secure_rng: Draw the noise from the operating system's entropy instead.
    """

    def __init__(
        self,
        *,
        loss_clip: float,
        per_trial_mu: float,
        generator: torch.Generator | None = None,
        secure_rng: bool = False,
    ) -> None:
        self.loss_clip = check_positive(loss_clip, "loss_clip (C)", allow_inf=False)
        self.per_trial_mu = check_positive(per_trial_mu, "per_trial_mu (μ₀)", allow_inf=False)
        self.generator = generator
        self.secure_rng = secure_rng

    def noise_std(self, num_users: int) -> float:
        r"""``C/(n μ₀)``."""
        return gaussian_noise_std_for_mu(self.loss_clip / num_users, self.per_trial_mu)

    def release(self, losses: Tensor, *, meter: Meter | None = None, part: str = "score") -> ScoreRelease:
        r"""Noised clipped-mean scores of the ``q`` rows of a ``q x n`` loss matrix (sensitive).

        With a ``meter``, the ``q`` scores are recorded as ``part``, one
        ``Gaussian(μ₀ √q)`` (their exact composition), just before the noise is drawn."""
        num_users = check_positive_int(losses.shape[-1], "num_users (n)")
        clipped_mean = losses.clamp(min=0.0, max=self.loss_clip).mean(-1)
        std = self.noise_std(num_users)
        composed = self.per_trial_mu * math.sqrt(losses.shape[0])  # the q scores' μ together (per score: μ₀)
        _charged(meter, part, Gaussian(composed), release_mu=composed, generator=self.generator, secure_rng=self.secure_rng)
        noise = _gaussian(losses.shape[0], 1.0, self.generator, self.secure_rng, losses.dtype, losses.device,
                          release_mu=composed)
        return ScoreRelease(
            scores=clipped_mean + std * noise,
            cost=PrivacyCost(mu=self.per_trial_mu, count=losses.shape[0]),
            noise_std=std,
        )


# --- Objective perturbation (AMP, Redberg et al.): training-side releases with an RDP curve. ---
# The imports sit here so that this block can be appended without touching the rest.
import functools  # noqa: E402
from collections.abc import Callable  # noqa: E402

from botorch_dp.privacy.analysis.objective_perturbation import amp_rdp  # noqa: E402
from botorch_dp.privacy.ledger.events import TRAINING_RDP_ORDERS  # noqa: E402
from botorch_dp.privacy.checks import check_greater, check_nonnegative  # noqa: E402


class AMPNotConvergedError(RuntimeError):
    r"""AMP refused to release: ``‖∇L^P(θ̃)‖₂ ≤ τ`` was not verified. Nothing was released.

    The refusal itself says that the solver did not reach the tolerance on this data set
    (one bit about the data); it carries no number computed from the data.
    """


@dataclass(frozen=True)
class RDPCost:
    r"""What a training-side release spent, as a Rényi-DP curve (add/remove one record).

    The release is ``(α, rdp(α))``-RDP for every order ``α > 1``; record it with
    ``PrivacyLedger.record_training_mechanism(run_id, rdp=cost.rdp, description=cost.description)``
    and convert with ``privacy.analysis.rdp`` (``rdp_curve_epsilon`` on ``DEFAULT_RDP_ORDERS``).

    Attributes:
        rdp: ``α ↦ ε(α)``, a pure function of public parameters.
        description: What was released, with its parameters (no data-dependent values).
    """

    rdp: Callable[[float], float]
    description: str


@dataclass
class ObjectivePerturbationRelease:
    r"""AMP's released model and its cost.

    Attributes:
        theta: The ``d`` released parameters ``θ̃ + N(0, σ_out² I)`` (public).
        cost: Its ``RDPCost`` (``amp_rdp`` of the mechanism's parameters).
    """

    theta: Tensor
    cost: RDPCost


class ObjectivePerturbationMechanism:
    r"""The two noise draws of AMP with gradient clipping (Redberg, Koskela & Wang, Alg. 1).

    1. ``perturbation()``: ``b ~ N(0, σ² I_d)``, the linear term ``bᵀθ`` of the perturbed
       objective ``L^P(θ) = Σ_z ℓ_C(θ; z) + (λ/2)‖θ‖² + bᵀθ`` (drawn once).
    2. ``release(θ̃, gradient)``: checks ``‖∇L^P(θ̃)‖₂ ≤ τ`` with the caller's exact float64
       gradient and releases ``θ̃ + N(0, σ_out² I_d)`` (once), or raises
       ``AMPNotConvergedError`` and releases nothing.

    For a GLM loss with per-example gradient norm at most ``C``, smoothness ``β < λ`` and
    add/remove neighbours, the release is ``ε(α)``-RDP with ``ε = amp_rdp(α, clip=C,
    beta=β, lam=λ, sigma=σ, tau=τ, sigma_out=σ_out)`` (Thm. 4.1): ObjPert's curve plus a
    Gaussian of sensitivity ``2τ/λ``. Redrawing ``b`` is a new mechanism, hence the
    draw-once rule.

    Args:
        dim: ``d``, the number of parameters (bias included).
        clip: ``C``, the bound on every per-example gradient norm.
        beta: ``β``, the smoothness of the per-example loss in ``θ``.
        lam: ``λ > β``, the ridge coefficient of the sum objective.
        sigma: ``σ``, the std of ``b``.
        tau: ``τ``, the gradient-norm tolerance of the released minimiser.
        sigma_out: ``σ_out``, the std of the output noise.
        generator: Source of both draws; ``None`` (default): OS entropy. A seeded
            generator makes the noise reproducible (the caller warns, see ``seeding``).
        secure_rng: Draw from OS entropy even if a ``generator`` is given.
    """

    def __init__(
        self,
        *,
        dim: int,
        clip: float,
        beta: float,
        lam: float,
        sigma: float,
        tau: float,
        sigma_out: float,
        generator: torch.Generator | None = None,
        secure_rng: bool = False,
    ) -> None:
        self.dim = check_positive_int(dim, "dim (d)")
        self.clip = check_positive(clip, "clip (C)", allow_inf=False)
        self.beta = check_nonnegative(beta, "beta (β)", allow_inf=False)
        self.lam = check_greater(lam, "lam (λ, must exceed β)", self.beta)
        self.sigma = check_positive(sigma, "sigma (σ)", allow_inf=False)
        self.tau = check_positive(tau, "tau (τ)", allow_inf=False)
        self.sigma_out = check_positive(sigma_out, "sigma_out (σ_out)", allow_inf=False)
        self.generator = generator
        self.secure_rng = secure_rng
        self._perturbation_drawn = False
        self._released = False

    @property
    def cost(self) -> RDPCost:
        r"""The ``RDPCost`` of one release (``amp_rdp`` at this mechanism's parameters)."""
        params = {
            "clip": self.clip, "beta": self.beta, "lam": self.lam, "sigma": self.sigma,
            "tau": self.tau, "sigma_out": self.sigma_out,
        }
        description = "AMP objective perturbation (add/remove one record): " + ", ".join(
            f"{k}={v:.10g}" for k, v in params.items()
        )
        return RDPCost(rdp=functools.partial(amp_rdp, **params), description=description)

    def perturbation(self, *, meter: TrainingMeter | None = None, run_id: object = None) -> Tensor:
        r"""The ``d`` float64 tensor ``b ~ N(0, σ² I_d)``, drawn once per mechanism.

        SENSITIVE: with ``b`` known, ``θ̃`` reveals the data's gradient; it never leaves
        the training routine (except as flagged non-private diagnostics).

        Args:
            meter: The training charge's meter: the whole mechanism (both draws) is recorded
                as training run ``run_id`` just before ``b`` is drawn.
            run_id: The run's id in the meter's bound.
        """
        if self._perturbation_drawn:
            raise RuntimeError("The perturbation b was already drawn; a new b needs a new mechanism (and budget).")
        if meter is not None:
            from botorch_dp.privacy.ledger.events import TrainingMechanism

            cost = self.cost
            meter.record(run_id, TrainingMechanism(cost.description, tuple(cost.rdp(a) for a in TRAINING_RDP_ORDERS)))
        self._perturbation_drawn = True
        return _gaussian(self.dim, self.sigma, self.generator, self.secure_rng, torch.float64, None,
                         release_mu=self.clip / self.sigma)

    def release(self, theta_tilde: Tensor, gradient: Callable[[Tensor], Tensor]) -> ObjectivePerturbationRelease:
        r"""Verify ``‖∇L^P(θ̃)‖₂ ≤ τ``, then release ``θ̃ + N(0, σ_out² I_d)``.

        Args:
            theta_tilde: The ``d`` approximate minimiser ``θ̃`` (sensitive).
            gradient: ``θ ↦ ∇L^P(θ)``, the exact float64 full gradient of the perturbed
                objective built with this mechanism's ``b`` (a ``d`` tensor).

        Returns:
            An ``ObjectivePerturbationRelease`` (float64 CPU ``theta``).

        Raises:
            AMPNotConvergedError: The gradient at ``θ̃`` is not finite or exceeds ``τ``.
        """
        if not self._perturbation_drawn:
            raise RuntimeError("Draw the perturbation b (perturbation()) before releasing.")
        if self._released:
            raise RuntimeError("This mechanism already released its model.")
        theta_tilde = theta_tilde.detach().to(dtype=torch.float64, device="cpu").reshape(-1)
        if theta_tilde.shape[0] != self.dim or not torch.isfinite(theta_tilde).all():
            raise AMPNotConvergedError("θ̃ is not a finite d-vector; nothing was released.")
        grad = gradient(theta_tilde.clone()).detach().to(dtype=torch.float64, device="cpu").reshape(-1)
        if grad.shape[0] != self.dim or not bool(torch.linalg.vector_norm(grad) <= self.tau):
            raise AMPNotConvergedError(
                "The gradient-norm condition ‖∇L^P(θ̃)‖₂ ≤ τ does not hold at θ̃; nothing was released."
            )
        self._released = True
        noise = _gaussian(self.dim, self.sigma_out, self.generator, self.secure_rng, torch.float64, None,
                          release_mu=2.0 * self.tau / (self.lam * self.sigma_out))
        return ObjectivePerturbationRelease(theta=theta_tilde + noise, cost=self.cost)


# --- Adaptive noise and private selection (Menart et al.): releases at an explicit μ or ε. ---
# Appended as one block, like the objective-perturbation block above; the clipped mean is
# ``clipped_mean_gradient`` of this module, never a copy.
from botorch_dp.privacy.analysis.gdp import compose_gdp, pure_dp_to_gdp_mu  # noqa: E402


def os_entropy_uniform(size: int, *, dtype: torch.dtype = torch.float64, device: torch.device | None = None) -> Tensor:
    r"""``size`` uniform draws in the open interval ``(0, 1)`` from the operating system's
    entropy.

    A random half, and in it ``_os_entropy_half_uniform``'s ``u``: the draw is ``u`` (full
    float64 precision down to ``2⁻¹⁰⁷⁴``) or ``1 − u``. Near 1, float64 itself has a step
    of ``2⁻⁵³``, so the upper half is rounded to that grid and capped at ``1 − 2⁻⁵³``.
    That is why the exponential mechanism's Gumbel noise does not go through this
    function: ``−log(−log U)`` of it could not exceed ``36.7`` (see ``os_entropy_gumbel``).
    """
    u, sign = _os_entropy_half_uniform(size)
    draws = torch.where(sign != 0, (1.0 - u).clamp(max=1.0 - 2.0**-53), u)
    return draws.to(dtype=dtype, device=device)


def os_entropy_gumbel(size: int) -> Tensor:
    r"""``size`` float64 Gumbel(0, 1) draws ``G = −log E`` from the operating system's entropy.

    ``E = −log U`` is an Exp(1) draw taken from ``U``'s half directly, without forming
    ``U`` near 1: ``E = −log u`` in the lower half and ``E = −log(1 − u)`` in the upper
    (``u`` from ``_os_entropy_half_uniform``, down to ``2⁻¹⁰⁷⁴``), so both ends of ``E``,
    hence of ``G``, keep full float64 precision. The support is
    ``G ∈ [−log 744.44, 744.44] = [−6.61, 744.44]`` (``744.44 = 1074 ln 2``); 53-bit uniforms
    gave ``[−3.62, 37.43]``.

    Why the support matters (Gumbel-max, ``gumbel_max_index``): with ``G`` confined to an
    interval of width ``W``, a candidate whose log-weight is more than ``W`` below the best
    can never be chosen, while a neighbouring data set (log-weights moved by at most ``ε``)
    may choose it; pure ``ε``-DP then fails. With 53-bit uniforms (``W = 41``) such
    failures had probability of order ``q e^ε 2⁻⁵³`` (``q`` candidates), about ``10⁻¹⁴``
    for ``q = 10`` and ``ε = 1``.
    Here the sampler equals an exact Gumbel draw except with probability ``2⁻¹⁰⁷³`` per
    draw (up to float64 rounding, which this bound does not cover), so the chosen index is
    ``(ε, (1 + e^ε)·q·2⁻¹⁰⁷³)``-DP: ``δ < 10⁻³⁰`` whenever ``ε + ln q ≤ 673``. Nothing is
    refused above that (``gumbel_max_index`` does not see ``ε``); ``ε`` in the hundreds
    makes the selection an argmin anyway.
    """
    return _gumbel_from_half_uniform(*_os_entropy_half_uniform(size))


def _gumbel_from_half_uniform(u: Tensor, sign: Tensor) -> Tensor:
    r"""``−log(−log U)`` for ``U = u`` (``sign`` 0) or ``U = 1 − u`` (``sign`` set), ``u < 1/2``."""
    # −log(1 − u) = u + u²/2 + u³/3 + …: torch's log1p returns 0 for subnormal u, so the
    # series (exact to rounding for u < 2⁻²⁷) stands in for small u
    upper = torch.where(u < 2.0**-27, u + 0.5 * u * u, -torch.log1p(-u))
    return -torch.log(torch.where(sign != 0, upper, -torch.log(u)))


def _gumbel(size: int, generator: torch.Generator | None, secure_rng: bool) -> Tensor:
    r"""``size`` float64 Gumbel(0, 1) draws: the only place selection randomness is drawn
    (OS entropy, ``os_entropy_gumbel``, unless a generator is given, as for ``_gaussian``)."""
    if secure_rng or generator is None:
        return os_entropy_gumbel(size)
    # torch.rand gives multiples of 2^-53 in [0, 1); shifting by half a step keeps 0 and 1 out
    u = torch.rand(size, generator=generator, dtype=torch.float64, device=generator.device).cpu() + 2.0**-54
    return -torch.log(-torch.log(u))


@dataclass(frozen=True)
class PureDPCost:
    r"""What a pure ``ε``-DP release (an exponential mechanism) spent.

    Record it with ``PrivacyLedger.record_validation_pure(epsilon, ...)``; the ledger
    charges it as ``mu = 2Φ⁻¹(e^ε/(1 + e^ε))``-GDP (``analysis.gdp.pure_dp_to_gdp_mu``).

    Attributes:
        epsilon: The pure-DP parameter ``ε > 0``.
    """

    epsilon: float

    @property
    def mu(self) -> float:
        r"""The GDP charge ``2Φ⁻¹(e^ε/(1 + e^ε))`` of this release."""
        return pure_dp_to_gdp_mu(self.epsilon)


@dataclass
class NormRelease:
    r"""One released noisy norm ``N = ‖ḡ‖ + N(0, σ²)`` (public; may be negative).

    Attributes:
        norm: The released value ``N``.
        cost: Its ``PrivacyCost`` (``μ = Δ/σ``, ``Δ = 2B/n``).
        noise_std: ``σ``.
    """

    norm: float
    cost: PrivacyCost
    noise_std: float


class ClippedMean:
    r"""One step's clipped mean ``ḡ = (1/n) Σ_i clip_B(A y_i)``, kept inside, released only noised.

    Made by ``AdaptiveGaussianGradientMechanism.clipped_mean``. It releases at most one
    noisy norm and at most one noisy gradient (a second request raises ``RuntimeError``:
    every release of a step has one ledger key, and recording a key twice would not
    count twice). The caller chooses each release's ``μ`` (e.g. the gradient's from the
    released norm) and checks the budget before asking for it.

    ``ḡ`` is SENSITIVE and is not exposed, except in the NON-PRIVATE diagnostics of a
    gradient release made with ``diagnostics=True``.
    """

    def __init__(
        self,
        mean: Tensor,
        num_clipped: int,
        *,
        sensitivity: float,
        num_users: int,
        generator: torch.Generator | None,
        secure_rng: bool,
    ) -> None:
        self._mean = mean
        self._num_clipped = num_clipped
        self._sensitivity = sensitivity
        self._num_users = num_users
        self._generator = generator
        self._secure_rng = secure_rng
        self._released: set[str] = set()

    @property
    def dim(self) -> int:
        r"""``d``, the dimension of ``ḡ``."""
        return self._mean.shape[0]

    def _claim(self, what: str) -> None:
        if what in self._released:
            raise RuntimeError(f"This step's {what} was already released; a new release needs a new step.")
        self._released.add(what)

    def release_norm(self, mu: float, *, meter: Meter | None = None, part: str = "norm") -> NormRelease:
        r"""Release ``‖ḡ‖ + N(0, (Δ/μ)²)``: replacing one user moves ``‖ḡ‖`` by at most
        ``‖ḡ − ḡ′‖ ≤ Δ = 2B/n``, so the release is ``μ``-GDP.

        Args:
            mu: The release's GDP parameter ``μ > 0`` (``inf``: the exact norm, non-private).
            meter: The charged step's meter (``Gaussian(μ)`` recorded as ``part`` before the draw).
            part: The release's part of its step.

        Returns:
            A ``NormRelease``.
        """
        mu = check_positive(mu, "mu (norm release)")
        self._claim("norm")
        _charged(meter, part, Gaussian(mu), release_mu=mu, generator=self._generator, secure_rng=self._secure_rng)
        std = gaussian_noise_std_for_mu(self._sensitivity, mu)
        noise = _gaussian(1, std, self._generator, self._secure_rng, self._mean.dtype, self._mean.device, release_mu=mu)
        value = float(torch.linalg.vector_norm(self._mean) + noise[0])
        return NormRelease(norm=value, cost=PrivacyCost(mu=mu), noise_std=std)

    def release_gradient(
        self, mu: float, *, diagnostics: bool = False, meter: Meter | None = None, part: str = "grad"
    ) -> GradientRelease:
        r"""Release ``ḡ + N(0, (Δ/μ)² I_d)`` (``μ``-GDP, ``Δ = 2B/n``).

        Args:
            mu: The release's GDP parameter ``μ > 0`` (``inf``: no noise, non-private).
            diagnostics: Also return NON-PRIVATE diagnostics.
            meter: The charged step's meter (``Gaussian(μ)`` recorded as ``part`` before the draw).
            part: The release's part of its step.

        Returns:
            A ``GradientRelease`` whose cost is ``μ``.
        """
        mu = check_positive(mu, "mu (gradient release)")
        self._claim("gradient")
        _charged(meter, part, Gaussian(mu), release_mu=mu, generator=self._generator, secure_rng=self._secure_rng)
        std = gaussian_noise_std_for_mu(self._sensitivity, mu)
        noise = _gaussian(self.dim, std, self._generator, self._secure_rng, self._mean.dtype, self._mean.device,
                          release_mu=mu)
        info = None
        if diagnostics:
            info = ReleaseDiagnostics(
                unnoised_gradient=self._mean.detach().clone(),
                clip_fraction=self._num_clipped / self._num_users,
                noise_norm=float(noise.norm()),
            )
        return GradientRelease(gradient=(self._mean + noise).detach(), cost=PrivacyCost(mu=mu), diagnostics=info)


class AdaptiveGaussianGradientMechanism:
    r"""Gradient releases whose noise is chosen per release (Menart et al.'s adaptive noise).

    Unlike ``GaussianGradientMechanism`` (one ``σ = 2B√T/(nμ)`` for all ``T`` steps),
    each release here is made at an explicit GDP parameter ``μ_t`` and noised with
    ``σ_t = Δ/μ_t``, ``Δ = 2B/n``; its cost is that realised ``μ_t``, never a value
    computed before ``σ_t`` is known. Per step, ``clipped_mean(A, Y)`` forms
    ``ḡ = (1/n) Σ clip_B(A y_i)`` once (``clipped_mean_gradient``), and the returned
    ``ClippedMean`` releases a noisy norm and a noisy gradient of it. Adaptively chosen
    ``μ_t`` compose to ``√Σμ_t²`` as long as a filter keeps that sum within the budget
    (Smith & Thakurta 2022); the filter is the caller's (``PrivacyLedger.check_validation_step``
    before every release, and ``optim.noise_schedule``).

    Args:
        clip_bound: ``B``, the per-user clipping norm.
        num_users: ``n``, the (public) number of users.
        generator: Source of the noise (``None``: OS entropy).
        secure_rng: Draw from OS entropy even if a ``generator`` is given.
        chunk_size: Users per chunk when forming ``A Y`` (passed to ``clipped_mean_gradient``;
            ``None`` where that function chooses it).
    """

    def __init__(
        self,
        *,
        clip_bound: float,
        num_users: int,
        generator: torch.Generator | None = None,
        secure_rng: bool = False,
        chunk_size: int | None = 4096,
    ) -> None:
        self.clip_bound = check_positive(clip_bound, "clip_bound (B)", allow_inf=False)
        self.num_users = check_positive_int(num_users, "num_users (n)")
        self.generator = generator
        self.secure_rng = secure_rng
        self.chunk_size = None if chunk_size is None else check_positive_int(chunk_size, "chunk_size (user_chunk_size)")

    @property
    def sensitivity(self) -> float:
        r"""Replace-one L2 sensitivity ``Δ = 2B/n`` of ``ḡ`` (and of ``‖ḡ‖``)."""
        return 2.0 * self.clip_bound / self.num_users

    def noise_std(self, mu: float) -> float:
        r"""``σ = Δ/μ``, the noise of a ``μ``-GDP release (0 for ``μ = inf``)."""
        return gaussian_noise_std_for_mu(self.sensitivity, mu)

    def clipped_mean(
        self, A: Tensor, Y: Tensor | Sequence[Tensor], *, nonfinite: NonfiniteLosses = "refuse"
    ) -> ClippedMean:
        r"""Form this step's ``ḡ`` (nothing is released yet).

        Args:
            A: A ``d x N`` tensor ``∇k(θ, D) K⁻¹`` (public).
            Y: An ``N x n`` tensor of per-user losses at ``D`` (sensitive), or its row
                blocks (see ``clipped_mean_gradient``).
            nonfinite: ``"refuse"`` (default) or ``"zero_user"``; see ``clipped_mean_gradient``.

        Returns:
            A ``ClippedMean`` that releases the noisy norm and gradient.
        """
        n = Y.shape[-1] if isinstance(Y, Tensor) else Y[0].shape[-1]
        if n != self.num_users:
            raise ValueError(f"Expected {self.num_users} users, got {n}.")
        mean, num_clipped = clipped_mean_gradient(A, Y, self.clip_bound, self.chunk_size, nonfinite=nonfinite)
        return ClippedMean(
            mean, num_clipped, sensitivity=self.sensitivity, num_users=self.num_users,
            generator=self.generator, secure_rng=self.secure_rng,
        )


# --- Adaptive clipping (Andrew et al. 2021): a noisy count of the users below the clip bound. ---


@dataclass
class ClipCountRelease:
    r"""One released noisy count of the users whose gradient estimate is within the clip bound.

    Attributes:
        count: ``b̃ = #{i : ‖A y_i‖ ≤ B} + N(0, σ²)`` (public; may be negative or above ``n``).
        cost: Its ``PrivacyCost`` (``μ = 1/σ``: the count's sensitivity is 1).
        noise_std: ``σ``.
    """

    count: float
    cost: PrivacyCost
    noise_std: float


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
        parts = [b[:, start : start + chunk_size] for b in blocks]
        bad = torch.zeros(parts[0].shape[-1], dtype=torch.bool, device=A.device)
        for Y_t in parts:
            bad |= Y_t.isfinite().all(0).logical_not_()
        parts = _without_nonfinite_users(parts, bad, nonfinite)
        norms = _column_norms(_product(A_parts, parts))  # NaN or inf when a product overflowed
        count += int((norms <= clip_bound).sum())  # NaN compares False: above B
    return count


class GaussianClipCountMechanism:
    r"""Release the number of users whose gradient estimate ``A y_i`` has norm at most ``B``,
    plus Gaussian noise: the private quantile signal of adaptive clipping (Andrew et al. 2021,
    "Differentially private learning with adaptive clipping").

    Replacing one user changes the count by at most 1, so ``count + N(0, 1/μ²)`` is
    ``μ``-GDP. The caller turns the noisy fraction ``b̃/n`` into the next bound
    (``optim.adaptive_clip``); that is post-processing.

    Args:
        num_users: ``n``, the (public) number of users.
        generator: Source of the noise (``None``: OS entropy).
        secure_rng: Draw from OS entropy even if a ``generator`` is given.
        chunk_size: Users per chunk when forming ``A Y`` (``None``: ``default_chunk_size``).
    """

    #: Replace-one sensitivity of the count.
    sensitivity = 1.0

    def __init__(
        self,
        *,
        num_users: int,
        generator: torch.Generator | None = None,
        secure_rng: bool = False,
        chunk_size: int | None = None,
    ) -> None:
        self.num_users = check_positive_int(num_users, "num_users (n)")
        self.generator = generator
        self.secure_rng = secure_rng
        self.chunk_size = None if chunk_size is None else check_positive_int(chunk_size, "chunk_size (user_chunk_size)")

    def noise_std(self, mu: float) -> float:
        r"""``σ = 1/μ`` (0 for ``μ = inf``)."""
        return gaussian_noise_std_for_mu(self.sensitivity, mu)

    def release(
        self,
        A: Tensor,
        Y: Tensor | Sequence[Tensor],
        clip_bound: float,
        mu: float,
        *,
        nonfinite: NonfiniteLosses = "refuse",
        meter: Meter | None = None,
        part: str = "clip",
    ) -> ClipCountRelease:
        r"""Release ``#{i : ‖A y_i‖ ≤ B} + N(0, (1/μ)²)``.

        Args:
            A: A ``d x N`` tensor ``∇k(θ, D) K⁻¹`` (public).
            Y: An ``N x n`` tensor of per-user losses (sensitive), or its row blocks.
            clip_bound: ``B > 0``, the bound the count is taken at (public).
            mu: The release's GDP parameter ``μ > 0`` (``inf``: the exact count, non-private).
            nonfinite: ``"refuse"`` (default) or ``"zero_user"``; see ``count_within_clip``.
            meter: The charged step's meter (``Gaussian(μ)`` recorded as ``part`` before the draw).
            part: The release's part of its step.

        Returns:
            A ``ClipCountRelease``.
        """
        clip_bound = check_positive(clip_bound, "clip_bound (B)", allow_inf=False)
        mu = check_positive(mu, "mu (clip count release)")
        n = Y.shape[-1] if isinstance(Y, Tensor) else Y[0].shape[-1]
        if n != self.num_users:
            raise ValueError(f"Expected {self.num_users} users, got {n}.")
        count = count_within_clip(A, Y, clip_bound, self.chunk_size, nonfinite=nonfinite)
        std = self.noise_std(mu)
        _charged(meter, part, Gaussian(mu), release_mu=mu, generator=self.generator, secure_rng=self.secure_rng)
        noise = _gaussian(1, std, self.generator, self.secure_rng, torch.float64, None, release_mu=mu)
        return ClipCountRelease(count=float(count + noise[0]), cost=PrivacyCost(mu=mu), noise_std=std)


def _checked_losses(losses: Tensor, nonfinite: NonfiniteLosses) -> Tensor:
    r"""A float64 copy of a ``q x n`` loss matrix (SENSITIVE) with its non-finite entries
    refused (``"refuse"``) or set to 0 (``"zero_user"``: that user's term of that score is
    0, which keeps every clamped score's sensitivity at ``C/n``)."""
    if not isinstance(losses, Tensor) or losses.dim() != 2 or losses.shape[0] < 1 or losses.shape[1] < 1:
        shape = tuple(losses.shape) if isinstance(losses, Tensor) else type(losses).__name__
        raise ValueError(f"losses must be a q x n tensor with q, n >= 1, got {shape}.")
    losses = losses.detach().to(torch.float64)
    bad = ~torch.isfinite(losses)
    if bad.any():
        if nonfinite != "zero_user":
            raise ValueError(
                "The losses contain non-finite values (NaN or inf); nothing was released. "
                "This refusal reveals that some user's loss was not finite."
            )
        losses = losses.masked_fill(bad, 0.0)
    return losses


def exponential_mechanism_log_probabilities(scores: Tensor, *, epsilon: float, sensitivity: float) -> Tensor:
    r"""``log P(j) = −ε u_j/(2Δ) − log Σ_k exp(−ε u_k/(2Δ))``: the exponential mechanism
    that prefers LOW scores ``u`` of sensitivity ``Δ`` (``ε``-DP).

    Args:
        scores: A ``batch_shape x q`` tensor of scores ``u_j``.
        epsilon: ``ε > 0``.
        sensitivity: ``Δ > 0``, the most one user can move any ``u_j``.

    Returns:
        A ``batch_shape x q`` float64 tensor of log-probabilities (over the last dimension).
    """
    epsilon = check_positive(epsilon, "epsilon (ε)", allow_inf=False)
    sensitivity = check_positive(sensitivity, "sensitivity (Δ)", allow_inf=False)
    logits = -epsilon * scores.to(torch.float64) / (2.0 * sensitivity)
    return logits - torch.logsumexp(logits, dim=-1, keepdim=True)


def gumbel_max_index(
    log_weights: Tensor, *, generator: torch.Generator | None = None, secure_rng: bool = False
) -> int:
    r"""A sample from ``P(j) ∝ exp(log_weights_j)`` by the Gumbel-max trick:
    ``argmax_j (log_weights_j + G_j)`` with ``G_j = −log(−log U_j)`` i.i.d. Gumbel(0, 1).

    Args:
        log_weights: A ``q`` tensor of finite unnormalised log-probabilities.
        generator: Source of the uniforms (``None``: OS entropy).
        secure_rng: Draw from OS entropy even if a ``generator`` is given.

    Returns:
        The sampled index ``j`` (a Python ``int``).
    """
    log_weights = log_weights.detach().to(device="cpu", dtype=torch.float64).reshape(-1)
    if log_weights.numel() == 0 or not torch.isfinite(log_weights).all():
        raise ValueError("log_weights must be a non-empty tensor of finite values.")
    gumbel = _gumbel(log_weights.numel(), generator, secure_rng)
    return int(torch.argmax(log_weights + gumbel))


@dataclass
class SelectionRelease:
    r"""A privately chosen candidate (an iterate) and the cost of choosing it.

    Attributes:
        index: The chosen candidate ``j`` (public).
        cost: ``PureDPCost`` (exponential mechanism) or ``PrivacyCost`` (noisy losses:
            ``count`` scores of ``mu`` each).
        scores: The released noisy scores (noisy losses only; ``None`` otherwise).
    """

    index: int
    cost: PureDPCost | PrivacyCost
    scores: Tensor | None = None

    @property
    def mu(self) -> float:
        r"""The release's total GDP charge (``pure_dp_to_gdp_mu(ε)``, or ``√count · mu``)."""
        if isinstance(self.cost, PureDPCost):
            return self.cost.mu
        return compose_gdp([self.cost.mu] * self.cost.count)


class ExponentialLossSelection:
    r"""Choose a candidate of low mean loss with the exponential mechanism (``ε``-DP).

    Scores ``u_j = (1/n) Σ_i clamp(ℓ_i(θ_j), 0, C)`` (sensitivity ``Δ = C/n`` under
    replace-one); the candidate is drawn with ``P(j) ∝ exp(−ε u_j/(2Δ))`` by Gumbel-max
    (Menart et al., Thm. 5, with the user's ``ε`` instead of the paper's temperature, E3.10).
    Only the index leaves; its cost is ``PureDPCost(ε)``.

    Args:
        epsilon: ``ε > 0``, finite.
        loss_clip: ``C > 0``, finite.
        generator: Source of the Gumbel noise (``None``: OS entropy).
        secure_rng: Draw from OS entropy even if a ``generator`` is given.
    """

    def __init__(
        self, *, epsilon: float, loss_clip: float, generator: torch.Generator | None = None, secure_rng: bool = False
    ) -> None:
        self.epsilon = check_positive(epsilon, "epsilon (ε, selection)", allow_inf=False)
        self.loss_clip = check_positive(loss_clip, "loss_clip (C)", allow_inf=False)
        self.generator = generator
        self.secure_rng = secure_rng

    def release(
        self, losses: Tensor, *, nonfinite: NonfiniteLosses = "refuse", meter: Meter | None = None,
        part: str = "select",
    ) -> SelectionRelease:
        r"""Choose one of ``q`` candidates from their ``q x n`` per-user losses (sensitive)
        (with a ``meter``, ``PureDP(ε)`` is recorded as ``part`` before the Gumbel draws)."""
        losses = _checked_losses(losses, nonfinite)
        scores = losses.clamp(min=0.0, max=self.loss_clip).mean(-1)  # sensitivity C/n each
        log_p = exponential_mechanism_log_probabilities(
            scores, epsilon=self.epsilon, sensitivity=self.loss_clip / losses.shape[-1]
        )
        _charged(meter, part, PureDP(self.epsilon))
        index = gumbel_max_index(log_p, generator=self.generator, secure_rng=self.secure_rng)
        return SelectionRelease(index=index, cost=PureDPCost(self.epsilon))


class NoisyLossSelection:
    r"""Choose the candidate with the smallest noisy mean loss (Gaussian, ``μ``-GDP in total).

    Releases ``s_j = (1/n) Σ_i clamp(ℓ_i(θ_j), 0, C) + N(0, σ²)`` for all ``q``
    candidates with ``σ = √q · (C/n)/μ`` (``GaussianScoreMechanism`` at ``μ₀ = μ/√q`` per
    score, ``μ`` in total by exact composition), and returns ``argmin_j s_j`` with the scores.

    Args:
        total_mu: ``μ > 0``, finite: the GDP charge of all ``q`` scores together.
        loss_clip: ``C > 0``, finite.
        generator: Source of the noise (``None``: OS entropy).
        secure_rng: Draw from OS entropy even if a ``generator`` is given.
    """

    def __init__(
        self, *, total_mu: float, loss_clip: float, generator: torch.Generator | None = None, secure_rng: bool = False
    ) -> None:
        self.total_mu = check_positive(total_mu, "total_mu (μ, selection)", allow_inf=False)
        self.loss_clip = check_positive(loss_clip, "loss_clip (C)", allow_inf=False)
        self.generator = generator
        self.secure_rng = secure_rng

    def noise_std(self, num_candidates: int, num_users: int) -> float:
        r"""``σ = √q · (C/n)/μ``."""
        return gaussian_noise_std_for_mu(self.loss_clip / num_users, self.total_mu, num_candidates)

    def release(
        self, losses: Tensor, *, nonfinite: NonfiniteLosses = "refuse", meter: Meter | None = None,
        part: str = "select",
    ) -> SelectionRelease:
        r"""Noisy scores of ``q`` candidates from their ``q x n`` per-user losses (sensitive),
        and the index of the smallest (with a ``meter``, ``Gaussian(μ)`` is recorded as
        ``part`` before the draw)."""
        losses = _checked_losses(losses, nonfinite)
        q = losses.shape[0]
        per_score_mu = self.total_mu / math.sqrt(q)
        _charged(meter, part, Gaussian(self.total_mu), release_mu=self.total_mu, generator=self.generator,
                 secure_rng=self.secure_rng)
        scored = GaussianScoreMechanism(
            loss_clip=self.loss_clip, per_trial_mu=per_score_mu, generator=self.generator, secure_rng=self.secure_rng
        ).release(losses)
        return SelectionRelease(index=int(torch.argmin(scored.scores)), cost=scored.cost, scores=scored.scores.detach())


# --- Private AdaGrad preconditioner (Kairouz et al., spec A3, errata E2.1–E2.4): GOE noise. ---
def gram_sqrt(X: Tensor) -> Tensor:
    r"""``G = (X Xᵀ)^{1/2} = |Xᵀ|`` of a ``k x t`` matrix, from its thin SVD ``X = U S Wᵀ``.

    ``G = U S Uᵀ``, symmetrised. The SVD route is exact where an eigendecomposition of the
    near-singular ``X Xᵀ`` is not (spec E2.1: ``eigh``-based roots gave spurious
    sensitivity ratios above ``√2``).

    Args:
        X: A ``k x t`` tensor (``t ≥ 0``).

    Returns:
        The symmetric PSD ``k x k`` tensor ``G``.
    """
    if X.shape[-1] == 0:
        return X.new_zeros(X.shape[-2], X.shape[-2])
    U, S, _ = torch.linalg.svd(X, full_matrices=False)
    G = (U * S.unsqueeze(-2)) @ U.transpose(-1, -2)
    return (G + G.transpose(-1, -2)) / 2


def _goe(
    k: int, std: float, generator: torch.Generator | None, secure_rng: bool, dtype: torch.dtype,
    device: torch.device | None, *, release_mu: float | None = None,
) -> Tensor:
    r"""``std · M`` with ``M = (Z + Zᵀ)/√2``, ``Z`` a ``k x k`` matrix of iid ``N(0, 1)``
    (all zeros, and no draw, when ``std = 0``)."""
    Z = _gaussian(k * k, std, generator, secure_rng, dtype, device, release_mu=release_mu).reshape(k, k)
    return (Z + Z.transpose(0, 1)) / math.sqrt(2.0)


def sample_goe(
    k: int,
    *,
    generator: torch.Generator | None = None,
    secure_rng: bool = False,
    dtype: torch.dtype = torch.float64,
    device: torch.device | None = None,
) -> Tensor:
    r"""One ``k x k`` draw ``M ~ GOE_k``: symmetric, diagonal ``N(0, 2)``, off-diagonal ``N(0, 1)``.

    Its density is ``∝ exp(−‖M‖_F²/4)``: an isotropic Gaussian with variance 2 along every
    Frobenius-unit direction of the symmetric matrices (spec E2.3), so ``E‖M‖_F² = k(k+1)``
    and ``‖M‖_op ≈ 2√k`` for large ``k``.
    """
    return _goe(check_positive_int(k, "k"), 1.0, generator, secure_rng, dtype, device)


@dataclass
class PreconditionerRelease:
    r"""One released preconditioner ``Ĝ_t = G_t + σ_B(t) M`` and its cost.

    Attributes:
        matrix: The symmetric ``k x k`` release (public; may be indefinite).
        cost: Its ``PrivacyCost`` (``μ_H/√T``-GDP).
        noise_std: ``σ_B(t)`` (public; sets the eigenvalue floor ``2√k σ_B(t)``).
    """

    matrix: Tensor
    cost: PrivacyCost
    noise_std: float


class GOEPreconditionerMechanism:
    r"""Release full-matrix AdaGrad's preconditioner ``G_t = (X_t X_tᵀ)^{1/2}`` with GOE noise.

    ``X_t = [ū_1 … ū_t]`` (``k x t``) holds the clean clipped-mean gradients of the first
    ``t`` steps (in a fixed basis), each with replace-one sensitivity ``Δ = 2B/n``. Then
    ``‖X_t − X_t′‖_F ≤ √t Δ`` and, by the Araki–Yamagami inequality
    ``‖|A| − |B|‖_F ≤ √2 ‖A − B‖_F``, ``‖G_t − G_t′‖_F ≤ √(2t) Δ`` (spec E2.1; the seed
    paper's ``L√t/n`` is too small by ``√2``, which the rank-one example attains). GOE noise
    ``σ_B M`` is isotropic with std ``√2 σ_B`` in the Frobenius geometry of symmetric
    matrices (E2.3), so the release is ``(√t Δ/σ_B)``-GDP; with
    ``σ_B(t) = √(tT) Δ/μ_H`` every one of the ``T`` releases costs ``μ_H/√T`` and all of
    them ``μ_H``.

    Args:
        sensitivity: ``Δ``, the replace-one L2 sensitivity of each column (``2B/n``).
        privacy_mu: ``μ_H``, the GDP budget of all ``T`` releases (``inf``: no noise).
        num_steps: ``T``.
        generator: Source of the noise (``None``: OS entropy).
        secure_rng: Draw from OS entropy even if a ``generator`` is given.
    """

    def __init__(
        self,
        *,
        sensitivity: float,
        privacy_mu: float,
        num_steps: int,
        generator: torch.Generator | None = None,
        secure_rng: bool = False,
    ) -> None:
        self.sensitivity = check_positive(sensitivity, "sensitivity (Δ)", allow_inf=False)
        self.privacy_mu = check_positive(privacy_mu, "privacy_mu (μ_H)")
        self.num_steps = check_positive_int(num_steps, "num_steps (T)")
        self.generator = generator
        self.secure_rng = secure_rng

    def frobenius_sensitivity(self, t: int) -> float:
        r"""``√(2t) Δ``, the Frobenius sensitivity of ``G_t`` (E2.1)."""
        return math.sqrt(2.0 * t) * self.sensitivity

    def noise_std(self, t: int) -> float:
        r"""``σ_B(t) = √(tT) Δ/μ_H`` (0 when ``μ_H = inf``)."""
        return gaussian_noise_std_for_mu(math.sqrt(t) * self.sensitivity, self.privacy_mu, self.num_steps)

    @property
    def step_mu(self) -> float:
        r"""GDP parameter ``μ_H/√T`` of one release."""
        return self.privacy_mu / math.sqrt(self.num_steps)

    def release(self, columns: Tensor, *, meter: Meter | None = None, part: str = "precond") -> PreconditionerRelease:
        r"""Release ``G_t + σ_B(t) M`` for the SENSITIVE ``k x t`` matrix of clean columns.

        Args:
            columns: ``X_t = [ū_1 … ū_t]``, ``k x t`` with ``1 ≤ t ≤ T``, finite; each column
                a clipped mean of sensitivity ``Δ`` (the caller's contract).
            meter: The charged step's meter (``Gaussian(μ_H/√T)`` recorded as ``part`` before the draw).
            part: The release's part of its step.

        Returns:
            The ``PreconditionerRelease``.
        """
        if not isinstance(columns, Tensor) or columns.dim() != 2 or columns.shape[0] < 1:
            raise ValueError("columns must be a k x t tensor with k >= 1.")
        k, t = columns.shape
        if not 1 <= t <= self.num_steps:
            raise ValueError(f"columns must have 1 <= t <= T = {self.num_steps} columns, got {t}.")
        if not torch.isfinite(columns).all():
            raise ValueError("The preconditioner's columns are not finite; nothing was released.")
        G = gram_sqrt(columns.detach())
        std = self.noise_std(t)
        _charged(meter, part, Gaussian(self.step_mu), release_mu=self.step_mu, generator=self.generator,
                 secure_rng=self.secure_rng)
        noise = _goe(k, std, self.generator, self.secure_rng, G.dtype, G.device, release_mu=self.step_mu)
        return PreconditionerRelease(matrix=(G + noise).detach(), cost=PrivacyCost(mu=self.step_mu), noise_std=std)


# --- Partitioned users (issue 17): partial sums formed where the users' data lives. ---
# A partition forms ``Σ_{i in P} clip_B(A y_i)`` with the clipping above (``_clipped_sum``,
# never a copy); the driver adds the partitions' sums in a fixed order and draws the noise
# here. Appended as one block, like the blocks above.
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


def release_partial_sums(
    mechanism: GaussianGradientMechanism,
    partials: Sequence[ClippedPartialSum],
    *,
    diagnostics: bool = False,
    meter: Meter | None = None,
    part: str = "grad",
) -> GradientRelease:
    r"""Release ``(1/n) Σ_P s_P + N(0, σ² I)`` from the partitions' partial sums ``s_P``.

    The sums are added in the order given (a fixed order: the release does not depend on
    which partition finished first); then exactly as ``GaussianGradientMechanism.release``
    (same division by ``n``, same noise draw, same cost). Each ``s_P`` is checked first, so
    a broken or tampered partition is refused before anything is released: a finite
    ``d``-vector of norm at most ``n_P B`` (a sum of ``n_P`` vectors clipped to ``B``), and
    the ``n_P`` add up to the mechanism's ``n``.

    Args:
        mechanism: The run's ``GaussianGradientMechanism`` (its ``n``, ``B``, ``σ``, noise source).
        partials: One ``ClippedPartialSum`` per partition, in partition order.
        diagnostics: Also return NON-PRIVATE diagnostics.
        meter: The charged step's meter (``Gaussian(μ/√T)`` recorded as ``part`` before the draw).
        part: The release's part of its step.

    Returns:
        A ``GradientRelease`` (cost ``μ/√T``).
    """
    if len(partials) == 0:
        raise ValueError("partials: no partial sums were given; nothing was released.")
    d = partials[0].total.shape[-1] if isinstance(partials[0].total, Tensor) else None
    for p, partial in enumerate(partials):
        s = partial.total
        if not isinstance(s, Tensor) or s.dim() != 1 or s.shape[0] != d or not bool(torch.isfinite(s).all()):
            raise ValueError(f"partials[{p}]: the partial sum must be a finite d-vector (d = {d}); nothing was released.")
        if float(torch.linalg.vector_norm(s)) > partial.num_users * mechanism.clip_bound * (1.0 + 1e-9):
            raise ValueError(
                f"partials[{p}]: the partial sum's norm exceeds n_P·B, so it is not a sum of clipped "
                "estimates; nothing was released."
            )
    total_users = sum(int(partial.num_users) for partial in partials)
    if total_users != mechanism.num_users:
        raise ValueError(
            f"partials: the partitions hold {total_users} users, the mechanism expects n = {mechanism.num_users}; "
            "nothing was released."
        )
    total = partials[0].total.new_zeros(d)
    for partial in partials:  # fixed order
        total = total + partial.total
    mean = total / mechanism.num_users
    _charged(meter, part, Gaussian(mechanism.step_mu), release_mu=mechanism.step_mu, generator=mechanism.generator,
             secure_rng=mechanism.secure_rng)
    noise = mechanism.sample_noise(d, dtype=mean.dtype, device=mean.device)
    info = None
    if diagnostics:
        info = ReleaseDiagnostics(
            unnoised_gradient=mean.detach().clone(),
            clip_fraction=sum(partial.num_clipped for partial in partials) / mechanism.num_users,
            noise_norm=float(noise.norm()),
        )
    return GradientRelease(gradient=(mean + noise).detach(), cost=PrivacyCost(mu=mechanism.step_mu), diagnostics=info)
