"""tune(..., protect="training", proxy=...) runs subsample tuning with its epsilon split chosen on the PUBLIC proxy
(issue 41 item 2: "the split of epsilon between tuning and the final training is chosen by the library and stated"):
method="subsample_tuning" and auto's subsample_tuning winner choose tau on the proxy unless plan_options fixes it,
the result states the split and how it was chosen, and the ledger composes the phase and the final run to what it
states. The plans are quick stand-ins (tests/methods/test_cheap_tuning.py: each real plan takes seconds) except in
the last test."""

import warnings

import numpy as np
import pytest

from botorch_dp.methods import cheap_tuning as ct
from botorch_dp.methods.cheap_plan import SHARE_GRID, plan_subsample_tuning
from botorch_dp.privacy.ledger import DPSGDRun
from botorch_dp.privacy.seeding import PrivacyWarning
from botorch_dp.tuning.one_call import tune
from tests.methods.test_cheap_tuning import quick_plan
from tests.tuning.test_tune_auto_training import INFORMATIVE, _objective, _proxy

EPS, DELTA = 3.0, 1e-5
LOSSES = {0.05: 0.5, 0.1: 0.3, 0.2: 0.4, 0.3: 0.6}  # the simulated proxy losses: tau = 0.1 is the right answer


@pytest.fixture
def quick_plans(monkeypatch):
    r"""``cheap_tuning``'s plans replaced by ``quick_plan``; the list of what each was asked."""
    asked = []
    monkeypatch.setattr(ct, "plan_subsample_tuning", lambda **kw: asked.append(kw) or quick_plan(**kw))
    return asked


@pytest.fixture
def simulated(monkeypatch):
    r"""Each tau's simulation replaced by ``LOSSES``; what the private objective had seen at each call."""
    seen = []

    def simulate(objective, proxy, configs, plan, rows, noise_seeds):
        seen.append((objective.evaluations, len(objective.ledger.training.records()), len(proxy.y_train)))
        return LOSSES[plan.tuning_share]

    monkeypatch.setattr(ct, "simulated_share_loss", simulate)
    return seen


def _tune(obj, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)
        return tune(obj, INFORMATIVE, **{"epsilon": EPS, "delta": DELTA, "progress": False, "seed": 3, **kw})


def _charged_as_planned(obj, result, share, num_trials=2):
    r"""The ledger holds the phase and the final run of ``share``'s plan, composed to what the result states."""
    plan = quick_plan(epsilon=EPS, delta=DELTA, sample_rate=1 / 8, steps=8, num_trials=num_trials,
                      subsample_fraction=0.5, tuning_share=share)  # fmt: skip
    phase, final = obj.ledger.training.records()
    assert np.array_equal(phase.event.rdp, plan.phase_rdp) and "Poisson subset" in phase.event.description
    assert final.event == DPSGDRun(plan.final_noise_multiplier, 1 / 8, 8) and final.run_id.endswith("-final")
    epsilon = obj.ledger.training.epsilon(DELTA)
    assert epsilon == pytest.approx(plan.total_epsilon, rel=1e-12)
    assert result.protected == {"training": (pytest.approx(epsilon, rel=1e-12), DELTA), "validation": None}


@pytest.mark.privacy_fast
def test_method_subsample_tuning_with_a_proxy_chooses_tau_there_and_states_it(quick_plans, simulated):
    obj = _objective(INFORMATIVE)
    result = _tune(obj, method="subsample_tuning", protect="training", proxy=_proxy(),
                   plan_options={"num_configurations": 2})  # fmt: skip
    assert result.method == "subsample_tuning"
    # every tau of the grid simulated on the proxy's 160 records, before anything private was evaluated or charged
    assert simulated == [(0, 0, 160)] * len(SHARE_GRID)
    assert [kw["tuning_share"] for kw in quick_plans] == [*SHARE_GRID, 0.1]  # the grid, then the private run's plan
    report = result.guarantee_report()
    assert "tuning share tau = 0.1 of epsilon^2" in report
    assert "tau chosen on the proxy: tau = 0.1 had the lowest simulated final loss" in report
    assert all(f"tau = {t:g}: {v:.4g}" in report for t, v in LOSSES.items())
    assert result.runs[0].result.result.settings["tuning_share"] == {
        "value": 0.1, "chosen": "proxy", "proxy_losses": LOSSES
    }  # fmt: skip
    _charged_as_planned(obj, result, 0.1)


