"""Tests for botorch_dp/tuning/torch_classifier.py: per-user losses equal an independent
recomputation, determinism, capped losses, and the σ² pilot on public data."""

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from botorch_dp.privacy.ledger import PrivacyLedger
from botorch_dp.training import DPSGDConfig, TrainingConfig
from botorch_dp.tuning import (
    TorchModelTuningObjective,
    estimate_training_noise_variance,
    per_example_cross_entropy,
    synthetic_like,
)
from botorch_dp.utils import torch_threads

THETA = torch.tensor([[0.5, 0.5, 0.5], [0.8, 0.2, 0.1]], dtype=torch.float64)


def _reference_losses(data, lr, weight_decay, dropout, *, epochs, batch_size, hidden, seed):
    """Plain training loop written out here, then F.cross_entropy(reduction="none")."""
    with torch_threads(1), torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = nn.Sequential(
            nn.Linear(data.X_train.shape[1], hidden), nn.ReLU(), nn.Dropout(dropout),
            nn.Linear(hidden, data.num_classes),
        )
        opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9, weight_decay=weight_decay)
        loader = DataLoader(
            TensorDataset(data.X_train, data.y_train), batch_size=batch_size, shuffle=True,
            generator=torch.Generator().manual_seed(seed),
        )
        model.train()
        for _ in range(epochs):
            for xb, yb in loader:
                opt.zero_grad()
                F.cross_entropy(model(xb), yb).backward()
                opt.step()
        model.eval()
        with torch.no_grad():
            return F.cross_entropy(model(data.X_val), data.y_val, reduction="none").double()


def test_objective_losses_equal_independent_recomputation(data):
    training = TrainingConfig(epochs=2, batch_size=64, hidden_sizes=(32,), seed=3)
    objective = TorchModelTuningObjective(data, training=training)
    losses = objective(THETA)
    assert losses.shape == (2, 539) and losses.dtype == torch.float64
    assert torch.isfinite(losses).all() and (losses >= 0).all()
    for j, params in enumerate(objective.space.to_natural(THETA)):
        ref = _reference_losses(
            data, params["lr"], params["weight_decay"], params["dropout"],
            epochs=2, batch_size=64, hidden=32, seed=3,
        )
        torch.testing.assert_close(losses[j], ref, rtol=1e-6, atol=1e-7)
    assert not torch.allclose(losses[0], losses[1])
    assert objective.ledger.training_runs == {}  # no DP-SGD, nothing accounted


def test_objective_is_deterministic_given_theta_and_seed(data):
    training = TrainingConfig(epochs=1, hidden_sizes=(16,), seed=5)
    a = TorchModelTuningObjective(data, training=training)
    rng = torch.get_rng_state()
    first = a(THETA)
    assert torch.equal(torch.get_rng_state(), rng)  # the caller's random state is untouched
    torch.manual_seed(123)  # and does not matter
    assert torch.equal(a(THETA[[1, 0]]), first[[1, 0]])
    b = TorchModelTuningObjective(data, training=training)
    assert torch.equal(b(THETA), first)
    other = TorchModelTuningObjective(data, training=TrainingConfig(epochs=1, hidden_sizes=(16,), seed=6))
    assert not torch.allclose(other(THETA), first)
    assert a(torch.empty(0, 3, dtype=torch.float64)).shape == (0, 539)


def test_loss_cap_replaces_non_finite_losses():
    model = nn.Linear(2, 3)
    with torch.no_grad():
        model.weight.fill_(float("nan"))
    X, y = torch.randn(4, 2), torch.tensor([0, 1, 2, 0])
    out = per_example_cross_entropy(model, X, y, loss_cap=7.0)
    assert torch.equal(out, torch.full((4,), 7.0, dtype=torch.float64))
    assert torch.isnan(per_example_cross_entropy(model, X, y)).all()


def test_noise_variance_pilot_uses_public_data_only(data):
    training = TrainingConfig(epochs=1, batch_size=100, hidden_sizes=(8,), seed=0)
    public = synthetic_like(data, seed=0)
    assert public.sizes() == data.sizes() and public.num_features == 64 and public.num_classes == 10
    plain = TorchModelTuningObjective(data, training=training)
    assert estimate_training_noise_variance(plain, public, THETA, num_repeats=2) == 0.0
    ledger = PrivacyLedger()
    dp = TorchModelTuningObjective(
        data, training=training, dp_sgd=DPSGDConfig(2.0, 1.0), ledger=ledger
    )
    sigma2 = estimate_training_noise_variance(dp, public, THETA[:1], num_repeats=3)
    assert sigma2 > 0
    assert ledger.training_runs == {} and dp.num_trainings == 0  # the sensitive side is untouched
