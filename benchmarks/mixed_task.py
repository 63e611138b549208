r"""The mixed tuning task: settings, labels, the mixed search space, its public encoding, the objective.

The digits MLP of ``benchmarks.mlp_task`` with a MIXED search space: the optimizer
(``"sgd"`` with momentum 0.9, or ``"adam"``) and the activation (``"relu"`` or ``"tanh"``)
are ``Categorical``, the hidden width an ``Integer`` in ``[16, 128]``, the learning rate and
the weight decay continuous on a log scale and the dropout continuous. Each validation
example is a user (its capped cross-entropy); the split is the seed's, as in ``mlp_task``.

``MixedEncoding`` is the PUBLIC encoding of the mixed space on a unit cube for the methods
that only sample a cube (private random search, DP-HyPO, non-private random search): the
``d`` relaxed coordinates of the space (integers rounded by the space), then one extra
coordinate per categorical hyperparameter, split into equal shares (``u ∈ [j/m, (j+1)/m)``
is choice ``j`` of ``m``), so a uniform point of the cube is uniform over each categorical.
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
    "MixedEncoding",
    "Settings",
    "load_data",
    "make_model",
    "make_objective",
    "make_optimizer",
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


def quick_settings() -> Settings:
    r"""A smoke configuration that keeps every code path (iris, narrow MLPs; seconds on one core)."""
    return Settings(
        mode="quick", dataset="iris", seeds=(0, 1), width_low=4, width_high=12, epochs=2, train_batch_size=32,
        iterations=1, dp_hypo_candidates=64, dp_hypo_refit_every=4, bo_num_initial=12, bo_batch=6,
        bo_raw_samples=16, bo_maxiter=10,
    )


def search_space(settings: Settings) -> SearchSpace:
    r"""optimizer, activation (categorical), width (integer), lr and weight decay (log10), dropout.

    Ranges are public and chosen without data (lr and weight decay as ``mlp_task``).
    """
    return SearchSpace([
        Categorical("optimizer", ("sgd", "adam")),
        Categorical("activation", ("relu", "tanh")),
        Integer("width", settings.width_low, settings.width_high),
        Hyperparameter("lr", 1e-4, 0.3, log_scale=True),
        Hyperparameter("weight_decay", 1e-6, 1e-1, log_scale=True),
        Hyperparameter("dropout", 0.0, 0.5),
    ])


_ACTIVATIONS = {"relu": nn.ReLU, "tanh": nn.Tanh}


def make_model(num_features: int, num_classes: int, *, width: int, activation: str, dropout: float) -> nn.Module:
    r"""``Linear → activation → Dropout → Linear``: one hidden layer of ``width`` units."""
    return nn.Sequential(nn.Linear(num_features, int(width)), _ACTIVATIONS[activation](), nn.Dropout(float(dropout)),
                         nn.Linear(int(width), num_classes))


def make_optimizer(params: Any, *, optimizer: str, lr: float, weight_decay: float) -> torch.optim.Optimizer:
    r"""``torch.optim.SGD`` (momentum 0.9) or ``torch.optim.Adam``, by the categorical ``optimizer``."""
    if optimizer == "sgd":
        return torch.optim.SGD(params, lr=lr, weight_decay=weight_decay, momentum=0.9)
    if optimizer == "adam":
        return torch.optim.Adam(params, lr=lr, weight_decay=weight_decay)
    raise ValueError(f"optimizer must be 'sgd' or 'adam', got {optimizer!r}.")


def make_objective(settings: Settings, data: ClassificationData, training_seed: int) -> TorchModelTuningObjective:
    r"""(configuration, θ) ↦ per-user capped cross-entropies of the trained MLP (``with_choice`` binds one)."""
    training = TrainingConfig(epochs=settings.epochs, batch_size=settings.train_batch_size, seed=training_seed,
                              num_threads=1)
    assert data.num_classes is not None  # a classification data set
    model_fn = functools.partial(make_model, data.num_features, int(data.num_classes))
    return TorchModelTuningObjective(data, search_space(settings), model_fn=model_fn, optimizer=make_optimizer,
                                     training=training, loss_cap=settings.loss_cap)


class MixedEncoding:
    r"""The public unit-cube encoding of a mixed space: its ``d`` coordinates, then one per categorical.

    Args:
        space: The mixed ``SearchSpace``.
    """

    def __init__(self, space: SearchSpace) -> None:
        self.space = space
        self.sizes = [len(h.choices) for h in space.categoricals]
        self.dim = space.dim + len(self.sizes)

    @property
    def bounds(self) -> Tensor:
        r"""``2 x D`` float64 unit cube (``D = d + number of categoricals``)."""
        return torch.stack([torch.zeros(self.dim), torch.ones(self.dim)]).to(torch.float64)

    def indices(self, X: Tensor) -> Tensor:
        r"""``q x c`` long tensor: the choice index of each categorical (equal shares of ``[0, 1]``)."""
        U = X[..., self.space.dim:].clamp(0.0, 1.0)
        sizes = torch.tensor(self.sizes, dtype=torch.float64)
        return torch.minimum(torch.floor(U * sizes), sizes - 1).long()

    def centres(self, indices: Tensor) -> Tensor:
        r"""The cube coordinate at the centre of each choice's share (inverse of ``indices``)."""
        return (indices.to(torch.float64) + 0.5) / torch.tensor(self.sizes, dtype=torch.float64)

    def choice(self, index_row: list[int]) -> dict[str, Any]:
        r"""``{name: value}`` of the categoricals for one row of choice indices."""
        return {h.name: h.choices[int(i)] for h, i in zip(self.space.categoricals, index_row, strict=True)}

    def to_natural(self, x: Tensor) -> dict[str, Any]:
        r"""Natural values (plain Python) of one encoded point."""
        x = torch.as_tensor(x, dtype=torch.float64)
        natural = self.space.to_natural(x[: self.space.dim], choice=self.choice(self.indices(x[None])[0].tolist()))
        assert isinstance(natural, dict)  # one point
        return natural

    def objective_for(self, objective: TorchModelTuningObjective, index_row: list[int]) -> TorchModelTuningObjective:
        r"""``objective`` bound to the configuration of one row of choice indices."""
        return objective.with_choice(self.choice(index_row))

    def objective(self, objective: TorchModelTuningObjective) -> EncodedObjective:
        r"""``objective`` on the encoded cube."""
        return EncodedObjective(objective, self)


