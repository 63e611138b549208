r"""Audit of the private choice of the returned iterate, ``selection="exponential"`` (Menart et al.).

Path: ``DPGIBO(DPGIBOConfig(selection="exponential", selection_epsilon=ε, loss_clip=C, ...))``
driven by ``ask``/``tell``: one gradient step, then ``ask`` returns the iterates
``θ_0, θ_1`` and ``tell`` with their losses makes the choice.

Neighbours: every user but the first has loss 0 everywhere; the first user's loss is ``C``
at ``θ_0`` (the public start) and 0 elsewhere on ``D``, the reverse on ``D′``. At the two
iterates the clamped mean scores are ``(Δ, 0)`` and ``(0, Δ)``, ``Δ = C/n``, whatever
``θ_1`` is. Statistic: ``1{selected_index = 0}`` (``result().release``). Claim: the
selection's entry in the run's ledger (key ``"select"``), ``2Φ⁻¹(e^ε/(1 + e^ε))``.

With two candidates each outcome's log-likelihood ratio is ``ε/2``: an honest sampler
spends ``2Φ⁻¹(e^{ε/2}/(1 + e^{ε/2}))``, well below the charge. A sampler run at ``2ε`` (the
Gumbel noise halved) spends exactly the charge in this design, and no two-candidate test
can show more: a 2× fault is invisible here (the ledger's charge for a pure ``ε``-DP
release covers it). ``tests/audit/test_selection.py`` shows that a 4× fault is caught.
"""

from __future__ import annotations

import torch
from torch import Tensor

from botorch_dp.audit.loop import audit_config, ledger_entry, loop_sampler
from botorch_dp.audit.registry import audit_row
from botorch_dp.audit.statistics import AuditResult, StatisticSampler, run_audit
from botorch_dp.optim.options import Exponential
from botorch_dp.optim.options.selection import SELECTION_KEY

__all__ = ["audit_exponential_selection"]


@audit_row("exponential_selection", quick=300, full=5_000, description="DPGIBO, selection='exponential' over θ_0, θ_1")
def audit_exponential_selection(
    *,
    num_runs: int,
    epsilon: float = 1.0,
    privacy_mu: float = 2.0,
    loss_clip: float = 1.0,
    num_users: int = 5,
    confidence: float = 0.95,
    seed: int = 0,
    name: str = "exponential_selection",
) -> AuditResult:
    r"""Audit the exponential-mechanism choice of a ``DPGIBO`` run's returned iterate (see the module).

    Args:
        num_runs: Runs per dataset.
        epsilon: ``selection_epsilon``.
        privacy_mu: The run's total ``μ`` (the step gets ``√(μ² − μ_sel²)``).
        loss_clip: ``C``.
        num_users: ``n``.
        confidence: Joint confidence of the lower bound.
        seed: Seed of the audit.
        name: The row's name.
    """

    def sampler(at_start: float, elsewhere: float) -> StatisticSampler:
        def objective(X: Tensor) -> Tensor:
            losses = torch.zeros(X.shape[0], num_users, dtype=torch.float64)
            losses[:, 0] = torch.where((X == 0.0).all(-1), at_start, elsewhere)  # θ_0 = 0, the box centre
            return losses

        return loop_sampler(
            objective,
            lambda s: audit_config(seed=s, privacy_mu=privacy_mu, selection=Exponential(epsilon, loss_clip)),
            lambda opt, result: (float(result.release.selected_index == 0), ledger_entry(opt, SELECTION_KEY)),
        )

    return run_audit(
        name, sampler(loss_clip, 0.0), sampler(0.0, loss_clip), num_runs=num_runs, seed=seed, confidence=confidence
    )
