r"""Mixed search spaces: ``tune`` against private selections on the digits MLP with categorical,
integer and continuous hyperparameters (issue 30, item 5).

The task is ``benchmarks.mixed_task`` (optimizer and activation categorical, width integer,
learning rate, weight decay and dropout continuous). Methods at each ε of
``Settings.epsilons`` (δ = ``target_delta``), per seed:

- ``tune`` (``botorch_dp.tune`` with its default strategy ``"enumerate"``: one DP-GIBO run per
  configuration, then the private choice), on the ``TorchModelTuningObjective``;
- private random search (Papernot–Steinke) and DP-HyPO at the same (ε, δ), sampling the
  mixed space through its public encoding (``mixed_task.MixedEncoding``: one extra cube
  coordinate per categorical split into equal shares; the width is rounded by the space);

and once per seed the non-private references: random search on the same encoding and
BoTorch's mixed BO (``MixedSingleTaskGP`` with ``optimize_acqf_mixed`` over the fixed
categorical configurations, log expected improvement). Every method of a seed gets ``tune``'s
number of evaluations at the first ε (every run's points plus the scored final points;
``E[K]`` for the private selections).

There is no pilot: ``tune`` runs with its documented defaults (``TUNE_DEFAULTS``, kernel
``space.recommended_kernel()``) except ``num_iterations``, and the private selections take
``tune``'s score clip ``C = loss_clip``. Every loss a ``Run`` records is a NON-PRIVATE
diagnostic. With ``seeded_noise`` the privacy noise is derived from the replication seed
(reproducible; a ``PrivacyWarning`` each run), otherwise from OS entropy.
"""

from __future__ import annotations

import time
from typing import Any

from benchmarks.jobs import Job, KindRunner
from benchmarks.mixed_bo import mixed_bo
from benchmarks.mixed_report import REPORT_MD, report_text, write_report  # noqa: F401  (re-exported)
from benchmarks.mixed_task import (  # noqa: F401  (re-exported)
    DP_HYPO,
    INF,
    METHODS,
    MIXED_BO,
    PRIVATE_METHODS,
    PRIVATE_RS,
    RANDOM,
    REFERENCE_METHODS,
    TUNE,
    TUNE_AUTO,
    EncodedObjective,
    MixedEncoding,
    Settings,
    load_data,
    make_objective,
    proxy_data,
    quick_settings,
    search_space,
)
from benchmarks.runs import Run
from botorch_dp import tune
from botorch_dp.baselines import BaselineResult, dp_hypo, private_random_search, random_search
from botorch_dp.baselines.selection import non_private_baseline_result
from botorch_dp.methods.protocol import MethodRun
from botorch_dp.privacy.analysis.dp_hypo import dp_hypo_per_trial_mu_for_epsilon
from botorch_dp.privacy.analysis.private_selection import per_trial_mu_for_epsilon
from botorch_dp.utils import child_seeds, torch_threads

__all__ = [
    "EXPERIMENT",
    "METHODS",
    "Runner",
    "Settings",
    "experiment_jobs",
    "make_runner",
    "mixed_bo",
    "prepare",
    "quick_settings",
    "write_report",
]

#: The ``Run.experiment`` of every run of this module.
EXPERIMENT = "mixed"
_NOISE_STREAM = {TUNE: 1, PRIVATE_RS: 2, DP_HYPO: 3, TUNE_AUTO: 4}


def prepare(settings: Settings) -> dict:
    r"""No pilot: the public facts the report quotes (the space and its encoding's dimension)."""
    space = search_space(settings)
    encoding = MixedEncoding(space)
    return {
        "space": space.describe(),
        "configurations": len(space.configurations()),
        "dim": space.dim,
        "encoded_dim": encoding.dim,
    }


