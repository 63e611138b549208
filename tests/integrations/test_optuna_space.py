r"""Reading an Optuna objective's search space (``integrations.optuna_space``, issue 44): the space is
read from the suggest calls without running anything after them (a side-effect counter stays 0,
``finally:`` included), in helpers that get the trial too; conditional spaces and late suggests are
refused by name; the recorded distributions map to the library's hyperparameters and back."""

from __future__ import annotations

import math
import sys

import pytest
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution
from torch import nn

from botorch_dp.integrations.optuna_space import OptunaSpace, RunTrial, record_space
from botorch_dp.tuning import Categorical, Hyperparameter, Integer

from .test_optuna import _losses, _optimize, _study

BODY: list[str] = []


@pytest.mark.privacy_fast
def test_the_recording_stops_at_the_first_other_call_and_never_reaches_the_body():
    def watched(trial):
        lr = trial.suggest_float("lr", 10**-4, 2 * 0.05, log=True)  # arguments without a call
        act = trial.suggest_categorical("act", ["relu", "tanh"])
        try:
            BODY.append("body")  # a C call: the recording stops here
            width = trial.suggest_int("width", 8, 64)  # never recorded
        except Exception:
            BODY.append("except Exception")
        finally:
            BODY.append("finally")  # armed again: stopped before the call
        return lr, act, width

    before = (sys.getprofile(), sys.gettrace())
    BODY.clear()
    space = record_space(watched)
    assert BODY == []
    assert (sys.getprofile(), sys.gettrace()) == before
    assert space.distributions == {
        "lr": FloatDistribution(1e-4, 0.1, log=True),
        "act": CategoricalDistribution(["relu", "tanh"]),
    }
    assert space.stopped_at == "list.append()"
    with pytest.raises(ValueError, match=r"'width'.*no 'width'.*list\.append\(\).*suggest_\* call before any other"):
        RunTrial(space, {"lr": 0.01, "act": "relu"}).suggest_int("width", 8, 64)


def test_a_python_call_and_an_argument_with_a_call_end_the_recording_before_their_suggests():
    calls = []

    def touch():
        calls.append(1)
        return 1.0

    def python_call(trial):
        a = trial.suggest_float("a", 0.0, 1.0)
        touch()
        return a

    def argument_call(trial):
        a = trial.suggest_float("a", 0.0, 1.0)
        b = trial.suggest_float("b", math.log(2.0), 1.0)  # math.log is a call, before the suggest
        return a, b

    assert list(record_space(python_call).distributions) == ["a"] and calls == []
    assert record_space(python_call).stopped_at.startswith("touch()")
    assert list(record_space(argument_call).distributions) == ["a"]
    assert record_space(argument_call).stopped_at == "log()"


HELPER_BODY: list[str] = []


def _inner(trial, scale=1.0):
    return trial.suggest_categorical("act", ["relu", "tanh"])


def _build(trial):
    width = trial.suggest_int("width", 8, 64)
    act = _inner(trial)  # a helper of the helper: followed too
    HELPER_BODY.append("model")  # a call without the trial: the recording stops here
    return nn.Linear(4, width), act


class _Net(nn.Module):
    def __init__(self, *args):
        depth = args[0].suggest_int("depth", 1, 3)  # the trial in *args: followed
        super().__init__()  # a call without the trial: stops
        HELPER_BODY.append(depth)


@pytest.mark.privacy_fast
def test_suggest_calls_in_helpers_that_get_the_trial_are_recorded_and_their_other_calls_never_run():
    def in_helpers(trial):
        lr = trial.suggest_float("lr", 1e-4, 1e-1, log=True)
        model, act = _build(trial)
        HELPER_BODY.append("objective")
        return lr, model, act

    def in_a_class(trial):
        drop = trial.suggest_float("drop", 0.0, 0.5)
        return _Net(trial), drop

    def then_trains(trial):
        lr = trial.suggest_float("lr", 1e-3, 1.0, log=True)
        trial.train_dp_sgd(lambda: HELPER_BODY.append("trained"))  # the trial's own method: no helper, stops
        return lr

    HELPER_BODY.clear()
    space = record_space(in_helpers)
    assert list(space.distributions) == ["lr", "width", "act"] and HELPER_BODY == []
    assert space.stopped_at == "list.append()"
    assert list(record_space(in_a_class).distributions) == ["drop", "depth"] and HELPER_BODY == []
    assert record_space(in_a_class).stopped_at.startswith("__init__()")
    assert list(record_space(then_trains).distributions) == ["lr"] and HELPER_BODY == []
    assert record_space(then_trains).stopped_at.startswith("train_dp_sgd()")
    # at run time the helper's suggests are the recorded ones
    losses = []

    def run_in_helpers(trial):
        lr = trial.suggest_float("lr", 1e-4, 1e-1, log=True)
        width = trial.suggest_int("width", 8, 64)
        act = _inner(trial)
        losses.append(_losses(lr, width, act))
        return losses[-1]

    study = _optimize(_study(method="private_random_search"), run_in_helpers)
    assert set(study.best_params) == {"lr", "width", "act"} and losses


