r"""``methods.proxy_then_train``: tune on a PUBLIC proxy, then one DP-SGD training at the whole ε. Its final
run's σ is ``cheap_plan.final_only_noise`` at the objective's run shape (whose accountant is tested in
test_cheap_plan.py); ``cheap_method_run`` turns a cheap result into the released ``MethodRun``."""

from types import SimpleNamespace

import pytest
import torch

# cheap_tuning binds cheap_plan's functions by name when first imported: import it before any test
# patches them, or a patched function would stay bound there for the rest of the session
import botorch_dp.methods.cheap_tuning  # noqa: F401
from botorch_dp.methods import cheap_plan as cp
from botorch_dp.methods.protocol import Method, MethodUnavailable
from botorch_dp.methods.proxy_then_train import (
    DEFAULT_CONFIGURATIONS,
    ProxyThenTrainMethod,
    cheap_method_run,
    not_on_a_proxy_objective,
)
from botorch_dp.methods.training_proxy import TrainingProxy
from botorch_dp.privacy.ledger import PrivacyLedger
from tests.methods.method_helpers import TRAINING_SPACE as SPACE
from tests.methods.method_helpers import training_proxy_data as _proxy_data

EPS, DELTA = 3.0, 1e-5


def test_one_private_training_at_the_whole_epsilon_and_no_score_charge():
    method = ProxyThenTrainMethod(SPACE, EPS, DELTA, _proxy_data())
    assert isinstance(method, Method) and method.gdp_mu is None and method.private_trainings == 1.0
    assert method.num_configurations == DEFAULT_CONFIGURATIONS
    assert "whole epsilon = 3 (1 private training)" in method.describe()
    with pytest.raises(MethodUnavailable, match="simulate_training") as err:
        method.simulate(lambda X: X, None, 0)
    assert str(err.value) == str(not_on_a_proxy_objective("proxy_then_train"))


def test_the_final_noise_is_the_smallest_sigma_for_the_whole_epsilon_at_the_objectives_shape(training_objective):
    proxy = TrainingProxy(training_objective, _proxy_data())
    rate, steps, _ = proxy.run_shape()
    sigma = ProxyThenTrainMethod(SPACE, EPS, DELTA, _proxy_data()).final_noise(proxy)
    assert sigma == cp.final_only_noise(epsilon=EPS, delta=DELTA, sample_rate=rate, steps=steps)[0]
    smaller = ProxyThenTrainMethod(SPACE, EPS / 2, DELTA, _proxy_data()).final_noise(proxy)
    assert smaller > sigma  # half the ε: more noise


def test_a_foreign_ledger_is_refused_before_anything_is_trained(training_objective):
    with pytest.raises(ValueError, match="ledger"):
        ProxyThenTrainMethod(SPACE, EPS, DELTA, _proxy_data()).run_private(training_objective, ledger=PrivacyLedger())
    assert training_objective.ledger.training.records() == []


@pytest.mark.parametrize("validation", [None, (1.5, 1e-5)])
def test_a_cheap_result_is_released_as_its_point_guarantees_and_last_run(validation):
    result = SimpleNamespace(
        hyperparameters={"lr": 0.02},
        guarantee={"training records": (2.9, 1e-5), "validation users": validation},
        split="the split",
        carried="carried unchanged",
    )
    ledger = SimpleNamespace(training=SimpleNamespace(run_ids=lambda: ["eval-0000-trial", "eval-0000-final"]))
    run = cheap_method_run("proxy_then_train", result, SPACE, SimpleNamespace(num_users=40), ledger)
    assert run.theta.dtype == torch.float64 and SPACE.to_natural(run.theta)["lr"] == pytest.approx(0.02, rel=1e-12)
    assert run.run_id == "eval-0000-final" and run.num_users == 40 and run.method == "proxy_then_train"
    assert (run.epsilon, run.delta) == (2.9, 1e-5) and run.configuration == {}  # no categorical choice in SPACE
    assert run.guarantees == {"training": (2.9, 1e-5), "validation": validation}
    stated = "validation: not protected" if validation is None else "validation: (epsilon = 1.5, delta = 1e-05)"
    assert run.procedure == f"the split; carried unchanged (training: (epsilon = 2.9, delta = 1e-05); {stated})"


def test_the_simulation_runs_the_same_search_with_the_defaults_first_and_reads_nothing_private(
    training_objective, monkeypatch
):
    import botorch_dp.methods.proxy_then_train as ptt

    seen, real = [], ptt.ProxySearch.choose

    def spy(self, train_score, configs):
        outcome = real(self, train_score, configs)
        seen.append((self, configs, outcome))
        return outcome

    monkeypatch.setattr(ptt.ProxySearch, "choose", spy)
    method = ProxyThenTrainMethod(SPACE, EPS, DELTA, _proxy_data(), 2, repeats=2, finalists=2, defaults=[{"lr": 0.05}])
    assert "1 given default(s)" in method.describe() and "2 trainings each, the 2 best again" in method.describe()
    score = method.simulate_training(TrainingProxy(training_objective, _proxy_data()), seed=1)
    ((search, configs, outcome),) = seen
    assert (search.repeats, search.finalists) == (2, 2) and len(configs) == 3
    assert SPACE.to_natural(configs[0][1])["lr"] == pytest.approx(0.05, rel=1e-12)  # the default, first
    assert outcome.trainings == 3 * 2 + 2 * 2 and 0.0 <= score < float("inf")
    assert training_objective.ledger.training.records() == []


def test_run_private_hands_the_search_settings_to_the_procedure(training_objective, monkeypatch):
    from botorch_dp.methods import cheap_tuning

    calls = []

    def fake(objective, space, proxy, **kwargs):
        calls.append(kwargs)
        raise RuntimeError("stop")

    monkeypatch.setattr(cheap_tuning, "tune_on_proxy_then_train", fake)
    method = ProxyThenTrainMethod(SPACE, EPS, DELTA, _proxy_data(), 5, repeats=4, finalists=2, defaults=())
    with pytest.raises(RuntimeError, match="stop"):
        method.run_private(training_objective, ledger=training_objective.ledger, seed=7)
    assert calls == [dict(epsilon=EPS, delta=DELTA, tuner=5, seed=7, repeats=4, finalists=2, defaults=())]


@pytest.mark.parametrize("field", ["repeats", "finalists"])
def test_a_bad_search_setting_is_refused_when_the_method_is_built(field):
    with pytest.raises(ValueError, match=field):
        ProxyThenTrainMethod(SPACE, EPS, DELTA, _proxy_data(), **{field: 0})