class Runner(KindRunner):
    r"""Runs one job of one method and returns a ``Run``; picklable (settings and context only)."""

    KINDS = ("tune_run", "random", "mixed_bo", "private_rs", "dp_hypo", "tune_auto")

    def execute(self, kind: str, kwargs: dict) -> Run:
        with torch_threads(1):
            return super().execute(kind, kwargs)

    def _objective(self, seed: int):
        return make_objective(self.settings, load_data(self.settings, seed), seed)

    def _encoded_objective(self, seed: int) -> tuple[MixedEncoding, EncodedObjective]:
        r"""The replication's objective on the cube encoding of its mixed space (categoricals as coordinates)."""
        base = self._objective(seed)
        encoding = MixedEncoding(base.space)
        return encoding, encoding.objective(base)

    def _mean_trials(self, budget: int) -> float:
        r"""``E[K] = max(2, fraction · budget)`` of a private selection given the tuning budget."""
        return max(2.0, self.settings.selection_fraction * budget)

    def _noise_seed(self, method: str, seed: int, epsilon: float) -> int | None:
        if not self.settings.seeded_noise:
            return None
        return child_seeds([seed, _NOISE_STREAM[method], int(round(epsilon * 1000))], 1)[0]

    @staticmethod
    def _run(
        method: str,
        seed: int,
        setting: Any,
        diag: dict,
        hyperparameters: dict,
        start: float,
        num_evaluations: float,
        epsilon: float | None,
        trainings: int,
        extra: dict,
    ) -> Run:
        return Run(
            EXPERIMENT,
            method,
            seed,
            setting,
            [int(round(num_evaluations))],
            [diag["validation_loss"]],
            diag["validation_loss"],
            num_evaluations,
            time.perf_counter() - start,
            epsilon=epsilon,
            extra={
                "test_loss": diag["test_loss"],
                "test_accuracy": diag["test_accuracy"],
                "validation_accuracy": diag["validation_accuracy"],
                "hyperparameters": hyperparameters,
                "trainings": trainings,
                **extra,
            },
        )

    def _encoded_run(
        self,
        method: str,
        seed: int,
        setting: Any,
        result: BaselineResult,
        objective: EncodedObjective,
        encoding: MixedEncoding,
        start: float,
        num_evaluations: float,
        extra: dict,
    ) -> Run:
        diag = objective.evaluate_non_private(result.theta)  # NON-PRIVATE diagnostic
        return self._run(
            method,
            seed,
            setting,
            diag,
            encoding.to_natural(result.theta),
            start,
            num_evaluations,
            None if result.guarantee is None else result.guarantee.epsilon,
            objective.num_trainings,
            extra,
        )

    def _selection_run(
        self,
        method: str,
        seed: int,
        setting: Any,
        result: BaselineResult,
        objective: EncodedObjective,
        encoding: MixedEncoding,
        start: float,
        mean_trials: float,
        per_trial_mu: float,
    ) -> Run:
        r"""The ``Run`` of a private selection with ``E[K] = mean_trials`` (K itself a NON-PRIVATE diagnostic)."""
        return self._encoded_run(
            method,
            seed,
            setting,
            result,
            objective,
            encoding,
            start,
            mean_trials,
            {"per_trial_mu": per_trial_mu, "realized_trials_NON_PRIVATE": result.num_evaluations},
        )

    # ------------------------------------------------------------------ methods
    def tune_run(self, method: str, seed: int, epsilon: float, setting: Any) -> Run:
        r"""``tune(objective, space, epsilon, delta)`` with strategy ``"enumerate"``."""
        s = self.settings
        start = time.perf_counter()
        objective = self._objective(seed)
        result = tune(
            objective,
            objective.space,
            epsilon=epsilon,
            delta=s.target_delta,
            loss_clip=s.loss_clip,
            selection_share=s.selection_share,
            seed=self._noise_seed(TUNE, seed, epsilon),
            progress=False,
            num_iterations=s.iterations,
            method="dp_gibo",  # the enumerate procedure (without a proxy the default is private random search)
        )
        winner = result.runs[result.chosen]
        evaluations = sum(int(r.result.release.evaluation_points.shape[0]) for r in result.runs)
        scored = len(result.runs) if len(result.runs) > 1 else 0
        trainings = objective.num_trainings
        diag = objective.with_choice(winner.configuration).evaluate_non_private(winner.result.release.theta)
        return self._run(
            method,
            seed,
            setting,
            diag,
            result.hyperparameters,
            start,
            evaluations + scored,
            result.guarantee.epsilon,
            trainings,
            {
                "chosen_configuration": winner.configuration,
                "guarantee_mu": result.guarantee.mu,
                "score_mu": result.score_mu,
                "noisy_scores": [r.noisy_score for r in result.runs],
            },
        )

    def tune_auto(self, method: str, seed: int, epsilon: float, setting: Any) -> Run:
        r"""``tune(..., proxy=, num_users=n, method="auto")``: every configuration planned on the PUBLIC
        proxy (``mixed_task.proxy_data``: a slice of the training split), the method chosen there
        (DP-GIBO per configuration, private random search or DP-HyPO over the public encoding),
        then run at (ε, δ)."""
        s = self.settings
        start = time.perf_counter()
        data = load_data(s, seed)
        objective = make_objective(s, data, seed)
        proxy = objective.with_data(proxy_data(s, data, seed))
        result = tune(
            objective,
            objective.space,
            epsilon=epsilon,
            delta=s.target_delta,
            loss_clip=s.loss_clip,
            selection_share=s.selection_share,
            seed=self._noise_seed(TUNE_AUTO, seed, epsilon),
            progress=False,
            num_iterations=s.iterations,
            proxy=proxy,
            num_users=objective.num_users,
            plan_budget=None,  # the arm measures the method choice as planned, not the default time budget
            plan_options=dict(
                num_repeats=s.proxy_repeats,
                clip_quantiles=s.proxy_clip_quantiles,
                step_sizes=s.proxy_step_sizes,
                seed=seed,
            ),
        )
        winner = result.runs[result.chosen]
        evaluations: float
        if isinstance(winner.result, MethodRun):  # a selection method: its expected number of trials E[K]
            evaluations = float(winner.result.result.guarantee.details["mean_trials"])
        else:
            evaluations = sum(int(r.result.release.evaluation_points.shape[0]) for r in result.runs) + len(result.runs)
        trainings = objective.num_trainings  # the private runs' trainings (the proxy trains its own)
        diag = objective.with_choice(winner.configuration).evaluate_non_private(winner.result.release.theta)
        return self._run(
            method,
            seed,
            setting,
            diag,
            result.hyperparameters,
            start,
            evaluations,
            result.guarantee.epsilon,
            trainings,
            {
                "chosen_configuration": winner.configuration,
                "chosen_method": result.method,
                "method_table": None if result.methods is None else str(result.methods),
                "proxy_users": int(proxy.num_users),
                "proxy_trainings": proxy.num_trainings,
            },
        )

    def random(self, method: str, seed: int, budget: int, setting: Any) -> Run:
        r"""Non-private random search with ``budget`` uniform encoded points (from the replication seed)."""
        start = time.perf_counter()
        encoding, objective = self._encoded_objective(seed)
        result = random_search(objective, encoding.bounds, num_evaluations=int(budget), seed=seed)
        return self._encoded_run(method, seed, setting, result, objective, encoding, start, result.num_evaluations, {})

    def mixed_bo(self, method: str, seed: int, budget: int, setting: Any) -> Run:
        r"""Non-private BoTorch mixed BO with ``budget`` evaluations."""
        s = self.settings
        start = time.perf_counter()
        encoding, objective = self._encoded_objective(seed)
        result = mixed_bo(
            objective,
            encoding,
            budget=int(budget),
            num_initial=s.bo_num_initial,
            batch=s.bo_batch,
            raw_samples=s.bo_raw_samples,
            num_restarts=s.bo_num_restarts,
            maxiter=s.bo_maxiter,
            seed=seed,
        )
        return self._encoded_run(method, seed, setting, result, objective, encoding, start, result.num_evaluations, {})

    def private_rs(self, method: str, seed: int, budget: int, epsilon: float, setting: Any) -> Run:
        r"""Private random search on the encoded space, ``E[K] = max(2, fraction · budget)``, at (ε, δ)."""
        s, mean_trials = self.settings, self._mean_trials(budget)
        start = time.perf_counter()
        encoding, objective = self._encoded_objective(seed)
        mu0 = per_trial_mu_for_epsilon(
            target_epsilon=epsilon, target_delta=s.target_delta, mean_trials=mean_trials, tnb_eta=s.tnb_eta
        )
        result = non_private_baseline_result(
            private_random_search(
                objective,
                encoding.bounds,
                mean_trials=mean_trials,
                per_trial_mu=mu0,
                loss_clip=s.loss_clip,
                tnb_eta=s.tnb_eta,
                target_delta=s.target_delta,
                seed=self._noise_seed(PRIVATE_RS, seed, epsilon),
                non_private_trials=True,  # a measurement: K and every trial (NON-PRIVATE)
            )
        )
        return self._selection_run(method, seed, setting, result, objective, encoding, start, mean_trials, mu0)

    def dp_hypo(self, method: str, seed: int, budget: int, epsilon: float, setting: Any) -> Run:
        r"""DP-HyPO on the encoded space, ``E[K] = max(2, fraction · budget)``, at (ε, δ)."""
        s, mean_trials = self.settings, self._mean_trials(budget)
        start = time.perf_counter()
        encoding, objective = self._encoded_objective(seed)
        mu0 = dp_hypo_per_trial_mu_for_epsilon(
            target_epsilon=epsilon,
            target_delta=s.target_delta,
            mean_trials=mean_trials,
            ratio_upper=s.dp_hypo_ratio,
            tnb_eta=s.tnb_eta,
        )
        result = non_private_baseline_result(
            dp_hypo(
                objective,
                encoding.bounds,
                mean_trials=mean_trials,
                per_trial_mu=mu0,
                loss_clip=s.loss_clip,
                ratio_bound=s.dp_hypo_ratio,
                tnb_eta=s.tnb_eta,
                target_delta=s.target_delta,
                num_candidates=s.dp_hypo_candidates,
                refit_every=s.dp_hypo_refit_every,
                seed=self._noise_seed(DP_HYPO, seed, epsilon),
                non_private_trials=True,  # a measurement: K and every trial (NON-PRIVATE)
            )
        )
        return self._selection_run(method, seed, setting, result, objective, encoding, start, mean_trials, mu0)


