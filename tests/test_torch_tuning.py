"""Tests for botorch_dp/torch_tuning.py and scripts/tune_torch_model.py: per-user losses
equal an independent recomputation, determinism, DP-SGD runs recorded in the ledger and
accounted like Opacus, and the script's JSON keeps non-private values out of the release."""

import json
import math

import pytest
import torch
import torch.nn.functional as F
from opacus.accountants import RDPAccountant
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from botorch_dp.privacy.ledger import PrivacyBudgetExceeded, PrivacyLedger
from botorch_dp.torch_tuning import (
    DPSGDConfig,
    Hyperparameter,
    SearchSpace,
    TorchModelTuningObjective,
    TrainingConfig,
    default_mlp_space,
    estimate_training_noise_variance,
    load_sklearn_classification,
    per_example_cross_entropy,
    synthetic_like,
)

from helpers import loaded_script

THETA = torch.tensor([[0.5, 0.5, 0.5], [0.8, 0.2, 0.1]], dtype=torch.float64)


@pytest.fixture(scope="module")
def data():
    return load_sklearn_classification("digits", seed=0)


@pytest.fixture(scope="module")
def script():
    with loaded_script("tune_torch_model") as module:
        yield module


def _reference_losses(data, lr, weight_decay, dropout, *, epochs, batch_size, hidden, seed):
    """Plain training loop written out here, then F.cross_entropy(reduction="none")."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    state = torch.get_rng_state()
    try:
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
    finally:
        torch.set_rng_state(state)
        torch.set_num_threads(threads)


def test_data_standardized_with_training_statistics(data):
    assert data.sizes() == {"train": 898, "validation": 539, "test": 360}
    mean, std = data.X_train.mean(0), data.X_train.std(0, unbiased=False)
    varying = std > 0
    torch.testing.assert_close(mean, torch.zeros_like(mean), atol=1e-5, rtol=0)
    torch.testing.assert_close(std[varying], torch.ones_like(std[varying]), atol=1e-5, rtol=0)
    assert data.X_val.mean(0).abs().max() > 1e-3  # not re-standardized on its own statistics


def test_search_space_maps_unit_cube_to_natural_units():
    space = default_mlp_space()
    assert space.names == ["lr", "weight_decay", "dropout"]
    torch.testing.assert_close(space.bounds, torch.tensor([[0.0] * 3, [1.0] * 3], dtype=torch.float64))
    p = space.to_natural(torch.tensor([0.0, 1.0, 0.5], dtype=torch.float64))
    assert p["lr"] == pytest.approx(1e-4) and p["weight_decay"] == pytest.approx(1e-1)
    assert p["dropout"] == pytest.approx(0.25)
    (q,) = space.to_natural(torch.tensor([[0.5, 0.5, 0.0]], dtype=torch.float64))
    assert q["lr"] == pytest.approx(math.sqrt(1e-4 * 0.3))  # log-uniform: geometric midpoint
    theta = torch.tensor([0.3, 0.9, 0.7], dtype=torch.float64)
    torch.testing.assert_close(space.from_natural(space.to_natural(theta)), theta)
    with pytest.raises(ValueError):
        Hyperparameter("lr", 0.0, 1.0, log_scale=True)
    with pytest.raises(ValueError):
        SearchSpace([Hyperparameter("a", 0, 1), Hyperparameter("a", 0, 2)])


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


def test_dp_training_records_every_run_and_matches_opacus_rdp(data):
    training = TrainingConfig(epochs=1, batch_size=100, hidden_sizes=(16,), seed=0)
    dp = DPSGDConfig(noise_multiplier=1.3, max_grad_norm=1.0)
    ledger = PrivacyLedger()
    objective = TorchModelTuningObjective(data, training=training, dp_sgd=dp, ledger=ledger, noise_seed=1)
    losses = objective(torch.cat([THETA, THETA[:1]]))
    assert losses.shape == (3, 539) and torch.isfinite(losses).all()
    # fresh DP-SGD noise for every run: the same θ gives a different model
    assert not torch.allclose(losses[0], losses[2])
    diag = objective.evaluate_non_private(THETA[0], run_id="final")
    assert set(diag) == {"validation_loss", "validation_accuracy", "test_loss", "test_accuracy"}

    runs = ledger.training_runs
    assert list(runs) == ["eval-0000", "eval-0001", "eval-0002", "final"]
    batches = math.ceil(898 / 100)  # Opacus's Poisson loader: rate 1/len(loader), len(loader) steps/epoch
    expected = (1.3, 1.0 / batches, batches)
    for run in runs.values():
        assert run[0] == expected[0] and run[2] == expected[2]
        assert run[1] == pytest.approx(expected[1])
    accountant = RDPAccountant()
    accountant.history = [expected] * 4
    for delta in (1e-5, 1e-3):
        assert ledger.training_epsilon(delta) == pytest.approx(accountant.get_epsilon(delta), rel=1e-10)

    # reproducible given the seeds and the order of the runs
    again = TorchModelTuningObjective(data, training=training, dp_sgd=dp, noise_seed=1)
    assert torch.equal(again(torch.cat([THETA, THETA[:1]])), losses)


def test_training_budget_is_checked_before_training(data):
    training = TrainingConfig(epochs=1, batch_size=100, hidden_sizes=(8,), seed=0)
    dp = DPSGDConfig(noise_multiplier=1.0, max_grad_norm=1.0)
    accountant = RDPAccountant()
    accountant.history = [(1.0, 1 / 9, 9)]
    one_run = accountant.get_epsilon(1e-5)
    ledger = PrivacyLedger(training_epsilon_budget=one_run * 1.01, training_delta=1e-5)
    objective = TorchModelTuningObjective(data, training=training, dp_sgd=dp, ledger=ledger)
    objective(THETA[:1])
    with pytest.raises(PrivacyBudgetExceeded):
        objective(THETA[1:])
    assert objective.num_trainings == 1 and len(ledger.training_runs) == 1


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


def _keys(obj):
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield k
            yield from _keys(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _keys(v)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("dp_train", [False, True], ids=["plain", "dp_train"])
def test_script_quick_run_separates_private_and_non_private(script, tmp_path, dp_train):
    argv = ["--quick", "--no-progress", "--out", str(tmp_path)] + (["--dp-train"] if dp_train else [])
    summary = script.main(argv)
    on_disk = json.loads((tmp_path / script.RESULT_FILE).read_text())
    assert on_disk["private_release"] == json.loads(json.dumps(summary["private_release"]))
    assert (tmp_path / script.PLOT_FILE).stat().st_size > 0

    release = on_disk["private_release"]
    assert set(release) == {
        "hyperparameters", "theta_unit_cube", "iterates", "iterates_unit_cube", "evaluation_points",
        "batch_sizes", "posterior_traces", "released_gradients", "guarantees",
    }
    keys = set(_keys(release))
    assert not any("loss" in k or "accuracy" in k for k in keys), keys
    # natural units are the unit-cube coordinates mapped through the public space
    space = default_mlp_space()
    theta = torch.tensor(release["theta_unit_cube"], dtype=torch.float64)
    for name, value in space.to_natural(theta).items():
        assert release["hyperparameters"][name] == pytest.approx(value)
    T = 2
    assert len(release["iterates"]) == T + 1 and len(release["batch_sizes"]) == T
    assert len(release["evaluation_points"]) == sum(release["batch_sizes"])

    val = release["guarantees"]["validation_data"]
    assert val["mu"] == pytest.approx(1.0) and val["epsilon"] == pytest.approx(4.3772, abs=1e-3)
    train = release["guarantees"]["training_data"]
    if dp_train:
        n_runs = sum(release["batch_sizes"]) + 2  # evaluations + final model + baseline
        assert train["protected"] and train["num_runs"] == n_runs
        accountant = RDPAccountant()
        per = train["per_run"]
        accountant.history = [(per["noise_multiplier"], per["sample_rate"], per["steps"])] * n_runs
        assert train["epsilon"] == pytest.approx(accountant.get_epsilon(1e-5), rel=1e-10)
        assert "pilot on public synthetic data" in on_disk["public_settings"]["noise_variance_source"]
    else:
        assert train["protected"] is False and train["epsilon"] == "inf"

    diag = on_disk["NON_PRIVATE_diagnostics"]
    assert "NON-PRIVATE" in diag["WARNING"]
    for key in ("final_theta", "initial_theta0"):
        assert 0.0 <= diag[key]["test_accuracy"] <= 1.0 and diag[key]["validation_loss"] > 0
