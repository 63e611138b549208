r"""Audit of ``tune``'s private choice among configurations, one whole ``tune`` call per run.

Row: ``tune_choice_score`` (``botorch_dp.tune`` on a space with a categorical hyperparameter
of two choices, so that it enumerates: one DP-GIBO run per configuration, then the Gaussian
score mechanism on each run's final point).

Neighbours: every user but the first has loss 0 everywhere; the first user's loss is 0 on
``D`` and ``C`` on ``D′`` at every point, so each configuration's clipped mean score moves by
the sensitivity ``C/n``. Statistic: the first configuration's released noisy score. Claim:
the per-score ``μ_score`` the call reports (``TuneResult.score_mu``, from the split of the
target ``(ε, δ)``); the target is set so that ``μ_score = 1``. This checks the noise ``tune``
adds through its own budget split, seeding and mechanism; the DP-GIBO runs inside are the
loop rows' subject, and the choice's composition is exact Gaussian DP (``tests/tuning``).
"""

from __future__ import annotations

import warnings

import torch

from botorch_dp.audit.loop import seeded_noise_allowed
from botorch_dp.audit.registry import audit_row
from botorch_dp.audit.statistics import AuditResult, Observations, StatisticSampler, run_audit
from botorch_dp.optim.options import FixedBatches, FixedClip
from botorch_dp.utils import child_seeds

__all__ = ["audit_tune_score"]


@audit_row("tune_choice_score", quick=300, full=5_000, description="tune: a configuration's noisy score")
def audit_tune_score(
    *,
    num_runs: int,
    score_mu: float = 1.0,
    selection_share: float = 0.5,
    loss_clip: float = 1.0,
    num_users: int = 10,
    delta: float = 1e-5,
    confidence: float = 0.95,
    seed: int = 0,
    name: str = "tune_choice_score",
) -> AuditResult:
    r"""Audit the first configuration's noisy score of whole ``tune`` calls (see the module)."""
    from botorch_dp.optim.public_checks import SettingsWarning
    from botorch_dp.privacy.analysis.gdp import gdp_epsilon
    from botorch_dp.tuning import Categorical, Hyperparameter, SearchSpace, tune

    space = SearchSpace([Hyperparameter("x", 0.0, 1.0), Categorical("c", ("a", "b"))])
    # μ_score = μ √(f/K) with K = 2: the target (ε, δ) whose μ gives the wanted μ_score
    epsilon = gdp_epsilon(score_mu * (2.0 / selection_share) ** 0.5, delta)

    def sampler(first_loss: float) -> StatisticSampler:
        losses = torch.zeros(1, num_users, dtype=torch.float64)
        losses[0, 0] = first_loss

        def objective(configs):
            return losses.expand(len(configs), num_users)

        def sample(num: int, stream: int) -> Observations:
            stats, claims = [], []
            with seeded_noise_allowed(), warnings.catch_warnings():
                warnings.simplefilter("ignore", SettingsWarning)  # ten users and one step: noisy on purpose
                for run_seed in child_seeds([stream, 5], num):
                    result = tune(
                        objective,
                        space,
                        epsilon=epsilon,
                        delta=delta,
                        seed=run_seed,
                        progress=False,
                        selection_share=selection_share,
                        loss_clip=loss_clip,
                        num_iterations=1,
                        batches=FixedBatches(1, maxiter=2),
                        raw_samples=2,
                        num_restarts=1,
                        clip=FixedClip(1.0),
                        method="dp_gibo",  # the enumerate procedure, whose scores this audits
                    )
                    noisy_score, score_mu = result.runs[0].noisy_score, result.score_mu
                    if noisy_score is None or score_mu is None:
                        raise RuntimeError("tune released no noisy score for its first configuration.")
                    stats.append(float(noisy_score))
                    claims.append(float(score_mu))
            return Observations(torch.tensor(stats, dtype=torch.float64), torch.tensor(claims, dtype=torch.float64))

        return sample

    return run_audit(name, sampler(0.0), sampler(loss_clip), num_runs=num_runs, seed=seed, confidence=confidence)
