"""The budget filters of botorch_dp/privacy/ledger/filters.py on ApproximateDP training entries (events.py):
an (ε, δ) entry (a selection charged at its privacy-profile bound) composes with the RDP entries by basic
composition, the total read back equals an independent computation (Opacus's compute_rdp, the RDP
conversion written out here, plus ε₁ with the RDP part converted at δ − δ₁), and the filter never admits
what would exceed the budget: an (ε₁, δ₁) entry only as the first training entry, the RDP part within the
rest of the budget."""

import json
import math

import numpy as np
import pytest
from opacus.accountants.analysis.rdp import compute_rdp

from botorch_dp.privacy.ledger import (
    TRAINING_RDP_ORDERS,
    ApproximateDP,
    DPSGDRun,
    PrivacyBudgetExceeded,
    PrivacyLedger,
    TrainingMechanism,
)
from botorch_dp.privacy.ledger.events import ValidationApproximateDP, event_from_json, event_to_json
from botorch_dp.privacy.statement import guarantee_statement

ORDERS = np.asarray(TRAINING_RDP_ORDERS)
RUN = DPSGDRun(4.0, 0.05, 20)  # ε ≈ 0.23 at δ = 1e-5


def rdp_epsilon(curve, delta):
    r"""The grid conversion ε = min_α r(α) + log(1 − 1/α) − (log δ + log α)/(α − 1), clipped at 0."""
    return max(0.0, float(np.min(curve + np.log1p(-1 / ORDERS) - (math.log(delta) + np.log(ORDERS)) / (ORDERS - 1))))


def run_curve(run):
    sigma, rate, steps = run
    return np.asarray(compute_rdp(q=rate, noise_multiplier=sigma, steps=steps, orders=ORDERS))


def charge(ledger, run_id, event):
    with ledger.charge_training({run_id: event}) as meter:
        meter.record(run_id)


@pytest.mark.privacy_fast
def test_the_total_is_epsilon_one_plus_the_rdp_part_at_the_delta_left():
    ledger = PrivacyLedger(training_epsilon_budget=4.0, training_delta=2e-5)
    charge(ledger, "sel", ApproximateDP("a selection at its profile bound", 2.5, 1e-5))
    assert ledger.training.epsilon(2e-5) == 2.5  # alone: its own ε at any δ ≥ its δ
    assert ledger.training.epsilon(5e-6) == math.inf  # δ below its δ: no statement
    charge(ledger, "run", RUN)
    expected = 2.5 + rdp_epsilon(run_curve(RUN), 2e-5 - 1e-5)
    assert ledger.training.epsilon(2e-5) == pytest.approx(expected, rel=1e-9)
    report = ledger.report(1e-5)["training"]
    assert report["epsilon"] == pytest.approx(expected, rel=1e-9) and report["accountant"] == "rdp"
    assert report["approximate_dp"] == [
        {"run_id": "sel", "description": "a selection at its profile bound", "epsilon": 2.5, "delta": 1e-5}
    ]
    assert report["num_mechanisms"] == 1 and report["num_dp_sgd_runs"] == 1
    text = str(guarantee_statement(ledger, 1e-5))
    assert "a selection at its profile bound" in text and "basic composition" in text


@pytest.mark.privacy_fast
def test_a_second_charge_cannot_exceed_the_budget():
    budget, delta = 4.0, 2e-5
    ledger = PrivacyLedger(training_epsilon_budget=budget, training_delta=delta)
    charge(ledger, "sel", ApproximateDP("a selection", 2.5, 1e-5))
    # the RDP part's share is (4 − 2.5, 2e-5 − 1e-5): runs are admitted while their RDP converts within it
    n = 0
    while True:
        try:
            charge(ledger, f"run-{n}", RUN)
        except PrivacyBudgetExceeded as err:
            assert "share" in str(err)
            break
        n += 1
        total = ledger.training.epsilon(delta)
        assert total <= budget * (1 + 1e-9)
        assert total == pytest.approx(2.5 + rdp_epsilon(n * run_curve(RUN), 1e-5), rel=1e-9)
    assert n >= 1 and len(ledger.training.records()) == n + 1  # the refused run is not recorded
    # one more run would have exceeded the budget (the filter works at one order, so it may refuse a little early)
    assert 2.5 + rdp_epsilon((n + 1) * run_curve(RUN), 1e-5) > budget - 0.05
    # a second (ε, δ) entry: admitted only as the first training entry
    with pytest.raises(PrivacyBudgetExceeded, match="only as its first training entry"):
        charge(ledger, "sel-2", ApproximateDP("another selection", 0.1, 1e-6))
    assert len(ledger.training.records()) == n + 1


