r"""The validation side's ``(ε, δ)`` entry (``ValidationApproximateDP``, botorch_dp/privacy/ledger): under a
budget it is admitted only as the side's sole entry and only when ``μ_B``-GDP makes the same statement
(checked before anything is drawn, with a second entry of any kind refused before its block runs);
recorded when drawn; read back by basic composition (recomputed here independently with the closed-form
GDP profile); no μ covers it; it survives ``state_dict`` (version 7), and older states still load. With a
``validation_delta`` the budget composes it with other validation releases (issue 41, valeps41): the tests
from ``DELTA_B`` on."""

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
    assert state["version"] == 7 and state["validation_delta"] is None
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
    # a version-6 state (written before validation_delta existed) loads under the rule it was written under
    v6 = {k: v for k, v in state.items() if k != "validation_delta"} | {"version": 6}
    old = PrivacyLedger.from_state_dict(v6)
    assert old.validation_delta is None and old.validation.records() == ledger.validation.records()
    with pytest.raises(PrivacyBudgetExceeded, match="sole entry"):
        old.external.check(Gaussian(0.01))
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


# ----------------------------------------------------------------------------- composed under a budget
DELTA_B = 1e-5
MU_B = 1.5
SELECTION = ValidationApproximateDP("a selection's scores", 1.0, 4e-6)


def composed_ledger(**kwargs) -> PrivacyLedger:
    return PrivacyLedger(validation_mu_budget=MU_B, validation_delta=DELTA_B, **kwargs)


def step(ledger, mu, run_id="gibo", t=0):
    with ledger.charge({"grad": Gaussian(mu)}, run_id=run_id, step=t) as meter:
        meter.record("grad", Gaussian(mu))


def gaussian_room(eps_a: float, delta_a: float) -> float:
    r"""The largest μ of the Gaussian part with ``ε_a + ε_μ(δ_B − δ_a) = ε_{μ_B}(δ_B)``, solved here with the
    closed-form profile (``gdp_eps``), independently of the ledger's ``gdp_mu``."""
    target = gdp_eps(MU_B, DELTA_B) - eps_a
    return brentq(lambda mu: gdp_eps(mu, DELTA_B - delta_a) - target, 0.1, 5.0, xtol=1e-13)


def pld_gaussian_epsilon(mu: float, delta: float) -> float:
    r"""ε at δ of μ-GDP by dp-accounting's PLD accountant (a Gaussian of noise multiplier 1/μ)."""
    import dp_accounting
    from dp_accounting.pld import pld_privacy_accountant

    accountant = pld_privacy_accountant.PLDAccountant(value_discretization_interval=1e-4)
    accountant.compose(dp_accounting.GaussianDpEvent(1.0 / mu))
    return accountant.get_epsilon(delta)


def test_an_entry_then_gaussian_releases_compose_to_the_sum_and_the_gaussian_part_at_the_delta_left():
    ledger = composed_ledger()
    charged(ledger, SELECTION)
    for t in range(3):
        step(ledger, 0.5, t=t)
    mu = math.sqrt(3 * 0.25)
    for delta in (DELTA_B, 1e-4):
        expected = 1.0 + gdp_eps(mu, delta - 4e-6)  # Σε_i + ε_μ(δ − Σδ_i), closed form
        assert ledger.validation.epsilon(delta) == pytest.approx(expected, rel=1e-9)
    # the same with dp-accounting's own accountant for the Gaussian part
    assert ledger.validation.epsilon(DELTA_B) == pytest.approx(1.0 + pld_gaussian_epsilon(mu, 6e-6), rel=1e-4)
    composition = ledger.report(DELTA_B)["validation"]["composition"]
    assert composition["approximate_epsilon"] == 1.0 and composition["approximate_delta"] == 4e-6
    assert composition["rest_delta"] == pytest.approx(6e-6, rel=1e-12)
    assert composition["rest_mu"] == pytest.approx(mu, rel=1e-12)
    assert composition["epsilon"] == ledger.validation.epsilon(DELTA_B)
    # the remaining μ is what the entry leaves for the Gaussian part at δ_B − δ_1
    room = gaussian_room(1.0, 4e-6)
    assert ledger.validation.remaining_mu() == pytest.approx(math.sqrt(room**2 - mu**2), rel=1e-7)