def test_plan_options_tuning_share_fixes_tau_and_the_proxy_is_not_simulated(quick_plans, simulated):
    obj = _objective(INFORMATIVE)
    result = _tune(obj, method="subsample_tuning", protect="training", proxy=_proxy(),
                   plan_options={"num_configurations": 2, "tuning_share": 0.2})  # fmt: skip
    assert simulated == [] and [kw["tuning_share"] for kw in quick_plans] == [0.2]
    assert "tuning share tau = 0.2 of epsilon^2" in result.guarantee_report()
    assert "tau given by the caller" in result.guarantee_report()
    _charged_as_planned(obj, result, 0.2)


def test_without_a_proxy_the_default_tau_is_stated(quick_plans, simulated):
    obj = _objective(INFORMATIVE)
    result = _tune(obj, method="subsample_tuning", protect="training", plan_options=None)
    assert simulated == [] and [kw["tuning_share"] for kw in quick_plans] == [0.3]
    assert "tau the public default (no proxy to choose it on)" in result.guarantee_report()


def test_without_a_proxy_plan_options_tuning_share_fixes_tau(quick_plans, simulated):
    # fixing tau needs no proxy (the proxy only chooses tau when it is not fixed)
    obj = _objective(INFORMATIVE)
    result = _tune(obj, method="subsample_tuning", protect="training", plan_options={"tuning_share": 0.2})
    assert simulated == [] and [kw["tuning_share"] for kw in quick_plans] == [0.2]
    assert "tuning share tau = 0.2 of epsilon^2" in result.guarantee_report()
    assert "tau given by the caller" in result.guarantee_report()
    _charged_as_planned(obj, result, 0.2, num_trials=8)


@pytest.mark.privacy_fast
def test_auto_runs_its_subsample_tuning_winner_with_tau_chosen_on_the_proxy(monkeypatch, quick_plans, simulated):
    # the method comparison's simulations replaced by fixed paired losses (each is tested on its own): subsample
    # tuning wins; the comparison simulated it at the default tau, the private run chooses tau on the proxy
    from botorch_dp.methods import training_choice as tc

    fixed = {"training_selection": 0.6, "subsample_tuning": 0.3, "proxy_then_train": 0.5, "untuned": 0.7}
    for cls in (tc.TrainingSelectionMethod, tc.SubsampleTuningMethod, tc.ProxyThenTrainMethod, tc.UntunedMethod):
        monkeypatch.setattr(cls, "simulate_training", lambda self, proxy, seed: fixed[self.name] + 0.01 * seed)
    obj = _objective(INFORMATIVE)
    result = _tune(obj, protect="training", proxy=_proxy(), plan_options={"num_configurations": 2, "num_repeats": 2})
    assert result.method == "subsample_tuning" == result.methods.recommended_name and result.advice is None
    assert simulated == [(0, 0, 160)] * len(SHARE_GRID)
    assert "tau chosen on the proxy: tau = 0.1" in result.guarantee_report()
    _charged_as_planned(obj, result, 0.1)


class _Planned(Exception):
    r"""Raised by the plan spy: the comparison's subsample simulation stops at its plan, nothing trains."""


