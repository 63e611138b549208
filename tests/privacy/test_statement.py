"""botorch_dp.privacy.statement: one statement of what a ledger protected (issue 32, item 1),
checked against closed forms and against Opacus's own RDP analysis."""

import math

import numpy as np
import pytest
from opacus.accountants.analysis.rdp import compute_rdp, get_privacy_spent

from botorch_dp.privacy.analysis.gdp import compose_gdp, gdp_epsilon
from botorch_dp.privacy.ledger import DPSGDRun, Gaussian, PrivacyLedger, PureDP
from botorch_dp.privacy.ledger.events import TRAINING_RDP_ORDERS
from botorch_dp.privacy.statement import guarantee_statement, run_kind
from botorch_dp.training.dp_sgd import composed_training_epsilon

DELTA = 1e-5


def _validation_ledger() -> PrivacyLedger:
    ledger = PrivacyLedger()
    for t, mu in enumerate([0.5, 0.5, 0.3]):
        ledger.external.record(Gaussian(mu), run_id="run-a", key=f"step-{t:04d}")
    ledger.external.record(Gaussian(0.4), run_id="run-b", key="step-0000")
    return ledger


def test_validation_only_is_the_exact_gdp_conversion_of_all_runs():
    statement = guarantee_statement(_validation_ledger(), DELTA)
    mu = compose_gdp([0.5, 0.5, 0.3, 0.4])
    v = statement.validation
    assert v.mu == pytest.approx(mu, rel=1e-12) and v.epsilon == pytest.approx(gdp_epsilon(mu, DELTA), rel=1e-12)
    assert statement.training is None and statement.composed is None
    assert "4 Gaussian gradient releases" in str(statement) and "composed over 2 run(s)" in str(statement)
    assert "if the same people" not in str(statement)


def test_training_and_the_composition_agree_with_opacus():
    ledger = _validation_ledger()
    runs = [(1.1, 0.02, 300), (1.1, 0.02, 300), (0.9, 0.05, 100)]
    for i, (sigma, q, steps) in enumerate(runs):
        ledger.external.record(DPSGDRun(noise_multiplier=sigma, sample_rate=q, steps=steps), run_id=i)
    statement = guarantee_statement(ledger, DELTA)
    assert statement.training.epsilon == pytest.approx(composed_training_epsilon(runs, DELTA), rel=1e-12)
    assert "3 DP-SGD run(s) (Opacus, RDP accountant)" in str(statement)
    orders = np.asarray(TRAINING_RDP_ORDERS)
    mu = compose_gdp([0.5, 0.5, 0.3, 0.4])
    rdp = orders * mu**2 / 2 + sum(compute_rdp(q=q, noise_multiplier=s, steps=n, orders=orders) for s, q, n in runs)
    expected, _ = get_privacy_spent(orders=orders, rdp=rdp, delta=DELTA)
    assert statement.composed.epsilon == pytest.approx(expected, rel=1e-9)
    # composing costs more than either side alone, and at most what the two would sum to
    assert max(statement.training.epsilon, statement.validation.epsilon) < statement.composed.epsilon
    assert statement.composed.epsilon < statement.training.epsilon + statement.validation.epsilon + 1.0
    assert "if the same people are in both sets" in str(statement)
    plain = statement.to_dict()
    assert set(plain) == {
        "holds",
        "validation",
        "training",
        "composed_if_same_people",
        "validation_runs",
        "not_protected",
    }
    assert plain["holds"] is True
    assert plain["training"]["neighbours"] == "add or remove one record"


def test_an_empty_ledger_says_nothing_was_released_and_infinity_is_plain_json():
    assert "nothing was released" in str(guarantee_statement(PrivacyLedger(), DELTA))
    ledger = PrivacyLedger()
    ledger.external.record(Gaussian(math.inf), run_id="r", key="step-0000")
    plain = guarantee_statement(ledger, DELTA).to_dict()
    assert plain["validation"]["epsilon"] == "inf" and plain["validation"]["mu"] == "inf"


