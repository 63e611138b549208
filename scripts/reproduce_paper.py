#!/usr/bin/env python
r"""Reproduce the DP-GIBO paper's experiments (seed 000 §4 and Appendix E, seed 001 §4).

Writes ``results.md`` (tables, findings, timing), ``runs.json`` (every run) and PNG plots
to ``--out``:

1. ``comparison.png``: validation loss against evaluations on GP length-scale tuning
   (E.1: d = 15, n = 2000 split 50/50, T = 25, ε = 0.5, AdaGrad η = 0.3) for DP-GIBO
   (μ = 1), non-private GIBO, random search, private random search (Papernot–Steinke,
   same (ε, δ) as DP-GIBO) and UCB-BO, all with DP-GIBO's evaluation budget;
2. ``eps_sweep.png``: bias tolerance ε of adaptive batches, evaluations used vs final loss;
3. ``mu_sweep.png``: final loss against μ;
4. ``sigma_sweep.png``: E.5, observation noise 0.01, surrogate σ correct / too high / too low;
5. ``normal_location.png`` (E.3) and ``huber.png`` (E.4, DP-GIBO vs noisy GD);
6. ``svm.png``: E.2 / seed 001 §4.4, SVM hyperparameter tuning (d = 33): DP-GIBO (μ = 1),
   non-private GIBO and random search with DP-GIBO's evaluation count.

Usage::

    python scripts/reproduce_paper.py                 # full mode, writes reports/
    python scripts/reproduce_paper.py --quick --out /tmp/quick   # ~1 minute smoke run
    # full mode split over commands (each within a time limit), then one report:
    python scripts/reproduce_paper.py --workers 16 --only comparison --out /tmp/a
    python scripts/reproduce_paper.py --workers 16 --only eps mu normal huber --out /tmp/b
    python scripts/reproduce_paper.py --workers 16 --only sigma svm --out /tmp/c
    python scripts/reproduce_paper.py --merge /tmp/a /tmp/b /tmp/c --out reports
    # what produced reports/ on 2 cores (35 + ~45 minutes):
    python scripts/reproduce_paper.py --workers 2 --only comparison svm normal huber --out outputs/full_a
    python scripts/reproduce_paper.py --workers 2 --only eps mu sigma --out outputs/full_b
    python scripts/reproduce_paper.py --merge outputs/full_a outputs/full_b --out reports

``--workers N`` runs independent jobs in N spawned processes with one torch thread each
(jobs that need another job's result, e.g. random search's evaluation budget, wait for
it; a DP-GIBO run shared by several experiments runs once). The runs equal those of a
serial run with ``--threads 1`` (torch's results depend on its thread count in the last
digits, which ill-conditioned runs can amplify). ``--render DIR`` rewrites a report from
``DIR/runs.json``; ``--merge`` combines the ``runs.json`` of several commands.

Choices the paper does not fix, and reductions of the full mode (also stated in
``results.md``):

- Seeds: 10 replications for the method comparison and every sweep (E.1), 5 for the SVM
  (E.2), 3 for E.3/E.4 (the paper shows one run). ``--seeds``, ``--sweep-seeds`` and
  ``--svm-seeds`` override them. Serial full mode takes hours (one torch thread: DP-GIBO
  ~25 s, UCB-BO ~80 s per d = 15 run, σ-sweep runs 75–180 s, SVM DP-GIBO ~110 s, GIBO
  ~170 s, random search ~50 s per run); use ``--workers``.
- σ sweep: E.5 says "once again [the] set-up from Example 4.1" with μ = 1, while E.1
  gives the σ experiment its own settings: full batches b = d + 1 (fixed), B = 1,
  μ = 0.1, T = 45. Those are used (``sigma_*`` settings), with evaluation noise 0.01.
- Clip bound B on the GP problem: the paper's B = 3 is far above the per-user gradient
  estimates there, so its noise 2B√T/(nμ) swamps the signal. B is set from a pilot on an
  independent synthetic draw of the problem (problem seed 10000, never used for results):
  the 90% quantile of per-user gradient-estimate norms ``‖A y_i‖`` at uniform random θ with
  d + 1 uniform points in the search box around θ. DP-GIBO with the paper's B = 3 is
  reported as well. The loss clip C of private random search is the 95% quantile of the
  pilot's per-user losses.
- θ₀ on the GP problem: E.1 says "random restarts inside the optimization area", which
  can mean random starting points (the default here, ``--theta0 random``: uniform in the
  box per seed) or the restarts of the acquisition optimization. ``--theta0 centre`` starts
  every DP-GIBO/GIBO run at the box centre (the package default) instead. With AdaGrad,
  a coordinate moves at most η√T = 1.5 in T = 25 steps, a third of the box width, so
  random starts cannot reach far-away optima. E.3/E.4 start at θ₀ = 0 as in the paper.
- Batches: chosen jointly by default (``--batch-selection joint``, the package default;
  reports written before the option existed used ``greedy``).
- Step sizes of E.3/E.4 are not given in the paper: plain gradient steps with η = 0.1
  (normal location: Hessian I, clipped gradients of norm ≤ 1) and η = 0.2 (Huber: Hessian
  below 2I, about 0.25I), the same η for DP-GIBO and noisy GD.
- SVM (E.2): the UCI CT-slice data are not shipped, so ``KernelSVMRegression`` on
  friedman1 data (30 features, 5 informative; 1000 training points, 1000 validation
  users) stands in, d = 33 as in seed 001 §4.4 (the seed 000 version has d = 103). The
  paper's box, AdaGrad η = 0.8, B = 1, b = d + 1, θ₀ uniform per seed and an RBF surrogate
  with length-scale 1 on the raw (not normalised) coordinates. The paper gives no T; T = 25
  (850 evaluations; the loss levels off after about 10 iterations in a pilot on 2 seeds).
  Non-private GIBO does not clip.
- Acquisition optimization: ``optimize_acqf`` with 32 raw samples and 1 restart (the
  paper does not say; 64/2 tripled the run time for the same traces in a pilot).
- UCB-BO: BoTorch ``SingleTaskGP`` (Normalize/Standardize, fit by marginal likelihood
  every 25 iterations, re-conditioned in between), analytic UCB with β = 2, 2(d + 1)
  Sobol points. It is NON-PRIVATE, like random search and GIBO.

Every loss in the output is a NON-PRIVATE diagnostic (the noise-free validation loss of
what a method returned), computed only to evaluate the methods.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import platform
import statistics
import sys
import time
import warnings
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from tqdm.auto import tqdm

from botorch_dp.baselines import (
    BaselineResult,
    from_dp_gibo_result,
    gibo,
    noisy_gradient_descent,
    per_trial_mu_for_epsilon,
    private_random_search,
    random_search,
    ucb_bo,
)
from botorch_dp import DPGIBO, DPGIBOConfig
from botorch_dp.gradient_gp import GradientGP
from botorch_dp.privacy.analysis.gdp import gdp_epsilon
from botorch_dp.problems import GPRegressionLengthscales, HuberRegression, KernelSVMRegression, NormalLocation

INF = math.inf
EXPERIMENTS = ("comparison", "eps", "mu", "sigma", "normal", "huber", "svm")


# ====================================================================== settings
@dataclass
class Settings:
    r"""All knobs of a reproduction run (paper values unless noted in the docstring)."""

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
    prs_fractions: tuple[float, ...] = (0.125, 0.25, 0.5, 1.0)
    prs_eta: float = 1.0
    # pilot (clip bounds)
    pilot_seed: int = 10_000
    pilot_points: int = 6
    # normal location (E.3)
    nl_iterations: int = 150
    nl_batch: int = 3
    nl_clip: float = 1.0
    nl_mus: tuple[float, ...] = (0.5, 2.0)
    nl_step_size: float = 0.1
    nl_seeds: tuple[int, ...] = (0, 1, 2)
    # Huber regression (E.4)
    hub_iterations: int = 100
    hub_batch: int = 2
    hub_clip: float = 1.0
    hub_mu: float = 1.0
    hub_step_size: float = 0.2
    hub_seeds: tuple[int, ...] = (0, 1, 2)
    # SVM tuning (E.2 / seed 001 §4.4): friedman1 stand-in for CT slice, d = 33
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
    def quick(cls) -> "Settings":
        r"""A smoke configuration that keeps every code path (about a minute)."""
        return cls(
            mode="quick", gp_dim=4, gp_n_total=400, seeds=(0, 1), sweep_seeds=(0,), iterations=8,
            eps_values=(0.5, 2.0), mu_values=(0.3, 1.0, INF), sigma_iterations=5,
            ucb_refit_every=5, ucb_raw_samples=32, prs_fractions=(0.5, 1.0), pilot_points=2,
            nl_iterations=20, nl_seeds=(0,), hub_iterations=20, hub_seeds=(0,),
            svm_num_features=5, svm_n_train=200, svm_n_val=200, svm_iterations=3, svm_seeds=(0,),
        )


#: Values of settings that ``runs.json`` files written before the setting existed used.
LEGACY_SETTINGS = {
    "gp_theta0": "random", "batch_selection": "greedy", "sigma_iterations": 25, "sigma_mu": 1.0,
    "sigma_clip": None, "sigma_bias_tolerance": 0.5, "sigma_batch_size": None,
}

#: Settings fields that list seeds (merged as a union by ``--merge``).
SEED_FIELDS = ("seeds", "sweep_seeds", "nl_seeds", "hub_seeds", "svm_seeds")


def settings_from_dict(data: dict) -> Settings:
    r"""``Settings`` from a ``runs.json`` dict; fields it lacks take their ``LEGACY_SETTINGS`` value."""
    fields = {f.name for f in dataclasses.fields(Settings)}
    values = {k: v for k, v in LEGACY_SETTINGS.items() if k not in data}
    values.update({k: tuple(v) if isinstance(v, list) else v for k, v in data.items() if k in fields})
    return Settings(**values)


def settings_to_dict(settings: Settings) -> dict:
    return {k: (list(v) if isinstance(v, tuple) else v) for k, v in dataclasses.asdict(settings).items()}


@dataclass
class Run:
    r"""One run of one method: its curve and final values (losses are NON-PRIVATE diagnostics)."""

    experiment: str
    method: str
    seed: int
    setting: Any
    evals: list[int]
    losses: list[float]
    final_loss: float
    num_evaluations: float
    wall_s: float
    epsilon: float | None = None
    extra: dict = field(default_factory=dict)


# ====================================================================== helpers
def mean_se(values: list[float]) -> tuple[float, float]:
    r"""Mean and standard error (``nan`` s.e. for a single value)."""
    values = [float(v) for v in values]
    m = statistics.fmean(values)
    se = statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else math.nan
    return m, se


def fmt(values: list[float], digits: int = 4) -> str:
    m, se = mean_se(values)
    if math.isnan(se):
        return f"{m:.{digits}g}"
    return f"{m:.{digits}g} ± {se:.2g}"


def fmt_mu(mu: float) -> str:
    return "∞" if math.isinf(mu) else f"{mu:g}"


def threads_text() -> str:
    n = torch.get_num_threads()
    return f"{n} torch thread{'s' if n != 1 else ''}"


def round_sig(x: float, sig: int = 2) -> float:
    return float(f"{x:.{sig}g}")


def gp_problem(settings: Settings, seed: int, observation_noise: float = 0.0) -> GPRegressionLengthscales:
    return GPRegressionLengthscales(
        dim=settings.gp_dim, n_total=settings.gp_n_total, seed=seed, observation_noise_std=observation_noise
    )


def gp_theta0(problem: GPRegressionLengthscales, seed: int, how: str = "random") -> torch.Tensor:
    r"""Public, data-independent start for replication ``seed``: uniform (``"random"``) or the box centre."""
    if how == "centre":
        return problem.default_theta0()
    return problem.sample_in_bounds(1, seed=1000 + seed)[0]


def svm_problem(settings: Settings, seed: int) -> KernelSVMRegression:
    return KernelSVMRegression(
        dataset=settings.svm_dataset, n_train=settings.svm_n_train, n_val=settings.svm_n_val,
        num_features=settings.svm_num_features, seed=seed,
    )


def iterate_curve(problem, result: BaselineResult) -> tuple[list[int], list[float]]:
    r"""Validation loss of the method's choice after each number of evaluations (NON-PRIVATE)."""
    its, evals = result.history.iterates, result.history.evaluations
    uniq, inverse = torch.unique(its, dim=0, return_inverse=True)
    values = torch.cat([problem.objective(c) for c in uniq.split(64)]) if uniq.shape[0] else uniq.new_zeros(0)
    return [int(e) for e in evals], values[inverse].tolist()


