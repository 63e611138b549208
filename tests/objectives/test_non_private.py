"""Tests for botorch_dp/objectives/non_private.py (issue 43, item 3): ``objective.evaluate(hyperparameters)``
in natural units gives exactly the numbers of the unit-cube round trip (``with_choice``,
``from_natural``, ``evaluate_non_private``), on a mixed space, for a torch objective and an AMP one;
it says NON-PRIVATE when printed, refuses bad values before anything trains, and its DP-SGD run is
charged like any other."""

import math
import warnings

import pytest
import torch
from torch import nn

from botorch_dp import tune
from botorch_dp.objectives.non_private import NonPrivateMetrics
from botorch_dp.privacy.seeding import PrivacyWarning
from botorch_dp.problems import AMPTuningObjective, load_logistic_data
from botorch_dp.problems import logistic_regression as lr
from botorch_dp.training import DPSGDConfig, TrainingConfig
from botorch_dp.tuning import Categorical, Hyperparameter, Integer, SearchSpace, TorchModelTuningObjective

SPACE = SearchSpace(
    [
        Hyperparameter("lr", 1e-3, 1e-1, log_scale=True),
        Integer("width", 2, 6),
        Categorical("activation", ["relu", "tanh"]),
        Hyperparameter("dropout", 0.0, 0.5),
    ]
)


def _data(m=40, n=30, t=20, p=4):
    g = torch.Generator().manual_seed(0)
    y = torch.randint(0, 2, (m + n + t,), generator=g)
    X = torch.randn(m + n + t, p, generator=g, dtype=torch.float64) + 1.5 * y[:, None]
    return X[:m], y[:m], X[m:-t], y[m:-t], X[-t:], y[-t:]


class _Net(nn.Module):
    received: list = []

    def __init__(self, width, activation, dropout):
        super().__init__()
        _Net.received.append((width, activation, dropout))
        act = {"relu": nn.ReLU, "tanh": nn.Tanh}[activation]
        self.body = nn.Sequential(nn.Linear(4, width), act(), nn.Dropout(dropout), nn.Linear(width, 2)).double()

    def forward(self, x):
        return self.body(x)


def _objective(**kw):
    training = TrainingConfig(epochs=2, batch_size=10, seed=0)
    return TorchModelTuningObjective(_data(), SPACE, model_fn=_Net, optimizer=torch.optim.SGD, training=training, **kw)


def _round_trip(objective, hyperparameters):
    """Today's four steps, written out: bind the categorical, map to the cube, evaluate there."""
    choice = {"activation": hyperparameters["activation"]}
    theta = objective.space.with_choice(choice).from_natural(hyperparameters)
    return objective.with_choice(choice).evaluate_non_private(theta)


@pytest.mark.parametrize("activation", ["relu", "tanh"])
def test_evaluate_equals_the_unit_cube_round_trip_on_a_mixed_space(activation):
    objective = _objective()
    hyperparameters = {"lr": 0.03, "width": 5, "activation": activation, "dropout": 0.2}
    _Net.received = []
    got = objective.evaluate(hyperparameters)
    assert _Net.received == [(5, activation, pytest.approx(0.2, rel=1e-12))]  # the natural values reach the model
    assert type(_Net.received[0][0]) is int
    want = _round_trip(objective, hyperparameters)
    assert got == want  # bit for bit: the same training at the same point
    assert set(got) == {"validation_loss", "validation_accuracy", "test_loss", "test_accuracy"}
    assert all(math.isfinite(v) for v in got.values())
    assert objective.num_trainings == 2  # each training counted on the objective it was bound from
    other = objective.evaluate({**hyperparameters, "activation": {"relu": "tanh", "tanh": "relu"}[activation]})
    assert other["validation_loss"] != got["validation_loss"]  # the categorical value matters


def test_evaluate_checks_what_tune_released():
    objective = _objective()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = tune(
            objective,
            SPACE,
            epsilon=2.0,
            delta=1e-5,
            seed=3,
            progress=False,
            method="dp_gibo",
            raw_samples=16,
            num_restarts=1,
            num_iterations=2,
        )
    got = objective.evaluate(result.hyperparameters)
    assert got == _round_trip(objective, result.hyperparameters)
    assert repr(got).startswith("NON-PRIVATE diagnostics") and "do not publish" in str(got)


