r"""Tests for botorch_dp.privacy.ledger."""

import json
import math

import pytest
from opacus.accountants import PRVAccountant, RDPAccountant

from botorch_dp.privacy.accountants import accountant_epsilon
from botorch_dp.privacy.analysis.gdp import gdp_epsilon
from botorch_dp.privacy.ledger import PrivacyBudgetExceeded, PrivacyLedger

DELTA = 1e-5
RUNS = [("eval-0", 1.1, 0.02, 100), ("eval-1", 1.1, 0.02, 100), ("eval-2", 0.9, 0.05, 40)]


def _record_runs(ledger, runs=RUNS):
    for run_id, noise_multiplier, sample_rate, steps in runs:
        ledger.record_training_run(
            run_id=run_id, noise_multiplier=noise_multiplier, sample_rate=sample_rate, steps=steps
        )


def test_validation_steps_compose_and_are_idempotent():
    ledger = PrivacyLedger()
    assert ledger.validation_mu() == 0.0
    assert ledger.validation_epsilon(DELTA) == 0.0
    for t in range(25):
        assert ledger.record_validation_step(mu=0.2, step_index=t)
    assert ledger.validation_mu() == pytest.approx(1.0, rel=1e-14)
    assert ledger.validation_epsilon(DELTA) == pytest.approx(4.3772, abs=1e-3)
    # Re-recording any step changes nothing.
    for t in range(25):
        assert not ledger.record_validation_step(mu=0.2, step_index=t)
    assert len(ledger.validation_steps) == 25
    assert ledger.validation_mu() == pytest.approx(1.0, rel=1e-14)
    with pytest.raises(ValueError, match="already recorded"):
        ledger.record_validation_step(mu=0.3, step_index=3)
    with pytest.raises(ValueError, match="step_index"):
        ledger.record_validation_step(mu=0.3, step_index=-1)
    with pytest.raises(ValueError, match="mu must be positive"):
        ledger.record_validation_step(mu=0.0, step_index=30)


def test_state_dict_json_round_trip_does_not_double_count():
    ledger = PrivacyLedger(training_delta=1e-6, training_accountant="rdp")
    mus = [0.1, 0.3, 0.2, 0.25]
    for t, mu in enumerate(mus):
        ledger.record_validation_step(mu=mu, step_index=t)
    _record_runs(ledger, RUNS[:2])
    saved = json.dumps(ledger.state_dict())
    resumed = PrivacyLedger.from_state_dict(json.loads(saved))
    assert resumed.state_dict() == ledger.state_dict()
    # A resumed loop replays the last step and the last run before continuing.
    assert not resumed.record_validation_step(mu=mus[-1], step_index=len(mus) - 1)
    _record_runs(resumed, RUNS[1:2])
    assert resumed.validation_mu() == pytest.approx(ledger.validation_mu(), rel=1e-15)
    assert resumed.training_epsilon(1e-6) == ledger.training_epsilon(1e-6)
    # Then it goes on.
    resumed.record_validation_step(mu=0.4, step_index=len(mus))
    _record_runs(resumed, RUNS[2:])
    expected_mu = math.sqrt(sum(mu**2 for mu in mus) + 0.4**2)
    assert resumed.validation_mu() == pytest.approx(expected_mu, rel=1e-14)
    assert len(resumed.training_runs) == 3
    # load_state_dict replaces the state of an existing ledger.
    other = PrivacyLedger(validation_mu_budget=9.0)
    other.record_validation_step(mu=5.0, step_index=99)
    other.load_state_dict(json.loads(saved))
    assert other.state_dict() == ledger.state_dict()
    with pytest.raises(ValueError, match="version"):
        PrivacyLedger.from_state_dict({"version": 99})


def test_non_private_step_makes_mu_infinite_and_survives_json():
    ledger = PrivacyLedger()
    ledger.record_validation_step(mu=0.5, step_index=0)
    ledger.record_validation_step(mu=math.inf, step_index=1)
    assert ledger.validation_mu() == math.inf
    assert ledger.validation_epsilon(DELTA) == math.inf
    resumed = PrivacyLedger.from_state_dict(json.loads(json.dumps(ledger.state_dict())))
    assert resumed.validation_mu() == math.inf
    assert resumed.report(DELTA)["validation"]["mu"] == math.inf
    budgeted = PrivacyLedger(validation_mu_budget=10.0)
    with pytest.raises(PrivacyBudgetExceeded):
        budgeted.record_validation_step(mu=math.inf, step_index=0)