@pytest.mark.privacy_fast
def test_an_approximate_entry_over_the_budget_or_after_an_rdp_entry_is_refused():
    ledger = PrivacyLedger(training_epsilon_budget=2.0, training_delta=1e-5)
    with pytest.raises(PrivacyBudgetExceeded, match="above the budget"):
        charge(ledger, "sel", ApproximateDP("too much", 2.5, 1e-5))
    with pytest.raises(PrivacyBudgetExceeded, match="above the budget"):
        charge(ledger, "sel", ApproximateDP("too much delta", 1.0, 2e-5))
    charge(ledger, "run", RUN)  # an RDP entry first: no (ε, δ) entry after it
    with pytest.raises(PrivacyBudgetExceeded, match="only as its first training entry"):
        charge(ledger, "sel", ApproximateDP("a selection", 0.01, 1e-7))
    assert [r.run_id for r in ledger.training.records()] == ["run"]


def test_the_whole_delta_spent_by_the_first_entry_leaves_no_room():
    ledger = PrivacyLedger(training_epsilon_budget=10.0, training_delta=1e-5)
    charge(ledger, "sel", ApproximateDP("a selection", 1.0, 1e-5))
    with pytest.raises(PrivacyBudgetExceeded, match="needs room"):
        charge(ledger, "mech", TrainingMechanism("tiny", tuple([1e-6] * len(ORDERS))))
    unbounded = PrivacyLedger(training_delta=1e-5)  # no budget: recorded, and reported as no statement
    charge(unbounded, "sel", ApproximateDP("a selection", 1.0, 1e-5))
    charge(unbounded, "run", RUN)
    assert unbounded.training.epsilon(1e-5) == math.inf


def test_the_entry_is_stored_and_read_back():
    event = ApproximateDP("a selection", 1.25, 1e-6)
    assert event_from_json("training", json.loads(json.dumps(event_to_json(event)))) == event
    ledger = PrivacyLedger(training_delta=1e-5)
    charge(ledger, "sel", event)
    again = PrivacyLedger.from_state_dict(json.loads(json.dumps(ledger.state_dict())))
    assert again.training.approximate() == {"sel": event}
    with pytest.raises(ValueError, match="epsilon"):
        ApproximateDP("bad", -1.0, 1e-5)
    with pytest.raises(ValueError, match="delta"):
        ApproximateDP("bad", 1.0, 0.0)
    # on the validation side the same JSON is the validation users' own (epsilon, delta) entry
    assert event_from_json("validation", event_to_json(event)) == ValidationApproximateDP(
        event.description, event.epsilon, event.delta
    )


def test_a_stored_ledger_keeps_the_entry_and_its_filter(tmp_path):
    url = tmp_path / "ledger.sqlite"
    ledger = PrivacyLedger(training_epsilon_budget=4.0, training_delta=2e-5, storage=url, dataset="d")
    charge(ledger, "sel", ApproximateDP("a selection", 2.5, 1e-5))
    other = PrivacyLedger(storage=url, dataset="d")  # another process's view of the same dataset
    assert other.training.approximate() == {"sel": ApproximateDP("a selection", 2.5, 1e-5)}
    with pytest.raises(PrivacyBudgetExceeded, match="only as its first training entry"):
        charge(other, "sel-2", ApproximateDP("another selection", 0.1, 1e-6))
    charge(other, "run", RUN)
    assert ledger.training.epsilon(2e-5) == pytest.approx(2.5 + rdp_epsilon(run_curve(RUN), 1e-5), rel=1e-9)
