r"""The noise multiplier as a searched trial hyperparameter of ``select_training_runs`` (issue 41, item 2):
the selection is charged once, before the first trial, at the space's least ``σ``, and that charge dominates
the selection over a trial at every ``σ`` of the range and every run shape of the space (brute force over a
grid, with Opacus's ``compute_rdp`` and Papernot & Steinke's Thm. 2 written out in
tests/methods/test_training_runs.py); each trial trains at its own ``σ`` (the per-step noise a spy optimizer
sees has standard deviation ``σ·C``); a range below the least noise the budget allows, or a ``σ ≤ 0``, is
refused before anything trains."""

from __future__ import annotations

import functools
import math
import warnings

import numpy as np
import pytest
import torch
from torch import nn

from botorch_dp.methods.training_runs import select_training_runs
from botorch_dp.privacy.ledger import ApproximateDP, PrivacyLedger
from botorch_dp.privacy.seeding import PrivacyWarning
from botorch_dp.training import DPSGDConfig, TrainingConfig
from botorch_dp.training.selection_accounting import (
    calibrate_selection_noise,
    selection_accounting_at,
    selection_profile_epsilon,
)
from botorch_dp.tuning import Categorical, ClassificationData, Hyperparameter, Integer, SearchSpace
from tests.methods.test_training_runs import DELTA, CountingObjective, epsilon_at, opacus_curve, ps_tnb_geometric

M = 60  # training records: batch 20 is Opacus's rate 1/3, 3 steps per epoch; batch 10 is 1/6, 6 steps
TRAINING = TrainingConfig(epochs=1, batch_size=20, seed=0, num_threads=1)
LOW, HIGH = 2.5, 6.0
LR = Hyperparameter("lr", 0.05, 0.5, log_scale=True)
SIGMA = Hyperparameter("noise_multiplier", LOW, HIGH, log_scale=True)
MIXED = SearchSpace([LR, Integer("epochs", 1, 2), Categorical("batch_size", [10, 20]), SIGMA])
# every run shape of MIXED: (1/⌈m/b⌉, E·⌈m/b⌉)
SHAPES = [(1 / math.ceil(M / b), e * math.ceil(M / b)) for e in (1, 2) for b in (10, 20)]


@pytest.fixture(scope="module")
def data(toy_rows):
    g = torch.Generator().manual_seed(0)
    return ClassificationData(*toy_rows(g, M), *toy_rows(g, 12), num_classes=2, name="toy")


def _objective(data, space, **kw):
    kw.setdefault("dp_sgd", DPSGDConfig(noise_multiplier=1.0, max_grad_norm=1.0))
    kw.setdefault("model_fn", functools.partial(nn.Linear, 3, 2))
    obj = CountingObjective(data, space, training=TRAINING, ledger=PrivacyLedger(), **kw)
    obj.seen, obj.calls = [], 0
    return obj


def _select(obj, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)  # an explicit seed
        return select_training_runs(obj, **{"epsilon": 3.0, "delta": DELTA, "mean_trials": 2, "seed": 1, **kw})


def test_the_charge_at_the_least_sigma_dominates_a_grid_of_trials_fast(data):
    r"""The fast version of the property (no training): the charge ``select_training_runs`` makes for MIXED."""
    obj = _objective(data, MIXED)
    shapes = obj.possible_run_shapes()
    assert sorted(shapes) == sorted(set(SHAPES) - {(1 / 6, 6), (1 / 3, 3)})  # the most epochs at each rate
    charge = selection_accounting_at(
        noise_multiplier=obj.noise_multiplier_range()[0], accounting="rdp", target_epsilon=3.0, target_delta=DELTA,
        shapes=shapes, mean_trials=2,
    )  # fmt: skip
    reference = np.max([opacus_curve(LOW, q, t) for q, t in SHAPES], axis=0)
    np.testing.assert_allclose(charge.rdp_curve, ps_tnb_geometric(reference, 2), rtol=1e-9)
    for sigma in np.geomspace(LOW, HIGH, 4).tolist():
        for q, t in SHAPES:
            assert np.all(ps_tnb_geometric(opacus_curve(sigma, q, t), 2) <= charge.rdp_curve * (1 + 1e-9)), (sigma, q)
    assert charge.epsilon == pytest.approx(epsilon_at(charge.rdp_curve, DELTA), rel=1e-12) and charge.epsilon < 3.0


