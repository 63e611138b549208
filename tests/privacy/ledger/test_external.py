r"""Releases made outside the package's mechanisms (botorch_dp/privacy/ledger/external.py): a check
holds and records nothing and refuses exactly past the closed-form budget ``√(Σμ² + μ²) ≤ B``; a
record is a fact, never refused for the budget and never merged (the same key twice counts twice);
a training run id is used once; a curve is evaluated once per order and checked."""

import math

import pytest

from botorch_dp.privacy.ledger import TRAINING_RDP_ORDERS, PrivacyBudgetExceeded, PrivacyLedger
from botorch_dp.privacy.ledger.external import evaluate_curve


def test_a_check_refuses_exactly_past_the_closed_form_budget_and_holds_nothing():
    ledger = PrivacyLedger(validation_mu_budget=0.5)
    ledger.record_validation_step(0.3, run_id="run", key="step-0000")
    ledger.check_validation_step(0.4 * (1 - 1e-6))  # 0.3² + 0.4² = 0.5²
    with pytest.raises(PrivacyBudgetExceeded):
        ledger.check_validation_step(0.4 * (1 + 1e-6))
    assert ledger.num_reservations() == 0 and len(ledger.records()) == 1


def test_a_record_is_never_refused_nor_merged():
    ledger = PrivacyLedger(validation_mu_budget=0.5)
    for _ in range(2):  # the same (run_id, key) twice: a step replayed with fresh noise
        assert ledger.record_validation_step(0.4, run_id="run", key="step-0000") is True
    assert ledger.validation_mu() == pytest.approx(0.4 * math.sqrt(2.0), rel=1e-12)  # past the budget: a fact
    assert len({r.release_id for r in ledger.records()}) == 2
    with pytest.raises(PrivacyBudgetExceeded):
        ledger.check_validation_step(1e-3)
    ledger.record_validation_pure(1.0, run_id="run", key="select")
    assert ledger.validation_pure_epsilons == {("run", "select"): 1.0}


def test_a_training_run_id_is_used_once_and_nothing_changes_when_refused():
    ledger = PrivacyLedger(training_epsilon_budget=1.0, training_delta=1e-5)
    ledger.record_training_run(run_id=0, noise_multiplier=1.0, sample_rate=0.01, steps=100)
    with pytest.raises(ValueError, match="Training run id 0 is already in the ledger"):
        ledger.record_training_mechanism(0, rdp=lambda a: a / 8.0, description="Gaussian sigma=2")
    with pytest.raises(ValueError, match="sample_rate"):
        ledger.record_training_run(run_id=1, noise_multiplier=1.0, sample_rate=2.0, steps=100)
    assert ledger.training_run_ids() == [0]


def test_a_curve_is_evaluated_once_per_order_and_recorded_as_evaluated():
    calls = []
    curve = evaluate_curve(lambda alpha: calls.append(alpha) or alpha / 8.0)
    assert calls == list(TRAINING_RDP_ORDERS) and curve == tuple(a / 8.0 for a in TRAINING_RDP_ORDERS)
    ledger = PrivacyLedger()
    ledger.record_validation_mechanism(lambda a: a / 8.0, run_id="run", key="hypo", description="sigma=2")
    assert ledger.validation_mechanisms[("run", "hypo")].rdp == curve
    with pytest.raises(ValueError, match="rdp must be a callable"):
        evaluate_curve(0.5)
    with pytest.raises(ValueError, match="rdp at order"):
        ledger.check_validation_mechanism(lambda a: -1.0)
