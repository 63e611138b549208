"""tune(method="auto", proxy=...) with a DP-SGD objective and the training records protected (issue 41 item 2): the
training methods (private selection over whole runs, subsample tuning, proxy-then-train) simulated on the PUBLIC proxy
at their own noise, the best run, the ledger charged what it states, and the advice when tuning is not expected to beat
one untuned run; method="proxy_then_train" / "subsample_tuning" / "untuned" run one directly."""

import json
import math
import warnings

import pytest
import torch
from torch import nn

from botorch_dp.methods import cheap_plan as cp
from botorch_dp.methods import training_proxy as tp
from botorch_dp.objectives.datasets import ClassificationData
from botorch_dp.optim.public_checks import SettingsWarning
from botorch_dp.privacy.seeding import PrivacyWarning
from botorch_dp.training import DPSGDConfig, TrainingConfig
from botorch_dp.tuning import Hyperparameter, SearchSpace, TorchModelTuningObjective, one_call
from botorch_dp.tuning.one_call import tune

EPS, DELTA = 3.0, 1e-5
# 160 training records, batch 20: q = 1/8, 8 steps in the one epoch
TRAINING = TrainingConfig(epochs=1, batch_size=20, hidden_sizes=(4,))
INFORMATIVE = SearchSpace([Hyperparameter("lr", 1e-4, 3.0, log_scale=True)])  # the centre, lr = 0.017, barely trains
IGNORED = SearchSpace([Hyperparameter("unused", 0.0, 1.0)])  # a model keyword the model ignores
FAST_PLAN = {"num_configurations": 4, "num_repeats": 3}


def _split(n, seed):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, 4, generator=g)
    return X, (X[:, 0] + 0.5 * X[:, 1] > 0).long()


def _proxy():
    (Xp, yp), (Xv, yv) = _split(160, 5), _split(40, 6)
    return (Xp, yp, Xv, yv)


class SpiedObjective(TorchModelTuningObjective):
    r"""Counts every way the private objective trains or is evaluated."""

    def __call__(self, X):
        self.evaluations += 1
        return super().__call__(X)

    def train(self, theta, *, label=None):
        self.evaluations += 1
        return super().train(theta, label=label)

    def train_covered(self, hyperparameters, cover, *, noise_seed=None):
        self.evaluations += 1
        return super().train_covered(hyperparameters, cover, noise_seed=noise_seed)

    def evaluate_charged(self, X, tickets, **kw):
        self.evaluations += 1
        return super().evaluate_charged(X, tickets, **kw)


def _objective(space, **kw):
    (Xt, yt), (Xv, yv) = _split(160, 0), _split(40, 1)
    obj = SpiedObjective((Xt, yt, Xv, yv), space, training=TRAINING, dp_sgd=DPSGDConfig(noise_multiplier=1.0), **kw)
    obj.evaluations = 0
    return obj


def _ignored_objective():
    def model(unused=0.5):  # the tuned keyword changes nothing: tuning cannot help
        return nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2))

    return _objective(IGNORED, model_fn=model, optimizer_kwargs={"lr": 0.5})


@pytest.fixture
def at_the_choice(monkeypatch):
    r"""What the private objective and its ledger had seen when the choice was made (before the private run)."""
    seen = {}
    real = one_call.choose

    def spy(call):
        choice = real(call)
        obj = call.given
        seen.update(
            evaluations=obj.evaluations,
            trainings=len(obj.ledger.training.records()),
            validations=len(obj.ledger.validation.records()),
        )
        return choice

    monkeypatch.setattr(one_call, "choose", spy)
    return seen


def _tune(obj, space, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)
        return tune(obj, space, **{"epsilon": EPS, "delta": DELTA, "mean_trials": 3.0, "progress": False, **kw})


def test_auto_with_an_informative_proxy_runs_proxy_then_train_and_the_ledger_holds_what_it_states(at_the_choice):
    obj = _objective(INFORMATIVE)
    with warnings.catch_warnings():
        warnings.simplefilter("error", SettingsWarning)  # no advice here: tuning beats the untuned run
        result = _tune(obj, INFORMATIVE, proxy=_proxy(), plan_options=FAST_PLAN, seed=1)  # seeds the configurations
    # the choice read nothing private: no evaluation, no record, before the private run
    assert at_the_choice == {"evaluations": 0, "trainings": 0, "validations": 0}
    table = result.methods
    names = [s.name for s in table.scores]
    assert names == ["training_selection", "subsample_tuning", "proxy_then_train", "untuned"]
    assert result.method == "proxy_then_train" == table.recommended_name
    means = {s.name: s.mean_proxy_loss for s in table.scores}
    assert means["proxy_then_train"] == min(means.values())
    assert means["untuned"] > means["proxy_then_train"] and result.advice is None
    # charged what it states: one final DP-SGD run, nothing on the validation side
    (record,) = obj.ledger.training.records()
    assert record.run_id.endswith("-final") and obj.ledger.validation.records() == []
    epsilon = obj.ledger.training.epsilon(DELTA)
    assert 0.99 * EPS <= epsilon <= EPS
    assert result.protected == {"training": (pytest.approx(epsilon, rel=1e-12), DELTA), "validation": (0.0, DELTA)}
    assert result.guarantee.epsilon == pytest.approx(epsilon, rel=1e-12)
    assert "tuning share 0" in result.guarantee_report() and "proxy_then_train" in repr(result)
    out = json.loads(result.to_json())
    assert out["method"] == "proxy_then_train" and "advice" not in out
    assert out["protected"]["training"]["epsilon"] == pytest.approx(epsilon, rel=1e-12)
    assert result.hyperparameters["lr"] > 0.05  # the proxy's choice (of 4 seeded configurations), far from 0.017
    assert isinstance(result.model, torch.nn.Module) and result.model is result.runs[0].result.result.model


