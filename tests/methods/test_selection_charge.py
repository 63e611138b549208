r"""What a private selection over DP-SGD runs charges (``methods.selection_charge``): the training entry
is the profile's ``(ε, δ)`` or the RDP curve, both sides are admitted before either is recorded (a
refused side leaves the ledger as it was), the profile entry is refused where the ledger cannot take
it, and the validation statement's ``ε`` and noise are recomputed here independently."""

from __future__ import annotations

import math

import numpy as np
import pytest

from botorch_dp.baselines.base import BaselineGuarantee
from botorch_dp.methods.selection_charge import (
    profile_refused,
    record_up_front,
    training_event,
    validation_guarantee,
)
from botorch_dp.privacy.analysis.rdp import rdp_curve_epsilon
from botorch_dp.privacy.ledger import ApproximateDP, PrivacyBudgetExceeded, PrivacyLedger, TrainingMechanism
from botorch_dp.privacy.ledger.events import SELECTION_PART, TRAINING_RDP_ORDERS
from botorch_dp.privacy.mechanisms import GaussianScoreMechanism
from botorch_dp.training.selection_accounting import SelectionAccounting

ORDERS = np.asarray(TRAINING_RDP_ORDERS, dtype=np.float64)
CURVE = ORDERS * 0.02  # a Gaussian's curve α/(2σ²) at σ = 5
GUARANTEES = {
    "training": BaselineGuarantee(2.0, 1e-5, None, "the training side"),
    "validation": BaselineGuarantee(1.0, 1e-5, None, "the validation side"),
}


def _rdp_charge(curve=CURVE, mu: float = 0.5) -> dict:
    r"""A validation charge as ``validation_charge`` returns it for RDP (its curve recorded)."""
    return dict(mu=mu, event=None, curve=list(curve), accounting="rdp", reason="a test", rdp_mu=mu, rdp_epsilon=1.0)


def _accounting(kind: str) -> SelectionAccounting:
    return SelectionAccounting(kind, "a test", 1.3, 2.0, CURVE, 2.4, 1.5)


def test_the_training_entry_is_the_profiles_epsilon_delta_or_the_rdp_curve():
    profile = training_event(_accounting("profile"), GUARANTEES["training"])
    assert profile == ApproximateDP("the training side", 2.0, 1e-5)
    rdp = training_event(_accounting("rdp"), GUARANTEES["training"])
    assert (
        isinstance(rdp, TrainingMechanism)
        and rdp.rdp == tuple(CURVE.tolist())
        and rdp.description == "the training side"
    )


def test_both_sides_are_recorded_or_neither():
    rdp = training_event(_accounting("rdp"), GUARANTEES["training"])
    ledger = PrivacyLedger()
    record_up_front(ledger, "sel", GUARANTEES, rdp, _rdp_charge())
    assert ledger.training.run_ids() == ["sel"] and len(ledger.validation.records()) == 1
    (record,) = ledger.validation.records()
    assert record.run_id == "sel" and SELECTION_PART in record.key and record.event.rdp == tuple(CURVE.tolist())
    tight = PrivacyLedger(validation_mu_budget=1e-3)  # the validation side cannot be admitted
    with pytest.raises(PrivacyBudgetExceeded):
        record_up_front(
            tight, "sel", GUARANTEES, training_event(_accounting("rdp"), GUARANTEES["training"]), _rdp_charge()
        )
    assert tight.training.run_ids() == [] and tight.validation.records() == []  # the training side was not recorded
    alone = PrivacyLedger()
    record_up_front(alone, "sel", GUARANTEES, training_event(_accounting("profile"), GUARANTEES["training"]), None)
    assert alone.training.run_ids() == ["sel"] and alone.validation.records() == []


def test_the_profile_entry_is_refused_where_the_ledger_cannot_take_it():
    assert profile_refused(PrivacyLedger(), 1e-5) is None
    assert "exceeds the ledger's training_delta=1e-06" in profile_refused(
        PrivacyLedger(training_epsilon_budget=5.0, training_delta=1e-6), 1e-5
    )
    used = PrivacyLedger()
    record_up_front(used, "first", GUARANTEES, TrainingMechanism("a run", tuple(CURVE.tolist())), None)
    assert "already holds training entries" in profile_refused(used, 1e-5)


