r"""Noise schedules of the gradient releases and their arithmetic: ``FixedNoise`` (Sopa et al.)
and ``AdaptiveNorm`` (Menart et al., Algorithm 3 as corrected in the spec, "B1′", with a GDP
privacy filter). A schedule reads the sensitivity off the users' ``ClippedSum``
(``Δ_t = 2B_t/n``), so a moving clip bound is just a new public ``Δ_t``.

``AdaptiveNorm`` charges each gradient release its REALISED ``μ_t = Δ/σ_t``, not the paper's
line-6 value, which under-counts when ``N_t`` is small or negative (spec E3.7; the paper's zCDP
constant is also off by 2 under replace-one, E3.1). The ``μ_t`` are chosen from released values
only, so the run is ``μ``-GDP by fully adaptive GDP composition (Smith & Thakurta 2022); the
number of steps ``T ≤ T_max`` is random but public. ``AdaptiveNormSchedule`` is the rule, pure
arithmetic on public values; ``release_adaptive_step`` makes one step's two releases in its order
(shared by DP-GIBO and noisy GD). The paper's own charges, for the record, are computed in
``tests/optim/options/test_noise.py`` (spec E3.7's table).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal, Protocol

from botorch_dp.optim.options.base import RunPlan
from botorch_dp.optim.options.budget import BudgetSplit
from botorch_dp.optim.options.records import (
    NoiseState,
    ResumeContext,
    RunRecords,
    compact,
    floats_from_json,
    floats_to_json,
    payload_entries,
)
from botorch_dp.optim.options.registry import Strategy, StrategyLike, register
from botorch_dp.privacy.checks import check_positive, check_positive_int, check_probability
from botorch_dp.privacy.ledger import Gaussian, Meter, PrivacyBudgetExceeded, release_key
from botorch_dp.privacy.mechanisms import (
    AdaptiveGaussianGradientMechanism,
    ClippedMean,
    GaussianGradientMechanism,
    GradientRelease,
    NormRelease,
)
from botorch_dp.privacy.mechanisms.sums import ClippedSum

__all__ = [
    "DEFAULT_FAILURE_PROBABILITY",
    "DEFAULT_NORM_MU_FRACTION",
    "FILTER_RTOL",
    "NOISE_LISTS",
    "AdaptiveNorm",
    "AdaptiveNormSchedule",
    "AdaptiveStep",
    "FixedNoise",
    "NoisePolicy",
    "NoiseSchedule",
    "NoiseState",
    "SavedNoiseState",
    "StepBudget",
    "default_snr_factor",
    "noise_state_json",
    "release_adaptive_step",
    "remaining_square",
    "restore_noise_state",
]

#: The per-step lists of a ``NoiseState``, in its field order (``AdaptiveNorm`` stores them by these names).
NOISE_LISTS = ("step_mus", "noise_stds", "noisy_norms", "norm_mus")
#: The registered names a legacy ``noise_schedule=`` keyword may spell (annotations at the boundary
#: only: the config holds a ``NoisePolicy``, and nothing compares these strings).
NoiseSchedule = Literal["fixed", "adaptive_norm"]

#: ``f_N``: the norm releases get ``μ_N = μ √(f_N/T_max)`` each (all of them ``√f_N μ``).
DEFAULT_NORM_MU_FRACTION = 0.1
#: ``β`` of the default ``c_snr = √log(nμ/(√2 β))`` (the paper's failure probability).
DEFAULT_FAILURE_PROBABILITY = 0.05
#: Relative slack of the filter's "does another step fit" test, so that floating-point
#: rounding of ``Σ μ_j²`` never ends a run with a step's worth of budget unspent. It can
#: only let a run START a step; what that step spends is capped at the exact remainder.
FILTER_RTOL = 1e-12
#: Relative margin by which the ledger's room must be smaller than the schedule's own rest
#: to take its place (so that rounding of the two computations of one budget never moves a run).
LEDGER_RTOL = 1e-9


def remaining_square(total_mu: float, spent_mus: Sequence[float]) -> float:
    r"""``μ² − Σ_j μ_j²`` over the releases' ``spent_mus``, summed exactly (``math.fsum``), possibly
    slightly negative."""
    return math.fsum([total_mu * total_mu, *(-(m * m) for m in spent_mus)])


def default_snr_factor(
    num_users: int, total_mu: float, failure_probability: float = DEFAULT_FAILURE_PROBABILITY
) -> float:
    r"""``c_snr = √log(n μ/(√2 β))``, at least 1 (the noise never exceeds the estimated norm): the
    paper's ``√log(n√ρ/β)`` with ``ρ = μ²/2``; the gradient noise is then ``‖b_t‖ ≈ N_t/c_snr``."""
    n = check_positive_int(num_users, "num_users (n)")
    mu = check_positive(total_mu, "total_mu (μ)", allow_inf=False)
    beta = check_probability(failure_probability, "failure_probability (β)")
    return math.sqrt(max(math.log(n * mu / (math.sqrt(2.0) * beta)), 1.0))