def test_auto_says_tuning_is_not_expected_to_beat_one_untuned_run_when_the_hyperparameter_changes_nothing(
    at_the_choice,
):
    obj = _ignored_objective()
    with pytest.warns(SettingsWarning, match="not expected to beat one untuned run"):
        result = _tune(obj, IGNORED, proxy=_proxy(), plan_options=FAST_PLAN)
    assert at_the_choice == {"evaluations": 0, "trainings": 0, "validations": 0}
    scores = {s.name: s for s in result.methods.scores}
    # the same noise streams and an ignored keyword: the untuned run IS the proxy procedure's final run
    assert scores["untuned"].proxy_losses == scores["proxy_then_train"].proxy_losses
    # tuning cannot beat it: auto ran the untuned training, and says so everywhere the result is read
    assert result.method == "untuned" and "ran the untuned training once" in result.advice
    (record,) = obj.ledger.training.records()
    assert record.run_id.endswith("-untuned")
    assert "ADVICE: tuning is not expected" in repr(result)
    assert "ADVICE: tuning is not expected" in result.guarantee_report()
    assert json.loads(result.to_json())["advice"] == result.advice
    epsilon = obj.ledger.training.epsilon(DELTA)
    assert result.protected["training"] == (pytest.approx(epsilon, rel=1e-12), DELTA) and epsilon <= EPS


def _proxy_as(kind):
    if kind == "tuple":
        return _proxy()
    data = ClassificationData(*_proxy())
    if kind == "data":
        return data
    return TorchModelTuningObjective(data, INFORMATIVE, training=TRAINING, dp_sgd=DPSGDConfig(noise_multiplier=1.0))


@pytest.mark.privacy_fast
@pytest.mark.parametrize("kind", ["tuple", "data", "objective"])
def test_the_choice_evaluates_nothing_private_and_stops_before_the_private_run(monkeypatch, at_the_choice, kind):
    # the accounting is another test's; here the data flow: with sigma fixed the choice is quick
    monkeypatch.setattr(cp, "final_only_noise", lambda **kw: (0.8, kw["epsilon"]))
    trained = []
    real_losses = tp.TrainingProxy.losses
    monkeypatch.setattr(tp.TrainingProxy, "losses", lambda self, c, cfg: trained.append(1) or real_losses(self, c, cfg))

    class Stop(Exception):
        pass

    def stop(self, *args, **kwargs):
        raise Stop

    from botorch_dp.tuning.method_runs import OnSpace

    monkeypatch.setattr(OnSpace, "run_private", stop)
    obj = _objective(INFORMATIVE)
    with pytest.raises(Stop):
        _tune(obj, INFORMATIVE, proxy=_proxy_as(kind),
              plan_options={"methods": ["proxy_then_train"], "num_configurations": 2, "num_repeats": 2})  # fmt: skip
    # the proxy's models: 2 repeats of the proxy search (the centre and 2 random configurations, 3 trainings
    # each, the 3 best 3 more times: methods.proxy_search) and its final, and 2 untuned
    assert len(trained) == 2 * (3 * 3 + 3 * 3 + 1) + 2
    assert at_the_choice == {"evaluations": 0, "trainings": 0, "validations": 0}
    assert obj.evaluations == 0 and obj.ledger.training.records() == []


def test_method_untuned_trains_once_at_the_centre_at_the_whole_epsilon():
    obj = _objective(INFORMATIVE)
    result = _tune(obj, INFORMATIVE, method="untuned")
    assert result.method == "untuned" and result.methods is None
    assert result.hyperparameters["lr"] == pytest.approx(math.sqrt(1e-4 * 3.0), rel=1e-9)
    (record,) = obj.ledger.training.records()
    assert record.run_id.endswith("-untuned")
    sigma, stated = cp.final_only_noise(epsilon=EPS, delta=DELTA, sample_rate=1 / 8, steps=8)
    assert record.event.noise_multiplier == pytest.approx(sigma, rel=1e-12)
    epsilon = obj.ledger.training.epsilon(DELTA)
    assert epsilon == pytest.approx(stated, rel=1e-12) and 0.99 * EPS <= epsilon <= EPS
    assert result.protected == {"training": (pytest.approx(epsilon, rel=1e-12), DELTA), "validation": (0.0, DELTA)}
    assert "ONE DP-SGD training at the public defaults" in result.guarantee_report()
    assert isinstance(result.model, torch.nn.Module)


