r"""``tune(strategy="sample")``: Papernot–Steinke private selection over DP-GIBO runs.

For a space with many categorical configurations: a hidden random number ``K`` of trials
(a truncated negative binomial with ``η = 1``, ``K ≥ 1``, mean ``E[K]``), each a uniformly
drawn configuration (public randomness), a DP-GIBO run on it at ``μ_run`` and the Gaussian
score of its final point at ``μ_score``, so that each trial is ``μ₀``-GDP with
``μ₀² = μ_run² + μ_score²`` (``μ_score² = f μ₀²``). The best-scoring trial is released:
its configuration, its DP-GIBO release and its noisy score. Papernot & Steinke (2022, Thm. 2)
bound the RDP of that release by the trial's curve (``privacy.analysis.private_selection``);
``μ₀`` is the largest whose bound is ``(ε, δ)`` at the target, and the whole curve is charged
to the ledger (one ``ValidationMechanism``) before the first trial. The trials' own releases
go to a ledger of their own (they are inside the selection's bound), and ``K`` and the other
trials stay hidden: ``TuneResult.runs`` holds the winner only.
"""

from __future__ import annotations

import functools
import math
import secrets
import uuid
from collections.abc import Callable
from typing import Any

import numpy as np

from botorch_dp.optim.options.fitting import FIT_PART
from botorch_dp.privacy.analysis.private_selection import (
    per_trial_mu_for_epsilon,
    private_selection_rdp,
    sample_num_trials,
)
from botorch_dp.privacy.analysis.rdp import rdp_to_epsilon
from botorch_dp.privacy.ledger import Gaussian, PrivacyLedger, ValidationMechanism
from botorch_dp.privacy.ledger.events import TRAINING_RDP_ORDERS, ValidationEvent
from botorch_dp.privacy.mechanisms import GaussianScoreMechanism
from botorch_dp.privacy.seeding import noise_generator
from botorch_dp.privacy.statement import guarantee_statement
from botorch_dp.tuning.search_space import SearchSpace
from botorch_dp.tuning.tune_result import (
    ConfigurationRun,
    TuneGuarantee,
    TuneObjective,
    TuneResult,
    configs_objective,
    final_losses,
)
from botorch_dp.utils import child_seeds

__all__ = ["SAMPLE_PART", "sample_configurations"]

#: The ledger part of the whole selection's RDP curve.
SAMPLE_PART = "sample"
DISTRIBUTION = "truncated_negative_binomial"


def sample_configurations(
    objective: TuneObjective,
    space: SearchSpace,
    run_one: Callable[[dict[str, Any], float, int | None, PrivacyLedger], ConfigurationRun],
    *,
    epsilon: float,
    delta: float,
    ledger: PrivacyLedger,
    mean_trials: float,
    selection_share: float,
    loss_clip: float,
    seed: int | None,
    progress: bool,
    holds: bool = True,
) -> TuneResult:
    r"""Run the sampled strategy (see the module); ``run_one(choice, μ_run, seed, ledger)`` is
    ``tune``'s DP-GIBO run of one configuration. ``holds=False`` (the runs' settings carry no
    guarantee: ``unsafe_allow_sensitive_fitting``) records ``μ = inf`` with the selection, before
    any trial (public: the settings, not ``K``), and the result states no guarantee."""
    # calibrated on the ledger's grid of orders, so the ledger's statement of the charged curve is within ε too
    per_trial_mu = per_trial_mu_for_epsilon(
        target_epsilon=epsilon,
        target_delta=delta,
        mean_trials=mean_trials,
        distribution=DISTRIBUTION,
        orders=TRAINING_RDP_ORDERS,
    )
    run_mu = per_trial_mu * math.sqrt(1.0 - selection_share)
    score_mu = per_trial_mu * math.sqrt(selection_share)
    rdp = functools.partial(
        private_selection_rdp, per_trial_mu=per_trial_mu, mean_trials=mean_trials, distribution=DISTRIBUTION
    )
    event = ValidationMechanism(
        f"tune (sample): Papernot & Steinke over K ~ {DISTRIBUTION} with E[K] = {mean_trials:g} DP-GIBO runs, "
        f"each run and its score {per_trial_mu:.4g}-GDP",
        tuple(rdp(order) for order in TRAINING_RDP_ORDERS),
    )
    selection_id = f"tune-sample-{uuid.uuid4().hex}"
    bound: dict[str, ValidationEvent] = {SAMPLE_PART: event}
    if not holds:
        bound[FIT_PART] = Gaussian(math.inf)
    with ledger.charge(bound, run_id=selection_id, new_run=True) as meter:  # before any trial
        for part, charged in bound.items():
            meter.record(part, charged)
    if seed is None:  # K and the configurations: public randomness, hidden, from OS entropy
        rng = np.random.default_rng(secrets.randbits(128))
        noise_gen = None
    else:
        rng = np.random.default_rng([int(seed), 1])
        noise_gen = noise_generator(child_seeds([int(seed), 2], 1)[0], stacklevel=4)
    num_trials = sample_num_trials(distribution=DISTRIBUTION, mean_trials=mean_trials, rng=rng)
    configurations = space.configurations()
    scorer = GaussianScoreMechanism(loss_clip=loss_clip, per_trial_mu=score_mu, generator=noise_gen)
    trial_seeds = [None] * num_trials if seed is None else child_seeds([int(seed), 3], num_trials)
    best: ConfigurationRun | None = None
    best_score = math.inf
    for k in range(num_trials):
        choice = configurations[int(rng.integers(len(configurations)))]
        run = run_one(choice, run_mu, trial_seeds[k], PrivacyLedger())  # inside the selection's bound
        losses = final_losses(
            configs_objective(objective, space, choice),
            run.result.release.theta,
            run.num_users,
            f"the final point of configuration {choice}",
        )
        run.noisy_score = score = float(scorer.release(losses).scores[0])
        if best is None or score < best_score:
            best, best_score = run, score
    assert best is not None  # K >= 1
    eps = rdp_to_epsilon(rdp, delta)[0] if holds else math.inf
    hyperparameters = space.to_natural(best.result.release.theta, choice=best.configuration)
    assert isinstance(hyperparameters, dict)  # the natural values of one point (a d-vector)
    return TuneResult(
        hyperparameters=dict(hyperparameters),
        guarantee=TuneGuarantee(math.nan, eps, delta),
        runs=[best],
        chosen=0,
        statement=guarantee_statement(ledger, delta),
        ledger=ledger,
        score_mu=score_mu,
    )
