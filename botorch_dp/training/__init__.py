r"""Training inside one evaluation, and its guarantee for the training data.

``dp_sgd`` trains a model with SGD or Opacus DP-SGD and reports what each DP-SGD run
spends, so that the caller can record it in a ``PrivacyLedger``.
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

__all__ = ["DPSGDConfig", "TrainingConfig", "TrainingRun", "make_mlp", "planned_dp_run", "train_model"]
