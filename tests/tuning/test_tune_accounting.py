"""tune(..., accounting=) (issue 41, item 2): the accounting of the private selection over whole DP-SGD training
runs is passed through from tune's call to the training ledger's charge, stated in the result, its report and its
JSON, and a bad value (or one where no such selection runs) is refused by name before anything trains."""

import json
import warnings

import pytest

from botorch_dp.privacy.ledger import ApproximateDP, TrainingMechanism, ValidationApproximateDP, ValidationMechanism
from botorch_dp.privacy.seeding import PrivacyWarning
from botorch_dp.tuning import load_sklearn_classification
from botorch_dp.tuning.one_call import tune
from tests.methods.test_training_runs import DELTA, SPACE, objective


@pytest.fixture(scope="module")
def small():
    data = load_sklearn_classification("digits", seed=0)
    return (data.X_train[:200], data.y_train[:200], data.X_val[:60], data.y_val[:60])


def _tune(obj, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)  # an explicit seed
        return tune(
            obj, SPACE, **{"epsilon": 3.0, "delta": DELTA, "mean_trials": 3.0, "seed": 2, "progress": False, **kw}
        )


@pytest.mark.parametrize(
    "accounting, event, words",
    [("rdp", TrainingMechanism, "accounted in RDP"), ("profile", ApproximateDP, "privacy-profile bound")],
)
def test_the_accounting_asked_of_tune_is_the_one_charged_and_stated(small, accounting, event, words):
    obj = objective(small)
    result = _tune(obj, protect="training", accounting=accounting)
    assert (
        result.method == "training_selection" and len(obj.seen) >= 1 and {training for training, _ in obj.seen} == {1}
    )
    (record,) = obj.ledger.training.records()
    assert type(record.event) is event
    assert 0.99 * 3.0 <= obj.ledger.training.epsilon(DELTA) <= 3.0
    selection = result.runs[0].result.result
    assert selection.guarantee["training"].details["accounting"] == accounting
    # stated, with the choice asked for, in the procedure, the statement (the report) and the JSON
    for text in (result.procedure, str(result.statement), json.dumps(json.loads(result.to_json())["statement"])):
        assert words in text and f"accounting={accounting!r}" in text


def test_auto_charges_the_profile_where_it_needs_less_noise(small):
    obj = objective(small)
    result = _tune(obj, protect="training")  # accounting="auto" by default
    details = result.runs[0].result.result.guarantee["training"].details
    assert details["accounting"] == "profile"  # at q = 0.1, T = 10, E[K] = 3 it does (the RDP σ is larger)
    assert details["noise_multiplier"] < details["rdp_noise_multiplier"]
    assert type(obj.ledger.training.records()[0].event) is ApproximateDP


@pytest.mark.parametrize(
    "kw, match",
    [
        ({"protect": "training", "accounting": "pld"}, "accounting"),
        ({"protect": "training", "accounting": None}, "accounting"),
        ({"protect": "validation", "accounting": "rdp"}, "accounting='rdp'"),
    ],
)
def test_a_bad_or_unused_accounting_is_refused_by_name_before_anything(small, kw, match):
    obj = objective(small)
    with pytest.raises(ValueError, match=match):
        _tune(obj, **kw)
    assert obj.seen == [] and obj.ledger.training.records() == [] and obj.ledger.validation.records() == []


def test_the_accounting_reaches_the_selection_method_fast():
    r"""The fast check of the pass-through (no training): tune's choice reaches the method it builds."""
    from botorch_dp.methods.training_choice import training_method

    for accounting in ("auto", "profile", "rdp"):
        method = training_method(
            "training_selection", SPACE, epsilon=3.0, delta=DELTA, protect="both", accounting=accounting
        )
        assert method.accounting == accounting and f"accounting={accounting!r}" in method.describe()


@pytest.mark.parametrize(
    "accounting, event",
    [("auto", ValidationApproximateDP), ("profile", ValidationApproximateDP), ("rdp", ValidationMechanism)],
)
def test_tune_protecting_both_charges_the_scores_by_the_accounting_asked_for(small, accounting, event):
    r"""Through the user's ``tune(..., protect="both", accounting=...)``: the validation users' charge is the
    scores' privacy-profile ``(ε, δ)`` (``"auto"``, ``"profile"``) or their RDP curve, once, before the first trial,
    and the result's statement says so (μ undefined for the (ε, δ) entry: the ledger refuses it)."""
    obj = objective(small)
    result = _tune(obj, protect="both", accounting=accounting, max_trials=1)
    (record,) = obj.ledger.validation.records()
    assert type(record.event) is event and len(obj.seen) >= 1
    assert 0.99 * 3.0 <= obj.ledger.validation.epsilon(DELTA) <= 3.0
    validation = result.runs[0].result.result.guarantee["validation"]
    if event is ValidationApproximateDP:
        assert (record.event.epsilon, record.event.delta) == (validation.epsilon, validation.delta) == (3.0, DELTA)
        assert "privacy-profile" in str(result.statement)
        with pytest.raises(ValueError, match="no GDP mu covers"):
            obj.ledger.validation.mu()
    assert validation.details["accounting"] == ("rdp" if accounting == "rdp" else "profile")
