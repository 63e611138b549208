"""Tests for the privacy-profile accounting of private selection over DP-SGD runs (training/selection_accounting.py,
selection_charge.py, private_selection.py's ``accounting=``): the profile bound needs less noise than RDP at the
same ε (pinned numbers for one Opacus curve, recomputed from dp_accounting's PLD and Opacus's compute_rdp here),
the ledger records the profile's (ε, δ) and reads back the total an independent computation gives, and a second
charge on the same ledger composes without exceeding its budget."""

import math

import numpy as np
import pytest
from dp_accounting.pld import privacy_loss_distribution
from opacus.accountants.analysis.rdp import compute_rdp

from botorch_dp.methods.training_runs import select_training_runs
from botorch_dp.privacy.analysis.dp_sgd_selection import PROFILE_EPSILONS
from botorch_dp.privacy.analysis.selection_profile import PrivacyProfile, selection_delta_pld, selection_epsilon_pld
from botorch_dp.privacy.ledger import TRAINING_RDP_ORDERS, ApproximateDP, PrivacyBudgetExceeded, PrivacyLedger
from botorch_dp.training import DPSGDConfig, TrainingConfig
from botorch_dp.training.selection_accounting import (
    calibrate_selection_noise,
    calibrate_selection_noise_profile,
    choose_selection_accounting,
    trial_privacy_profile,
)
from botorch_dp.tuning import Hyperparameter, SearchSpace, TorchModelTuningObjective

ORDERS = np.asarray(TRAINING_RDP_ORDERS)
DELTA = 1e-5
SHAPE = (0.1, 10)  # Opacus's Poisson rate and steps of one epoch of 200 records at batch 20
SPACE = SearchSpace([Hyperparameter("lr", 0.05, 0.5, log_scale=True), Hyperparameter("momentum", 0.0, 0.9)])
TRAINING = TrainingConfig(epochs=1, batch_size=20, hidden_sizes=(8,), seed=0)


# ---------------------------------------------------------------------- independent computations
def pld_profile(sigma, rate, steps):
    r"""dp_accounting's PLD of ``steps`` Poisson-subsampled Gaussians, read on the library's ε grid."""
    pld = privacy_loss_distribution.from_gaussian_mechanism(
        standard_deviation=sigma, sensitivity=1.0, sampling_prob=rate, value_discretization_interval=1e-3
    ).self_compose(steps)
    return PrivacyProfile(PROFILE_EPSILONS, np.clip(pld.get_delta_for_epsilon(PROFILE_EPSILONS), 0.0, 1.0))


def rdp_selection_epsilon(sigma, mean_trials, delta=DELTA):
    r"""Papernot & Steinke Thm. 2 (η = 1, γ = 1/E[K]) over Opacus's compute_rdp, converted on the grid."""
    base = np.asarray(compute_rdp(q=SHAPE[0], noise_multiplier=sigma, steps=SHAPE[1], orders=ORDERS))
    log_k = math.log(mean_trials)
    hat = min(log_k, float(np.min((1 - 1 / ORDERS) * base + log_k / ORDERS)))
    curve = base + 2.0 * hat + log_k / (ORDERS - 1)
    return float(np.min(curve + np.log1p(-1 / ORDERS) - (math.log(delta) + np.log(ORDERS)) / (ORDERS - 1)))


# ---------------------------------------------------------------------- fast: one σ
@pytest.mark.privacy_fast
def test_at_one_noise_the_profile_bound_meets_a_target_the_rdp_bound_misses():
    sigma, target = 1.3, 3.0
    profile = trial_privacy_profile(sigma, (SHAPE,))
    np.testing.assert_array_equal(profile.deltas, pld_profile(sigma, *SHAPE).deltas)
    # at σ = 1.3 (E[K] = 10): the profile bound states (3, 4.4e-7) (5.2e-7 before its bins were refined,
    # issue 41 third pass), RDP only (3.78, 1e-5)
    assert selection_delta_pld(profile, target, expected_trials=10) == pytest.approx(4.36e-7, rel=0.01)
    assert rdp_selection_epsilon(sigma, 10) == pytest.approx(3.784, abs=1e-3)


