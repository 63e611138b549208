r"""The public proxy of the training methods (``methods.training_proxy``): the default and random
configurations (the centre; reproducible, in the cube, uniform over the categoricals by a fixed-seed
bound), the private run's shape against its closed form, the proxy copy at ``σ m_p/m`` with its own
ledger (a proxy sharing a record is refused), the fitting and scoring halves, and ``best_of`` choosing
the lowest fitting-half mean recomputed here from the losses it returns."""

from __future__ import annotations

import functools
import math

import pytest
import torch
from torch import nn

from botorch_dp.methods.training_proxy import TrainingProxy, default_configuration, random_configurations
from botorch_dp.privacy.ledger import PrivacyLedger
from botorch_dp.training import DPSGDConfig, TrainingConfig
from botorch_dp.tuning import Categorical, ClassificationData, Hyperparameter, SearchSpace, TorchModelTuningObjective

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


def test_the_private_runs_shape_and_the_copy_at_the_scaled_noise(proxy):
    q, steps, k = proxy.run_shape()
    assert (q, steps, k) == (1 / 3, 6, 3)  # ⌈60/20⌉ = 3 batches per epoch, 2 epochs
    copy = proxy.copy(2.0, seed=1)
    assert copy.run_dp_sgd.noise_multiplier == pytest.approx(2.0 * M_PROXY / M, rel=1e-15)
    assert copy.training.batches_per_epoch == 3 and copy.ledger is not proxy.objective.ledger
    _, copy_rate, copy_steps = copy.planned_run()
    assert (copy_rate, copy_steps) == (q, steps)  # the proxy run has the private run's shape
    shared = TrainingProxy(proxy.objective, proxy.objective.data)  # the private rows are not public
    with pytest.raises(ValueError, match="not public"):
        shared.copy(2.0, seed=1)


def test_the_halves_partition_the_proxy_users(proxy):
    losses = torch.arange(N_PROXY, dtype=torch.float64)
    fitting, scoring = proxy.split.halves(N_PROXY)
    assert sorted(fitting.tolist() + scoring.tolist()) == list(range(N_PROXY))
    assert proxy.fitting_mean(losses) == pytest.approx(float(fitting.double().mean()))
    assert proxy.scoring_mean(losses) == pytest.approx(float(scoring.double().mean()))


def test_best_of_chooses_the_lowest_fitting_mean(proxy):
    configs = random_configurations(SPACE, 3, seed=5)
    index, per_model = proxy.best_of(configs, 1.0, seed=2)
    assert len(per_model) == 3 and all(p.shape == (N_PROXY,) for p in per_model)
    means = [proxy.fitting_mean(p) for p in per_model]
    assert index == min(range(3), key=means.__getitem__)
    again, repeat = proxy.best_of(configs, 1.0, seed=2)  # public randomness, seeded: the same choice
    assert again == index and all(torch.equal(a, b) for a, b in zip(per_model, repeat, strict=True))
