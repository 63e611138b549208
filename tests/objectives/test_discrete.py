"""Integer and categorical hyperparameters (issue 30, items 1, 3 and 7): integers are relaxed to a
coordinate of θ and rounded on the way out, each value owning its share of the cube; categorical
ones are configurations, fixed per run; natural units in and out; bad input refused by name."""

import math
from collections import Counter

import pytest
import torch
from torch import nn

from botorch_dp.objectives.discrete import Integer as DiscreteInteger
from botorch_dp.tuning import Categorical, Hyperparameter, Integer, SearchSpace, TorchModelTuningObjective

GRID = torch.linspace(0.0, 1.0, 200_001, dtype=torch.float64)


def _shares(space: SearchSpace) -> Counter:
    rows = space.to_natural(GRID[:, None])
    assert isinstance(rows, list) and len(rows) == len(GRID)  # one dict per row of a q x d batch
    values = [row["k"] for row in rows]
    return Counter(values)


def test_each_integer_owns_an_equal_share_of_the_cube():
    space = SearchSpace([Integer("k", 3, 9)])
    shares = _shares(space)
    assert sorted(shares) == list(range(3, 10)) and all(type(k) is int for k in shares)
    for k in range(3, 10):
        assert shares[k] / len(GRID) == pytest.approx(1 / 7, abs=1e-4)


def test_a_log_scaled_integer_gives_each_value_its_log_interval():
    space = SearchSpace([Integer("k", 1, 64, log_scale=True)])
    shares = _shares(space)
    total = math.log(64.5 / 0.5)
    for k in (1, 2, 8, 64):
        assert shares[k] / len(GRID) == pytest.approx(math.log((k + 0.5) / (k - 0.5)) / total, abs=1e-4)


@pytest.mark.parametrize("integer", [Integer("k", -4, 7), Integer("k", 16, 128), Integer("k", 1, 1000, log_scale=True)])
def test_natural_values_round_trip_through_the_centre_of_their_interval(integer):
    space = SearchSpace([integer])
    for k in range(integer.low, integer.high + 1, max(1, (integer.high - integer.low) // 37)):
        theta = space.from_natural({"k": k})
        assert 0.0 < float(theta) < 1.0 and space.to_natural(theta) == {"k": k}
    with pytest.raises(ValueError, match=r"k: 2\.5 is not an integer in"):
        space.from_natural({"k": 2.5})


def test_categorical_configurations_fix_per_run_and_appear_in_natural_units():
    space = SearchSpace(
        [
            Hyperparameter("lr", 1e-4, 1e-1, log_scale=True),
            Integer("width", 16, 128),
            Categorical("optimizer", ["sgd", "adam"]),
            Categorical("act", ["relu", "tanh", "gelu"]),
        ]
    )
    assert space.dim == 2 and space.names == ["lr", "width"] and len(space.configurations()) == 6
    assert space.configurations()[0] == {"optimizer": "sgd", "act": "relu"}
    theta = torch.tensor([0.5, 0.5], dtype=torch.float64)
    row = space.to_natural(theta, choice={"optimizer": "adam", "act": "tanh"})
    assert row == {"lr": pytest.approx(10**-2.5), "width": 72, "optimizer": "adam", "act": "tanh"}
    assert list(row) == ["lr", "width", "optimizer", "act"]  # the space's order
    one = space.with_choice({"optimizer": "adam"})
    assert one.configurations() == [{"act": a} for a in ("relu", "tanh", "gelu")] and one.dim == 2
    assert one.with_choice({"act": "gelu"}).to_natural(theta)["optimizer"] == "adam"
    assert {
        "name": "optimizer",
        "kind": "categorical",
        "choices": ["sgd", "adam"],
        "target": None,
        "fixed": "adam",
    } in one.describe()


@pytest.mark.parametrize(
    "make, match",
    [
        (
            lambda: Integer("width", 16.5, 128),  # type: ignore[arg-type]  # a float low, refused on purpose
            r"width: Integer low must be an integer, got 16\.5",
        ),
        (lambda: Integer("width", 128, 16), r"width: Integer low = 128 must be below high = 16"),
        (lambda: Integer("width", 0, 16, log_scale=True), r"log-scaled Integer needs low >= 1, got 0"),
        (lambda: Integer("width", True, 16), r"width: Integer low must be an integer, got True"),
        (lambda: Categorical("act", []), r"act: choices must not be empty"),
        (lambda: Categorical("act", "relu"), r"act: choices must be a sequence of values, got 'relu'"),
        (lambda: Categorical("act", ["relu", "relu"]), r"act: choices must be distinct"),
        (lambda: Categorical("act", [nn.ReLU]), r"act: choices must be str, int, float or bool values"),
        (lambda: SearchSpace([Categorical("act", ["relu"])]), r"needs at least one continuous or integer"),
        (lambda: SearchSpace([Integer("x", 0, 3), Hyperparameter("x", 0.0, 1.0)]), r"names must be unique"),
    ],
)
def test_bad_hyperparameters_are_refused_naming_the_argument(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_bad_choices_are_refused_naming_them():
    space = SearchSpace(
        [Hyperparameter("lr", 1e-4, 1e-1), Categorical("optimizer", ["sgd", "adam"]), Categorical("layers", [1, 2])]
    )
    theta = torch.tensor([0.5], dtype=torch.float64)
    with pytest.raises(ValueError, match=r"optimizer: unknown choice 'rmsprop'; the choices are \['sgd', 'adam'\]"):
        space.with_choice({"optimizer": "rmsprop"})
    with pytest.raises(ValueError, match=r"layers: unknown choice True"):  # True == 1, but it is no choice here
        space.with_choice({"layers": True})
    with pytest.raises(ValueError, match=r"'momentum' is not a categorical hyperparameter of the space"):
        space.with_choice({"momentum": 0.9})
    with pytest.raises(ValueError, match=r"choose a value for the categorical hyperparameter\(s\) \['layers'\]"):
        space.to_natural(theta, choice={"optimizer": "sgd"})
    assert DiscreteInteger is Integer


def test_a_torch_objective_gets_plain_ints_and_the_fixed_choice_and_refuses_a_free_one(data):
    seen = []

    def model_fn(width, activation):
        seen.append((width, activation))
        act = {"relu": nn.ReLU, "tanh": nn.Tanh}[activation]
        return nn.Sequential(nn.Linear(64, width), act(), nn.Linear(width, 10))

    space = SearchSpace(
        [
            Hyperparameter("lr", 1e-3, 1e-1, log_scale=True),
            Integer("width", 4, 12),
            Categorical("activation", ["relu", "tanh"]),
        ]
    )
    free = TorchModelTuningObjective(data, space, model_fn=model_fn, optimizer=torch.optim.SGD)
    with pytest.raises(ValueError, match=r"space: the categorical hyperparameter\(s\) \['activation'\] are not fixed"):
        free(torch.tensor([[0.5, 0.5]], dtype=torch.float64))  # refused before anything trains
    assert seen == [] and free.num_trainings == 0
    objective = TorchModelTuningObjective(
        data, space.with_choice({"activation": "tanh"}), model_fn=model_fn, optimizer=torch.optim.SGD
    )
    assert objective.routes == {"lr": "optimizer", "width": "model", "activation": "model"}
    losses = objective(torch.tensor([[0.5, 0.0], [0.5, 1.0]], dtype=torch.float64))
    assert losses.shape == (2, objective.num_users) and torch.isfinite(losses).all()
    assert seen == [(4, "tanh"), (12, "tanh")] and all(type(w) is int for w, _ in seen)
