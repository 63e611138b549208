r"""Loss against dimension (issue 18 item 2; the paper's Figure 1): GP length-scale tuning at growing d.

The objective family keeps head-room at every d (see ``dimension_problem``): the data come
from a GP on ``[0, 1]^d`` of which only ``relevant`` inputs matter (short generating
length-scales); the other ``d − relevant`` generating length-scales sit at the top of the
box, so those inputs are nearly irrelevant. The public start θ₀ is the box centre, which
treats every input alike: it over-smooths the relevant inputs and keeps the irrelevant
ones at mid length. The right move is the ARD move the paper's GP example is about
(shorten the relevant, lengthen the irrelevant length-scales), and the number of training
points does not need to grow with d because the regression problem stays
``relevant``-dimensional.

Every method of a cell (d, seed) gets the evaluation count of the DP-GIBO run (E.1
settings) of that cell through ``budget_from``; the private methods are calibrated to
the same (ε, δ) as DP-GIBO at μ = ``privacy_mu``. A ``headroom`` job per cell measures the
loss at θ₀, at the generating length-scales ℓ* and of predicting zero (NON-PRIVATE
diagnostics, like every loss in the runs).

Contract: ``benchmarks.experiment``.

This module is the experiment (the pilots, ``Runner`` and the jobs); the settings, labels
and task family are in ``benchmarks.dimension_task`` and the report in
``benchmarks.dimension_report``, and their public names are re-exported here.
"""

from __future__ import annotations

import math
import time
import warnings

from benchmarks.dimension_report import write_report
from benchmarks.dimension_task import (  # noqa: F401  (re-exported)
    METHODS,
    PRIVATE,
    SELECTION_FIELDS,
    Settings,
    clip_bound,
    dimension_problem,
    generating_lengthscales,
    quick_settings,
)
from benchmarks.jobs import Job, KindRunner
from benchmarks.paper import pilot
from benchmarks.runs import Run, guarantee_of, iterate_curve
from botorch_dp import DPGIBO, DPGIBOConfig
from botorch_dp.baselines import (
    NO_CLIP,
    dp_hypo,
    from_dp_gibo_result,
    per_trial_mu_for_epsilon,
    private_random_search,
    random_search,
    ucb_bo,
)
from botorch_dp.baselines.selection import non_private_baseline_result
from botorch_dp.optim.options import AdaGrad, FixedClip, batch_rule
from botorch_dp.privacy.analysis.dp_hypo import dp_hypo_per_trial_mu_for_epsilon
from botorch_dp.privacy.analysis.gdp import gdp_epsilon
from botorch_dp.problems import GPRegressionLengthscales

__all__ = [
    "METHODS",
    "SELECTION_FIELDS",
    "Runner",
    "Settings",
    "dimension_problem",
    "gibo_config",
    "experiment_jobs",
    "generating_lengthscales",
    "make_runner",
    "prepare",
    "quick_settings",
    "write_report",
]

INF = math.inf


def _methods_at(settings: Settings, dim: int) -> tuple[tuple[str, ...], tuple[int, ...]]:
    r"""The methods and seeds run at ``dim`` (``dp_gibo`` first: it sets the budget)."""
    high = settings.high_dim_from > 0 and dim >= settings.high_dim_from
    methods = settings.high_dim_methods if high else settings.methods
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        raise ValueError(f"unknown methods {unknown}; known: {', '.join(METHODS)}")
    limits = {"ucb_bo": settings.ucb_bo_max_dim, "dp_hypo": settings.dp_hypo_max_dim, "gibo": settings.gibo_max_dim}
    methods = tuple(m for m in methods if m != "dp_gibo" and not 0 < limits.get(m, 0) < dim)
    seeds = settings.high_dim_seeds if high else settings.seeds
    if 0 < dim <= settings.extra_seeds_max_dim:
        seeds = seeds + tuple(x for x in settings.extra_seeds if x not in seeds)
    return ("dp_gibo",) + methods, seeds


def prepare(settings: Settings) -> dict:
    r"""The public pilots per d, on an independent synthetic draw (problem seed ``pilot_seed``).

    Returns:
        ``{"pilot": {str(d): paper.pilot's dict at uniform θ}}``, whose ``loss_clip`` is the
        private selections' C (and whose ``clip_bound`` is DP-GIBO's B when ``pilot_at`` is
        ``"uniform"``); with ``pilot_at="theta0"`` also ``"pilot_theta0"``, the same around the
        box centre θ₀, whose ``clip_bound`` is DP-GIBO's B.
    """
    context: dict[str, dict] = {"pilot": {}}
    if settings.pilot_at == "theta0":
        context["pilot_theta0"] = {}
    for d in settings.dims:
        problem = dimension_problem(settings, d, settings.pilot_seed)
        context["pilot"][str(d)] = pilot(settings, problem)
        if settings.pilot_at == "theta0":
            context["pilot_theta0"][str(d)] = pilot(settings, problem, theta=problem.default_theta0())
    return context