@dataclass(frozen=True)
class StepBudget:
    r"""The charge ``μ_t`` of one step's gradient release (``σ_t = Δ/μ_t``); ``final``: the step spends
    the rest of the budget (or is step ``T_max − 1``) and the run stops after it."""

    mu: float
    final: bool


@dataclass(frozen=True)
class AdaptiveNormSchedule:
    r"""The adaptive-noise rule and its GDP filter (B1′), in GDP units, all public (``build``: the
    spec's defaults). Each step releases a noisy norm ``N_t``, then the gradient with
    ``σ_t = max(max(N_t, 0)/(c_snr √d), Δ/μ_max)``. The filter keeps ``Σ μ_j² ≤ μ²``: a step
    starts only if ``μ_N² + μ_min²`` still fit, and the step that would leave no room for another
    spends exactly the rest and is the last.

    Attributes:
        total_mu: ``μ``, the budget of all norm and gradient releases of the run.
        sensitivity: ``Δ = 2B/n`` of ``ḡ`` and of ``‖ḡ‖``.
        dim: ``d_eff``, the number of noised coordinates of each gradient release.
        max_iterations: ``T_max``.
        norm_mu: ``μ_N``, the GDP parameter of each norm release.
        snr_factor: ``c_snr``: the gradient noise aims at ``σ_t √d = N_t/c_snr``.
        max_step_mu: ``μ_max``, the largest non-final gradient release (the noise floor is
            ``Δ/μ_max``).
        min_step_mu: ``μ_min``, the smallest gradient release worth making; a step starts
            only if ``μ_N² + μ_min²`` still fit.
    """

    total_mu: float
    sensitivity: float
    dim: int
    max_iterations: int
    norm_mu: float
    snr_factor: float
    max_step_mu: float
    min_step_mu: float

    def __post_init__(self) -> None:
        r"""The derived values only: ``AdaptiveNorm`` checks its fields, the config ``T`` and ``μ``."""
        mu = check_positive(self.total_mu, "total_mu (μ)", allow_inf=False)
        if self.max_step_mu > mu:
            raise ValueError(f"max_step_mu (μ_max) = {self.max_step_mu:g} exceeds the budget μ = {mu:g}.")
        if self.min_step_mu > self.max_step_mu:
            raise ValueError(
                f"min_step_mu (μ_min) = {self.min_step_mu:g} exceeds max_step_mu (μ_max) = {self.max_step_mu:g}."
            )
        if self.norm_mu**2 + self.min_step_mu**2 > mu * mu:
            raise ValueError(
                f"One step needs μ_N² + μ_min² = {self.norm_mu**2 + self.min_step_mu**2:.6g} > μ² = {mu * mu:.6g}: "
                "lower norm_mu_fraction or raise the budget."
            )

    @classmethod
    def build(
        cls,
        *,
        total_mu: float,
        sensitivity: float,
        dim: int,
        max_iterations: int,
        num_users: int,
        norm_mu_fraction: float = DEFAULT_NORM_MU_FRACTION,
        snr_factor: float | None = None,
        max_step_mu: float | None = None,
    ) -> AdaptiveNormSchedule:
        r"""The schedule with the spec's defaults: ``μ_N = μ √(f_N/T_max)`` (``T_max`` norm releases
        would spend ``f_N μ²``), ``c_snr = default_snr_factor(n, μ)``, ``μ_min = μ/(2√T_max)`` and
        ``μ_max = min(μ/2, 2μ/√T_max)``: the spec's ``μ/2``, capped at twice the fixed schedule's
        ``μ/√T_max`` so that about ``T_max/4`` steps fit even at the noise floor (on the E.4 Huber
        problem, ``T_max = 100``, μ = 1, 20 seeds, noisy GD's excess loss was 0.138 with ``μ/2``,
        0.024 with the fixed schedule and 0.009 with the cap)."""
        mu, t_max = total_mu, max_iterations
        mu_max = min(mu / 2.0, 2.0 * mu / math.sqrt(t_max)) if max_step_mu is None else max_step_mu
        return cls(
            total_mu=mu,
            sensitivity=sensitivity,
            dim=dim,
            max_iterations=t_max,
            norm_mu=mu * math.sqrt(norm_mu_fraction / t_max),
            snr_factor=default_snr_factor(num_users, mu) if snr_factor is None else snr_factor,
            max_step_mu=mu_max,
            min_step_mu=min(mu / (2.0 * math.sqrt(t_max)), mu_max),
        )

    def room(self, spent_mus: Sequence[float], ledger_room: float = math.inf) -> float:
        r"""What the next step may spend in all, as a square: ``μ² − Σ_j μ_j²`` over every ``μ_j`` this
        run released (``spent_mus``), or ``ledger_room²`` (the largest μ the ledger admits now) when
        that is smaller: the schedule's filter and the ledger's budget are one check."""
        rest = remaining_square(self.total_mu, spent_mus)
        if math.isfinite(ledger_room) and ledger_room * ledger_room < rest * (1.0 - LEDGER_RTOL):
            return ledger_room * ledger_room
        return rest

    def can_start_step(self, step: int, spent_mus: Sequence[float], ledger_room: float = math.inf) -> bool:
        r"""The filter at the top of step ``step`` (0-based): ``step < T_max`` and ``μ_N² + μ_min²`` fit
        in ``room(spent_mus, ledger_room)``."""
        if step >= self.max_iterations:
            return False
        need = self.norm_mu**2 + self.min_step_mu**2
        return self.room(spent_mus, ledger_room) >= need - FILTER_RTOL * self.total_mu**2

    def step_bound(self, spent_mus: Sequence[float], ledger_room: float = math.inf) -> dict[str, Gaussian]:
        r"""The step's worst case for the ledger, before anything is drawn: the norm at ``μ_N``
        and the largest gradient the step may pick, ``√(room − μ_N²)`` (the final step's
        rest; every other step's ``μ_t`` is smaller)."""
        after = self.room(spent_mus, ledger_room) - self.norm_mu**2
        return {"norm": Gaussian(self.norm_mu), "grad": Gaussian(math.sqrt(max(after, 0.0)) or self.min_step_mu)}

    def noise_target_mu(self, noisy_norm: float) -> float:
        r"""``Δ/σ_t`` for ``σ_t = max(max(N_t, 0)/(c_snr √d), Δ/μ_max)``, clamped below at
        ``μ_min``: ``min(μ_max, Δ c_snr √d / N_t)`` for ``N_t > 0``, else ``μ_max`` (NaN or ``inf`` is
        refused)."""
        noisy_norm = float(noisy_norm)
        if not math.isfinite(noisy_norm):
            raise ValueError(f"The released norm must be finite, got {noisy_norm!r}.")
        mu = self.max_step_mu
        if noisy_norm > 0.0:
            mu = min(mu, self.sensitivity * self.snr_factor * math.sqrt(self.dim) / noisy_norm)
        return max(mu, self.min_step_mu)

    def gradient_budget(
        self, noisy_norm: float, step: int, spent_mus: Sequence[float], ledger_room: float = math.inf
    ) -> StepBudget:
        r"""The ``StepBudget`` of step ``step``'s gradient release after its norm release (``spent_mus``
        includes it; ``ledger_room``: what the ledger admitted before it): ``noise_target_mu(N_t)``,
        or the rest ``√(μ² − Σμ_j²)`` (``final``) when after the target no further step would fit or
        ``t = T_max − 1``."""
        mu_t = self.noise_target_mu(noisy_norm)
        rest = remaining_square(self.total_mu, spent_mus)
        if math.isfinite(ledger_room):  # the same cap as ``room``, after the norm release
            capped = ledger_room * ledger_room - self.norm_mu**2
            if capped < rest * (1.0 - LEDGER_RTOL):
                rest = capped
        if rest <= 0.0:
            raise ValueError("The budget is spent: the filter should have stopped before this step's releases.")
        room_after = rest - (self.norm_mu**2 + self.min_step_mu**2)
        if mu_t * mu_t > room_after or step >= self.max_iterations - 1:
            return StepBudget(mu=math.sqrt(rest), final=True)
        return StepBudget(mu=mu_t, final=False)

    def noise_std(self, mu: float) -> float:
        r"""``σ = Δ/μ``."""
        return self.sensitivity / mu


