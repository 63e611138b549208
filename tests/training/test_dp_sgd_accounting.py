"""Tests for botorch_dp/training/dp_sgd_accounting.py: the calibrated noise multiplier meets
its target under the accountant it was asked for (checked with Opacus's own accountant), and
runs are composed as the ledger merges them, equal to Opacus's RDP accountant."""

import pytest
from opacus.accountants import PRVAccountant, RDPAccountant

from botorch_dp.training.dp_sgd_accounting import calibrate_noise_multiplier, composed_training_epsilon


def test_target_calibration_uses_the_ledgers_accountant():
    kw = dict(target_epsilon=1.0, target_delta=1e-5, sample_rate=0.01, steps_per_run=100, planned_runs=2)
    rdp = calibrate_noise_multiplier(**kw)
    prv = calibrate_noise_multiplier(**kw, accountant="prv")
    assert prv < rdp  # PRV is tighter than RDP, so it needs less noise for the same target
    accountant = PRVAccountant()
    accountant.history = [(prv, 0.01, 100)] * 2
    assert accountant.get_epsilon(1e-5, eps_error=0.01) <= 1.0 + 0.01


def test_composed_epsilon_merges_equal_runs_and_agrees_with_opacus():
    runs = [(1.1, 0.02, 100), (0.9, 0.05, 40), (1.1, 0.02, 60)]
    eps = composed_training_epsilon(runs, 1e-5)
    direct = RDPAccountant()
    direct.history = [(s, q, n) for s, q, n in runs]
    assert eps == pytest.approx(direct.get_epsilon(1e-5), rel=1e-12)
    # equal (σ, q) runs are one entry with the summed steps, in any order
    assert composed_training_epsilon([(1.1, 0.02, 160), (0.9, 0.05, 40)], 1e-5) == pytest.approx(eps, rel=1e-12)
    assert composed_training_epsilon(runs[::-1], 1e-5) == pytest.approx(eps, rel=1e-12)
    assert composed_training_epsilon(runs[:1], 1e-5) < eps
    assert composed_training_epsilon([], 1e-5) == 0.0
    with pytest.raises(ValueError, match="accountant"):
        composed_training_epsilon(runs, 1e-5, accountant="gdp")