@pytest.mark.parametrize("entry_first", [True, False])
def test_the_budget_admits_a_gaussian_release_that_fits_after_an_entry_and_refuses_one_that_does_not(entry_first):
    room = gaussian_room(SELECTION.epsilon, SELECTION.delta)
    assert room < MU_B  # the entry costs the Gaussian part something
    ledger = composed_ledger()
    if entry_first:
        charged(ledger, SELECTION)
        step(ledger, room * (1 - 1e-6))
    else:  # the Gaussian releases first, then the entry: the same set, the same rule
        step(ledger, room * (1 - 1e-6))
        charged(ledger, SELECTION)
    assert ledger.validation.epsilon(DELTA_B) <= gdp_eps(MU_B, DELTA_B) * (1 + 1e-9)
    with pytest.raises(PrivacyBudgetExceeded, match="Gaussian part"):
        with ledger.charge({"grad": Gaussian(room * 0.01)}, run_id="more", step=0):
            raise AssertionError("the block must not run")
    assert len(ledger.validation.records()) == 2
    # over the room: refused before its block runs, in either order
    over = composed_ledger()
    if entry_first:
        charged(over, SELECTION)
        with pytest.raises(PrivacyBudgetExceeded, match="Gaussian part"):
            step(over, room * 1.001)
    else:
        step(over, room * 1.001)
        with pytest.raises(PrivacyBudgetExceeded, match="Gaussian part"):
            charged(over, SELECTION)
    assert len(over.validation.records()) == 1


def test_a_second_selection_composes_and_the_entries_alone_may_use_the_whole_budget_delta():
    ledger = composed_ledger()
    charged(ledger, SELECTION, run_id="first")
    charged(ledger, SELECTION, run_id="second")
    assert ledger.validation.epsilon(DELTA_B) == 2.0  # Σε_i, nothing else
    edge = gdp_eps(MU_B, DELTA_B) - 2.0  # what is left of ε_{μ_B}(δ_B) for a third entry taking the δ left
    charged(ledger, ValidationApproximateDP("third", edge * (1 - 1e-9), 2e-6), run_id="third")
    with pytest.raises(PrivacyBudgetExceeded, match="leaves no delta"):  # no δ is left for a Gaussian part
        step(ledger, 1e-3)
    more = composed_ledger()
    charged(more, SELECTION, run_id="first")
    with pytest.raises(PrivacyBudgetExceeded, match="entries of the validation side"):
        charged(more, ValidationApproximateDP("over", edge + 1.0 + 1e-3, 1e-6), run_id="second")
    with pytest.raises(PrivacyBudgetExceeded, match="entries of the validation side"):
        charged(more, ValidationApproximateDP("too much delta", 0.1, 7e-6), run_id="second")
    assert len(more.validation.records()) == 1


def test_an_open_charge_of_an_entry_counts_against_another_release_before_it_is_recorded():
    ledger = composed_ledger()
    big = ValidationApproximateDP("big", gdp_eps(MU_B, DELTA_B) * 0.9, 5e-6)
    with ledger.charge({"select": big}, run_id="sel"):  # reserved, not recorded: it counts
        with pytest.raises(PrivacyBudgetExceeded, match="Gaussian part"):
            ledger.validation.check_admits({"grad": Gaussian(0.5)})
        ledger.validation.check_admits({"grad": Gaussian(0.01)})
    assert ledger.validation.records() == []