@dataclass
class AdaptiveStep:
    r"""The two releases of one ``"adaptive_norm"`` step (the gradient's cost is the realised ``μ_t``,
    ``noise_std`` its ``σ_t = Δ/μ_t``; ``final``: the step spent the rest of the budget)."""

    norm: NormRelease
    gradient: GradientRelease
    noise_std: float
    final: bool


def release_adaptive_step(
    step: ClippedMean,
    schedule: AdaptiveNormSchedule,
    *,
    index: int,
    spent_mus: Sequence[float],
    meter: Meter | None = None,
    ledger_room: float = math.inf,
    diagnostics: bool = False,
) -> AdaptiveStep:
    r"""One step of B1′: the noisy norm at ``μ_N``, then the gradient at the ``μ_t`` the schedule
    derives from the released norm.

    The caller has checked ``schedule.can_start_step`` and charged the step's worst case
    (``schedule.step_bound``), and passes the charge's ``meter`` (None: the caller accounts): each
    release is recorded as ``"norm"`` and ``"grad"`` just before its draw, and ``μ_t`` never
    exceeds what was admitted, so no check can refuse the step half way.
    """
    norm = step.release_norm(schedule.norm_mu, meter=meter)
    budget = schedule.gradient_budget(norm.norm, index, [*spent_mus, norm.cost.mu], ledger_room=ledger_room)
    gradient = step.release_gradient(budget.mu, diagnostics=diagnostics, meter=meter)
    return AdaptiveStep(
        norm=norm, gradient=gradient, noise_std=schedule.noise_std(gradient.cost.mu), final=budget.final
    )


