r"""Training inside one evaluation, and its guarantee for the training data.

``dp_sgd`` trains a model with SGD or Opacus DP-SGD and reports what each DP-SGD run
spends, so that the caller can record it in a ``PrivacyLedger``. ``objective_perturbation``
trains linear models (logistic, Huber) with AMP, whose guarantee is an RDP curve.
"""

from __future__ import annotations

from botorch_dp.training.dp_sgd import (
    DPSGDConfig,
    TrainingConfig,
    TrainingRun,
    make_mlp,
    planned_dp_run,
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
    "fit_amp",
    "make_mlp",
    "planned_dp_run",
    "train_model",
]
