r"""Tuning real models privately: ``tune``, and the objectives that return one loss per user.

``one_call`` is ``tune``, the one call (``tune_call``: its checked arguments; ``method_runs`` and
``mixed_methods``: its candidates and their comparison on a proxy, the methods themselves being
``botorch_dp.methods``; ``encoding``: a mixed space's public cube; ``tune_result``: what it
returns; ``tune_checkpoint``: its resumable directory). The objectives it tunes live a layer
below the methods, in ``botorch_dp.objectives``, and their public names are re-exported here:
``objectives.search_space`` maps the unit cube DP-GIBO searches to natural hyperparameters
(continuous, ``Integer`` and ``Categorical`` ones) and routes each to the optimizer or the
model, ``objectives.datasets`` holds the train / validation / test splits (numpy or torch, any
float dtype), ``objectives.torch_classifier`` is the objective that trains a torch model at each
θ and returns the per-example validation losses (``per_example``: the losses and their cap;
``noise_estimate``: its σ² measured on public data; training itself, with or without DP-SGD, is
in ``botorch_dp.training``).

Each name is imported on first use (PEP 562), so that ``from botorch_dp.tuning import
SearchSpace`` (or ``botorch_dp.tune``) does not load scikit-learn and the training stack.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from botorch_dp.objectives.datasets import (
        SKLEARN_DATASETS,
        ClassificationData,
        load_sklearn_classification,
        synthetic_like,
    )
    from botorch_dp.objectives.noise_estimate import estimate_training_noise_variance
    from botorch_dp.objectives.per_example import per_example_cross_entropy
    from botorch_dp.objectives.search_space import (
        Categorical,
        Hyperparameter,
        Integer,
        SearchSpace,
        default_mlp_space,
        route_hyperparameters,
    )
    from botorch_dp.objectives.torch_classifier import TorchModelTuningObjective
    from botorch_dp.tuning.one_call import TuneResult, tune

#: Public name → the module that defines it.
_LAZY_NAMES = {
    **dict.fromkeys(
        ("SKLEARN_DATASETS", "ClassificationData", "load_sklearn_classification", "synthetic_like"),
        "botorch_dp.objectives.datasets",
    ),
    **dict.fromkeys(("TuneResult", "tune"), "botorch_dp.tuning.one_call"),
    **dict.fromkeys(
        ("Categorical", "Hyperparameter", "Integer", "SearchSpace", "default_mlp_space", "route_hyperparameters"),
        "botorch_dp.objectives.search_space",
    ),
    "TorchModelTuningObjective": "botorch_dp.objectives.torch_classifier",
    "estimate_training_noise_variance": "botorch_dp.objectives.noise_estimate",
    "per_example_cross_entropy": "botorch_dp.objectives.per_example",
}

__all__ = [
    "Categorical",
    "ClassificationData",
    "Hyperparameter",
    "Integer",
    "SKLEARN_DATASETS",
    "SearchSpace",
    "TorchModelTuningObjective",
    "TuneResult",
    "default_mlp_space",
    "estimate_training_noise_variance",
    "load_sklearn_classification",
    "per_example_cross_entropy",
    "route_hyperparameters",
    "synthetic_like",
    "tune",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY_NAMES:
        value = getattr(importlib.import_module(_LAZY_NAMES[name]), name)
        globals()[name] = value  # once: later lookups do not come here
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
