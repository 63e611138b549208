r"""The validation side's ``(ε, δ)`` entry (``ValidationApproximateDP``, botorch_dp/privacy/ledger): under a
budget it is admitted only as the side's sole entry and only when ``μ_B``-GDP makes the same statement
(checked before anything is drawn, with a second entry of any kind refused before its block runs);
recorded when drawn; read back by basic composition (recomputed here independently with the closed-form
GDP profile); no μ covers it; it survives ``state_dict`` (version 6), and older states still load."""

import json
import math

import pytest
from scipy.optimize import brentq
from scipy.stats import norm

from botorch_dp.privacy.ledger import (
    Gaussian,
    PrivacyBudgetExceeded,
    PrivacyLedger,
    ValidationApproximateDP,
    ValidationMechanism,
)

ENTRY = ValidationApproximateDP("the scores of a selection", 3.0, 1e-5)


def gdp_eps(mu: float, delta: float) -> float:
    r"""ε of μ-GDP at δ from the closed-form profile δ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2) (Dong, Roth & Su),
    solved here independently of ``analysis.gdp``."""
    return brentq(lambda e: norm.cdf(-e / mu + mu / 2) - math.exp(e) * norm.cdf(-e / mu - mu / 2) - delta, 0.0, 100.0)


def charged(ledger, event=ENTRY, run_id="sel"):
    with ledger.charge({"select": event}, run_id=run_id) as meter:
        meter.record("select", event)


def test_the_entry_is_the_side_s_whole_guarantee_and_no_mu_covers_it():
    ledger = PrivacyLedger(validation_mu_budget=2.0)
    charged(ledger)
    assert ledger.validation.approximate() == {("sel", "select"): ENTRY}
    assert ledger.validation.epsilon(1e-5) == 3.0 and ledger.validation.epsilon(1e-3) == 3.0
    assert ledger.validation.epsilon(0.5e-5) == math.inf  # below its δ no ε is stated
    with pytest.raises(ValueError, match=r"\(epsilon, delta\) statement"):
        ledger.validation.mu()
    assert ledger.validation.remaining_mu() == 0.0  # nothing after it
    assert all(math.isinf(v) for v in ledger.validation.rdp_curve())
    report = ledger.report(1e-5)
    assert json.loads(json.dumps(report)) == report
    assert report["validation"]["mu"] is None and report["validation"]["epsilon"] == 3.0
    assert report["validation"]["rdp_order"] is None and report["validation"]["approximate_dp"] == [
        {"run_id": "sel", "key": "select", "description": ENTRY.description, "epsilon": 3.0, "delta": 1e-5}
    ]


@pytest.mark.parametrize(
    "second",
    [Gaussian(0.01), ValidationMechanism("a curve", tuple(0.0 for _ in PrivacyLedger.RDP_ORDERS)), ENTRY],
)
def test_a_second_entry_of_any_kind_is_refused_before_its_block_runs(second):
    ledger = PrivacyLedger(validation_mu_budget=2.0)
    charged(ledger)
    with pytest.raises(PrivacyBudgetExceeded, match="sole entry"):
        with ledger.charge({"select": second}, run_id="other"):
            raise AssertionError("the block must not run")
    assert len(ledger.validation.records()) == 1


def test_the_entry_after_another_release_or_with_one_in_its_step_or_an_open_charge_is_refused():
    after = PrivacyLedger(validation_mu_budget=2.0)
    after.external.record(Gaussian(0.1), run_id="a", key="select")
    with pytest.raises(PrivacyBudgetExceeded, match="sole entry"):
        charged(after)
    together = PrivacyLedger(validation_mu_budget=2.0)
    with pytest.raises(PrivacyBudgetExceeded, match="sole entry"):
        with together.charge({"select": ENTRY, "grad": Gaussian(0.1)}, run_id="sel"):
            raise AssertionError("the block must not run")
    held = PrivacyLedger(validation_mu_budget=2.0)
    with held.charge({"select": ENTRY}, run_id="sel"):  # reserved, not yet recorded: it counts
        with pytest.raises(PrivacyBudgetExceeded, match="sole entry"):
            held.validation.check_admits({"grad": Gaussian(0.01)})
    assert held.validation.records() == []  # nothing recorded, the reservation given back
    charged(held)


def test_the_entry_must_be_a_statement_the_budget_makes():
    mu_b = 1.5
    edge = gdp_eps(mu_b, 1e-5)  # independent of analysis.gdp
    ok = PrivacyLedger(validation_mu_budget=mu_b)
    charged(ok, ValidationApproximateDP("at the edge", edge * (1 - 1e-7), 1e-5))
    over = PrivacyLedger(validation_mu_budget=mu_b)
    with pytest.raises(PrivacyBudgetExceeded, match="above the epsilon"):
        charged(over, ValidationApproximateDP("over", edge * 1.001, 1e-5))
    assert over.validation.records() == []


def test_the_meter_refuses_more_than_the_bound():
    ledger = PrivacyLedger(validation_mu_budget=2.0)
    with pytest.raises(ValueError):
        with ledger.charge({"select": ENTRY}, run_id="sel") as meter:
            meter.record("select", ValidationApproximateDP("more", 3.1, 1e-5))
    assert ledger.validation.records() == []


def test_without_a_budget_it_composes_by_basic_composition():
    ledger = PrivacyLedger()
    ledger.external.record(Gaussian(0.8), run_id="a", key="select")
    charged(ledger, ValidationApproximateDP("sel", 1.0, 2e-6))
    # Σε_i + ε_R(δ − Σδ_i), ε_R the exact GDP conversion of the Gaussian part
    assert ledger.validation.epsilon(1e-5) == pytest.approx(1.0 + gdp_eps(0.8, 8e-6), rel=1e-6)
    assert ledger.validation.epsilon(2e-6) == math.inf


def test_state_dict_round_trip_and_old_states_load():
    ledger = PrivacyLedger(validation_mu_budget=2.0)
    charged(ledger)
    state = json.loads(json.dumps(ledger.state_dict()))
    assert state["version"] == 6
    assert {k for k in state["validation_steps"][0]} == {
        "release_id",
        "run_id",
        "key",
        "description",
        "epsilon",
        "delta",
    }
    again = PrivacyLedger.from_state_dict(state)
    assert again.validation.records() == ledger.validation.records()
    assert again.validation.epsilon(1e-5) == 3.0
    again.load_state_dict(state)  # merged, not counted twice
    assert len(again.validation.records()) == 1
    # a version-5 state (written before this entry existed) still loads; one claiming such an entry is refused
    v5 = {**state, "version": 5, "validation_steps": [{"release_id": "r1", "run_id": "a", "key": "select", "mu": 0.5}]}
    assert PrivacyLedger.from_state_dict(v5).validation.mu() == 0.5
    with pytest.raises(ValueError, match="exactly the keys"):
        PrivacyLedger.from_state_dict({**state, "version": 5})


def test_a_stored_ledger_keeps_the_entry_and_its_rule_across_processes(tmp_path):
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    ledger = PrivacyLedger(storage=url, dataset="users", validation_mu_budget=2.0)
    charged(ledger)
    other = PrivacyLedger(storage=url, dataset="users")  # another process's view of the same budget
    assert other.validation.approximate() == {("sel", "select"): ENTRY} and other.validation.epsilon(1e-5) == 3.0
    with pytest.raises(PrivacyBudgetExceeded, match="sole entry"):
        charged(other, Gaussian(0.01), run_id="later")