class NoisePolicy(StrategyLike, Protocol):
    r"""A noise schedule of the gradient releases: how many steps a run may take, what each step
    may spend (declared before any draw) and the step's releases from the users' clipped sum,
    each through ``privacy.mechanisms`` and recorded through the step's ``meter`` just before its
    draw. Its public record is a ``NoiseState`` (``step_mus`` and ``noise_stds`` per step at least;
    ``stopped`` ends the steps). ``spent`` is the μ of the run's norm and gradient releases so far
    (the ledger's records) and ``room`` what the ledger has left for this schedule's parts."""

    def iteration_cap(self, num_iterations: int) -> int:
        r"""The most steps (``T``, or a schedule's own cap)."""
        ...

    def check(self, split: BudgetSplit, dim: int, num_iterations: int) -> None:
        r"""Refuse a budget the schedule cannot run on (``ValueError``), before anything is released."""
        ...

    def bound(self, plan: RunPlan, state: NoiseState, spent: list[float], room: float) -> dict[str, Gaussian]:
        r"""The step's parts at their largest cost (``PrivacyBudgetExceeded`` when none fits)."""
        ...

    def release(
        self,
        summed: ClippedSum,
        plan: RunPlan,
        state: NoiseState,
        meter: Meter,
        *,
        step: int,
        dim: int,
        spent: list[float],
        room: float,
    ) -> tuple[GradientRelease, NoiseState]:
        r"""The step's gradient release from ``summed`` (SENSITIVE) at ``Δ_t = 2 summed.bound/n``,
        and the record after it."""
        ...

    def noise(self, plan: RunPlan, state: NoiseState, bound: float) -> tuple[float, float]:
        r"""``(σ, σ/Δ)`` of the latest release at ``bound`` (the next one's before any; public)."""
        ...

    def record(self, state: NoiseState) -> NoiseState:
        r"""What a release carries of the schedule (``PrivateRelease.records["noise"]``), public."""
        ...


