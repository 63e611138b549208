r"""Noise schedules of the gradient releases: ``"fixed"`` (Sopa et al.) or ``"adaptive_norm"``
with a GDP privacy filter (Menart et al., Algorithm 3 as corrected in the spec, "B1′").

``"fixed"``: every one of the ``T`` steps is ``μ/√T``-GDP (noise ``2B√T/(nμ)``).

``"adaptive_norm"``: each step first releases a noisy norm ``N_t = ‖ḡ_t‖ + N(0, (Δ/μ_N)²)``
of the clipped mean ``ḡ_t`` (``Δ = 2B/n``), then the gradient with noise scaled to it,
``σ_t = max(max(N_t, 0)/(c_snr √d), Δ/μ_max)``: cheap, noisy steps while the gradient is
large, precise ones near a stationary point. Each release is charged its REALISED
``μ_t = Δ/σ_t``, not the paper's line-6 value, which uses ``N_t`` in place of ``σ_t`` and
under-counts when ``N_t`` is small or negative (spec E3.7; the paper's zCDP constant is
also off by 2 under replace-one, E3.1). A filter keeps ``Σ μ_j² ≤ μ²``: a step starts only
if a norm release and the smallest worthwhile gradient release ``μ_min`` still fit, and the
step that would leave no room for another full step spends exactly the rest
``√(μ² − Σ_{j<} μ_j²)`` and is the last. The sequence ``μ_0, μ_1, …`` is chosen from
released values only, so the run is ``μ``-GDP by fully adaptive GDP composition (Smith &
Thakurta 2022, "Fully adaptive composition for Gaussian differential privacy"). The
number of steps ``T ≤ T_max`` is random but public.

The schedule is pure arithmetic on public values (``μ``, ``Δ``, ``d``, released norms); the
releases themselves live in ``privacy.mechanisms``, and ``release_adaptive_step`` makes one
step's two releases in the schedule's order (shared by DP-GIBO and noisy GD).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, get_args

from botorch_dp.privacy.checks import check_positive, check_positive_int, check_probability
from botorch_dp.privacy.ledger import Gaussian, Meter
from botorch_dp.privacy.mechanisms import ClippedMean, GradientRelease, NormRelease

__all__ = [
    "DEFAULT_FAILURE_PROBABILITY",
    "DEFAULT_NORM_MU_FRACTION",
    "FILTER_RTOL",
    "NOISE_SCHEDULES",
    "AdaptiveNormSchedule",
    "AdaptiveStep",
    "NoiseSchedule",
    "StepBudget",
    "default_snr_factor",
    "paper_line6_zcdp",
    "paper_norm_sigma",
    "paper_sigma",
    "realized_zcdp",
    "release_adaptive_step",
    "remaining_square",
]

NoiseSchedule = Literal["fixed", "adaptive_norm"]
NOISE_SCHEDULES: tuple[str, ...] = get_args(NoiseSchedule)

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
    r"""``μ² − Σ_j μ_j²``, summed exactly (``math.fsum``), possibly slightly negative.

    Args:
        total_mu: The budget ``μ``.
        spent_mus: The ``μ_j`` of the releases made so far.
    """
    return math.fsum([total_mu * total_mu, *(-(m * m) for m in spent_mus)])


def default_snr_factor(
    num_users: int, total_mu: float, failure_probability: float = DEFAULT_FAILURE_PROBABILITY
) -> float:
    r"""``c_snr = √log(n μ/(√2 β))``, at least 1: the paper's ``√log(n√ρ/β)`` with ``ρ = μ²/2``.

    The gradient noise is then ``‖b_t‖ ≈ σ_t √d ≈ N_t/c_snr``, a relative error that
    shrinks slowly with ``n``. Floored at 1 (small ``n μ``, where the logarithm is < 1 or
    negative): the noise never exceeds the estimated norm.

    Args:
        num_users: ``n``.
        total_mu: ``μ`` of the gradient steps.
        failure_probability: ``β`` in ``(0, 1)``.
    """
    n = check_positive_int(num_users, "num_users (n)")
    mu = check_positive(total_mu, "total_mu (μ)", allow_inf=False)
    beta = check_probability(failure_probability, "failure_probability (β)")
    return math.sqrt(max(math.log(n * mu / (math.sqrt(2.0) * beta)), 1.0))


@dataclass(frozen=True)
class StepBudget:
    r"""The charge of one step's gradient release.

    Attributes:
        mu: ``μ_t``, the GDP parameter of the gradient release (``σ_t = Δ/μ_t``).
        final: ``True`` when the step spends the rest of the budget (or is step
            ``T_max − 1``): the run stops after it.
    """

    mu: float
    final: bool


@dataclass(frozen=True)
class AdaptiveNormSchedule:
    r"""The adaptive-noise rule and its GDP filter (B1′), in GDP units.

    All fields are public. Build it with ``AdaptiveNormSchedule.build`` (defaults of the
    spec) or directly.

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
        mu = check_positive(self.total_mu, "total_mu (μ)", allow_inf=False)
        check_positive(self.sensitivity, "sensitivity (Δ)", allow_inf=False)
        check_positive_int(self.dim, "dim (d)")
        check_positive_int(self.max_iterations, "max_iterations (T_max)")
        check_positive(self.norm_mu, "norm_mu (μ_N)", allow_inf=False)
        check_positive(self.snr_factor, "snr_factor (c_snr)", allow_inf=False)
        check_positive(self.max_step_mu, "max_step_mu (μ_max)", allow_inf=False)
        check_positive(self.min_step_mu, "min_step_mu (μ_min)", allow_inf=False)
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
        r"""The schedule with the spec's defaults.

        Args:
            total_mu: ``μ`` of the steps.
            sensitivity: ``Δ = 2B/n``.
            dim: ``d_eff``.
            max_iterations: ``T_max``.
            num_users: ``n`` (for the default ``c_snr``).
            norm_mu_fraction: ``f_N`` in ``(0, 1)``: ``μ_N = μ √(f_N/T_max)``, so that
                ``T_max`` norm releases would spend ``f_N μ²``.
            snr_factor: ``c_snr``; default ``default_snr_factor(n, μ)``.
            max_step_mu: ``μ_max``; default ``min(μ/2, 2μ/√T_max)``: the spec's ``μ/2``,
                capped at twice the fixed schedule's ``μ/√T_max`` so that at least about
                ``T_max/4`` steps fit even at the noise floor (with ``μ/2`` a run whose
                gradients are small stops after about four steps: on the E.4 Huber
                problem, ``T_max = 100``, μ = 1, 20 seeds, the excess loss of noisy GD was
                0.138 with ``μ/2``, 0.024 with the fixed schedule and 0.009 with the cap).

        Returns:
            The ``AdaptiveNormSchedule`` (``μ_min = μ/(2√T_max)``, capped at ``μ_max``).
        """
        mu = check_positive(total_mu, "total_mu (μ)", allow_inf=False)
        t_max = check_positive_int(max_iterations, "max_iterations (T_max)")
        f_n = check_probability(norm_mu_fraction, "norm_mu_fraction (f_N)")
        if max_step_mu is None:
            mu_max = min(mu / 2.0, 2.0 * mu / math.sqrt(t_max))
        else:
            mu_max = check_positive(max_step_mu, "max_step_mu (μ_max)", allow_inf=False)
        if mu_max > mu:
            raise ValueError(f"max_step_mu (μ_max) = {mu_max:g} exceeds the budget μ = {mu:g}.")
        return cls(
            total_mu=mu,
            sensitivity=sensitivity,
            dim=dim,
            max_iterations=t_max,
            norm_mu=mu * math.sqrt(f_n / t_max),
            snr_factor=default_snr_factor(num_users, mu) if snr_factor is None else snr_factor,
            max_step_mu=mu_max,
            min_step_mu=min(mu / (2.0 * math.sqrt(t_max)), mu_max),
        )

    def room(self, spent_mus: Sequence[float], ledger_room: float = math.inf) -> float:
        r"""What the next step may spend in all, as a square: ``μ² − Σ_j μ_j²``, or the ledger's
        ``ledger_room²`` when that is smaller (a shared ledger, or a ledger budget below
        ``μ``): the schedule's filter and the ledger's budget are one check.

        Args:
            spent_mus: Every ``μ_j`` this run has released so far.
            ledger_room: The largest μ the ledger admits now (``ledger.validation.remaining_mu``).
        """
        rest = remaining_square(self.total_mu, spent_mus)
        if math.isfinite(ledger_room) and ledger_room * ledger_room < rest * (1.0 - LEDGER_RTOL):
            return ledger_room * ledger_room
        return rest

    def can_start_step(self, step: int, spent_mus: Sequence[float], ledger_room: float = math.inf) -> bool:
        r"""The filter at the top of step ``step``: ``step < T_max`` and ``μ_N² + μ_min²`` fit
        in ``room(spent_mus, ledger_room)``.

        Args:
            step: ``t``, the 0-based index of the step about to start.
            spent_mus: Every ``μ_j`` this run has released so far (norms and gradients).
            ledger_room: The largest μ the ledger admits now.
        """
        if step >= self.max_iterations:
            return False
        need = self.norm_mu**2 + self.min_step_mu**2
        return self.room(spent_mus, ledger_room) >= need - FILTER_RTOL * self.total_mu**2

    def step_bound(self, spent_mus: Sequence[float], ledger_room: float = math.inf) -> dict[str, Gaussian]:
        r"""The step's worst case for the ledger, before anything is drawn: the norm at ``μ_N``
        and the largest gradient the step may pick, ``√(room − μ_N²)`` (the final step's
        rest; every other step's ``μ_t`` is smaller).

        Args:
            spent_mus: Every ``μ_j`` this run has released so far.
            ledger_room: The largest μ the ledger admits now.
        """
        after = self.room(spent_mus, ledger_room) - self.norm_mu**2
        return {"norm": Gaussian(self.norm_mu), "grad": Gaussian(math.sqrt(max(after, 0.0)) or self.min_step_mu)}

    def noise_target_mu(self, noisy_norm: float) -> float:
        r"""``Δ/σ_t`` for ``σ_t = max(max(N_t, 0)/(c_snr √d), Δ/μ_max)``, clamped below at
        ``μ_min``: ``min(μ_max, Δ c_snr √d / N_t)`` for ``N_t > 0``, else ``μ_max``.

        Args:
            noisy_norm: The released ``N_t`` (any finite value; NaN or ``inf`` is refused).
        """
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
        r"""``μ_t`` of step ``step``'s gradient release, after its norm release.

        Args:
            noisy_norm: This step's released ``N_t``.
            step: ``t`` (0-based).
            spent_mus: Every ``μ_j`` released so far, this step's norm release included.
            ledger_room: The largest μ the ledger admitted before this step's norm release
                (the step's ``room`` is the smaller of the two).

        Returns:
            The ``StepBudget``: ``noise_target_mu(N_t)``, or the rest ``√(μ² − Σμ_j²)``
            (``final=True``) when after the target no further step would fit or
            ``t = T_max − 1``.
        """
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
    r"""The two releases of one ``"adaptive_norm"`` step.

    Attributes:
        norm: The ``NormRelease`` (``N_t`` and its cost ``μ_N``).
        gradient: The ``GradientRelease`` (its cost is the realised ``μ_t``).
        noise_std: ``σ_t = Δ/μ_t`` of the gradient release.
        final: Whether the step spent the rest of the budget (the run stops after it).
    """

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

    The caller charges the step's worst case (``schedule.step_bound(spent_mus,
    ledger_room)``) before calling, and passes the charge's ``meter``: each release is
    recorded as ``"norm"`` and ``"grad"`` just before its draw, and the gradient's ``μ_t``
    never exceeds what was admitted, so no check can refuse the step half way.

    Args:
        step: This step's ``ClippedMean`` (from ``AdaptiveGaussianGradientMechanism.clipped_mean``).
        schedule: The run's ``AdaptiveNormSchedule``.
        index: ``t``, the 0-based step index.
        spent_mus: Every ``μ_j`` the run released before this step (the caller has checked
            ``schedule.can_start_step(t, spent_mus, ledger_room)``).
        meter: The charged step's meter (None: the caller accounts the releases).
        ledger_room: The largest μ the ledger admitted before this step.
        diagnostics: Return NON-PRIVATE diagnostics with the gradient release.

    Returns:
        The ``AdaptiveStep``.
    """
    norm = step.release_norm(schedule.norm_mu, meter=meter)
    budget = schedule.gradient_budget(norm.norm, index, [*spent_mus, norm.cost.mu], ledger_room=ledger_room)
    gradient = step.release_gradient(budget.mu, diagnostics=diagnostics, meter=meter)
    return AdaptiveStep(
        norm=norm, gradient=gradient, noise_std=schedule.noise_std(gradient.cost.mu), final=budget.final
    )


# --------------------------------------------------------------- the paper's Algorithm 3
# For the record and the tests only (spec E3.7): zCDP units, add/remove-style sensitivity
# L₀/n as in the paper. The library never charges with these.


def paper_norm_sigma(*, lipschitz: float, num_users: int, rho: float) -> float:
    r"""Algorithm 3 line 3: the norm noise ``σ̂ = L₀/(√n ρ^{1/4})`` (a scalar, E3.6)."""
    return lipschitz / (math.sqrt(num_users) * rho**0.25)


def paper_sigma(noisy_norm: float, *, lipschitz: float, num_users: int, dim: int, rho: float, beta: float) -> float:
    r"""Algorithm 3 line 4: ``σ_t = max(N_t/√(d log(n√ρ/β)), 2L₀/(n√ρ))``."""
    root = math.sqrt(dim * math.log(num_users * math.sqrt(rho) / beta))
    return max(noisy_norm / root, 2.0 * lipschitz / (num_users * math.sqrt(rho)))


def paper_line6_zcdp(
    noisy_norm: float, *, lipschitz: float, num_users: int, dim: int, rho: float, beta: float
) -> float:
    r"""Algorithm 3 line 6, the paper's charge of one step (norm and gradient release):
    ``min(L₀² d log(n√ρ/β)/(n² N_t²), ρ/2) + √ρ/n`` (the minimum is ``ρ/2`` at
    ``N_t = 0``). Computed from ``N_t``, not from the ``σ_t`` used, so it under-counts
    when ``N_t`` is small or negative (E3.7)."""
    log_term = math.log(num_users * math.sqrt(rho) / beta)
    grad = (
        rho / 2.0
        if noisy_norm == 0.0
        else min(lipschitz**2 * dim * log_term / (num_users**2 * noisy_norm**2), rho / 2.0)
    )
    return grad + math.sqrt(rho) / num_users


def realized_zcdp(sigma: float, *, sensitivity: float, paper_constant: bool = False) -> float:
    r"""The zCDP cost of a Gaussian release with noise ``σ``: ``Δ²/(2σ²)``, or the paper's
    ``(Δ/σ)²`` when ``paper_constant`` (2× the true cost for the same ``Δ``, E3.1)."""
    ratio = (sensitivity / sigma) ** 2
    return ratio if paper_constant else ratio / 2.0