def step_interp(evals: list[int], losses: list[float], grid: list[int]) -> list[float]:
    r"""Loss of the latest choice made with at most ``g`` evaluations, for ``g`` in ``grid``."""
    out, j = [], 0
    for g in grid:
        while j + 1 < len(evals) and evals[j + 1] <= g:
            j += 1
        out.append(losses[j] if evals[j] <= g else math.nan)
    return out


# ====================================================================== pilot
def pilot(settings: Settings) -> dict:
    r"""Clip bound B and loss clip C from an independent synthetic draw (public reasoning).

    At ``pilot_points`` uniform θ, take d + 1 uniform points in the search box around θ,
    form the per-user gradient estimates ``A y_i`` (as DP-GIBO does) and collect their
    norms and the per-user losses.
    """
    problem = gp_problem(settings, settings.pilot_seed)
    kernel = problem.recommended_kernel().to(torch.float64)
    kernel.requires_grad_(False)
    gen = torch.Generator().manual_seed(settings.pilot_seed)
    norms, mean_norms, losses = [], [], []
    d = settings.gp_dim
    for j in range(settings.pilot_points):
        theta = problem.sample_in_bounds(1, seed=settings.pilot_seed + j)[0]
        lo = torch.maximum(theta - settings.search_radius, problem.bounds[0])
        hi = torch.minimum(theta + settings.search_radius, problem.bounds[1])
        X = lo + (hi - lo) * torch.rand(d + 1, d, generator=gen, dtype=torch.float64)
        Y = problem(X)  # (d + 1) x n
        with torch.no_grad():
            A = GradientGP(X, kernel, problem.fit_noise_variance).gradient_weights(theta)
        G = (A @ Y).T
        norms.append(G.norm(dim=-1))
        mean_norms.append(float(G.mean(0).norm()))
        losses.append(Y.flatten())
    norms_t, losses_t = torch.cat(norms), torch.cat(losses)
    q = lambda t, p: float(torch.quantile(t, p))
    return {
        "clip_bound": round_sig(q(norms_t, 0.9)),
        "loss_clip": round_sig(q(losses_t, 0.95)),
        "grad_norm_median": q(norms_t, 0.5),
        "grad_norm_q90": q(norms_t, 0.9),
        "mean_grad_norm_median": statistics.median(mean_norms),
        "loss_q50": q(losses_t, 0.5),
        "loss_q95": q(losses_t, 0.95),
        "num_users": problem.num_users,
    }


