r"""A real tuning task: the continuous hyperparameters of a torch MLP on a scikit-learn data set.

θ = (log10 learning rate, log10 weight decay, dropout, SGD momentum) of a one-hidden-layer
MLP trained with SGD on a data set that scikit-learn ships (default ``load_digits``),
split per seed into train / validation / test and standardised with the training
statistics. Each validation example is a user; its loss is its cross-entropy under the
model trained at θ (capped at ``loss_cap``; a fresh model from the seed for every θ, so
an evaluation is a deterministic function of θ).

Methods at each μ of ``Settings.mus`` (δ = ``target_delta``; ε = ``gdp_epsilon(μ, δ)``):
DP-GIBO (μ-GDP on the validation users), private random search (Papernot–Steinke,
calibrated to the same (ε, δ)) and DP-HyPO (calibrated to the same (ε, δ) on the ledger's
order grid, the grid its guarantee is reported on); once per seed the non-private
references random search, UCB-BO and GIBO (μ = ∞, no clipping). Every method of a seed
gets DP-GIBO's number of evaluations (``E[K]`` for the two private selections).

``prepare`` (in ``mlp_pilot``) is the PUBLIC set-up: a pilot on ``synthetic_like`` data of the same shape
(never the validation users) sets the GP noise variance σ², DP-GIBO's clip bound B and
the score clip C of the selections. Every loss a ``Run`` records (validation loss of the
released θ, test loss and accuracy of the model trained there) is a NON-PRIVATE
diagnostic, computed only to evaluate the methods.

Randomness: the replication seed fixes the public randomness (split, initialisation,
dropout and shuffling, the random-search points and UCB-BO's Sobol start). With
``seeded_noise`` (default, as ``benchmarks.paper`` does) the privacy randomness of the
private methods (DP-GIBO's noise, the selections' ``K``, trial points and score noise)
is derived from the replication seed, so runs are reproducible; each such run raises a
``PrivacyWarning`` by design. ``seeded_noise=False`` draws it from OS entropy.

This module is the experiment (the pilot, ``Runner`` and the jobs); the settings, labels,
search space, data and objective are in ``benchmarks.mlp_task`` and the report in
``benchmarks.mlp_report``, and every name they define for the experiment is re-exported here.
"""

from __future__ import annotations

import math
import time
from typing import Any

import torch

from benchmarks.jobs import Job, KindRunner
from benchmarks.mlp_pilot import prepare
from benchmarks.mlp_report import write_report
from benchmarks.mlp_task import (
    DP_GIBO,
    DP_HYPO,
    GIBO,
    INF,
    METHODS,
    PRIVATE_RS,
    RANDOM,
    UCB,
    Settings,
    load_data,
    make_objective,
    quick_settings,
    search_space,
)
from benchmarks.runs import Run, guarantee_of, iterate_curve
from botorch_dp import DPGIBO, DPGIBOConfig, baselines
from botorch_dp.baselines import NO_CLIP, BaselineResult
from botorch_dp.baselines.selection import non_private_baseline_result
from botorch_dp.optim.options import AdaGrad, FixedClip, batch_rule
from botorch_dp.privacy.analysis.dp_hypo import dp_hypo_per_trial_mu_for_epsilon
from botorch_dp.privacy.analysis.gdp import gdp_epsilon
from botorch_dp.tuning import TorchModelTuningObjective
from botorch_dp.utils import child_seeds, torch_threads

__all__ = [
    "EXPERIMENT",
    "METHODS",
    "Runner",
    "Settings",
    "experiment_jobs",
    "load_data",
    "make_objective",
    "make_runner",
    "prepare",
    "quick_settings",
    "search_space",
    "write_report",
]

#: The ``Run.experiment`` of every run of this module.
EXPERIMENT = "mlp"
#: Stream numbers of the seeded privacy noise (child streams of the replication seed).
_NOISE_STREAM = {DP_GIBO: 1, PRIVATE_RS: 2, DP_HYPO: 3, GIBO: 4}


