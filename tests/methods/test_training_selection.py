r"""``methods.training_selection``: the ``Method`` of Papernot–Steinke private selection over whole
DP-SGD training runs (its accounting is tested in tests/training/test_selection_accounting.py)."""

import pytest

from botorch_dp.methods.protocol import Method, MethodUnavailable
from botorch_dp.methods.training_proxy import TrainingProxy
from botorch_dp.methods.training_selection import TrainingSelectionMethod
from botorch_dp.training import DPSGDConfig, TrainingConfig
from botorch_dp.tuning import Hyperparameter, SearchSpace, TorchModelTuningObjective
from tests.methods.method_helpers import TRAINING_SPACE as SPACE
from tests.methods.method_helpers import training_proxy_data as _proxy_data
from tests.methods.method_helpers import training_rows as _split

EPS, DELTA = 3.0, 1e-5


@pytest.mark.parametrize(("mean_trials", "max_trials", "expected"), [(3.0, None, 3.0), (3.0, 8, 8.0), (6.5, 4, 6.5)])
def test_the_private_trainings_are_the_expected_trials_or_the_padding(mean_trials, max_trials, expected):
    method = TrainingSelectionMethod(SPACE, EPS, DELTA, mean_trials, max_trials=max_trials)
    assert isinstance(method, Method) and method.gdp_mu is None  # an RDP curve, charged to the objective's ledger
    assert method.private_trainings == expected


def test_it_is_never_simulated_on_a_proxy_objective():
    with pytest.raises(MethodUnavailable, match="simulate_training"):
        TrainingSelectionMethod(SPACE, EPS, DELTA, 3.0).simulate(lambda X: X, None, 0)


def test_the_description_states_the_hidden_k_its_distribution_and_what_is_protected():
    text = TrainingSelectionMethod(SPACE, EPS, DELTA, 3.0, protect="training").describe()
    assert "E[K] = 3" in text and "K ~ tnb" in text and "protects training" in text and "'auto'" in text
    binomial = TrainingSelectionMethod(SPACE, EPS, DELTA, 3.0, distribution="binomial", binomial_rounds=12)
    assert "K ~ binomial over m = 12 rounds" in binomial.describe()


def test_the_description_names_what_the_objective_trains_with():
    from botorch_dp.methods.selection_charge import AMP_MECHANISM, training_mechanism
    from botorch_dp.problems.logistic_regression import AMPTuningObjective, load_logistic_data, plan_amp_runs

    dp_sgd = TorchModelTuningObjective(
        _proxy_data(), SPACE, training=TrainingConfig(epochs=1, batch_size=20), dp_sgd=DPSGDConfig(noise_multiplier=1.0)
    )
    data = load_logistic_data("synthetic", seed=3, num_examples=40, num_features=2)
    amp = AMPTuningObjective(data, plan_amp_runs(1.0, DELTA, num_runs=5))
    assert training_mechanism(dp_sgd) == "DP-SGD" and training_mechanism(amp) == AMP_MECHANISM
    for objective in (dp_sgd, amp):
        mechanism = training_mechanism(objective)
        text = TrainingSelectionMethod(SPACE, EPS, DELTA, 3.0, mechanism=mechanism).describe()
        assert f"private selection over whole {mechanism} training runs" in text
    text = TrainingSelectionMethod(SPACE, EPS, DELTA, 3.0).describe()  # not told: no mechanism named
    assert "whole DP training runs" in text and "DP-SGD" not in text and "AMP" not in text


def test_the_selection_is_not_simulated_when_the_space_searches_epochs():
    from botorch_dp.tuning import Integer

    space = SearchSpace([Hyperparameter("lr", 1e-3, 1.0, log_scale=True), Integer("epochs", 1, 2)])
    (Xt, yt), (Xv, yv) = _split(160, 0), _split(40, 1)
    obj = TorchModelTuningObjective(
        (Xt, yt, Xv, yv), space, training=TrainingConfig(epochs=1, batch_size=20, hidden_sizes=(4,)),
        dp_sgd=DPSGDConfig(noise_multiplier=1.0),
    )  # fmt: skip
    method = TrainingSelectionMethod(space, EPS, DELTA, 2.0)
    with pytest.raises(MethodUnavailable, match="epochs"):
        method.simulate_training(TrainingProxy(obj, _proxy_data()), seed=0)
