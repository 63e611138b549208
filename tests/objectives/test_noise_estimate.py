"""Tests for botorch_dp/objectives/noise_estimate.py: the σ² pilot trains on public data only, is 0
without DP-SGD, positive with it, and equals the pooled variance recomputed from the pilot's losses."""

import pytest
import torch

from botorch_dp.objectives.torch_classifier import estimate_training_noise_variance as reexported
from botorch_dp.privacy.ledger import PrivacyLedger
from botorch_dp.training import DPSGDConfig, TrainingConfig
from botorch_dp.tuning import TorchModelTuningObjective, estimate_training_noise_variance, synthetic_like

THETA = torch.tensor([[0.5, 0.5, 0.5], [0.8, 0.2, 0.1]], dtype=torch.float64)


def test_noise_variance_pilot_uses_public_data_only(data):
    training = TrainingConfig(epochs=1, batch_size=100, hidden_sizes=(8,), seed=0)
    public = synthetic_like(data, seed=0)
    assert public.sizes() == data.sizes() and public.num_features == 64 and public.num_classes == 10
    plain = TorchModelTuningObjective(data, training=training)
    assert estimate_training_noise_variance(plain, public, THETA, num_repeats=2) == 0.0
    ledger = PrivacyLedger()
    dp = TorchModelTuningObjective(data, training=training, dp_sgd=DPSGDConfig(2.0, 1.0), ledger=ledger)
    sigma2 = estimate_training_noise_variance(dp, public, THETA[:1], num_repeats=3)
    assert sigma2 > 0
    assert ledger.training.runs() == {} and dp.num_trainings == 0  # the sensitive side is untouched


def test_the_estimate_is_the_pooled_variance_of_the_pilots_mean_losses(data):
    training = TrainingConfig(epochs=1, batch_size=100, hidden_sizes=(8,), seed=0)
    public = synthetic_like(data, seed=0)
    dp = TorchModelTuningObjective(data, training=training, dp_sgd=DPSGDConfig(2.0, 1.0))
    sigma2 = estimate_training_noise_variance(dp, public, THETA, num_repeats=2, noise_seed=5)
    # recomputed: the same pilot (same seed, fresh ledger, so the same run numbering) evaluated by hand
    pilot = dp.with_data(public, ledger=PrivacyLedger(), noise_seed=5, run_prefix="pilot")
    means = pilot(THETA.repeat_interleave(2, dim=0)).mean(-1).reshape(2, 2)
    assert sigma2 == pytest.approx(float(((means - means.mean(-1, keepdim=True)) ** 2).sum(-1).mean()), rel=1e-12)
    assert reexported is estimate_training_noise_variance
