r"""Selection trials trained under a charge that covers them all (``objectives.covered``): the run
shapes a space can produce against their closed form ``(1/⌈m/b⌉, E·⌈m/b⌉)`` and brute force over
the space, the trial settings a point gives, every refusal made before a trial touches the data
(no open cover, another ledger, a point outside the space), a covered trial adding no record of its
own, and the per-user scores against an independent computation.
"""

from __future__ import annotations

import functools
import itertools
import math

import numpy as np
import pytest
import torch
from torch import nn

import botorch_dp.training.cover as cover_module
from botorch_dp.privacy.ledger import PrivacyLedger, TrainingMechanism
from botorch_dp.training import DPSGDConfig, TrainingConfig
from botorch_dp.training.cover import TrainingCover
from botorch_dp.training.dp_sgd import planned_dp_run
from botorch_dp.training.selection_accounting import trial_rdp_curve
from botorch_dp.tuning import (
    Categorical,
    ClassificationData,
    Hyperparameter,
    Integer,
    SearchSpace,
    TorchModelTuningObjective,
)

M = 60  # training records
TRAINING = TrainingConfig(epochs=1, batch_size=20, seed=0, num_threads=1)
RUN_SPACE = SearchSpace(
    [
        Hyperparameter("lr", 1e-3, 1e-1, log_scale=True),
        Integer("epochs", 1, 3),
        Categorical("batch_size", [10, 20, 25, 30]),
        Hyperparameter("max_grad_norm", 0.5, 2.0),
    ]
)


PLAIN_SPACE = SearchSpace([Hyperparameter("lr", 1e-3, 1e-1, log_scale=True)])


@pytest.fixture(scope="module")
def data(toy_rows):
    g = torch.Generator().manual_seed(0)
    return ClassificationData(*toy_rows(g, M), *toy_rows(g, 12), num_classes=2, name="toy")


def _objective(data, space=RUN_SPACE, **kw):
    kw.setdefault("dp_sgd", DPSGDConfig(noise_multiplier=1.0, max_grad_norm=1.0))
    return TorchModelTuningObjective(
        data, space, training=TRAINING, model_fn=functools.partial(nn.Linear, 3, 2), ledger=PrivacyLedger(), **kw
    )


def test_run_shapes_are_the_closed_form_and_dominate_every_point_of_the_space(data):
    objective = _objective(data)
    assert sorted(objective.training_routes()) == ["batch_size", "epochs", "max_grad_norm"]
    # closed form: rate 1/⌈m/b⌉ and, at the most epochs, 3·⌈m/b⌉ steps; b = 20 and 30 share none, 25 and 30 do
    expected = sorted({(1 / math.ceil(M / b), 3 * math.ceil(M / b)) for b in (10, 20, 25, 30)})
    shapes = objective.possible_run_shapes()
    assert len(shapes) == len(expected) == 3
    assert all(
        math.isclose(q, eq, rel_tol=1e-15) and t == et for (q, t), (eq, et) in zip(shapes, expected, strict=True)
    )
    # brute force: every run a point can be is one of the shapes' rates with no more steps
    for epochs, batch_size in itertools.product(range(1, 4), (10, 20, 25, 30)):
        config = TrainingConfig(epochs=epochs, batch_size=batch_size)
        _, rate, steps = planned_dp_run(M, config, DPSGDConfig(noise_multiplier=1.0))
        assert any(math.isclose(rate, q, rel_tol=1e-12) and steps <= t for q, t in shapes)


def test_a_point_gives_its_runs_settings_and_the_covers_noise(data):
    objective = _objective(data)
    point = {"lr": 0.01, "epochs": 2, "batch_size": 25, "max_grad_norm": 1.5}
    training, dp_sgd = objective.trial_settings(point, 2.5)
    assert (training.epochs, training.batch_size, training.seed) == (2, 25, 0)
    assert (dp_sgd.noise_multiplier, dp_sgd.max_grad_norm) == (2.5, 1.5)
    plain = _objective(data, PLAIN_SPACE)
    training, dp_sgd = plain.trial_settings({"lr": 0.01}, 2.5)
    assert training == TRAINING and dp_sgd.max_grad_norm == 1.0 and plain.possible_run_shapes() == [(1 / 3, 3)]


@pytest.mark.parametrize(
    "point, match",
    [
        ([0.01, 2], "must be a mapping"),
        ({"lr": 0.01, "epochs": 2, "batch_size": 20, "max_grad_norm": 1.0, "momentum": 0.9}, r"\['momentum'\]"),
        ({"lr": 0.01, "epochs": 2, "max_grad_norm": 1.0}, "lack the categorical 'batch_size'"),
        ({"lr": 0.01, "epochs": 5, "batch_size": 20, "max_grad_norm": 1.0}, "epochs"),
        ({"lr": 0.01, "epochs": 2, "batch_size": 15, "max_grad_norm": 1.0}, "batch_size"),
    ],
)
def test_a_point_outside_the_space_is_refused_naming_it(data, point, match):
    with pytest.raises(ValueError, match=match):
        _objective(data).trial_settings(point, 1.0)


