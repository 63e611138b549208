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

    runs = ledger.training.runs()
    assert list(runs) == ["eval-0000", "eval-0001", "eval-0002", "eval-0003-final"]
    batches = math.ceil(898 / 100)  # Opacus's Poisson loader: rate 1/len(loader), len(loader) steps/epoch
    expected = (1.3, 1.0 / batches, batches)
    for run in runs.values():
        assert run[0] == expected[0] and run[2] == expected[2]
        assert run[1] == pytest.approx(expected[1])
    accountant = RDPAccountant()
    accountant.history = [expected] * 4
    for delta in (1e-5, 1e-3):
        assert ledger.training.epsilon(delta) == pytest.approx(accountant.get_epsilon(delta), rel=1e-10)

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
    assert objective.num_trainings == 1 and len(ledger.training.runs()) == 1


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


# ---------------------------------------------------------------- target training ε (issue 16 item 1)
def _small_data():
    from botorch_dp.tuning import ClassificationData

    g = torch.Generator().manual_seed(0)
    X = torch.randn(75, 3, generator=g, dtype=torch.float64)
    y = (X[:, 0] > 0).long()
    return ClassificationData(X[:60].numpy(), y[:60].numpy(), X[60:], y[60:])


def test_target_training_epsilon_is_met_by_all_planned_runs_and_enforced():
    from botorch_dp.privacy.ledger import PrivacyBudgetExceeded

    training = TrainingConfig(epochs=1, batch_size=2, hidden_sizes=(4,), seed=0)  # q = 1/30, 30 steps
    dp = DPSGDConfig(target_epsilon=3.0, target_delta=1e-5, planned_runs=3, max_grad_norm=0.5)
    ledger = PrivacyLedger()
    objective = TorchModelTuningObjective(_small_data(), training=training, dp_sgd=dp, ledger=ledger)
    sigma, q, steps = objective.planned_run()
    assert (q, steps) == (pytest.approx(1 / 30), 30) and objective.run_dp_sgd.max_grad_norm == 0.5
    # the three planned runs, accounted as three separate Opacus entries, spend the target
    # to within get_noise_multiplier's tolerance, and 2% less noise would overspend
    accountant = RDPAccountant()
    accountant.history = [(sigma, q, steps)] * 3
    composed = accountant.get_epsilon(1e-5)
    assert 3.0 - dp.epsilon_tolerance <= composed <= 3.0
    accountant.history = [(0.98 * sigma, q, steps)] * 3
    assert accountant.get_epsilon(1e-5) > 3.0

    objective(THETA)
    objective(THETA[:1])
    report = objective.training_report()
    assert report["num_runs"] == 3 and report["planned_runs"] == 3 and report["noise_multiplier"] == sigma
    assert report["epsilon"] == pytest.approx(composed, rel=1e-10) and report["delta"] == 1e-5
    # a fourth run would overspend: refused before it touches the data, nothing recorded
    with pytest.raises(PrivacyBudgetExceeded, match="target"):
        objective(THETA[:1])
    assert objective.num_trainings == 3 and len(ledger.training.runs()) == 3
    # an objective rebuilt on the same ledger (a resumed run) calibrates the same σ and stops too
    again = TorchModelTuningObjective(_small_data(), training=training, dp_sgd=dp, ledger=ledger)
    assert again.planned_run() == (sigma, q, steps)
    with pytest.raises(PrivacyBudgetExceeded):
        again.train(THETA[0], label="final")
    # more planned runs: more noise per run
    more = TorchModelTuningObjective(
        _small_data(), training=training, dp_sgd=DPSGDConfig(target_epsilon=3.0, target_delta=1e-5, planned_runs=12)
    )
    assert more.planned_run()[0] > sigma


def test_a_target_dp_sgd_cannot_reach_is_refused_with_the_numbers_before_anything_trains():
    import re

    from opacus.accountants.utils import MAX_SIGMA

    from botorch_dp.training import calibrate_noise_multiplier
    from botorch_dp.training.dp_sgd import composed_training_epsilon

    training = TrainingConfig(epochs=1, batch_size=2, hidden_sizes=(4,), seed=0)  # q = 1/30, 30 steps
    floor = composed_training_epsilon([(MAX_SIGMA, 1 / 30, 30 * 40)], 1e-5)  # what the largest σ reaches
    assert 0.05 < floor < 0.3  # RDP's conversion alone costs about log(1/δ)/62 at the largest order
    ledger = PrivacyLedger()
    message = (
        r"target_epsilon=0\.05 is below what DP-SGD can reach for planned_runs=40 run\(s\) of steps_per_run=30 "
        r"steps at sample_rate=0\.03333 \(target_delta=1e-05, rdp accountant\).*"
        + re.escape(f"gives epsilon = {floor:.4g}, the smallest feasible target")
    )
    with pytest.raises(ValueError, match=message):
        TorchModelTuningObjective(
            _small_data(),
            training=training,
            ledger=ledger,
            dp_sgd=DPSGDConfig(target_epsilon=0.05, target_delta=1e-5, planned_runs=40),
        )
    assert ledger.training.runs() == {} and ledger.training.epsilon(1e-5) == 0.0  # refused when built: nothing trained
    # just above the floor is feasible, so the floor is the one the message should name
    sigma = calibrate_noise_multiplier(
        target_epsilon=1.1 * floor, target_delta=1e-5, sample_rate=1 / 30, steps_per_run=30, planned_runs=40
    )
    assert 0 < sigma < MAX_SIGMA


@pytest.mark.parametrize(
    "kw,match",
    [
        (dict(noise_multiplier=1.0, target_epsilon=1.0, target_delta=1e-5, planned_runs=3), "not both"),
        (dict(target_epsilon=1.0, target_delta=1e-5), "planned_runs"),
        (dict(target_epsilon=1.0, planned_runs=3), "target_delta"),
        (dict(target_epsilon=-1.0, target_delta=1e-5, planned_runs=3), "target_epsilon"),
        (dict(target_epsilon=1.0, target_delta=1e-5, planned_runs=0), "planned_runs"),
        (dict(noise_multiplier=-1.0), "noise_multiplier"),
        (dict(max_grad_norm=0.0), "max_grad_norm"),
    ],
)
def test_dp_sgd_config_refuses_bad_settings(kw, match):
    with pytest.raises(ValueError, match=match):
        DPSGDConfig(**kw)
    assert DPSGDConfig().noise_multiplier == 1.0 and not DPSGDConfig().has_target