@pytest.mark.privacy_fast
@pytest.mark.parametrize(("options", "tau"), [({"tuning_share": 0.2}, 0.2), ({}, 0.3)])
def test_auto_simulates_subsample_tuning_at_the_callers_fixed_tau_else_the_default(monkeypatch, options, tau):
    # the comparison simulates what the private run would run: the caller's fixed tau, else the default tau = 0.3;
    # the other methods' simulations are fixed losses, subsample tuning's is the real one up to its plan (a spy)
    from botorch_dp.methods import cheap_plan
    from botorch_dp.methods import training_choice as tc

    for cls in (tc.TrainingSelectionMethod, tc.ProxyThenTrainMethod, tc.UntunedMethod):
        monkeypatch.setattr(cls, "simulate_training", lambda self, proxy, seed: 0.5)
    asked = []

    def spy(**kw):
        asked.append(kw)
        raise _Planned

    monkeypatch.setattr(cheap_plan, "plan_subsample_tuning", spy)
    obj = _objective(INFORMATIVE)
    with pytest.raises(_Planned):
        _tune(obj, protect="training", proxy=_proxy(), plan_options={"num_configurations": 2, **options})
    assert [kw["tuning_share"] for kw in asked] == [tau] and asked[0]["num_trials"] == 2
    assert obj.evaluations == 0 and obj.ledger.training.records() == []


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"method": "subsample_tuning", "plan_options": {"tuning_share": 1.5}}, r"plan_options\['tuning_share'\]"),
        ({"method": "subsample_tuning", "plan_options": {"tuning_share": "0.2"}}, r"plan_options\['tuning_share'\]"),
        ({"method": "proxy_then_train", "plan_options": {"tuning_share": 0.2}}, r"plan_options\['tuning_share'\]"),
        ({"method": "subsample_tuning", "proxy": lambda X: X}, "proxy"),
        ({"method": "training_selection"}, "proxy="),
        # without a proxy: only subsample tuning takes a fixed tau (auto without proxy= is training_selection)
        *(
            (
                {"proxy": None, "method": m, "plan_options": {"tuning_share": 0.2}},
                rf"plan_options\['tuning_share'\] with method='{m}'",
            )
            for m in ("training_selection", "untuned")
        ),
        (
            {"proxy": None, "method": "auto", "plan_options": {"tuning_share": 0.2}},
            r"plan_options\['tuning_share'\] with method='training_selection'",
        ),
        (
            {"proxy": None, "protect": "validation", "plan_options": {"tuning_share": 0.2}},
            r"plan_options\['tuning_share'\] with protect='validation'",
        ),
        ({"proxy": None, "method": "subsample_tuning", "plan_options": {"tuning_share": 1.5}}, "tuning_share"),
        ({"proxy": None, "method": "subsample_tuning", "plan_options": {"num_repeats": 2}}, "give proxy= to plan on"),
    ],
)
def test_bad_share_options_are_refused_by_name_before_anything_trains(kwargs, match, simulated):
    obj = _objective(INFORMATIVE)
    with pytest.raises(ValueError, match=match):
        _tune(obj, **{"protect": "training", "proxy": _proxy(), **kwargs})
    assert simulated == [] and obj.evaluations == 0 and obj.ledger.training.records() == []


def test_method_subsample_tuning_with_a_proxy_composes_to_epsilon_with_the_real_plans():
    # slow (tests/slow_tests.txt): the real plans of the four shares; the fast versions above use quick plans
    obj = _objective(INFORMATIVE)
    result = _tune(obj, method="subsample_tuning", protect="training", proxy=_proxy(),
                   plan_options={"num_configurations": 2})  # fmt: skip
    chosen = result.runs[0].result.result.settings["tuning_share"]
    table = chosen["proxy_losses"]
    assert chosen["chosen"] == "proxy" and chosen["value"] == min(table, key=lambda t: table[t])
    plan = plan_subsample_tuning(epsilon=EPS, delta=DELTA, sample_rate=1 / 8, steps=8, num_trials=2,
                                 subsample_fraction=0.5, tuning_share=chosen["value"])  # fmt: skip
    phase, final = obj.ledger.training.records()
    assert (
        np.array_equal(phase.event.rdp, plan.phase_rdp) and final.event.noise_multiplier == plan.final_noise_multiplier
    )
    epsilon = obj.ledger.training.epsilon(DELTA)
    assert epsilon == pytest.approx(plan.total_epsilon, rel=1e-9) and 0.99 * EPS <= epsilon <= EPS
    assert result.protected["training"] == (pytest.approx(epsilon, rel=1e-9), DELTA)
    assert f"tau chosen on the proxy: tau = {chosen['value']:g}" in result.guarantee_report()