class _MeanLoss:
    r"""``objective(θ)``: the mean validation loss (NON-PRIVATE), for ``runs.iterate_curve``."""

    def __init__(self, objective: TorchModelTuningObjective) -> None:
        self._objective = objective

    def objective(self, X: torch.Tensor) -> torch.Tensor:
        return self._objective(X).mean(-1)


# ============================================================================ runner
class Runner(KindRunner):
    r"""Runs one job of one method and returns a ``Run``; picklable (settings and context only).

    Every job rebuilds its seed's data and objective, so a job depends on its arguments only.
    """

    KINDS = ("gibo", "random", "ucb", "private_rs", "dp_hypo")

    def execute(self, kind: str, kwargs: dict) -> Run:
        r"""Run ``self.<kind>(**kwargs)`` on one torch thread."""
        with torch_threads(1):
            return super().execute(kind, kwargs)

    # ------------------------------------------------------------------ helpers
    def _objective(self, seed: int) -> TorchModelTuningObjective:
        return make_objective(self.settings, load_data(self.settings, seed), seed)

    def _noise_seed(self, method: str, seed: int, mu: float) -> int | None:
        if not self.settings.seeded_noise:
            return None
        mu_key = 0 if math.isinf(mu) else int(round(mu * 1000))
        return child_seeds([seed, _NOISE_STREAM[method], mu_key], 1)[0]

    def _run(
        self,
        method: str,
        seed: int,
        setting: Any,
        objective: TorchModelTuningObjective,
        result: BaselineResult,
        start: float,
        evals: list[int],
        losses: list[float],
        num_evaluations: float,
        extra: dict,
    ) -> Run:
        diag = objective.evaluate_non_private(result.theta)  # NON-PRIVATE diagnostic
        wall = time.perf_counter() - start
        space = objective.space
        validation_loss = diag["validation_loss"]
        assert validation_loss is not None  # a classifier's validation loss is always computed
        return Run(
            EXPERIMENT,
            method,
            seed,
            setting,
            evals,
            losses + [validation_loss] if not losses else losses,
            validation_loss,
            num_evaluations,
            wall,
            epsilon=None if result.guarantee is None else result.guarantee.epsilon,
            extra={
                "test_loss": diag["test_loss"],
                "test_accuracy": diag["test_accuracy"],
                "validation_accuracy": diag["validation_accuracy"],
                "hyperparameters": space.to_natural(result.theta),
                "trainings": objective.num_trainings,
                **extra,
            },
        )

    # ------------------------------------------------------------------ methods
    def gibo(self, method: str, seed: int, mu: float, setting: Any) -> Run:
        r"""DP-GIBO at ``mu`` (clip bound from the pilot), or non-private GIBO at ``mu = inf`` (no clipping)."""
        s, c = self.settings, self.context
        start = time.perf_counter()
        objective = self._objective(seed)
        space = objective.space
        config = DPGIBOConfig(
            bounds=space.bounds,
            kernel=space.recommended_kernel(s.lengthscale, s.outputscale),
            num_iterations=s.iterations,
            privacy_mu=mu,
            clip=FixedClip(NO_CLIP if math.isinf(mu) else c["clip_bound"]),
            step_size=s.step_size,
            step_rule=AdaGrad(),
            batches=batch_rule(s.batch_size or space.dim + 1),
            search_radius=s.search_radius,
            noise_variance=c["noise_variance"],
            theta0=space.bounds.mean(0),
            target_delta=s.target_delta,
            raw_samples=s.raw_samples,
            num_restarts=s.num_restarts,
            seed=self._noise_seed(DP_GIBO if math.isfinite(mu) else GIBO, seed, mu),
        )
        dp_result = DPGIBO(config).run(objective, progress=False)
        result = baselines.from_dp_gibo_result(dp_result)
        evals, losses = iterate_curve(_MeanLoss(objective), result)  # NON-PRIVATE curve
        return self._run(
            method,
            seed,
            setting,
            objective,
            result,
            start,
            evals,
            losses,
            result.num_evaluations,
            {
                "batch_sizes": dp_result.release.batch_sizes,
                "initial_loss": losses[0],
                "noise_std": dp_result.release.guarantee.noise_std,
            },
        )

    def random(self, method: str, seed: int, budget: int, setting: Any) -> Run:
        r"""Non-private random search with ``budget`` uniform points (from the replication seed)."""
        start = time.perf_counter()
        objective = self._objective(seed)
        result = baselines.random_search(objective, objective.bounds, num_evaluations=budget, seed=seed)
        evals, losses = self._incumbent_curve(result)
        return self._run(method, seed, setting, objective, result, start, evals, losses, result.num_evaluations, {})

    def ucb(self, method: str, seed: int, budget: int, setting: Any) -> Run:
        r"""Non-private UCB-BO with ``budget`` evaluations."""
        s = self.settings
        start = time.perf_counter()
        objective = self._objective(seed)
        result = baselines.ucb_bo(
            objective,
            objective.bounds,
            num_evaluations=budget,
            num_initial=s.ucb_num_initial,
            beta=s.ucb_beta,
            refit_every=s.ucb_refit_every,
            raw_samples=s.ucb_raw_samples,
            num_restarts=s.ucb_num_restarts,
            seed=seed,
        )
        evals, losses = self._incumbent_curve(result)
        return self._run(method, seed, setting, objective, result, start, evals, losses, result.num_evaluations, {})

    def private_rs(self, method: str, seed: int, budget: int, mu: float, setting: Any) -> Run:
        r"""Private random search with ``E[K] = max(2, fraction · budget)`` at the (ε, δ) of ``mu``."""
        s, c, mean_trials = self.settings, self.context, self._mean_trials(budget)
        start = time.perf_counter()
        objective = self._objective(seed)
        mu0 = baselines.per_trial_mu_for_epsilon(
            target_epsilon=gdp_epsilon(mu, s.target_delta),
            target_delta=s.target_delta,
            mean_trials=mean_trials,
            tnb_eta=s.tnb_eta,
        )
        result = non_private_baseline_result(
            baselines.private_random_search(
                objective,
                objective.bounds,
                mean_trials=mean_trials,
                per_trial_mu=mu0,
                loss_clip=c["loss_clip"],
                tnb_eta=s.tnb_eta,
                target_delta=s.target_delta,
                seed=self._noise_seed(PRIVATE_RS, seed, mu),
                non_private_trials=True,  # a measurement: K and every trial (NON-PRIVATE)
            )
        )
        return self._selection_run(method, seed, setting, objective, result, start, mean_trials, mu0)

    def dp_hypo(self, method: str, seed: int, budget: int, mu: float, setting: Any) -> Run:
        r"""DP-HyPO with ``E[K] = max(2, fraction · budget)`` at the (ε, δ) of ``mu``."""
        s, c, mean_trials = self.settings, self.context, self._mean_trials(budget)
        start = time.perf_counter()
        objective = self._objective(seed)
        mu0 = dp_hypo_per_trial_mu_for_epsilon(
            target_epsilon=gdp_epsilon(mu, s.target_delta),
            target_delta=s.target_delta,
            mean_trials=mean_trials,
            ratio_upper=s.dp_hypo_ratio,
            tnb_eta=s.tnb_eta,
        )
        result = non_private_baseline_result(
            baselines.dp_hypo(
                objective,
                objective.bounds,
                mean_trials=mean_trials,
                per_trial_mu=mu0,
                loss_clip=c["loss_clip"],
                ratio_bound=s.dp_hypo_ratio,
                tnb_eta=s.tnb_eta,
                target_delta=s.target_delta,
                num_candidates=s.dp_hypo_candidates,
                refit_every=s.dp_hypo_refit_every,
                seed=self._noise_seed(DP_HYPO, seed, mu),
                non_private_trials=True,  # a measurement: K and every trial (NON-PRIVATE)
            )
        )
        return self._selection_run(method, seed, setting, objective, result, start, mean_trials, mu0)

    def _mean_trials(self, budget: int) -> float:
        r"""``E[K] = max(2, fraction · budget)`` of a private selection given the tuning budget."""
        return max(2.0, self.settings.selection_fraction * budget)

    def _selection_run(
        self,
        method: str,
        seed: int,
        setting: Any,
        objective: TorchModelTuningObjective,
        result: BaselineResult,
        start: float,
        mean_trials: float,
        per_trial_mu: float,
    ) -> Run:
        r"""The ``Run`` of a private selection with ``E[K] = mean_trials`` (K itself a NON-PRIVATE diagnostic)."""
        return self._run(
            method,
            seed,
            setting,
            objective,
            result,
            start,
            [int(round(mean_trials))],
            [],
            mean_trials,
            {
                "per_trial_mu": per_trial_mu,
                "realized_trials_NON_PRIVATE": result.num_evaluations,
                "noise_std": guarantee_of(result).details["noise_std"],
            },
        )

    @staticmethod
    def _incumbent_curve(result: BaselineResult) -> tuple[list[int], list[float]]:
        r"""Best observed mean loss after each evaluation (the objective is deterministic: the
        incumbent's validation loss; NON-PRIVATE)."""
        if result.history.mean_losses is None:
            raise ValueError("the incumbent curve needs the observed mean losses of the history")
        best = torch.cummin(result.history.mean_losses, 0).values
        return [int(e) for e in result.history.evaluations], best.tolist()


