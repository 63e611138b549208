r"""The AMP tuning comparison's public task: its settings, method labels and constants.

Everything here is fixed before any run: which methods run (``METHODS``, ``LABELS``), the
report's file names, AMP's clip and smoothness constants, the λ grid of the non-private
reference and the knobs of the experiment (``Settings``). The experiment itself (planning,
runner, jobs) is ``benchmarks.amp``, its methods ``benchmarks.amp_methods``; its report is
``benchmarks.amp_report``, which imports only this module.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from botorch_dp.privacy.analysis.private_selection import poisson_mean_for_tail
from botorch_dp.problems.logistic_data import load_logistic_data

__all__ = [
    "BETA",
    "CLIP",
    "LABELS",
    "METHODS",
    "NON_PRIVATE_LAMBDAS",
    "REPORT_MD",
    "REPORT_PNG",
    "RUNS_JSON",
    "Settings",
]

METHODS = ("amp_calibrated", "dp_gibo", "ps_amp", "ps_dpsgd")
LABELS = {
    "amp_calibrated": "AMP, calibrated λ (no tuning)",
    "dp_gibo": "DP-GIBO over log λ (AMP)",
    "ps_amp": "P&S over log λ (AMP)",
    "ps_dpsgd": "honest DP-SGD (P&S over lr)",
}
REPORT_MD, REPORT_PNG, RUNS_JSON = "amp_tuning.md", "amp_tuning.png", "amp_tuning_runs.json"
CLIP, BETA = math.sqrt(2.0), 0.5  # unit rows plus a bias feature: ‖x̃‖ ≤ √2, β = 0.25·2


@dataclass
class Settings:
    r"""Public settings of a comparison (the ``--quick`` ones are ``Settings.quick()``)."""

    epsilons: tuple[float, ...] = (0.1, 1.0, 8.0)
    delta: float = 1e-5
    seeds: tuple[int, ...] = (0, 1, 2, 3, 4)
    datasets: tuple[str, ...] = ("breast_cancer", "synthetic")
    synthetic_examples: int = 20_000
    synthetic_features: int = 100
    synthetic_signal: float = 5.0
    tau: float = 5e-4
    sigma_out: float = 0.15
    loss_cap: float = 3.0
    # λ box, relative to the per-run budget's reference λ: [max(lo·λ_ref, 1.25·λ_min), hi·λ_ref]
    lam_lower: float = 0.5
    lam_upper: float = 64.0
    # DP-GIBO (public: set a priori, T and w after a 3-seed pilot on synthetic data with seeds
    # 1000-1002 and logit sd 3, never on the data reported)
    gibo_iterations: int = 3
    gibo_batch: int = 2
    gibo_final_weight: float = 6.0  # w = T·b: the final model gets as much RDP as all evaluations
    gibo_clip: float = 1.0
    gibo_step: float = 0.1
    gibo_radius: float = 0.1
    gibo_lengthscale: float = 0.3
    gibo_outputscale: float = 0.25
    gibo_noise_variance: float = 0.01
    gibo_raw_samples: int = 64
    gibo_restarts: int = 2
    # Papernot–Steinke: Poisson number of trials with P[K > 10] = 0.9
    ps_tail_threshold: int = 10
    ps_tail_probability: float = 0.9
    # honest DP-SGD (scaled down)
    dpsgd_lr_lower: float = 1e-4  # the authors' [1e-5, 1e-1] a decade up (see the docstring)
    dpsgd_lr_upper: float = 1.0
    dpsgd_batches: tuple[tuple[str, int], ...] = (("breast_cancer", 64), ("synthetic", 256))
    dpsgd_epochs: tuple[tuple[str, int], ...] = (("breast_cancer", 30), ("synthetic", 5))
    methods: tuple[str, ...] = METHODS + ("non_private",)

    def __post_init__(self) -> None:
        bad = [m for m in self.methods if m not in METHODS + ("non_private",)]
        if bad or not self.methods:
            raise ValueError(f"methods must name methods of {METHODS + ('non_private',)}, got {self.methods!r}")

    @classmethod
    def quick(cls) -> Settings:
        r"""Tiny settings for CI (one ε, one seed, small synthetic data, 2 DP-GIBO iterations)."""
        return cls(
            epsilons=(1.0,),
            seeds=(0,),
            synthetic_examples=1000,
            synthetic_features=20,
            gibo_iterations=2,
            gibo_final_weight=4.0,
            gibo_raw_samples=16,
            gibo_restarts=1,
            ps_tail_threshold=2,
            ps_tail_probability=0.5,
            dpsgd_epochs=(("breast_cancer", 2), ("synthetic", 2)),
            dpsgd_batches=(("breast_cancer", 64), ("synthetic", 64)),
        )

    @property
    def mean_trials(self) -> float:
        r"""``m`` with ``P[K > threshold] = probability`` for ``K ~ Poisson(m)``."""
        return poisson_mean_for_tail(threshold=self.ps_tail_threshold, probability=self.ps_tail_probability)

    @property
    def gibo_runs(self) -> int:
        r"""Training runs of DP-GIBO: ``T·b`` evaluations plus the final model."""
        return self.gibo_iterations * self.gibo_batch + 1

    @property
    def gibo_units(self) -> float:
        r"""DP-GIBO's training budget in reference runs: ``T·b`` evaluations of weight 1 and
        the final model of weight ``w``."""
        return self.gibo_iterations * self.gibo_batch + self.gibo_final_weight

    def epochs(self, dataset: str) -> int:
        return dict(self.dpsgd_epochs)[dataset]

    def batch(self, dataset: str) -> int:
        return dict(self.dpsgd_batches)[dataset]

    def data(self, dataset: str, seed: int):
        return load_logistic_data(
            dataset,
            seed=seed,
            num_examples=self.synthetic_examples,
            num_features=self.synthetic_features,
            signal=self.synthetic_signal,
        )


#: The λ grid of the tuned non-private reference (1e-3 … 1e3, 13 values).
NON_PRIVATE_LAMBDAS = tuple(float(10.0 ** (k / 2)) for k in range(-6, 7))