def test_the_charge_at_the_least_sigma_dominates_every_trial_of_the_range_and_space(data):
    obj = _objective(data, MIXED)
    assert obj.noise_multiplier_range() == (LOW, HIGH)
    result = _select(obj, non_private_trials=True, accounting="rdp", max_trials=2)
    # one record, before the first trial; every trial drew its own σ from the range
    assert obj.seen == [(1, 0)] * max(2, result.num_trials) and len(obj.ledger.training.records()) == 1
    sigmas = [t["hyperparameters"]["noise_multiplier"] for t in result.trials]
    assert all(LOW <= s <= HIGH for s in sigmas) and len(set(sigmas)) == len(sigmas)
    charged = np.asarray(obj.ledger.training.records()[0].event.rdp)
    # the charge is Thm. 2 of the pointwise maximum, over the space's run shapes, of Opacus's curve at σ = LOW
    reference = np.max([opacus_curve(LOW, q, t) for q, t in SHAPES], axis=0)
    np.testing.assert_allclose(charged, ps_tnb_geometric(reference, 2), rtol=1e-9)
    # brute force: the selection over trials of any σ in the range and any run shape lies below the charge
    for sigma in [*np.geomspace(LOW, HIGH, 5).tolist(), *sigmas]:
        for q, t in SHAPES:
            trial = opacus_curve(float(sigma), q, t)
            assert np.all(trial <= reference * (1 + 1e-12)), (sigma, q, t)
            assert np.all(ps_tnb_geometric(trial, 2) <= charged * (1 + 1e-9)), (sigma, q, t)
    # the statement: the charged ε (below the target: LOW is above the least σ the budget needs), the range
    stated = result.guarantee["training"]
    assert stated.epsilon == pytest.approx(epsilon_at(charged, DELTA), rel=1e-12) == obj.ledger.training.epsilon(DELTA)
    assert stated.epsilon < 3.0
    assert stated.details["noise_multiplier"] == LOW and stated.details["noise_multiplier_range"] == [LOW, HIGH]
    assert "noise_multiplier searched in [2.5, 6] (charged at its least value, 2.5" in stated.description
    assert result.release.to_json()["guarantee"]["training"]["details"]["noise_multiplier_range"] == [LOW, HIGH]


def test_a_searched_sigma_is_charged_at_its_privacy_profile_where_tighter(data):
    obj = _objective(data, SearchSpace([LR, SIGMA]))
    result = _select(obj, accounting="auto", max_trials=1)
    (record,) = obj.ledger.training.records()
    stated = result.guarantee["training"]
    expected = selection_profile_epsilon(LOW, delta=DELTA, shapes=[(1 / 3, 3)], mean_trials=2)
    assert isinstance(record.event, ApproximateDP) and record.event.epsilon == expected == stated.epsilon
    assert stated.details["accounting"] == "profile" and stated.epsilon <= stated.details["rdp_epsilon"] < 3.0


def _spy_objective(data, space):
    r"""An objective whose trials' per-example gradients are zero, trained by an optimizer that keeps the
    gradient it is given at every step: Opacus's noise only, divided by the expected batch size."""

    class Spy(torch.optim.SGD):
        runs: list[list[torch.Tensor]] = []

        def __init__(self, params, lr):
            super().__init__(params, lr=lr)
            Spy.runs.append([])

        def step(self, closure=None):
            Spy.runs[-1].append(torch.cat([p.grad.reshape(-1) for g in self.param_groups for p in g["params"]]))
            return super().step(closure)

    obj = _objective(
        data,
        space,
        optimizer=Spy,
        model_fn=functools.partial(nn.Linear, 3, 100),
        loss_fn=lambda out, y: out.sum(-1) * 0.0,
        dp_sgd=DPSGDConfig(noise_multiplier=1.0, max_grad_norm=0.5),
    )
    return obj, Spy.runs