# ---------------------------------------------------------------------- slow: the calibration
def test_the_profile_calibrated_noise_is_smaller_than_the_rdp_calibrated_noise():
    target, mean_trials = 3.0, 10
    sigma_rdp = calibrate_selection_noise(target_epsilon=target, target_delta=DELTA, shapes=[SHAPE], mean_trials=10)
    sigma = calibrate_selection_noise_profile(
        target_epsilon=target, target_delta=DELTA, shapes=[SHAPE], mean_trials=mean_trials, start=sigma_rdp
    )
    # pinned: σ = 1.18 by the profile against 1.50 by RDP (a fifth less noise at the same ε; 1.188 before the
    # profile bound's bins were refined, issue 41 third pass)
    assert sigma == pytest.approx(1.184, abs=0.01) and sigma_rdp == pytest.approx(1.495, abs=0.01)
    assert sigma < 0.82 * sigma_rdp
    # it meets the target by the profile bound (recomputed from dp_accounting), and is the smallest to 1%
    assert selection_delta_pld(pld_profile(sigma, *SHAPE), target, expected_trials=mean_trials) <= DELTA
    assert selection_delta_pld(pld_profile(sigma / 1.01, *SHAPE), target, expected_trials=mean_trials) > DELTA
    # while RDP at that noise states more than the target (RDP alone would need σ_rdp)
    assert rdp_selection_epsilon(sigma, mean_trials) > target
    assert rdp_selection_epsilon(sigma_rdp, mean_trials) <= target
    choice = choose_selection_accounting(
        accounting="auto", target_epsilon=target, target_delta=DELTA, shapes=[SHAPE], mean_trials=mean_trials
    )
    assert choice.accounting == "profile" and choice.noise_multiplier == sigma
    assert choice.epsilon <= target < choice.rdp_epsilon
    assert choice.rdp_epsilon == pytest.approx(rdp_selection_epsilon(sigma, mean_trials), rel=1e-9)
    rdp = choose_selection_accounting(
        accounting="rdp", target_epsilon=target, target_delta=DELTA, shapes=[SHAPE], mean_trials=mean_trials
    )
    assert rdp.accounting == "rdp" and rdp.noise_multiplier == sigma_rdp and rdp.epsilon == rdp.rdp_epsilon


@pytest.fixture(scope="module")
def small(data):
    return (data.X_train[:200], data.y_train[:200], data.X_val[:60], data.y_val[:60])


def test_a_selection_charged_at_its_profile_bound_and_a_second_charge_on_the_same_ledger(small):
    ledger = PrivacyLedger(training_epsilon_budget=5.0, training_delta=2 * DELTA)
    obj = TorchModelTuningObjective(
        small, SPACE, training=TRAINING, dp_sgd=DPSGDConfig(noise_multiplier=1.0), ledger=ledger
    )
    first = select_training_runs(obj, epsilon=3.0, delta=DELTA, mean_trials=3, seed=1)
    g = first.guarantee["training"]
    assert g.details["accounting"] == "profile" and "privacy-profile bound" in g.description
    assert first.to_json()["guarantee"]["training"]["details"]["accounting"] == "profile"
    sigma = g.details["noise_multiplier"]
    assert sigma < g.details["rdp_noise_multiplier"]
    # the ledger holds ONE (ε, δ) entry: the profile bound at σ, recomputed from dp_accounting here
    (record,) = ledger.training.records()
    assert isinstance(record.event, ApproximateDP) and record.event.delta == DELTA
    epsilon = selection_epsilon_pld(pld_profile(sigma, *SHAPE), expected_trials=3, delta=DELTA)
    assert record.event.epsilon == epsilon == g.epsilon <= 3.0
    assert g.details["rdp_epsilon"] == pytest.approx(rdp_selection_epsilon(sigma, 3), rel=1e-9)
    assert g.details["rdp_epsilon"] > epsilon
    assert ledger.training.epsilon(2 * DELTA) == epsilon
    # a second selection: the profile is refused (the ledger is no longer empty), "auto" uses RDP
    with pytest.raises(ValueError, match="accounting='profile'"):
        select_training_runs(obj, epsilon=1.5, delta=DELTA, mean_trials=3, seed=2, accounting="profile")
    # RDP at ε = 3 does not fit the RDP part's share (5 − ε₁ at δ = 2e-5 − 1e-5): refused before any trial
    with pytest.raises(PrivacyBudgetExceeded):
        select_training_runs(obj, epsilon=3.0, delta=DELTA, mean_trials=3, seed=2)
    assert len(ledger.training.records()) == 1
    second = select_training_runs(obj, epsilon=1.5, delta=DELTA, mean_trials=3, seed=2)
    assert second.guarantee["training"].details["accounting"] == "rdp"
    assert "already holds training entries" in second.guarantee["training"].details["accounting_reason"]
    sigma2 = second.guarantee["training"].details["noise_multiplier"]
    total = ledger.training.epsilon(2 * DELTA)
    assert total == pytest.approx(epsilon + rdp_selection_epsilon(sigma2, 3, delta=DELTA), rel=1e-9)
    assert total <= 5.0
