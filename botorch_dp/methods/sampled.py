r"""The sampled strategy (``tune(strategy="sample")``): Papernot–Steinke private selection over DP-GIBO runs.

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
trials stay hidden: ``TuneResult.runs`` holds the winner only (its settings without the trial's
seed), the progress output is one bar that counts nothing (the trials draw none), the warnings
of the losing trials are dropped (the winner's are shown once the selection is over), a
non-finite loss in a trial's score counts 0 (``"zero_user"``) and any error during the trials is
one ``HiddenTrialError`` that names no trial. With ``max_trials = M`` the procedure runs
``max(K, M)`` trials and selects among the first ``K`` (the same release for the same seed).

The objective is a ``methods.enumerate.ConfigurationObjective`` (``bound(configuration)``);
``configs`` are each configuration's DP-GIBO settings at ``μ_run`` (``sampled_run_mu``; planned
on a public proxy by ``tune`` before the first trial, so no planning time depends on ``K``).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import secrets
import uuid
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor

from botorch_dp.baselines.selection import hidden_trials, padded_trials, selection_progress, timing_note
from botorch_dp.methods.enumerate import ConfigurationObjective
from botorch_dp.methods.protocol import ConfigurationRun, MethodContext, MethodRun, MethodUnavailable
from botorch_dp.optim import DPGIBO, DPGIBOConfig
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
from botorch_dp.utils import child_seeds

__all__ = ["DISTRIBUTION", "SAMPLE_PART", "SampledMethod", "sampled_per_trial_mu"]

#: The ledger part of the whole selection's RDP curve.
SAMPLE_PART = "sample"
DISTRIBUTION = "truncated_negative_binomial"


def sampled_per_trial_mu(epsilon: float, delta: float, mean_trials: float) -> float:
    r"""``μ₀``, each trial's GDP parameter, whose selection is ``(ε, δ)``-DP at ``E[K]``; calibrated on
    the ledger's grid of orders, so the ledger's statement of the charged curve is within ``ε`` too."""
    return per_trial_mu_for_epsilon(
        target_epsilon=epsilon,
        target_delta=delta,
        mean_trials=mean_trials,
        distribution=DISTRIBUTION,
        orders=TRAINING_RDP_ORDERS,
    )


@dataclass(frozen=True)
class SampledMethod:
    r"""Papernot–Steinke over DP-GIBO runs on uniformly drawn configurations (see the module).

    Attributes:
        configurations: The configurations, in ``space.configurations()`` order.
        configs: Each configuration's DP-GIBO settings at ``μ_run = μ₀ √(1 − f)``.
        epsilon: ``ε`` of the selection.
        delta: ``δ``.
        mean_trials: ``E[K]``.
        selection_share: ``f``, the share of ``μ₀²`` for the score.
        loss_clip: ``C`` of the scores.
        max_trials: The public number of trials run (``None``: ``K``).
        holds: ``False`` when the runs' settings carry no guarantee (``unsafe_allow_sensitive_fitting``):
            ``μ = inf`` is recorded with the selection before any trial (public: the settings, not
            ``K``) and the run states ``ε = inf``.
        plans: Each configuration's ``plan.PrivatePlan`` (empty without a proxy).
    """

    configurations: tuple[dict[str, Any], ...]
    configs: tuple[DPGIBOConfig, ...]
    epsilon: float
    delta: float
    mean_trials: float
    selection_share: float
    loss_clip: float
    max_trials: int | None = None
    plans: tuple[Any, ...] = ()
    holds: bool = True
    name: str = dataclasses.field(default="dp_gibo", init=False)

    @property
    def gdp_mu(self) -> float | None:
        return None  # a Rényi-DP bound (private selection): no μ-GDP budget holds it

    @property
    def runs_configurations(self) -> bool:
        return True  # runs over the configurations itself: the encoding's objective, its own streams of tune's seed

    def with_max_trials(self, max_trials: int | None) -> SampledMethod:
        r"""Padded to ``max_trials`` trials (``None``: unchanged): the wall time does not reveal ``K``."""
        return self if max_trials is None else dataclasses.replace(self, max_trials=max_trials)

    @property
    def per_trial_mu(self) -> float:
        return sampled_per_trial_mu(self.epsilon, self.delta, self.mean_trials)

    def resolved(self, proxy_objective: Callable[[Tensor], Tensor] | None, context: MethodContext) -> SampledMethod:
        return self

    def simulate(self, proxy_objective: Callable[[Tensor], Tensor], context: MethodContext, seed: int) -> Tensor:
        raise MethodUnavailable("the sampled strategy is not simulated on a proxy (tune runs it as asked).")

    def describe(self) -> str:
        return (
            f"Papernot & Steinke over K ~ {DISTRIBUTION} with E[K] = {self.mean_trials:g} DP-GIBO runs on "
            f"{len(self.configurations)} configurations"
        )

    def run_private(
        self,
        objective: ConfigurationObjective,
        *,
        ledger: PrivacyLedger,
        seed: int | None = None,
        progress: bool = False,
        executor: Any = None,
    ) -> MethodRun:
        delta, mean_trials, max_trials = self.delta, self.mean_trials, self.max_trials
        per_trial_mu = self.per_trial_mu
        score_mu = per_trial_mu * math.sqrt(self.selection_share)
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
        if not self.holds:
            bound[FIT_PART] = Gaussian(math.inf)
        with ledger.charge(bound, run_id=selection_id, new_run=True) as meter:  # before any trial
            for part, charged in bound.items():
                meter.record(part, charged)
        if seed is None:  # K and the configurations: public randomness, hidden, from OS entropy
            rng = np.random.default_rng(secrets.randbits(128))
            noise_gen = None
        else:
            rng = np.random.default_rng([int(seed), 1])
            noise_gen = noise_generator(child_seeds([int(seed), 2], 1)[0], stacklevel=5)
        eps = rdp_to_epsilon(rdp, delta)[0] if self.holds else math.inf
        timing = timing_note(max_trials, distribution=DISTRIBUTION, mean_trials=mean_trials, per_trial="DP-GIBO run")
        num_trials = sample_num_trials(distribution=DISTRIBUTION, mean_trials=mean_trials, rng=rng)
        total = padded_trials(num_trials, max_trials)  # the trials after the K-th: run, then discarded
        scorer = GaussianScoreMechanism(loss_clip=self.loss_clip, per_trial_mu=score_mu, generator=noise_gen)
        trial_seeds = [None] * total if seed is None else child_seeds([int(seed), 3], total)  # child k: any total
        best: ConfigurationRun | None = None
        best_score, best_warnings = math.inf, []
        with selection_progress(progress), hidden_trials():
            for k in range(total):
                index = int(rng.integers(len(self.configurations)))
                with warnings.catch_warnings(record=True) as caught:  # shown for the winner only, after the trials
                    warnings.simplefilter("always")
                    run = self._trial(index, objective, trial_seeds[k], executor)  # its own ledger: inside the bound
                    losses = _trial_losses(objective, run)
                score = float(scorer.release(losses).scores[0])
                if k < num_trials and (best is None or score < best_score):
                    best, best_score, best_warnings = run, score, list(caught)
        assert best is not None  # K >= 1
        for w in best_warnings:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        winner = _without_seed(best, best_score)
        return MethodRun(
            self.name,
            winner.result.release.theta,
            winner.result,
            selection_id,
            winner.num_users,
            eps,
            delta,
            self.describe(),
            best_score,
            configuration=winner.configuration,
            runs=[winner],
            score_mu=score_mu,
            timing=timing,
        )

    def _trial(
        self, index: int, objective: ConfigurationObjective, seed: int | None, executor: Any
    ) -> ConfigurationRun:
        r"""One trial: configuration ``index``'s DP-GIBO run, without progress output, on a ledger of its own."""
        choice, plan = self.configurations[index], self.plans[index] if self.plans else None
        optimizer = DPGIBO(dataclasses.replace(self.configs[index], seed=seed), ledger=PrivacyLedger())
        with optimizer:  # gives its directory up when the run ends
            result = optimizer.run(objective.bound(choice), progress=False, executor=executor)
        return ConfigurationRun(choice, result, optimizer.run_id, int(optimizer.num_users or 0), optimizer.config, plan)


def _without_seed(run: ConfigurationRun, score: float) -> ConfigurationRun:
    r"""The winner as released: its noisy score, and its settings (and plan's) without the trial's
    seed (a seeded call's child seed would give the winner's index, a lower bound on ``K``)."""
    plan = run.plan if run.plan is None else dataclasses.replace(run.plan, config=_unseeded(run.plan.config))
    return dataclasses.replace(run, config=_unseeded(run.config), plan=plan, noisy_score=score)


def _unseeded(config: DPGIBOConfig) -> DPGIBOConfig:
    return dataclasses.replace(config, seed=None)


def _trial_losses(objective: ConfigurationObjective, run: ConfigurationRun) -> Tensor:
    r"""The ``1 x n`` losses at a trial's final point, non-finite entries set to 0 (``"zero_user"``:
    the score's sensitivity stays ``C/n``); a wrong shape raises (``HiddenTrialError`` outside)."""
    losses = torch.as_tensor(objective.bound(run.configuration)(run.result.release.theta.reshape(1, -1)))
    if losses.shape != (1, run.num_users):
        raise ValueError("objective returned losses of the wrong shape at a trial's final point.")
    return losses.to(torch.float64).nan_to_num(0.0, 0.0, 0.0)
