r"""The privacy boundary of DP-GIBO: per-user gradients are clipped, averaged and noised here.

Nothing computed from per-user losses leaves this module except the noised average
(and, only when explicitly requested, clearly labelled non-private diagnostics).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

import torch
from torch import Tensor

from botorch_dp.privacy.validation import check_dp_gibo_parameters


def check_losses(losses: Tensor, num_points: int, num_users: int | None = None) -> None:
    r"""Reject malformed per-user losses before anything is computed from them.

    Args:
        losses: A ``q x n`` tensor of per-user losses at ``q`` points.
        num_points: The expected ``q``.
        num_users: The expected ``n`` (``None`` accepts any ``n ≥ 1``).

    Raises:
        ValueError: With a message naming the problem (shape, number of users,
            non-finite entries and where they are).
    """
    if not isinstance(losses, Tensor):
        raise ValueError(f"losses must be a torch.Tensor, got {type(losses).__name__}.")
    if losses.dim() != 2 or losses.shape[0] != num_points:
        raise ValueError(
            f"losses must be a (num_points x num_users) = ({num_points} x n) tensor, "
            f"got shape {tuple(losses.shape)}."
        )
    if losses.shape[1] < 1:
        raise ValueError("losses must have at least one user (n >= 1).")
    if num_users is not None and losses.shape[1] != num_users:
        raise ValueError(
            f"losses have {losses.shape[1]} users, earlier evaluations had {num_users}; "
            "the number of users must stay fixed."
        )
    if not losses.is_floating_point():
        raise ValueError(f"losses must be floating point, got {losses.dtype}.")
    bad = ~torch.isfinite(losses)
    if bad.any():
        rows = sorted(set(bad.nonzero()[:, 0].tolist()))
        raise ValueError(
            f"losses contain {int(bad.sum())} non-finite values (NaN or inf) at point(s) "
            f"{rows}; nothing was released. Fix the objective and tell these points again."
        )


def clip_rows(G: Tensor, clip_bound: float) -> tuple[Tensor, Tensor]:
    r"""Clip each row to Euclidean norm at most ``B``: ``ĝ_i = g_i · min(1, B/‖g_i‖)``.

    Args:
        G: An ``n x d`` tensor of per-user gradients.
        clip_bound: ``B > 0``.

    Returns:
        The ``n x d`` clipped rows and an ``n`` boolean tensor marking clipped rows.
    """
    norms = G.norm(dim=-1, keepdim=True)
    factor = (clip_bound / norms.clamp_min(torch.finfo(G.dtype).tiny)).clamp(max=1.0)
    return G * factor, (norms.squeeze(-1) > clip_bound)


def clipped_mean_gradient(
    A: Tensor, Y: Tensor, clip_bound: float, chunk_size: int = 4096
) -> tuple[Tensor, int]:
    r"""``ḡ = (1/n) Σ_i clip(A y_i)``, computed in chunks of users.

    ``A = ∇k(θ, D) K⁻¹`` is shared by all users, so each chunk costs one ``d x N`` by
    ``N x chunk`` product. Replacing one user's losses moves ``ḡ`` by at most ``2B/n``.

    Args:
        A: A ``d x N`` tensor of gradient weights.
        Y: An ``N x n`` tensor of per-user losses at the points of ``D`` (sensitive).
        clip_bound: ``B > 0``.
        chunk_size: Users per chunk; bounds the memory at ``d x chunk_size``.

    Returns:
        The ``d`` tensor ``ḡ`` (sensitive: not yet noised) and the number of clipped users.
    """
    n = Y.shape[-1]
    total = A.new_zeros(A.shape[0])
    num_clipped = 0
    for start in range(0, n, chunk_size):
        G = (A @ Y[:, start : start + chunk_size]).transpose(0, 1)  # chunk x d
        clipped, was_clipped = clip_rows(G, clip_bound)
        total = total + clipped.sum(0)
        num_clipped += int(was_clipped.sum())
    return total / n, num_clipped


def gaussian_noise_std(*, clip_bound: float, num_users: int, privacy_mu: float, num_steps: int) -> float:
    r"""Noise standard deviation ``2B√T / (nμ)`` making each of ``T`` steps ``μ/√T``-GDP.

    The replace-one sensitivity of ``ḡ`` is ``2B/n``; Gaussian noise with standard
    deviation ``(2B/n)/(μ/√T)`` is ``μ/√T``-GDP, and ``T`` such steps compose to ``μ``-GDP
    (seed 000, Thm 3.1). ``privacy_mu = inf`` gives 0 (non-private GIBO).
    """
    clip_bound, privacy_mu, num_steps, num_users = check_dp_gibo_parameters(
        clip_bound=clip_bound, privacy_mu=privacy_mu, num_steps=num_steps, num_users=num_users
    )
    if math.isinf(privacy_mu):
        return 0.0
    return 2.0 * clip_bound * math.sqrt(num_steps) / (num_users * privacy_mu)


@dataclass
class GradientRelease:
    r"""One privatized gradient and, only if requested, non-private diagnostics.

    Attributes:
        gradient: The ``d`` released gradient ``ḡ + noise`` (public).
        diagnostics: ``None`` unless requested; then a dict of NON-PRIVATE values
            (``unnoised_gradient``, ``clip_fraction``, ``noise_norm``).
    """

    gradient: Tensor
    diagnostics: dict | None = None


class GaussianGradientMechanism:
    r"""Clip per-user gradient estimates, average them, add Gaussian noise.

    Args:
        clip_bound: ``B``, the per-user clipping norm.
        num_users: ``n``, the (public) number of users.
        privacy_mu: ``μ``, the total GDP budget of the ``T`` releases (``inf``: no noise).
        num_steps: ``T``, the number of releases the budget is split over.
        generator: Source of the noise; its state is part of the loop's checkpoint.
        secure_rng: Draw the noise from the operating system's entropy
            (``random.SystemRandom``) instead of ``generator``; runs are then not
            reproducible.
        chunk_size: Users per chunk when forming ``A Y``.
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
        chunk_size: int = 4096,
    ) -> None:
        clip_bound, privacy_mu, num_steps, num_users = check_dp_gibo_parameters(
            clip_bound=clip_bound, privacy_mu=privacy_mu, num_steps=num_steps, num_users=num_users
        )
        self.clip_bound = clip_bound
        self.num_users = num_users
        self.privacy_mu = privacy_mu
        self.num_steps = num_steps
        self.generator = generator
        self.secure_rng = secure_rng
        self.chunk_size = chunk_size
        self.noise_std = gaussian_noise_std(
            clip_bound=clip_bound, num_users=num_users, privacy_mu=privacy_mu, num_steps=num_steps
        )

    @property
    def step_mu(self) -> float:
        r"""GDP parameter ``μ/√T`` of one release."""
        return self.privacy_mu / math.sqrt(self.num_steps)

    def sample_noise(self, d: int, dtype: torch.dtype = torch.float64) -> Tensor:
        r"""A ``d`` tensor ``N(0, noise_std² I)``."""
        if self.noise_std == 0.0:
            return torch.zeros(d, dtype=dtype)
        if self.secure_rng:
            rng = random.SystemRandom()
            w = torch.tensor([rng.gauss(0.0, 1.0) for _ in range(d)], dtype=dtype)
        else:
            w = torch.randn(d, generator=self.generator, dtype=dtype)
        return self.noise_std * w

    def release(self, A: Tensor, Y: Tensor, *, diagnostics: bool = False) -> GradientRelease:
        r"""Privatize the average clipped per-user gradient ``(1/n) Σ clip(A y_i)``.

        Args:
            A: A ``d x N`` tensor ``∇k(θ, D) K⁻¹`` (public: depends on ``D`` and ``θ``).
            Y: An ``N x n`` tensor of per-user losses at ``D`` (sensitive).
            diagnostics: Also return NON-PRIVATE diagnostics.

        Returns:
            A ``GradientRelease``.
        """
        if Y.shape[-1] != self.num_users:
            raise ValueError(f"Expected {self.num_users} users, got {Y.shape[-1]}.")
        mean, num_clipped = clipped_mean_gradient(A, Y, self.clip_bound, self.chunk_size)
        noise = self.sample_noise(mean.shape[0], dtype=mean.dtype)
        released = (mean + noise).detach()
        info = None
        if diagnostics:
            info = {
                "unnoised_gradient": mean.detach().clone(),
                "clip_fraction": num_clipped / self.num_users,
                "noise_norm": float(noise.norm()),
            }
        return GradientRelease(gradient=released, diagnostics=info)
