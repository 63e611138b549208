r"""The choice among the methods that protect the training records (``methods.training_choice``): every
name builds a ``Method`` whose private-training cost is the tie rule's, and the advice to train once
untuned is given exactly when the chosen method does not beat the untuned run by a paired standard
error. (Each method's simulation is tested in test_training_methods.py.)"""

import pytest

from botorch_dp.methods.protocol import Method, MethodUnavailable
from botorch_dp.methods.proxy_then_train import ProxyThenTrainMethod
from botorch_dp.methods.training_choice import TRAINING_METHODS, TUNING_METHODS, training_method, untuned_advice
from botorch_dp.methods.untuned import UntunedMethod
from botorch_dp.tuning.tune_call import TRAINING_METHODS as TUNE_TRAINING_METHODS
from tests.methods.method_helpers import TRAINING_SPACE as SPACE
from tests.methods.method_helpers import training_proxy_data as _proxy_data

EPS, DELTA = 3.0, 1e-5


def test_every_training_method_is_a_method_and_tune_knows_the_same_names():
    proxy = _proxy_data()
    kw = dict(epsilon=EPS, delta=DELTA, protect="both", proxy_data=proxy)
    methods = [training_method(name, SPACE, **kw) for name in TRAINING_METHODS]
    assert [m.name for m in methods] == list(TRAINING_METHODS)
    assert all(isinstance(m, Method) for m in methods)
    assert TUNE_TRAINING_METHODS == TRAINING_METHODS and set(TUNING_METHODS) == set(TRAINING_METHODS) - {"untuned"}
    # the private trainings each costs (the tie rule's cost): the final run, K + 1, E[K], one run
    cost = {m.name: m.private_trainings for m in methods}
    assert cost == {"training_selection": 4.0, "subsample_tuning": 9.0, "proxy_then_train": 1.0, "untuned": 1.0}
    for m in methods:  # simulated on the proxy's data, never on a proxy objective
        with pytest.raises(MethodUnavailable, match="simulate_training"):
            m.simulate(lambda X: X, None, 0)
    with pytest.raises(ValueError, match="proxy_then_train.*needs proxy"):
        training_method("proxy_then_train", SPACE, epsilon=EPS, delta=DELTA, protect="both")
    # subsample tuning carries the caller's fixed tau (simulated at it), else none: the default tau
    fixed = training_method("subsample_tuning", SPACE, **kw, tuning_share=0.2)
    assert fixed.tuning_share == 0.2 and methods[1].tuning_share is None
    assert "tau = 0.2 " in fixed.describe() and "tau = 0.3 " in methods[1].describe()


def test_the_advice_is_given_exactly_when_the_chosen_method_does_not_beat_the_untuned_run_by_a_standard_error():
    from botorch_dp.methods.choice import MethodComparison, MethodScore

    chosen = ProxyThenTrainMethod(SPACE, EPS, DELTA, _proxy_data())
    untuned = UntunedMethod(SPACE, EPS, DELTA)

    def comparison(ours, theirs):
        scores = [MethodScore("proxy_then_train", chosen, ours, None, 0.0, 1.0)]
        scores.append(MethodScore("untuned", untuned, theirs))
        return MethodComparison(scores, 0, None)

    # untuned minus chosen: 0.1, 0.1, 0.1 -> se 0: tuning better by more than a s.e.: no advice
    assert untuned_advice(comparison((0.3, 0.4, 0.5), (0.4, 0.5, 0.6))) is None
    # untuned minus chosen: +0.2, -0.1, +0.05 -> mean 0.05, se 0.087: within one s.e.: advice
    advice = untuned_advice(comparison((0.3, 0.4, 0.5), (0.5, 0.3, 0.55)))
    assert advice is not None and "not expected to beat one untuned run" in advice and "method='untuned'" in advice
    # untuned better in every repeat: advice
    assert untuned_advice(comparison((0.5, 0.6, 0.7), (0.4, 0.5, 0.6))) is not None


