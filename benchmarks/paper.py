r"""The DP-GIBO paper's experiments (Sopa et al. §4 and Appendix E.1–E.5; short version §4.4).

``Settings`` holds every knob (paper values unless noted); ``pilot`` sets the clip bounds
from an independent synthetic draw; ``Runner`` runs one job of one method and returns a
``Run``; ``experiment_jobs`` lists the jobs of the chosen experiments as a DAG for
``jobs.run_jobs`` (``outputs.run_experiments`` does all three). The choices the paper does not fix
are listed in ``scripts/reproduce_paper.py`` and in every ``results.md``.
"""

from __future__ import annotations

import math
import statistics
import time
import warnings
from dataclasses import dataclass
from typing import Any

import torch

from benchmarks.jobs import Job, KindRunner
from benchmarks.runs import Run, format_mu, iterate_curve, round_sig
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
from botorch_dp.gradient_gp import GradientGP
from botorch_dp.privacy.analysis.gdp import gdp_epsilon
from botorch_dp.problems import (
    GPRegressionLengthscales,
    HuberRegression,
    KernelSVMRegression,
    NormalLocation,
)
from botorch_dp.problems.base import PerUserProblem

INF = math.inf
EXPERIMENTS = ("comparison", "eps", "mu", "sigma", "normal", "huber", "svm")


@dataclass
class Settings:
    r"""All knobs of a reproduction run (paper values unless noted in the comments)."""

    mode: str = "full"
    # GP length-scale tuning (E.1)
    gp_dim: int = 15
    gp_n_total: int = 2000
    seeds: tuple[int, ...] = tuple(range(10))
    sweep_seeds: tuple[int, ...] = tuple(range(10))
    iterations: int = 25
    privacy_mu: float = 1.0
    bias_tolerance: float = 0.5
    paper_clip_bound: float = 3.0
    step_size: float = 0.3
    search_radius: float = 0.5
    gp_theta0: str = "random"
    batch_selection: str = "joint"
    raw_samples: int = 32
    num_restarts: int = 1
    target_delta: float = 1e-5
    eps_values: tuple[float, ...] = (0.3, 0.5, 1.0, 2.0, 4.0)
    mu_values: tuple[float, ...] = (0.1, 0.3, 1.0, 3.0, INF)
    # σ sweep (E.5 with the σ settings of E.1): fixed full batches, B = 1, μ = 0.1, T = 45
    sigma_iterations: int = 45
    sigma_mu: float = 0.1
    sigma_clip: float | None = 1.0  # None: the pilot's B
    sigma_bias_tolerance: float | None = None  # None: fixed batches of sigma_batch_size
    sigma_batch_size: int | None = None  # None: d + 1
    observation_noise: float = 0.01
    sigma_values: tuple[float, ...] = (0.01, 1.0, 1e-4)
    # baselines
    ucb_beta: float = 2.0
    ucb_refit_every: int = 25
    ucb_raw_samples: int = 64
    ucb_num_restarts: int = 1
    private_rs_fractions: tuple[float, ...] = (0.125, 0.25, 0.5, 1.0)
    private_rs_eta: float = 1.0
    # pilot (clip bounds)
    pilot_seed: int = 10_000
    pilot_points: int = 6
    # normal location (E.3)
    normal_location_iterations: int = 150
    normal_location_batch: int = 3
    normal_location_clip: float = 1.0
    normal_location_mus: tuple[float, ...] = (0.5, 2.0)
    normal_location_step_size: float = 0.1
    normal_location_seeds: tuple[int, ...] = (0, 1, 2)
    # Huber regression (E.4)
    huber_iterations: int = 100
    huber_batch: int = 2
    huber_clip: float = 1.0
    huber_mu: float = 1.0
    huber_step_size: float = 0.2
    huber_seeds: tuple[int, ...] = (0, 1, 2)
    # SVM tuning (E.2 / Sopa et al., short version, §4.4): friedman1 stand-in for CT slice, d = 33
    svm_dataset: str = "friedman1"
    svm_num_features: int | None = None  # None: the data set's default (30 for friedman1)
    svm_n_train: int | None = None  # None: the problem's default (1000)
    svm_n_val: int | None = None  # None: the problem's default (1000 users)
    svm_iterations: int = 25
    svm_mu: float = 1.0
    svm_clip: float = 1.0
    svm_step_size: float = 0.8
    svm_batch_size: int | None = None  # None: d + 1
    svm_seeds: tuple[int, ...] = tuple(range(5))

    @classmethod
    def quick(cls) -> Settings:
        r"""A smoke configuration that keeps every code path (about a minute)."""
        return cls(
            mode="quick", gp_dim=4, gp_n_total=400, seeds=(0, 1), sweep_seeds=(0,), iterations=8,
            eps_values=(0.5, 2.0), mu_values=(0.3, 1.0, INF), sigma_iterations=5,
            ucb_refit_every=5, ucb_raw_samples=32, private_rs_fractions=(0.5, 1.0), pilot_points=2,
            normal_location_iterations=20, normal_location_seeds=(0,), huber_iterations=20, huber_seeds=(0,),
            svm_num_features=5, svm_n_train=200, svm_n_val=200, svm_iterations=3, svm_seeds=(0,),
        )