def test_with_rdp_releases_the_rest_stays_under_the_gaussian_curve_the_entries_leave_at_every_order():
    orders = list(PrivacyLedger.RDP_ORDERS)
    eps_left, delta_left = gdp_eps(MU_B, DELTA_B) - SELECTION.epsilon, DELTA_B - SELECTION.delta
    # μ'² = max_α 2(ε − c_α)/α, c_α the RDP conversion's slack (Canonne, Kamath & Steinke), recomputed here
    mu2 = max(
        2 * (eps_left - (math.log(1 - 1 / a) - (math.log(delta_left) + math.log(a)) / (a - 1))) / a for a in orders
    )
    curve = tuple(a * mu2 / 2 * 0.5 for a in orders)  # half the room at every order
    ledger = composed_ledger()
    charged(ledger, SELECTION)
    ledger.external.record(ValidationMechanism("half the room", curve), run_id="hypo", key="select")
    ledger.external.check(Gaussian(math.sqrt(mu2 * 0.5) * (1 - 1e-6)))
    with pytest.raises(PrivacyBudgetExceeded, match="summed RDP"):
        ledger.external.check(Gaussian(math.sqrt(mu2 * 0.5) * 1.001))
    stated = ledger.validation.epsilon(DELTA_B)
    slack = [math.log(1 - 1 / a) - (math.log(delta_left) + math.log(a)) / (a - 1) for a in orders]
    rest = min(c + d for c, d in zip(curve, slack, strict=True))
    assert stated == pytest.approx(SELECTION.epsilon + rest, rel=1e-12) and stated <= gdp_eps(MU_B, DELTA_B)
    assert ledger.report(DELTA_B)["validation"]["composition"]["rest_rdp_order"] in orders


def test_whether_a_set_of_entries_is_admitted_and_what_it_states_do_not_depend_on_their_order():
    import itertools

    room = gaussian_room(1.0, 4e-6)
    entries = [("sel", SELECTION), ("a", Gaussian(room * 0.6)), ("b", Gaussian(room * 0.6)), ("sel2", None)]
    entries[3] = ("sel2", ValidationApproximateDP("small", 1e-3, 1e-9))
    statements = set()
    for order in itertools.permutations(entries):
        ledger = composed_ledger()
        for run_id, event in order:
            with ledger.charge({"select": event}, run_id=run_id) as meter:
                meter.record("select", event)
        statements.add(round(ledger.validation.epsilon(DELTA_B), 12))
    assert len(statements) == 1
    # a set over the budget is refused at its last entry, whichever order it comes in
    over = [("sel", SELECTION), ("a", Gaussian(room * 0.8)), ("b", Gaussian(room * 0.8))]
    for order in itertools.permutations(over):
        ledger = composed_ledger()
        for run_id, event in order[:2]:
            with ledger.charge({"select": event}, run_id=run_id) as meter:
                meter.record("select", event)
        with pytest.raises(PrivacyBudgetExceeded):
            ledger.external.check(order[2][1])


def test_validation_delta_survives_save_and_load_and_is_stored_with_a_shared_budget(tmp_path):
    ledger = composed_ledger()
    charged(ledger, SELECTION)
    step(ledger, 0.5)
    state = json.loads(json.dumps(ledger.state_dict()))
    assert state["version"] == 7 and state["validation_delta"] == DELTA_B
    again = PrivacyLedger.from_state_dict(state)
    assert again.validation_delta == DELTA_B and again.validation.records() == ledger.validation.records()
    assert again.report(DELTA_B) == ledger.report(DELTA_B)
    assert again.validation.remaining_mu() == ledger.validation.remaining_mu()
    again.load_state_dict(state)  # merged, not counted twice
    assert len(again.validation.records()) == 2
    adopting = PrivacyLedger(validation_mu_budget=MU_B)  # a ledger without one adopts the state's
    adopting.load_state_dict(state)
    assert adopting.validation_delta == DELTA_B
    with pytest.raises(ValueError, match="validation_delta"):
        PrivacyLedger(validation_delta=1e-6).load_state_dict(state)
    with pytest.raises(ValueError, match="validation_delta"):
        PrivacyLedger(validation_delta=0.0)
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    stored = PrivacyLedger(storage=url, dataset="users", validation_mu_budget=MU_B, validation_delta=DELTA_B)
    charged(stored, SELECTION)
    other = PrivacyLedger(storage=url, dataset="users")  # another process adopts the stored δ_B
    assert other.validation_delta == DELTA_B
    step(other, 0.5)
    assert stored.validation.epsilon(DELTA_B) == pytest.approx(1.0 + gdp_eps(0.5, 6e-6), rel=1e-9)
    with pytest.raises(ValueError, match="validation_delta"):
        PrivacyLedger(storage=url, dataset="users", validation_delta=1e-6)
