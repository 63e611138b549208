r"""Tuning real models privately: objectives that return one loss per user for DP-GIBO.

``search_space`` maps the unit cube DP-GIBO searches to natural hyperparameters and
routes each to the optimizer or the model, ``datasets`` holds the train / validation /
test splits (numpy or torch, any float dtype), and ``torch_classifier`` is the objective
that trains a torch model at each θ and returns the per-example validation losses
(training itself, with or without DP-SGD, is in ``botorch_dp.training``).
"""

from __future__ import annotations

from botorch_dp.tuning.datasets import (
    SKLEARN_DATASETS,
    ClassificationData,
    load_sklearn_classification,
    synthetic_like,
)
from botorch_dp.tuning.search_space import (
    Categorical,
    Hyperparameter,
    Integer,
    SearchSpace,
    default_mlp_space,
    route_hyperparameters,
)
from botorch_dp.tuning.torch_classifier import (
    TorchModelTuningObjective,
    estimate_training_noise_variance,
    per_example_cross_entropy,
)

__all__ = [
    "SKLEARN_DATASETS",
    "Categorical",
    "ClassificationData",
    "Hyperparameter",
    "Integer",
    "SearchSpace",
    "TorchModelTuningObjective",
    "default_mlp_space",
    "estimate_training_noise_variance",
    "load_sklearn_classification",
    "per_example_cross_entropy",
    "route_hyperparameters",
    "synthetic_like",
]
