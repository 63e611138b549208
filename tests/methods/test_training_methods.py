"""The methods that protect the training records (issue 41 item 2): proxy_then_train, subsample_tuning and untuned
behind the Method protocol, each simulated on a PUBLIC proxy's data at its own noise (methods.training_proxy), chosen
by the proxy's fitting half and scored on its scoring half."""

import math
import warnings

import pytest
import torch

# cheap_tuning binds cheap_plan's functions by name when first imported: import it before any test
# patches them, or a patched function would stay bound there for the rest of the session
import botorch_dp.methods.cheap_tuning  # noqa: F401
from botorch_dp.methods import cheap_plan as cp
from botorch_dp.methods import training_proxy as tp
from botorch_dp.methods.protocol import Method, MethodUnavailable
from botorch_dp.methods.proxy_split import ProxySplit
from botorch_dp.methods.proxy_then_train import ProxyThenTrainMethod
from botorch_dp.methods.subsample_tuning import SubsampleTuningMethod
from botorch_dp.methods.training_choice import TRAINING_METHODS, TUNING_METHODS, training_method, untuned_advice
from botorch_dp.methods.training_proxy import TrainingProxy, default_configuration
from botorch_dp.methods.training_selection import TrainingSelectionMethod
from botorch_dp.methods.untuned import UntunedMethod
from botorch_dp.objectives.datasets import ClassificationData
from botorch_dp.privacy.seeding import PrivacyWarning
from botorch_dp.training import DPSGDConfig, TrainingConfig
from botorch_dp.tuning import Hyperparameter, SearchSpace, TorchModelTuningObjective
from botorch_dp.tuning.tune_call import TRAINING_METHODS as TUNE_TRAINING_METHODS

EPS, DELTA = 3.0, 1e-5
SPACE = SearchSpace([Hyperparameter("lr", 1e-3, 1.0, log_scale=True)])


def _split(n, seed):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, 4, generator=g)
    return X, (X[:, 0] + 0.5 * X[:, 1] > 0).long()


@pytest.fixture
def objective():
    (Xt, yt), (Xv, yv) = _split(160, 0), _split(40, 1)
    training = TrainingConfig(epochs=1, batch_size=20, hidden_sizes=(4,))
    return TorchModelTuningObjective(
        (Xt, yt, Xv, yv), SPACE, training=training, dp_sgd=DPSGDConfig(noise_multiplier=1.0)
    )


def _proxy_data(m=80):
    (Xp, yp), (Xv, yv) = _split(m, 5), _split(30, 6)
    return ClassificationData(Xp, yp, Xv, yv)


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


def test_a_simulated_choice_uses_the_fitting_half_and_the_score_the_scoring_half(objective, monkeypatch):
    data = _proxy_data()
    proxy = TrainingProxy(objective, data, ProxySplit(0))
    fitting, scoring = ProxySplit(0).halves(30)
    assert set(fitting.tolist()).isdisjoint(scoring.tolist()) and len(fitting) + len(scoring) == 30
    # configuration 0 is the best on the fitting half and the worst on the scoring half; 1 the reverse
    designed = {0: torch.zeros(30), 1: torch.zeros(30)}
    designed[0][scoring], designed[1][fitting] = 5.0, 1.0
    monkeypatch.setattr(tp.TrainingProxy, "copy", lambda self, sigma, seed, rows=None: None)
    monkeypatch.setattr(tp.TrainingProxy, "losses", lambda self, copy, config: designed[int(config[1][0])])
    configs = [({}, torch.tensor([0.0])), ({}, torch.tensor([1.0]))]
    best, losses = proxy.best_of(configs, 1.0, seed=0)
    assert best == 0  # chosen by the fitting half alone
    assert proxy.final_score(configs[0], 1.0, seed=0) == pytest.approx(5.0)  # scored by the scoring half alone
    assert proxy.scoring_mean(losses[1]) == 0.0 and proxy.fitting_mean(losses[1]) == 1.0


@pytest.mark.parametrize("name", ["proxy_then_train", "untuned", "subsample_tuning", "training_selection"])
def test_each_method_is_simulated_at_the_noise_its_private_run_would_draw(objective, monkeypatch, name):
    seen = []
    real_copy = tp.TrainingProxy.copy

    def spy(self, sigma, seed, rows=None):
        seen.append((sigma, None if rows is None else len(rows)))
        return real_copy(self, sigma, seed, rows)

    monkeypatch.setattr(tp.TrainingProxy, "copy", spy)
    monkeypatch.setattr(cp, "final_only_noise", lambda **kw: (0.8, kw["epsilon"]))  # the accounting tested elsewhere
    plan = type("Plan", (), {"trial_noise_multiplier": 1.7, "final_noise_multiplier": 0.9, "subsample_fraction": 0.5})
    monkeypatch.setattr(cp, "plan_subsample_tuning", lambda **kw: plan)
    from botorch_dp.methods import training_selection as ts

    monkeypatch.setattr(ts, "_trial_noise", lambda *args: 1.3)
    data = _proxy_data()
    method = training_method(name, SPACE, epsilon=EPS, delta=DELTA, protect="training", proxy_data=data,
                             mean_trials=2.0, num_configurations=2)  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)
        value = method.simulate_training(TrainingProxy(objective, data), seed=0)
    assert math.isfinite(value) and value > 0
    expected = {
        "proxy_then_train": [(0.8, None), (0.8, None)],  # the trials, then the final run: both at sigma_f
        "untuned": [(0.8, None)],
        "subsample_tuning": [(1.7, "subset"), (0.9, None)],  # the trials on a subset at sigma_t, final at sigma_f
        "training_selection": [(1.3, None)],  # the trials at the selection's own sigma; the winner's model is scored
    }[name]
    assert [s for s, _ in seen] == [s for s, _ in expected]
    for (_, rows), (_, kind) in zip(seen, expected, strict=True):
        assert (rows is None) == (kind is None) and (rows is None or 0 < rows < 80)
    assert objective.ledger.training.records() == []  # the private objective was never trained


def test_the_untuned_default_is_the_centre_of_the_space_in_natural_units():
    choice, theta = default_configuration(SPACE)
    assert choice == {} and theta.tolist() == [0.5]
    method = UntunedMethod(SPACE, EPS, DELTA)
    assert method.natural()["lr"] == pytest.approx(math.sqrt(1e-3 * 1.0), rel=1e-9)  # the geometric mean
    given = UntunedMethod(SPACE, EPS, DELTA, {"lr": 0.1})
    assert given.natural()["lr"] == pytest.approx(0.1, rel=1e-9)
    with pytest.raises(ValueError, match="lack"):
        UntunedMethod(SPACE, EPS, DELTA, {}).configuration()


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


def test_subsample_tuning_is_unavailable_when_the_expected_subset_is_too_small(objective):
    method = SubsampleTuningMethod(SPACE, EPS, DELTA, subsample_fraction=0.05)  # 0.05 * 160 = 8 < 10 records
    with pytest.raises(MethodUnavailable, match="expected subset"):
        method.plan(TrainingProxy(objective, _proxy_data()))


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
