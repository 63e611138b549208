r"""Audit of adaptive clipping's noisy count (``clip_bound="adaptive"``, Andrew et al. 2021).

Path: ``DPGIBO(DPGIBOConfig(clip_bound="adaptive", clip_init=B₀, ...))``, one step, which
releases the gradient clipped at ``B₀`` and the noisy number of users whose estimate is
within ``B₀``. Neighbours (``d = 1``): users ``2..n`` have losses ``θ/4`` (estimates of
about ``1/4``, within ``B₀ = 1``); the first user's loss is ``10⁴ θ`` on ``D`` (far above)
and 0 on ``D′`` (estimate 0, within). The exact counts are ``n − 1`` and ``n``, one apart
(the count's sensitivity). Statistic: the released count ``b̃_0``
(``result().release.records["clip"].counts``). Claim: its ledger entry (key ``"step-0000/clip"``,
``μ_C/√T``).
"""

from __future__ import annotations

import math

from botorch_dp.audit.loop import LARGE_SLOPE, audit_config, ledger_entry, linear_users, loop_sampler
from botorch_dp.audit.registry import audit_row
from botorch_dp.audit.statistics import AuditResult, StatisticSampler, run_audit
from botorch_dp.optim.options import QuantileClip
from botorch_dp.optim.options.clip import CLIP_KEY
from botorch_dp.privacy.ledger import release_key

__all__ = ["audit_clip_count_release"]


@audit_row("adaptive_clip_count", quick=300, full=5_000, description="DPGIBO, clip_bound='adaptive': the noisy count")
def audit_clip_count_release(
    *,
    num_runs: int,
    privacy_mu: float = math.sqrt(2.0),
    clip_mu_fraction: float = 0.5,
    clip_init: float = 1.0,
    num_users: int = 5,
    confidence: float = 0.95,
    seed: int = 0,
    name: str = "adaptive_clip_count",
) -> AuditResult:
    r"""Audit the clip count of one ``DPGIBO`` step with ``clip_bound="adaptive"`` (see the module).

    The defaults give the count ``μ_C = μ √f_C = 1`` (and the gradient the same).
    """

    def sampler(first_slope: float) -> StatisticSampler:
        slopes = [first_slope] + [0.25 * clip_init] * (num_users - 1)
        return loop_sampler(
            linear_users(slopes),
            lambda s: audit_config(
                seed=s,
                privacy_mu=privacy_mu,
                clip=QuantileClip(clip_init, fraction=clip_mu_fraction),
            ),
            lambda opt, result: (
                float(result.release.records["clip"].counts[0]),
                ledger_entry(opt, release_key(0, CLIP_KEY, ("grad", CLIP_KEY))),
            ),
        )

    return run_audit(name, sampler(LARGE_SLOPE), sampler(0.0), num_runs=num_runs, seed=seed, confidence=confidence)
