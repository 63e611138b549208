r"""Audit of the adaptive schedule under a tight shared ledger, with a user who retries refused steps.

The path: ``DPGIBO(DPGIBOConfig(noise_schedule="adaptive_norm", ...), ledger=ledger)`` with
``ledger = PrivacyLedger(validation_mu_budget=b)`` and ``b`` below the schedule's total
``μ``, so that the ledger refuses some steps (``PrivacyBudgetExceeded``). ``tell`` is atomic
and invites a retry after a failure; the user here retries a refused ``tell`` up to
``max_retries`` times and stops after the first accepted step (a later step cannot fit:
what is left of ``b`` is below one norm release, and the ledger refuses it before any
noise). The noise is the library's default, from OS entropy: a retry draws new noise
(with a seeded run the rollback would replay the same draw, and a retry would change
nothing).

Neighbours (``d = 1``, ``n`` users, clip ``B``): users ``2..n`` have gradient estimates far
above ``B`` along ``+u``, the first user along ``−u`` on ``D`` and ``+u`` on ``D′``, so the
clipped mean's norm is ``(n − 2)B/n`` or ``B`` (``Δ = 2B/n`` apart), as in
``adaptive_norm``.

Design: the step's norm release ``N`` costs ``μ_N``; its gradient release costs
``μ_t(N) = clamp(Δ c_snr/N, μ_min, μ_max)``, larger for smaller ``N``. The budget is
``b = √(μ_N² + r²)`` with ``μ_min < r < μ_max``: a step whose ``μ_t(N) > r`` does not fit.
``c_snr`` puts the cut ``μ_t(N) = r`` at ``N = τ`` with ``P(N < τ) = refusal_probability``
on ``D`` (``D′``, whose norm is larger by ``Δ``, is refused less often).

What the user observes: the number of refusals before the accepted step (or
``max_retries + 1`` if every try was refused) and, if accepted, the step's releases.
Statistic: ``−refusals + (1/2 + atan(L)/π)``, with ``L`` the releases' likelihood ratio as
in ``adaptive_norm.release_llr`` (0 without a release): the count decides, ``L`` breaks ties.
Claim: what the ledger reports after the run, ``ledger.validation.mu()``.

Before issue 28's fix the norm was released and recorded before the gradient's ``μ_t`` was
checked; the refusal (``N < τ``) rolled the ledger back to its snapshot, which erased the
norm's record, so each refused try was an unrecorded release of ``N`` and their number told
``D`` from ``D′`` (the row reported ``empirical_mu_lower > claimed_mu``: lower bound 1.59 for a
claimed 1.134). Now the schedule plans with what the ledger has left (one check) and the
step's worst case is admitted before any draw: the step is accepted at its first try, within
the budget, and the row is sound.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, TypedDict

import torch
from scipy.stats import norm
from torch import Tensor

from botorch_dp.audit.adaptive_norm import release_llr
from botorch_dp.audit.loop import LARGE_SLOPE, audit_config, linear_users
from botorch_dp.audit.registry import audit_row
from botorch_dp.audit.statistics import AuditResult, Observations, StatisticSampler, run_audit
from botorch_dp.optim import DPGIBO, DPGIBOConfig, PrivateRelease
from botorch_dp.privacy import PrivacyBudgetExceeded, PrivacyLedger

if TYPE_CHECKING:
    from typing import Unpack  # Python 3.11

__all__ = ["audit_tight_ledger_retries", "retrying_step", "tight_ledger_design", "tight_ledger_setting"]


def retrying_step(
    optimizer: DPGIBO, objective: Callable[[Tensor], Tensor], *, max_retries: int
) -> tuple[int, PrivateRelease]:
    r"""One step as the user of this audit makes it: ``ask``, then ``tell`` until it is accepted
    or was refused (``PrivacyBudgetExceeded``) ``max_retries + 1`` times.

    Returns:
        The number of refusals (``max_retries + 1``: every try refused) and ``result().release``.
    """
    X = optimizer.ask()
    losses = objective(X)
    refusals = 0
    while refusals <= max_retries:
        try:
            optimizer.tell(X, losses)
            break
        except PrivacyBudgetExceeded:
            refusals += 1
    return refusals, optimizer.result().release


def tight_ledger_design(
    *,
    privacy_mu: float,
    max_iterations: int,
    norm_mu_fraction: float,
    max_step_mu: float,
    room_mu: float,
    refusal_probability: float,
    num_users: int,
    clip_bound: float,
) -> dict[str, float]:
    r"""The budget ``b`` and ``c_snr`` of the design (see the module), from public settings.

    Returns:
        ``{"budget": b, "snr_factor": c_snr, "norm_mu": μ_N, "min_step_mu": μ_min}``.
    """
    norm_mu = privacy_mu * math.sqrt(norm_mu_fraction / max_iterations)
    min_step_mu = min(privacy_mu / (2.0 * math.sqrt(max_iterations)), max_step_mu)
    if not min_step_mu < room_mu < max_step_mu:
        raise ValueError(f"room_mu must lie between μ_min = {min_step_mu:.4g} and μ_max = {max_step_mu:.4g}.")
    sensitivity = 2.0 * clip_bound / num_users
    cut = (num_users - 2) * clip_bound / num_users + norm.ppf(refusal_probability) * sensitivity / norm_mu
    return {
        "budget": math.hypot(norm_mu, room_mu),
        "snr_factor": cut * room_mu / sensitivity,  # d = 1: μ_t(N) = Δ c_snr / N
        "norm_mu": norm_mu,
        "min_step_mu": min_step_mu,
    }


class TightLedgerSettings(TypedDict):
    r"""The keyword arguments of ``tight_ledger_design`` and ``tight_ledger_setting``."""

    privacy_mu: float
    max_iterations: int
    norm_mu_fraction: float
    max_step_mu: float
    room_mu: float
    refusal_probability: float
    num_users: int
    clip_bound: float


def tight_ledger_setting(**settings: Unpack[TightLedgerSettings]) -> tuple[DPGIBOConfig, dict[str, float]]:
    r"""The row's unseeded ``DPGIBOConfig`` and its ``tight_ledger_design`` (same keyword arguments)."""
    design = tight_ledger_design(**settings)
    config = audit_config(
        seed=None,
        num_iterations=int(settings["max_iterations"]),
        privacy_mu=settings["privacy_mu"],
        clip_bound=settings["clip_bound"],
        noise_schedule="adaptive_norm",
        norm_mu_fraction=settings["norm_mu_fraction"],
        max_step_mu=settings["max_step_mu"],
        snr_factor=design["snr_factor"],
    )
    return config, design


