r"""DP-GIBO per categorical configuration, then a private choice by Gaussian scores (``tune``'s
``strategy="enumerate"``): one procedure, simulated on a public proxy and run privately.

One DP-GIBO run per configuration, each with its own settings (``configs``: the planned ones
with a proxy, else ``tune``'s at ``μ_run``), then, with more than one configuration, the
Gaussian score mechanism on each run's final point (the clipped mean validation loss, ``C/n``
sensitivity) and the lowest noisy score wins. With ``K`` configurations and a selection share
``f`` the split is exact in Gaussian DP::

    μ² = K μ_run² + K μ_score²,   μ_run = μ √((1 − f)/K),   μ_score = μ √(f/K),

so the whole procedure is ``μ``-GDP for the validation users (``MethodRun.mu`` is the ledger's
composition of its records).

The objective is a ``ConfigurationObjective``: ``bound(configuration)`` is the θ-objective of
one configuration (``tuning.encoding.EncodedObjective`` gives it for ``tune``'s objective and
proxy), and ``encode(θ, configuration)`` the point on the space's public encoding.
``simulate`` runs the procedure on the PUBLIC proxy with the private run's noise (each run at
``μ_run n/n_p``, ``methods.proxy.simulation_config``; the scores at ``μ_score n/n_p``) and returns
the encoded point of the lowest noisy score, so that the method choice (``methods.choice``)
compares it with the selection methods over the same encoding and seeds. ``run_private``
charges each run's releases and the scores to the ledger through its charge protocol;
``checkpoint`` (``tuning.tune_checkpoint.TuneCheckpoint``) makes it resumable: a finished run
returns its release without drawing anything, the scores are released once.
"""

from __future__ import annotations

import dataclasses
import math
import os
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import torch
from torch import Tensor

from botorch_dp.methods.protocol import ConfigurationRun, MethodContext, MethodRun, MethodUnavailable, config_mu
from botorch_dp.methods.proxy import simulation_config
from botorch_dp.optim import DPGIBO, DPGIBOConfig
from botorch_dp.optim.checkpoint import STATE_FILE
from botorch_dp.privacy.analysis.gdp import compose_gdp, gdp_epsilon
from botorch_dp.privacy.ledger import Gaussian, PrivacyLedger
from botorch_dp.privacy.mechanisms import GaussianScoreMechanism
from botorch_dp.privacy.seeding import noise_generator
from botorch_dp.utils import child_seeds, progress_bar

__all__ = ["SCORE_PART", "ConfigurationObjective", "EnumerateMethod", "final_losses"]

#: The ledger part of the choice's scores.
SCORE_PART = "score"


class ConfigurationObjective(Protocol):
    r"""An objective over a mixed space as the enumerate procedure evaluates it."""

    def bound(self, configuration: dict[str, Any]) -> Callable[[Tensor], Tensor]: ...

    def encode(self, theta: Tensor, configuration: dict[str, Any]) -> Tensor: ...


def final_losses(evaluate: Callable[[Tensor], Tensor], theta: Tensor, num_users: int, what: str) -> Tensor:
    r"""The ``1 x n`` losses at a run's final point; ``ValueError`` for a wrong shape or a non-finite loss."""
    losses = evaluate(theta.reshape(1, -1))
    if losses.shape != (1, num_users):
        raise ValueError(f"objective returned shape {tuple(losses.shape)} at {what}, expected (1, {num_users}).")
    if not torch.isfinite(losses).all():
        raise ValueError(f"objective returned non-finite losses at {what}; nothing was released for the choice.")
    return losses