def _scores(losses_by_name):
    from botorch_dp.methods.choice import MethodScore

    proxy = _proxy_data()
    kw = dict(epsilon=EPS, delta=DELTA, protect="training", proxy_data=proxy)
    return [
        MethodScore(name, training_method(name, SPACE, **kw), tuple(losses), None, 0.0, 1.0)
        for name, losses in losses_by_name.items()
    ]


def test_auto_runs_the_untuned_training_exactly_when_the_chosen_tuning_method_does_not_beat_it_by_a_standard_error():
    from botorch_dp.methods.choice import MethodComparison
    from botorch_dp.methods.training_choice import untuned_wins

    tuned = {"training_selection": (0.50, 0.60, 0.70), "proxy_then_train": (0.40, 0.50, 0.60)}

    def wins(untuned, best=1):  # proxy_then_train (index 1) recommended
        return untuned_wins(MethodComparison(_scores({**tuned, "untuned": untuned}), best, None))

    # untuned minus proxy_then_train: -0.1 in every repeat: tuning does not beat it
    assert wins((0.30, 0.40, 0.50))
    # +0.2, -0.1, +0.05 -> mean +0.05, se 0.087: tuning better, but within one s.e.
    assert wins((0.60, 0.40, 0.65))
    # +0.1, +0.1, +0.12 -> mean +0.107, se 0.0067: tuning better by more than one s.e.
    assert not wins((0.50, 0.60, 0.72))
    # one repeat: no standard error; the untuned run unless tuning is lower
    one = {"proxy_then_train": (0.5,)}
    assert untuned_wins(MethodComparison(_scores({**one, "untuned": (0.5,)}), 0, None))
    assert not untuned_wins(MethodComparison(_scores({**one, "untuned": (0.51,)}), 0, None))
    # already recommended: nothing to switch
    assert not wins((0.30, 0.40, 0.50), best=2)


def test_the_choice_recommends_the_untuned_run_unless_tuning_beats_it_by_a_standard_error_and_says_so(monkeypatch):
    import torch

    from botorch_dp.methods import training_choice as tc
    from botorch_dp.methods.protocol import MethodContext
    from botorch_dp.training import DPSGDConfig, TrainingConfig
    from botorch_dp.tuning import TorchModelTuningObjective

    # simulations replaced by fixed paired losses (each method's simulation is tested elsewhere): the choice only
    fixed = {
        "training_selection": [0.5, 0.6, 0.7],
        "subsample_tuning": [0.45, 0.55, 0.65],
        "proxy_then_train": [0.4, 0.5, 0.6],
        "untuned": [0.3, 0.4, 0.5],
    }
    for cls in (tc.TrainingSelectionMethod, tc.SubsampleTuningMethod, tc.ProxyThenTrainMethod, tc.UntunedMethod):
        monkeypatch.setattr(cls, "simulate_training", lambda self, proxy, seed: fixed[self.name][seed])
    data = _proxy_data()
    objective = TorchModelTuningObjective(
        data, SPACE, training=TrainingConfig(epochs=1, batch_size=20), dp_sgd=DPSGDConfig(noise_multiplier=1.0)
    )
    context = MethodContext(SPACE.bounds.to(torch.float64), 40, 40, EPS, DELTA, None, 4.0)

    def choose():
        return tc.choose_training_method(
            objective, SPACE, data, epsilon=EPS, delta=DELTA, protect="training", context=context
        )

    choice = choose()
    assert choice.winner.name == "untuned" and choice.comparison.recommended_name == "untuned"
    # the selection's row names what the objective trains with (read from it)
    selection = choice.comparison.scores[0].method
    assert selection.mechanism == "DP-SGD" and "whole DP-SGD training runs" in selection.describe()
    assert "ran the untuned training once" in choice.advice
    # proxy_then_train lower in mean but within one paired standard error: still the untuned run
    fixed["untuned"] = [0.6, 0.4, 0.65]
    assert choose().winner.name == "untuned"
    # proxy_then_train lower by more than one paired standard error: it runs, and there is no advice
    fixed["untuned"] = [0.5, 0.6, 0.72]
    choice = choose()
    assert choice.winner.name == "proxy_then_train" and choice.advice is None