def test_the_charged_path_and_a_space_that_cannot_bound_a_run_are_refused(data):
    objective = _objective(data)
    with pytest.raises(ValueError, match=r"\['epochs', 'batch_size', 'max_grad_norm'\] set the training run"):
        objective.refuse_training_routes()
    unbounded = _objective(data, SearchSpace([Hyperparameter("lr", 1e-3, 1e-1), Hyperparameter("epochs", 1.0, 3.0)]))
    with pytest.raises(ValueError, match="epochs must be an Integer or a Categorical"):
        unbounded.possible_run_shapes()
    with pytest.raises(ValueError, match="dp_sgd=DPSGDConfig"):
        _objective(data, dp_sgd=None).trial_settings({"lr": 0.01, "epochs": 1, "batch_size": 20, "max_grad_norm": 1}, 1)


@pytest.mark.parametrize(
    "hyperparameter, expected",
    [
        (Hyperparameter("noise_multiplier", 2.0, 8.0, log_scale=True), (2.0, 8.0)),
        (Categorical("noise_multiplier", [4.0, 1.5, 3]), (1.5, 4.0)),
        (Integer("noise_multiplier", 2, 5), (2.0, 5.0)),
    ],
)
def test_a_searched_noise_multiplier_gives_its_range_and_each_trial_its_own_sigma(data, hyperparameter, expected):
    space = SearchSpace([Hyperparameter("lr", 1e-3, 1e-1, log_scale=True), Integer("epochs", 1, 2), hyperparameter])
    objective = _objective(data, space)
    assert objective.training_routes() == ["epochs", "noise_multiplier"]
    assert objective.noise_multiplier_range() == expected
    assert objective.possible_run_shapes() == [(1 / 3, 6)]  # σ changes no run shape
    point = {"lr": 0.01, "epochs": 1, "noise_multiplier": expected[1]}
    training, dp_sgd = objective.trial_settings(point, expected[0])  # the trial's own σ, not the cover's
    assert (training.epochs, dp_sgd.noise_multiplier, dp_sgd.max_grad_norm) == (1, expected[1], 1.0)
    with pytest.raises(ValueError, match="noise_multiplier"):  # outside the space
        objective.trial_settings({**point, "noise_multiplier": expected[0] / 2}, expected[0])
    if isinstance(hyperparameter, Categorical):  # a choice fixed by with_choice is the whole range
        assert objective.with_choice({"noise_multiplier": 3}).noise_multiplier_range() == (3.0, 3.0)
    with pytest.raises(ValueError, match=r"\['epochs', 'noise_multiplier'\] set the training run itself"):
        objective.refuse_training_routes()  # DP-GIBO's charged path: one fixed run per evaluation
    assert _objective(data).noise_multiplier_range() is None  # not searched: the selection calibrates σ


def _covering(objective, run_id="sel"):
    reference = trial_rdp_curve(1.0, objective.possible_run_shapes())
    with objective.ledger.charge_training({run_id: TrainingMechanism("a selection", tuple(2 * reference))}) as meter:
        meter.record(run_id)
    return TrainingCover(objective.ledger, run_id, tuple(reference), 1.0)


def test_refusals_come_before_the_trial_touches_the_data(data, monkeypatch):
    objective = _objective(data, PLAIN_SPACE)
    cover = _covering(objective)
    monkeypatch.setattr(cover_module, "train_model", lambda *a, **k: pytest.fail("trained before the checks"))
    point = {"lr": 0.01}
    with pytest.raises(RuntimeError, match="open TrainingCover"):
        objective.train_covered(point, "a cover")
    other = _objective(data, PLAIN_SPACE)
    with pytest.raises(ValueError, match="another ledger"):
        objective.train_covered(point, _covering(other))
    with pytest.raises(RuntimeError, match="above the cover's reference"):  # σ below the cover's reference
        objective.train_covered(point, TrainingCover(objective.ledger, "sel", cover.reference_rdp, 0.8))
    cover.close()
    with pytest.raises(RuntimeError, match="open TrainingCover"):
        objective.train_covered(point, cover)


def test_a_covered_trial_trains_the_planned_run_and_records_nothing(data):
    objective = _objective(data)
    cover = _covering(objective)
    records = objective.ledger.training.records()
    point = {"lr": 0.05, "epochs": 2, "batch_size": 30, "max_grad_norm": 1.0}
    model = objective.train_covered(point, cover, noise_seed=3)
    again = objective.train_covered(point, cover, noise_seed=3)
    assert isinstance(model, nn.Linear) and all(
        torch.equal(a, b) for a, b in zip(model.parameters(), again.parameters(), strict=True)
    )
    assert objective.ledger.training.records() == records and objective.runs == []
    # the per-user scores: 0/1 errors and cross-entropy losses, computed here from the model's logits
    with torch.no_grad():
        logits = model(data.X_val.to(model.weight.dtype)).double()
    errors = objective.per_user_scores(model, "error")
    assert errors.dtype == torch.float64 and torch.equal(errors, (logits.argmax(-1) != data.y_val).double())
    losses = objective.per_user_scores(model)
    expected = torch.nn.functional.cross_entropy(logits, data.y_val, reduction="none")
    assert losses.shape == (12,) and np.allclose(losses.numpy(), np.minimum(expected.numpy(), losses.numpy().max()))
    with pytest.raises(ValueError, match="score must be one of"):
        objective.per_user_scores(model, "accuracy")
