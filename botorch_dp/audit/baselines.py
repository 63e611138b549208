r"""Audits of the private baselines' trial scores, one whole baseline call per run.

Rows: ``private_random_search_score`` (``baselines.private_random_search``) and
``dp_hypo_score`` (``baselines.dp_hypo``).

Neighbours: every user but the first has loss 0 everywhere; the first user's loss is 0 on
``D`` and ``C`` on ``D′`` at every ``θ``, so every trial's clipped mean moves by the
sensitivity ``C/n``. Statistic: the run's first trial score
(``history.extras["noisy_scores"][0]`` of the NON-PRIVATE ``NonPrivateTrials`` that
``non_private_trials=True`` returns: an audit reads a hidden trial on purpose; a truncated
negative binomial number of trials is at least 1), one Gaussian score release. Claim: the
per-trial ``μ₀`` the run reports (``result.guarantee.details["per_trial_mu"]``, from which each
guarantee is built). This checks the noise each baseline adds
through its own argument handling, seeding and mechanism. The whole selection's bound
(Papernot & Steinke; DP-HyPO's) is an RDP statement of several ``ε`` at these settings, out
of reach of a test on this many runs; it is checked analytically
(``tests/privacy/analysis``). The released best score is not audited against ``μ₀``: as
the minimum of ``K`` scores it is more informative than one score, and is covered only by
the selection's bound.
"""

from __future__ import annotations

from typing import Any

import torch

from botorch_dp.audit.loop import seeded_noise_allowed
from botorch_dp.audit.registry import audit_row
from botorch_dp.audit.statistics import AuditResult, Observations, StatisticSampler, run_audit
from botorch_dp.utils import child_seeds

__all__ = ["audit_dp_hypo_score", "audit_score_release"]


def _constant_users(first_loss: float, num_users: int):
    losses = torch.zeros(1, num_users, dtype=torch.float64)
    losses[0, 0] = first_loss
    return lambda X: losses.expand(X.shape[0], num_users)


@audit_row(
    "private_random_search_score", quick=1_000, full=20_000, description="private_random_search: a trial's score"
)
def audit_score_release(
    *,
    num_runs: int,
    per_trial_mu: float = 1.0,
    mean_trials: float = 1.5,
    loss_clip: float = 1.0,
    num_users: int = 10,
    confidence: float = 0.95,
    seed: int = 0,
    name: str = "private_random_search_score",
) -> AuditResult:
    r"""Audit the first trial score of whole ``private_random_search`` runs (see the module)."""
    from botorch_dp.baselines.private_random_search import private_random_search

    bounds = torch.tensor([[0.0], [1.0]], dtype=torch.float64)

    def sampler(first_loss: float) -> StatisticSampler:
        objective = _constant_users(first_loss, num_users)

        def sample(num: int, stream: int) -> Observations:
            stats, claims = [], []
            with seeded_noise_allowed():
                for run_seed in child_seeds([stream, 4], num):
                    result = private_random_search(
                        objective,
                        bounds,
                        mean_trials=mean_trials,
                        per_trial_mu=per_trial_mu,
                        loss_clip=loss_clip,
                        seed=run_seed,
                        non_private_trials=True,
                    )
                    stats.append(_first_score(result))
                    claims.append(result.private_guarantee().details["per_trial_mu"])
            return Observations(torch.tensor(stats, dtype=torch.float64), torch.tensor(claims, dtype=torch.float64))

        return sample

    return run_audit(name, sampler(0.0), sampler(loss_clip), num_runs=num_runs, seed=seed, confidence=confidence)


@audit_row("dp_hypo_score", quick=1_000, full=10_000, description="dp_hypo: a trial's score")
def audit_dp_hypo_score(
    *,
    num_runs: int,
    per_trial_mu: float = 1.0,
    loss_clip: float = 1.0,
    num_users: int = 10,
    mean_trials: float = 1.5,
    ratio_bound: float = 1.0,
    confidence: float = 0.95,
    seed: int = 0,
    name: str = "dp_hypo_score",
) -> AuditResult:
    r"""Audit DP-HyPO's first trial score, one whole ``dp_hypo`` call per run (see the module).

    ``ratio_bound = 1`` by default: the first trial is drawn from the prior whatever the
    ratio, and no GP is fitted.
    """
    from botorch_dp.baselines.dp_hypo import dp_hypo

    bounds = torch.tensor([[0.0], [1.0]], dtype=torch.float64)

    def sampler(first_loss: float) -> StatisticSampler:
        objective = _constant_users(first_loss, num_users)

        def sample(num: int, stream: int) -> Observations:
            stats, claims = [], []
            with seeded_noise_allowed():
                for run_seed in child_seeds([stream, 1], num):
                    result = dp_hypo(
                        objective,
                        bounds,
                        mean_trials=mean_trials,
                        per_trial_mu=per_trial_mu,
                        loss_clip=loss_clip,
                        ratio_bound=ratio_bound,
                        num_candidates=8,
                        seed=run_seed,
                        non_private_trials=True,
                    )
                    stats.append(_first_score(result))
                    claims.append(result.private_guarantee().details["per_trial_mu"])
            return Observations(torch.tensor(stats, dtype=torch.float64), torch.tensor(claims, dtype=torch.float64))

        return sample

    return run_audit(name, sampler(0.0), sampler(loss_clip), num_runs=num_runs, seed=seed, confidence=confidence)


def _first_score(result: Any) -> float:
    r"""The first trial's noisy score, read from the NON-PRIVATE trials of a selection."""
    from botorch_dp.baselines.selection import NonPrivateTrials

    assert isinstance(result, NonPrivateTrials)  # non_private_trials=True
    return float(result.history.extras["noisy_scores"][0])