@pytest.mark.parametrize(
    "budget, mu_step",
    [(1.0, 0.2), (1.0, 0.25), (1.0, 0.3), (2.0, 0.7), (0.5, 0.6), (3.0, 1.0 / 3.0), (1.0, 0.1)],
)
def test_validation_budget_filter_closed_form(budget, mu_step):
    # k equal steps fit iff sqrt(k)·μ_t ≤ budget. The cases include exact boundaries
    # ((1, 0.25): 16 steps, (1, 0.2): 25 steps, (3, 1/3): 81 steps) where rounding
    # must not refuse the last allowed step.
    allowed = math.floor((budget / mu_step) ** 2 + 1e-9)
    ledger = PrivacyLedger(validation_mu_budget=budget)
    for k in range(allowed):
        assert ledger.remaining_validation_mu() >= mu_step * (1 - 1e-9)
        ledger.record_validation_step(mu=mu_step, step_index=k)
    spent = ledger.validation_mu()
    assert spent <= budget * (1 + 1e-9)
    remaining = math.sqrt(max(budget**2 - spent**2, 0.0))
    assert ledger.remaining_validation_mu() == pytest.approx(remaining, abs=1e-6)
    with pytest.raises(PrivacyBudgetExceeded, match="remaining mu budget") as info:
        ledger.check_validation_step(mu_step)
    assert f"{ledger.remaining_validation_mu():.6g}" in str(info.value)
    with pytest.raises(PrivacyBudgetExceeded):
        ledger.record_validation_step(mu=mu_step, step_index=allowed)
    # Nothing was recorded by the refused step.
    assert len(ledger.validation_steps) == allowed
    assert ledger.validation_mu() == spent
    # A step that fits the remainder is still accepted.
    if ledger.remaining_validation_mu() > 1e-6:
        ledger.record_validation_step(mu=0.99 * ledger.remaining_validation_mu(), step_index=allowed)
    assert isinstance(PrivacyBudgetExceeded("x"), RuntimeError)


def test_training_composition_matches_direct_opacus():
    ledger = PrivacyLedger()
    assert ledger.training_epsilon(DELTA) == 0.0
    _record_runs(ledger)
    # Re-recording a run does not count it twice.
    _record_runs(ledger, RUNS[:1])
    assert len(ledger.training_runs) == 3
    for name, cls in (("rdp", RDPAccountant), ("prv", PRVAccountant)):
        direct = cls()
        for _, noise_multiplier, sample_rate, steps in RUNS:
            for _ in range(steps):
                direct.step(noise_multiplier=noise_multiplier, sample_rate=sample_rate)
        assert ledger.training_epsilon(DELTA, accountant=name) == pytest.approx(
            accountant_epsilon(direct, delta=DELTA), rel=1e-9
        )
    rdp = ledger.training_epsilon(DELTA, accountant="rdp")
    assert 0.0 < ledger.training_epsilon(DELTA, accountant="prv") <= rdp
    with pytest.raises(ValueError, match="already recorded"):
        ledger.record_training_run(run_id="eval-0", noise_multiplier=2.0, sample_rate=0.02, steps=100)
    with pytest.raises(ValueError, match="sample_rate"):
        ledger.record_training_run(run_id="bad", noise_multiplier=1.0, sample_rate=0.0, steps=1)
    with pytest.raises(ValueError, match="accountant"):
        ledger.training_epsilon(DELTA, accountant="moments")
    ledger.record_training_run(run_id=7, noise_multiplier=0.0, sample_rate=1.0, steps=1)
    assert ledger.training_epsilon(DELTA) == math.inf


def test_training_budget_filter():
    two_runs = PrivacyLedger()
    _record_runs(two_runs, RUNS[:2])
    budget = two_runs.training_epsilon(1e-6)
    ledger = PrivacyLedger(training_epsilon_budget=budget, training_delta=1e-6)
    _record_runs(ledger, RUNS[:2])
    with pytest.raises(PrivacyBudgetExceeded, match="Spent so far"):
        _record_runs(ledger, RUNS[2:])
    assert len(ledger.training_runs) == 2
    with pytest.raises(ValueError, match="training_delta"):
        PrivacyLedger(training_epsilon_budget=1.0)


def test_report_keeps_the_two_datasets_separate():
    ledger = PrivacyLedger(validation_mu_budget=2.0, training_delta=1e-6)
    ledger.record_validation_step(mu=1.0, step_index=0)
    _record_runs(ledger)
    report = ledger.report(DELTA)
    assert json.loads(json.dumps(report)) == report
    assert report["validation"] == {
        "mu": 1.0,
        "epsilon": gdp_epsilon(1.0, DELTA),
        "delta": DELTA,
        "num_steps": 1,
        "mu_budget": 2.0,
        "remaining_mu": pytest.approx(math.sqrt(3.0)),
    }
    assert report["training"]["delta"] == 1e-6
    assert report["training"]["num_runs"] == 3
    assert report["training"]["accountant"] == "rdp"
    assert report["training"]["epsilon"] == ledger.training_epsilon(1e-6)


def test_identical_training_runs_are_merged_without_changing_epsilon():
    """Many equal runs compose to the same ε as one history entry per run (and fast)."""
    import time

    ledger = PrivacyLedger()
    for i in range(34):
        ledger.record_training_run(run_id=i, noise_multiplier=1.5, sample_rate=1 / 15, steps=150)
    ledger.record_training_run(run_id="other", noise_multiplier=2.0, sample_rate=0.1, steps=10)
    direct = RDPAccountant()
    direct.history = ledger.training_history()  # 35 separate entries
    assert len(direct.history) == 35
    expected = direct.get_epsilon(delta=1e-5)
    assert ledger.training_epsilon(1e-5, accountant="rdp") == pytest.approx(expected, rel=1e-12)
    start = time.perf_counter()
    ledger.training_epsilon(1e-5, accountant="prv")
    assert time.perf_counter() - start < 10.0