# ====================================================================== runners
class Runner:
    r"""Runs and times single jobs; each method returns one ``Run`` and keeps no state between jobs.

    Jobs reach it through ``execute(kind, kwargs)``, in the parent process (``--workers 1``)
    or in a worker process (``--workers N``) that holds its own ``Runner``.
    """

    KINDS = ("dp_gibo_gp", "baseline_gp", "private_rs_gp", "dp_gibo_small", "noisy_gd_small", "svm_gibo", "svm_random")

    def __init__(self, settings: Settings, progress: bool = False) -> None:
        self.s = settings
        self.progress = progress
        self.runs: list[Run] = []
        self.pilot: dict = {}

    def execute(self, kind: str, kwargs: dict) -> Run:
        if kind not in self.KINDS:
            raise ValueError(f"unknown job kind {kind!r}")
        return getattr(self, kind)(**kwargs)

    # ------------------------------------------------------------------ GP problem
    def dp_gibo_gp(
        self, experiment: str, method: str, seed: int, *, mu: float, clip: float, setting: Any,
        bias_tolerance: float | None = None, batch_size: int | None = None, iterations: int | None = None,
        observation_noise: float = 0.0, noise_std: float | None = None,
    ) -> Run:
        s = self.s
        iterations = iterations or s.iterations
        start = time.perf_counter()
        problem = gp_problem(s, seed, observation_noise)
        noise_var = problem.fit_noise_variance if noise_std is None else noise_std**2
        kwargs = dict(
            num_iterations=iterations, clip_bound=clip, step_size=s.step_size, step_rule="adagrad",
            bias_tolerance=bias_tolerance, batch_size=batch_size, noise_variance=noise_var,
            search_radius=s.search_radius, theta0=gp_theta0(problem, seed, s.gp_theta0), seed=seed,
            target_delta=s.target_delta, raw_samples=s.raw_samples, num_restarts=s.num_restarts,
            batch_selection=s.batch_selection,
        )
        if math.isinf(mu):
            result = gibo(problem, problem.bounds, kernel=problem.recommended_kernel(), **kwargs)
        else:
            config = DPGIBOConfig(bounds=problem.bounds, kernel=problem.recommended_kernel(), privacy_mu=mu, **kwargs)
            result = from_dp_gibo_result(DPGIBO(config).run(problem, progress=False))
        wall = time.perf_counter() - start
        evals, losses = iterate_curve(problem, result)
        return Run(
            experiment, method, seed, setting, evals, losses, losses[-1], result.num_evaluations, wall,
            epsilon=None if result.guarantee is None else result.guarantee.epsilon,
            extra={"batch_sizes": result.history.extras["dp_gibo_result"].release.batch_sizes,
                   "truth_loss": float(problem.objective(problem.true_lengthscales)),
                   "initial_loss": losses[0]},
        )

    def baseline_gp(self, experiment: str, method: str, seed: int, budget: int, observation_noise: float = 0.0,
                    setting: Any = None) -> Run:
        s = self.s
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
        s = self.s
        mean_trials = max(2.0, fraction * budget)
        start = time.perf_counter()
        problem = gp_problem(s, seed)
        mu0 = per_trial_mu_for_epsilon(
            target_epsilon=target_epsilon, target_delta=s.target_delta, mean_trials=mean_trials, tnb_eta=s.prs_eta
        )
        result = private_random_search(
            problem, problem.bounds, mean_trials=mean_trials, per_trial_mu=mu0, loss_clip=self.pilot["loss_clip"],
            tnb_eta=s.prs_eta, target_delta=s.target_delta, seed=seed,
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
        return {"normal": NormalLocation, "huber": HuberRegression}[name](seed=seed)

    def dp_gibo_small(self, experiment: str, method: str, problem: str, seed: int, *, mu: float, clip: float,
                      batch: int, iterations: int, step_size: float, setting: Any) -> Run:
        s = self.s
        start = time.perf_counter()
        problem = self.small_problem(problem, seed)
        config = DPGIBOConfig(
            bounds=problem.bounds, kernel=problem.recommended_kernel(), num_iterations=iterations, privacy_mu=mu,
            clip_bound=clip, step_size=step_size, batch_size=batch, theta0=problem.default_theta0(), seed=seed,
            target_delta=s.target_delta, raw_samples=s.raw_samples, num_restarts=s.num_restarts,
            batch_selection=s.batch_selection,
        )
        result = from_dp_gibo_result(DPGIBO(config).run(problem, progress=False))
        return self._small_run(experiment, method, problem, seed, result, time.perf_counter() - start, setting)

    def noisy_gd_small(self, experiment: str, method: str, problem: str, seed: int, *, mu: float, clip: float,
                       iterations: int, step_size: float, setting: Any) -> Run:
        start = time.perf_counter()
        problem = self.small_problem(problem, seed)
        result = noisy_gradient_descent(
            problem, problem.bounds, num_iterations=iterations, clip_bound=clip, step_size=step_size,
            privacy_mu=mu, theta0=problem.default_theta0(), target_delta=self.s.target_delta, seed=seed,
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
        s = self.s
        start = time.perf_counter()
        problem = svm_problem(s, seed)
        kwargs = dict(
            num_iterations=s.svm_iterations, step_size=s.svm_step_size, step_rule="adagrad",
            batch_size=s.svm_batch_size or problem.dim + 1, theta0=problem.sample_in_bounds(1, seed=1000 + seed)[0],
            seed=seed, target_delta=s.target_delta, raw_samples=s.raw_samples, num_restarts=s.num_restarts,
            batch_selection=s.batch_selection,
        )
        if math.isinf(mu):
            result = gibo(problem, problem.bounds, kernel=problem.recommended_kernel(), **kwargs)
        else:
            config = DPGIBOConfig(bounds=problem.bounds, kernel=problem.recommended_kernel(), privacy_mu=mu,
                                  clip_bound=s.svm_clip, **kwargs)
            result = from_dp_gibo_result(DPGIBO(config).run(problem, progress=False))
        wall = time.perf_counter() - start
        evals, losses = iterate_curve(problem, result)
        return Run(
            experiment, method, seed, setting, evals, losses, losses[-1], result.num_evaluations, wall,
            epsilon=None if result.guarantee is None else result.guarantee.epsilon,
            extra={"initial_loss": losses[0], "dim": problem.dim, "num_users": problem.num_users},
        )

    def svm_random(self, experiment: str, method: str, seed: int, budget: int, setting: Any = None) -> Run:
        start = time.perf_counter()
        problem = svm_problem(self.s, seed)
        result = random_search(problem, problem.bounds, num_evaluations=budget, seed=seed)
        wall = time.perf_counter() - start
        evals, losses = iterate_curve(problem, result)
        return Run(experiment, method, seed, setting, evals, losses, losses[-1], result.num_evaluations, wall)


# ====================================================================== experiments
@dataclass
class Job:
    r"""One unit of work: ``Runner.<kind>(**kwargs)``, possibly fed by earlier jobs.

    Attributes:
        label: Progress-bar label.
        kind: The ``Runner`` method.
        kwargs: Its keyword arguments (plain, picklable values).
        budget_from: Index of the job whose ``num_evaluations`` is passed as ``budget``.
        reuse_of: Index of an identical DP-GIBO job: its ``Run`` is copied (relabelled), not re-run.
        cost: Rough seconds at one thread (a scheduling hint for ``--workers``; no effect on results).
    """

    label: str
    kind: str
    kwargs: dict
    budget_from: int | None = None
    reuse_of: int | None = None
    cost: float = 1.0

    @property
    def deps(self) -> list[int]:
        return [i for i in (self.budget_from, self.reuse_of) if i is not None]


def experiment_jobs(s: Settings, pilot: dict, only: tuple[str, ...]) -> list[Job]:
    r"""The jobs of the experiments in ``only``, in the serial order (a job only needs earlier jobs).

    A DP-GIBO run on the GP problem with the same arguments as an earlier one (e.g. the
    ε-sweep's ε = 0.5 and the main run of the same seed) becomes a ``reuse_of`` job.
    """
    jobs: list[Job] = []
    memo: dict[tuple, int] = {}
    B = pilot.get("clip_bound")
    eps_main = gdp_epsilon(s.privacy_mu, s.target_delta)
    gp_cost = 25.0 * (s.gp_dim / 15) ** 2  # seconds of a T = 25, d = 15 DP-GIBO run here

    def add(job: Job) -> int:
        jobs.append(job)
        return len(jobs) - 1

    def dp(label: str, experiment: str, method: str, seed: int, *, mu: float, clip: float, setting: Any,
           bias_tolerance: float | None = None, batch_size: int | None = None, iterations: int | None = None,
           observation_noise: float = 0.0, noise_std: float | None = None) -> int:
        kwargs = dict(experiment=experiment, method=method, seed=seed, mu=mu, clip=clip, setting=setting,
                      bias_tolerance=bias_tolerance, batch_size=batch_size, iterations=iterations,
                      observation_noise=observation_noise, noise_std=noise_std)
        key = (seed, mu, clip, bias_tolerance, batch_size, iterations or s.iterations, observation_noise, noise_std)
        cost = gp_cost * (iterations or s.iterations) / 25 * (2.0 if batch_size else 1.0)
        if key in memo:
            return add(Job(label, "dp_gibo_gp", kwargs, reuse_of=memo[key], cost=0.0))
        memo[key] = len(jobs)
        return add(Job(label, "dp_gibo_gp", kwargs, cost=cost))

    main_label = f"DP-GIBO (μ={fmt_mu(s.privacy_mu)}, B={B:g}, pilot)" if B is not None else ""
    if "comparison" in only:
        main = {seed: dp(f"DP-GIBO main seed {seed}", "comparison", main_label, seed, mu=s.privacy_mu, clip=B,
                         setting="pilot B", bias_tolerance=s.bias_tolerance) for seed in s.seeds}
        for seed in s.seeds:
            dp(f"DP-GIBO B=3 seed {seed}", "comparison", f"DP-GIBO (μ={fmt_mu(s.privacy_mu)}, B={s.paper_clip_bound:g}, paper)",
               seed, mu=s.privacy_mu, clip=s.paper_clip_bound, setting="paper B", bias_tolerance=s.bias_tolerance)
            dp(f"GIBO seed {seed}", "comparison", "GIBO (non-private)", seed, mu=INF, clip=1e30, setting="no clipping",
               bias_tolerance=s.bias_tolerance)
            add(Job(f"random search seed {seed}", "baseline_gp",
                    dict(experiment="comparison", method="random search (non-private)", seed=seed),
                    budget_from=main[seed], cost=0.4 * gp_cost))
            for frac in s.prs_fractions:
                add(Job(f"private RS {frac:g} seed {seed}", "private_rs_gp",
                        dict(experiment="comparison", seed=seed, fraction=frac, target_epsilon=eps_main, setting=frac),
                        budget_from=main[seed], cost=0.3 * gp_cost * frac))
            add(Job(f"UCB-BO seed {seed}", "baseline_gp",
                    dict(experiment="comparison", method="UCB-BO (non-private)", seed=seed),
                    budget_from=main[seed], cost=3.0 * gp_cost))
    if "eps" in only:
        for eps in s.eps_values:
            for seed in s.sweep_seeds:
                dp(f"eps={eps:g} seed {seed}", "eps", f"ε={eps:g}", seed, mu=s.privacy_mu, clip=B, setting=eps,
                   bias_tolerance=eps)
    if "mu" in only:
        for mu in s.mu_values:
            for seed in s.sweep_seeds:
                if math.isinf(mu):
                    dp(f"mu=inf seed {seed}", "mu", "μ=∞ (GIBO, no clipping)", seed, mu=INF, clip=1e30, setting=INF,
                       bias_tolerance=s.bias_tolerance)
                else:
                    dp(f"mu={mu:g} seed {seed}", "mu", f"μ={mu:g}", seed, mu=mu, clip=B, setting=mu,
                       bias_tolerance=s.bias_tolerance)
    if "sigma" in only:
        clip = B if s.sigma_clip is None else s.sigma_clip
        batch = None if s.sigma_bias_tolerance is not None else (s.sigma_batch_size or s.gp_dim + 1)
        correct: dict[int, int] = {}
        for sigma in s.sigma_values:
            for seed in s.sweep_seeds:
                j = dp(f"sigma={sigma:g} seed {seed}", "sigma", f"surrogate σ={sigma:g}", seed, mu=s.sigma_mu, clip=clip,
                       setting=sigma, bias_tolerance=s.sigma_bias_tolerance, batch_size=batch,
                       iterations=s.sigma_iterations, observation_noise=s.observation_noise, noise_std=sigma)
                if sigma == s.sigma_values[0]:  # the correct σ sets random search's budget
                    correct[seed] = j
        for seed in s.sweep_seeds:
            add(Job(f"sigma RS seed {seed}", "baseline_gp",
                    dict(experiment="sigma", method="random search (non-private, noisy evaluations)", seed=seed,
                         observation_noise=s.observation_noise, setting="RS"),
                    budget_from=correct[seed], cost=0.6 * gp_cost))
    if "normal" in only:
        for mu in s.nl_mus:
            for seed in s.nl_seeds:
                add(Job(f"normal mu={mu:g} seed {seed}", "dp_gibo_small",
                        dict(experiment="normal", method=f"DP-GIBO μ={mu:g}", problem="normal", seed=seed, mu=mu,
                             clip=s.nl_clip, batch=s.nl_batch, iterations=s.nl_iterations, step_size=s.nl_step_size,
                             setting=mu), cost=0.1 * s.nl_iterations))
    if "huber" in only:
        for seed in s.hub_seeds:
            small = dict(problem="huber", seed=seed, clip=s.hub_clip, iterations=s.hub_iterations,
                         step_size=s.hub_step_size)
            add(Job(f"huber DP-GIBO seed {seed}", "dp_gibo_small",
                    dict(experiment="huber", method=f"DP-GIBO (μ={s.hub_mu:g})", mu=s.hub_mu, batch=s.hub_batch,
                         setting="dp-gibo", **small), cost=0.1 * s.hub_iterations))
            add(Job(f"huber DP-GD seed {seed}", "noisy_gd_small",
                    dict(experiment="huber", method=f"noisy GD (μ={s.hub_mu:g})", mu=s.hub_mu, setting="dp-gd", **small),
                    cost=0.5))
            add(Job(f"huber GD seed {seed}", "noisy_gd_small",
                    dict(experiment="huber", method="GD (non-private, clipped)", mu=INF, setting="gd", **small),
                    cost=0.5))
    if "svm" in only:
        svm_cost = 4.5 * s.svm_iterations * (1.0 if s.mode == "full" else 0.02)
        dp_svm = {}
        for seed in s.svm_seeds:
            dp_svm[seed] = add(Job(f"SVM DP-GIBO seed {seed}", "svm_gibo",
                                   dict(experiment="svm", method=f"DP-GIBO (μ={fmt_mu(s.svm_mu)}, B={s.svm_clip:g})",
                                        seed=seed, mu=s.svm_mu, setting="dp-gibo"), cost=svm_cost))
            add(Job(f"SVM GIBO seed {seed}", "svm_gibo",
                    dict(experiment="svm", method="GIBO (non-private)", seed=seed, mu=INF, setting="gibo"), cost=svm_cost))
            add(Job(f"SVM random search seed {seed}", "svm_random",
                    dict(experiment="svm", method="random search (non-private)", seed=seed, setting="rs"),
                    budget_from=dp_svm[seed], cost=0.5 * svm_cost))
    return jobs


# ====================================================================== execution
def _job_kwargs(job: Job, results: list) -> dict:
    kwargs = dict(job.kwargs)
    if job.budget_from is not None:
        kwargs["budget"] = results[job.budget_from].num_evaluations
    return kwargs


def _reused(job: Job, source: Run) -> Run:
    k = job.kwargs
    return dataclasses.replace(source, experiment=k["experiment"], method=k["method"], setting=k["setting"],
                               extra={**source.extra, "reused": True})


_WORKER: Runner | None = None


def _init_worker(settings: dict, pilot: dict) -> None:
    r"""Process-pool initializer: one torch thread, a ``Runner`` with the parent's settings and pilot."""
    global _WORKER
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore", message=".*(optimization|Optimization).*")
    _WORKER = Runner(settings_from_dict(settings))
    _WORKER.pilot = pilot


def _run_in_worker(kind: str, kwargs: dict) -> dict:
    return dataclasses.asdict(_WORKER.execute(kind, kwargs))


def critical_paths(jobs: list[Job]) -> list[float]:
    r"""Cost of each job plus its longest chain of dependants (for scheduling longest-first)."""
    cp = [job.cost for job in jobs]
    for i in range(len(jobs) - 1, -1, -1):  # dependants always come after their sources
        for d in jobs[i].deps:
            cp[d] = max(cp[d], jobs[d].cost + cp[i])
    return cp


def run_jobs(runner: Runner, jobs: list[Job], workers: int = 1, progress: bool = True) -> list[Run]:
    r"""Run ``jobs`` and return their ``Run`` objects in job order (whatever order they finished in).

    ``workers = 1`` runs them one after the other in this process. Otherwise a pool of
    ``workers`` spawned processes (one torch thread each) runs every job whose sources are
    done, longest critical path first; reused runs are copied here. Each job is
    deterministic given its arguments, so the runs equal those of a serial run (up to
    floating-point differences between torch thread counts) apart from wall times.
    """
    results: list[Run | None] = [None] * len(jobs)
    bar = tqdm(total=len(jobs), desc="reproduce", disable=not progress)
    if workers <= 1:
        for i, job in enumerate(jobs):
            bar.set_postfix_str(job.label)
            if job.reuse_of is not None:
                results[i] = _reused(job, results[job.reuse_of])
            else:
                results[i] = runner.execute(job.kind, _job_kwargs(job, results))
            bar.update()
        bar.close()
        return results

    import concurrent.futures as cf
    import multiprocessing

    cp = critical_paths(jobs)
    pending = set(range(len(jobs)))
    in_flight: dict[cf.Future, int] = {}
    # Spawned workers unpickle the worker functions by module name: ``__main__`` is handled by
    # multiprocessing; a module loaded from this file under another name (tests) must be importable,
    # and the workers start with this process's sys.path.
    module_dir = str(Path(__file__).resolve().parent)
    added = module_dir not in sys.path
    if added:
        sys.path.append(module_dir)
    try:
        with cf.ProcessPoolExecutor(
            max_workers=workers, mp_context=multiprocessing.get_context("spawn"), initializer=_init_worker,
            initargs=(settings_to_dict(runner.s), runner.pilot),
        ) as pool:
            while pending or in_flight:
                progressed = True
                while progressed:  # copy reused runs here; submit ready jobs while workers are free
                    progressed = False
                    ready = sorted((i for i in pending if all(results[d] is not None for d in jobs[i].deps)),
                                   key=lambda i: (-cp[i], i))
                    for i in ready:
                        if jobs[i].reuse_of is not None:
                            results[i] = _reused(jobs[i], results[jobs[i].reuse_of])
                            pending.discard(i)
                            bar.update()
                            progressed = True
                        elif len(in_flight) < workers:
                            in_flight[pool.submit(_run_in_worker, jobs[i].kind, _job_kwargs(jobs[i], results))] = i
                            pending.discard(i)
                if not in_flight:
                    if pending:
                        raise RuntimeError("job dependencies cannot be satisfied")
                    break
                done, _ = cf.wait(in_flight, return_when=cf.FIRST_COMPLETED)
                for fut in done:
                    i = in_flight.pop(fut)
                    results[i] = Run(**fut.result())
                    bar.set_postfix_str(jobs[i].label)
                    bar.update()
    finally:
        if added:
            sys.path.remove(module_dir)
        bar.close()
    return results


# ====================================================================== report
def by(runs: list[Run], experiment: str) -> dict[str, list[Run]]:
    out: dict[str, list[Run]] = defaultdict(list)
    for r in runs:
        if r.experiment == experiment:
            out[r.method].append(r)
    return out


def compare_sentence(name_a: str, a: list[float], name_b: str, b: list[float]) -> tuple[bool, str]:
    r"""Whether mean(a) < mean(b), with the difference in units of its standard error."""
    ma, sa = mean_se(a)
    mb, sb = mean_se(b)
    se = math.sqrt((0 if math.isnan(sa) else sa) ** 2 + (0 if math.isnan(sb) else sb) ** 2)
    z_txt = f", {(mb - ma) / se:+.1f} s.e." if se > 0 else ", one seed: no s.e."
    return ma < mb, f"{name_a} {ma:.4g} vs {name_b} {mb:.4g} (difference {mb - ma:+.3g}{z_txt})"


def claim(what: str, a_name: str, a_runs: list[Run], b_name: str, b_runs: list[Run]) -> str:
    r"""A finding comparing final losses paired by seed: mean, median and seeds where ``a`` is lower."""
    by_seed = {r.seed: r.final_loss for r in b_runs}
    pairs = [(r.final_loss, by_seed[r.seed]) for r in a_runs if r.seed in by_seed]
    a, b = [x for x, _ in pairs], [y for _, y in pairs]
    mean_ok, txt = compare_sentence(a_name, a, b_name, b)
    wins = sum(x < y for x, y in pairs)
    median_txt = f"medians {statistics.median(a):.4g} vs {statistics.median(b):.4g}"
    majority = wins > len(pairs) / 2
    status = ("Matches" if mean_ok and majority else
              "Partly matches" if mean_ok or majority else "**Does NOT match**")
    return (f"{status} {what}: {a_name} lower on {wins}/{len(pairs)} seeds; means {txt}; {median_txt}"
            "; 'matches' needs both a lower mean and a majority of seeds.")


def n_seeds(runs: list[Run], *experiments: str) -> int:
    return len({r.seed for r in runs if r.experiment in experiments})


def write_report(runner: Runner, out: Path, total_wall: float, argv: list[str], only: tuple[str, ...], note: str = "",
                 execution: str | None = None) -> str:
    r"""Write ``out/results.md``; ``execution`` describes the processes and threads (default: this process)."""
    s, runs, p = runner.s, runner.runs, runner.pilot
    lines: list[str] = []
    add = lines.append
    eps_main = gdp_epsilon(s.privacy_mu, s.target_delta)
    execution = execution or threads_text()
    add(f"# DP-GIBO paper reproduction ({s.mode} mode)\n")
    add(f"Command: `python scripts/reproduce_paper.py {' '.join(argv)}`  ")
    add(f"Total wall time: {total_wall:.0f} s on {execution} "
        f"({platform.machine()}, torch {torch.__version__}).  ")
    if note:
        add(note + "  ")
    add("All losses below are NON-PRIVATE diagnostics (noise-free validation loss of what a method returned).\n")
    add("## Settings and deviations from the paper\n")
    add(f"- GP length-scale tuning (E.1): d = {s.gp_dim}, n = {s.gp_n_total} split 50/50 "
        f"({s.gp_n_total // 2} validation users), T = {s.iterations}, ε = {s.bias_tolerance}, μ = {s.privacy_mu} "
        f"(= ({eps_main:.3f}, {s.target_delta:g})-DP), AdaGrad η = {s.step_size}, surrogate RBF ℓ = 1, "
        f"σ = 0.05, search radius {s.search_radius}; "
        + ("θ₀ uniform in the box per seed (`--theta0 random`)." if s.gp_theta0 == "random"
           else "θ₀ = box centre for every seed (`--theta0 centre`)."))
    if s.mode == "quick":
        add("- **Quick mode: a smoke configuration (tiny problems, few iterations), not a reproduction; "
            "its numbers say nothing about the paper's claims.**")
    has = {r.experiment for r in runs}
    parts, reduced = [], []
    for exps, name, paper in ((("comparison",), "comparison", 10), (("eps", "mu", "sigma"), "sweeps", 10),
                              (("normal",), "E.3", None), (("huber",), "E.4", None), (("svm",), "SVM", 5)):
        if has & set(exps):
            k = n_seeds(runs, *exps)
            parts.append(f"{name} {k}" + (f" (paper: {paper})" if paper else ""))
            if paper and k < paper:
                reduced.append(name)
    add("- Seeds: " + ", ".join(parts) + (" (the paper shows one run each for E.3/E.4)" if has & {"normal", "huber"} else "")
        + (f". **Fewer than the paper's replications** ({', '.join(reduced)})." if reduced else "."))
    if s.batch_selection == "joint":
        add("- Batches are chosen jointly (`batch_selection=\"joint\"`: `optimize_acqf` over all q points; adaptive "
            "batches take the smallest q ≤ d + 1, found by bisection, whose optimized batch reaches the bias tolerance ε, "
            "or d + 1 points when none does).")
    else:
        add("- Batches are chosen greedily (`batch_selection=\"greedy\"`: one point at a time, conditioning on the "
            "points already chosen).")
    if p:
        add(f"- Clip bound: pilot on an independent synthetic draw (problem seed {s.pilot_seed}): per-user "
            f"gradient-estimate norms median {p['grad_norm_median']:.3g}, 90% quantile {p['grad_norm_q90']:.3g}, "
            f"norm of the mean gradient estimate (median over pilot θ) {p['mean_grad_norm_median']:.3g}. "
            f"**B = {p['clip_bound']:g}** (90% quantile) instead of the paper's B = {s.paper_clip_bound:g}, whose "
            f"noise std 2B√T/(nμ) = {2 * s.paper_clip_bound * math.sqrt(s.iterations) / (p['num_users'] * s.privacy_mu):.3g} "
            f"per coordinate exceeds the mean gradient; both are reported. Private random search clips per-user "
            f"losses to C = {p['loss_clip']:g} (95% quantile of pilot losses; median {p['loss_q50']:.3g}).")
    if "sigma" in has:
        if s.sigma_bias_tolerance is None:
            batch_txt = f"fixed full batches b = d + 1 = {s.sigma_batch_size or s.gp_dim + 1}"
        else:
            batch_txt = f"adaptive batches, ε = {s.sigma_bias_tolerance:g}, b ≤ d + 1"
        clip_txt = "pilot B" if s.sigma_clip is None else f"B = {s.sigma_clip:g}"
        paper_txt = ("the settings E.1 gives for the σ experiment (b = d + 1, B = 1, μ = 0.1, T = 45; E.5's own text "
                     "says μ = 1)" if (s.sigma_bias_tolerance is None and s.sigma_mu == 0.1 and s.sigma_clip == 1.0
                         and s.sigma_iterations == 45)
                     else "**not the paper's σ settings** (E.1: b = d + 1, B = 1, μ = 0.1, T = 45)")
        add(f"- σ sweep (E.5): evaluation noise {s.observation_noise} (one N(0, σ²) draw per point, shared by the users), "
            f"{batch_txt}, {clip_txt}, μ = {s.sigma_mu:g} (= ({gdp_epsilon(s.sigma_mu, s.target_delta):.3f}, "
            f"{s.target_delta:g})-DP), T = {s.sigma_iterations}, the rest as in E.1: {paper_txt}. Random search gets "
            f"the evaluations of the correct-σ run and selects on the noisy observations.")
    if "normal" in has:
        add(f"- E.3 normal location: d = 5, n = 50, b = {s.nl_batch}, B = {s.nl_clip:g}, T = {s.nl_iterations}, "
            f"η = {s.nl_step_size} (plain steps; η not given in the paper), polynomial kernel of degree 2, θ₀ = 0.")
    if "huber" in has:
        add(f"- E.4 Huber: d = 4, n = 100, b = {s.hub_batch}, B = {s.hub_clip:g}, T = {s.hub_iterations}, "
            f"μ = {s.hub_mu:g}, η = {s.hub_step_size} for both methods (not given in the paper), RBF ℓ = 1, θ₀ = 0. "
            "DP-GIBO and noisy GD use the same seed for their noise generators (common random numbers), so the "
            "difference between them isolates DP-GIBO's gradient-estimation error.")
    if "svm" in has:
        svm_runs = [r for r in runs if r.experiment == "svm"]
        d = svm_runs[0].extra.get("dim", "?")
        add(f"- SVM (E.2 / seed 001 §4.4): `KernelSVMRegression` on `{s.svm_dataset}` (a stand-in for the UCI CT-slice "
            f"data, which is not shipped), d = {d} (log length-scales, ε, C, γ in the paper's box), "
            f"{svm_runs[0].extra.get('num_users', '?')} validation users; DP-GIBO μ = {s.svm_mu:g}, B = {s.svm_clip:g}, "
            f"AdaGrad η = {s.svm_step_size}, fixed batches b = {s.svm_batch_size or f'd + 1 = {d + 1}'}, T = {s.svm_iterations} "
            "(the paper does not give T), surrogate RBF ℓ = 1 on the raw box coordinates (not normalised, as in the "
            "paper), search radius 10% of each box width (package default), θ₀ uniform in the box per seed; "
            "non-private GIBO: same settings, no clipping; random search: DP-GIBO's evaluation count.")
    add(f"- Acquisition: optimize_acqf with {s.raw_samples} raw samples, {s.num_restarts} restart(s). "
        f"UCB-BO: β = {s.ucb_beta}, 2(d+1) Sobol points, hyperparameters refit every {s.ucb_refit_every} iterations. "
        f"Private random search: K ~ truncated negative binomial (η = {s.prs_eta:g}, geometric) with E[K] = budget, "
        f"per-trial μ₀ calibrated so the Papernot–Steinke RDP bound gives the same ({eps_main:.3f}, {s.target_delta:g})-DP "
        f"as DP-GIBO at μ = {s.privacy_mu:g}.\n")

    findings: list[str] = []

    # ---- 1. comparison
    comp = by(runs, "comparison")
    if comp:
        add("## 1. GP length-scale tuning: methods at the same evaluation budget\n")
        add("| method | privacy | evaluations (mean) | final validation loss (mean ± s.e.) | median | "
            "seeds where DP-GIBO (pilot B) is lower | seeds | wall time per run (s) |")
        add("|---|---|---|---|---|---|---|---|")
        prs_full = [r for r in comp.get("private random search", []) if r.setting == max(s.prs_fractions)]
        dp_key = next(k for k in comp if k.startswith("DP-GIBO") and "pilot" in k)
        ref = comp[dp_key]
        ref_by_seed = {r.seed: r.final_loss for r in ref}
        for method, rs in comp.items():
            if method == "private random search":
                rs = prs_full
                privacy = f"({rs[0].epsilon:.3f}, {s.target_delta:g})-DP (P&S RDP)" if rs else ""
            else:
                privacy = f"μ = {s.privacy_mu:g} ({rs[0].epsilon:.3f}, {s.target_delta:g})-DP" if rs[0].epsilon is not None else "none"
            if not rs:
                continue
            wins = "—" if method == dp_key else f"{sum(ref_by_seed[r.seed] < r.final_loss for r in rs)}/{len(rs)}"
            add(f"| {method} | {privacy} | {statistics.fmean(r.num_evaluations for r in rs):.0f} | "
                f"{fmt([r.final_loss for r in rs])} | {statistics.median(r.final_loss for r in rs):.4g} | {wins} | "
                f"{len(rs)} | {statistics.fmean(r.wall_s for r in rs):.1f} |")
        add(f"| (reference) loss at θ₀ | | 0 | {fmt([r.extra['initial_loss'] for r in ref])} | "
            f"{statistics.median(r.extra['initial_loss'] for r in ref):.4g} | | {len(ref)} | |")
        add(f"| (reference) loss at the generating length-scales | | | {fmt([r.extra['truth_loss'] for r in ref])} | "
            f"{statistics.median(r.extra['truth_loss'] for r in ref):.4g} | | {len(ref)} | |")
        add("")
        add("The loss scale differs a lot between seeds (the generating length-scales are drawn uniformly from "
            "the box, and small ones make the function rough), so the mean is dominated by the hardest seeds; "
            "the per-seed win counts and `comparison.png` (right panel: final loss relative to random search "
            "on the same seed) are scale free.")
        if prs_full:
            add("")
            add("Private random search at smaller expected budgets (same (ε, δ)): " + "; ".join(
                f"E[K] = {frac:g}·budget: loss {fmt([r.final_loss for r in comp['private random search'] if r.setting == frac])}, "
                f"per-trial μ₀ ≈ {statistics.fmean(r.extra['per_trial_mu'] for r in comp['private random search'] if r.setting == frac):.3g}"
                for frac in s.prs_fractions))
        add("")
        for other in ("random search (non-private)", "UCB-BO (non-private)"):
            if other in comp:
                findings.append(claim(
                    f"the paper's claim that DP-GIBO (μ = 1) beats {other.split(' (')[0]} at the same budget",
                    "DP-GIBO", ref, other.split(" (")[0], comp[other]))
        if prs_full:
            findings.append(claim(
                "the expectation that DP-GIBO beats private random search at the same (ε, δ) and expected budget "
                "(not a claim of the paper, which has no private baseline here)",
                "DP-GIBO", ref, "private random search", prs_full))
        paper_key = next((k for k in comp if "paper" in k), None)
        if paper_key:
            findings.append(claim("the clip-bound reasoning (pilot B better than the paper's B = 3)",
                                  "pilot B", ref, "B = 3", comp[paper_key]))
        if "GIBO (non-private)" in comp:
            findings.append(claim("the paper's cost of privacy (non-private GIBO better than DP-GIBO at μ = 1)",
                                  "GIBO", comp["GIBO (non-private)"], "DP-GIBO", ref))

    # ---- 2. ε sweep
    eps_runs = by(runs, "eps")
    if eps_runs:
        add("## 2. Bias tolerance ε (adaptive batches)\n")
        add("| ε | evaluations (mean ± s.e.) | final validation loss (mean ± s.e.) | median | seeds |")
        add("|---|---|---|---|---|")
        rows = []
        for method, rs in sorted(eps_runs.items(), key=lambda kv: kv[1][0].setting):
            rows.append((rs[0].setting, [r.num_evaluations for r in rs], [r.final_loss for r in rs]))
            add(f"| {rs[0].setting:g} | {fmt(rows[-1][1], 3)} | {fmt(rows[-1][2])} | "
                f"{statistics.median(rows[-1][2]):.4g} | {len(rs)} |")
        add("")
        ev = [statistics.fmean(r[1]) for r in rows]
        lo = [statistics.fmean(r[2]) for r in rows]
        mono_ev = all(a >= b for a, b in zip(ev, ev[1:]))
        findings.append(("Matches" if mono_ev else "**Does NOT match**") +
                        " the paper: smaller ε needs more evaluations (mean evaluations by increasing ε: " +
                        ", ".join(f"{e:.0f}" for e in ev) + ").")
        mono_lo = lo[0] <= lo[-1]
        findings.append(("Matches" if mono_lo else "**Does NOT match**") +
                        f" the paper: the largest ε ends at a worse loss than the smallest (final losses by increasing ε: "
                        + ", ".join(f"{x:.4g}" for x in lo) + ").")

    # ---- 3. μ sweep
    mu_runs = by(runs, "mu")
    if mu_runs:
        add("## 3. Privacy level μ\n")
        add("| μ | ε at δ = 1e-5 | evaluations (mean) | final validation loss (mean ± s.e.) | median | seeds |")
        add("|---|---|---|---|---|---|")
        rows = []
        for method, rs in sorted(mu_runs.items(), key=lambda kv: kv[1][0].setting):
            mu = rs[0].setting
            eps_txt = "∞ (non-private)" if math.isinf(mu) else f"{gdp_epsilon(mu, s.target_delta):.3f}"
            rows.append((mu, statistics.fmean(r.final_loss for r in rs)))
            add(f"| {method.removeprefix('μ=')} | {eps_txt} | {statistics.fmean(r.num_evaluations for r in rs):.0f} | "
                f"{fmt([r.final_loss for r in rs])} | {statistics.median(r.final_loss for r in rs):.4g} | {len(rs)} |")
        add("")
        mono = all(a[1] >= b[1] for a, b in zip(rows, rows[1:]))
        findings.append(("Matches" if mono else "Only partly matches") +
                        " the paper: the final loss decreases as μ grows (means by increasing μ: " +
                        ", ".join(f"{fmt_mu(m)}: {x:.4g}" for m, x in rows) + ").")

    # ---- 4. σ sweep
    sig = by(runs, "sigma")
    if sig:
        add("## 4. Observation noise (E.5): surrogate σ correct, too high, too low\n")
        add("| method | evaluations | final validation loss (mean ± s.e.) | median | seeds |")
        add("|---|---|---|---|---|")
        for method, rs in sig.items():
            add(f"| {method} | {statistics.fmean(r.num_evaluations for r in rs):.0f} | {fmt([r.final_loss for r in rs])} | "
                f"{statistics.median(r.final_loss for r in rs):.4g} | {len(rs)} |")
        add("")
        means = {rs[0].setting: statistics.fmean(r.final_loss for r in rs) for rs in sig.values()}
        n_evals = {rs[0].setting: statistics.fmean(r.num_evaluations for r in rs) for rs in sig.values()}
        sig_vals = [v for v in s.sigma_values if v in means]
        if len(sig_vals) == 3:
            correct, high, low = s.sigma_values
            worst = max(sig_vals, key=lambda v: means[v])
            best = min(sig_vals, key=lambda v: means[v])
            findings.append(("Matches" if worst == low else "**Does NOT match**") +
                            f" the paper: underestimating σ is worst (worst: σ = {worst:g}; means " +
                            ", ".join(f"σ={v:g}: {means[v]:.4g}" for v in sig_vals) + ").")
            findings.append(("Matches" if best == correct else "**Does NOT match**") +
                            f" the paper: the correct σ is best (best: σ = {best:g}; evaluations used: " +
                            ", ".join(f"σ={v:g}: {n_evals[v]:.0f}" for v in sig_vals) +
                            ("; a larger surrogate σ keeps the posterior trace above ε, so it adds more points"
                             if s.sigma_bias_tolerance is not None else "; fixed batches") + ").")
            if "RS" in means:
                findings.append(("Matches" if means[low] > means["RS"] else "**Does NOT match**") +
                                f" the paper: underestimated σ is worse than random search "
                                f"({means[low]:.4g} vs random search {means['RS']:.4g}).")

    # ---- 5. E.3 / E.4
    nl = by(runs, "normal")
    if nl:
        add("## 5a. Location of the normal model (E.3)\n")
        add("| method | ε at δ = 1e-5 | ‖θ_T − x̄‖ (mean ± s.e.) | f(θ_T) − f(x̄) (mean ± s.e.) | ‖θ_0 − x̄‖ | seeds |")
        add("|---|---|---|---|---|---|")
        for method, rs in nl.items():
            add(f"| {method} | {rs[0].epsilon:.3f} | {fmt([r.extra['final_distance'] for r in rs], 3)} | "
                f"{fmt([r.final_loss for r in rs], 3)} | {fmt([r.extra['distance'][0] for r in rs], 3)} | {len(rs)} |")
        add("")
        keys = list(nl)
        if len(keys) == 2:
            ok, txt = compare_sentence(keys[1], [r.extra["final_distance"] for r in nl[keys[1]]],
                                       keys[0], [r.extra["final_distance"] for r in nl[keys[0]]])
            findings.append(("Matches" if ok else "**Does NOT match**") +
                            f" the paper (E.3): the larger μ ends closer to the MLE x̄ (distance {txt}).")
    hub = by(runs, "huber")
    if hub:
        add("## 5b. Huber regression (E.4): DP-GIBO vs noisy gradient descent\n")
        add("| method | ε at δ = 1e-5 | evaluations | ‖θ_T − θ̂‖ (mean ± s.e.) | f(θ_T) − f(θ̂) (mean ± s.e.) | seeds |")
        add("|---|---|---|---|---|---|")
        for method, rs in hub.items():
            eps_txt = "non-private" if rs[0].epsilon is None else f"{rs[0].epsilon:.3f}"
            add(f"| {method} | {eps_txt} | {rs[0].num_evaluations} | {fmt([r.extra['final_distance'] for r in rs], 3)} | "
                f"{fmt([r.final_loss for r in rs], 3)} | {len(rs)} |")
        add("")
        gibo_k = next((k for k in hub if k.startswith("DP-GIBO")), None)
        gd_k = next((k for k in hub if k.startswith("noisy GD")), None)
        if gibo_k and gd_k:
            a = [r.extra["final_distance"] for r in hub[gibo_k]]
            b = [r.extra["final_distance"] for r in hub[gd_k]]
            ma, mb = statistics.fmean(a), statistics.fmean(b)
            _, txt = compare_sentence("DP-GIBO", a, "noisy GD", b)
            close = ma <= 1.5 * mb
            findings.append(("Matches" if close else "**Does NOT match**") +
                            f" the paper (E.4): DP-GIBO ends about as close to θ̂ as noisy GD (within 1.5×): distance {txt}.")

    svm = by(runs, "svm")
    if svm:
        add("## 6. SVM hyperparameter tuning (E.2)\n")
        add("| method | privacy | evaluations (mean) | final validation loss (mean ± s.e.) | median | "
            "seeds lower than random search | seeds | wall time per run (s) |")
        add("|---|---|---|---|---|---|---|---|")
        rs_key = "random search (non-private)"
        rs_by_seed = {r.seed: r.final_loss for r in svm.get(rs_key, [])}
        for method, rs in svm.items():
            privacy = "none" if rs[0].epsilon is None else f"μ = {s.svm_mu:g} ({rs[0].epsilon:.3f}, {s.target_delta:g})-DP"
            paired = [r for r in rs if r.seed in rs_by_seed]
            wins = "—" if method == rs_key or not paired else \
                f"{sum(r.final_loss < rs_by_seed[r.seed] for r in paired)}/{len(paired)}"
            add(f"| {method} | {privacy} | {statistics.fmean(r.num_evaluations for r in rs):.0f} | "
                f"{fmt([r.final_loss for r in rs])} | {statistics.median(r.final_loss for r in rs):.4g} | {wins} | "
                f"{len(rs)} | {statistics.fmean(r.wall_s for r in rs):.1f} |")
        ref = next((rs for rs in svm.values() if "initial_loss" in rs[0].extra), None)
        if ref:
            add(f"| (reference) loss at θ₀ | | 0 | {fmt([r.extra['initial_loss'] for r in ref])} | "
                f"{statistics.median(r.extra['initial_loss'] for r in ref):.4g} | | {len(ref)} | |")
        add("")
        dp_key = next((k for k in svm if k.startswith("DP-GIBO")), None)
        if dp_key and rs_key in svm:
            findings.append(claim("the paper's claim (E.2) that DP-GIBO beats random search on SVM tuning",
                                  "DP-GIBO", svm[dp_key], "random search", svm[rs_key]))
        if "GIBO (non-private)" in svm and rs_key in svm:
            findings.append(claim("the paper's claim (seed 001 §4.4) that non-private GIBO beats random search on SVM "
                                  "tuning", "GIBO", svm["GIBO (non-private)"], "random search", svm[rs_key]))
        if dp_key and "GIBO (non-private)" in svm:
            findings.append(claim("the paper's cost of privacy on SVM tuning (non-private GIBO better than DP-GIBO)",
                                  "GIBO", svm["GIBO (non-private)"], "DP-GIBO", svm[dp_key]))

    add("## Findings (where the results agree or disagree with the paper)\n")
    for f_ in findings:
        add(f"- {f_}")
    add("")
    add("## Timing\n")
    add(timing_table(runs))
    add("")
    add("Plots: " + ", ".join(f"`{n}`" for n in sorted(x.name for x in out.glob("*.png"))))
    text = "\n".join(lines) + "\n"
    (out / "results.md").write_text(text)
    return text


def timing_table(runs: list[Run]) -> str:
    groups: dict[tuple[str, str], list[float]] = defaultdict(list)
    reused: dict[tuple[str, str], int] = defaultdict(int)
    for r in runs:
        if r.extra.get("reused"):
            reused[(r.experiment, r.method)] += 1
        else:
            groups[(r.experiment, r.method)].append(r.wall_s)
    rows = ["| experiment | method | runs | total (s) | per run (s) |", "|---|---|---|---|---|"]
    for (exp, method), walls in groups.items():
        rows.append(f"| {exp} | {method} | {len(walls)} | {sum(walls):.1f} | {statistics.fmean(walls):.1f} |")
    for (exp, method), k in reused.items():
        if (exp, method) not in groups:
            rows.append(f"| {exp} | {method} | {k} (reused) | 0 | — |")
    return "\n".join(rows)


# ====================================================================== plots
def make_plots(runner: Runner, out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs, s = runner.runs, runner.s
    paths = []

    def band(ax, grid, curves, label, **kw):
        import numpy as np

        arr = np.array(curves, dtype=float)
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")  # grid points before a run's first choice are NaN
            m = np.nanmean(arr, 0)
            se = np.nanstd(arr, 0, ddof=1) / np.sqrt(np.sum(~np.isnan(arr), 0)) if arr.shape[0] > 1 else np.zeros_like(m)
        line, = ax.plot(grid, m, label=label, **kw)
        se = np.nan_to_num(se)
        ax.fill_between(grid, m - se, m + se, alpha=0.2, color=line.get_color())

    def eval_grid(groups):
        r"""About 200 evaluation counts from 0 to the longest run among ``groups`` (lists of runs)."""
        max_e = int(max(max(r.evals) for rs in groups for r in rs))
        return list(range(0, max_e + 1, max(1, max_e // 200)))

    def loss_bands(ax, groups: dict[str, list[Run]]):
        r"""Mean ± s.e. of the loss against evaluations, one band per label."""
        grid = eval_grid(groups.values())
        for label, rs in groups.items():
            band(ax, grid, [step_interp(r.evals, r.losses, grid) for r in rs], label)

    def save(fig, name):
        path = out / name
        fig.tight_layout()
        fig.savefig(path, dpi=110)
        plt.close(fig)
        paths.append(path)

    comp = by(runs, "comparison")
    if comp:
        fig, (ax, ax2) = plt.subplots(1, 2, figsize=(12, 4.5), gridspec_kw={"width_ratios": [3, 2]})
        grid = eval_grid(rs for method, rs in comp.items() if method != "private random search")
        for method, rs in comp.items():
            if method == "private random search":
                xs = sorted({r.setting for r in rs})
                ms = [mean_se([r.final_loss for r in rs if r.setting == x]) for x in xs]
                ev = [statistics.fmean(r.num_evaluations for r in rs if r.setting == x) for x in xs]
                ax.errorbar(ev, [m for m, _ in ms], yerr=[0 if math.isnan(e) else e for _, e in ms], fmt="s",
                            capsize=3, label="private random search (same ε, δ; x = E[K])")
                continue
            band(ax, grid, [step_interp(r.evals, r.losses, grid) for r in rs], method)
        ref = next(rs for k, rs in comp.items() if "pilot" in k)
        ax.axhline(statistics.fmean(r.extra["truth_loss"] for r in ref), color="gray", ls="--", lw=1,
                   label="generating length-scales")
        ax.set(xlabel="number of evaluations", ylabel="validation loss (non-private diagnostic)", yscale="log",
               title=f"GP length-scale tuning, d = {s.gp_dim} (mean ± s.e., {n_seeds(runs, 'comparison')} seeds)")
        ax.legend(fontsize=7)
        rs_final = {r.seed: r.final_loss for r in comp.get("random search (non-private)", [])}
        if rs_final:
            names = [k for k in comp if k != "random search (non-private)"]
            for i, method in enumerate(names):
                rs = comp[method]
                if method == "private random search":
                    rs = [r for r in rs if r.setting == max(s.prs_fractions)]
                ratios = [r.final_loss / rs_final[r.seed] for r in rs if r.seed in rs_final]
                ax2.scatter([i] * len(ratios), ratios, alpha=0.7)
                ax2.plot([i - 0.25, i + 0.25], [statistics.median(ratios)] * 2, color="k")
            ax2.axhline(1.0, color="gray", ls="--", lw=1)
            ax2.set_xticks(range(len(names)), [n.replace(" (", "\n(") for n in names], fontsize=6, rotation=30)
            ax2.set(yscale="log", ylabel="final loss / random search's (same seed)", title="per seed (bar: median)")
        save(fig, "comparison.png")

    eps_runs = by(runs, "eps")
    if eps_runs:
        fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4))
        eps_runs = dict(sorted(eps_runs.items(), key=lambda kv: kv[1][0].setting))
        loss_bands(a1, eps_runs)
        a1.set(xlabel="number of evaluations", ylabel="validation loss", yscale="log", title="loss along the run")
        a1.legend(fontsize=7)
        for rs in eps_runs.values():
            pts_ = a2.scatter([r.num_evaluations for r in rs], [r.final_loss for r in rs], alpha=0.6, s=18)
            e = statistics.median(r.num_evaluations for r in rs)
            l = statistics.median(r.final_loss for r in rs)
            a2.scatter([e], [l], marker="D", s=50, color=pts_.get_facecolor()[0], edgecolor="k")
            a2.annotate(f"ε={rs[0].setting:g}", (e, l), textcoords="offset points", xytext=(4, 4), fontsize=8)
        a2.set(xlabel="evaluations used in T iterations", ylabel="final validation loss", yscale="log",
               title="bias tolerance ε (dots: seeds, diamonds: medians)")
        save(fig, "eps_sweep.png")

    mu_runs = by(runs, "mu")
    if mu_runs:
        fig, ax = plt.subplots(figsize=(6, 4))
        items = sorted(mu_runs.values(), key=lambda rs: rs[0].setting)
        finite = [rs[0].setting for rs in items if not math.isinf(rs[0].setting)]
        inf_x = (max(finite) * 3) if finite else 1.0
        xs = [inf_x if math.isinf(rs[0].setting) else rs[0].setting for rs in items]
        for x, rs in zip(xs, items):
            ax.scatter([x] * len(rs), [r.final_loss for r in rs], alpha=0.5, s=18, color="C0")
        ax.plot(xs, [statistics.median(r.final_loss for r in rs) for rs in items], "D-", color="C1", label="median")
        ax.plot(xs, [statistics.fmean(r.final_loss for r in rs) for rs in items], "o--", color="C2", label="mean")
        ax.legend(fontsize=7)
        ax.set_yscale("log")
        ax.set_xscale("log")
        ax.set_xticks(xs, [fmt_mu(rs[0].setting) for rs in items])
        ax.set(xlabel="μ (GDP); ∞ = non-private GIBO", ylabel="final validation loss", title="privacy level μ")
        save(fig, "mu_sweep.png")

    sig = by(runs, "sigma")
    if sig:
        fig, ax = plt.subplots(figsize=(7, 4.5))
        loss_bands(ax, sig)
        ax.set(xlabel="number of evaluations", ylabel="validation loss (noise-free)", yscale="log",
               title=f"evaluation noise {s.observation_noise}: surrogate σ correct / high / low")
        ax.legend(fontsize=7)
        save(fig, "sigma_sweep.png")

    svm = by(runs, "svm")
    if svm:
        fig, ax = plt.subplots(figsize=(7, 4.5))
        loss_bands(ax, svm)
        ax.set(xlabel="number of evaluations", ylabel="validation MSE (non-private diagnostic)", yscale="log",
               title=f"SVM tuning, d = {next(iter(svm.values()))[0].extra.get('dim', '?')} "
                     f"(mean ± s.e., {n_seeds(runs, 'svm')} seeds)")
        ax.legend(fontsize=7)
        save(fig, "svm.png")

    for exp, name, title, ylabel in (
        ("normal", "normal_location.png", "Location of the normal model (E.3)", "f(θ_t) − f(x̄)"),
        ("huber", "huber.png", "Huber regression (E.4)", "f(θ_t) − f(θ̂)"),
    ):
        groups = by(runs, exp)
        if not groups:
            continue
        fig, (a1, a2) = plt.subplots(2, 1, figsize=(7, 7), sharex=True)
        for method, rs in groups.items():
            line, = a1.plot(rs[0].evals, rs[0].extra["coord0"], label=f"{method} (seed {rs[0].seed})")
            grid = rs[0].evals
            band(a2, grid, [r.losses for r in rs], method, color=line.get_color())
        a1.axhline(next(iter(groups.values()))[0].extra["optimum0"], color="k", ls="--", lw=1, label="optimum")
        a1.set(ylabel="θ_t[0]", title=title)
        a1.legend(fontsize=7)
        a2.set(xlabel="iteration t", ylabel=ylabel + " (mean ± s.e.)", yscale="log")
        a2.legend(fontsize=7)
        save(fig, name)
    return paths


# ====================================================================== main
def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny smoke configuration (~1 minute)")
    parser.add_argument("--out", type=Path, default=Path("reports"), help="output directory (default: reports/)")
    parser.add_argument("--only", nargs="+", choices=EXPERIMENTS, default=list(EXPERIMENTS),
                        help="run only these experiments")
    parser.add_argument("--seeds", type=int, help="number of seeds of the comparison (overrides the mode)")
    parser.add_argument("--sweep-seeds", type=int, help="number of seeds of the sweeps and E.3/E.4")
    parser.add_argument("--svm-seeds", type=int, help="number of seeds of the SVM experiment")
    parser.add_argument("--theta0", choices=("random", "centre"), default="random",
                        help="start of DP-GIBO/GIBO on the GP problem: uniform per seed, or the box centre")
    parser.add_argument("--batch-selection", choices=("joint", "greedy"), default="joint",
                        help="how DP-GIBO/GIBO choose their batches (DPGIBOConfig.batch_selection)")
    parser.add_argument("--workers", type=int, default=1,
                        help="run independent jobs in this many spawned processes with one torch thread each "
                             "(default 1: one after the other in this process)")
    parser.add_argument("--threads", type=int,
                        help="torch threads of this process (default: torch's; 1 with --workers)")
    parser.add_argument("--no-progress", action="store_true")
    parser.add_argument("--render", type=Path, metavar="DIR",
                        help="only rewrite DIR/results.md and plots from DIR/runs.json (no runs)")
    parser.add_argument("--merge", type=Path, nargs="+", metavar="DIR",
                        help="merge the runs.json of several output directories (or runs.json files), e.g. "
                             "from commands with different --only, into one report in --out (no runs)")
    args = parser.parse_args(argv)
    argv = list(sys.argv[1:] if argv is None else argv)
    if args.workers < 1:
        parser.error("--workers must be at least 1")

    settings = Settings.quick() if args.quick else Settings()
    if args.seeds:
        settings = dataclasses.replace(settings, seeds=tuple(range(args.seeds)))
    if args.sweep_seeds:
        k = tuple(range(args.sweep_seeds))
        settings = dataclasses.replace(settings, sweep_seeds=k, nl_seeds=k, hub_seeds=k)
    if args.svm_seeds:
        settings = dataclasses.replace(settings, svm_seeds=tuple(range(args.svm_seeds)))
    settings = dataclasses.replace(settings, gp_theta0=args.theta0, batch_selection=args.batch_selection)
    only = tuple(e for e in EXPERIMENTS if e in args.only)
    out: Path = args.out
    warnings.filterwarnings("ignore", message=".*(optimization|Optimization).*")
    if args.render is not None:
        return render(args.render, argv)
    out.mkdir(parents=True, exist_ok=True)
    if args.merge is not None:
        return merge(args.merge, out, argv)
    threads = torch.get_num_threads()
    if args.threads or args.workers > 1:  # with workers, the pilot here also runs on one thread
        torch.set_num_threads(args.threads or 1)
    try:
        return run_all(settings, only, out, argv, args.workers, progress=not args.no_progress)
    finally:
        torch.set_num_threads(threads)  # main() may be called in-process (tests)


def run_all(settings: Settings, only: tuple[str, ...], out: Path, argv: list[str], workers: int,
            progress: bool) -> dict:
    r"""Pilot, jobs, plots, ``results.md`` and ``runs.json`` of one reproduction command."""
    start = time.perf_counter()
    runner = Runner(settings, progress=progress)
    if {"comparison", "eps", "mu", "sigma"} & set(only):
        t0 = time.perf_counter()
        runner.pilot = pilot(settings)
        print(f"pilot: B = {runner.pilot['clip_bound']:g}, C = {runner.pilot['loss_clip']:g} "
              f"({time.perf_counter() - t0:.1f} s)", flush=True)
    jobs = experiment_jobs(settings, runner.pilot, only)
    runner.runs = run_jobs(runner, jobs, workers=workers, progress=progress)
    total = time.perf_counter() - start
    execution = (f"{workers} worker processes with 1 torch thread each" if workers > 1
                 else threads_text())
    make_plots(runner, out)
    text = write_report(runner, out, time.perf_counter() - start, argv, only, execution=execution)
    (out / "runs.json").write_text(json.dumps(
        {"settings": settings_to_dict(settings), "pilot": runner.pilot, "argv": argv,
         "wall_s": time.perf_counter() - start, "only": list(only), "workers": workers,
         "execution": execution, "runs": [dataclasses.asdict(r) for r in runner.runs]},
        indent=1, default=str))
    print(text)
    print("Timing summary")
    print(timing_table(runner.runs))
    print(f"total wall time {total:.1f} s; wrote {out / 'results.md'}")
    return {"results_md": out / "results.md", "runs": runner.runs, "pilot": runner.pilot, "wall_s": total}


def _runs_json_path(path: Path) -> Path:
    return path if path.is_file() else path / "runs.json"


def render(out: Path, argv: list[str]) -> dict:
    r"""Rewrite ``results.md`` and the plots of ``out`` from its ``runs.json`` (no new runs).

    The original command and wall time come from ``runs.json`` or, for files written
    before they were stored there, from the previous ``results.md``.
    """
    import re

    data = json.loads((out / "runs.json").read_text())
    runner = Runner(settings_from_dict(data["settings"]), progress=False)
    runner.pilot = data["pilot"]
    runner.runs = [Run(**r) for r in data["runs"]]
    old = (out / "results.md").read_text() if (out / "results.md").exists() else ""
    wall = data.get("wall_s")
    if wall is None:
        m = re.search(r"Total wall time: (\d+) s", old)
        wall = float(m.group(1)) if m else math.nan
    orig_argv = data.get("argv")
    if orig_argv is None:
        m = re.search(r"Command: `python scripts/reproduce_paper.py ?(.*?)`", old)
        orig_argv = m.group(1).split() if m else []
    execution = data.get("execution")
    if execution is None:
        m = re.search(r"Total wall time: \d+ s on (.*?) \(", old)
        execution = m.group(1) if m else None
    only = tuple(data.get("only", EXPERIMENTS))
    note = data.get("note", "")
    note = (note + "  \n" if note else "") + (
        f"Report re-rendered from `runs.json` with `python scripts/reproduce_paper.py {' '.join(argv)}` "
        "(tables, findings and plots recomputed from the stored runs; nothing was re-run).")
    make_plots(runner, out)
    text = write_report(runner, out, wall, orig_argv, only, note=note, execution=execution)
    print(text)
    return {"results_md": out / "results.md", "runs": runner.runs, "pilot": runner.pilot, "wall_s": wall}


def merge(sources: list[Path], out: Path, argv: list[str]) -> dict:
    r"""Merge the ``runs.json`` of several output directories into one report in ``out`` (no new runs).

    Meant for one full-mode reproduction split into commands with different ``--only``
    (each within a time limit). The settings must agree apart from the seed lists (merged
    as unions); the pilots must agree where present; a run (experiment, method, seed,
    setting) may come from one source only. Runs are ordered by experiment, then as
    in their source, so the tables equal those of one command running everything (except
    that a sweep run in another command than the comparison re-runs, instead of reusing,
    the DP-GIBO run they share).
    """
    datas = [json.loads(_runs_json_path(src).read_text()) for src in sources]
    base = dict(datas[0]["settings"])
    for src, data in zip(sources[1:], datas[1:]):
        diff = sorted(k for k in set(base) | set(data["settings"])
                      if k not in SEED_FIELDS and base.get(k) != data["settings"].get(k))
        if diff:
            raise SystemExit(f"--merge: settings of {src} differ from {sources[0]} in {', '.join(diff)}")
    for k in SEED_FIELDS:
        base[k] = sorted({x for data in datas for x in data["settings"].get(k, [])})
    pilots = [data["pilot"] for data in datas if data.get("pilot")]
    if any(p != pilots[0] for p in pilots[1:]):
        raise SystemExit("--merge: the sources have different pilots (clip bounds)")
    runs, seen = [], {}
    for src, data in zip(sources, datas):
        for r in data["runs"]:
            key = (r["experiment"], r["method"], r["seed"], str(r["setting"]))
            if key in seen:
                raise SystemExit(f"--merge: run {key} is in both {seen[key]} and {src}")
            seen[key] = src
            runs.append(r)
    order = {e: i for i, e in enumerate(EXPERIMENTS)}
    runs.sort(key=lambda r: order.get(r["experiment"], len(order)))  # stable: source order within an experiment
    only = [e for e in EXPERIMENTS if any(e in data.get("only", EXPERIMENTS) for data in datas)]
    parts = [f"`{src}` (`{' '.join(data.get('argv', []))}`, {data.get('wall_s', math.nan):.0f} s, "
             f"{data.get('execution', 'threads not recorded')})" for src, data in zip(sources, datas)]
    note = "Merged from the `runs.json` of " + "; ".join(parts) + ". Total wall time: sum over these commands."
    wall = sum(data.get("wall_s", math.nan) for data in datas)
    merged = {"settings": base, "pilot": pilots[0] if pilots else {}, "argv": argv, "wall_s": wall, "only": only,
              "execution": "the processes listed below", "note": note,
              "merged_from": [{"path": str(src), "argv": data.get("argv"), "wall_s": data.get("wall_s"),
                               "only": data.get("only"), "execution": data.get("execution")}
                              for src, data in zip(sources, datas)],
              "runs": runs}
    (out / "runs.json").write_text(json.dumps(merged, indent=1, default=str))
    runner = Runner(settings_from_dict(base), progress=False)
    runner.pilot = merged["pilot"]
    runner.runs = [Run(**r) for r in runs]
    make_plots(runner, out)
    text = write_report(runner, out, wall, argv, tuple(only), note=note, execution=merged["execution"])
    print(text)
    return {"results_md": out / "results.md", "runs": runner.runs, "pilot": runner.pilot, "wall_s": wall}


if __name__ == "__main__":
    main()
