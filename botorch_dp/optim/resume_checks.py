r"""The releases a resumed run has made, checked against its ledger: the public state of the
adaptive noise schedule and of the evaluated selection (Menart et al.), encoded and checked
against the config and the ledger's records, and the ledger's coverage of every step taken.
``run_state`` uses these when it encodes and checks a checkpoint's state."""

from __future__ import annotations

import math

from botorch_dp.optim.config import DPGIBOConfig
from botorch_dp.optim.options import Options, RunPlan, resolved_mu
from botorch_dp.optim.options.budget import recorded_mus
from botorch_dp.optim.report import run_plan
from botorch_dp.privacy.ledger import PrivacyLedger, release_key

__all__ = ["check_ledger_covers_steps", "recorded_mus", "step_parts"]


def step_parts(options: Options, plan: RunPlan) -> tuple[str, ...]:
    r"""The ledger parts of each of a run's steps (``release_key``'s ``parts``), as its strategies declare
    them: a noisy norm before the gradient where the noise schedule provides ``noisy_norms``, then what the
    clip policy and the step rule add to a step's charge (their ``bound_parts``). (The unsafe fit's part,
    a release without noise, is not among them: no check reads it.)"""
    noise = ("norm", "grad") if "noisy_norms" in options.noise.provides else ("grad",)
    return (*noise, *options.clip.bound_parts(plan), *options.step_rule.bound_parts(plan))


def check_ledger_covers_steps(config: DPGIBOConfig, ledger: PrivacyLedger, run_id: str, T: int, n: int | None) -> None:
    r"""``ValueError`` unless the checkpoint's ledger records every release of the ``T`` steps the run
    has taken (each of ``step_parts``). A state whose ledger lost records it had, however consistently
    edited, is refused here; the μ of each record is checked by the strategy whose release it is
    (its ``restore_state``: the fixed schedule's ``μ_g/√T``, the adaptive one's stored μ, the counts')."""
    if T == 0 or config.unsafe_allow_sensitive_fitting and math.isinf(resolved_mu(config.privacy_mu)):
        return
    recorded = recorded_mus(ledger, run_id)
    parts = step_parts(config.options, run_plan(config, config.options, config.bounds.shape[1], n, None))
    for t in range(T):
        for part in parts:
            key = release_key(t, part, parts)
            if key not in recorded:
                raise ValueError(
                    f"Checkpoint field 'ledger' lacks the release {key!r} of run {run_id!r}: the run has taken {T} "
                    "steps, so its ledger must record each of them. The checkpoint is inconsistent (edited or "
                    "damaged); it is refused."
                )