@register("noise", "fixed")
@dataclass(frozen=True)
class FixedNoise(Strategy):
    r"""Every one of the ``T`` steps is ``μ_g/√T``-GDP: noise ``2B√T/(nμ_g)`` (Sopa et al., Thm. 3.1)."""

    def iteration_cap(self, num_iterations: int) -> int:
        return num_iterations

    def check(self, split: BudgetSplit, dim: int, num_iterations: int) -> None:
        r"""Nothing to check beyond the config's own fields."""

    def mechanism(self, plan: RunPlan, bound: float) -> GaussianGradientMechanism:
        r"""The gradient mechanism of a step clipped at ``bound``."""
        return GaussianGradientMechanism(
            clip_bound=bound,
            num_users=plan.num_users,
            privacy_mu=plan.split.gradient_mu,
            num_steps=plan.num_iterations,
            generator=plan.generator,
            chunk_size=plan.chunk_size,
        )

    def bound(self, plan: RunPlan, state: NoiseState, spent: list[float], room: float) -> dict[str, Gaussian]:
        return {"grad": Gaussian(plan.split.gradient_mu / math.sqrt(plan.num_iterations))}

    def release(
        self,
        summed: ClippedSum,
        plan: RunPlan,
        state: NoiseState,
        meter: Meter,
        *,
        step: int,
        dim: int,
        spent: list[float],
        room: float,
    ) -> tuple[GradientRelease, NoiseState]:
        mechanism = self.mechanism(plan, summed.bound)
        release = mechanism.release_sum(summed, diagnostics=plan.diagnostics, meter=meter)
        return release, replace(
            state, step_mus=(*state.step_mus, mechanism.step_mu), noise_stds=(*state.noise_stds, mechanism.noise_std)
        )

    def noise(self, plan: RunPlan, state: NoiseState, bound: float) -> tuple[float, float]:
        mechanism = self.mechanism(plan, bound)
        return mechanism.noise_std, mechanism.noise_multiplier

    def record(self, state: NoiseState) -> NoiseState:
        return state

    def state_json(self, records: RunRecords) -> dict[str, Any]:
        r"""Nothing: each step's ``μ_t`` and ``σ_t`` follow from the config and the step's clip bound."""
        return {}

    def restore_state(self, payload: dict[str, Any], records: RunRecords, context: ResumeContext) -> RunRecords:
        r"""``records`` with the record of ``T`` steps, each clipped at the clip policy's bound of that step
        (restored before); a stored payload must be empty."""
        payload_entries(payload, {}, "noise")
        clip = context.options.clip
        track = records.clip.bounds
        bounds = [clip.current(replace(records.clip, bounds=track[: t + 1])) for t in range(context.steps)]
        mechanisms = [self.mechanism(context.plan, bound) for bound in bounds]
        for t, mechanism in enumerate(mechanisms):  # each step's gradient was charged the config's μ_g/√T
            key, mu = release_key(t, "grad", context.step_parts), mechanism.step_mu
            held = context.recorded.get(key, [])
            if math.isfinite(mu) and not any(math.isclose(v, mu, rel_tol=1e-12) for v in held):
                raise ValueError(
                    f"Checkpoint field 'ledger': release {key!r} of run {context.run_id!r} was not charged "
                    f"mu={mu:.6g}, the config's per-step mu; the checkpoint is refused."
                )
        state = NoiseState(
            step_mus=tuple(m.step_mu for m in mechanisms), noise_stds=tuple(m.noise_std for m in mechanisms)
        )
        return replace(records, noise=state)


