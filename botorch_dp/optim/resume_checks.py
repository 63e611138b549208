r"""The releases a resumed run has made, checked against its ledger: the public state of the
adaptive noise schedule and of the evaluated selection (Menart et al.), encoded and checked
against the config and the ledger's records, and the ledger's coverage of every step taken.
``run_state`` uses these when it encodes and checks a checkpoint's state."""

from __future__ import annotations

import math

from botorch_dp.optim.config import DPGIBOConfig
from botorch_dp.optim.options import resolved_mu
from botorch_dp.optim.options.budget import recorded_mus
from botorch_dp.privacy.ledger import PrivacyLedger, release_key

__all__ = ["check_ledger_covers_steps", "recorded_mus"]


def check_ledger_covers_steps(config: DPGIBOConfig, ledger: PrivacyLedger, run_id: str, T: int, n: int | None) -> None:
    r"""``ValueError`` unless the checkpoint's ledger records every release of the ``T`` steps
    the run has taken: the gradient of each step at the config's ``μ_g/√T`` (the fixed
    schedule), the clip count or the preconditioner where the config releases one, the norm
    and gradient of an adaptive step (their μ are checked against the noise lists). A state
    whose ledger lost records it had, however consistently edited, is refused here."""

    if T == 0 or config.unsafe_allow_sensitive_fitting and math.isinf(resolved_mu(config.privacy_mu)):
        return
    recorded = recorded_mus(ledger, run_id)
    adaptive = "noisy_norms" in config.noise.provides  # the steps release a norm before the gradient
    parts = ["norm", "grad"] if adaptive else ["grad"]
    mu_g, mu_c, mu_h = config.mu_split.gradient_mu, config.mu_split.clip_mu, config.mu_split.precond_mu
    if mu_c is not None:
        parts.append("clip")
    if mu_h is not None:
        parts.append("precond")
    grad_mu = None if adaptive else mu_g / math.sqrt(config.num_iterations)
    for t in range(T):
        for part in parts:
            key = release_key(t, part, parts)
            if key not in recorded:
                raise ValueError(
                    f"Checkpoint field 'ledger' lacks the release {key!r} of run {run_id!r}: the run has taken {T} "
                    "steps, so its ledger must record each of them. The checkpoint is inconsistent (edited or "
                    "damaged); it is refused."
                )
            if (
                part == "grad"
                and grad_mu is not None
                and not any(math.isclose(v, grad_mu, rel_tol=1e-12) for v in recorded[key])
            ):
                raise ValueError(
                    f"Checkpoint field 'ledger': release {key!r} of run {run_id!r} was not charged "
                    f"mu={grad_mu:.6g}, the config's per-step mu; the checkpoint is refused."
                )