class EncodedObjective:
    r"""``X`` (``q x D`` encoded) ↦ ``q x n`` losses: rows grouped by configuration, each group
    evaluated by ``objective.with_choice(configuration)`` at its relaxed coordinates."""

    def __init__(self, objective: TorchModelTuningObjective, encoding: MixedEncoding) -> None:
        self.base = objective
        self.encoding = encoding

    @property
    def num_trainings(self) -> int:
        return self.base.num_trainings

    def __call__(self, X: Tensor) -> Tensor:
        X = torch.as_tensor(X, dtype=torch.float64).reshape(-1, self.encoding.dim)
        idx = self.encoding.indices(X)
        configs, group = torch.unique(idx, dim=0, return_inverse=True)
        out: Tensor | None = None
        for g, row in enumerate(configs.tolist()):  # one evaluation per configuration present
            rows = group == g
            losses = self.encoding.objective_for(self.base, row)(X[rows, : self.encoding.space.dim])
            if out is None:
                out = torch.empty(X.shape[0], losses.shape[-1], dtype=torch.float64)
            out[rows] = losses.to(torch.float64)
        assert out is not None
        return out

    def evaluate_non_private(self, x: Tensor) -> dict[str, float | None]:
        r"""NON-PRIVATE diagnostic of one encoded point (``TorchModelTuningObjective.evaluate_non_private``)."""
        x = torch.as_tensor(x, dtype=torch.float64)
        row = self.encoding.indices(x[None])[0].tolist()
        return self.encoding.objective_for(self.base, row).evaluate_non_private(x[: self.encoding.space.dim])