@register("noise", "adaptive_norm")
@dataclass(frozen=True)
class AdaptiveNorm(Strategy):
    r"""Menart et al.'s adaptive noise with a GDP filter (``AdaptiveNormSchedule``, "B1′").

    Each step releases a noisy norm ``N_t`` of the clipped mean at ``μ_N``, then the gradient
    with noise ``σ_t = max(max(N_t, 0)/(c_snr √d), Δ/μ_max)``, charged its realised ``μ_t``;
    the step that leaves no room for another spends exactly the rest of ``μ_g`` (or of what
    the ledger has left, if less) and is the last.

    Args:
        norm_mu_fraction: ``f_N`` in ``(0, 1)``: ``μ_N = μ_g √(f_N/T_max)``.
        snr_factor: ``c_snr`` (default ``√log(nμ/(√2·0.05))``, at least 1).
        max_step_mu: ``μ_max`` (default ``min(μ_g/2, 2μ_g/√T_max)``).
        max_iterations: ``T_max`` (default ``num_iterations``).
    """

    norm_mu_fraction: float = DEFAULT_NORM_MU_FRACTION
    snr_factor: float | None = None
    max_step_mu: float | None = None
    max_iterations: int | None = None
    needs_finite_mu = "scales the noise to a privacy budget"
    can_provide = frozenset({"noisy_norms"})

    def __post_init__(self) -> None:
        object.__setattr__(self, "norm_mu_fraction", check_probability(self.norm_mu_fraction, "norm_mu_fraction (f_N)"))
        if self.snr_factor is not None:
            object.__setattr__(
                self, "snr_factor", check_positive(self.snr_factor, "snr_factor (c_snr)", allow_inf=False)
            )
        if self.max_step_mu is not None:
            object.__setattr__(
                self, "max_step_mu", check_positive(self.max_step_mu, "max_step_mu (μ_max)", allow_inf=False)
            )
        if self.max_iterations is not None:
            object.__setattr__(
                self, "max_iterations", check_positive_int(self.max_iterations, "max_iterations (T_max)")
            )

    def iteration_cap(self, num_iterations: int) -> int:
        return self.max_iterations if self.max_iterations is not None else num_iterations

    def schedule(
        self, total_mu: float, iteration_cap: int, num_users: int, sensitivity: float, dim: int
    ) -> AdaptiveNormSchedule:
        r"""The B1′ schedule (public: ``μ_g``, ``T_max``, ``n``, ``Δ``, ``d_eff``)."""
        return AdaptiveNormSchedule.build(
            total_mu=total_mu,
            sensitivity=sensitivity,
            dim=dim,
            max_iterations=iteration_cap,
            num_users=num_users,
            norm_mu_fraction=self.norm_mu_fraction,
            snr_factor=self.snr_factor,
            max_step_mu=self.max_step_mu,
        )

    def check(self, split: BudgetSplit, dim: int, num_iterations: int) -> None:
        r"""The schedule's own checks (one step must fit, ``μ_max ≤ μ_g``); ``n`` and ``Δ`` do not enter them."""
        self.schedule(split.gradient_mu, self.iteration_cap(num_iterations), 1, 1.0, dim)

    def bound(self, plan: RunPlan, state: NoiseState, spent: list[float], room: float) -> dict[str, Gaussian]:
        r"""The norm and the largest gradient the step may pick within ``min(the schedule's rest,
        room)``; ``PrivacyBudgetExceeded`` when not even a norm and a minimal gradient fit."""
        schedule = self.schedule(plan.split.gradient_mu, plan.iteration_cap, plan.num_users, 1.0, plan.dim)
        step = len(state.step_mus)
        if not schedule.can_start_step(step, spent, room):
            what = (
                f"the ledger has mu={room:.6g} left"
                if schedule.can_start_step(step, spent)
                else f"this run's releases already spent its steps' mu={schedule.total_mu:.6g} (a copy of the run "
                "resumed from the same checkpoint spends it too)"
            )
            raise PrivacyBudgetExceeded(
                f"Validation privacy budget exceeded: {what}, less than one adaptive step needs (a norm at "
                f"mu={schedule.norm_mu:.6g} and a gradient at mu={schedule.min_step_mu:.6g}). Nothing was released."
            )
        return schedule.step_bound(spent, room)

    def release(
        self,
        summed: ClippedSum,
        plan: RunPlan,
        state: NoiseState,
        meter: Meter,
        *,
        step: int,
        dim: int,
        spent: list[float],
        room: float,
    ) -> tuple[GradientRelease, NoiseState]:
        mechanism = AdaptiveGaussianGradientMechanism(
            clip_bound=summed.bound, num_users=plan.num_users, generator=plan.generator, chunk_size=plan.chunk_size
        )
        schedule = self.schedule(plan.split.gradient_mu, plan.iteration_cap, plan.num_users, mechanism.sensitivity, dim)
        out = release_adaptive_step(
            mechanism.clipped_mean_of(summed),
            schedule,
            index=step,
            spent_mus=spent,
            meter=meter,
            ledger_room=room,
            diagnostics=plan.diagnostics,
        )
        return out.gradient, NoiseState(
            step_mus=(*state.step_mus, out.gradient.cost.mu),
            noise_stds=(*state.noise_stds, out.noise_std),
            noisy_norms=(*state.noisy_norms, out.norm.norm),
            norm_mus=(*state.norm_mus, out.norm.cost.mu),
            stopped=out.final,
        )

    def state_json(self, records: RunRecords) -> dict[str, Any]:
        r"""Every step's ``μ_t``, ``σ_t``, ``N_t`` and ``μ_N`` (chosen from released values, so they do not
        follow from the config), and whether the filter stopped the steps."""
        return noise_state_json(records)

    def restore_state(self, payload: dict[str, Any], records: RunRecords, context: ResumeContext) -> RunRecords:
        r"""``records`` with the stored record, checked (``restore_noise_state``; every step releases a norm
        and a gradient): the filter's spent budget is read from the ledger, so the two must agree."""
        return restore_noise_state(payload, records, context, ("norm", "grad"))

    def noise(self, plan: RunPlan, state: NoiseState, bound: float) -> tuple[float, float]:
        std = state.noise_stds[-1] if state.noise_stds else 0.0
        sensitivity = 2.0 * bound / plan.num_users if plan.num_users else 0.0
        return std, (std / sensitivity if std else 0.0)

    def record(self, state: NoiseState) -> NoiseState:
        return state


