"""Tests for botorch_dp/training/dp_sgd.py: every DP-SGD run is recorded in the ledger and
accounted like Opacus, the training budget is checked before training, and a run spends
what ``planned_dp_run`` said it would."""

import math
import warnings

import pytest
import torch
from opacus.accountants import RDPAccountant

from botorch_dp.privacy.ledger import PrivacyBudgetExceeded, PrivacyLedger
from botorch_dp.privacy.seeding import PrivacyWarning
from botorch_dp.training import DPSGDConfig, TrainingConfig, make_mlp, planned_dp_run, train_model
from botorch_dp.tuning import TorchModelTuningObjective

THETA = torch.tensor([[0.5, 0.5, 0.5], [0.8, 0.2, 0.1]], dtype=torch.float64)


def test_dp_training_records_every_run_and_matches_opacus_rdp(data):
    training = TrainingConfig(epochs=1, batch_size=100, hidden_sizes=(16,), seed=0)
    dp = DPSGDConfig(noise_multiplier=1.3, max_grad_norm=1.0)
    ledger = PrivacyLedger()
    with pytest.warns(PrivacyWarning, match="noise seed"):
        objective = TorchModelTuningObjective(data, training=training, dp_sgd=dp, ledger=ledger, noise_seed=1)
    losses = objective(torch.cat([THETA, THETA[:1]]))
    assert losses.shape == (3, 539) and torch.isfinite(losses).all()
    # fresh DP-SGD noise for every run: the same θ gives a different model
    assert not torch.allclose(losses[0], losses[2])
    diag = objective.evaluate_non_private(THETA[0], label="final")
    assert set(diag) == {"validation_loss", "validation_accuracy", "test_loss", "test_accuracy"}

    runs = ledger.training_runs
    assert list(runs) == ["eval-0000", "eval-0001", "eval-0002", "eval-0003-final"]
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
    with pytest.warns(PrivacyWarning):
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


def test_train_model_spends_what_was_planned_and_restores_threads():
    gen = torch.Generator().manual_seed(0)
    X, y = torch.randn(50, 4, generator=gen), torch.randint(0, 3, (50,), generator=gen)
    training = TrainingConfig(epochs=2, batch_size=16, seed=0, num_threads=1)
    dp = DPSGDConfig(noise_multiplier=1.1, max_grad_norm=0.5)
    opt = dict(optimizer_kwargs={"lr": 0.1, "weight_decay": 1e-4})

    def model_fn():
        return make_mlp(4, 3, (8,))

    threads = torch.get_num_threads()
    with pytest.warns(PrivacyWarning, match="reproducible"):
        model, history = train_model(model_fn, X, y, training, **opt, dp_sgd=dp, noise_seed=3)
    assert torch.get_num_threads() == threads
    assert not model.training and not hasattr(model, "_module")  # eval mode, unwrapped from Opacus
    planned = planned_dp_run(50, training, dp)
    assert planned == (1.1, 1 / 4, 2 * 4)  # ⌈50 / 16⌉ = 4 Poisson batches per epoch
    assert history[0] == planned[0] and history[2] == planned[2]
    assert history[1] == pytest.approx(planned[1])
    with pytest.warns(PrivacyWarning):
        again, _ = train_model(model_fn, X, y, training, **opt, dp_sgd=dp, noise_seed=3)
        other, _ = train_model(model_fn, X, y, training, **opt, dp_sgd=dp, noise_seed=4)
    assert torch.equal(again(X), model(X)) and not torch.equal(other(X), model(X))
    # default: a fresh secret seed per run (no warning), so two runs differ
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyWarning)
        first, h1 = train_model(model_fn, X, y, training, **opt, dp_sgd=dp)
        second, h2 = train_model(model_fn, X, y, training, **opt, dp_sgd=dp)
        plain, none = train_model(model_fn, X, y, training, **opt, noise_seed=3)  # no DP: no warning
    assert h1 == h2 == history
    assert not torch.equal(first(X), second(X)) and not torch.equal(first(X), model(X))
    assert none is None and not plain.training
