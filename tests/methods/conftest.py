"""The digits data set, and the DP-SGD objective of the training methods' tests, shared by the methods tests."""

import pytest

from botorch_dp.tuning import load_sklearn_classification


@pytest.fixture(scope="module")
def data():
    return load_sklearn_classification("digits", seed=0)


@pytest.fixture
def training_objective():
    r"""A private DP-SGD objective of 160 training records and 40 validation users (``σ = 1``, batches of 20)."""
    from botorch_dp.training import DPSGDConfig, TrainingConfig
    from botorch_dp.tuning import TorchModelTuningObjective
    from tests.methods.method_helpers import TRAINING_SPACE, training_rows

    (Xt, yt), (Xv, yv) = training_rows(160, 0), training_rows(40, 1)
    training = TrainingConfig(epochs=1, batch_size=20, hidden_sizes=(4,))
    return TorchModelTuningObjective(
        (Xt, yt, Xv, yv), TRAINING_SPACE, training=training, dp_sgd=DPSGDConfig(noise_multiplier=1.0)
    )
