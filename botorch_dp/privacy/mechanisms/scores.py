r"""Releases of clamped mean losses: private random search's trial scores
(``GaussianScoreMechanism``), and the choice of an iterate by the exponential mechanism
(``ExponentialLossSelection``, Gumbel-max) or by Gaussian noisy losses (``NoisyLossSelection``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from botorch_dp.privacy.analysis.gdp import compose_gdp, gaussian_noise_std_for_mu
from botorch_dp.privacy.checks import check_positive, check_positive_int
from botorch_dp.privacy.ledger.events import Gaussian, PureDP
from botorch_dp.privacy.ledger.meter import Meter
from botorch_dp.privacy.mechanisms import _noise
from botorch_dp.privacy.mechanisms._clipping import NonfiniteLosses
from botorch_dp.privacy.mechanisms.releases import PrivacyCost, PureDPCost


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
        return self.release_means(clipped_mean, num_users, meter=meter, part=part)

    def release_means(
        self, means: Tensor, num_users: int, *, meter: Meter | None = None, part: str = "score"
    ) -> ScoreRelease:
        r"""Noised scores from the ``q`` clamped mean losses (SENSITIVE) over ``num_users`` users."""
        std = self.noise_std(num_users)
        composed = self.per_trial_mu * math.sqrt(means.shape[0])  # the q scores' μ together (per score: μ₀)
        _noise.record_charge(meter, part, Gaussian(composed))
        scores, _ = _noise.release_gaussian(
            means,
            sensitivity=self.loss_clip / num_users,
            mu=self.per_trial_mu,
            generator=self.generator,
            secure_rng=self.secure_rng,
            per_coordinate=True,
            magnitude_bound=self.loss_clip,
        )
        return ScoreRelease(scores=scores, cost=PrivacyCost(mu=self.per_trial_mu, count=means.shape[0]), noise_std=std)


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


def gumbel_max_index(log_weights: Tensor, *, generator: torch.Generator | None = None, secure_rng: bool = False) -> int:
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
    gumbel = _noise.draw_gumbel(log_weights.numel(), generator, secure_rng)
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
        self, losses: Tensor, *, nonfinite: NonfiniteLosses = "refuse", meter: Meter | None = None, part: str = "select"
    ) -> SelectionRelease:
        r"""Choose one of ``q`` candidates from their ``q x n`` per-user losses (sensitive)
        (with a ``meter``, ``PureDP(ε)`` is recorded as ``part`` before the Gumbel draws)."""
        losses = _checked_losses(losses, nonfinite)
        sums = losses.clamp(min=0.0, max=self.loss_clip).sum(-1)
        return self.release_sums(sums, losses.shape[-1], meter=meter, part=part)

    def release_sums(
        self, sums: Tensor, num_users: int, *, meter: Meter | None = None, part: str = "select"
    ) -> SelectionRelease:
        r"""Choose one of ``q`` candidates from their clamped loss sums ``Σ_i clamp(ℓ_i, 0, C)``
        (SENSITIVE; in process or added from partitions) over ``num_users`` users."""
        num_users = check_positive_int(num_users, "num_users (n)")
        scores = sums.detach().to(torch.float64) / num_users  # sensitivity C/n each
        log_p = exponential_mechanism_log_probabilities(
            scores, epsilon=self.epsilon, sensitivity=self.loss_clip / num_users
        )
        _noise.record_charge(meter, part, PureDP(self.epsilon))
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
        self, losses: Tensor, *, nonfinite: NonfiniteLosses = "refuse", meter: Meter | None = None, part: str = "select"
    ) -> SelectionRelease:
        r"""Noisy scores of ``q`` candidates from their ``q x n`` per-user losses (sensitive),
        and the index of the smallest (with a ``meter``, ``Gaussian(μ)`` is recorded as
        ``part`` before the draw)."""
        losses = _checked_losses(losses, nonfinite)
        sums = losses.clamp(min=0.0, max=self.loss_clip).sum(-1)
        return self.release_sums(sums, losses.shape[-1], meter=meter, part=part)

    def release_sums(
        self, sums: Tensor, num_users: int, *, meter: Meter | None = None, part: str = "select"
    ) -> SelectionRelease:
        r"""Noisy scores of ``q`` candidates from their clamped loss sums (SENSITIVE; in process or
        added from partitions) over ``num_users`` users, and the index of the smallest."""
        q = sums.shape[0]
        per_score_mu = self.total_mu / math.sqrt(q)
        _noise.record_charge(meter, part, Gaussian(self.total_mu))
        scored = GaussianScoreMechanism(
            loss_clip=self.loss_clip, per_trial_mu=per_score_mu, generator=self.generator, secure_rng=self.secure_rng
        ).release_means(sums.detach().to(torch.float64) / num_users, num_users)
        return SelectionRelease(index=int(torch.argmin(scored.scores)), cost=scored.cost, scores=scored.scores.detach())