def test_the_validation_statement_is_the_curves_epsilon_and_the_scores_noise():
    mechanism = GaussianScoreMechanism(loss_clip=2.0, per_trial_mu=0.5)
    k_args = {"mean_trials": 3.0, "distribution": "truncated_negative_binomial"}
    stated = validation_guarantee(
        _rdp_charge(), 1e-5, 9.0, 2.0, 40, mechanism, "loss", k_args, "Charged up front."
    )  # 9.0: the target, which an RDP charge states at its curve's conversion instead
    assert stated.epsilon == pytest.approx(rdp_curve_epsilon(CURVE, ORDERS, 1e-5)[0], rel=1e-12)
    # a Gaussian curve α/(2σ²) has ε ≤ 1/(2σ²) + σ⁻¹√(2 log(1/δ)) (the classical conversion)
    assert stated.epsilon <= 0.02 + math.sqrt(2 * 0.04 * math.log(1e5))
    assert stated.details["noise_std"] == pytest.approx(2.0 / (40 * 0.5), rel=1e-15)
    assert stated.delta == 1e-5 and stated.description.endswith("Charged up front.")
    assert "E[K] = 3" in stated.description and "0.5-GDP" in stated.description


def test_the_scores_charge_is_the_profiles_calibrated_epsilon_delta_and_meets_it_exactly():
    r"""The fast version (no training): ``validation_charge`` with ``"auto"`` on an empty ledger takes the
    profile's μ₀ (larger than RDP's; RDP at it states more than ε), its event is the target ``(ε, δ)``, and
    the exact max-of-K Gaussian selection at that μ₀ meets ``(ε, δ)`` (quadrature, ``test_selection_binomial``)."""
    from botorch_dp.methods.selection_charge import validation_charge
    from botorch_dp.privacy.analysis.selection_profile import per_trial_mu_for_epsilon_pld, selection_epsilon_pld
    from botorch_dp.privacy.ledger import ValidationApproximateDP
    from tests.privacy.analysis.test_selection_binomial import _gaussian_profile, _gaussian_selection_delta

    k_args = {"mean_trials": 3.0, "distribution": "truncated_negative_binomial", "tnb_eta": 1.0}
    charge = validation_charge(PrivacyLedger(), "auto", 3.0, 1e-5, k_args)
    assert charge["accounting"] == "profile" and charge["curve"] is None
    assert charge["event"] == ValidationApproximateDP("(checked)", 3.0, 1e-5)
    assert charge["mu"] == per_trial_mu_for_epsilon_pld(target_epsilon=3.0, target_delta=1e-5, mean_trials=3.0)
    assert charge["mu"] > 1.3 * charge["rdp_mu"] and charge["rdp_epsilon"] > 3.0
    # the profile bound over a GDP profile computed here (``gdp_delta`` on its own grid) states at most (3, 1e-5) ...
    assert selection_epsilon_pld(_gaussian_profile(charge["mu"]), expected_trials=3.0, delta=1e-5) <= 3.0
    # ... and the exact selection meets it (a lower check: at this μ₀ the exact δ is ~1.7e-7, reached at 1.2 μ₀)
    assert _gaussian_selection_delta(charge["mu"], "truncated_negative_binomial", 3.0, None, 3.0) <= 1e-5
    rdp = validation_charge(PrivacyLedger(), "rdp", 3.0, 1e-5, k_args)
    assert rdp["accounting"] == "rdp" and rdp["event"] is None and rdp["mu"] == charge["rdp_mu"]


def test_the_scores_profile_charge_is_refused_where_the_validation_budget_cannot_state_it():
    from botorch_dp.methods.selection_charge import validation_charge

    k_args = {"mean_trials": 3.0, "distribution": "truncated_negative_binomial", "tnb_eta": 1.0}
    # a validation budget whose GDP statement at δ is below ε: "profile" refused by name, "auto" falls back
    tight = PrivacyLedger(validation_mu_budget=0.5)
    with pytest.raises(ValueError, match="accounting='profile' on the validation side"):
        validation_charge(tight, "profile", 3.0, 1e-5, k_args)
    assert validation_charge(tight, "auto", 3.0, 1e-5, k_args)["accounting"] == "rdp"
    assert tight.validation.records() == []
