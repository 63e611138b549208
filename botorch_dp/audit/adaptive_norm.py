r"""Audits of the adaptive noise schedule (``noise_schedule="adaptive_norm"``, Menart et al.):
a noisy gradient norm, then a gradient whose noise is scaled to it, under a GDP filter.

Rows: ``adaptive_norm_release`` (``DPGIBO`` with ``T_max = 2``) and
``noisy_gd_adaptive_norm`` (``baselines.noisy_gradient_descent`` with ``T_max = 3``), each a
whole run.

Neighbours: every user's gradient estimate is clipped; users ``2..n`` contribute ``+B u``,
the first user ``−B u`` on ``D`` and ``+B u`` on ``D′``. Every step's clipped mean is then
``(n − 2)B/n · u`` or ``B u``, so both the released norm ``N_t`` and the released gradient
along ``u`` move by exactly ``Δ = 2B/n`` at every step.

Statistic: the log-likelihood ratio of the run's releases up to an affine map,
``L = Σ_k μ_k² x_k`` over every release ``k`` (the norms ``x = N_t`` and the gradients
``x = uᵀ g_t``), each weighted by the ``μ_k`` the run reported for it (public: ``σ_k = Δ/μ_k``).
The filter makes the last step spend exactly the rest, so ``Σ μ_k² = μ²`` on every run and
``L`` is exactly ``N(∓μ²/2, μ²)`` in units of ``Δ`` however the ``μ_k`` were chosen: the
test on ``L`` reaches the claim ``μ`` (fully adaptive composition is tight here).
Claim: the run's reported total (the ledger's ``validation.mu()``; the guarantee's ``mu``
for noisy GD).
"""

from __future__ import annotations

import torch
from torch import Tensor

from botorch_dp.audit.loop import LARGE_SLOPE, audit_config, linear_users, loop_sampler, seeded_noise_allowed
from botorch_dp.audit.registry import audit_row
from botorch_dp.audit.statistics import AuditResult, Observations, StatisticSampler, run_audit
from botorch_dp.utils import child_seeds

__all__ = ["audit_adaptive_norm_release", "audit_noisy_gd_adaptive_norm", "release_llr"]


def release_llr(norms: list[float], norm_mus: list[float], gradients: Tensor, step_mus: list[float]) -> float:
    r"""``Σ_t (μ_{N,t}² N_t + μ_t² g_t)`` for 1-D gradients ``g_t`` (``T x 1``): the adaptive
    run's log-likelihood ratio up to an affine map (see the module)."""
    grads = gradients.reshape(-1).tolist()
    return sum(m * m * x for m, x in zip(norm_mus, norms, strict=True)) + sum(
        m * m * g for m, g in zip(step_mus, grads, strict=True)
    )


@audit_row(
    "adaptive_norm_release", quick=300, full=5_000, description="DPGIBO, noise_schedule='adaptive_norm', T_max = 2"
)
def audit_adaptive_norm_release(
    *,
    num_runs: int,
    privacy_mu: float = 1.0,
    max_iterations: int = 2,
    norm_mu_fraction: float = 0.5,
    num_users: int = 5,
    confidence: float = 0.95,
    seed: int = 0,
    name: str = "adaptive_norm_release",
) -> AuditResult:
    r"""Audit whole ``DPGIBO`` runs with ``noise_schedule="adaptive_norm"`` in ``d = 1`` (see the module).

    Args:
        num_runs: Runs per dataset.
        privacy_mu: ``μ`` of the run.
        max_iterations: ``T_max``.
        norm_mu_fraction: ``f_N``; the default 0.5 gives the norms half of ``μ²``, so a
            fault in the norm release alone shows too.
        num_users: ``n``.
        confidence: Joint confidence of the lower bound.
        seed: Seed of the audit.
        name: The row's name.
    """

    def sampler(first_sign: float) -> StatisticSampler:
        slopes = [first_sign * LARGE_SLOPE] + [LARGE_SLOPE] * (num_users - 1)

        def observe(opt, result):
            r, noise = result.release, result.release.records["noise"]
            llr = release_llr(noise.noisy_norms, noise.norm_mus, r.released_gradients, noise.step_mus)
            return llr, opt.ledger.validation.mu()

        return loop_sampler(
            linear_users(slopes),
            lambda s: audit_config(
                seed=s,
                num_iterations=max_iterations,
                privacy_mu=privacy_mu,
                noise_schedule="adaptive_norm",
                norm_mu_fraction=norm_mu_fraction,
            ),
            observe,
        )

    return run_audit(name, sampler(-1.0), sampler(1.0), num_runs=num_runs, seed=seed, confidence=confidence)


@audit_row(
    "noisy_gd_adaptive_norm", quick=1_000, full=20_000, description="noisy_gradient_descent, 'adaptive_norm', T_max = 3"
)
def audit_noisy_gd_adaptive_norm(
    *,
    num_runs: int,
    privacy_mu: float = 1.0,
    num_iterations: int = 3,
    norm_mu_fraction: float = 0.5,
    clip_bound: float = 1.0,
    num_users: int = 5,
    confidence: float = 0.95,
    seed: int = 0,
    name: str = "noisy_gd_adaptive_norm",
) -> AuditResult:
    r"""Audit whole ``noisy_gradient_descent`` runs with ``noise_schedule="adaptive_norm"`` (``d = 1``).

    The per-user gradient oracle returns ``±10⁴`` per user (see the module); the statistic
    is ``L`` over ``history.extras`` (``noisy_norms``, ``norm_mus``,
    ``released_gradients``, ``step_mus``), the claim ``result.guarantee.mu``.
    """
    from botorch_dp.baselines.noisy_gd import noisy_gradient_descent

    bounds = torch.tensor([[-1.0], [1.0]], dtype=torch.float64)

    def sampler(first_sign: float) -> StatisticSampler:
        gradients = torch.full((1, num_users, 1), LARGE_SLOPE, dtype=torch.float64)
        gradients[0, 0, 0] = first_sign * LARGE_SLOPE

        def sample(num: int, stream: int) -> Observations:
            stats, claims = [], []
            with seeded_noise_allowed():
                for run_seed in child_seeds([stream, 3], num):
                    result = noisy_gradient_descent(
                        lambda theta: gradients,
                        bounds,
                        num_iterations=num_iterations,
                        clip_bound=clip_bound,
                        step_size=0.1,
                        privacy_mu=privacy_mu,
                        noise_schedule="adaptive_norm",
                        norm_mu_fraction=norm_mu_fraction,
                        seed=run_seed,
                    )
                    x = result.history.extras
                    stats.append(release_llr(x["noisy_norms"], x["norm_mus"], x["released_gradients"], x["step_mus"]))
                    claims.append(result.private_guarantee().mu)
            return Observations(torch.tensor(stats, dtype=torch.float64), torch.tensor(claims, dtype=torch.float64))

        return sample

    return run_audit(name, sampler(-1.0), sampler(1.0), num_runs=num_runs, seed=seed, confidence=confidence)
