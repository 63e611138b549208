r"""``Runner``: one job of one method of the paper's experiments (``paper``), timed, as a ``Run``."""

from __future__ import annotations

import math
import time
import warnings
from typing import Any

from benchmarks.jobs import KindRunner
from benchmarks.paper import Settings, gp_problem, gp_theta0, svm_problem
from benchmarks.runs import Run, guarantee_of, iterate_curve
from botorch_dp import DPGIBO, DPGIBOConfig
from botorch_dp.baselines import (
    NO_CLIP,
    BaselineResult,
    from_dp_gibo_result,
    noisy_gradient_descent,
    per_trial_mu_for_epsilon,
    private_random_search,
    random_search,
    ucb_bo,
)
from botorch_dp.baselines.selection import non_private_baseline_result
from botorch_dp.optim.options import AdaGrad, FixedClip, batch_rule
from botorch_dp.problems import HuberRegression, NormalLocation


class Runner(KindRunner):
    r"""Runs and times single jobs; each method returns one ``Run`` and keeps no state between jobs.

    A ``Runner`` holds only the settings and the pilot, so ``runner.execute`` can be sent
    to worker processes as the ``run_job`` of ``jobs.run_jobs``.
    """

    KINDS = ("dp_gibo_gp", "baseline_gp", "private_rs_gp", "dp_gibo_small", "noisy_gd_small", "svm_gibo", "svm_random")

    def __init__(self, settings: Settings, pilot: dict | None = None) -> None:
        super().__init__(settings)
        self.pilot = pilot or {}

    # ------------------------------------------------------------------ GP problem
    def dp_gibo_gp(
        self,
        experiment: str,
        method: str,
        seed: int,
        *,
        mu: float,
        clip: float,
        setting: Any,
        bias_tolerance: float | None = None,
        batch_size: int | None = None,
        iterations: int | None = None,
        observation_noise: float = 0.0,
        noise_std: float | None = None,
    ) -> Run:
        r"""DP-GIBO (finite ``mu``) or non-private GIBO (``mu = inf``) on the GP problem."""
        s = self.settings
        start = time.perf_counter()
        problem = gp_problem(s, seed, observation_noise)
        config = DPGIBOConfig(
            bounds=problem.bounds,
            kernel=problem.recommended_kernel(),
            num_iterations=iterations or s.iterations,
            privacy_mu=mu,
            clip=FixedClip(clip),
            step_size=s.step_size,
            step_rule=AdaGrad(),
            batches=batch_rule(batch_size, bias_tolerance=bias_tolerance, search=s.batch_selection),
            noise_variance=problem.fit_noise_variance if noise_std is None else noise_std**2,
            search_radius=s.search_radius,
            theta0=gp_theta0(problem, seed, s.gp_theta0),
            seed=seed,
            target_delta=s.target_delta,
            raw_samples=s.raw_samples,
            num_restarts=s.num_restarts,
        )
        dp_result = DPGIBO(config).run(problem, progress=False)
        result = from_dp_gibo_result(dp_result)
        wall = time.perf_counter() - start
        evals, losses = iterate_curve(problem, result)
        return Run(
            experiment,
            method,
            seed,
            setting,
            evals,
            losses,
            losses[-1],
            result.num_evaluations,
            wall,
            epsilon=None if result.guarantee is None else result.guarantee.epsilon,
            extra={
                "batch_sizes": dp_result.release.batch_sizes,
                "truth_loss": float(problem.objective(problem.true_lengthscales)),
                "initial_loss": losses[0],
            },
        )

    def baseline_gp(
        self, experiment: str, method: str, seed: int, budget: int, observation_noise: float = 0.0, setting: Any = None
    ) -> Run:
        r"""Random search or UCB-BO (by ``method``'s prefix) with ``budget`` evaluations on the GP problem."""
        s = self.settings
        start = time.perf_counter()
        problem = gp_problem(s, seed, observation_noise)
        if method.startswith("random search"):
            result = random_search(problem, problem.bounds, num_evaluations=budget, seed=seed)
        elif method.startswith("UCB-BO"):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                result = ucb_bo(
                    problem,
                    problem.bounds,
                    num_evaluations=budget,
                    beta=s.ucb_beta,
                    refit_every=s.ucb_refit_every,
                    raw_samples=s.ucb_raw_samples,
                    num_restarts=s.ucb_num_restarts,
                    seed=seed,
                )
        else:
            raise ValueError(method)
        wall = time.perf_counter() - start
        evals, losses = iterate_curve(problem, result)
        return Run(experiment, method, seed, setting, evals, losses, losses[-1], result.num_evaluations, wall)

    def private_rs_gp(
        self, experiment: str, seed: int, budget: int, fraction: float, target_epsilon: float, setting: Any
    ) -> Run:
        r"""Private random search with ``E[K] = max(2, fraction · budget)`` trials."""
        s = self.settings
        mean_trials = max(2.0, fraction * budget)
        start = time.perf_counter()
        problem = gp_problem(s, seed)
        mu0 = per_trial_mu_for_epsilon(
            target_epsilon=target_epsilon,
            target_delta=s.target_delta,
            mean_trials=mean_trials,
            tnb_eta=s.private_rs_eta,
        )
        result = non_private_baseline_result(
            private_random_search(
                problem,
                problem.bounds,
                mean_trials=mean_trials,
                per_trial_mu=mu0,
                loss_clip=self.pilot["loss_clip"],
                tnb_eta=s.private_rs_eta,
                target_delta=s.target_delta,
                seed=seed,
                non_private_trials=True,  # a measurement: K and every trial (NON-PRIVATE)
            )
        )
        wall = time.perf_counter() - start
        final = float(problem.objective(result.theta))
        return Run(
            experiment,
            "private random search",
            seed,
            setting,
            [int(round(mean_trials))],
            [final],
            final,
            mean_trials,
            wall,
            epsilon=guarantee_of(result).epsilon,
            extra={
                "per_trial_mu": mu0,
                "realized_trials_NON_PRIVATE": result.num_evaluations,
                "noise_std": guarantee_of(result).details["noise_std"],
            },
        )

    # ------------------------------------------------------------------ E.3 / E.4
    @staticmethod
    def small_problem(name: str, seed: int) -> NormalLocation | HuberRegression:
        r"""The E.3 (``"normal"``) or E.4 (``"huber"``) problem."""
        return {"normal": NormalLocation, "huber": HuberRegression}[name](seed=seed)

    def dp_gibo_small(
        self,
        experiment: str,
        method: str,
        problem: str,
        seed: int,
        *,
        mu: float,
        clip: float,
        batch: int,
        iterations: int,
        step_size: float,
        setting: Any,
    ) -> Run:
        r"""DP-GIBO with plain steps on the E.3/E.4 problem ``problem`` from θ₀ = 0."""
        s = self.settings
        start = time.perf_counter()
        small = self.small_problem(problem, seed)
        config = DPGIBOConfig(
            bounds=small.bounds,
            kernel=small.recommended_kernel(),
            num_iterations=iterations,
            privacy_mu=mu,
            clip=FixedClip(clip),
            step_size=step_size,
            batches=batch_rule(batch, search=s.batch_selection),
            theta0=small.default_theta0(),
            seed=seed,
            target_delta=s.target_delta,
            raw_samples=s.raw_samples,
            num_restarts=s.num_restarts,
        )
        result = from_dp_gibo_result(DPGIBO(config).run(small, progress=False))
        return self._small_run(experiment, method, small, seed, result, time.perf_counter() - start, setting)

    def noisy_gd_small(
        self,
        experiment: str,
        method: str,
        problem: str,
        seed: int,
        *,
        mu: float,
        clip: float,
        iterations: int,
        step_size: float,
        setting: Any,
    ) -> Run:
        r"""Noisy gradient descent (``mu = inf``: clipped, non-private) on the E.3/E.4 problem ``problem``."""
        start = time.perf_counter()
        small = self.small_problem(problem, seed)
        result = noisy_gradient_descent(
            small,
            small.bounds,
            num_iterations=iterations,
            clip_bound=clip,
            step_size=step_size,
            privacy_mu=mu,
            theta0=small.default_theta0(),
            target_delta=self.settings.target_delta,
            seed=seed,
        )
        return self._small_run(experiment, method, small, seed, result, time.perf_counter() - start, setting)

    def _small_run(self, experiment, method, problem, seed, result: BaselineResult, wall, setting) -> Run:
        its = result.history.iterates
        gaps = (problem.objective(its) - problem.optimal_value).tolist()
        dist = (its - problem.optimum).norm(dim=-1).tolist()
        return Run(
            experiment,
            method,
            seed,
            setting,
            list(range(its.shape[0])),
            gaps,
            gaps[-1],
            result.num_evaluations,
            wall,
            epsilon=None if result.guarantee is None else result.guarantee.epsilon,
            extra={
                "distance": dist,
                "final_distance": dist[-1],
                "coord0": its[:, 0].tolist(),
                "optimum0": float(problem.optimum[0]),
            },
        )

    # ------------------------------------------------------------------ SVM (E.2)
    def svm_gibo(self, experiment: str, method: str, seed: int, *, mu: float, setting: Any) -> Run:
        r"""DP-GIBO (finite ``mu``, clip ``svm_clip``) or non-private GIBO (``mu = inf``, no clipping)."""
        s = self.settings
        start = time.perf_counter()
        problem = svm_problem(s, seed)
        config = DPGIBOConfig(
            bounds=problem.bounds,
            kernel=problem.recommended_kernel(),
            num_iterations=s.svm_iterations,
            privacy_mu=mu,
            clip=FixedClip(NO_CLIP if math.isinf(mu) else s.svm_clip),
            step_size=s.svm_step_size,
            step_rule=AdaGrad(),
            batches=batch_rule(s.svm_batch_size or problem.dim + 1, search=s.batch_selection),
            theta0=problem.sample_in_bounds(1, seed=1000 + seed)[0],
            seed=seed,
            target_delta=s.target_delta,
            raw_samples=s.raw_samples,
            num_restarts=s.num_restarts,
        )
        result = from_dp_gibo_result(DPGIBO(config).run(problem, progress=False))
        wall = time.perf_counter() - start
        evals, losses = iterate_curve(problem, result)
        return Run(
            experiment,
            method,
            seed,
            setting,
            evals,
            losses,
            losses[-1],
            result.num_evaluations,
            wall,
            epsilon=None if result.guarantee is None else result.guarantee.epsilon,
            extra={"initial_loss": losses[0], "dim": problem.dim, "num_users": problem.num_users},
        )

    def svm_random(self, experiment: str, method: str, seed: int, budget: int, setting: Any = None) -> Run:
        r"""Random search with ``budget`` evaluations on the SVM problem."""
        start = time.perf_counter()
        problem = svm_problem(self.settings, seed)
        result = random_search(problem, problem.bounds, num_evaluations=budget, seed=seed)
        wall = time.perf_counter() - start
        evals, losses = iterate_curve(problem, result)
        return Run(experiment, method, seed, setting, evals, losses, losses[-1], result.num_evaluations, wall)