def test_a_helper_called_without_the_trial_ends_the_recording_and_its_suggests_are_refused_by_name():
    def helper():
        HELPER_BODY.append("ran")

    def late(trial):
        lr = trial.suggest_float("lr", 1e-4, 1e-1, log=True)
        helper()
        return _losses(lr, trial.suggest_int("width", 8, 64), "relu")

    HELPER_BODY.clear()
    assert list(record_space(late).distributions) == ["lr"] and HELPER_BODY == []
    refusal = r"suggest_\*\('width'\): the space read from the objective has no 'width' \(the recording ended at "
    refusal += r"the call helper\(\)"
    with pytest.raises(ValueError, match=refusal):
        _optimize(_study(), late)


def test_a_conditional_space_is_refused_by_name_before_anything_runs():
    def conditional(trial):
        act = trial.suggest_categorical("act", ["relu", "tanh"])
        if act == "relu":
            trial.suggest_float("slope", 0.0, 1.0)
        return trial.suggest_float("lr", 0.1, 1.0)

    def middle_choice(trial):
        optimizer = trial.suggest_categorical("optimizer", ["adam", "sgd", "rmsprop"])
        if optimizer == "sgd":  # neither the first nor the last choice
            trial.suggest_float("momentum", 0.0, 0.99)
        return trial.suggest_float("lr", 0.1, 1.0)

    def layers(trial):
        return [trial.suggest_int(f"units_{i}", 4, 64) for i in range(trial.suggest_int("depth", 1, 3))]

    def in_a_helper(trial):
        return _layers(trial)

    def bounds(trial):  # the same names, a range that depends on a suggested value
        width = trial.suggest_int("width", 8, 64)
        return trial.suggest_int("heads", 1, width // 8)

    with pytest.raises(
        ValueError, match=r"conditional space: \['slope'\] depend on.*low end.*\['act', 'slope', 'lr'\]"
    ):
        record_space(conditional)
    with pytest.raises(
        ValueError, match=r"conditional space: \['momentum'\].*optimizer='sgd': \['optimizer', 'momentum'"
    ):
        record_space(middle_choice)
    for conditional_ in (layers, in_a_helper):
        with pytest.raises(ValueError, match=r"conditional space: \['units_1', 'units_2'\]"):
            record_space(conditional_)
    with pytest.raises(ValueError, match=r"conditional space: \['heads'\]"):
        record_space(bounds)


def _layers(trial):
    depth = trial.suggest_int("depth", 1, 3)
    return [trial.suggest_int(f"units_{i}", 4, 64) for i in range(depth)]


def test_a_suggest_after_another_call_is_refused_by_name_at_run_time():
    def late(trial):
        lr = trial.suggest_float("lr", 1e-4, 1e-1, log=True)
        scale = abs(1.0)
        width = trial.suggest_int("width", 8, 64)
        return _losses(lr, width, "relu") * scale

    with pytest.raises(ValueError, match=r"suggest_\*\('width'\): the space read from the objective has no 'width'"):
        _optimize(_study(), late)


def test_distributions_map_to_the_librarys_hyperparameters_and_grids_decode_to_optuna_values():
    space = OptunaSpace(
        {
            "lr": FloatDistribution(1e-4, 1e-1, log=True),
            "drop": FloatDistribution(0.0, 0.5, step=0.1),
            "width": IntDistribution(8, 64, step=8),
            "depth": IntDistribution(1, 8, log=True),
            "act": CategoricalDistribution(["relu", "tanh"]),
            "fixed": FloatDistribution(0.3, 0.3),
        }
    )
    assert space.space.hyperparameters == (
        Hyperparameter("lr", 1e-4, 1e-1, log_scale=True),
        Integer("drop", 0, 5),
        Integer("width", 0, 7),
        Integer("depth", 1, 8, log_scale=True),
        Categorical("act", ("relu", "tanh")),
        Categorical("fixed", (0.3,)),
    )
    decoded = space.to_optuna({"lr": 0.1 + 1e-17, "drop": 3, "width": 7, "depth": 2, "act": "tanh", "fixed": 0.3})
    assert decoded == {"lr": 0.1, "drop": pytest.approx(0.3), "width": 64, "depth": 2, "act": "tanh", "fixed": 0.3}
    for name, value in decoded.items():  # every decoded value lies in Optuna's distribution
        d = space.distributions[name]
        assert d._contains(d.to_internal_repr(value)), name
    with pytest.raises(ValueError, match=r"suggest_\*\('n-units'\).*Python identifier"):
        _ = OptunaSpace({"n-units": IntDistribution(1, 4)}).space
