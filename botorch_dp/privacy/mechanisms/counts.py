r"""Adaptive clipping's noisy count of the users whose gradient estimate lies within the clip
bound (Andrew et al. 2021; sensitivity 1)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from botorch_dp.privacy.analysis.gdp import gaussian_noise_std_for_mu
from botorch_dp.privacy.checks import check_positive, check_positive_int
from botorch_dp.privacy.ledger.events import Gaussian
from botorch_dp.privacy.ledger.meter import Meter
from botorch_dp.privacy.mechanisms import _noise
from botorch_dp.privacy.mechanisms._clipping import NonfiniteLosses, count_within_clip
from botorch_dp.privacy.mechanisms.releases import PrivacyCost


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


class GaussianClipCountMechanism:
    r"""Release the number of users whose gradient estimate ``A y_i`` has norm at most ``B``,
    plus Gaussian noise: the private quantile signal of adaptive clipping (Andrew et al. 2021,
    "Differentially private learning with adaptive clipping").

    Replacing one user changes the count by at most 1, so ``count + N(0, 1/μ²)`` is
    ``μ``-GDP. The caller turns the noisy fraction ``b̃/n`` into the next bound
    (``optim.options.clip``); that is post-processing.

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
        return self.release_count(count, mu, meter=meter, part=part)

    def release_count(
        self, count: int, mu: float, *, meter: Meter | None = None, part: str = "clip"
    ) -> ClipCountRelease:
        r"""Release ``count + N(0, (1/μ)²)`` for a count of users within the bound (SENSITIVE),
        e.g. ``ClippedSum.within`` from the gradient's own pass.

        Args:
            count: ``#{i : ‖A y_i‖ ≤ B}``, an integer in ``[0, n]``.
            mu: The release's GDP parameter ``μ > 0``.
            meter: The charged step's meter (``Gaussian(μ)`` recorded as ``part`` before the draw).
            part: The release's part of its step.

        Returns:
            A ``ClipCountRelease``.
        """
        mu = check_positive(mu, "mu (clip count release)")
        if isinstance(count, bool) or not isinstance(count, int) or not 0 <= count <= self.num_users:
            raise ValueError(f"count must be an integer in [0, n = {self.num_users}]; nothing was released.")
        std = self.noise_std(mu)
        _noise.record_charge(meter, part, Gaussian(mu))
        host = torch.device("cpu")  # one integer count: no data device to follow
        released, _ = _noise.release_gaussian(
            torch.tensor([float(count)], dtype=torch.float64, device=host),
            sensitivity=self.sensitivity,
            mu=mu,
            generator=self.generator,
            secure_rng=self.secure_rng,
            magnitude_bound=float(self.num_users),
        )
        return ClipCountRelease(count=float(released[0]), cost=PrivacyCost(mu=mu), noise_std=std)