def noise_state_json(records: RunRecords) -> dict[str, Any]:
    r"""A noise schedule's part of a run's records as exact JSON: its ``NoiseState``'s lists and ``stopped``."""
    lists = {name: floats_to_json(getattr(records.noise, name)) for name in NOISE_LISTS}
    return compact({**lists, "stopped": records.noise.stopped})


def restore_noise_state(
    payload: dict[str, Any],
    records: RunRecords,
    context: ResumeContext,
    parts: tuple[str, ...],
    optional: tuple[str, ...] = (),
) -> RunRecords:
    r"""``records`` with the ``NoiseState`` stored in ``payload``, checked: ``T`` values in each list (or
    none in the ``optional`` ones), positive but the norms, and every ``μ`` the ledger's record of that
    step's release (``"norm"``, ``"grad"``; ``release_key`` among the step's ``parts``)."""
    entry = payload_entries(payload, dict.fromkeys(NOISE_LISTS, []) | {"stopped": False}, "noise")
    T, lists = context.steps, {}
    for name in NOISE_LISTS:
        count = 0 if name in optional and not entry[name] else T
        lists[name] = floats_from_json(entry[name], count, f"strategies.noise.{name}")
        if name != "noisy_norms" and not all(v > 0 for v in lists[name]):
            raise ValueError(f"Checkpoint field 'strategies.noise.{name}' must hold positive values.")
    for name, part in (("step_mus", "grad"), ("norm_mus", "norm")):
        for t, mu in enumerate(lists[name]):
            if mu not in context.recorded.get(release_key(t, part, parts), []):
                raise ValueError(f"Checkpoint field 'strategies.noise.{name}' disagrees with the ledger at step {t}.")
    if not isinstance(entry["stopped"], bool):
        raise ValueError(f"Checkpoint field 'strategies.noise.stopped' must be a bool, got {entry['stopped']!r}.")
    state = NoiseState(**{name: tuple(values) for name, values in lists.items()}, stopped=entry["stopped"])
    return replace(records, noise=state)


@dataclass(frozen=True)
class SavedNoiseState:
    r"""The noise family's keeper of a schedule without its own ``state_json``/``restore_state`` (a
    user's): ``noise_state_json``/``restore_noise_state``, each list ``T`` values (the norms' may be
    empty: a schedule that releases none)."""

    noise: Any

    def state_json(self, records: RunRecords) -> dict[str, Any]:
        return noise_state_json(records)

    def restore_state(self, payload: dict[str, Any], records: RunRecords, context: ResumeContext) -> RunRecords:
        return restore_noise_state(payload, records, context, context.step_parts, ("noisy_norms", "norm_mus"))