def gp_problem(settings: Settings, seed: int, observation_noise: float = 0.0) -> GPRegressionLengthscales:
    r"""The E.1 GP length-scale tuning problem of replication ``seed``."""
    return GPRegressionLengthscales(
        dim=settings.gp_dim, n_total=settings.gp_n_total, seed=seed, observation_noise_std=observation_noise
    )


def gp_theta0(problem: GPRegressionLengthscales, seed: int, how: str = "random") -> torch.Tensor:
    r"""Public, data-independent start for replication ``seed``: uniform (``"random"``) or the box centre."""
    if how == "centre":
        return problem.default_theta0()
    return problem.sample_in_bounds(1, seed=1000 + seed)[0]


def svm_problem(settings: Settings, seed: int) -> KernelSVMRegression:
    r"""The E.2 SVM tuning problem of replication ``seed``."""
    return KernelSVMRegression(
        dataset=settings.svm_dataset, n_train=settings.svm_n_train, n_val=settings.svm_n_val,
        num_features=settings.svm_num_features, seed=seed,
    )


def pilot(settings: Settings, problem: PerUserProblem | None = None, theta: torch.Tensor | None = None) -> dict:
    r"""Clip bound B and loss clip C from an independent synthetic draw (public reasoning).

    At ``pilot_points`` uniform θ (or ``pilot_points`` times at one public ``theta``, e.g.
    the run's start), take d + 1 uniform points in the search box around θ,
    form the per-user gradient estimates ``A y_i`` (as DP-GIBO does) and collect their
    norms and the per-user losses.

    Args:
        settings: The run's settings (problem size, ``pilot_seed``, ``pilot_points``).
        problem: The pilot's problem; default ``gp_problem(settings, settings.pilot_seed)``
            (a variant of the E.1 problem, e.g. another parameterisation, on the pilot seed).
        theta: Optional public ``d`` point around which every pilot design is drawn.

    Returns:
        ``clip_bound`` (90% quantile of the norms, 2 digits), ``loss_clip`` (95% quantile
        of the losses) and the statistics the report quotes.
    """
    problem = gp_problem(settings, settings.pilot_seed) if problem is None else problem
    kernel = problem.recommended_kernel().to(torch.float64)
    kernel.requires_grad_(False)
    gen = torch.Generator().manual_seed(settings.pilot_seed)
    norms, mean_norms, losses = [], [], []
    d = problem.dim
    for j in range(settings.pilot_points):
        if theta is None:
            centre = problem.sample_in_bounds(1, seed=settings.pilot_seed + j)[0]
        else:
            centre = torch.as_tensor(theta, dtype=torch.float64)
        lo = torch.maximum(centre - settings.search_radius, problem.bounds[0])
        hi = torch.minimum(centre + settings.search_radius, problem.bounds[1])
        X = lo + (hi - lo) * torch.rand(d + 1, d, generator=gen, dtype=torch.float64)
        Y = problem(X)  # (d + 1) x n
        with torch.no_grad():
            A = GradientGP(X, kernel, problem.fit_noise_variance).gradient_weights(centre)
        G = (A @ Y).T
        norms.append(G.norm(dim=-1))
        mean_norms.append(float(G.mean(0).norm()))
        losses.append(Y.flatten())
    norms_t, losses_t = torch.cat(norms), torch.cat(losses)

    def quantile(t: torch.Tensor, p: float) -> float:
        return float(torch.quantile(t, p))

    return {
        "clip_bound": round_sig(quantile(norms_t, 0.9)),
        "loss_clip": round_sig(quantile(losses_t, 0.95)),
        "grad_norm_median": quantile(norms_t, 0.5),
        "grad_norm_q90": quantile(norms_t, 0.9),
        "mean_grad_norm_median": statistics.median(mean_norms),
        "loss_q50": quantile(losses_t, 0.5),
        "loss_q95": quantile(losses_t, 0.95),
        "num_users": problem.num_users,
    }


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
        self, experiment: str, method: str, seed: int, *, mu: float, clip: float, setting: Any,
        bias_tolerance: float | None = None, batch_size: int | None = None, iterations: int | None = None,
        observation_noise: float = 0.0, noise_std: float | None = None,
    ) -> Run:
        r"""DP-GIBO (finite ``mu``) or non-private GIBO (``mu = inf``) on the GP problem."""
        s = self.settings
        start = time.perf_counter()
        problem = gp_problem(s, seed, observation_noise)
        config = DPGIBOConfig(
            bounds=problem.bounds, kernel=problem.recommended_kernel(), num_iterations=iterations or s.iterations,
            privacy_mu=mu, clip_bound=clip, step_size=s.step_size, step_rule="adagrad",
            bias_tolerance=bias_tolerance, batch_size=batch_size,
            noise_variance=problem.fit_noise_variance if noise_std is None else noise_std**2,
            search_radius=s.search_radius, theta0=gp_theta0(problem, seed, s.gp_theta0), seed=seed,
            target_delta=s.target_delta, raw_samples=s.raw_samples, num_restarts=s.num_restarts,
            batch_search=s.batch_selection,
        )
        dp_result = DPGIBO(config).run(problem, progress=False)
        result = from_dp_gibo_result(dp_result)
        wall = time.perf_counter() - start
        evals, losses = iterate_curve(problem, result)
        return Run(
            experiment, method, seed, setting, evals, losses, losses[-1], result.num_evaluations, wall,
            epsilon=None if result.guarantee is None else result.guarantee.epsilon,
            extra={"batch_sizes": dp_result.release.batch_sizes,
                   "truth_loss": float(problem.objective(problem.true_lengthscales)),
                   "initial_loss": losses[0]},
        )

    def baseline_gp(self, experiment: str, method: str, seed: int, budget: int, observation_noise: float = 0.0,
                    setting: Any = None) -> Run:
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
                    problem, problem.bounds, num_evaluations=budget, beta=s.ucb_beta, refit_every=s.ucb_refit_every,
                    raw_samples=s.ucb_raw_samples, num_restarts=s.ucb_num_restarts, seed=seed,
                )
        else:
            raise ValueError(method)
        wall = time.perf_counter() - start
        evals, losses = iterate_curve(problem, result)
        return Run(experiment, method, seed, setting, evals, losses, losses[-1], result.num_evaluations, wall)

    def private_rs_gp(self, experiment: str, seed: int, budget: int, fraction: float, target_epsilon: float,
                      setting: Any) -> Run:
        r"""Private random search with ``E[K] = max(2, fraction · budget)`` trials."""
        s = self.settings
        mean_trials = max(2.0, fraction * budget)
        start = time.perf_counter()
        problem = gp_problem(s, seed)
        mu0 = per_trial_mu_for_epsilon(
            target_epsilon=target_epsilon, target_delta=s.target_delta, mean_trials=mean_trials,
            tnb_eta=s.private_rs_eta,
        )
        result = private_random_search(
            problem, problem.bounds, mean_trials=mean_trials, per_trial_mu=mu0, loss_clip=self.pilot["loss_clip"],
            tnb_eta=s.private_rs_eta, target_delta=s.target_delta, seed=seed,
        )
        wall = time.perf_counter() - start
        final = float(problem.objective(result.theta))
        return Run(
            experiment, "private random search", seed, setting, [int(round(mean_trials))], [final], final,
            mean_trials, wall, epsilon=result.guarantee.epsilon,
            extra={"per_trial_mu": mu0, "realized_trials_NON_PRIVATE": result.num_evaluations,
                   "noise_std": result.guarantee.details["noise_std"]},
        )

    # ------------------------------------------------------------------ E.3 / E.4
    @staticmethod
    def small_problem(name: str, seed: int):
        r"""The E.3 (``"normal"``) or E.4 (``"huber"``) problem."""
        return {"normal": NormalLocation, "huber": HuberRegression}[name](seed=seed)

    def dp_gibo_small(self, experiment: str, method: str, problem: str, seed: int, *, mu: float, clip: float,
                      batch: int, iterations: int, step_size: float, setting: Any) -> Run:
        r"""DP-GIBO with plain steps on the E.3/E.4 problem ``problem`` from θ₀ = 0."""
        s = self.settings
        start = time.perf_counter()
        problem = self.small_problem(problem, seed)
        config = DPGIBOConfig(
            bounds=problem.bounds, kernel=problem.recommended_kernel(), num_iterations=iterations, privacy_mu=mu,
            clip_bound=clip, step_size=step_size, batch_size=batch, theta0=problem.default_theta0(), seed=seed,
            target_delta=s.target_delta, raw_samples=s.raw_samples, num_restarts=s.num_restarts,
            batch_search=s.batch_selection,
        )
        result = from_dp_gibo_result(DPGIBO(config).run(problem, progress=False))
        return self._small_run(experiment, method, problem, seed, result, time.perf_counter() - start, setting)

    def noisy_gd_small(self, experiment: str, method: str, problem: str, seed: int, *, mu: float, clip: float,
                       iterations: int, step_size: float, setting: Any) -> Run:
        r"""Noisy gradient descent (``mu = inf``: clipped, non-private) on the E.3/E.4 problem ``problem``."""
        start = time.perf_counter()
        problem = self.small_problem(problem, seed)
        result = noisy_gradient_descent(
            problem, problem.bounds, num_iterations=iterations, clip_bound=clip, step_size=step_size,
            privacy_mu=mu, theta0=problem.default_theta0(), target_delta=self.settings.target_delta, seed=seed,
        )
        return self._small_run(experiment, method, problem, seed, result, time.perf_counter() - start, setting)

    def _small_run(self, experiment, method, problem, seed, result: BaselineResult, wall, setting) -> Run:
        its = result.history.iterates
        gaps = (problem.objective(its) - problem.optimal_value).tolist()
        dist = (its - problem.optimum).norm(dim=-1).tolist()
        return Run(
            experiment, method, seed, setting, list(range(its.shape[0])), gaps, gaps[-1], result.num_evaluations, wall,
            epsilon=None if result.guarantee is None else result.guarantee.epsilon,
            extra={"distance": dist, "final_distance": dist[-1], "coord0": its[:, 0].tolist(),
                   "optimum0": float(problem.optimum[0])},
        )

    # ------------------------------------------------------------------ SVM (E.2)
    def svm_gibo(self, experiment: str, method: str, seed: int, *, mu: float, setting: Any) -> Run:
        r"""DP-GIBO (finite ``mu``, clip ``svm_clip``) or non-private GIBO (``mu = inf``, no clipping)."""
        s = self.settings
        start = time.perf_counter()
        problem = svm_problem(s, seed)
        config = DPGIBOConfig(
            bounds=problem.bounds, kernel=problem.recommended_kernel(), num_iterations=s.svm_iterations,
            privacy_mu=mu, clip_bound=NO_CLIP if math.isinf(mu) else s.svm_clip, step_size=s.svm_step_size,
            step_rule="adagrad", batch_size=s.svm_batch_size or problem.dim + 1,
            theta0=problem.sample_in_bounds(1, seed=1000 + seed)[0], seed=seed, target_delta=s.target_delta,
            raw_samples=s.raw_samples, num_restarts=s.num_restarts, batch_search=s.batch_selection,
        )
        result = from_dp_gibo_result(DPGIBO(config).run(problem, progress=False))
        wall = time.perf_counter() - start
        evals, losses = iterate_curve(problem, result)
        return Run(
            experiment, method, seed, setting, evals, losses, losses[-1], result.num_evaluations, wall,
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


def experiment_jobs(settings: Settings, pilot: dict, only: tuple[str, ...]) -> list[Job]:
    r"""The jobs of the experiments in ``only``, in the serial order (a job only needs earlier jobs).

    A DP-GIBO run on the GP problem with the same arguments as an earlier one (e.g. the
    bias-tolerance sweep's 0.5 and the main run of the same seed) becomes a ``reuse_of`` job.

    Args:
        settings: The run's settings.
        pilot: The pilot's clip bounds (``{}`` when no GP experiment runs).
        only: The experiments to run (names from ``EXPERIMENTS``).

    Returns:
        The jobs, each depending only on earlier ones.
    """
    s = settings
    jobs: list[Job] = []
    memo: dict[tuple, int] = {}
    B = pilot.get("clip_bound")
    eps_main = gdp_epsilon(s.privacy_mu, s.target_delta)
    gp_cost = 25.0 * (s.gp_dim / 15) ** 2  # seconds of a T = 25, d = 15 DP-GIBO run here

    def append_job(job: Job) -> int:
        jobs.append(job)
        return len(jobs) - 1

    def dp_gibo_gp_job(label: str, experiment: str, method: str, seed: int, *, mu: float, clip: float,
                       setting: Any, bias_tolerance: float | None = None, batch_size: int | None = None,
                       iterations: int | None = None, observation_noise: float = 0.0,
                       noise_std: float | None = None) -> int:
        kwargs = dict(experiment=experiment, method=method, seed=seed, mu=mu, clip=clip, setting=setting,
                      bias_tolerance=bias_tolerance, batch_size=batch_size, iterations=iterations,
                      observation_noise=observation_noise, noise_std=noise_std)
        key = (seed, mu, clip, bias_tolerance, batch_size, iterations or s.iterations, observation_noise, noise_std)
        cost = gp_cost * (iterations or s.iterations) / 25 * (2.0 if batch_size else 1.0)
        if key in memo:
            return append_job(Job(label, "dp_gibo_gp", kwargs, reuse_of=memo[key], cost=0.0))
        memo[key] = len(jobs)
        return append_job(Job(label, "dp_gibo_gp", kwargs, cost=cost))

    main_label = f"DP-GIBO (μ={format_mu(s.privacy_mu)}, B={B:g}, pilot)" if B is not None else ""
    if "comparison" in only:
        main = {seed: dp_gibo_gp_job(f"DP-GIBO main seed {seed}", "comparison", main_label, seed, mu=s.privacy_mu,
                                     clip=B, setting="pilot B", bias_tolerance=s.bias_tolerance)
                for seed in s.seeds}
        for seed in s.seeds:
            dp_gibo_gp_job(f"DP-GIBO B=3 seed {seed}", "comparison",
                           f"DP-GIBO (μ={format_mu(s.privacy_mu)}, B={s.paper_clip_bound:g}, paper)", seed,
                           mu=s.privacy_mu, clip=s.paper_clip_bound, setting="paper B", bias_tolerance=s.bias_tolerance)
            dp_gibo_gp_job(f"GIBO seed {seed}", "comparison", "GIBO (non-private)", seed, mu=INF, clip=NO_CLIP,
                           setting="no clipping", bias_tolerance=s.bias_tolerance)
            append_job(Job(f"random search seed {seed}", "baseline_gp",
                           dict(experiment="comparison", method="random search (non-private)", seed=seed),
                           budget_from=main[seed], cost=0.4 * gp_cost))
            for frac in s.private_rs_fractions:
                append_job(Job(f"private RS {frac:g} seed {seed}", "private_rs_gp",
                               dict(experiment="comparison", seed=seed, fraction=frac, target_epsilon=eps_main,
                                    setting=frac),
                               budget_from=main[seed], cost=0.3 * gp_cost * frac))
            append_job(Job(f"UCB-BO seed {seed}", "baseline_gp",
                           dict(experiment="comparison", method="UCB-BO (non-private)", seed=seed),
                           budget_from=main[seed], cost=3.0 * gp_cost))
    if "eps" in only:
        for eps in s.eps_values:
            for seed in s.sweep_seeds:
                dp_gibo_gp_job(f"eps={eps:g} seed {seed}", "eps", f"bias_tolerance={eps:g}", seed, mu=s.privacy_mu, clip=B,
                               setting=eps, bias_tolerance=eps)
    if "mu" in only:
        for mu in s.mu_values:
            for seed in s.sweep_seeds:
                if math.isinf(mu):
                    dp_gibo_gp_job(f"mu=inf seed {seed}", "mu", "μ=∞ (GIBO, no clipping)", seed, mu=INF,
                                   clip=NO_CLIP, setting=INF, bias_tolerance=s.bias_tolerance)
                else:
                    dp_gibo_gp_job(f"mu={mu:g} seed {seed}", "mu", f"μ={mu:g}", seed, mu=mu, clip=B, setting=mu,
                                   bias_tolerance=s.bias_tolerance)
    if "sigma" in only:
        clip = B if s.sigma_clip is None else s.sigma_clip
        batch = None if s.sigma_bias_tolerance is not None else (s.sigma_batch_size or s.gp_dim + 1)
        correct: dict[int, int] = {}
        for sigma in s.sigma_values:
            for seed in s.sweep_seeds:
                j = dp_gibo_gp_job(f"sigma={sigma:g} seed {seed}", "sigma", f"surrogate σ={sigma:g}", seed,
                                   mu=s.sigma_mu, clip=clip, setting=sigma, bias_tolerance=s.sigma_bias_tolerance,
                                   batch_size=batch, iterations=s.sigma_iterations,
                                   observation_noise=s.observation_noise, noise_std=sigma)
                if sigma == s.sigma_values[0]:  # the correct σ sets random search's budget
                    correct[seed] = j
        for seed in s.sweep_seeds:
            append_job(Job(f"sigma RS seed {seed}", "baseline_gp",
                           dict(experiment="sigma", method="random search (non-private, noisy evaluations)", seed=seed,
                                observation_noise=s.observation_noise, setting="RS"),
                           budget_from=correct[seed], cost=0.6 * gp_cost))
    if "normal" in only:
        for mu in s.normal_location_mus:
            for seed in s.normal_location_seeds:
                append_job(Job(f"normal mu={mu:g} seed {seed}", "dp_gibo_small",
                               dict(experiment="normal", method=f"DP-GIBO μ={mu:g}", problem="normal", seed=seed,
                                    mu=mu, clip=s.normal_location_clip, batch=s.normal_location_batch,
                                    iterations=s.normal_location_iterations, step_size=s.normal_location_step_size,
                                    setting=mu), cost=0.1 * s.normal_location_iterations))
    if "huber" in only:
        for seed in s.huber_seeds:
            small = dict(problem="huber", seed=seed, clip=s.huber_clip, iterations=s.huber_iterations,
                         step_size=s.huber_step_size)
            append_job(Job(f"huber DP-GIBO seed {seed}", "dp_gibo_small",
                           dict(experiment="huber", method=f"DP-GIBO (μ={s.huber_mu:g})", mu=s.huber_mu,
                                batch=s.huber_batch, setting="dp-gibo", **small), cost=0.1 * s.huber_iterations))
            append_job(Job(f"huber DP-GD seed {seed}", "noisy_gd_small",
                           dict(experiment="huber", method=f"noisy GD (μ={s.huber_mu:g})", mu=s.huber_mu,
                                setting="dp-gd", **small), cost=0.5))
            append_job(Job(f"huber GD seed {seed}", "noisy_gd_small",
                           dict(experiment="huber", method="GD (non-private, clipped)", mu=INF, setting="gd", **small),
                           cost=0.5))
    if "svm" in only:
        svm_cost = 4.5 * s.svm_iterations * (1.0 if s.mode == "full" else 0.02)
        for seed in s.svm_seeds:
            dp_svm = append_job(Job(f"SVM DP-GIBO seed {seed}", "svm_gibo",
                                    dict(experiment="svm", method=f"DP-GIBO (μ={format_mu(s.svm_mu)}, B={s.svm_clip:g})",
                                         seed=seed, mu=s.svm_mu, setting="dp-gibo"), cost=svm_cost))
            append_job(Job(f"SVM GIBO seed {seed}", "svm_gibo",
                           dict(experiment="svm", method="GIBO (non-private)", seed=seed, mu=INF, setting="gibo"),
                           cost=svm_cost))
            append_job(Job(f"SVM random search seed {seed}", "svm_random",
                           dict(experiment="svm", method="random search (non-private)", seed=seed, setting="rs"),
                           budget_from=dp_svm, cost=0.5 * svm_cost))
    return jobs

