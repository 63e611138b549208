r"""Clip policies: the bound ``B_t`` each step clips the per-user estimates at.

``FixedClip(B)`` clips every step at ``B``. ``QuantileClip`` (Andrew et al. 2021, "Differentially
private learning with adaptive clipping"; ``optim.adaptive_clip``) wraps the fixed policy
and moves its bound each step: the step's clipped sum comes with the number of users within
``B_t`` from the same pass (``ClippedSum.within``), that count is released with Gaussian
noise (``μ_C/√T``-GDP, part ``"clip"``), and ``B_{t+1} = B_t exp(−η_C(b̃_t/n − γ))`` is
post-processing. Nothing else in the loop knows the bound moves: the noise schedule reads
``Δ_t = 2B_t/n`` off the sum.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from torch import Tensor

from botorch_dp.optim.adaptive_clip import (
    CLIP_KEY,
    DEFAULT_CLIP_INIT,
    DEFAULT_CLIP_LEARNING_RATE,
    DEFAULT_CLIP_MU_FRACTION,
    DEFAULT_CLIP_QUANTILE,
    next_clip_bound,
)
from botorch_dp.optim.options.base import RunPlan
from botorch_dp.optim.options.registry import Strategy, register
from botorch_dp.optim.users import Users
from botorch_dp.privacy.checks import check_positive, check_probability
from botorch_dp.privacy.ledger import Gaussian, Meter
from botorch_dp.privacy.mechanisms import GaussianClipCountMechanism
from botorch_dp.privacy.mechanisms.sums import ClippedSum

__all__ = ["ClipState", "FixedClip", "QuantileClip"]


@dataclass(frozen=True)
class ClipState:
    r"""A moving bound's public record: ``B_0..B_t`` and the released counts ``b̃_0..b̃_{t−1}``
    (both empty for a fixed bound)."""

    bounds: tuple[float, ...] = ()
    counts: tuple[float, ...] = ()


@register("clip", "fixed")
@dataclass(frozen=True)
class FixedClip(Strategy):
    r"""Clip every step's estimates at ``bound`` (``B > 0``, finite)."""

    bound: float = 1.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "bound", check_positive(self.bound, "clip_bound (B)", allow_inf=False))

    def spec(self) -> dict[str, Any]:
        return {"kind": self.name, "bound": self.bound}

    @property
    def mu_fraction(self) -> float | None:
        r"""The counts' share of the steps' budget (none)."""
        return None

    def initial_state(self) -> ClipState:
        return ClipState()

    def current(self, state: ClipState) -> float:
        r"""The bound of the next step."""
        return self.bound

    def bound_parts(self, plan: RunPlan) -> dict[str, Gaussian]:
        return {}

    def aggregate(self, users: Users, W: Tensor, state: ClipState) -> ClippedSum:
        r"""The users' clipped sum at this step's bound (one pass)."""
        return users.clipped_sum(W, self.current(state))

    def update(self, summed: ClippedSum, plan: RunPlan, state: ClipState, meter: Meter) -> ClipState:
        return state

    def record(self, state: ClipState) -> ClipState:
        r"""What a release carries of the policy (``PrivateRelease.records["clip"]``): the bounds
        ``B_0..B_t`` and the released counts, all public (empty for a fixed bound)."""
        return state


@register("clip", "adaptive")
@dataclass(frozen=True)
class QuantileClip(FixedClip):
    r"""The bound tracks a private ``γ``-quantile of the estimates' norms (Andrew et al. 2021).

    Args:
        bound: ``B₀ > 0``, the first step's bound (a public choice, e.g. from ``botorch_dp.plan``).
        quantile: ``γ`` in ``(0, 1)``.
        learning_rate: ``η_C > 0`` of the geometric update.
        fraction: ``f_C`` in ``(0, 1)``: the counts spend ``μ_C = μ_steps√f_C`` in all.
    """

    bound: float = DEFAULT_CLIP_INIT
    quantile: float = DEFAULT_CLIP_QUANTILE
    learning_rate: float = DEFAULT_CLIP_LEARNING_RATE
    fraction: float = DEFAULT_CLIP_MU_FRACTION
    needs_finite_mu = "spends part of a privacy budget on the clip counts"

    def __post_init__(self) -> None:
        object.__setattr__(self, "bound", check_positive(self.bound, "clip_init (B₀)", allow_inf=False))
        object.__setattr__(self, "quantile", check_probability(self.quantile, "clip_quantile (γ)"))
        object.__setattr__(
            self, "learning_rate", check_positive(self.learning_rate, "clip_learning_rate (η_C)", allow_inf=False)
        )
        object.__setattr__(self, "fraction", check_probability(self.fraction, "clip_mu_fraction (f_C)"))

    def spec(self) -> dict[str, Any]:
        return {
            "kind": self.name,
            "bound": self.bound,
            "quantile": self.quantile,
            "learning_rate": self.learning_rate,
            "fraction": self.fraction,
        }

    @property
    def mu_fraction(self) -> float | None:
        return self.fraction

    def initial_state(self) -> ClipState:
        return ClipState(bounds=(self.bound,))

    def current(self, state: ClipState) -> float:
        return state.bounds[-1]

    def count_mu(self, plan: RunPlan) -> float:
        r"""``μ_C/√T_max``: one count's GDP parameter (at most ``T_max`` counts compose to ``μ_C``)."""
        clip_mu = plan.split.clip_mu
        if clip_mu is None:  # a split made by Options.split from this strategy has clip_fraction = self.fraction
            raise ValueError(f"Adaptive clipping needs a BudgetSplit with a clip_fraction, got {plan.split!r}.")
        return clip_mu / math.sqrt(plan.iteration_cap)

    def bound_parts(self, plan: RunPlan) -> dict[str, Gaussian]:
        return {CLIP_KEY: Gaussian(self.count_mu(plan))}

    def update(self, summed: ClippedSum, plan: RunPlan, state: ClipState, meter: Meter) -> ClipState:
        r"""Release the count of users within ``B_t`` (from the sum's own pass), then ``B_{t+1}``."""
        counter = GaussianClipCountMechanism(
            num_users=plan.num_users, generator=plan.generator, chunk_size=plan.chunk_size
        )
        count = counter.release_count(summed.within, self.count_mu(plan), meter=meter, part=CLIP_KEY)
        bound = next_clip_bound(state.bounds[-1], count.count, plan.num_users, self.quantile, self.learning_rate)
        return replace(state, bounds=(*state.bounds, bound), counts=(*state.counts, count.count))
