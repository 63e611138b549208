"""Tests for problems/logistic_regression.py: the data, the per-run AMP budgets (domination
of the reference curve, the plans for composed runs and for P&S selection), and the AMP /
DP-SGD tuning objectives (shapes, finiteness at the corners of the box, one ledger entry per
evaluation with the run's exact curve, per-user losses recomputed from the released θ, and
validation data that never reach training)."""

import math
import warnings

import numpy as np
import pytest
import torch

import botorch_dp.problems.logistic_regression as lr
from botorch_dp.privacy.analysis.objective_perturbation import amp_rdp
from botorch_dp.privacy.analysis.private_selection import private_selection_epsilon_generic
from botorch_dp.privacy.analysis.rdp import DEFAULT_RDP_ORDERS, rdp_curve_epsilon
from botorch_dp.privacy.accountants import dp_sgd_rdp
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


# ---------------------------------------------------------------------------- data
def test_breast_cancer_ranges_are_the_published_table_and_cover_the_data():
    from sklearn.datasets import load_breast_cancer

    lower, upper = lr.breast_cancer_ranges()
    X = load_breast_cancer().data
    assert lower.shape == upper.shape == (30,) and np.all(lower < upper)
    assert (lower[0], upper[0], lower[3], upper[3]) == (6.981, 28.11, 143.5, 2501.0)  # radius, area (mean)
    # the table is rounded to 3 decimals (1% of the narrowest ranges): the examples lie inside it up to that
    slack = 0.015 * (upper - lower)
    assert np.all(X >= lower - slack) and np.all(X <= upper + slack)
    assert np.all(X.min(0) <= lower + slack) and np.all(X.max(0) >= upper - slack)  # and the ranges are attained


def test_load_logistic_data_splits_with_unit_rows(cancer):
    sizes = cancer.sizes()
    assert sum(sizes.values()) == 569 and sizes == {"train": 284, "validation": 171, "test": 114}
    for X, y in ((cancer.X_train, cancer.y_train), (cancer.X_val, cancer.y_val), (cancer.X_test, cancer.y_test)):
        assert X.dtype == torch.float64 and X.shape[1] == 30
        assert torch.allclose(torch.linalg.vector_norm(X, dim=1), torch.ones(X.shape[0], dtype=torch.float64))
        assert set(y.unique().tolist()) == {0.0, 1.0}
    rows = lambda X: {tuple(r) for r in X.tolist()}
    assert not rows(cancer.X_train) & rows(cancer.X_val) and not rows(cancer.X_val) & rows(cancer.X_test)
    again = load_logistic_data("breast_cancer", seed=0)
    assert torch.equal(again.X_val, cancer.X_val)
    assert not torch.equal(load_logistic_data("breast_cancer", seed=1).X_val, cancer.X_val)
    with pytest.raises(ValueError, match="name"):
        load_logistic_data("adult")


def test_synthetic_labels_follow_the_logistic_model():
    X, y = lr.synthetic_logistic(4000, 50, seed=0, signal=5.0)
    assert X.shape == (4000, 50) and torch.allclose(X.norm(dim=1), torch.ones(4000, dtype=torch.float64))
    # the true direction classifies at about the Bayes rate E[sigmoid(|z|)], z ~ N(0, 25): 0.88
    from sklearn.linear_model import LogisticRegression

    model = LogisticRegression(C=100.0, max_iter=2000).fit(X[:3000].numpy(), y[:3000].numpy())
    assert 0.83 < model.score(X[3000:].numpy(), y[3000:].numpy()) < 0.93
    X2, y2 = lr.synthetic_logistic(4000, 50, seed=0, signal=5.0)
    assert torch.equal(X, X2) and torch.equal(y, y2)


