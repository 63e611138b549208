r"""Gradient releases: ``GaussianGradientMechanism`` (DP-GIBO's and noisy GD's, ``σ = 2B√T/(nμ)``),
the per-release ``AdaptiveGaussianGradientMechanism`` and its ``ClippedMean`` (a noisy norm,
then a gradient at a chosen μ; Menart et al.), and the release of partitions' partial sums.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor

from botorch_dp.privacy.analysis.gdp import gaussian_noise_std_for_mu
from botorch_dp.privacy.checks import check_positive, check_positive_int
from botorch_dp.privacy.ledger.events import Gaussian
from botorch_dp.privacy.ledger.meter import Meter
from botorch_dp.privacy.mechanisms import _noise
from botorch_dp.privacy.mechanisms._clipping import NonfiniteLosses, clipped_mean_gradient
from botorch_dp.privacy.mechanisms.releases import GradientRelease, NormRelease, PrivacyCost, ReleaseDiagnostics
from botorch_dp.privacy.mechanisms.sums import ClippedPartialSum, ClippedSum, clipped_sum, combine_partial_sums


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
        r"""Noise standard deviation per coordinate, ``2B√T/(nμ)`` (0 when ``μ = inf``): the
        continuous-equivalent ``σ₀``; the discrete Gaussian drawn (``_noise.release_gaussian``) has
        scale ``γ s``, larger by a relative ``2^-20 (1 + √d/μ_t)`` or so."""
        return gaussian_noise_std_for_mu(self.sensitivity, self.privacy_mu, self.num_steps)

    @property
    def noise_multiplier(self) -> float:
        r"""``noise_std`` over the sensitivity, ``√T/μ`` (Opacus's convention; 0: no noise)."""
        return gaussian_noise_std_for_mu(1.0, self.privacy_mu, self.num_steps)

    @property
    def step_mu(self) -> float:
        r"""GDP parameter ``μ/√T`` of one release."""
        return self.privacy_mu / math.sqrt(self.num_steps)

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
        summed = clipped_sum(A, Y, self.clip_bound, self.chunk_size, nonfinite=nonfinite)
        return self.release_sum(summed, diagnostics=diagnostics, meter=meter, part=part)

    def release_sum(
        self, summed: ClippedSum, *, diagnostics: bool = False, meter: Meter | None = None, part: str = "grad"
    ) -> GradientRelease:
        r"""Privatize ``(1/n) Σ_i clip_B(W y_i)`` from its ``ClippedSum`` (in process or from partitions).

        Args:
            summed: The users' clipped sum at this mechanism's ``B`` over its ``n`` users (SENSITIVE).
            diagnostics: Also return NON-PRIVATE diagnostics.
            meter: The charged step's meter: ``Gaussian(μ/√T)`` is recorded as ``part`` just
                before the noise is drawn.
            part: The release's part of its step.

        Returns:
            A ``GradientRelease``.
        """
        if summed.num_users != self.num_users or summed.bound != self.clip_bound:
            raise ValueError(
                f"The clipped sum covers n = {summed.num_users} users at B = {summed.bound}; the mechanism's are "
                f"n = {self.num_users}, B = {self.clip_bound}."
            )
        mean, num_clipped = summed.mean(), summed.num_clipped
        _noise.record_charge(meter, part, Gaussian(self.step_mu))
        released, _ = _noise.release_gaussian(
            mean,
            sensitivity=self.sensitivity,
            mu=self.step_mu,
            generator=self.generator,
            secure_rng=self.secure_rng,
            magnitude_bound=self.clip_bound,
        )
        info = None
        if diagnostics:
            info = ReleaseDiagnostics(
                unnoised_gradient=mean.detach().clone(),
                clip_fraction=num_clipped / self.num_users,
                noise_norm=float((released - mean).norm()),
            )
        return GradientRelease(gradient=released, cost=PrivacyCost(mu=self.step_mu), diagnostics=info)


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
        self._clip_bound = sensitivity * num_users / 2.0  # ‖ḡ‖ ≤ B = Δn/2: the grid's public magnitude bound
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
        _noise.record_charge(meter, part, Gaussian(mu))
        released, _ = _noise.release_gaussian(
            torch.linalg.vector_norm(self._mean).reshape(1),
            sensitivity=self._sensitivity,
            mu=mu,
            generator=self._generator,
            secure_rng=self._secure_rng,
            magnitude_bound=self._clip_bound,
        )
        std = gaussian_noise_std_for_mu(self._sensitivity, mu)
        return NormRelease(norm=float(released[0]), cost=PrivacyCost(mu=mu), noise_std=std)

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
        _noise.record_charge(meter, part, Gaussian(mu))
        released, _ = _noise.release_gaussian(
            self._mean,
            sensitivity=self._sensitivity,
            mu=mu,
            generator=self._generator,
            secure_rng=self._secure_rng,
            magnitude_bound=self._clip_bound,
        )
        info = None
        if diagnostics:
            info = ReleaseDiagnostics(
                unnoised_gradient=self._mean.detach().clone(),
                clip_fraction=self._num_clipped / self._num_users,
                noise_norm=float((released - self._mean).norm()),
            )
        return GradientRelease(gradient=released.detach(), cost=PrivacyCost(mu=mu), diagnostics=info)


class AdaptiveGaussianGradientMechanism:
    r"""Gradient releases whose noise is chosen per release (Menart et al.'s adaptive noise).

    Unlike ``GaussianGradientMechanism`` (one ``σ = 2B√T/(nμ)`` for all ``T`` steps),
    each release here is made at an explicit GDP parameter ``μ_t`` and noised with
    ``σ_t = Δ/μ_t``, ``Δ = 2B/n``; its cost is that realised ``μ_t``, never a value
    computed before ``σ_t`` is known. Per step, ``clipped_mean(A, Y)`` forms
    ``ḡ = (1/n) Σ clip_B(A y_i)`` once (``clipped_mean_gradient``), and the returned
    ``ClippedMean`` releases a noisy norm and a noisy gradient of it. Adaptively chosen
    ``μ_t`` compose to ``√Σμ_t²`` as long as a filter keeps that sum within the budget
    (Smith & Thakurta 2022); the filter is the caller's (``ledger.external.check``
    before every release, and ``optim.options.noise``).

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

    def clipped_mean_of(self, summed: ClippedSum) -> ClippedMean:
        r"""This step's ``ḡ`` from the users' ``ClippedSum`` at ``summed.bound`` (nothing is released
        yet); the releases' sensitivity is ``2 summed.bound/n``, so a moving bound (adaptive
        clipping) moves it with it."""
        if summed.num_users != self.num_users:
            raise ValueError(f"Expected {self.num_users} users, got {summed.num_users}.")
        return ClippedMean(
            summed.mean(),
            summed.num_clipped,
            sensitivity=2.0 * summed.bound / self.num_users,
            num_users=self.num_users,
            generator=self.generator,
            secure_rng=self.secure_rng,
        )

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
            mean,
            num_clipped,
            sensitivity=self.sensitivity,
            num_users=self.num_users,
            generator=self.generator,
            secure_rng=self.secure_rng,
        )


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
    summed = combine_partial_sums(partials, mechanism.clip_bound, mechanism.num_users)
    return mechanism.release_sum(summed, diagnostics=diagnostics, meter=meter, part=part)
