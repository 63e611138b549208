r"""The public proxy of the training methods (``methods.training_proxy``): the default and random
configurations (the centre; reproducible, in the cube, uniform over the categoricals by a fixed-seed
bound), the private run's shape against its closed form, the proxy copy at ``σ m_p/m`` with its own
ledger (a proxy sharing a record is refused), and a simulated choice made by the fitting half and
scored by the scoring half."""

from __future__ import annotations

import functools
import math

import pytest
import torch
from torch import nn

from botorch_dp.methods import training_proxy as tp
from botorch_dp.methods.proxy_split import ProxySplit
from botorch_dp.methods.training_proxy import TrainingProxy, default_configuration, random_configurations
from botorch_dp.privacy.ledger import PrivacyLedger
from botorch_dp.training import DPSGDConfig, TrainingConfig
from botorch_dp.tuning import Categorical, ClassificationData, Hyperparameter, SearchSpace, TorchModelTuningObjective
from tests.methods.method_helpers import training_proxy_data as _proxy_data

SPACE = SearchSpace([Hyperparameter("lr", 1e-3, 1e-1, log_scale=True), Categorical("weight_decay", [0.0, 1e-3])])
M, M_PROXY, N_PROXY = 60, 30, 40


@pytest.fixture(scope="module")
def proxy(toy_rows):
    g = torch.Generator().manual_seed(0)
    private = ClassificationData(*toy_rows(g, M), *toy_rows(g, 12), num_classes=2, name="private")
    public = ClassificationData(*toy_rows(g, M_PROXY), *toy_rows(g, N_PROXY), num_classes=2, name="public")
    objective = TorchModelTuningObjective(
        private,
        SPACE,
        training=TrainingConfig(epochs=2, batch_size=20, seed=0, num_threads=1),
        model_fn=functools.partial(nn.Linear, 3, 2),
        dp_sgd=DPSGDConfig(noise_multiplier=1.0, max_grad_norm=1.0),
        ledger=PrivacyLedger(),
    )
    return TrainingProxy(objective, public)


def test_the_default_is_the_centre_and_random_configurations_are_uniform():
    choice, theta = default_configuration(SPACE)
    assert choice == {"weight_decay": 0.0} and torch.equal(theta, torch.full((1,), 0.5, dtype=torch.float64))
    draws = random_configurations(SPACE, 2000, seed=3)
    assert [(c, t.tolist()) for c, t in draws[:5]] == [(c, t.tolist()) for c, t in random_configurations(SPACE, 5, 3)]
    thetas = torch.stack([t for _, t in draws])
    assert bool(((thetas >= 0) & (thetas < 1)).all())
    # fixed seed: the share of the first categorical within 5 sd of 1/2, θ's mean within 5 sd of 1/2
    share = sum(c == {"weight_decay": 0.0} for c, _ in draws) / 2000
    assert abs(share - 0.5) < 5 * math.sqrt(0.25 / 2000)
    assert abs(float(thetas.mean()) - 0.5) < 5 * math.sqrt(1 / 12 / 2000)


def test_the_private_runs_shape_is_the_closed_form(proxy):
    assert proxy.run_shape() == (1 / 3, 6, 3)  # ⌈60/20⌉ = 3 batches per epoch, 2 epochs
    assert proxy.num_proxy_records == M_PROXY and proxy.num_proxy_users == N_PROXY


def test_the_halves_partition_the_proxy_users(proxy):
    losses = torch.arange(N_PROXY, dtype=torch.float64)
    fitting, scoring = proxy.split.halves(N_PROXY)
    assert sorted(fitting.tolist() + scoring.tolist()) == list(range(N_PROXY))
    assert proxy.fitting_mean(losses) == pytest.approx(float(fitting.double().mean()))
    assert proxy.scoring_mean(losses) == pytest.approx(float(scoring.double().mean()))


@pytest.fixture
def objective(training_objective):  # tests/methods/conftest.py
    return training_objective


def test_the_proxy_copy_draws_the_private_runs_noise_per_expected_batch_on_its_own_ledger(objective):
    proxy = TrainingProxy(objective, _proxy_data(m=80))
    copy = proxy.copy(2.0, seed=3)
    # sigma * m_p / m: the same noise per expected batch (q m_p vs q m records) as the private run at sigma = 2
    assert copy.run_dp_sgd.noise_multiplier == pytest.approx(2.0 * 80 / 160, rel=1e-12)
    assert copy.planned_run()[1:] == objective.planned_run()[1:]  # the private run's (q, steps)
    assert copy.ledger is not objective.ledger
    # a "proxy" with a private training record would charge the private ledger: refused before it trains
    data = objective.data
    leaked = ClassificationData(data.X_train[:40], data.y_train[:40], data.X_val[:10], data.y_val[:10])
    with pytest.raises(ValueError, match="shares training record"):
        TrainingProxy(objective, leaked).copy(2.0, seed=3)
    assert objective.ledger.training.records() == []


def test_each_scoring_user_scores_a_choice_made_without_it_and_finals_are_scored_on_the_scoring_half(
    objective, monkeypatch
):
    data = _proxy_data()
    proxy = TrainingProxy(objective, data, ProxySplit(0))
    fitting, scoring = ProxySplit(0).halves(30)
    assert set(fitting.tolist()).isdisjoint(scoring.tolist()) and len(fitting) + len(scoring) == 30
    # model 0: loss 0 except 100 at one scoring user u*; model 1: loss 1 everywhere. The fold of u* (the other
    # 29 users) chooses model 0 and scores 100 at u*; every other fold sees u*'s 100 (mean 100/29 > 1) and
    # chooses model 1. Had u* taken part in its own fold, model 0 would never be chosen (score 1).
    star = int(scoring[3])
    designed = {0: torch.zeros(30), 1: torch.ones(30)}
    designed[0][star] = 100.0
    monkeypatch.setattr(tp.TrainingProxy, "copy", lambda self, sigma, seed, rows=None: None)
    monkeypatch.setattr(tp.TrainingProxy, "losses", lambda self, copy, config: designed[int(config[1][0])])
    configs = [({}, torch.tensor([0.0])), ({}, torch.tensor([1.0]))]
    per_model = proxy.trained(configs, 1.0, seed=0)
    users, choices = proxy.held_out_choices(per_model, num_users=29, seed=0)
    assert torch.equal(users, scoring) and choices.tolist() == [int(u == star) ^ 1 for u in scoring.tolist()]
    assert proxy.held_out_score(per_model, users, choices) == pytest.approx((100.0 + len(scoring) - 1) / len(scoring))
    # a final model is scored by the scoring half alone
    designed[0][:], designed[0][scoring] = 0.0, 5.0
    assert proxy.final_score(configs[0], 1.0, seed=0) == pytest.approx(5.0)


def test_a_configuration_in_natural_units_round_trips_and_bad_values_are_refused_naming_the_argument():
    choice, theta = tp.natural_configuration(SPACE, {"lr": 1e-2, "weight_decay": 1e-3}, "defaults[0]")
    assert choice == {"weight_decay": 1e-3} and theta.dtype == torch.float64
    assert SPACE.to_natural(theta, choice=choice) == pytest.approx({"lr": 1e-2, "weight_decay": 1e-3})
    with pytest.raises(ValueError, match=r"defaults\[0\] must be a mapping"):
        tp.natural_configuration(SPACE, [("lr", 1e-2)], "defaults[0]")
    with pytest.raises(ValueError, match=r"hyperparameters lacks the hyperparameter\(s\) \['lr'\]"):
        tp.natural_configuration(SPACE, {"weight_decay": 0.0}, "hyperparameters")
