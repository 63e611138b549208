r"""Clip policies: the bound ``B_t`` each step clips the per-user estimates at, and their arithmetic.

``ClipPolicy`` is the family's protocol: what ``Options`` and the loop call of a clip policy.
``FixedClip(B)`` clips every step at ``B``, or at the bound a wrapping policy keeps in the
``ClipState`` (as TF Privacy's adaptive query keeps its sum query's clip in that query's state).
``QuantileClip`` (``clip_bound="adaptive"``; Andrew, Thakkar, McMahan & Ramaswamy 2021,
"Differentially private learning with adaptive clipping") wraps a ``FixedClip`` and moves its
bound each step so that it tracks a private quantile of the per-user gradient-estimate norms.
Nothing else in the loop knows the bound moves: the noise schedule reads ``Δ_t = 2B_t/n`` off
the sum.

At step ``t`` with bound ``B_t`` a ``QuantileClip`` run makes two releases from the same
per-user estimates ``g_i = A y_i`` (one pass: the clipped sum comes with the number of users
within ``B_t``, ``ClippedSum.within``):

- the gradient ``(1/n) Σ_i clip_{B_t}(g_i) + N(0, σ_t² I)``, ``σ_t = 2B_t√T/(n μ_g)``
  (``GaussianGradientMechanism`` at ``B_t``: ``μ_g/√T``-GDP whatever ``B_t`` is, because the
  noise scales with the bound);
- the count ``b̃_t = #{i : ‖g_i‖ ≤ B_t} + N(0, (√T/μ_C)²)`` (``GaussianClipCountMechanism``,
  sensitivity 1: ``μ_C/√T``-GDP, part ``"clip"``);

and the next bound is the geometric update ``B_{t+1} = B_t · exp(−η_C (b̃_t/n − γ))``
(``next_clip_bound``): post-processing of the released count, so ``B_{t+1}`` is public. Its
fixed point is the ``γ``-quantile of the norms. The budget split is explicit:
``μ_C = μ_steps √f_C`` and ``μ_g = μ_steps √(1 − f_C)``, so the ``2T`` releases compose to
``√(μ_g² + μ_C²) = μ_steps`` (GDP composition; the bounds are chosen from released values only).

Why every step, not only the first ones: the norms ``‖A y_i‖`` change along the run, both
because ``θ_t`` moves (the gradients shrink near an optimum) and because ``A = ∇k(θ, D)K⁻¹``
changes as points are added, so a bound fitted at ``θ₀`` goes stale; Andrew et al. likewise
update every round. The price is ``f_C`` of the budget (default 0.1: the gradient noise grows
by ``1/√0.9 ≈ 1.054``). Runs are short (``T`` of 10 to 100), so a starting bound within a
factor of a few of the quantile matters: ``η_C = 0.2`` moves ``B`` by at most ``e^{0.2·max(γ, 1−γ)}``
per step; take ``B₀`` from ``botorch_dp.plan`` on a public proxy, or raise ``η_C``.

A checkpoint stores a moving bound's ``ClipState`` (``encode_clip_state``) and resume checks it
(``check_clip_state``): a policy that releases counts recomputes its bounds from them
(``ReplayedClip``), and each count must be in the ledger.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, runtime_checkable

from torch import Tensor

from botorch_dp.optim.checkpoint.encoding import check_keys, float_from_json
from botorch_dp.optim.options.base import RunPlan
from botorch_dp.optim.options.registry import Strategy, StrategyLike, register
from botorch_dp.optim.users import Users
from botorch_dp.privacy.checks import check_positive, check_probability
from botorch_dp.privacy.ledger import Gaussian, Meter, PrivacyLedger, release_key
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
    "check_clip_state",
    "encode_clip_state",
    "next_clip_bound",
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
    r"""``B · exp(−η_C (b̃/n − γ))``: the geometric update (Andrew et al. 2021, Alg. 1).

    The noisy fraction ``b̃/n`` may lie outside ``[0, 1]``; it is used as released (clamping
    would bias the update). Public arithmetic on released values.

    Args:
        bound: ``B_t``.
        noisy_count: The released ``b̃_t``.
        num_users: ``n``.
        quantile: ``γ``.
        learning_rate: ``η_C``.
    """
    return bound * math.exp(-learning_rate * (noisy_count / num_users - quantile))


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

    def replay(self, counts: Sequence[float], num_users: int | None) -> list[float]:
        r"""``[B_0, …, B_t]`` that ``update`` moves through given the released counts ``b̃_0..b̃_{t−1}``
        (public arithmetic; what resume compares a checkpoint's bounds with, bit for bit)."""
        bounds = [self.bound]
        if len(counts) == 0:
            return bounds
        if num_users is None:
            raise ValueError(f"Replaying {len(counts)} clip counts needs num_users (n), got None.")
        for count in counts:
            bounds.append(next_clip_bound(bounds[-1], count, num_users, self.quantile, self.learning_rate))
        return bounds


@runtime_checkable
class ReplayedClip(Protocol):
    r"""A clip policy whose bounds follow from the counts it released (``QuantileClip``): a resumed
    run's stored bounds are recomputed from its stored counts and must match exactly. A clip policy
    that releases counts (``mu_fraction`` not ``None``) and lacks ``replay`` cannot be resumed."""

    def replay(self, counts: Sequence[float], num_users: int | None) -> list[float]:
        r"""``[B_0, …, B_t]`` from the released counts ``b̃_0..b̃_{t−1}`` (``t + 1`` values)."""
        ...


def encode_clip_state(bounds: Sequence[float], counts: Sequence[float]) -> dict[str, Any]:
    r"""The adaptive-clip state as exact JSON (floats as ``float.hex``)."""
    return {"bounds": [float(b).hex() for b in bounds], "counts": [float(c).hex() for c in counts]}


def check_clip_state(
    entry: Any,
    *,
    clip: ClipPolicy,
    T: int,
    num_users: int | None,
    ledger: PrivacyLedger,
    run_id: str,
    step_mu: float | None,
) -> tuple[list[float], list[float]]:
    r"""Decode and check a checkpoint's ``adaptive_clip`` entry.

    ``None`` (fixed clip bound, or a checkpoint written before the field existed) is accepted
    only for a clip policy without a track of bounds. A policy that keeps one holds ``T + 1``
    bounds; one that releases counts (``QuantileClip``) also ``T`` counts, and the bounds must
    be the ones the counts give by the update rule (recomputed exactly), each step's count
    recorded in the ledger as ``step-t/clip`` with the per-step ``step_mu`` (``μ_C/√T``); a public
    schedule (``DecayingClip``) releases none, starts at its own first bound, and each release's
    noise follows the bound it clipped at.

    Returns:
        ``(bounds, counts)`` (both empty for a fixed bound).
    """
    track = clip.initial_state().bounds  # a moving bound keeps its track: (B_0,)
    counted = clip.mu_fraction is not None  # the policy releases a count per step (spends budget)
    if entry is None:
        if track:
            raise ValueError(f"Checkpoint field 'adaptive_clip' is missing for a run with clip={clip!r}.")
        return [], []
    if not track:
        raise ValueError("Checkpoint field 'adaptive_clip' must be None for a fixed clip bound.")
    check_keys(entry, {"bounds", "counts"}, "adaptive_clip")
    bounds, counts = entry["bounds"], entry["counts"]
    num_counts = T if counted else 0
    if (
        not isinstance(bounds, list)
        or len(bounds) != T + 1
        or not isinstance(counts, list)
        or len(counts) != num_counts
    ):
        raise ValueError(f"Checkpoint field 'adaptive_clip' must hold {T + 1} bounds and {num_counts} counts.")
    bounds = [float_from_json(v, "adaptive_clip.bounds") for v in bounds]
    counts = [float_from_json(v, "adaptive_clip.counts") for v in counts]
    if not counted:  # a public schedule: its first bound is the policy's, each later one positive
        if bounds[0] != track[0] or not all(b > 0 for b in bounds):
            raise ValueError(f"Checkpoint field 'adaptive_clip.bounds' does not start at {clip!r}'s first bound.")
        return bounds, counts
    if T and num_users is None:
        raise ValueError("Checkpoint field 'adaptive_clip' holds counts but the run has no users.")
    if not isinstance(clip, ReplayedClip):
        raise ValueError(
            f"Checkpoint field 'adaptive_clip' holds counts, but clip={clip!r} cannot recompute its bounds from them "
            "(it has no replay method), so they cannot be checked."
        )
    expected = clip.replay(counts, num_users)
    if [b.hex() for b in bounds] != [b.hex() for b in expected]:
        raise ValueError(
            "Checkpoint field 'adaptive_clip.bounds' does not follow from clip_init and the released counts."
        )
    recorded: dict[str, list[float]] = {}
    for record in ledger.validation.records(run_id):
        recorded.setdefault(record.key, []).append(getattr(record.event, "mu", math.nan))
    for t in range(T):
        if step_mu not in recorded.get(release_key(t, CLIP_KEY, ("grad", CLIP_KEY)), []):
            raise ValueError(f"Checkpoint field 'adaptive_clip.counts' disagrees with the ledger at step {t}.")
    return bounds, counts