def test_logistic_losses_brute_force_and_total():
    u = torch.tensor([-800.0, -3.0, 0.0, 2.5, 800.0, math.inf, -math.inf, math.nan], dtype=torch.float64)
    y = torch.tensor([1.0, 0.0, 1.0, 1.0, 0.0, 1.0, 1.0, 0.0], dtype=torch.float64)
    out = lr.logistic_losses(u, y, loss_cap=3.0)
    brute = [min(math.log1p(math.exp(-ui)) if yi else math.log1p(math.exp(ui)), 3.0) if abs(ui) < 50 else None
             for ui, yi in zip(u.tolist(), y.tolist())]
    for got, want in zip(out.tolist(), brute):
        if want is not None:
            assert got == pytest.approx(want, rel=1e-12)
    assert out.tolist()[0] == 3.0 and out.tolist()[4] == 3.0  # huge wrong margins: capped
    assert out.tolist()[5] == 0.0 and out.tolist()[6] == 3.0 and out.tolist()[7] == 3.0  # ±inf, NaN
    assert torch.isfinite(out).all()


# ---------------------------------------------------------------------------- budgets
def test_sigma_for_curve_is_the_smallest_dominated_sigma(budget):
    ref = budget.rdp_values()
    for lam in (budget.lam, 2.0 * budget.lam, 40.0 * budget.lam, 1.2 * budget.min_lam()):
        sigma = budget.sigma_at(lam)
        curve = amp_rdp(ORDERS, lam=lam, sigma=sigma, **AMP)
        assert np.all(curve <= ref)  # below the reference at every grid order
        assert np.any(amp_rdp(ORDERS, lam=lam, sigma=sigma * (1 - 1e-6), **AMP) > ref)  # and the smallest
    assert budget.sigma_at(budget.lam) == pytest.approx(budget.sigma, rel=1e-9)
    heavier = budget.sigma_at(2.0 * budget.lam, weight=3.0)
    assert np.all(amp_rdp(ORDERS, lam=2.0 * budget.lam, sigma=heavier, **AMP) <= 3.0 * ref)
    assert heavier < budget.sigma_at(2.0 * budget.lam)


def test_min_lam_is_where_the_sigma_to_infinity_limit_meets_the_reference(budget):
    floor = budget.min_lam()
    assert budget.beta < floor < budget.lam
    assert budget.sigma_at(floor * (1 - 1e-6)) is None
    assert budget.sigma_at(floor * (1 + 1e-3)) is not None
    with pytest.raises(ValueError, match="lam"):
        budget.sigma_at(0.4)  # λ ≤ β


def _first_accepted_by_scan(epsilon, delta, k, factor=1.3):
    """Brute force for plan_amp_runs: σ by scanning a log grid (coarse 5 %, then 0.05 % steps),
    λ by a linear scan of the 1.05 grid from 2βk/ε."""
    total = lambda sigma, lam: rdp_curve_epsilon(k * amp_rdp(ORDERS, lam=lam, sigma=sigma, **AMP), ORDERS, delta)[0]

    def sigma_at(lam):
        coarse = next((s for s in 0.5 * 1.05 ** np.arange(400) if total(s, lam) <= epsilon), None)
        if coarse is None:
            return None
        return next(s for s in coarse / 1.05 * 1.0005 ** np.arange(200) if total(s, lam) <= epsilon)

    sigma_inf = sigma_at(0.5e12)
    step = 0
    while True:
        lam = 2 * 0.5 * k / epsilon * 1.05**step
        sigma = sigma_at(lam)
        if sigma is not None and sigma <= factor * sigma_inf:
            return lam, sigma
        step += 1


@pytest.mark.parametrize("epsilon,k", [(1.0, 5), (8.0, 9.0)])
def test_plan_amp_runs_spends_epsilon_at_the_first_accepted_lambda(epsilon, k):
    plan = lr.plan_amp_runs(epsilon, 1e-5, num_runs=k)
    assert plan.epsilon(1e-5, k) <= epsilon and plan.epsilon(1e-5, k) == pytest.approx(epsilon, rel=1e-9)
    lam, sigma = _first_accepted_by_scan(epsilon, 1e-5, k)
    assert plan.lam == pytest.approx(lam, rel=1e-12)
    assert plan.sigma == pytest.approx(sigma, rel=1e-3)  # the scan's σ grid has steps of 0.05 %
    with pytest.raises(ValueError, match="num_runs"):
        lr.plan_amp_runs(1.0, 1e-5, num_runs=0)


