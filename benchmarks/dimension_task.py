r"""The loss-against-dimension task: its settings, method labels and GP length-scale family.

Everything here is public and fixed before any job runs: the knobs of the experiment
(``Settings``, with the fields that only select jobs), the labels of its methods, the
generating length-scales ℓ* and the ``GPRegressionLengthscales`` problem of each cell
(d, seed), and which pilot's clip bound DP-GIBO uses. The experiment itself (pilots,
runner, jobs) is ``benchmarks.dimension``; its report is ``benchmarks.dimension_report``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from botorch_dp.problems import GPRegressionLengthscales

__all__ = [
    "METHODS",
    "PRIVATE",
    "SELECTION_FIELDS",
    "Settings",
    "clip_bound",
    "dimension_problem",
    "generating_lengthscales",
    "quick_settings",
]

#: method key -> label in tables and plots.
METHODS: dict[str, str] = {
    "dp_gibo": "DP-GIBO (μ=1, E.1 settings: AdaGrad η=0.3)",
    "dp_gibo_eta1": "DP-GIBO (μ=1, preset e1_reach: η=1)",
    "gibo": "GIBO (non-private, η=0.3)",
    "private_rs": "private random search (μ=1 budget)",
    "dp_hypo": "DP-HyPO (μ=1 budget)",
    "random_search": "random search (non-private)",
    "ucb_bo": "UCB-BO (non-private, batches of d+1)",
}
PRIVATE = ("dp_gibo", "dp_gibo_eta1", "private_rs", "dp_hypo")


#: Fields that only choose which jobs run (left out of the CLI run store's header): a job's key names
#: its kind, d, seed and method, and a baseline's budget is its cell's DP-GIBO run.
SELECTION_FIELDS = (
    "seeds",
    "high_dim_seeds",
    "extra_seeds",
    "methods",
    "high_dim_from",
    "high_dim_methods",
    "extra_seeds_max_dim",
    "ucb_bo_max_dim",
    "dp_hypo_max_dim",
    "gibo_max_dim",
    "dp_hypo_batched_from",
    "dp_hypo_batched_max_points",
)


@dataclass
class Settings:
    r"""Every knob of the loss-against-dimension experiment (public values only)."""

    mode: str = "full"
    dims: tuple[int, ...] = (5, 15, 30, 60, 100)
    seeds: tuple[int, ...] = tuple(range(5))
    #: methods run at every d in ``dims`` (keys of ``METHODS``; ``dp_gibo`` is always run: it sets the budget)
    methods: tuple[str, ...] = ("dp_gibo", "dp_gibo_eta1", "gibo", "private_rs", "dp_hypo", "random_search", "ucb_bo")
    #: d at or above which only ``high_dim_methods`` run, on ``high_dim_seeds`` (cost); 0: none
    high_dim_from: int = 0
    high_dim_methods: tuple[str, ...] = ("dp_gibo", "gibo", "private_rs", "random_search")
    high_dim_seeds: tuple[int, ...] = tuple(range(5))
    #: seeds added at d <= ``extra_seeds_max_dim`` (cheap cells get 10 seeds); 0: none
    extra_seeds: tuple[int, ...] = tuple(range(5, 10))
    extra_seeds_max_dim: int = 0
    #: the costly baselines run only at d <= these (0: no limit)
    ucb_bo_max_dim: int = 0
    dp_hypo_max_dim: int = 0
    gibo_max_dim: int = 0
    # task family
    relevant: int = 3
    relevant_low: float = 0.2
    relevant_high: float = 0.6
    irrelevant_lengthscale: float = 50.0  # above the box: those inputs barely matter; best reachable is ℓ* projected
    n_train: int = 400
    n_val: int = 1000
    lengthscale_low: float = 0.05
    lengthscale_high: float = 5.0
    # DP-GIBO (E.1 settings unless noted)
    iterations: int = 25
    privacy_mu: float = 1.0
    target_delta: float = 1e-5
    step_size: float = 0.3
    preset_step_size: float = 1.0
    bias_tolerance: float | None = None  # None: fixed batches of d + 1 (every method's budget T(d + 1))
    search_radius: float = 0.5
    raw_samples: int = 32
    num_restarts: int = 1
    acqf_maxiter: int | None = 100
    # baselines
    private_rs_fraction: float = 1.0
    tnb_eta: float = 1.0
    dp_hypo_ratio: float = 2.0
    dp_hypo_candidates: int = 1024
    dp_hypo_refit_every: int = 100
    dp_hypo_fraction: float = 1.0  # E[K] = fraction · budget; < 1 is a reduced budget, labelled in the report
    #: at d >= this (0: never) DP-HyPO recomputes its sampling density once per d + 1 trials (a batch,
    #: like DP-GIBO's) instead of every trial: K/(d + 1) GP updates, the same guarantee; the job's
    #: arguments carry it, so per-trial runs stay valid in the store
    dp_hypo_batched_from: int = 0
    #: batched DP-HyPO's GP sees the last this many trials (0: all): K has a long tail, and a GP on
    #: K = 9007 trials (d = 100) used 19 GB and minutes per update
    dp_hypo_batched_max_points: int = 1024
    ucb_beta: float = 2.0
    ucb_batch: int = 0  # 0: batches of d + 1 (T acquisition rounds, like DP-GIBO); 1: sequential UCB
    ucb_refit_every: int = 5  # in BO iterations (batches)
    ucb_raw_samples: int = 64
    ucb_num_restarts: int = 1
    # pilot (clip bounds)
    pilot_seed: int = 10_000
    pilot_points: int = 6
    #: where DP-GIBO's clip-bound pilot draws its designs: "theta0" (around the run's public start,
    #: where DP-GIBO's 25 steps stay; smaller B, better DP-GIBO at d = 5 to 60:
    #: reports/dimension_pilot_check.md) or "uniform" θ in the box (the first store's choice). The
    #: private selections' loss clip C always comes from the uniform pilot: they sample the whole box.
    pilot_at: str = "theta0"

    def __post_init__(self) -> None:
        if self.pilot_at not in ("uniform", "theta0"):
            raise ValueError(f"pilot_at must be 'uniform' or 'theta0', got {self.pilot_at!r}")


def quick_settings() -> Settings:
    r"""A smoke configuration that keeps every code path (seconds on one core)."""
    return Settings(
        mode="quick",
        dims=(2, 3),
        seeds=(0,),
        extra_seeds=(1,),
        extra_seeds_max_dim=2,
        high_dim_from=3,
        high_dim_methods=("dp_gibo", "random_search", "ucb_bo"),
        high_dim_seeds=(0,),
        ucb_bo_max_dim=2,
        dp_hypo_max_dim=2,
        relevant=1,
        n_train=40,
        n_val=60,
        iterations=2,
        raw_samples=8,
        acqf_maxiter=5,
        dp_hypo_candidates=16,
        dp_hypo_refit_every=2,
        dp_hypo_batched_from=2,
        dp_hypo_batched_max_points=4,
        ucb_refit_every=2,
        ucb_raw_samples=8,
        pilot_points=2,
    )


def generating_lengthscales(settings: Settings, dim: int, seed: int) -> torch.Tensor:
    r"""ℓ* of replication ``seed`` at ``dim``: ``relevant`` short ones at random positions, the rest long.

    Args:
        settings: The experiment's settings (``relevant``, its range, ``irrelevant_lengthscale``).
        dim: d.
        seed: The replication seed.

    Returns:
        A ``d``-dim float64 tensor (NON-PRIVATE reference of the generated data).
    """
    k = min(settings.relevant, dim)
    gen = torch.Generator().manual_seed(7919 * seed + dim)
    ell = torch.full((dim,), float(settings.irrelevant_lengthscale), dtype=torch.float64)
    where = torch.randperm(dim, generator=gen)[:k]
    u = torch.rand(k, generator=gen, dtype=torch.float64)
    ell[where] = settings.relevant_low + (settings.relevant_high - settings.relevant_low) * u
    return ell


def dimension_problem(settings: Settings, dim: int, seed: int) -> GPRegressionLengthscales:
    r"""The GP length-scale problem of cell (``dim``, ``seed``): ``n_val`` users, ``n_train`` training points."""
    n_total = settings.n_train + settings.n_val
    return GPRegressionLengthscales(
        dim=dim,
        n_total=n_total,
        train_fraction=settings.n_train / n_total,
        lengthscale_bounds=(settings.lengthscale_low, settings.lengthscale_high),
        true_lengthscales=generating_lengthscales(settings, dim, seed),
        seed=seed,
    )


def clip_bound(context: dict, dim: int) -> float:
    r"""DP-GIBO's clip bound B at ``dim``: the θ₀ pilot's when ``context`` has one, else the uniform one's."""
    return float(context.get("pilot_theta0", context["pilot"])[str(dim)]["clip_bound"])