def test_the_printout_says_non_private_before_any_number():
    metrics = NonPrivateMetrics(validation_loss=0.25, test_accuracy=None)
    assert metrics == {"validation_loss": 0.25, "test_accuracy": None}
    text = repr(metrics)
    assert text.startswith("NON-PRIVATE") and text.index("NON-PRIVATE") < text.index("0.25")
    assert str(metrics) == text and "validation_loss=0.25" in text


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"lr": 0.5}, r"hyperparameters: lr: 0.5 lies outside its range \[0.001, 0.1\]"),
        ({"dropout": -0.1}, r"dropout: -0.1 lies outside"),
        ({"width": 9}, r"width: 9 is not an integer in \[2, 6\]"),
        ({"width": 2.5}, r"width: 2.5 is not an integer"),
        ({"activation": "gelu"}, r"unknown choice 'gelu'"),
        ({"widht": 3}, r"hyperparameters: unknown name\(s\) \['widht'\]"),
        ({"activation": None}, r"unknown choice None"),
    ],
)
def test_bad_values_are_refused_by_name_before_anything_trains(change, match):
    objective = _objective(dp_sgd=DPSGDConfig(noise_multiplier=1.0, max_grad_norm=1.0))
    hyperparameters = {"lr": 0.03, "width": 5, "activation": "relu", "dropout": 0.2, **change}
    _Net.received = []
    with pytest.raises(ValueError, match=match):
        objective.evaluate(hyperparameters)
    assert _Net.received == [] and objective.ledger.training.runs() == {} and objective.num_trainings == 0


def test_missing_names_are_refused_and_a_fixed_categorical_may_be_left_out():
    objective = _objective()
    with pytest.raises(ValueError, match=r"hyperparameters: missing \['dropout'\]"):
        objective.evaluate({"lr": 0.03, "width": 5, "activation": "relu"})
    bound = objective.with_choice({"activation": "tanh"})
    hyperparameters = {"lr": 0.03, "width": 3, "dropout": 0.1}
    assert bound.evaluate(hyperparameters) == objective.evaluate({**hyperparameters, "activation": "tanh"})
    with pytest.raises(ValueError, match="fixes activation = 'tanh'"):
        bound.evaluate({**hyperparameters, "activation": "relu"})


def test_the_ends_of_a_range_are_inside():
    objective = _objective()
    _Net.received = []
    objective.evaluate({"lr": 1e-3, "width": 6, "activation": "relu", "dropout": 0.5})
    objective.evaluate({"lr": 0.1, "width": 2, "activation": "relu", "dropout": 0.0})
    assert [r[0] for r in _Net.received] == [6, 2]


def test_with_dp_sgd_the_check_is_one_charged_run_under_its_label():
    objective = _objective(dp_sgd=DPSGDConfig(noise_multiplier=1.5, max_grad_norm=1.0))
    objective.evaluate({"lr": 0.03, "width": 5, "activation": "relu", "dropout": 0.2})
    assert list(objective.ledger.training.runs()) == ["eval-0000-evaluate"]
    assert objective.num_trainings == 1 and len(objective.runs) == 1
    objective.evaluate({"lr": 0.03, "width": 5, "activation": "relu", "dropout": 0.2}, label=None)
    assert list(objective.ledger.training.runs()) == ["eval-0000-evaluate", "eval-0001"]


def test_amp_objective_evaluates_in_natural_units_like_its_round_trip():
    data = load_logistic_data("synthetic", seed=3, num_examples=600, num_features=12)
    budget = lr.plan_amp_runs(1.0, 1e-5, num_runs=5)

    def objective():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PrivacyWarning)
            return AMPTuningObjective(data, budget, noise_seed=11)  # the same noise for run 0 of each

    lam = 2.0 * budget.min_lam()
    a, b = objective(), objective()
    got = a.evaluate({"lam": lam})
    want = b.evaluate_non_private(b.space.from_natural({"lam": lam}), label="evaluate")
    assert got == want and isinstance(got, NonPrivateMetrics)
    assert a.results[0].config.lam == pytest.approx(lam, rel=1e-12)
    assert a.run_ids == ["amp-0000-evaluate"] and len(a.ledger.training.records()) == 1
    assert 0.0 <= got["test_accuracy"] <= 1.0 and 0.0 <= got["validation_loss"] <= a.loss_cap
    with pytest.raises(ValueError, match="hyperparameters: lam: .* lies outside its range"):
        a.evaluate({"lam": 0.5 * budget.min_lam()})
    assert len(a.results) == 1
