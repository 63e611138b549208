r"""The MLP tuning task: its settings, method labels, search space, data and objective.

Everything here is public and fixed before any run: the knobs of the experiment
(``Settings``), the labels its runs and report use, the search space over the MLP's
training hyperparameters, the per-seed split of the scikit-learn data set and the
objective that trains the MLP at θ and returns per-user validation losses. The experiment
itself (pilot, runner, jobs) is ``benchmarks.mlp``; its report is ``benchmarks.mlp_report``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from benchmarks.classification_task import ClassificationSettings, load_data
from botorch_dp.training import TrainingConfig
from botorch_dp.tuning import ClassificationData, Hyperparameter, SearchSpace, TorchModelTuningObjective

__all__ = [
    "DP_GIBO",
    "DP_HYPO",
    "GIBO",
    "INF",
    "METHODS",
    "PRIVATE_METHODS",
    "PRIVATE_RS",
    "RANDOM",
    "REFERENCE_METHODS",
    "Settings",
    "UCB",
    "load_data",
    "make_objective",
    "quick_settings",
    "search_space",
]

INF = math.inf
#: Method labels: private (one per μ) and the non-private references (μ = ∞, once per seed).
DP_GIBO, PRIVATE_RS, DP_HYPO = "DP-GIBO", "private random search", "DP-HyPO"
GIBO, RANDOM, UCB = "GIBO (non-private)", "random search (non-private)", "UCB-BO (non-private)"
PRIVATE_METHODS = (DP_GIBO, PRIVATE_RS, DP_HYPO)
REFERENCE_METHODS = (GIBO, RANDOM, UCB)
METHODS = PRIVATE_METHODS + REFERENCE_METHODS


@dataclass
class Settings(ClassificationSettings):
    r"""Every knob of the MLP tuning experiment (public values only).

    The first fields, the data set, its split and the seeds, are ``ClassificationSettings``'.
    """

    hidden: tuple[int, ...] = (32,)
    epochs: int = 8
    train_batch_size: int = 64
    loss_cap: float = 5.0
    tune_momentum: bool = True
    # privacy
    mus: tuple[float, ...] = (0.5, 1.0, 2.0)
    target_delta: float = 1e-5
    seeded_noise: bool = True
    # DP-GIBO (θ₀ = box centre, AdaGrad, fixed batches of d + 1)
    iterations: int = 10
    batch_size: int | None = None  # None: d + 1
    step_size: float = 0.2
    search_radius: float = 0.1
    lengthscale: float = 0.2
    outputscale: float = 1.0
    raw_samples: int = 32
    num_restarts: int = 1
    # private selections: E[K] = fraction · budget
    selection_fraction: float = 1.0
    tnb_eta: float = 1.0
    dp_hypo_ratio: float = 1.2  # the largest of (1.05, 1.1, 1.2, 1.5, 2) feasible at μ = 0.5 with E[K] = 50
    dp_hypo_candidates: int = 512
    dp_hypo_refit_every: int = 5
    # UCB-BO
    ucb_beta: float = 2.0
    ucb_num_initial: int | None = None  # None: 2(d + 1)
    ucb_refit_every: int = 5
    ucb_raw_samples: int = 32
    ucb_num_restarts: int = 1
    # pilot on public synthetic data
    pilot_seed: int = 10_000
    pilot_points: int = 4
    pilot_training_seeds: int = 3
    min_noise_variance: float = 1e-4


def quick_settings() -> Settings:
    r"""A smoke configuration that keeps every code path (iris, a tiny MLP; seconds on one core)."""
    return Settings(
        mode="quick",
        dataset="iris",
        seeds=(0, 1),
        hidden=(8,),
        epochs=2,
        train_batch_size=32,
        mus=(0.5, 2.0),
        iterations=2,
        raw_samples=16,
        num_restarts=1,
        dp_hypo_candidates=64,
        dp_hypo_refit_every=4,
        ucb_num_initial=8,
        ucb_refit_every=2,
        ucb_raw_samples=16,
        ucb_num_restarts=1,
        pilot_points=2,
        pilot_training_seeds=2,
    )


def search_space(settings: Settings) -> SearchSpace:
    r"""θ on the unit cube: learning rate and weight decay (log10), dropout and (optionally) momentum.

    Ranges are public and chosen without data: lr ∈ [1e-4, 0.3], weight decay ∈ [1e-6, 0.1]
    (as ``default_mlp_space``), dropout ∈ [0, 0.5], SGD momentum ∈ [0, 0.95].
    """
    hps = [
        Hyperparameter("lr", 1e-4, 0.3, log_scale=True),
        Hyperparameter("weight_decay", 1e-6, 1e-1, log_scale=True),
        Hyperparameter("dropout", 0.0, 0.5),
    ]
    if settings.tune_momentum:
        hps.append(Hyperparameter("momentum", 0.0, 0.95, target="optimizer"))
    return SearchSpace(hps)


def make_objective(settings: Settings, data: ClassificationData, training_seed: int) -> TorchModelTuningObjective:
    r"""θ ↦ per-user capped cross-entropies of an SGD-trained MLP (training from ``training_seed``)."""
    training = TrainingConfig(
        epochs=settings.epochs,
        batch_size=settings.train_batch_size,
        hidden_sizes=tuple(settings.hidden),
        seed=training_seed,
        num_threads=1,
    )
    return TorchModelTuningObjective(
        data, search_space(settings), optimizer=torch.optim.SGD, training=training, loss_cap=settings.loss_cap
    )
