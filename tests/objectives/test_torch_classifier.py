"""Tests for botorch_dp/objectives/torch_classifier.py: per-user losses equal an independent
recomputation, determinism, any model / optimizer / loss routed by name (the capped losses are
in test_per_example.py, the σ² pilot in test_noise_estimate.py)."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from botorch_dp.training import TrainingConfig
from botorch_dp.tuning import Hyperparameter, SearchSpace, TorchModelTuningObjective, default_mlp_space
from botorch_dp.utils import torch_threads

THETA = torch.tensor([[0.5, 0.5, 0.5], [0.8, 0.2, 0.1]], dtype=torch.float64)


def _reference_losses(data, lr, weight_decay, dropout, *, epochs, batch_size, hidden, seed):
    """Plain training loop written out here, then F.cross_entropy(reduction="none")."""
    with torch_threads(1), torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = nn.Sequential(
            nn.Linear(data.X_train.shape[1], hidden),
            nn.ReLU(),
            nn.Dropout(dropout),
            nn.Linear(hidden, data.num_classes),
        )
        opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9, weight_decay=weight_decay)
        loader = DataLoader(
            TensorDataset(data.X_train, data.y_train),
            batch_size=batch_size,
            shuffle=True,
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
            data, params["lr"], params["weight_decay"], params["dropout"], epochs=2, batch_size=64, hidden=32, seed=3
        )
        torch.testing.assert_close(losses[j], ref, rtol=1e-6, atol=1e-7)
    assert not torch.allclose(losses[0], losses[1])
    assert objective.ledger.training.runs() == {}  # no DP-SGD, nothing accounted


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


# ---------------------------------------------------------------- your own model (issue 16 item 4)
def _plain_loop(X, y, Xv, yv, make_model, make_optimizer, loss, *, epochs, batch_size, seed):
    """An independent training loop: seeded model, shuffled batches, mean loss, per-example validation loss."""
    with torch_threads(1), torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = make_model()
        opt = make_optimizer(model.parameters())
        loader = DataLoader(
            TensorDataset(X, y), batch_size=batch_size, shuffle=True, generator=torch.Generator().manual_seed(seed)
        )
        model.train()
        for _ in range(epochs):
            for xb, yb in loader:
                opt.zero_grad()
                loss(model(xb), yb).mean().backward()
                opt.step()
        model.eval()
        with torch.no_grad():
            return loss(model(Xv), yv).double()


class _Net(nn.Module):
    def __init__(self, width: float = 8.0, dropout: float = 0.0, in_features: int = 64):
        super().__init__()
        self.body = nn.Sequential(
            nn.Linear(in_features, round(width)), nn.Tanh(), nn.Dropout(dropout), nn.Linear(round(width), 10)
        )

    def forward(self, x):
        return self.body(x)


def test_numpy_data_of_any_float_dtype_give_the_same_losses(data):
    training = TrainingConfig(epochs=1, batch_size=64, hidden_sizes=(8,), seed=1)
    reference = TorchModelTuningObjective(data, training=training)(THETA)
    as_numpy = (
        data.X_train.double().numpy(),
        data.y_train.numpy(),
        data.X_val.double().numpy(),
        data.y_val.int().numpy(),
    )  # float64 features, int32 labels: cast to the model's float32 and long
    objective = TorchModelTuningObjective(as_numpy, training=training)
    assert objective.data.X_train.dtype == torch.float64 and objective.data.y_val.dtype == torch.long
    assert torch.equal(objective(THETA), reference)
    assert objective.data.num_classes == 10 and objective.data.X_test is None
    # a float64 model trains on float64 data (no silent downcast)
    objective64 = TorchModelTuningObjective(
        as_numpy, training=training, model_fn=lambda dropout: _Net(dropout=dropout).double()
    )
    losses = objective64(THETA[:1])
    params = objective64.space.to_natural(THETA[0])
    ref = _plain_loop(
        data.X_train.double(),
        data.y_train,
        data.X_val.double(),
        data.y_val,
        lambda: _Net(dropout=params["dropout"]).double(),
        lambda p: torch.optim.SGD(p, lr=params["lr"], momentum=0.9, weight_decay=params["weight_decay"]),
        lambda out, t: F.cross_entropy(out, t, reduction="none"),
        epochs=1,
        batch_size=64,
        seed=1,
    )
    torch.testing.assert_close(losses[0], ref, rtol=1e-12, atol=1e-12)


def test_any_optimizer_loss_and_named_hyperparameters_match_a_plain_loop(data):
    space = SearchSpace(
        [
            Hyperparameter("lr", 1e-3, 1e-1, log_scale=True),  # Adam's
            Hyperparameter("eps", 1e-8, 1e-4, log_scale=True),  # Adam's (no "lr" hard-coded)
            Hyperparameter("width", 4.0, 16.0),  # the model constructor's
            Hyperparameter("dropout", 0.0, 0.3),  # the model constructor's
        ]
    )

    def smoothed(out, target):  # a per-example loss other than plain cross-entropy
        return F.cross_entropy(out, target, reduction="none", label_smoothing=0.1)

    training = TrainingConfig(epochs=1, batch_size=50, seed=4)
    objective = TorchModelTuningObjective(
        data,
        space,
        model_fn=_Net,
        optimizer=torch.optim.Adam,
        optimizer_kwargs={"weight_decay": 1e-4},
        loss_fn=smoothed,
        training=training,
    )
    assert objective.routes == {"lr": "optimizer", "eps": "optimizer", "width": "model", "dropout": "model"}
    theta = torch.tensor([[0.3, 0.5, 0.8, 0.2], [0.9, 0.1, 0.2, 0.6]], dtype=torch.float64)
    losses = objective(theta)
    for j, p in enumerate(space.to_natural(theta)):
        ref = _plain_loop(
            data.X_train,
            data.y_train,
            data.X_val,
            data.y_val,
            lambda p=p: _Net(width=p["width"], dropout=p["dropout"]),
            lambda params, p=p: torch.optim.Adam(params, lr=p["lr"], eps=p["eps"], weight_decay=1e-4),
            smoothed,
            epochs=1,
            batch_size=50,
            seed=4,
        )
        torch.testing.assert_close(losses[j], ref, rtol=1e-6, atol=1e-7)
    # an optimizer factory routes its own keywords too
    factory = TorchModelTuningObjective(
        data,
        SearchSpace([Hyperparameter("lr", 1e-3, 1e-1, log_scale=True), Hyperparameter("beta1", 0.5, 0.95)]),
        optimizer=lambda params, lr, beta1: torch.optim.Adam(params, lr=lr, betas=(beta1, 0.999)),
        training=training,
    )
    assert factory.routes == {"lr": "optimizer", "beta1": "optimizer"}
    assert factory(torch.tensor([[0.5, 0.5]], dtype=torch.float64)).shape == (1, 539)


def test_regression_targets_use_per_example_squared_error(data):
    g = torch.Generator().manual_seed(0)
    w = torch.randn(64, generator=g)
    regression = (data.X_train.numpy(), (data.X_train @ w).numpy(), data.X_val.numpy(), (data.X_val @ w).numpy())
    space = SearchSpace([Hyperparameter("lr", 1e-4, 1e-2, log_scale=True)])
    objective = TorchModelTuningObjective(
        regression, space, model_fn=lambda: nn.Linear(64, 1), training=TrainingConfig(epochs=1, seed=2), loss_cap=None
    )
    losses = objective(torch.tensor([[0.5]], dtype=torch.float64))
    lr = space.to_natural(torch.tensor([0.5], dtype=torch.float64))["lr"]
    ref = _plain_loop(
        data.X_train,
        data.X_train @ w,
        data.X_val,
        data.X_val @ w,
        lambda: nn.Linear(64, 1),
        lambda p: torch.optim.SGD(p, lr=lr, momentum=0.9),
        lambda out, t: (out.squeeze(-1) - t) ** 2,
        epochs=1,
        batch_size=64,
        seed=2,
    )
    torch.testing.assert_close(losses[0], ref, rtol=1e-6, atol=1e-6)
    diag = objective.evaluate_non_private(torch.tensor([0.5], dtype=torch.float64))
    assert diag["validation_accuracy"] is None and diag["test_loss"] is None
    assert diag["validation_loss"] == pytest.approx(float(ref.mean()), rel=1e-6)


def test_a_mean_loss_or_a_single_user_is_refused_with_an_explanation(data):
    training = TrainingConfig(epochs=1, hidden_sizes=(4,))
    mean_loss = TorchModelTuningObjective(data, training=training, loss_fn=F.cross_entropy)  # reduction="mean"
    with pytest.raises(ValueError, match=r"shape \(\) for 539 examples.*per-user losses.*reduction='none'"):
        mean_loss(THETA[:1])
    with pytest.raises(ValueError, match="1 example.*fewer than 2.*per-user losses"):
        TorchModelTuningObjective((data.X_train, data.y_train, data.X_val[:1], data.y_val[:1]), training=training)


def test_hyperparameters_that_fit_nowhere_are_refused_naming_them(data):
    space = SearchSpace([Hyperparameter("lr", 1e-3, 1e-1, log_scale=True), Hyperparameter("depth", 1, 4)])
    with pytest.raises(ValueError, match="'depth' is a keyword of neither"):
        TorchModelTuningObjective(data, space)  # the default MLP takes only dropout
    with pytest.raises(ValueError, match="optimizer_kwargs fixes \\['lr'\\]"):
        TorchModelTuningObjective(data, default_mlp_space(), optimizer_kwargs={"lr": 0.1})
    with pytest.raises(ValueError, match="tuple"):
        TorchModelTuningObjective((data.X_train, data.y_train), space)
