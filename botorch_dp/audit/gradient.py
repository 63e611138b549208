r"""Audits of DP-GIBO's fixed-schedule gradient releases, driven as a user drives the loop.

Rows: ``gradient_release`` (one step, ``d = 1``, seeded), ``gradient_release_overflow``
(the same with losses near ``1e308`` on ``D′``), ``gradient_release_os_entropy`` (the same
with the library's default unseeded noise, drawn from OS entropy) and ``dp_gibo_loop`` (a
whole ``DPGIBO.run`` of three steps in ``d = 2``).

Neighbours: every user but the first has zero losses; the first user's loss is
``−10⁴ uᵀθ`` on ``D`` and ``10⁴ uᵀθ`` on ``D′``, or, for the overflow row,
``10³⁰⁸ tanh(10³ uᵀθ)`` on ``D′``: finite losses of nearly the largest float64 magnitude,
with opposite signs on the two sides of ``θ₀``, so that ``A y`` overflows to ``inf`` (and
clipping ``inf`` gives NaN) unless the mechanism scales before it multiplies (the batch's
gradient weights are of size 2–7 here). Both estimates are clipped to ``∓B`` along ``u``,
so every step's clipped mean moves by ``Δ = 2B/n``.
Statistic: ``Σ_t uᵀ g_t`` over the released gradients (``result().release``). Claim: the
run's ledger, ``validation.mu()`` (``μ`` for a whole run).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from botorch_dp.audit.loop import LARGE_SLOPE, audit_config, linear_users, loop_sampler, unit_direction
from botorch_dp.audit.registry import audit_row
from botorch_dp.audit.statistics import AuditResult, StatisticSampler, run_audit

__all__ = ["audit_dp_gibo", "audit_gradient_release", "overflowing_user"]


# decorators apply bottom-up: the row nearest the function is registered first
@audit_row(
    "gradient_release_os_entropy",
    quick=300,
    full=5_000,
    seeded=False,
    description="one DP-GIBO step with the default noise from OS entropy (no seed)",
)
@audit_row(
    "gradient_release_overflow",
    quick=300,
    full=5_000,
    overflow=True,
    description="one DP-GIBO step, the first user's losses near 1e308 on D′",
)
@audit_row("gradient_release", quick=300, full=5_000, description="one DP-GIBO step (d = 1), seeded noise")
def audit_gradient_release(
    *,
    num_runs: int,
    privacy_mu: float = 1.0,
    num_steps: int = 1,
    clip_bound: float = 1.0,
    num_users: int = 5,
    overflow: bool = False,
    seeded: bool = True,
    confidence: float = 0.95,
    seed: int = 0,
    name: str = "gradient_release",
) -> AuditResult:
    r"""Audit ``DPGIBO`` runs of ``num_steps`` fixed-schedule steps in ``d = 1`` (see the module).

    Args:
        num_runs: Runs per dataset.
        privacy_mu, num_steps, clip_bound, num_users: The run's ``μ``, ``T``, ``B`` and ``n``.
        overflow: The first user's loss on ``D′`` is ``10³⁰⁸ tanh(10³ uᵀθ)`` instead of ``10⁴ uᵀθ``.
        seeded: Seed each run's noise from the audit's seed (default); ``False`` leaves
            ``DPGIBOConfig.seed`` at ``None``, so the noise comes from OS entropy and the
            result is not reproducible.
        confidence: Joint confidence of the lower bound.
        seed: Seed of the audit.
        name: The row's name.
    """
    u = unit_direction(1)

    def sampler(objective: Callable[[Tensor], Tensor]) -> StatisticSampler:
        return loop_sampler(
            objective,
            lambda s: audit_config(seed=s, num_iterations=num_steps, privacy_mu=privacy_mu, clip_bound=clip_bound),
            lambda opt, result: (float((result.release.released_gradients @ u).sum()), opt.ledger.validation.mu()),
            seeded=seeded,
        )

    others = [0.0] * (num_users - 1)
    d_prime = overflowing_user(num_users) if overflow else linear_users([LARGE_SLOPE] + others)
    return run_audit(
        name,
        sampler(linear_users([-LARGE_SLOPE] + others)),
        sampler(d_prime),
        num_runs=num_runs,
        seed=seed,
        confidence=confidence,
    )


def overflowing_user(num_users: int) -> Callable[[Tensor], Tensor]:
    r"""Losses ``10³⁰⁸ tanh(10³ uᵀθ)`` for the first user and 0 for the others: finite, but
    ``A y`` overflows float64 for gradient weights above about 1.8."""

    def objective(X: Tensor) -> Tensor:
        losses = torch.zeros(X.shape[0], num_users, dtype=torch.float64)
        losses[:, 0] = 1e308 * torch.tanh(1e3 * (X.to(torch.float64) @ unit_direction(X.shape[-1])))
        return losses

    return objective


@audit_row("dp_gibo_loop", quick=200, full=2_000, description="a whole DPGIBO.run: T = 3 steps in d = 2")
def audit_dp_gibo(
    *,
    num_runs: int,
    privacy_mu: float = 1.0,
    num_iterations: int = 3,
    clip_bound: float = 1.0,
    num_users: int = 5,
    dim: int = 2,
    confidence: float = 0.95,
    seed: int = 0,
    name: str = "dp_gibo_loop",
) -> AuditResult:
    r"""Audit whole runs of ``DPGIBO.run(objective)`` (batch selection, releases, steps).

    The first user's loss is ``∓10⁴ uᵀθ`` on ``D``/``D′`` (``u = (1, …, 1)/√d``), the
    others' 0; with ``d = 2`` the GP's estimate points along ``u`` up to a small error, so
    each step moves the clipped mean by about ``Δ`` along ``u``. Statistic ``Σ_t uᵀ g_t``;
    claim: the ``μ`` of the run's guarantee (``result.release.guarantee.mu``, its ledger's).
    """
    u = unit_direction(dim)

    def sampler(sign: float):
        slopes = [sign * LARGE_SLOPE] + [0.0] * (num_users - 1)
        return loop_sampler(
            linear_users(slopes),
            lambda s: audit_config(
                dim=dim, seed=s, num_iterations=num_iterations, privacy_mu=privacy_mu, clip_bound=clip_bound
            ),
            lambda opt, result: (float((result.release.released_gradients @ u).sum()), result.release.guarantee.mu),
            via_run=True,
        )

    return run_audit(name, sampler(-1.0), sampler(1.0), num_runs=num_runs, seed=seed, confidence=confidence)
