r"""``select_training_runs(protect="both")``'s validation side accounted by the privacy profile (issue 41): with
``accounting="auto"`` or ``"profile"`` the Gaussian scores get the profile's larger per-trial ``μ₀``
(recomputed here), the validation ledger is charged once, before the first trial, exactly the calibrated
``(ε, δ)`` as one ``ValidationApproximateDP``, the RDP cross-check is stated (RDP at that ``μ₀`` states more
than ``ε``), and the exact max-of-K Gaussian selection at that ``μ₀`` meets ``(ε, δ)`` (quadrature); where
the ledger cannot take the entry, ``"profile"`` is refused before anything trains and ``"auto"`` uses RDP."""

import json
import math

import pytest

from botorch_dp.methods.training_runs import select_training_runs
from botorch_dp.privacy.analysis.private_selection import per_trial_mu_for_epsilon
from botorch_dp.privacy.analysis.selection_profile import per_trial_mu_for_epsilon_pld
from botorch_dp.privacy.ledger import (
    TRAINING_RDP_ORDERS,
    Gaussian,
    PrivacyLedger,
    ValidationApproximateDP,
    ValidationMechanism,
)
from tests.methods.test_training_runs import DELTA, objective
from tests.privacy.analysis.test_selection_binomial import _gaussian_selection_delta


@pytest.fixture(scope="module")
def small(data):
    return (data.X_train[:200], data.y_train[:200], data.X_val[:60], data.y_val[:60])


@pytest.mark.parametrize("accounting", ["auto", "profile"])
def test_the_scores_are_charged_the_calibrated_epsilon_delta_once_before_the_first_trial(small, accounting):
    obj = objective(small)
    result = select_training_runs(
        obj, epsilon=3.0, delta=DELTA, mean_trials=3, protect="both", score="error", seed=2, accounting=accounting,
        validation_epsilon=2.0, non_private_trials=True,
    )  # fmt: skip
    assert obj.seen == [(1, 1)] * result.num_trials  # both records exist before the first trial
    (record,) = obj.ledger.validation.records()
    stated = result.guarantee["validation"]
    assert record.event == ValidationApproximateDP(stated.description, 2.0, DELTA)  # exactly the calibrated (ε, δ)
    assert (stated.epsilon, stated.delta) == (2.0, DELTA) and obj.ledger.validation.epsilon(DELTA) == 2.0
    mu = stated.details["per_trial_mu"]
    assert mu == per_trial_mu_for_epsilon_pld(target_epsilon=2.0, target_delta=DELTA, mean_trials=3.0)
    mu_rdp = per_trial_mu_for_epsilon(
        target_epsilon=2.0, target_delta=DELTA, mean_trials=3.0, orders=TRAINING_RDP_ORDERS
    )
    assert stated.details["rdp_per_trial_mu"] == mu_rdp and mu > 1.2 * mu_rdp  # less noise than RDP
    assert stated.details["rdp_epsilon"] > 2.0  # the cross-check: RDP cannot certify this μ₀
    assert stated.details["noise_std"] == pytest.approx(1.0 / (60 * mu), rel=1e-12)  # the scores' noise is μ₀'s
    assert "privacy-profile" in stated.description and stated.details["accounting"] == "profile"
    # the exact max-of-K Gaussian selection (K geometric, E[K] = 3) at this μ₀ meets (2, 1e-5)
    assert _gaussian_selection_delta(mu, "truncated_negative_binomial", 3.0, None, 2.0) <= DELTA
    with pytest.raises(ValueError, match="no GDP mu covers"):
        obj.ledger.validation.mu()
    state = json.loads(json.dumps(obj.ledger.state_dict()))
    assert PrivacyLedger.from_state_dict(state).validation.records() == obj.ledger.validation.records()


def test_the_profile_is_refused_before_anything_where_the_validation_side_is_not_empty(small):
    obj = objective(small)
    obj.ledger.external.record(Gaussian(0.1), run_id="earlier", key="select")
    with pytest.raises(ValueError, match="accounting='profile' on the validation side"):
        select_training_runs(obj, epsilon=3.0, delta=DELTA, mean_trials=3, protect="both", seed=2, accounting="profile")
    assert obj.seen == [] and obj.ledger.training.records() == [] and len(obj.ledger.validation.records()) == 1


def test_auto_uses_rdp_where_the_profile_cannot_be_charged(small):
    obj = objective(small)
    obj.ledger.external.record(Gaussian(0.1), run_id="earlier", key="select")
    result = select_training_runs(obj, epsilon=3.0, delta=DELTA, mean_trials=3, protect="both", seed=2, max_trials=1)
    details = result.guarantee["validation"].details
    assert details["accounting"] == "rdp" and "already holds releases" in details["accounting_reason"]
    assert type(obj.ledger.validation.records()[-1].event) is ValidationMechanism
    assert math.isfinite(obj.ledger.validation.epsilon(DELTA))