def test_plan_amp_selection_spends_epsilon_under_the_generic_ps_bound():
    plan = lr.plan_amp_selection(1.0, 1e-5, mean_trials=15.4066)
    eps = private_selection_epsilon_generic(plan.rdp, mean_trials=15.4066, target_delta=1e-5,
                                            distribution="poisson", orders=DEFAULT_RDP_ORDERS)
    assert eps <= 1.0 and eps == pytest.approx(1.0, rel=1e-9)
    # one trial alone is much cheaper than the selection
    assert plan.epsilon(1e-5) < 0.5


def test_dp_sgd_noise_for_selection_meets_epsilon():
    q, steps = 0.05, 100
    sigma = lr.dp_sgd_noise_for_selection(1.0, 1e-5, sample_rate=q, steps=steps, mean_trials=15.4066)
    base = lambda a: float(max(dp_sgd_rdp(noise_multiplier=sigma, sample_rate=q, steps=steps, orders=[a])[0], 0.0))
    eps = private_selection_epsilon_generic(base, mean_trials=15.4066, target_delta=1e-5,
                                            distribution="poisson", orders=DEFAULT_RDP_ORDERS)
    assert eps <= 1.0 and eps == pytest.approx(1.0, rel=1e-3)
    curve = lr.dp_sgd_curve(noise_multiplier=0.99 * sigma, sample_rate=q, steps=steps)
    values = lr.selection_curve(curve, mean_trials=15.4066)
    assert rdp_curve_epsilon(values, ORDERS, 1e-5)[0] > 1.0


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
    assert ledger.training_run_ids() == ["amp-0000", "amp-0001", "amp-0002", "amp-0003-final"] == obj.run_ids
    ref = budget.rdp_values()
    for run_id, result, weight in zip(obj.run_ids, obj.results, (1, 1, 1, 2)):
        entry = ledger.training_mechanisms[run_id]
        expected = amp_rdp(ORDERS, **result.config.privacy_parameters)
        assert np.allclose(entry.rdp, expected, rtol=1e-12, atol=0) and np.all(expected <= weight * ref)
        assert entry.description == result.description and f"lam={result.config.lam:.10g}" in entry.description
    assert obj.results[-1] is final
    assert ledger.training_epsilon(1e-5) <= budget.epsilon(1e-5, 5) + 1e-12
    # a second objective on the same ledger continues the numbering
    _objective(small_synthetic, budget, ledger=ledger)(torch.tensor([[0.5]]))
    assert ledger.training_run_ids()[-1] == "amp-0004"


def test_losses_are_the_validation_users_losses_of_the_released_model(cancer, budget):
    obj = _objective(cancer, budget, loss_cap=2.0)
    losses = obj(torch.tensor([[0.05], [0.7]], dtype=torch.float64))
    for row, result in zip(losses, obj.results):
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
    other = lr.LogisticData(cancer.X_train, cancer.y_train, cancer.X_test[:50], cancer.y_test[:50],
                            cancer.X_val, cancer.y_val, name="swapped")
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
    assert tight.training_run_ids() == []


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
        obj = DPSGDTuningObjective(cancer, training=TrainingConfig(epochs=2, batch_size=64),
                                   dp_sgd=DPSGDConfig(2.0, math.sqrt(2.0)), ledger=ledger, noise_seed=5)
    losses = obj(torch.tensor([[0.2], [0.8]], dtype=torch.float64))
    assert losses.shape == (2, 171) and torch.isfinite(losses).all()
    assert len(obj.models) == 2 and list(ledger.training_runs) == ["dpsgd-0000", "dpsgd-0001"]
    assert ledger.training_runs["dpsgd-0000"] == (2.0, 0.2, 10)  # ⌈284/64⌉ = 5 batches: q = 1/5
    with torch.no_grad():  # the losses are the models' cross-entropies (the logistic loss)
        logits = obj.models[1](cancer.X_val.float()).double()
    ce = torch.nn.functional.cross_entropy(logits, cancer.y_val.long(), reduction="none").clamp(max=3.0)
    assert torch.allclose(losses[1], ce, rtol=1e-4, atol=1e-7)  # float32 logits
    assert 0.0 <= obj.accuracy_non_private(obj.models[1]) <= 1.0