def make_runner(settings: Settings, context: dict):
    r"""``Runner(settings, context).execute``: the picklable ``run_job`` of ``jobs.run_jobs``."""
    return Runner(settings, context).execute


# ============================================================================ jobs
def experiment_jobs(settings: Settings, context: dict) -> list[Job]:
    r"""Per seed: DP-GIBO at every μ and GIBO; then, with the first DP-GIBO run's number of
    evaluations as budget, random search, UCB-BO and, at every μ, private random search and
    DP-HyPO (each μ's selections take that μ's DP-GIBO budget)."""
    s = settings
    jobs: list[Job] = []
    d = search_space(s).dim
    evals = s.iterations * (s.batch_size or d + 1)
    train_s = 0.15 * s.epochs / 10 * (1.0 if s.mode == "full" else 0.05)  # seconds per training here
    for seed in s.seeds:
        dp_jobs = {}
        for mu in s.mus:
            dp_jobs[mu] = len(jobs)
            jobs.append(
                Job(
                    f"DP-GIBO μ={mu:g} seed {seed}",
                    "gibo",
                    dict(method=DP_GIBO, seed=seed, mu=mu, setting=mu),
                    cost=train_s * (evals + 15) + 5,
                )
            )
        source = dp_jobs[s.mus[0]]
        jobs.append(
            Job(
                f"GIBO seed {seed}",
                "gibo",
                dict(method=GIBO, seed=seed, mu=INF, setting=INF),
                cost=train_s * (evals + 15) + 5,
            )
        )
        jobs.append(
            Job(
                f"random search seed {seed}",
                "random",
                dict(method=RANDOM, seed=seed, setting=INF),
                budget_from=source,
                cost=train_s * evals,
            )
        )
        jobs.append(
            Job(
                f"UCB-BO seed {seed}",
                "ucb",
                dict(method=UCB, seed=seed, setting=INF),
                budget_from=source,
                cost=train_s * evals + 10,
            )
        )
        for mu in s.mus:
            jobs.append(
                Job(
                    f"private RS μ={mu:g} seed {seed}",
                    "private_rs",
                    dict(method=PRIVATE_RS, seed=seed, mu=mu, setting=mu),
                    budget_from=dp_jobs[mu],
                    cost=train_s * evals,
                )
            )
            jobs.append(
                Job(
                    f"DP-HyPO μ={mu:g} seed {seed}",
                    "dp_hypo",
                    dict(method=DP_HYPO, seed=seed, mu=mu, setting=mu),
                    budget_from=dp_jobs[mu],
                    cost=train_s * evals + 10,
                )
            )
    return jobs