@dataclass(frozen=True)
class EnumerateMethod:
    r"""One DP-GIBO run per configuration, then the lowest Gaussian noisy score (see the module).

    Attributes:
        configurations: The configurations, in ``space.configurations()`` order.
        configs: Each configuration's ``DPGIBOConfig`` at ``μ_run`` (planned with a proxy).
        score_mu: ``μ_score``, each noisy score's GDP parameter (unused with one configuration).
        loss_clip: ``C`` of the scores.
        budget_mu: ``μ`` of the whole procedure (a new ledger's budget); default the composition
            of the runs and the scores.
        plans: Each configuration's ``plan.PrivatePlan`` (empty without a proxy); a planned run
            resumes with its stored settings.
        planner: ``k ↦`` configuration ``k``'s ``plan.PrivatePlan`` on a PUBLIC proxy, called just
            before its run (a run resumed from ``checkpoint`` is not planned again), or ``None``.
        checkpoint: Where the private run is resumable (``run_dir(k)``, ``selection(K, ledger)``,
            ``save_selection(id, scores, ledger)``), or ``None``.
    """

    configurations: tuple[dict[str, Any], ...]
    configs: tuple[DPGIBOConfig, ...]
    score_mu: float
    loss_clip: float
    budget_mu: float | None = None
    plans: tuple[Any, ...] = ()
    checkpoint: Any = None
    planner: Callable[[int], Any] | None = None
    name: str = dataclasses.field(default="dp_gibo", init=False)

    def __post_init__(self) -> None:
        if len(self.configurations) != len(self.configs) or not self.configs:
            raise ValueError(
                f"configs: one config per configuration, got {len(self.configs)} for "
                f"{len(self.configurations)} configurations."
            )

    @property
    def gdp_mu(self) -> float:
        if self.budget_mu is not None:
            return self.budget_mu
        K = len(self.configs)
        return compose_gdp([config_mu(c) for c in self.configs] + ([self.score_mu] * K if K > 1 else []))

    @property
    def runs_configurations(self) -> bool:
        return True  # runs over the configurations itself: the encoding's objective, its own streams of tune's seed

    def with_max_trials(self, max_trials: int | None) -> EnumerateMethod:
        return self  # one run per configuration, K public: nothing to pad

    def with_checkpoint(self, checkpoint: Any) -> EnumerateMethod:
        r"""Resumable in ``checkpoint`` (``None``: unchanged)."""
        return self if checkpoint is None else dataclasses.replace(self, checkpoint=checkpoint)

    def resolved(self, proxy_objective: Callable[[Tensor], Tensor] | None, context: MethodContext) -> EnumerateMethod:
        if not all(math.isfinite(config_mu(c)) for c in self.configs):
            raise MethodUnavailable("DP-GIBO per configuration: a config has no finite privacy budget.")
        return self

    def simulate(self, proxy_objective: Any, context: MethodContext, seed: int) -> Tensor:
        n, n_p = context.num_users, context.num_proxy_users
        if n_p is None:
            raise ValueError("context.num_proxy_users: simulating needs the proxy's n_p, got None.")
        K = len(self.configs)
        streams = child_seeds([int(seed)], K + 1)
        points = []
        for k, (choice, config) in enumerate(zip(self.configurations, self.configs, strict=True)):
            sim = simulation_config(config, n, n_p, seed=streams[k])
            theta = DPGIBO(sim).run(proxy_objective.bound(choice), progress=False).release.theta
            points.append(proxy_objective.encode(theta, choice))
        X = torch.stack(points)
        losses = torch.as_tensor(proxy_objective(X)).to(torch.float64)  # K x n_p, public
        mechanism = GaussianScoreMechanism(
            loss_clip=self.loss_clip,
            per_trial_mu=self.score_mu * n / n_p,
            generator=torch.Generator().manual_seed(streams[K]),
        )
        return X[int(torch.argmin(mechanism.release(losses).scores))]

    def run_private(
        self,
        objective: ConfigurationObjective,
        *,
        ledger: PrivacyLedger,
        seed: int | None = None,
        progress: bool = False,
        executor: Any = None,
    ) -> MethodRun:
        K = len(self.configs)
        seeds: list[int | None] = [None] * (K + 1) if seed is None else list(child_seeds([int(seed)], K + 1))
        shown = progress_bar(self.configurations, disable=not progress or K == 1, desc="configurations")
        runs = [self._run(k, objective, seeds[k], ledger, progress, executor) for k, _ in enumerate(shown)]
        chosen, run_ids = 0, [r.run_id for r in runs]
        if K > 1:
            selection_id, scores = self._choose(objective, runs, ledger, seeds[K])
            for r, s in zip(runs, scores.tolist(), strict=True):
                r.noisy_score = float(s)
            chosen = int(torch.argmin(scores))  # post-processing of the released scores
            run_ids.append(selection_id)
        mu = compose_gdp([ledger.validation.mu(run_id) for run_id in run_ids])
        delta = float(self.configs[0].target_delta or math.nan)
        winner = runs[chosen]
        return MethodRun(
            self.name,
            winner.result.release.theta,
            winner.result,
            winner.run_id,
            winner.num_users,
            gdp_epsilon(mu, delta),
            delta,
            f"DP-GIBO over {K} configuration(s) (mu = {mu:.4g} Gaussian DP)",
            mu=mu,
            configuration=winner.configuration,
            runs=runs,
            chosen=chosen,
            score_mu=self.score_mu if K > 1 else None,
        )

    def _run(
        self,
        k: int,
        objective: ConfigurationObjective,
        run_seed: int | None,
        ledger: PrivacyLedger,
        progress: bool,
        executor: Any,
    ) -> ConfigurationRun:
        r"""Configuration ``k``'s DP-GIBO run (resumed from ``checkpoint`` when it holds one)."""
        choice, plan = self.configurations[k], self.plans[k] if self.plans else None
        planned = plan is not None or self.planner is not None
        run_dir = None if self.checkpoint is None else self.checkpoint.run_dir(k)
        if run_dir is not None and os.path.lexists(run_dir / STATE_FILE):  # releases, records back; none redrawn
            given = None if planned else dataclasses.replace(self.configs[k], seed=run_seed)
            optimizer, plan = DPGIBO.resume(run_dir, given, ledger=ledger), None
        else:
            if plan is None and self.planner is not None:  # public: the proxy's users only
                plan = self.planner(k)
            config = self.configs[k] if plan is None else plan.config
            optimizer = DPGIBO(dataclasses.replace(config, seed=run_seed), ledger=ledger, checkpoint_dir=run_dir)
        with optimizer:  # gives its directory up when the run ends
            result = optimizer.run(objective.bound(choice), progress=progress, executor=executor)
        return ConfigurationRun(choice, result, optimizer.run_id, int(optimizer.num_users or 0), optimizer.config, plan)

    def _choose(
        self, objective: ConfigurationObjective, runs: list[ConfigurationRun], ledger: PrivacyLedger, seed: int | None
    ) -> tuple[str, Tensor]:
        r"""The choice's noisy scores, released once (a resumed call reads them back): ``(run id, scores)``."""
        stored = None if self.checkpoint is None else self.checkpoint.selection(len(runs), ledger)
        if stored is not None:
            return stored
        n = runs[0].num_users
        if any(r.num_users != n for r in runs):
            raise ValueError(
                f"objective returned {sorted({r.num_users for r in runs})} users across configurations; "
                "every configuration must be scored on the same n users."
            )
        losses = torch.cat(
            [
                final_losses(
                    objective.bound(r.configuration),
                    r.result.release.theta,
                    n,
                    f"the final point of configuration {r.configuration}",
                )
                for r in runs
            ]
        )
        mechanism = GaussianScoreMechanism(
            loss_clip=self.loss_clip, per_trial_mu=self.score_mu, generator=noise_generator(seed, stacklevel=6)
        )
        selection_id = uuid.uuid4().hex
        with ledger.charge(
            {SCORE_PART: Gaussian(self.score_mu * math.sqrt(len(runs)))}, run_id=selection_id, new_run=True
        ) as meter:
            scores = mechanism.release(losses, meter=meter, part=SCORE_PART).scores
        if self.checkpoint is not None:
            self.checkpoint.save_selection(selection_id, scores, ledger)
        return selection_id, scores

    def describe(self) -> str:
        steps = "T = " + "/".join(str(c.num_iterations) for c in self.configs)
        return (
            f"{len(self.configs)} planned DP-GIBO runs (mu = {config_mu(self.configs[0]):.4g} each, {steps}), "
            f"then Gaussian scores (mu = {self.score_mu:.4g} each, C = {self.loss_clip:.4g})"
        )
