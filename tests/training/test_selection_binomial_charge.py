r"""Binomial ``K`` in the DP-SGD selection's accounting (``training.selection_accounting``): ``accounting="auto"``
calibrates both bounds and charges the one needing less noise, with the other as the cross-check; the profile's
charge meets the target by the bound recomputed from dp_accounting's PLD, the RDP curve by the ledger's conversion."""

from __future__ import annotations

import pytest

from botorch_dp.privacy.analysis.dp_sgd_selection import dp_sgd_privacy_profile
from botorch_dp.privacy.analysis.selection_profile import selection_delta_pld
from botorch_dp.training.selection_accounting import (
    choose_selection_accounting,
    selection_epsilon,
    selection_rdp_curve,
    trial_rdp_curve,
)

DELTA = 1e-5
SHAPE = (0.1, 10)  # one epoch at Opacus's rate q = 0.1
BINOMIAL = dict(mean_trials=5.0, distribution="binomial", binomial_rounds=10)


def test_auto_charges_the_binomial_selection_by_the_bound_that_needs_less_noise():
    auto = choose_selection_accounting(
        accounting="auto", target_epsilon=3.0, target_delta=DELTA, shapes=[SHAPE], **BINOMIAL
    )
    rdp = choose_selection_accounting(
        accounting="rdp", target_epsilon=3.0, target_delta=DELTA, shapes=[SHAPE], **BINOMIAL
    )
    # the RDP charge meets the target as the ledger converts its curve
    curve = selection_rdp_curve(trial_rdp_curve(rdp.noise_multiplier, [SHAPE]), **BINOMIAL)
    assert 0.99 * 3.0 <= selection_epsilon(curve, DELTA) == rdp.epsilon <= 3.0
    # on a DP-SGD trial the profile bound is the tighter for binomial K too: less noise, same target
    assert auto.accounting == "profile" and auto.noise_multiplier < 0.95 * rdp.noise_multiplier
    assert auto.rdp_noise_multiplier == rdp.noise_multiplier
    assert auto.epsilon <= 3.0 < auto.rdp_epsilon  # the cross-check: RDP at the profile's σ states more
    profile = dp_sgd_privacy_profile(noise_multiplier=auto.noise_multiplier, sample_rate=SHAPE[0], steps=SHAPE[1])
    bound = selection_delta_pld(profile, 3.0, expected_trials=5.0, distribution="binomial", max_trials=10)
    assert bound <= DELTA
    assert "accounting='auto'" in auto.reason


def test_binomial_accounting_refuses_a_missing_number_of_rounds():
    with pytest.raises(ValueError, match="binomial_rounds"):
        choose_selection_accounting(
            accounting="rdp", target_epsilon=3.0, target_delta=DELTA, shapes=[SHAPE], mean_trials=5.0,
            distribution="binomial",
        )  # fmt: skip
