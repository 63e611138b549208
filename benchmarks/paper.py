r"""The DP-GIBO paper's experiments (Sopa et al. §4 and Appendix E.1–E.5; short version §4.4).

``Settings`` holds every knob (paper values unless noted); ``pilot`` sets the clip bounds
from an independent synthetic draw; ``paper_runner.Runner`` runs one job of one method and
returns a ``Run``; ``paper_jobs.experiment_jobs`` lists the jobs of the chosen experiments as
a DAG for ``jobs.run_jobs`` (``outputs.run_experiments`` does all three). The choices the paper does not fix
are listed in ``scripts/reproduce_paper.py`` and in every ``results.md``.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Protocol, cast

import torch

from benchmarks.runs import round_sig
from botorch_dp.gradient_gp import GradientGP
from botorch_dp.objectives.per_user_problem import PerUserProblem
from botorch_dp.optim.options.batches import BatchSearch
from botorch_dp.problems import GPRegressionLengthscales, KernelSVMRegression

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
            mode="quick",
            gp_dim=4,
            gp_n_total=400,
            seeds=(0, 1),
            sweep_seeds=(0,),
            iterations=8,
            eps_values=(0.5, 2.0),
            mu_values=(0.3, 1.0, INF),
            sigma_iterations=5,
            ucb_refit_every=5,
            ucb_raw_samples=32,
            private_rs_fractions=(0.5, 1.0),
            pilot_points=2,
            normal_location_iterations=20,
            normal_location_seeds=(0,),
            huber_iterations=20,
            huber_seeds=(0,),
            svm_num_features=5,
            svm_n_train=200,
            svm_n_val=200,
            svm_iterations=3,
            svm_seeds=(0,),
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
        dataset=settings.svm_dataset,
        n_train=settings.svm_n_train,
        n_val=settings.svm_n_val,
        num_features=settings.svm_num_features,
        seed=seed,
    )


class PilotSettings(Protocol):
    r"""What ``pilot`` reads of an experiment's settings (``paper.Settings`` and others)."""

    @property
    def pilot_seed(self) -> int: ...

    @property
    def pilot_points(self) -> int: ...

    @property
    def search_radius(self) -> float: ...


def fit_noise_variance(problem: PerUserProblem) -> float:
    r"""The GP noise variance that ``problem`` (a GP-regression problem or a variant) gives for fitting."""
    value = getattr(problem, "fit_noise_variance", None)
    if value is None:
        raise TypeError(f"problem: {type(problem).__name__} gives no fit_noise_variance")
    return float(value)


def batch_search(settings: Settings) -> BatchSearch:
    r"""``settings.batch_selection`` as DP-GIBO's ``batch_search`` (``DPGIBOConfig`` checks the value)."""
    return cast(BatchSearch, settings.batch_selection)


def pilot(settings: PilotSettings, problem: PerUserProblem | None = None, theta: torch.Tensor | None = None) -> dict:
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
    if problem is None:
        if not isinstance(settings, Settings):
            raise TypeError(f"problem: pilot needs a problem with settings of type {type(settings).__name__}")
        problem = gp_problem(settings, settings.pilot_seed)
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
            A = GradientGP(X, kernel, fit_noise_variance(problem)).gradient_weights(centre)
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
