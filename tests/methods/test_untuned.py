r"""One untuned DP-SGD training at public defaults (``methods.untuned``): the defaults are the centre of
the space (midpoint, geometric mean, first categorical) or the given values, the run trains once at the
noise that spends the whole ``(ε, δ)`` (the ledger's ``ε`` recomputed here equals it to calibration
tolerance), reads no validation loss, and is refused on a proxy, another ledger or a non-private
objective before anything trains."""

from __future__ import annotations

import functools
import math

import pytest
import torch
from torch import nn

from botorch_dp.methods.training_proxy import default_configuration
from botorch_dp.methods.untuned import UntunedMethod, UntunedResult
from botorch_dp.privacy.ledger import PrivacyLedger
from botorch_dp.training import DPSGDConfig, TrainingConfig
from botorch_dp.tuning import Categorical, ClassificationData, Hyperparameter, SearchSpace, TorchModelTuningObjective
from tests.methods.method_helpers import TRAINING_SPACE as LR_SPACE

SPACE = SearchSpace(
    [
        Hyperparameter("lr", 1e-3, 1e-1, log_scale=True),
        Hyperparameter("momentum", 0.0, 0.8),
        Categorical("weight_decay", [0.0, 1e-4]),
    ]
)
DELTA = 1e-5


@pytest.fixture(scope="module")
def data(toy_rows):
    g = torch.Generator().manual_seed(0)
    return ClassificationData(*toy_rows(g, 60), *toy_rows(g, 12), num_classes=2, name="toy")


DP = DPSGDConfig(noise_multiplier=1.0, max_grad_norm=1.0)


def _objective(data, dp_sgd=DP):
    return TorchModelTuningObjective(
        data,
        SPACE,
        training=TrainingConfig(epochs=2, batch_size=20, seed=0, num_threads=1),
        model_fn=functools.partial(nn.Linear, 3, 2),
        dp_sgd=dp_sgd,
        ledger=PrivacyLedger(),
    )


def test_a_categorical_default_is_its_first_value_and_nothing_is_simulated_on_a_proxy_objective():
    method = UntunedMethod(SPACE, 2.0, DELTA)
    assert method.configuration()[0] == {"weight_decay": 0.0} and method.natural()["momentum"] == pytest.approx(0.4)
    given = UntunedMethod(SPACE, 2.0, DELTA, {"lr": 0.05, "momentum": 0.1, "weight_decay": 1e-4})
    assert given.configuration()[0] == {"weight_decay": 1e-4}
    with pytest.raises(Exception, match="untuned"):
        given.simulate(lambda X: X, None, 0)
    assert given.gdp_mu is None and given.private_trainings == 1.0


def test_one_training_spends_the_whole_epsilon_and_reads_no_validation_loss(data):
    objective = _objective(data)
    method = UntunedMethod(SPACE, 2.0, DELTA)
    run = method.run_private(objective, ledger=objective.ledger, seed=0)
    assert len(objective.ledger.training.records()) == 1 and objective.ledger.validation.records() == []
    spent = objective.ledger.training.epsilon(DELTA)
    assert run.epsilon == pytest.approx(spent, rel=1e-9) and 0.98 * 2.0 <= spent <= 2.0
    assert run.guarantees == {"training": (run.epsilon, DELTA), "validation": (0.0, DELTA)}
    assert isinstance(run.result, UntunedResult) and isinstance(run.result.model, nn.Linear)
    assert run.result.hyperparameters == method.natural() and run.run_id == objective.ledger.training.run_ids()[-1]


def test_refusals_come_before_anything_trains(data):
    objective = _objective(data)
    with pytest.raises(ValueError, match="charged to objective.ledger"):
        UntunedMethod(SPACE, 2.0, DELTA).run_private(objective, ledger=PrivacyLedger())
    plain = _objective(data, dp_sgd=None)
    with pytest.raises(ValueError, match="built with dp_sgd="):
        UntunedMethod(SPACE, 2.0, DELTA).run_private(plain, ledger=plain.ledger)
    assert objective.ledger.training.records() == [] and plain.ledger.training.records() == []
    assert math.isfinite(UntunedMethod(SPACE, 2.0, DELTA).natural()["lr"])


def test_the_untuned_default_is_the_centre_of_the_space_in_natural_units():
    SPACE, EPS = LR_SPACE, 3.0  # noqa: N806  (the one-hyperparameter space of the training methods' tests)
    choice, theta = default_configuration(SPACE)
    assert choice == {} and theta.tolist() == [0.5]
    method = UntunedMethod(SPACE, EPS, DELTA)
    assert method.natural()["lr"] == pytest.approx(math.sqrt(1e-3 * 1.0), rel=1e-9)  # the geometric mean
    given = UntunedMethod(SPACE, EPS, DELTA, {"lr": 0.1})
    assert given.natural()["lr"] == pytest.approx(0.1, rel=1e-9)
    with pytest.raises(ValueError, match="lack"):
        UntunedMethod(SPACE, EPS, DELTA, {}).configuration()