@pytest.mark.parametrize("with_training", [False, True])
def test_a_release_at_mu_inf_is_stated_as_no_guarantee_never_as_epsilon_delta(with_training):
    # issue 40, item 5: an unsafe fit (or a non-private run) on the ledger leaves the validation users,
    # and people in both sets, without a guarantee; the statement says so in words and in JSON
    ledger = _validation_ledger()
    ledger.external.record(Gaussian(math.inf), run_id="run-c", key="step-0000/fit")
    if with_training:
        ledger.external.record(DPSGDRun(noise_multiplier=1.1, sample_rate=0.02, steps=300), run_id=0)
    statement = guarantee_statement(ledger, DELTA)
    assert statement.holds is False and statement.validation.holds is False
    text = str(statement)
    assert "NO differential-privacy guarantee" in text and "validation users" in text
    validation_line = next(line for line in text.splitlines() if line.startswith("- validation users"))
    assert ")-DP" not in validation_line and "1 NON-PRIVATE looks at the losses" in validation_line
    plain = statement.to_dict()
    assert plain["holds"] is False and plain["validation"]["holds"] is False
    if with_training:  # the training records keep theirs; the composition has none
        assert statement.training.holds and plain["training"]["holds"] is True
        assert "training records (add or remove one record): (epsilon = " in text
        assert statement.composed.holds is False and plain["composed_if_same_people"]["holds"] is False
    clean = guarantee_statement(_validation_ledger(), DELTA)
    assert clean.holds and "NO differential" not in str(clean) and clean.to_dict()["holds"] is True


def test_the_runs_are_counted_by_kind_from_the_ledger_s_keys():
    # issue 43, item 4: "composed over N run(s)" says what the runs are
    ledger = _validation_ledger()  # two runs of steps
    ledger.external.record(Gaussian(0.2), run_id="choice", key="score")
    ledger.external.record(PureDP(1.0), run_id="selection", key="select")
    ledger.external.record(Gaussian(0.1), run_id="odd", key="something")
    statement = guarantee_statement(ledger, DELTA)
    assert statement.validation_runs == {"steps": 2, "scores": 1, "selection": 1, "other": 1}
    assert statement.num_validation_runs == 5 == len(ledger.validation.run_ids())
    text = str(statement)
    assert "composed over 5 run(s) on these users (2 DP-GIBO runs (noisy steps), 1 release of the noisy scores" in text
    assert "1 private selection (one entry for all its hidden trials), 1 other release;" in text
    assert run_kind({"step-0000/fit", "step-0000/grad"}) == "steps" and run_kind({"sample", "fit"}) == "selection"
    assert run_kind({"fit"}) == "other" and run_kind({"score", "step-0001"}) == "steps"


def test_what_is_not_protected_names_the_training_records_unless_dp_training_was_recorded():
    plain = guarantee_statement(_validation_ledger(), DELTA)
    text = str(plain)
    assert text.index("What was protected:") < text.index("What was NOT protected:")
    unprotected = text.split("What was NOT protected:")[1]
    assert "training records: NO guarantee" in unprotected and "number of validation users n" in unprotected
    assert "training records" not in text.split("What was NOT protected:")[0]
    assert plain.not_protected()[0].startswith("training records: NO guarantee")
    ledger = _validation_ledger()
    ledger.external.record(DPSGDRun(noise_multiplier=1.1, sample_rate=0.02, steps=300), run_id=0)
    trained = guarantee_statement(ledger, DELTA)
    assert not any("training records" in line for line in trained.not_protected())
    assert "training records (add or remove one record)" in str(trained).split("What was NOT protected:")[0]
    # a caller's own lines (a proxy, a selection's wall time) join the list
    assert str(trained.text(("the proxy's users",))).endswith("- the proxy's users")