def gibo_config(
    settings: Settings, dim: int, seed: int, method: str, clip_bound: float
) -> tuple[GPRegressionLengthscales, DPGIBOConfig]:
    r"""The problem and config of a ``gibo`` job: ``dp_gibo`` / ``dp_gibo_eta1`` (μ = ``privacy_mu``,
    clip ``clip_bound``, η = ``step_size`` / ``preset_step_size``) or non-private ``gibo`` (no clip)."""
    s = settings
    problem = dimension_problem(s, dim, seed)
    private = method != "gibo"
    config = DPGIBOConfig(
        bounds=problem.bounds,
        kernel=problem.recommended_kernel(),
        num_iterations=s.iterations,
        privacy_mu=s.privacy_mu if private else INF,
        clip=FixedClip(clip_bound if private else NO_CLIP),
        step_size=s.preset_step_size if method == "dp_gibo_eta1" else s.step_size,
        step_rule=AdaGrad(),
        batches=batch_rule(
            None if s.bias_tolerance is not None else dim + 1, bias_tolerance=s.bias_tolerance, maxiter=s.acqf_maxiter
        ),
        noise_variance=problem.fit_noise_variance,
        search_radius=s.search_radius,
        theta0=problem.default_theta0(),
        seed=seed,
        target_delta=s.target_delta,
        raw_samples=s.raw_samples,
        num_restarts=s.num_restarts,
    )
    return problem, config


class Runner(KindRunner):
    r"""Runs one job of the experiment and returns a ``Run``; holds only the settings and the pilot."""

    KINDS = ("headroom", "gibo", "baseline", "private_selection")

    def headroom(self, dim: int, seed: int) -> Run:
        r"""Loss at θ₀ (box centre), at ℓ*, and of predicting zero (NON-PRIVATE diagnostics)."""
        start = time.perf_counter()
        problem = dimension_problem(self.settings, dim, seed)
        theta0 = problem.default_theta0()
        at_theta0 = float(problem.objective(theta0))
        at_truth = float(problem.objective(problem.true_lengthscales))
        zero = float(problem.val_Y.square().mean())
        return Run(
            "headroom",
            "head-room",
            seed,
            dim,
            [0],
            [at_theta0],
            at_theta0,
            0,
            time.perf_counter() - start,
            extra={
                "dim": dim,
                "loss_theta0": at_theta0,
                "loss_truth": at_truth,
                "loss_zero": zero,
                "headroom_ratio": (at_theta0 - at_truth) / at_theta0,
            },
        )

    def gibo(self, dim: int, seed: int, method: str) -> Run:
        r"""DP-GIBO (``dp_gibo``, ``dp_gibo_eta1``) or non-private GIBO (``gibo``) from the box centre."""
        start = time.perf_counter()
        problem, config = gibo_config(self.settings, dim, seed, method, clip_bound(self.context, dim))
        dp_result = DPGIBO(config).run(problem, progress=False)
        result = from_dp_gibo_result(dp_result)
        wall = time.perf_counter() - start
        evals, losses = iterate_curve(problem, result)
        return Run(
            "dimension",
            METHODS[method],
            seed,
            dim,
            evals,
            losses,
            losses[-1],
            result.num_evaluations,
            wall,
            epsilon=None if result.guarantee is None else result.guarantee.epsilon,
            extra={"dim": dim, "key": method, "batch_sizes": list(dp_result.release.batch_sizes)},
        )

    def baseline(self, dim: int, seed: int, method: str, budget: int) -> Run:
        r"""Random search or UCB-BO with ``budget`` evaluations."""
        s = self.settings
        start = time.perf_counter()
        problem = dimension_problem(s, dim, seed)
        if method == "random_search":
            result = random_search(problem, problem.bounds, num_evaluations=budget, seed=seed)
        elif method == "ucb_bo":
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                result = ucb_bo(
                    problem,
                    problem.bounds,
                    num_evaluations=budget,
                    beta=s.ucb_beta,
                    batch_size=s.ucb_batch or dim + 1,
                    refit_every=s.ucb_refit_every,
                    raw_samples=s.ucb_raw_samples,
                    num_restarts=s.ucb_num_restarts,
                    seed=seed,
                )
        else:
            raise ValueError(f"unknown baseline {method!r}")
        wall = time.perf_counter() - start
        evals, losses = iterate_curve(problem, result)
        return Run(
            "dimension",
            METHODS[method],
            seed,
            dim,
            evals,
            losses,
            losses[-1],
            result.num_evaluations,
            wall,
            extra={"dim": dim, "key": method},
        )

    def private_selection(
        self,
        dim: int,
        seed: int,
        method: str,
        budget: int,
        density_update_every: int = 1,
        max_points: int | None = None,
    ) -> Run:
        r"""Private random search or DP-HyPO with ``E[K] = private_rs_fraction · budget`` at DP-GIBO's (ε, δ)
        (DP-HyPO's sampling density recomputed every ``density_update_every`` trials, its GP's
        GP seeing the last ``max_points`` trials)."""
        s = self.settings
        start = time.perf_counter()
        problem = dimension_problem(s, dim, seed)
        target = gdp_epsilon(s.privacy_mu, s.target_delta)
        fraction = s.dp_hypo_fraction if method == "dp_hypo" else s.private_rs_fraction
        mean_trials = max(2.0, fraction * budget)
        loss_clip = self.context["pilot"][str(dim)]["loss_clip"]
        if method == "private_rs":
            mu0 = per_trial_mu_for_epsilon(
                target_epsilon=target, target_delta=s.target_delta, mean_trials=mean_trials, tnb_eta=s.tnb_eta
            )
            result = non_private_baseline_result(
                private_random_search(
                    problem,
                    problem.bounds,
                    mean_trials=mean_trials,
                    per_trial_mu=mu0,
                    loss_clip=loss_clip,
                    tnb_eta=s.tnb_eta,
                    target_delta=s.target_delta,
                    seed=seed,
                    non_private_trials=True,  # a measurement: K and every trial (NON-PRIVATE)
                )
            )
        elif method == "dp_hypo":
            mu0 = dp_hypo_per_trial_mu_for_epsilon(
                target_epsilon=target,
                target_delta=s.target_delta,
                mean_trials=mean_trials,
                ratio_upper=s.dp_hypo_ratio,
                tnb_eta=s.tnb_eta,
            )
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message=".*(optimization|Optimization|fit).*")
                result = non_private_baseline_result(
                    dp_hypo(
                        problem,
                        problem.bounds,
                        mean_trials=mean_trials,
                        per_trial_mu=mu0,
                        loss_clip=loss_clip,
                        ratio_bound=s.dp_hypo_ratio,
                        tnb_eta=s.tnb_eta,
                        target_delta=s.target_delta,
                        num_candidates=s.dp_hypo_candidates,
                        refit_every=s.dp_hypo_refit_every,
                        density_update_every=density_update_every,
                        max_points=max_points,
                        candidate_seed=seed,
                        seed=seed,
                        non_private_trials=True,  # a measurement: K and every trial (NON-PRIVATE)
                    )
                )
        else:
            raise ValueError(f"unknown private selection {method!r}")
        wall = time.perf_counter() - start
        final = float(problem.objective(result.theta))
        return Run(
            "dimension",
            METHODS[method],
            seed,
            dim,
            [int(round(mean_trials))],
            [final],
            final,
            mean_trials,
            wall,
            epsilon=guarantee_of(result).epsilon,
            extra={
                "dim": dim,
                "key": method,
                "per_trial_mu": mu0,
                "target_epsilon": target,
                "realized_trials_NON_PRIVATE": result.num_evaluations,
                **(
                    {"density_update_every": density_update_every, "max_points": max_points}
                    if method == "dp_hypo"
                    else {}
                ),
            },
        )


