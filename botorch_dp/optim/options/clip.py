r"""Clip policies: the bound ``B_t`` each step clips the per-user estimates at, and their arithmetic.

``FixedClip(B)`` clips every step at ``B``, or at the bound a wrapping policy keeps in the
``ClipState`` (as TF Privacy's adaptive query keeps its sum query's clip). ``QuantileClip``
(``clip="adaptive"``; Andrew, Thakkar, McMahan & Ramaswamy 2021) wraps a ``FixedClip`` and moves
its bound each step towards a private ``γ``-quantile of the norms ``‖A y_i‖``; nothing else in
the loop knows the bound moves (the noise schedule reads ``Δ_t = 2B_t/n`` off the sum). At step
``t`` it makes, from one pass over the users, the gradient release at ``B_t`` (``μ_g/√T``-GDP
whatever ``B_t`` is, as the noise scales with the bound) and the count
``b̃_t = #{i : ‖g_i‖ ≤ B_t} + N(0, (√T/μ_C)²)`` (sensitivity 1, part ``"clip"``); the next bound
``B_{t+1} = B_t · exp(−η_C (b̃_t/n − γ))`` is post-processing. With ``μ_C = μ_steps √f_C`` and
``μ_g = μ_steps √(1 − f_C)`` the ``2T`` releases compose to ``μ_steps``.

It moves every step, not only the first ones, because the norms change along the run (``θ_t``
moves and ``A = ∇k(θ, D)K⁻¹`` changes as points are added); the price is ``f_C`` of the budget
(default 0.1: the gradient noise grows by ``1/√0.9 ≈ 1.054``). Runs are short, so take ``B₀``
within a factor of a few of the quantile (``botorch_dp.plan`` on a public proxy), or raise ``η_C``.
A checkpoint stores a moving bound's ``ClipState`` and resume recomputes the bounds from the
released counts (``ReplayedClip``), each of which must be in the ledger.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, runtime_checkable

from torch import Tensor

from botorch_dp.optim.options.base import RunPlan
from botorch_dp.optim.options.records import (
    ClipState,
    ResumeContext,
    RunRecords,
    compact,
    floats_from_json,
    floats_to_json,
    payload_entries,
)
from botorch_dp.optim.options.registry import Strategy, StrategyLike, register
from botorch_dp.optim.users import Users
from botorch_dp.privacy.checks import check_positive, check_probability
from botorch_dp.privacy.ledger import Gaussian, Meter, release_key
from botorch_dp.privacy.mechanisms import GaussianClipCountMechanism
from botorch_dp.privacy.mechanisms.sums import ClippedSum

__all__ = [
    "CLIP_KEY",
    "DEFAULT_CLIP_INIT",
    "DEFAULT_CLIP_LEARNING_RATE",
    "DEFAULT_CLIP_MU_FRACTION",
    "DEFAULT_CLIP_QUANTILE",
    "ClipPolicy",
    "ClipState",
    "FixedClip",
    "QuantileClip",
    "ReplayedClip",
    "SavedClipState",
    "WrappedClip",
    "clip_state_json",
    "next_clip_bound",
    "replay_bounds",
    "restore_clip_state",
]


#: ``B₀`` when none is given.
DEFAULT_CLIP_INIT = 1.0
#: ``γ``, the target quantile (Andrew et al.'s default, the median).
DEFAULT_CLIP_QUANTILE = 0.5
#: ``η_C`` of the geometric update (Andrew et al.'s default).
DEFAULT_CLIP_LEARNING_RATE = 0.2
#: ``f_C``, the share of ``μ_steps²`` spent on the counts.
DEFAULT_CLIP_MU_FRACTION = 0.1
#: Ledger key suffix of a step's count release: ``step-0003/clip`` (the gradient: ``step-0003/grad``).
CLIP_KEY = "clip"


def next_clip_bound(bound: float, noisy_count: float, num_users: int, quantile: float, learning_rate: float) -> float:
    r"""``B · exp(−η_C (b̃/n − γ))``: the geometric update (Andrew et al. 2021, Alg. 1), public
    arithmetic on the released ``b̃`` (``noisy_count``). ``b̃/n`` may lie outside ``[0, 1]``; it is
    used as released (clamping would bias the update)."""
    return bound * math.exp(-learning_rate * (noisy_count / num_users - quantile))


def replay_bounds(
    start: float, counts: Sequence[float], num_users: int | None, move: Callable[[float, float, int], float]
) -> list[float]:
    r"""``[B_0, …, B_t]``: ``B_0 = start`` moved once per released count ``b̃_i`` by ``move(B_i, b̃_i, n)``
    (public arithmetic; what resume compares a checkpoint's bounds with, bit for bit)."""
    bounds = [start]
    if len(counts) == 0:
        return bounds
    if num_users is None:
        raise ValueError(f"Replaying {len(counts)} clip counts needs num_users (n), got None.")
    for count in counts:
        bounds.append(move(bounds[-1], count, num_users))
    return bounds


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

    @property
    def mu_fraction(self) -> float | None:
        return None

    def initial_state(self) -> ClipState:
        return ClipState()

    def current(self, state: ClipState) -> float:
        r"""The bound of the next step: the state's latest (a wrapping policy's), else ``bound``."""
        return state.bounds[-1] if state.bounds else self.bound

    def bound_parts(self, plan: RunPlan) -> dict[str, Gaussian]:
        return {}

    def aggregate(self, users: Users, W: Tensor, state: ClipState) -> ClippedSum:
        return users.clipped_sum(W, self.current(state))

    def update(self, summed: ClippedSum, plan: RunPlan, state: ClipState, meter: Meter) -> ClipState:
        return state

    def record(self, state: ClipState) -> ClipState:
        return state

    def state_json(self, records: RunRecords) -> dict[str, Any]:
        return clip_state_json(records)

    def restore_state(self, payload: dict[str, Any], records: RunRecords, context: ResumeContext) -> RunRecords:
        return restore_clip_state(self, payload, records, context)


class WrappedClip(Strategy):
    r"""A clip policy that wraps another, ``base`` (as TF Privacy's adaptive query wraps its sum
    query): each ``ClipPolicy`` method forwards to ``base``, and a subclass defines only what it
    changes. Its state is saved and checked as the clip family's (``restore_clip_state`` of the
    wrapper itself, so the wrapper's ``replay``, if any, recomputes the bounds)."""

    base: ClipPolicy

    @property
    def mu_fraction(self) -> float | None:
        return self.base.mu_fraction

    def initial_state(self) -> ClipState:
        return self.base.initial_state()

    def current(self, state: ClipState) -> float:
        return self.base.current(state)

    def bound_parts(self, plan: RunPlan) -> dict[str, Gaussian]:
        return self.base.bound_parts(plan)

    def aggregate(self, users: Users, W: Tensor, state: ClipState) -> ClippedSum:
        return self.base.aggregate(users, W, state)

    def update(self, summed: ClippedSum, plan: RunPlan, state: ClipState, meter: Meter) -> ClipState:
        return self.base.update(summed, plan, state, meter)

    def record(self, state: ClipState) -> ClipState:
        return self.base.record(state)

    def state_json(self, records: RunRecords) -> dict[str, Any]:
        return clip_state_json(records)

    def restore_state(self, payload: dict[str, Any], records: RunRecords, context: ResumeContext) -> RunRecords:
        return restore_clip_state(self, payload, records, context)


@register("clip", "adaptive")
@dataclass(frozen=True)
class QuantileClip(WrappedClip):
    r"""The bound tracks a private ``γ``-quantile of the estimates' norms (Andrew et al. 2021).

    It wraps ``base``, a ``FixedClip(B₀)`` that makes the clipped sums at the bound this policy
    keeps in the state, and adds each step's count and the move of the bound. ``bound``: ``B₀``
    (a public choice); ``quantile``: ``γ``; ``learning_rate``: ``η_C``; ``fraction``: ``f_C``
    (the counts spend ``μ_C = μ_steps√f_C`` in all).
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

    @property
    def mu_fraction(self) -> float | None:
        return self.fraction

    def initial_state(self) -> ClipState:
        return ClipState(bounds=(self.base.current(self.base.initial_state()),))

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
        bound = self.moved(state.bounds[-1], count.count, plan.num_users)
        return replace(state, bounds=(*state.bounds, bound), counts=(*state.counts, count.count))

    def moved(self, bound: float, noisy_count: float, num_users: int) -> float:
        r"""The next bound after ``bound`` given the released count (``next_clip_bound`` at this policy's ``γ``,
        ``η_C``)."""
        return next_clip_bound(bound, noisy_count, num_users, self.quantile, self.learning_rate)

    def replay(self, counts: Sequence[float], num_users: int | None) -> list[float]:
        r"""``[B_0, …, B_t]`` that ``update`` moves through given the released counts ``b̃_0..b̃_{t−1}``."""
        return replay_bounds(self.bound, counts, num_users, self.moved)


@runtime_checkable
class ReplayedClip(Protocol):
    r"""A clip policy whose bounds follow from the counts it released (``QuantileClip``): a resumed
    run's stored bounds are recomputed from its stored counts and must match exactly. A clip policy
    that releases counts (``mu_fraction`` not ``None``) and lacks ``replay`` cannot be resumed."""

    def replay(self, counts: Sequence[float], num_users: int | None) -> list[float]:
        r"""``[B_0, …, B_t]`` from the released counts ``b̃_0..b̃_{t−1}`` (``t + 1`` values)."""
        ...


def clip_state_json(records: RunRecords) -> dict[str, Any]:
    r"""A clip policy's part of a run's records as exact JSON: its bounds and counts (none for a fixed bound)."""
    return compact({"bounds": floats_to_json(records.clip.bounds), "counts": floats_to_json(records.clip.counts)})


def restore_clip_state(
    clip: ClipPolicy, payload: dict[str, Any], records: RunRecords, context: ResumeContext
) -> RunRecords:
    r"""``records`` with the clip policy's ``ClipState`` from its stored ``payload``, checked.

    A policy without a track of bounds (``initial_state().bounds`` empty) stores nothing. One that
    keeps one holds ``T + 1`` bounds; one that releases counts (``mu_fraction`` not ``None``:
    ``QuantileClip``) also ``T`` counts, and the bounds must be the ones the counts give by its
    ``replay`` (recomputed exactly), each step's release of each of its ``bound_parts`` recorded
    in the ledger at its μ; a public schedule (``DecayingClip``) releases none and starts at its
    own first bound.
    """
    entry = payload_entries(payload, {"bounds": [], "counts": []}, "clip")
    T, track = context.steps, clip.initial_state().bounds  # a moving bound keeps its track: (B_0,)
    counted = clip.mu_fraction is not None  # the policy releases a count per step (spends budget)
    if not track:
        if entry["bounds"] or entry["counts"]:
            raise ValueError(f"Checkpoint field 'strategies.clip' must be empty for {clip!r} (a fixed clip bound).")
        return records
    bounds = floats_from_json(entry["bounds"], T + 1, "strategies.clip.bounds")
    counts = floats_from_json(entry["counts"], T if counted else 0, "strategies.clip.counts")
    state = replace(records, clip=ClipState(tuple(bounds), tuple(counts)))
    if not counted:  # a public schedule: its first bound is the policy's, each later one positive
        if bounds[0] != track[0] or not all(b > 0 for b in bounds):
            raise ValueError(f"Checkpoint field 'strategies.clip.bounds' does not start at {clip!r}'s first bound.")
        return state
    if T and context.num_users is None:
        raise ValueError("Checkpoint field 'strategies.clip' holds counts but the run has no users.")
    if not isinstance(clip, ReplayedClip):
        raise ValueError(
            f"Checkpoint field 'strategies.clip' holds counts, but clip={clip!r} cannot recompute its bounds from "
            "them (it has no replay method), so they cannot be checked."
        )
    expected = clip.replay(counts, context.num_users)
    if [b.hex() for b in bounds] != [b.hex() for b in expected]:
        raise ValueError(
            "Checkpoint field 'strategies.clip.bounds' does not follow from the first bound and the released counts."
        )
    for part, event in clip.bound_parts(context.plan).items():
        mu = getattr(event, "mu", None)
        for t in range(T):
            if mu not in context.recorded.get(release_key(t, part), []):
                raise ValueError(f"Checkpoint field 'strategies.clip.counts' disagrees with the ledger at step {t}.")
    return state


@dataclass(frozen=True)
class SavedClipState:
    r"""The clip family's keeper of a policy without its own ``state_json``/``restore_state`` (a
    user's): ``clip_state_json``/``restore_clip_state``, which read the policy only through the
    ``ClipPolicy`` protocol (and ``replay`` for one that releases counts)."""

    clip: Any

    def state_json(self, records: RunRecords) -> dict[str, Any]:
        return clip_state_json(records)

    def restore_state(self, payload: dict[str, Any], records: RunRecords, context: ResumeContext) -> RunRecords:
        return restore_clip_state(self.clip, payload, records, context)
