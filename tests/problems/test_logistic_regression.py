"""Tests for problems/logistic_regression.py: the capped logistic losses and the AMP /
DP-SGD tuning objectives (shapes, finiteness at the corners of the box, one ledger entry per
evaluation with the run's exact curve, per-user losses recomputed from the released θ, and
validation data that never reach training); the module still exports the names that moved
to logistic_data.py and run_budgets.py."""

import math
import warnings

import numpy as np
import pytest
import torch

import botorch_dp.problems.logistic_regression as lr
from botorch_dp.privacy.analysis.objective_perturbation import amp_rdp
from botorch_dp.privacy.analysis.rdp import DEFAULT_RDP_ORDERS
from botorch_dp.privacy.ledger import PrivacyBudgetExceeded, PrivacyLedger
from botorch_dp.privacy.seeding import PrivacyWarning
from botorch_dp.problems import AMPTuningObjective, DPSGDTuningObjective, load_logistic_data
from botorch_dp.training.dp_sgd import DPSGDConfig, TrainingConfig

ORDERS = np.asarray(DEFAULT_RDP_ORDERS)
AMP = dict(clip=math.sqrt(2.0), beta=0.5, tau=5e-4, sigma_out=0.15)


@pytest.fixture(scope="module")
def cancer():
    return load_logistic_data("breast_cancer", seed=0)


@pytest.fixture(scope="module")
def small_synthetic():
    return load_logistic_data("synthetic", seed=3, num_examples=600, num_features=12)


@pytest.fixture(scope="module")
def budget():
    return lr.plan_amp_runs(1.0, 1e-5, num_runs=5)


def _objective(data, budget, **kwargs):
    kwargs.setdefault("noise_seed", 11)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)
        return AMPTuningObjective(data, budget, **kwargs)


# ---------------------------------------------------------------------------- losses
def test_logistic_losses_brute_force_and_total():
    u = torch.tensor([-800.0, -3.0, 0.0, 2.5, 800.0, math.inf, -math.inf, math.nan], dtype=torch.float64)
    y = torch.tensor([1.0, 0.0, 1.0, 1.0, 0.0, 1.0, 1.0, 0.0], dtype=torch.float64)
    out = lr.logistic_losses(u, y, loss_cap=3.0)
    brute = [
        min(math.log1p(math.exp(-ui)) if yi else math.log1p(math.exp(ui)), 3.0) if abs(ui) < 50 else None
        for ui, yi in zip(u.tolist(), y.tolist(), strict=True)
    ]
    for got, want in zip(out.tolist(), brute, strict=True):
        if want is not None:
            assert got == pytest.approx(want, rel=1e-12)
    assert out.tolist()[0] == 3.0 and out.tolist()[4] == 3.0  # huge wrong margins: capped
    assert out.tolist()[5] == 0.0 and out.tolist()[6] == 3.0 and out.tolist()[7] == 3.0  # ±inf, NaN
    assert torch.isfinite(out).all()


def test_the_module_still_exports_the_data_and_the_budgets():
    import botorch_dp.problems.logistic_data as ld
    import botorch_dp.problems.run_budgets as rb

    for module in (ld, rb):
        for name in module.__all__:
            assert getattr(lr, name) is getattr(module, name)
    own = {"AMPTuningObjective", "DPSGDTuningObjective", "logistic_losses"}
    assert set(lr.__all__) == set(ld.__all__) | set(rb.__all__) | own


# ---------------------------------------------------------------------------- AMP objective
def test_objective_shapes_and_finite_losses_at_the_corners(small_synthetic, budget):
    obj = _objective(small_synthetic, budget, clip_range=(0.2, 2.0), loss_cap=3.0)
    assert obj.dim == 2 and obj.bounds.tolist() == [[0.0, 0.0], [1.0, 1.0]]
    corners = torch.tensor([[0.0, 0.0], [0.0, 1.0], [1.0, 0.0], [1.0, 1.0]], dtype=torch.float64)
    losses = obj(corners)
    assert losses.shape == (4, obj.num_users) and losses.dtype == torch.float64
    assert torch.isfinite(losses).all() and (losses >= 0).all() and (losses <= 3.0).all()
    assert obj(torch.tensor([0.5, 0.5])).shape == (1, obj.num_users)
    assert obj(torch.empty(0, 2)).shape == (0, obj.num_users)
    lams = [r.config.lam for r in obj.results]
    lo, hi = obj.space.hyperparameters[0].lower, obj.space.hyperparameters[0].upper
    assert lams[0] == pytest.approx(lo) and lams[2] == pytest.approx(hi)
    assert [r.config.clip for r in obj.results[:2]] == pytest.approx([0.2, 2.0])


def test_every_evaluation_is_one_ledger_entry_with_its_exact_curve(small_synthetic, budget):
    ledger = PrivacyLedger(training_delta=1e-5)
    obj = _objective(small_synthetic, budget, ledger=ledger)
    X = torch.tensor([[0.1], [0.6], [0.9]], dtype=torch.float64)
    obj(X)
    final = obj.train(torch.tensor([0.3]), label="final", budget_weight=2.0)
    assert ledger.training.run_ids() == ["amp-0000", "amp-0001", "amp-0002", "amp-0003-final"] == obj.run_ids
    ref = budget.rdp_values()
    for run_id, result, weight in zip(obj.run_ids, obj.results, (1, 1, 1, 2), strict=True):
        entry = ledger.training.mechanisms()[run_id]
        expected = amp_rdp(ORDERS, **result.config.privacy_parameters)
        assert np.allclose(entry.rdp, expected, rtol=1e-12, atol=0) and np.all(expected <= weight * ref)
        assert entry.description == result.description and f"lam={result.config.lam:.10g}" in entry.description
    assert obj.results[-1] is final
    assert ledger.training.epsilon(1e-5) <= budget.epsilon(1e-5, 5) + 1e-12
    # a second objective on the same ledger continues the numbering
    _objective(small_synthetic, budget, ledger=ledger)(torch.tensor([[0.5]]))
    assert ledger.training.run_ids()[-1] == "amp-0004"


