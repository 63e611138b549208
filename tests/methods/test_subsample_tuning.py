r"""``methods.subsample_tuning``: the ``Method`` that tunes on one Poisson subset of the training records
and trains once on all of them. Its plan is ``cheap_plan``'s at the objective's own run shape (tested
against independent accountants in test_cheap_plan.py); its scores' μ is the GDP μ of (ε, δ)."""

import math

import pytest
from scipy.stats import norm

# cheap_tuning binds cheap_plan's functions by name when first imported: import it before any test
# patches them, or a patched function would stay bound there for the rest of the session
import botorch_dp.methods.cheap_tuning  # noqa: F401
from botorch_dp.methods import cheap_plan as cp
from botorch_dp.methods.cheap_tuning import MIN_EXPECTED_SUBSET
from botorch_dp.methods.protocol import Method, MethodUnavailable
from botorch_dp.methods.subsample_tuning import SubsampleTuningMethod
from botorch_dp.methods.training_proxy import TrainingProxy
from botorch_dp.privacy.ledger import PrivacyLedger
from tests.methods.method_helpers import TRAINING_SPACE as SPACE
from tests.methods.method_helpers import training_proxy_data as _proxy_data

EPS, DELTA = 3.0, 1e-5


@pytest.fixture
def objective(training_objective):  # tests/methods/conftest.py: 160 training records, batches of 20
    return training_objective


def _gdp_delta(epsilon: float, mu: float) -> float:
    r"""The δ(ε) of μ-GDP (Dong, Roth & Su 2019, Corollary 2.13), written out."""
    return norm.cdf(-epsilon / mu + mu / 2) - math.exp(epsilon) * norm.cdf(-epsilon / mu - mu / 2)


@pytest.mark.parametrize("protect", ["both", "training"])
def test_the_scores_mu_is_the_gdp_mu_of_epsilon_and_delta_only_when_they_are_protected(protect):
    method = SubsampleTuningMethod(SPACE, EPS, DELTA, protect=protect, num_configurations=5)
    assert isinstance(method, Method) and method.gdp_mu is None  # its training charge is an RDP curve
    assert method.private_trainings == 6.0  # K on the subset, then the final run
    if protect == "training":
        assert method.score_mu is None
    else:
        assert _gdp_delta(EPS, method.score_mu) == pytest.approx(DELTA, rel=1e-6)
        assert _gdp_delta(EPS, method.score_mu * 1.01) > DELTA  # the largest μ that meets (ε, δ)


def test_the_plan_is_cheap_plans_at_the_objectives_run_shape_and_the_stated_defaults(objective, monkeypatch):
    asked = []
    monkeypatch.setattr(cp, "plan_subsample_tuning", lambda **kw: asked.append(kw) or "plan")
    proxy = TrainingProxy(objective, _proxy_data())
    assert SubsampleTuningMethod(SPACE, EPS, DELTA, num_configurations=4).plan(proxy) == "plan"
    given = SubsampleTuningMethod(SPACE, EPS, DELTA, subsample_fraction=0.25, tuning_share=0.1)
    given.plan(proxy)
    rate, steps, _ = proxy.run_shape()
    assert (rate, steps) == (1 / 8, 8)  # 160 records in batches of 20, one epoch
    common = dict(epsilon=EPS, delta=DELTA, sample_rate=rate, steps=steps)
    assert asked == [
        {**common, "num_trials": 4, "subsample_fraction": cp.DEFAULT_SUBSAMPLE_FRACTION, "tuning_share": 0.3},
        {**common, "num_trials": 8, "subsample_fraction": 0.25, "tuning_share": 0.1},
    ]
    assert "gamma = 0.5" in SubsampleTuningMethod(SPACE, EPS, DELTA).describe()
    assert "tau = 0.1" in given.describe() and "9 private trainings" in given.describe()


def test_the_smallest_expected_subset_is_allowed_and_one_record_less_is_not(objective, monkeypatch):
    monkeypatch.setattr(cp, "plan_subsample_tuning", lambda **kw: "plan")
    proxy = TrainingProxy(objective, _proxy_data())
    m = objective.num_training_records
    assert SubsampleTuningMethod(SPACE, EPS, DELTA, subsample_fraction=MIN_EXPECTED_SUBSET / m).plan(proxy) == "plan"
    below = SubsampleTuningMethod(SPACE, EPS, DELTA, subsample_fraction=(MIN_EXPECTED_SUBSET - 0.5) / m)
    with pytest.raises(MethodUnavailable, match="expected subset"):
        below.plan(proxy)


def test_it_is_simulated_on_data_never_on_a_proxy_objective_and_charges_only_the_objectives_ledger(objective):
    method = SubsampleTuningMethod(SPACE, EPS, DELTA)
    with pytest.raises(MethodUnavailable, match="simulate_training"):
        method.simulate(lambda X: X, None, 0)
    with pytest.raises(ValueError, match="ledger"):
        method.run_private(objective, ledger=PrivacyLedger(), seed=0)
    assert objective.ledger.training.records() == []  # refused before anything was trained


def test_subsample_tuning_is_unavailable_when_the_expected_subset_is_too_small(objective):
    method = SubsampleTuningMethod(SPACE, EPS, DELTA, subsample_fraction=0.05)  # 0.05 * 160 = 8 < 10 records
    with pytest.raises(MethodUnavailable, match="expected subset"):
        method.plan(TrainingProxy(objective, _proxy_data()))


@pytest.mark.parametrize("share", [None, 0.2])
def test_the_run_chooses_tau_on_the_proxy_unless_it_is_fixed_and_the_simulation_keeps_the_default(
    objective, monkeypatch, share
):
    from botorch_dp.methods import cheap_tuning as ct

    class Ran(Exception):
        pass

    asked = []

    def run(*args, **kwargs):
        asked.append(kwargs)
        raise Ran

    monkeypatch.setattr(ct, "tune_on_subsample", run)
    data = _proxy_data()
    method = SubsampleTuningMethod(SPACE, EPS, DELTA, protect="training").with_tuning_share(share, data)
    assert method.proxy_data is data and method.tuning_share == share
    assert ("tau chosen on the proxy at the run" in method.describe()) == (share is None)
    with pytest.raises(Ran):
        method.run_private(objective, ledger=objective.ledger, seed=0)
    (kwargs,) = asked
    assert kwargs["proxy"] is data and kwargs["tuning_share"] == share  # None: tune_on_subsample chooses on the proxy
    # the simulation of the comparison (tune's method choice) plans at the given tau, else at the default
    planned = []
    monkeypatch.setattr(cp, "plan_subsample_tuning", lambda **kw: planned.append(kw["tuning_share"]) or "plan")
    method.plan(TrainingProxy(objective, data))
    assert planned == [cp.DEFAULT_TUNING_SHARE if share is None else share]
    # without a proxy nor a share: the stated default (tune_on_subsample says so)
    asked.clear()
    with pytest.raises(Ran):
        SubsampleTuningMethod(SPACE, EPS, DELTA).run_private(objective, ledger=objective.ledger, seed=0)
    assert asked[0]["proxy"] is None and asked[0]["tuning_share"] is None