def experiment_jobs(settings: Settings, context: dict) -> list[Job]:
    r"""Per d and seed: the head-room job, DP-GIBO (sets the budget), then the other methods.

    Args:
        settings: The experiment's settings.
        context: ``prepare(settings)``.

    Returns:
        The jobs; every baseline's ``budget_from`` is the cell's DP-GIBO job.
    """
    jobs: list[Job] = []
    for dim in settings.dims:
        methods, seeds = _methods_at(settings, dim)
        gibo_cost = 0.5 * dim * settings.iterations / 25 * (dim / 15)
        for seed in seeds:
            jobs.append(Job(f"head-room d={dim} seed {seed}", "headroom", dict(dim=dim, seed=seed), cost=0.1))
            main = len(jobs)
            for method in methods:
                label = f"{method} d={dim} seed {seed}"
                if method in ("dp_gibo", "dp_gibo_eta1", "gibo"):
                    jobs.append(Job(label, "gibo", dict(dim=dim, seed=seed, method=method), cost=gibo_cost))
                elif method in ("random_search", "ucb_bo"):
                    jobs.append(
                        Job(
                            label,
                            "baseline",
                            dict(dim=dim, seed=seed, method=method),
                            budget_from=main,
                            cost=(5.0 if method == "ucb_bo" else 0.2) * gibo_cost,
                        )
                    )
                else:
                    kwargs = dict(dim=dim, seed=seed, method=method)
                    if method == "dp_hypo" and 0 < settings.dp_hypo_batched_from <= dim:
                        kwargs["density_update_every"] = dim + 1
                        if settings.dp_hypo_batched_max_points > 0:
                            kwargs["max_points"] = settings.dp_hypo_batched_max_points
                    jobs.append(
                        Job(
                            label,
                            "private_selection",
                            kwargs,
                            budget_from=main,
                            cost=(2.0 if method == "dp_hypo" else 0.2) * gibo_cost,
                        )
                    )
    return jobs


def make_runner(settings: Settings, context: dict):
    r"""The picklable ``run_job(kind, kwargs) -> Run`` of the experiment."""
    return Runner(settings, context).execute
