r"""Noise schedules of the gradient releases: ``FixedNoise`` (Sopa et al.: every step
``μ_g/√T``-GDP) and ``AdaptiveNorm`` (Menart et al.: a noisy norm, then the gradient with noise
scaled to it, under a GDP filter; ``optim.noise_schedule`` holds the arithmetic).

A schedule (the family's protocol: ``NoisePolicy``) says what a step may spend (``bound``,
before anything is drawn) and makes the step's releases from the users' ``ClippedSum``
(``release``). It reads the sensitivity off the sum (``2B_t/n``), so a moving clip bound
(adaptive clipping) is just a new public ``Δ_t``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Protocol

from botorch_dp.optim.noise_schedule import DEFAULT_NORM_MU_FRACTION, AdaptiveNormSchedule, release_adaptive_step
from botorch_dp.optim.options.base import RunPlan
from botorch_dp.optim.options.budget import BudgetSplit
from botorch_dp.optim.options.registry import Strategy, StrategyLike, register
from botorch_dp.privacy.checks import check_positive, check_positive_int, check_probability
from botorch_dp.privacy.ledger import Gaussian, Meter, PrivacyBudgetExceeded
from botorch_dp.privacy.mechanisms import AdaptiveGaussianGradientMechanism, GaussianGradientMechanism, GradientRelease
from botorch_dp.privacy.mechanisms.sums import ClippedSum

__all__ = ["AdaptiveNorm", "FixedNoise", "NoisePolicy", "NoiseState"]


@dataclass(frozen=True)
class NoiseState:
    r"""The schedule's public record, one entry per step.

    Attributes:
        step_mus: ``μ_t`` of each gradient release.
        noise_stds: ``σ_t`` of each gradient release.
        noisy_norms: The released ``N_t`` (``AdaptiveNorm`` only).
        norm_mus: ``μ_N`` of each norm release (``AdaptiveNorm`` only).
        stopped: Whether the filter ended the steps (``AdaptiveNorm`` only).
    """

    step_mus: tuple[float, ...] = ()
    noise_stds: tuple[float, ...] = ()
    noisy_norms: tuple[float, ...] = ()
    norm_mus: tuple[float, ...] = ()
    stopped: bool = False


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

    def restored(self, plan: RunPlan, stored: NoiseState, bounds: list[float]) -> NoiseState:
        r"""The record of a resumed run from a checkpoint's stored record and the steps' bounds."""
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
        r"""``(σ, σ/Δ)`` of the latest release at ``bound`` (the next one's before any)."""
        mechanism = self.mechanism(plan, bound)
        return mechanism.noise_std, mechanism.noise_multiplier

    def restored(self, plan: RunPlan, stored: NoiseState, bounds: list[float]) -> NoiseState:
        r"""The record of steps clipped at ``bounds`` (a checkpoint stores none: it follows from the config)."""
        mechanisms = [self.mechanism(plan, bound) for bound in bounds]
        return NoiseState(
            step_mus=tuple(m.step_mu for m in mechanisms), noise_stds=tuple(m.noise_std for m in mechanisms)
        )

    def record(self, state: NoiseState) -> NoiseState:
        r"""What a release carries of the schedule (``PrivateRelease.records["noise"]``): its
        ``NoiseState``, public as a whole."""
        return state


@register("noise", "adaptive_norm")
@dataclass(frozen=True)
class AdaptiveNorm(Strategy):
    r"""Menart et al.'s adaptive noise with a GDP filter (``optim.noise_schedule``, "B1′").

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
        check_probability(self.norm_mu_fraction, "norm_mu_fraction (f_N)")
        if self.snr_factor is not None:
            check_positive(self.snr_factor, "snr_factor (c_snr)", allow_inf=False)
        if self.max_step_mu is not None:
            check_positive(self.max_step_mu, "max_step_mu (μ_max)", allow_inf=False)
        if self.max_iterations is not None:
            check_positive_int(self.max_iterations, "max_iterations (T_max)")

    def spec(self) -> dict[str, Any]:
        return {
            "kind": self.name,
            "norm_mu_fraction": self.norm_mu_fraction,
            "snr_factor": self.snr_factor,
            "max_step_mu": self.max_step_mu,
            "max_iterations": self.max_iterations,
        }

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

    def restored(self, plan: RunPlan, stored: NoiseState, bounds: list[float]) -> NoiseState:
        r"""The stored record (a checkpoint keeps every ``μ_t``, ``σ_t`` and ``N_t``)."""
        return stored

    def noise(self, plan: RunPlan, state: NoiseState, bound: float) -> tuple[float, float]:
        std = state.noise_stds[-1] if state.noise_stds else 0.0
        sensitivity = 2.0 * bound / plan.num_users if plan.num_users else 0.0
        return std, (std / sensitivity if std else 0.0)

    def record(self, state: NoiseState) -> NoiseState:
        r"""What a release carries of the schedule (``PrivateRelease.records["noise"]``): its
        ``NoiseState``, public as a whole."""
        return state
