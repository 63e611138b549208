r"""``experiment_jobs``: the jobs of the paper's experiments (``paper``) as a DAG for ``jobs.run_jobs``."""

from __future__ import annotations

import math
from typing import Any

from benchmarks.jobs import Job
from benchmarks.paper import INF, Settings
from benchmarks.runs import format_mu
from botorch_dp.baselines import NO_CLIP
from botorch_dp.privacy.analysis.gdp import gdp_epsilon


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

    def dp_gibo_gp_job(
        label: str,
        experiment: str,
        method: str,
        seed: int,
        *,
        mu: float,
        clip: float | None,
        setting: Any,
        bias_tolerance: float | None = None,
        batch_size: int | None = None,
        iterations: int | None = None,
        observation_noise: float = 0.0,
        noise_std: float | None = None,
    ) -> int:
        kwargs = dict(
            experiment=experiment,
            method=method,
            seed=seed,
            mu=mu,
            clip=clip,
            setting=setting,
            bias_tolerance=bias_tolerance,
            batch_size=batch_size,
            iterations=iterations,
            observation_noise=observation_noise,
            noise_std=noise_std,
        )
        key = (seed, mu, clip, bias_tolerance, batch_size, iterations or s.iterations, observation_noise, noise_std)
        cost = gp_cost * (iterations or s.iterations) / 25 * (2.0 if batch_size else 1.0)
        if key in memo:
            return append_job(Job(label, "dp_gibo_gp", kwargs, reuse_of=memo[key], cost=0.0))
        memo[key] = len(jobs)
        return append_job(Job(label, "dp_gibo_gp", kwargs, cost=cost))

    main_label = f"DP-GIBO (μ={format_mu(s.privacy_mu)}, B={B:g}, pilot)" if B is not None else ""
    if "comparison" in only:
        main = {
            seed: dp_gibo_gp_job(
                f"DP-GIBO main seed {seed}",
                "comparison",
                main_label,
                seed,
                mu=s.privacy_mu,
                clip=B,
                setting="pilot B",
                bias_tolerance=s.bias_tolerance,
            )
            for seed in s.seeds
        }
        for seed in s.seeds:
            dp_gibo_gp_job(
                f"DP-GIBO B=3 seed {seed}",
                "comparison",
                f"DP-GIBO (μ={format_mu(s.privacy_mu)}, B={s.paper_clip_bound:g}, paper)",
                seed,
                mu=s.privacy_mu,
                clip=s.paper_clip_bound,
                setting="paper B",
                bias_tolerance=s.bias_tolerance,
            )
            dp_gibo_gp_job(
                f"GIBO seed {seed}",
                "comparison",
                "GIBO (non-private)",
                seed,
                mu=INF,
                clip=NO_CLIP,
                setting="no clipping",
                bias_tolerance=s.bias_tolerance,
            )
            append_job(
                Job(
                    f"random search seed {seed}",
                    "baseline_gp",
                    dict(experiment="comparison", method="random search (non-private)", seed=seed),
                    budget_from=main[seed],
                    cost=0.4 * gp_cost,
                )
            )
            for frac in s.private_rs_fractions:
                append_job(
                    Job(
                        f"private RS {frac:g} seed {seed}",
                        "private_rs_gp",
                        dict(experiment="comparison", seed=seed, fraction=frac, target_epsilon=eps_main, setting=frac),
                        budget_from=main[seed],
                        cost=0.3 * gp_cost * frac,
                    )
                )
            append_job(
                Job(
                    f"UCB-BO seed {seed}",
                    "baseline_gp",
                    dict(experiment="comparison", method="UCB-BO (non-private)", seed=seed),
                    budget_from=main[seed],
                    cost=3.0 * gp_cost,
                )
            )
    if "eps" in only:
        for eps in s.eps_values:
            for seed in s.sweep_seeds:
                dp_gibo_gp_job(
                    f"eps={eps:g} seed {seed}",
                    "eps",
                    f"bias_tolerance={eps:g}",
                    seed,
                    mu=s.privacy_mu,
                    clip=B,
                    setting=eps,
                    bias_tolerance=eps,
                )
    if "mu" in only:
        for mu in s.mu_values:
            for seed in s.sweep_seeds:
                if math.isinf(mu):
                    dp_gibo_gp_job(
                        f"mu=inf seed {seed}",
                        "mu",
                        "μ=∞ (GIBO, no clipping)",
                        seed,
                        mu=INF,
                        clip=NO_CLIP,
                        setting=INF,
                        bias_tolerance=s.bias_tolerance,
                    )
                else:
                    dp_gibo_gp_job(
                        f"mu={mu:g} seed {seed}",
                        "mu",
                        f"μ={mu:g}",
                        seed,
                        mu=mu,
                        clip=B,
                        setting=mu,
                        bias_tolerance=s.bias_tolerance,
                    )
    if "sigma" in only:
        clip = B if s.sigma_clip is None else s.sigma_clip
        batch = None if s.sigma_bias_tolerance is not None else (s.sigma_batch_size or s.gp_dim + 1)
        correct: dict[int, int] = {}
        for sigma in s.sigma_values:
            for seed in s.sweep_seeds:
                j = dp_gibo_gp_job(
                    f"sigma={sigma:g} seed {seed}",
                    "sigma",
                    f"surrogate σ={sigma:g}",
                    seed,
                    mu=s.sigma_mu,
                    clip=clip,
                    setting=sigma,
                    bias_tolerance=s.sigma_bias_tolerance,
                    batch_size=batch,
                    iterations=s.sigma_iterations,
                    observation_noise=s.observation_noise,
                    noise_std=sigma,
                )
                if sigma == s.sigma_values[0]:  # the correct σ sets random search's budget
                    correct[seed] = j
        for seed in s.sweep_seeds:
            append_job(
                Job(
                    f"sigma RS seed {seed}",
                    "baseline_gp",
                    dict(
                        experiment="sigma",
                        method="random search (non-private, noisy evaluations)",
                        seed=seed,
                        observation_noise=s.observation_noise,
                        setting="RS",
                    ),
                    budget_from=correct[seed],
                    cost=0.6 * gp_cost,
                )
            )
    if "normal" in only:
        for mu in s.normal_location_mus:
            for seed in s.normal_location_seeds:
                append_job(
                    Job(
                        f"normal mu={mu:g} seed {seed}",
                        "dp_gibo_small",
                        dict(
                            experiment="normal",
                            method=f"DP-GIBO μ={mu:g}",
                            problem="normal",
                            seed=seed,
                            mu=mu,
                            clip=s.normal_location_clip,
                            batch=s.normal_location_batch,
                            iterations=s.normal_location_iterations,
                            step_size=s.normal_location_step_size,
                            setting=mu,
                        ),
                        cost=0.1 * s.normal_location_iterations,
                    )
                )
    if "huber" in only:
        for seed in s.huber_seeds:
            small = dict(
                problem="huber",
                seed=seed,
                clip=s.huber_clip,
                iterations=s.huber_iterations,
                step_size=s.huber_step_size,
            )
            append_job(
                Job(
                    f"huber DP-GIBO seed {seed}",
                    "dp_gibo_small",
                    dict(
                        experiment="huber",
                        method=f"DP-GIBO (μ={s.huber_mu:g})",
                        mu=s.huber_mu,
                        batch=s.huber_batch,
                        setting="dp-gibo",
                        **small,
                    ),
                    cost=0.1 * s.huber_iterations,
                )
            )
            append_job(
                Job(
                    f"huber DP-GD seed {seed}",
                    "noisy_gd_small",
                    dict(
                        experiment="huber",
                        method=f"noisy GD (μ={s.huber_mu:g})",
                        mu=s.huber_mu,
                        setting="dp-gd",
                        **small,
                    ),
                    cost=0.5,
                )
            )
            append_job(
                Job(
                    f"huber GD seed {seed}",
                    "noisy_gd_small",
                    dict(experiment="huber", method="GD (non-private, clipped)", mu=INF, setting="gd", **small),
                    cost=0.5,
                )
            )
    if "svm" in only:
        svm_cost = 4.5 * s.svm_iterations * (1.0 if s.mode == "full" else 0.02)
        for seed in s.svm_seeds:
            dp_svm_method = f"DP-GIBO (μ={format_mu(s.svm_mu)}, B={s.svm_clip:g})"
            dp_svm = append_job(
                Job(
                    f"SVM DP-GIBO seed {seed}",
                    "svm_gibo",
                    dict(experiment="svm", method=dp_svm_method, seed=seed, mu=s.svm_mu, setting="dp-gibo"),
                    cost=svm_cost,
                )
            )
            append_job(
                Job(
                    f"SVM GIBO seed {seed}",
                    "svm_gibo",
                    dict(experiment="svm", method="GIBO (non-private)", seed=seed, mu=INF, setting="gibo"),
                    cost=svm_cost,
                )
            )
            append_job(
                Job(
                    f"SVM random search seed {seed}",
                    "svm_random",
                    dict(experiment="svm", method="random search (non-private)", seed=seed, setting="rs"),
                    budget_from=dp_svm,
                    cost=0.5 * svm_cost,
                )
            )
    return jobs
