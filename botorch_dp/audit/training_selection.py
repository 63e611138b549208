r"""Audit of the validation users' ``(ε, δ)`` of a private selection over training runs.

Release: ``select_training_runs(..., protect="both")`` (what ``tune(..., protect="both")`` and
``method="auto"`` run when the selection over training runs wins) releases the winning trial's
hyperparameters, model and score; each trial's score is a ``μ₀``-GDP Gaussian of the
``[0, C]``-clipped mean validation loss, the lowest wins, and the number of trials ``K`` (truncated
negative binomial, ``E[K]`` public) stays hidden. With the profile accounting the validation
ledger is charged ONE ``ValidationApproximateDP`` ``(ε, δ)`` and ``μ₀`` is calibrated to it
(``methods.selection_charge.validation_charge``): a claim that is an ``(ε, δ)`` pair, not a ``μ``.

Path: the pieces ``select_training_runs`` scores and releases with, called as it calls them:
``validation_charge`` on an empty ledger with ``accounting="auto"`` (refused here unless it
takes the profile, the release this row audits), ``validation_guarantee`` (the statement the
user reads: the claim), ``sample_num_trials`` for each run's ``K``, ``GaussianScoreMechanism``
(``loss_clip=C``, ``per_trial_mu=μ₀``, a ``noise_generator`` stream) for the ``K`` trial scores,
and the minimum over the run's trials (the released score). A whole ``select_training_runs``
call spends about two seconds calibrating its training noise, so the thousands of runs an
``(ε, δ)`` test needs are drawn here in one batched release per dataset (the scores of
separate runs are independent draws, as in separate calls); ``tests/audit`` checks that a
real ``select_training_runs(protect="both")`` call at these settings states the same
``(ε, δ)``, ``μ₀`` and noise.

Neighbours (replace one validation user): every user but the first has loss 0 on every
trial; the first user's loss is 0 on ``D`` and ``C`` on ``D′`` on every trial, so every
trial's clipped mean moves by the sensitivity ``C/n``. The winner's index (hence its
hyperparameters and model) has the same distribution on both; the released score is the
minimum of ``K`` scores shifted by ``C/n``, whose likelihood ratio is increasing in the score
(checked by quadrature in ``tests/audit``): the threshold test on it is the likelihood-ratio test.

Claim: the guarantee's ``(ε, δ)`` as the trade-off curve it implies
(``tradeoff_from_profile`` with the one pair: ``β ≥ max(1 − δ − e^ε α, e^{−ε}(1 − δ − α))``),
so ``claimed_mu``/``empirical_mu_lower`` compare in μ units at the counted false-positive
bound (``statistics.assess``) and ``empirical_epsilon_lower`` is
``max(log((1 − δ − β̄)/ᾱ), log((1 − δ − ᾱ)/β̄))`` from the Clopper–Pearson bounds; the lower
bound exceeds the claim exactly when that ``ε`` exceeds the claimed one. At the defaults
(``ε = 2``, ``δ = 10⁻⁵``, ``E[K] = 2``: ``μ₀ ≈ 0.434``) the exact ``ε`` of this design at
``δ`` is about 1.78 (quadrature), but a test on ``10⁵`` runs sees only rates above about
``10⁻³`` and bounds it near 1; the scores at half their noise (``ε ≈ 3.9`` exactly) are
shown above 2 at that size.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from botorch_dp.audit.loop import seeded_noise_allowed
from botorch_dp.audit.registry import audit_row
from botorch_dp.audit.statistics import (
    AuditResult,
    Observations,
    StatisticSampler,
    assess,
    sample_both,
    tradeoff_from_profile,
)
from botorch_dp.baselines.base import BaselineGuarantee
from botorch_dp.baselines.selection import timing_note
from botorch_dp.methods.selection_charge import validation_charge, validation_guarantee
from botorch_dp.privacy.analysis.private_selection import sample_num_trials
from botorch_dp.privacy.ledger import PrivacyLedger
from botorch_dp.privacy.mechanisms import GaussianScoreMechanism
from botorch_dp.privacy.seeding import noise_generator
from botorch_dp.utils import child_seeds

__all__ = ["audit_training_selection_score", "selection_score_charge"]

_DISTRIBUTION = "truncated_negative_binomial"  # select_training_runs' default (distribution="tnb"): K >= 1


def selection_score_charge(
    *, epsilon: float, delta: float, mean_trials: float, loss_clip: float, num_users: int, tnb_eta: float = 1.0
) -> tuple[dict[str, Any], BaselineGuarantee, dict[str, Any]]:
    r"""The scores' charge and statement as ``select_training_runs(protect="both", accounting="auto")``
    makes them on a ledger with no validation entry.

    Returns:
        ``(charge, guarantee, k_args)``: ``validation_charge``'s output (``charge["mu"]`` is ``μ₀``),
        the validation users' ``BaselineGuarantee`` (the claim), and the arguments of ``K``'s law.

    Raises:
        ValueError: The charge is not the profile's ``(ε, δ)`` (the release this row audits).
    """
    k_args: dict[str, Any] = dict(mean_trials=mean_trials, distribution=_DISTRIBUTION, tnb_eta=tnb_eta)
    charge = validation_charge(PrivacyLedger(), "auto", epsilon, delta, k_args)
    if charge["accounting"] != "profile":
        raise ValueError(
            f"At epsilon={epsilon!r}, delta={delta!r}, mean_trials={mean_trials!r} the scores are charged by "
            f"{charge['accounting']!r} ({charge['reason']}); this row audits the profile's (epsilon, delta) charge."
        )
    mechanism = GaussianScoreMechanism(loss_clip=loss_clip, per_trial_mu=charge["mu"])
    timing = timing_note(None, per_trial="training run", **k_args)
    guarantee = validation_guarantee(charge, delta, epsilon, loss_clip, num_users, mechanism, "loss", k_args, timing)
    return charge, guarantee, k_args


@audit_row(
    "training_selection_score",
    quick=100_000,
    full=1_000_000,
    description="select_training_runs(protect='both'): the winner's score, profile-charged (ε, δ)",
)
def audit_training_selection_score(
    *,
    num_runs: int,
    epsilon: float = 2.0,
    delta: float = 1e-5,
    mean_trials: float = 2.0,
    loss_clip: float = 1.0,
    num_users: int = 10,
    confidence: float = 0.95,
    seed: int = 0,
    name: str = "training_selection_score",
) -> AuditResult:
    r"""Audit the released score of a private selection over training runs against its ``(ε, δ)`` (see the module).

    Args:
        num_runs: Runs (selections) per dataset; all of a dataset's trial scores are one release.
        epsilon: ``validation_epsilon`` of the selection (the claim's ``ε``).
        delta: ``δ``.
        mean_trials: ``E[K]`` (truncated negative binomial, ``η = 1``).
        loss_clip: ``C``.
        num_users: ``n``, the validation users.
        confidence: Joint confidence of the lower bounds.
        seed: Seed of the audit.
        name: The row's name.

    Returns:
        The ``AuditResult``, with ``delta``, ``claimed_epsilon`` and ``empirical_epsilon_lower``.
    """
    charge, guarantee, k_args = selection_score_charge(
        epsilon=epsilon, delta=delta, mean_trials=mean_trials, loss_clip=loss_clip, num_users=num_users
    )

    def sampler(first_loss: float) -> StatisticSampler:
        def sample(num: int, stream: int) -> Observations:
            k_seed, noise_seed = child_seeds([stream, 6], 2)
            rng = np.random.default_rng(k_seed)
            trials = torch.tensor([sample_num_trials(rng=rng, **k_args) for _ in range(num)])
            losses = torch.zeros(int(trials.sum()), num_users, dtype=torch.float64)
            losses[:, 0] = first_loss
            with seeded_noise_allowed():
                generator = noise_generator(noise_seed, stream=1)
            mechanism = GaussianScoreMechanism(loss_clip=loss_clip, per_trial_mu=charge["mu"], generator=generator)
            scores = mechanism.release(losses).scores
            run = torch.repeat_interleave(torch.arange(num), trials)
            released = torch.full((num,), torch.inf, dtype=torch.float64).scatter_reduce(0, run, scores, "amin")
            return Observations(released)

        return sample

    obs_d, obs_d_prime = sample_both(sampler(0.0), sampler(loss_clip), num_runs=num_runs, seed=seed)
    claimed_epsilon, claimed_delta = guarantee.epsilon, guarantee.delta
    claim = tradeoff_from_profile(lambda _: claimed_delta, [claimed_epsilon])
    return assess(
        name, obs_d, obs_d_prime, claim, confidence=confidence, delta=claimed_delta, claimed_epsilon=claimed_epsilon
    )