def test_method_subsample_tuning_states_its_split_and_the_ledger_composes_to_it():
    obj = _objective(INFORMATIVE)
    result = _tune(obj, INFORMATIVE, method="subsample_tuning", protect="training",
                   plan_options=None, seed=3)  # fmt: skip
    assert result.method == "subsample_tuning"
    phase, final = obj.ledger.training.records()
    assert "Poisson subset" in phase.event.description and final.run_id.endswith("-final")
    epsilon = obj.ledger.training.epsilon(DELTA)
    assert result.protected == {"training": (pytest.approx(epsilon, rel=1e-9), DELTA), "validation": None}
    assert 0.99 * EPS <= epsilon <= EPS
    assert "tuning share tau = 0.3" in result.guarantee_report()
    assert "NOT protected" in result.guarantee_report()  # the validation users, compared without noise


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"method": "proxy_then_train"}, "proxy_then_train.*needs proxy"),
        ({"method": "untuned", "protect": "validation"}, "protect='validation'"),
        ({"method": "auto", "protect": "validation", "proxy": _proxy()}, "proxy: data"),
        ({"proxy": _proxy(), "plan_options": {"clip_quantiles": (0.5,)}}, "plan_options"),
        ({"proxy": _proxy(), "plan_options": {"methods": ["untuned"]}}, "plan_options\\['methods'\\]"),
        ({"method": "training_selection", "proxy": _proxy()}, "proxy="),
        ({"method": "untuneed"}, "untuned"),
        ({"proxy": _proxy(), "plan_budget": 10}, "plan_budget"),
    ],
)
def test_the_training_methods_refuse_what_they_do_not_take_before_anything_trains(kwargs, match):
    obj = _objective(INFORMATIVE)
    with pytest.raises(ValueError, match=match):
        _tune(obj, INFORMATIVE, **kwargs)
    assert obj.evaluations == 0 and obj.ledger.training.records() == []


@pytest.mark.privacy_fast
def test_method_untuned_charges_the_noise_and_epsilon_it_states_fast(monkeypatch):
    # fast: sigma fixed, its epsilon computed independently (Opacus's RDP on the ledger's grid)
    from opacus.accountants.analysis.rdp import compute_rdp

    from botorch_dp.privacy.analysis.rdp import rdp_curve_epsilon
    from botorch_dp.privacy.ledger import TRAINING_RDP_ORDERS

    sigma = 1.5
    curve = compute_rdp(q=1 / 8, noise_multiplier=sigma, steps=8, orders=TRAINING_RDP_ORDERS)
    alone = rdp_curve_epsilon(curve, TRAINING_RDP_ORDERS, DELTA)[0]
    monkeypatch.setattr(cp, "final_only_noise", lambda **kw: (sigma, alone))
    obj = _objective(INFORMATIVE)
    result = _tune(obj, INFORMATIVE, method="untuned", protect="training")
    (record,) = obj.ledger.training.records()
    assert (record.event.noise_multiplier, record.event.sample_rate, record.event.steps) == (sigma, 1 / 8, 8)
    assert obj.ledger.training.epsilon(DELTA) == pytest.approx(alone, rel=1e-9)
    assert result.protected["training"] == (pytest.approx(alone, rel=1e-9), DELTA)


def test_auto_runs_the_untuned_training_when_no_tuning_method_beats_it_on_the_proxy(monkeypatch, at_the_choice):
    # the simulations replaced by fixed paired proxy losses (each is tested on its own): the untuned run's are lower
    # than every tuning method's in every repeat, so auto runs it, charged once, and says so
    from botorch_dp.methods import training_choice as tc

    fixed = {"training_selection": 0.6, "subsample_tuning": 0.55, "proxy_then_train": 0.5, "untuned": 0.4}
    for cls in (tc.TrainingSelectionMethod, tc.SubsampleTuningMethod, tc.ProxyThenTrainMethod, tc.UntunedMethod):
        monkeypatch.setattr(cls, "simulate_training", lambda self, proxy, seed: fixed[self.name] + 0.01 * seed)
    obj = _objective(INFORMATIVE)
    with pytest.warns(SettingsWarning, match="ran the untuned training once"):
        result = _tune(obj, INFORMATIVE, proxy=_proxy(), plan_options=FAST_PLAN)
    assert at_the_choice == {"evaluations": 0, "trainings": 0, "validations": 0}
    assert result.method == "untuned" == result.methods.recommended_name
    (record,) = obj.ledger.training.records()
    assert record.run_id.endswith("-untuned") and obj.ledger.validation.records() == []
    assert result.hyperparameters["lr"] == pytest.approx(math.sqrt(1e-4 * 3.0), rel=1e-9)  # the centre
    epsilon = obj.ledger.training.epsilon(DELTA)
    assert result.protected["training"] == (pytest.approx(epsilon, rel=1e-12), DELTA) and epsilon <= EPS
    assert "ran the untuned training once" in result.advice and json.loads(result.to_json())["method"] == "untuned"