def test_the_composed_statement_counts_the_epsilon_delta_entries_by_basic_composition():
    r"""A training ``(ε, δ)`` entry (a profile-charged selection) and a Gaussian validation release: the
    composed ε is ``ε₁`` plus the Gaussian's RDP conversion at ``δ − δ₁`` (recomputed here), never below
    ``ε₁`` (the RDP curves alone, which omit the entry, state less than the training side)."""
    import math

    import numpy as np

    from botorch_dp.privacy.ledger import ApproximateDP, Gaussian, PrivacyLedger, ValidationApproximateDP
    from botorch_dp.privacy.statement import guarantee_statement

    ledger = PrivacyLedger()
    ledger.external.record(ApproximateDP("a selection", 3.0, 1e-6), run_id="t")
    ledger.external.record(Gaussian(0.5), run_id="v", key="select")
    orders = np.asarray(PrivacyLedger.RDP_ORDERS)
    left = 1e-5 - 1e-6
    rdp = float(np.min(orders * 0.125 + np.log1p(-1 / orders) - (math.log(left) + np.log(orders)) / (orders - 1)))
    composed = guarantee_statement(ledger, 1e-5).composed
    assert composed.epsilon == pytest.approx(3.0 + rdp, rel=1e-9) and composed.epsilon > 3.0
    assert any("basic composition" in m for m in composed.mechanisms)
    both = PrivacyLedger()
    both.external.record(ApproximateDP("a selection", 3.0, 4e-6), run_id="t")
    both.external.record(ValidationApproximateDP("its scores", 2.0, 4e-6), run_id="v", key="select")
    assert guarantee_statement(both, 1e-5).composed.epsilon == 5.0
    assert guarantee_statement(both, 8e-6).composed.epsilon == math.inf


def test_a_validation_side_with_an_epsilon_delta_entry_states_the_composed_guarantee_and_how():
    # issue 41 (valeps41): a selection's (ε, δ) entry and Gaussian releases under one budget; the statement
    # gives Σε_i + ε_μ(δ − Σδ_i) (ε_μ recomputed here with dp-accounting's PLD accountant) and says how
    import json

    import dp_accounting
    from dp_accounting.pld import pld_privacy_accountant

    from botorch_dp.privacy.ledger import ValidationApproximateDP

    ledger = PrivacyLedger(validation_mu_budget=1.5, validation_delta=DELTA)
    entry = ValidationApproximateDP("a private selection's scores", 1.0, 4e-6)
    with ledger.charge({"select": entry}, run_id="sel") as meter:
        meter.record("select", entry)
    for t in range(3):
        with ledger.charge({"grad": Gaussian(0.5)}, run_id="run-a", step=t) as meter:
            meter.record("grad", Gaussian(0.5))
    accountant = pld_privacy_accountant.PLDAccountant(value_discretization_interval=1e-4)
    accountant.compose(dp_accounting.GaussianDpEvent(1.0 / math.sqrt(0.75)), count=1)
    expected = 1.0 + accountant.get_epsilon(DELTA - 4e-6)
    statement = guarantee_statement(ledger, DELTA)
    v = statement.validation
    assert v.epsilon == pytest.approx(expected, rel=1e-4) and v.delta == DELTA and v.mu is None
    assert v.composition["approximate_epsilon"] == 1.0 and v.composition["approximate_delta"] == 4e-6
    text = str(statement)
    assert "by basic composition: the (epsilon, delta) entries add to (epsilon = 1, delta = 4e-06)" in text
    assert "(mu = 0.866 Gaussian DP, exact conversion) are stated at the delta they leave, 6e-06" in text
    plain = json.loads(json.dumps(statement.to_dict()))
    assert plain["validation"]["composition"]["rest_delta"] == pytest.approx(6e-6, rel=1e-12)
    assert plain["validation"]["epsilon"] == pytest.approx(expected, rel=1e-4)
    assert "composition" not in guarantee_statement(_validation_ledger(), DELTA).to_dict()["validation"]
