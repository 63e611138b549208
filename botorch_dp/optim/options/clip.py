r"""Clip policies: the bound ``B_t`` each step clips the per-user estimates at.

``ClipPolicy`` is the family's protocol: what ``Options`` and the loop call of a clip policy.
``FixedClip(B)`` clips every step at ``B``, or at the bound a wrapping policy keeps in the
``ClipState`` (as TF Privacy's adaptive query keeps its sum query's clip in that query's state).
``QuantileClip`` (Andrew et al. 2021, "Differentially private learning with adaptive clipping";
``optim.adaptive_clip``) wraps a ``FixedClip`` and moves its bound each step: the step's clipped
sum comes with the number of users within ``B_t`` from the same pass (``ClippedSum.within``),
that count is released with Gaussian noise (``μ_C/√T``-GDP, part ``"clip"``), and
``B_{t+1} = B_t exp(−η_C(b̃_t/n − γ))`` is post-processing. Nothing else in the loop knows the
bound moves: the noise schedule reads ``Δ_t = 2B_t/n`` off the sum.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

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
from botorch_dp.optim.options.registry import Strategy, StrategyLike, register
from botorch_dp.optim.users import Users
from botorch_dp.privacy.checks import check_positive, check_probability
from botorch_dp.privacy.ledger import Gaussian, Meter
from botorch_dp.privacy.mechanisms import GaussianClipCountMechanism
from botorch_dp.privacy.mechanisms.sums import ClippedSum

__all__ = ["ClipPolicy", "ClipState", "FixedClip", "QuantileClip"]


@dataclass(frozen=True)
class ClipState:
    r"""A moving bound's public record: ``B_0..B_t`` and the released counts ``b̃_0..b̃_{t−1}``
    (both empty for a fixed bound)."""

    bounds: tuple[float, ...] = ()
    counts: tuple[float, ...] = ()


class ClipPolicy(StrategyLike, Protocol):
    r"""A clip policy: the bound ``B_t`` each step clips the users' estimates at, and what it
    releases to move it. Its public record is a ``ClipState`` (``bounds``: ``B_0..B_t`` when the
    bound moves, empty otherwise; ``counts``: what it released).

    A policy that releases something (``bound_parts`` not empty) declares its share of the
    steps' budget in ``mu_fraction`` (``BudgetSplit.clip_fraction``) and records each release
    through ``meter`` in ``update``; the ``ClippedSum`` is SENSITIVE and is read only there."""

    @property
    def mu_fraction(self) -> float | None:
        r"""``f_C``, the releases' share of ``μ_steps²`` (``None``: it releases nothing)."""
        ...

    def initial_state(self) -> ClipState:
        r"""The record before the first step."""
        ...

    def current(self, state: ClipState) -> float:
        r"""``B_t``, the bound of the step that starts from ``state`` (public)."""
        ...

    def bound_parts(self, plan: RunPlan) -> dict[str, Gaussian]:
        r"""What one step's ``update`` may release, at its largest cost (before any draw)."""
        ...

    def aggregate(self, users: Users, W: Tensor, state: ClipState) -> ClippedSum:
        r"""The users' clipped sum of ``W y_i`` at ``current(state)`` (one pass; SENSITIVE)."""
        ...

    def update(self, summed: ClippedSum, plan: RunPlan, state: ClipState, meter: Meter) -> ClipState:
        r"""The record after the step: its releases from ``summed``, each recorded through ``meter``."""
        ...

    def record(self, state: ClipState) -> ClipState:
        r"""What a release carries of the policy (``PrivateRelease.records["clip"]``), public."""
        ...


@register("clip", "fixed")
@dataclass(frozen=True)
class FixedClip(Strategy):
    r"""Clip every step's estimates at ``bound`` (``B > 0``, finite), or at the latest bound in the
    state when a policy that wraps this one moves it (``QuantileClip``); it releases nothing."""

    bound: float = 1.0
    #: One bound for the whole run (what the private preconditioner needs); a wrapper that moves
    #: the bound does not pass it on.
    can_provide = frozenset({"fixed_clip_bound"})

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
        r"""The bound of the next step: the state's latest (a wrapping policy's), else ``bound``."""
        return state.bounds[-1] if state.bounds else self.bound

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
class QuantileClip(Strategy):
    r"""The bound tracks a private ``γ``-quantile of the estimates' norms (Andrew et al. 2021).

    It wraps ``base``, a ``FixedClip(B₀)`` that makes the clipped sums at the bound this policy
    keeps in the state; the policy adds the count each step releases and the move of the bound.

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
    base: FixedClip = field(init=False, repr=False, compare=False)
    needs_finite_mu = "spends part of a privacy budget on the clip counts"

    def __post_init__(self) -> None:
        object.__setattr__(self, "bound", check_positive(self.bound, "clip_init (B₀)", allow_inf=False))
        object.__setattr__(self, "quantile", check_probability(self.quantile, "clip_quantile (γ)"))
        object.__setattr__(
            self, "learning_rate", check_positive(self.learning_rate, "clip_learning_rate (η_C)", allow_inf=False)
        )
        object.__setattr__(self, "fraction", check_probability(self.fraction, "clip_mu_fraction (f_C)"))
        object.__setattr__(self, "base", FixedClip(self.bound))

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
        return ClipState(bounds=(self.base.current(self.base.initial_state()),))

    def current(self, state: ClipState) -> float:
        return self.base.current(state)

    def aggregate(self, users: Users, W: Tensor, state: ClipState) -> ClippedSum:
        r"""The base's clipped sum at ``B_t`` (the state's latest bound), with its count ``within``."""
        return self.base.aggregate(users, W, state)

    def count_mu(self, plan: RunPlan) -> float:
        r"""``μ_C/√T_max``: one count's GDP parameter (at most ``T_max`` counts compose to ``μ_C``)."""
        clip_mu = plan.split.clip_mu
        if clip_mu is None:  # a split made by Options.split from this strategy has clip_fraction = self.fraction
            raise ValueError(f"Adaptive clipping needs a BudgetSplit with a clip_fraction, got {plan.split!r}.")
        return clip_mu / math.sqrt(plan.iteration_cap)

    def bound_parts(self, plan: RunPlan) -> dict[str, Gaussian]:
        return {**self.base.bound_parts(plan), CLIP_KEY: Gaussian(self.count_mu(plan))}

    def update(self, summed: ClippedSum, plan: RunPlan, state: ClipState, meter: Meter) -> ClipState:
        r"""The base's update (nothing), then release the count of users within ``B_t`` (from the
        sum's own pass) and move to ``B_{t+1}``."""
        state = self.base.update(summed, plan, state, meter)
        counter = GaussianClipCountMechanism(
            num_users=plan.num_users, generator=plan.generator, chunk_size=plan.chunk_size
        )
        count = counter.release_count(summed.within, self.count_mu(plan), meter=meter, part=CLIP_KEY)
        bound = next_clip_bound(state.bounds[-1], count.count, plan.num_users, self.quantile, self.learning_rate)
        return replace(state, bounds=(*state.bounds, bound), counts=(*state.counts, count.count))

    def record(self, state: ClipState) -> ClipState:
        r"""The bounds ``B_0..B_t`` and the released counts (public)."""
        return state
