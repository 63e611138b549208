r"""Audits of Kairouz et al.'s releases in DP-GIBO: the public-subspace gradient release and
the private AdaGrad preconditioner, each through ``DPGIBO`` with the option set on its config.

``projected_gradient_release``: ``DPGIBOConfig(subspace=FixedSubspace(v))`` in ``d = 2``
with ``k = 1``, ``v = (1, 1)/√2``, one step. Every user but the first has loss 0; the first
user's loss is ``−10⁴ vᵀθ`` on ``D`` and ``10⁴ (v + w)ᵀθ`` on ``D′`` with ``w ⟂ v``: the
projection drops ``w`` and clipping in one coordinate sends both estimates to ``∓B``, so
the projected means differ by exactly ``Δ = 2B/n``. Statistic: the released coordinate
``ũ_0`` (``result().release.records["projection"].coordinates``). Claim: the ledger's ``validation.mu()``.

``private_preconditioner``: ``DPGIBOConfig(step_rule="adagrad_full", preconditioner="private")``
in ``d = 2`` (no subspace), one step, ``n = 100``. Users ``2..n`` have losses ``10⁴ θ₁``
(clipped to about ``B e₁``), the first user ``∓10⁴ θ₂`` (clipped to about ``∓B e₂``): the
clipped means differ by ``Δ`` nearly orthogonally to the mean itself, the rank-one worst
case of ``G = (ū ūᵀ)^{1/2}``, where ``‖G − G′‖_F`` is close to its bound ``√2 Δ``.
The clean ``G`` and ``G′`` depend on the batch through the GP's small direction errors, and
that spread would swamp the signal; but the batch is public (``result().release.evaluation_points``)
and the auditor knows both datasets, so the statistic conditions on it: with ``G(X)``,
``G′(X)`` recomputed from the run's public batch and kernel, it is
``⟨Ĝ_0 − (G + G′)/2, E⟩_F`` with ``E`` the unit direction of ``G′ − G``, on the released
``Ĝ_0`` (``result().release.records["step_rule"].preconditioners``): the likelihood-ratio test of the
isotropic GOE noise given the batch. Claim: the preconditioner's ledger entry (key
``"step-0000/precond"``, ``μ_H/√T``).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import Tensor

from botorch_dp.audit.loop import LARGE_SLOPE, audit_config, ledger_entry, linear_users, loop_sampler
from botorch_dp.audit.registry import audit_row
from botorch_dp.audit.statistics import AuditResult, StatisticSampler, run_audit
from botorch_dp.gradient_gp import GradientGP
from botorch_dp.optim import DPGIBO, DPGIBOResult
from botorch_dp.optim.subspace import FixedSubspace
from botorch_dp.privacy.mechanisms import clipped_mean_gradient, gram_sqrt

__all__ = ["audit_private_preconditioner", "audit_projected_release"]


@audit_row(
    "projected_gradient_release", quick=300, full=5_000, description="DPGIBO with a FixedSubspace (k = 1 of d = 2)"
)
def audit_projected_release(
    *,
    num_runs: int,
    privacy_mu: float = 1.0,
    num_users: int = 5,
    confidence: float = 0.95,
    seed: int = 0,
    name: str = "projected_gradient_release",
) -> AuditResult:
    r"""Audit one ``DPGIBO`` step released in a public one-dimensional subspace of ``d = 2`` (see the module)."""
    v = torch.tensor([1.0, 1.0], dtype=torch.float64) / math.sqrt(2.0)
    w = torch.tensor([1.0, -1.0], dtype=torch.float64) / math.sqrt(2.0)
    oracle = FixedSubspace(v.unsqueeze(-1))

    def sampler(slope: float, direction: torch.Tensor) -> StatisticSampler:
        directions = torch.zeros(num_users, 2, dtype=torch.float64)
        directions[:, :] = v
        directions[0] = direction / direction.norm()
        slopes = [slope * float(direction.norm())] + [0.0] * (num_users - 1)
        return loop_sampler(
            linear_users(slopes, directions),
            lambda s: audit_config(dim=2, seed=s, privacy_mu=privacy_mu, subspace=oracle),
            lambda opt, result: (
                float(result.release.records["projection"].coordinates[0][0]),
                opt.ledger.validation.mu(),
            ),
        )

    return run_audit(
        name, sampler(-LARGE_SLOPE, v), sampler(LARGE_SLOPE, v + w), num_runs=num_runs, seed=seed, confidence=confidence
    )


@audit_row(
    "private_preconditioner", quick=400, full=5_000, description="DPGIBO, adagrad_full with preconditioner='private'"
)
def audit_private_preconditioner(
    *,
    num_runs: int,
    privacy_mu: float = math.sqrt(2.0),
    num_users: int = 100,
    confidence: float = 0.95,
    seed: int = 0,
    name: str = "private_preconditioner",
) -> AuditResult:
    r"""Audit the private preconditioner released by one ``DPGIBO`` step in ``d = 2`` (see the module).

    The default ``μ = √2`` splits into ``μ_g = μ_H = 1`` (``preconditioner_mu_fraction = 0.5``).
    """
    directions = torch.zeros(num_users, 2, dtype=torch.float64)
    directions[:, 0] = 1.0
    directions[0] = torch.tensor([0.0, 1.0], dtype=torch.float64)
    others = [LARGE_SLOPE] * (num_users - 1)
    objective_d, objective_d_prime = (linear_users([sign * LARGE_SLOPE] + others, directions) for sign in (-1.0, 1.0))

    def observe(opt: DPGIBO, result: DPGIBOResult) -> tuple[float, float]:
        release = result.release
        X = release.evaluation_points[: release.batch_sizes[0]]  # step 0's batch (public)
        gp = GradientGP(X, opt.kernel, opt.noise_variance, jitter=opt.config.jitter)
        A = gp.gradient_weights(release.iterates[0])
        clip_bound = opt.config.clip_bound
        if isinstance(clip_bound, str):
            raise ValueError(f"This audit needs a fixed clip_bound, got {clip_bound!r}.")
        G, G_prime = (
            gram_sqrt(clipped_mean_gradient(A, f(X), clip_bound)[0].unsqueeze(-1))
            for f in (objective_d, objective_d_prime)
        )
        E = (G_prime - G) / (G_prime - G).norm()
        statistic = float(((release.records["step_rule"].preconditioners[0] - (G + G_prime) / 2) * E).sum())
        return statistic, ledger_entry(opt, "step-0000/precond")

    def sampler(objective: Callable[[Tensor], Tensor]) -> StatisticSampler:
        return loop_sampler(
            objective,
            lambda s: audit_config(
                dim=2, seed=s, privacy_mu=privacy_mu, step_rule="adagrad_full", preconditioner="private"
            ),
            observe,
        )

    return run_audit(
        name, sampler(objective_d), sampler(objective_d_prime), num_runs=num_runs, seed=seed, confidence=confidence
    )
