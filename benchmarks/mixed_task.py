r"""The mixed tuning task: settings, labels, the mixed search space, its public encoding, the objective.

The digits MLP of ``benchmarks.mlp_task`` with a MIXED search space: the optimizer
(``"sgd"`` with momentum 0.9, or ``"adam"``) and the activation (``"relu"`` or ``"tanh"``)
are ``Categorical``, the hidden width an ``Integer`` in ``[16, 128]``, the learning rate and
the weight decay continuous on a log scale and the dropout continuous. Each validation
example is a user (its capped cross-entropy); the split is the seed's, as in ``mlp_task``.

``MixedEncoding`` is the PUBLIC encoding of the mixed space on a unit cube for the methods
that only sample a cube (private random search, DP-HyPO, non-private random search), the
package's ``botorch_dp.tuning.encoding`` (the ``d`` relaxed coordinates of the space, integers
rounded by the space, then one extra coordinate per categorical hyperparameter, split into
equal shares), with the benchmark's training count and NON-PRIVATE diagnostics added.
Everything here is public and fixed before any run.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from benchmarks.classification_task import ClassificationSettings, load_data
from botorch_dp.training import TrainingConfig
from botorch_dp.tuning import (
    Categorical,
    ClassificationData,
    Hyperparameter,
    Integer,
    SearchSpace,
    TorchModelTuningObjective,
)
from botorch_dp.tuning.encoding import EncodedObjective as PackageEncodedObjective
from botorch_dp.tuning.encoding import MixedEncoding as PackageEncoding

__all__ = [
    "DP_HYPO",
    "INF",
    "METHODS",
    "MIXED_BO",
    "PRIVATE_METHODS",
    "PRIVATE_RS",
    "RANDOM",
    "REFERENCE_METHODS",
    "TUNE",
    "TUNE_AUTO",
    "MixedEncoding",
    "Settings",
    "load_data",
    "make_model",
    "make_objective",
    "make_optimizer",
    "methods",
    "proxy_data",
    "quick_settings",
    "search_space",
]

INF = math.inf
#: Method labels: private (one per ε) and the non-private references (once per seed).
TUNE, PRIVATE_RS, DP_HYPO = "tune (enumerate)", "private random search", "DP-HyPO"
RANDOM, MIXED_BO = "random search (non-private)", "BoTorch mixed BO (non-private)"
PRIVATE_METHODS = (TUNE, PRIVATE_RS, DP_HYPO)
REFERENCE_METHODS = (RANDOM, MIXED_BO)
METHODS = PRIVATE_METHODS + REFERENCE_METHODS
#: The optional arm (``Settings.tune_auto_proxy``, off by default): ``tune`` with a proxy and ``method="auto"``.
TUNE_AUTO = "tune (auto, proxy)"


@dataclass
class Settings(ClassificationSettings):
    r"""Every knob of the mixed tuning experiment (public values only).

    The first fields, the data set, its split and the seeds, are ``ClassificationSettings``'.
    """

    width_low: int = 16
    width_high: int = 128
    epochs: int = 4
    train_batch_size: int = 64
    loss_cap: float = 5.0
    # privacy: ε of each private run, at δ
    epsilons: tuple[float, ...] = (1.0, 3.0)
    target_delta: float = 1e-5
    seeded_noise: bool = True
    # tune (strategy "enumerate"; TUNE_DEFAULTS otherwise, except the number of iterations)
    iterations: int = 5
    loss_clip: float = 3.0  # tune's default C; also C of the private selections
    selection_share: float = 0.1
    # private selections: E[K] = fraction · budget
    selection_fraction: float = 1.0
    tnb_eta: float = 1.0
    dp_hypo_ratio: float = 1.05  # feasible at ε = 1 with E[K] up to 104
    dp_hypo_candidates: int = 512
    dp_hypo_refit_every: int = 5
    # BoTorch mixed BO (non-private): initial uniform points, then batches of q
    bo_num_initial: int = 20
    bo_batch: int = 10
    bo_raw_samples: int = 32
    bo_num_restarts: int = 1
    bo_maxiter: int = 30
    # the optional arm "tune (auto, proxy)" (off by default): tune(..., proxy=, method="auto") with the proxy a
    # PUBLIC slice of the training split (its users) whose models train on the rest of the training split
    tune_auto_proxy: bool = False
    proxy_fraction: float = 0.3
    proxy_repeats: int = 2
    proxy_clip_quantiles: tuple[float, ...] = (0.5, 0.9)
    proxy_step_sizes: tuple[float, ...] = (0.2,)


def quick_settings() -> Settings:
    r"""A smoke configuration that keeps every code path (iris, narrow MLPs; seconds on one core)."""
    return Settings(
        mode="quick",
        dataset="iris",
        seeds=(0, 1),
        width_low=4,
        width_high=12,
        epochs=2,
        train_batch_size=32,
        iterations=1,
        dp_hypo_candidates=64,
        dp_hypo_refit_every=4,
        bo_num_initial=12,
        bo_batch=6,
        bo_raw_samples=16,
        bo_maxiter=10,
    )


def methods(settings: Settings) -> tuple[str, ...]:
    r"""The methods this run has: ``METHODS``, and ``TUNE_AUTO`` with ``tune_auto_proxy``."""
    return METHODS + ((TUNE_AUTO,) if settings.tune_auto_proxy else ())


def proxy_data(settings: Settings, data: ClassificationData, seed: int) -> ClassificationData:
    r"""The public proxy's data: a ``proxy_fraction`` slice of the TRAINING split (chosen by the
    replication seed) as its users, its models trained on the rest of the training split.

    The training rows are not what the benchmark protects (its guarantee is for the validation
    users; the models train without DP-SGD), so they stand in for a public data set here.
    """
    m = int(data.y_train.shape[0])
    order = torch.randperm(m, generator=torch.Generator().manual_seed(seed))
    users = order[: max(2, int(round(settings.proxy_fraction * m)))]
    rest = order[users.shape[0] :]
    return ClassificationData(
        data.X_train[rest],
        data.y_train[rest],
        data.X_train[users],
        data.y_train[users],
        num_classes=data.num_classes,
        name=f"{data.name} (public proxy: training slice)",
    )


def search_space(settings: Settings) -> SearchSpace:
    r"""optimizer, activation (categorical), width (integer), lr and weight decay (log10), dropout.

    Ranges are public and chosen without data (lr and weight decay as ``mlp_task``).
    """
    return SearchSpace(
        [
            Categorical("optimizer", ("sgd", "adam")),
            Categorical("activation", ("relu", "tanh")),
            Integer("width", settings.width_low, settings.width_high),
            Hyperparameter("lr", 1e-4, 0.3, log_scale=True),
            Hyperparameter("weight_decay", 1e-6, 1e-1, log_scale=True),
            Hyperparameter("dropout", 0.0, 0.5),
        ]
    )


_ACTIVATIONS = {"relu": nn.ReLU, "tanh": nn.Tanh}


def make_model(num_features: int, num_classes: int, *, width: int, activation: str, dropout: float) -> nn.Module:
    r"""``Linear → activation → Dropout → Linear``: one hidden layer of ``width`` units."""
    return nn.Sequential(
        nn.Linear(num_features, int(width)),
        _ACTIVATIONS[activation](),
        nn.Dropout(float(dropout)),
        nn.Linear(int(width), num_classes),
    )


def make_optimizer(params: Any, *, optimizer: str, lr: float, weight_decay: float) -> torch.optim.Optimizer:
    r"""``torch.optim.SGD`` (momentum 0.9) or ``torch.optim.Adam``, by the categorical ``optimizer``."""
    if optimizer == "sgd":
        return torch.optim.SGD(params, lr=lr, weight_decay=weight_decay, momentum=0.9)
    if optimizer == "adam":
        return torch.optim.Adam(params, lr=lr, weight_decay=weight_decay)
    raise ValueError(f"optimizer must be 'sgd' or 'adam', got {optimizer!r}.")


def make_objective(settings: Settings, data: ClassificationData, training_seed: int) -> TorchModelTuningObjective:
    r"""(configuration, θ) ↦ per-user capped cross-entropies of the trained MLP (``with_choice`` binds one)."""
    training = TrainingConfig(
        epochs=settings.epochs, batch_size=settings.train_batch_size, seed=training_seed, num_threads=1
    )
    assert data.num_classes is not None  # a classification data set
    model_fn = functools.partial(make_model, data.num_features, int(data.num_classes))
    return TorchModelTuningObjective(
        data,
        search_space(settings),
        model_fn=model_fn,
        optimizer=make_optimizer,
        training=training,
        loss_cap=settings.loss_cap,
    )


class MixedEncoding(PackageEncoding):
    r"""The package's public unit-cube encoding (``botorch_dp.tuning.encoding``), whose
    ``objective`` also counts the trainings and gives the NON-PRIVATE diagnostics."""

    def objective(self, objective: TorchModelTuningObjective) -> EncodedObjective:  # type: ignore[override]
        r"""``objective`` on the encoded cube."""
        return EncodedObjective(objective, self)


class EncodedObjective(PackageEncodedObjective):
    r"""``X`` (``q x D`` encoded) ↦ ``q x n`` losses (the package's), with the benchmark's diagnostics."""

    base: TorchModelTuningObjective

    @property
    def num_trainings(self) -> int:
        return self.base.num_trainings

    def evaluate_non_private(self, x: Tensor) -> dict[str, float | None]:
        r"""NON-PRIVATE diagnostic of one encoded point (``TorchModelTuningObjective.evaluate_non_private``)."""
        x = torch.as_tensor(x, dtype=torch.float64)
        row = self.encoding.indices(x[None])[0].tolist()
        return self.encoding.objective_for(self.base, row).evaluate_non_private(x[: self.encoding.space.dim])