def test_each_trial_trains_at_its_own_sigma_the_noise_std_is_sigma_times_the_clip_norm(data):
    obj, runs = _spy_objective(data, SearchSpace([LR, SIGMA]))
    cycle = iter([LOW, HIGH] * 4)
    result = _select(
        obj, sampler=lambda generator: {"lr": 0.1, "noise_multiplier": next(cycle)}, non_private_trials=True,
        max_trials=4,
    )  # fmt: skip
    assert len(runs) == max(4, result.num_trials)  # one optimizer per trial, padding trials included
    assert [t["hyperparameters"]["noise_multiplier"] for t in result.trials] == ([LOW, HIGH] * 4)[: result.num_trials]
    stds = []
    for j, steps in enumerate(runs):
        assert len(steps) == 3  # Opacus's Poisson loader: 1/q = 3 steps
        noise = torch.cat(steps) * 20  # the expected batch size m q = 20 divides the noisy sum
        sigma = LOW if j % 2 == 0 else HIGH
        # 1200 draws of N(0, (σC)²): the sample std is within 10% of σC (about 5 standard errors)
        assert float(noise.std()) == pytest.approx(sigma * 0.5, rel=0.1), (j, sigma)
        assert abs(float(noise.mean())) < 5 * sigma * 0.5 / math.sqrt(noise.numel())
        stds.append(float(noise.std()))
    assert stds[1] / stds[0] == pytest.approx(HIGH / LOW, rel=0.15)  # the larger σ adds more noise


def test_a_range_below_the_least_noise_the_budget_allows_is_refused_before_anything_trains(data):
    obj = _objective(data, SearchSpace([LR, Hyperparameter("noise_multiplier", 1.0, 6.0)]))
    least = calibrate_selection_noise(target_epsilon=3.0, target_delta=DELTA, shapes=[(1 / 3, 3)], mean_trials=2)
    assert 1.0 < least < LOW
    with pytest.raises(ValueError, match=rf"noise_multiplier=1: below {least:.4g}, the least noise multiplier") as e:
        _select(obj, accounting="rdp")
    assert "search noise_multiplier at or above" in str(e.value)
    assert obj.seen == [] and obj.ledger.training.records() == []


@pytest.mark.parametrize(
    "hyperparameter",
    [
        Hyperparameter("noise_multiplier", 0.0, 2.0),
        Hyperparameter("noise_multiplier", -1.0, 2.0),
        Categorical("noise_multiplier", [0.0, 3.0]),
        Categorical("noise_multiplier", ["3", 4.0]),
    ],
)
def test_a_noise_multiplier_that_is_not_positive_is_refused_before_anything(data, hyperparameter):
    obj = _objective(data, SearchSpace([LR, hyperparameter]))
    with pytest.raises(ValueError, match="noise_multiplier must take positive finite values only"):
        _select(obj)
    assert obj.seen == [] and obj.ledger.training.records() == []


def test_tune_protect_training_searches_sigma_through_the_selection(data):
    from botorch_dp.tuning.one_call import tune

    space = SearchSpace([LR, SIGMA])
    obj = _objective(data, space)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)  # an explicit seed
        result = tune(obj, space, epsilon=3.0, delta=DELTA, mean_trials=2.0, seed=2, progress=False, protect="training")
    assert result.method == "training_selection" and LOW <= result.hyperparameters["noise_multiplier"] <= HIGH
    (record,) = obj.ledger.training.records()  # one record, at the least σ of the range, before the first trial
    assert len(obj.seen) >= 1 and obj.seen == [(1, 0)] * len(obj.seen)
    assert "noise_multiplier searched in [2.5, 6]" in record.event.description
    below = _objective(data, SearchSpace([LR, Hyperparameter("noise_multiplier", 1.0, 6.0)]))
    with pytest.raises(ValueError, match="noise_multiplier=1: below"):
        tune(below, below.space, epsilon=3.0, delta=DELTA, mean_trials=2.0, progress=False, protect="training")
    assert below.seen == [] and below.ledger.training.records() == []


def test_tune_protect_validation_refuses_a_searched_sigma_before_anything_without_a_cost_warning(data):
    from botorch_dp.tuning.one_call import tune

    obj = _objective(data, SearchSpace([LR, SIGMA]))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(ValueError, match=r"\['noise_multiplier'\] set the training run itself"):
            tune(obj, obj.space, epsilon=3.0, delta=DELTA, seed=2, progress=False, protect="validation")
    assert not [w for w in caught if "DP-SGD training run(s), each charged" in str(w.message)]  # no cost of runs
    assert obj.seen == [] and obj.calls == 0 and obj.ledger.training.records() == []
