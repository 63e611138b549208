r"""Training inside one evaluation, and its guarantee for the training data.

``dp_sgd`` trains a model with any torch optimizer or with Opacus DP-SGD, calibrates the
DP-SGD noise to a target training ε over all planned runs, and reports what each run
spends, so that the caller can record it in a ``PrivacyLedger``. ``objective_perturbation``
trains linear models (logistic, Huber) with AMP, whose guarantee is an RDP curve.
"""

from __future__ import annotations

from botorch_dp.training.dp_sgd import (
    DPSGDConfig,
    TrainingConfig,
    TrainingRun,
    calibrate_noise_multiplier,
    composed_training_epsilon,
    make_mlp,
    per_example_loss_default,
    planned_dp_run,
    resolve_dp_sgd,
    train_model,
)
from botorch_dp.training.objective_perturbation import (
    AMPConfig,
    AMPNonPrivateDiagnostics,
    AMPNotConvergedError,
    AMPResult,
    fit_amp,
)

__all__ = [
    "AMPConfig",
    "AMPNonPrivateDiagnostics",
    "AMPNotConvergedError",
    "AMPResult",
    "DPSGDConfig",
    "TrainingConfig",
    "TrainingRun",
    "calibrate_noise_multiplier",
    "composed_training_epsilon",
    "fit_amp",
    "make_mlp",
    "per_example_loss_default",
    "planned_dp_run",
    "resolve_dp_sgd",
    "train_model",
]
