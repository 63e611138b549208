r"""Releases made outside the package's mechanisms (botorch_dp/privacy/ledger/external.py): a check
holds and records nothing and refuses exactly past the closed-form budget ``√(Σμ² + μ²) ≤ B``; a
record is a fact, never refused for the budget and never merged (the same key twice counts twice);
the event's type picks the side; a training run id is used once; bad input is refused naming it
before anything is recorded."""

import math

import pytest
from scipy.special import ndtr

from botorch_dp.privacy.ledger import (
    TRAINING_RDP_ORDERS,
    ApproximateDP,
    DPSGDRun,
    Gaussian,
    PrivacyBudgetExceeded,
    PrivacyLedger,
    PureDP,
    TrainingMechanism,
    ValidationMechanism,
)


def test_a_check_refuses_exactly_past_the_closed_form_budget_and_holds_nothing():
    ledger = PrivacyLedger(validation_mu_budget=0.5)
    ledger.external.record(Gaussian(0.3), run_id="run", key="step-0000")
    ledger.external.check(Gaussian(0.4 * (1 - 1e-6)))  # 0.3² + 0.4² = 0.5²
    with pytest.raises(PrivacyBudgetExceeded, match="a step with mu=0.4"):
        ledger.external.check(Gaussian(0.4 * (1 + 1e-6)))
    # a pure ε-DP release is checked at its GDP charge μ = 2Φ⁻¹(e^ε/(1 + e^ε)), i.e. ε = logit(Φ(μ/2))
    for scale, admitted in ((1 - 1e-6, True), (1 + 1e-6, False)):
        p = ndtr(0.4 * scale / 2)
        event = PureDP(math.log(p / (1 - p)))
        if admitted:
            ledger.external.check(event)
        else:
            with pytest.raises(PrivacyBudgetExceeded, match="a release with epsilon"):
                ledger.external.check(event)
    assert ledger.reservation_holders() == [] and len(ledger.records()) == 1


def test_a_record_is_never_refused_nor_merged_and_returns_its_release_id():
    ledger = PrivacyLedger(validation_mu_budget=0.5)
    ids = [ledger.external.record(Gaussian(0.4), run_id="run", key="step-0000") for _ in range(2)]
    assert ledger.validation.mu() == pytest.approx(0.4 * math.sqrt(2.0), rel=1e-12)  # past the budget: a fact
    assert [r.release_id for r in ledger.records()] == ids and len(set(ids)) == 2
    with pytest.raises(PrivacyBudgetExceeded):
        ledger.external.check(Gaussian(1e-3))
    ledger.external.record(PureDP(1.0), run_id="run", key="select")
    assert [(r.key, r.event) for r in ledger.validation.records()][-1] == ("select", PureDP(1.0))


def test_the_event_type_picks_the_side_and_its_budget():
    ledger = PrivacyLedger(validation_mu_budget=0.5, training_epsilon_budget=1.0, training_delta=1e-5)
    curve = ValidationMechanism.from_rdp("sigma=2", lambda a: a / 8.0)
    ledger.external.record(curve, run_id="hypo", key="select")
    ledger.external.record(TrainingMechanism.from_rdp("amp", lambda a: a / 8.0), run_id=7)
    ledger.external.record(DPSGDRun(noise_multiplier=1.0, sample_rate=0.01, steps=100), run_id="sgd")
    assert [(r.side, r.run_id) for r in ledger.records()] == [
        ("validation", "hypo"),
        ("training", 7),
        ("training", "sgd"),
    ]
    assert ledger.validation.rdp_curve() == pytest.approx([a / 8.0 for a in TRAINING_RDP_ORDERS], rel=1e-12)
    assert ledger.training.run_ids() == [7, "sgd"] and list(ledger.training.runs()) == ["sgd"]
    # the validation curve α/8 is within α B²/2 = α/8 at every order: exactly the whole budget
    with pytest.raises(PrivacyBudgetExceeded):
        ledger.external.check(Gaussian(1e-3))
    # an (ε, δ) entry is admitted only as the first training entry (filters): refused here
    with pytest.raises(PrivacyBudgetExceeded):
        ledger.external.check(ApproximateDP("a selection", 0.1, 1e-7))


def test_a_training_run_id_is_used_once_and_bad_input_is_refused_before_recording():
    ledger = PrivacyLedger(training_epsilon_budget=1.0, training_delta=1e-5)
    ledger.external.record(DPSGDRun(noise_multiplier=1.0, sample_rate=0.01, steps=100), run_id=0)
    with pytest.raises(ValueError, match="Training run id 0 is already in the ledger"):
        ledger.external.record(TrainingMechanism.from_rdp("Gaussian sigma=2", lambda a: a / 8.0), run_id=0)
    for bad, kwargs, named in [
        (DPSGDRun(noise_multiplier=1.0, sample_rate=2.0, steps=100), {"run_id": 1}, "sample_rate"),
        (DPSGDRun(noise_multiplier=1.0, sample_rate=0.01, steps=100), {"run_id": 1, "key": "x"}, "key='x'"),
        (DPSGDRun(noise_multiplier=1.0, sample_rate=0.01, steps=100), {"run_id": 1.5}, "run_id"),
        (Gaussian(0.1), {"run_id": "r"}, "key must be a non-empty string"),
        (Gaussian(0.1), {"run_id": "", "key": "k"}, "run_id"),
        (Gaussian(0.1), {"run_id": "r", "key": " k"}, "key"),
        ((1.0, 0.01, 100), {"run_id": 1}, "event must be"),
    ]:
        with pytest.raises(ValueError, match=named):
            ledger.external.record(bad, **kwargs)
    with pytest.raises(ValueError, match="steps"):
        ledger.external.check(DPSGDRun(noise_multiplier=1.0, sample_rate=0.01, steps=0))
    assert ledger.training.run_ids() == [0] and ledger.validation.records() == []