def make_runner(settings: Settings, context: dict):
    r"""``Runner(settings, context).execute``: the picklable ``run_job`` of ``jobs.run_jobs``."""
    return Runner(settings, context).execute


def experiment_jobs(settings: Settings, context: dict) -> list[Job]:
    r"""Per seed: ``tune`` at every ε; then with the first ``tune`` run's evaluations as budget, the
    non-private references and, at every ε, private random search and DP-HyPO. With workers the
    scheduler orders jobs by their critical paths (every ``tune`` job first), so an interrupted
    run may leave seeds with some methods only; the report counts seeds per cell."""
    s = settings
    jobs: list[Job] = []
    K = context.get("configurations", 1)
    evals = K * s.iterations * (context.get("dim", 1) + 1) + K
    train_s = 0.1 * s.epochs * (1.0 if s.mode == "full" else 0.05)
    for seed in s.seeds:
        tune_jobs = {}
        for eps in s.epsilons:
            tune_jobs[eps] = len(jobs)
            jobs.append(
                Job(
                    f"tune ε={eps:g} seed {seed}",
                    "tune_run",
                    dict(method=TUNE, seed=seed, epsilon=eps, setting=eps),
                    cost=train_s * evals + 5,
                )
            )
        source = tune_jobs[s.epsilons[0]]
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
                f"mixed BO seed {seed}",
                "mixed_bo",
                dict(method=MIXED_BO, seed=seed, setting=INF),
                budget_from=source,
                cost=1.0,
            )
        )  # scheduled last (hint only)
        for eps in s.epsilons:
            jobs.append(
                Job(
                    f"private RS ε={eps:g} seed {seed}",
                    "private_rs",
                    dict(method=PRIVATE_RS, seed=seed, epsilon=eps, setting=eps),
                    budget_from=tune_jobs[eps],
                    cost=train_s * evals + 300,
                )
            )  # first: the goal's pair
            jobs.append(
                Job(
                    f"DP-HyPO ε={eps:g} seed {seed}",
                    "dp_hypo",
                    dict(method=DP_HYPO, seed=seed, epsilon=eps, setting=eps),
                    budget_from=tune_jobs[eps],
                    cost=train_s * evals + 100,
                )
            )
            if s.tune_auto_proxy:  # off by default: the stored experiment has no such jobs
                jobs.append(
                    Job(
                        f"tune auto ε={eps:g} seed {seed}",
                        "tune_auto",
                        dict(method=TUNE_AUTO, seed=seed, epsilon=eps, setting=eps),
                        cost=train_s * evals * 4,
                    )
                )
    return jobs