def test_losses_are_the_validation_users_losses_of_the_released_model(cancer, budget):
    obj = _objective(cancer, budget, loss_cap=2.0)
    losses = obj(torch.tensor([[0.05], [0.7]], dtype=torch.float64))
    for row, result in zip(losses, obj.results, strict=True):
        theta = result.theta.numpy()
        X = np.hstack([cancer.X_val.numpy(), np.ones((obj.num_users, 1))])  # unit rows + bias
        u = X @ theta
        y = cancer.y_val.numpy()
        brute = np.minimum(np.where(y == 1, np.log1p(np.exp(-u)), np.log1p(np.exp(u))), 2.0)
        assert np.allclose(row.numpy(), brute, rtol=1e-12, atol=1e-14)
    assert not torch.equal(losses[0], losses[1])


def test_validation_data_never_reach_training(cancer, budget, monkeypatch):
    calls = []
    real = lr.fit_amp

    def spy(X, y, config, **kwargs):
        calls.append((X, y))
        return real(X, y, config, **kwargs)

    monkeypatch.setattr(lr, "fit_amp", spy)
    theta = torch.tensor([[0.4]], dtype=torch.float64)
    base = _objective(cancer, budget)
    base(theta)
    assert len(calls) == 1 and calls[0][0] is cancer.X_train and calls[0][1] is cancer.y_train
    # other validation users (and other test data), same training data and noise seed: same model
    other = lr.LogisticData(
        cancer.X_train,
        cancer.y_train,
        cancer.X_test[:50],
        cancer.y_test[:50],
        cancer.X_val,
        cancer.y_val,
        name="swapped",
    )
    swapped = _objective(other, budget)
    swapped(theta)
    assert torch.equal(base.results[0].theta, swapped.results[0].theta)
    assert swapped(theta).shape == (1, 50)


def test_noise_sources_and_the_training_filter(cancer, budget, monkeypatch):
    with pytest.warns(PrivacyWarning):
        AMPTuningObjective(cancer, budget, noise_seed=1)
    a, b = AMPTuningObjective(cancer, budget), AMPTuningObjective(cancer, budget)  # OS entropy
    theta = torch.tensor([[0.5]])
    a(theta), b(theta)
    assert not torch.equal(a.results[0].theta, b.results[0].theta)
    # a budget smaller than one run: refused before the training data are touched
    tight = PrivacyLedger(training_epsilon_budget=budget.epsilon(1e-5) / 2, training_delta=1e-5)
    monkeypatch.setattr(lr, "fit_amp", lambda *a, **k: pytest.fail("trained despite the budget"))
    with pytest.raises(PrivacyBudgetExceeded):
        _objective(cancer, budget, ledger=tight)(theta)
    assert tight.training.run_ids() == []


def test_objective_refuses_bad_settings(cancer, budget):
    with pytest.raises(ValueError, match="lam_range"):
        AMPTuningObjective(cancer, budget, lam_range=(0.9 * budget.min_lam(), 10 * budget.lam))
    with pytest.raises(ValueError, match="budget"):
        AMPTuningObjective(cancer, (budget.sigma, budget.lam))
    with pytest.raises(ValueError, match="run_prefix"):
        AMPTuningObjective(cancer, budget, run_prefix="a b")
    with pytest.raises(ValueError, match="theta"):
        _objective(cancer, budget).config_at(torch.tensor([math.nan]))


def test_dp_sgd_objective_records_runs_and_keeps_models(cancer):
    ledger = PrivacyLedger()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)
        obj = DPSGDTuningObjective(
            cancer,
            training=TrainingConfig(epochs=2, batch_size=64),
            dp_sgd=DPSGDConfig(2.0, math.sqrt(2.0)),
            ledger=ledger,
            noise_seed=5,
        )
    losses = obj(torch.tensor([[0.2], [0.8]], dtype=torch.float64))
    assert losses.shape == (2, 171) and torch.isfinite(losses).all()
    assert len(obj.models) == 2 and list(ledger.training.runs()) == ["dpsgd-0000", "dpsgd-0001"]
    assert ledger.training.runs()["dpsgd-0000"] == (2.0, 0.2, 10)  # ⌈284/64⌉ = 5 batches: q = 1/5
    with torch.no_grad():  # the losses are the models' cross-entropies (the logistic loss)
        logits = obj.models[1](cancer.X_val.float()).double()
    ce = torch.nn.functional.cross_entropy(logits, cancer.y_val.long(), reduction="none").clamp(max=3.0)
    assert torch.allclose(losses[1], ce, rtol=1e-4, atol=1e-7)  # float32 logits
    assert 0.0 <= obj.accuracy_non_private(obj.models[1]) <= 1.0