@audit_row(
    "adaptive_norm_tight_ledger",
    quick=400,
    full=3_000,
    description="'adaptive_norm' with a ledger budget below the schedule's μ, refused tells retried; OS-entropy noise",
)
def audit_tight_ledger_retries(
    *,
    num_runs: int,
    privacy_mu: float = 1.8,
    max_iterations: int = 3,
    norm_mu_fraction: float = 0.9,
    max_step_mu: float = 0.6,
    room_mu: float = 0.56,
    refusal_probability: float = 0.98,
    max_retries: int = 25,
    num_users: int = 5,
    clip_bound: float = 1.0,
    confidence: float = 0.95,
    seed: int = 0,
    name: str = "adaptive_norm_tight_ledger",
) -> AuditResult:
    r"""Audit one ``adaptive_norm`` step under a tight ledger, retried after refusals (see the module).

    The runs draw their noise from OS entropy, so the result is not reproducible (``seed``
    only names the audit); its bound holds at ``confidence`` like any other row's.

    Args:
        num_runs: Runs per dataset.
        privacy_mu: The schedule's total ``μ`` (above the ledger's budget).
        max_iterations: ``T_max`` of the schedule.
        norm_mu_fraction: ``f_N`` (``μ_N = μ √(f_N/T_max)``).
        max_step_mu: ``μ_max``.
        room_mu: ``r``: the ledger's budget is ``√(μ_N² + r²)``.
        refusal_probability: Chance that one try is refused on ``D`` when the ledger
            decides after the norm release (sets ``c_snr``).
        max_retries: Retries after the first refused ``tell``.
        num_users: ``n``.
        clip_bound: ``B``.
        confidence: Joint confidence of the lower bound.
        seed: Seed of the audit (the noise is not seeded).
        name: The row's name.
    """
    config, design = tight_ledger_setting(
        privacy_mu=privacy_mu,
        max_iterations=max_iterations,
        norm_mu_fraction=norm_mu_fraction,
        max_step_mu=max_step_mu,
        room_mu=room_mu,
        refusal_probability=refusal_probability,
        num_users=num_users,
        clip_bound=clip_bound,
    )

    def sampler(first_sign: float) -> StatisticSampler:
        objective = linear_users([first_sign * LARGE_SLOPE] + [LARGE_SLOPE] * (num_users - 1))

        def sample(num: int, stream: int) -> Observations:
            stats, claims = [], []
            for _ in range(num):
                ledger = PrivacyLedger(validation_mu_budget=design["budget"])
                refusals, release = retrying_step(DPGIBO(config, ledger=ledger), objective, max_retries=max_retries)
                noise = release.records["noise"]
                llr = release_llr(noise.noisy_norms, noise.norm_mus, release.released_gradients, noise.step_mus)
                stats.append(-refusals + 0.5 + math.atan(llr) / math.pi)
                claims.append(ledger.validation.mu())
            return Observations(torch.tensor(stats, dtype=torch.float64), torch.tensor(claims, dtype=torch.float64))

        return sample

    return run_audit(name, sampler(-1.0), sampler(1.0), num_runs=num_runs, seed=seed, confidence=confidence)
