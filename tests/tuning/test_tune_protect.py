"""tune(..., protect=) (issue 41, item 2): with a DP-trained objective, protect="training" / "both" run private
selection over whole DP-SGD training runs (one training record, written before the first trial; with "both" one
validation record too), protect=None picks "both" there, protect="training" on a plain objective is refused before
any call, protect="validation" keeps DP-GIBO with every training run charged and its cost stated up front."""

import json
import math
import warnings

import pytest

from botorch_dp.methods.protocol import MethodUnavailable
from botorch_dp.methods.training_selection import TrainingSelectionMethod
from botorch_dp.optim.options import FixedBatches
from botorch_dp.privacy.seeding import PrivacyWarning
from botorch_dp.training.selection_accounting import selection_epsilon, trial_rdp_curve
from botorch_dp.tuning import load_sklearn_classification
from botorch_dp.tuning.one_call import tune
from tests.methods.test_training_runs import DELTA, SPACE, objective


@pytest.fixture(scope="module")
def small():
    data = load_sklearn_classification("digits", seed=0)
    return (data.X_train[:200], data.y_train[:200], data.X_val[:60], data.y_val[:60])


# The counting objective of tests/methods/test_training_runs.py: ``seen`` holds the ledger's (training, validation)
# record counts when each trial starts, ``calls`` counts the plain calls (DP-GIBO's evaluations).


def plain_objective(small):
    return objective(small, dp_sgd=None)


def dp_objective(small):
    return objective(small)


def _tune(obj, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)  # an explicit seed
        return tune(
            obj, SPACE, **{"epsilon": 3.0, "delta": DELTA, "mean_trials": 3.0, "seed": 2, "progress": False, **kw}
        )


def test_protect_training_releases_the_winner_with_one_training_record_and_no_trial_record(small):
    obj = dp_objective(small)
    result = _tune(obj, protect="training")
    assert result.method == "training_selection"
    assert len(obj.seen) >= 1 and obj.seen == [(1, 0)] * len(obj.seen)  # one record before the first trial
    (record,) = obj.ledger.training.records()  # and no record per trial after it
    assert obj.ledger.validation.records() == [] and obj.num_trainings == 0 and obj.calls == 0
    assert "private selection over E[K] = 3 DP-SGD training runs" in record.event.description
    # the released hyperparameters are the winning trial's, read back through θ
    selection = result.runs[0].result.result
    assert result.hyperparameters == pytest.approx(selection.hyperparameters, rel=1e-9)
    assert selection.model is not None
    # the guarantee per protected set: the training records at the ledger's ε, the validation users not at all
    epsilon = obj.ledger.training.epsilon(DELTA)
    assert 0.99 * 3.0 <= epsilon <= 3.0
    assert result.protected == {"training": (pytest.approx(epsilon, rel=1e-12), DELTA), "validation": None}
    assert result.guarantee.epsilon == pytest.approx(epsilon, rel=1e-12)
    out = json.loads(result.to_json())
    assert out["protected"]["validation"] is None
    assert out["protected"]["training"] == {"epsilon": pytest.approx(epsilon, rel=1e-12), "delta": DELTA}
    report = result.guarantee_report()
    assert f"(epsilon = {epsilon:.4g}, delta = {DELTA:.3g})-DP for the training records" in report
    assert "the validation users NOT protected" in report
    assert "1 training record of 1 in the ledger" in report
    # what each trial trains with, read from the charge's statement: DP-SGD (test_tune_amp.py: AMP)
    assert "(each one DP-SGD training run at hyperparameters drawn at random" in report and "AMP" not in report
    assert selection.guarantee["training"].details["mechanism"] == "DP-SGD"
    assert result.method_rule.endswith("private selection over whole DP-SGD training runs")
    assert "the validation users (protect='training')" in report.split("What was NOT protected:")[1]
    rows = result.released_values(as_frame=False)
    assert [r["quantity"] for r in rows] == ["theta", "winner_score", "hyperparameters"]
    assert {r["protected"] for r in rows} == {"training records"}
    assert rows[1]["value"] == selection.released_score


def test_protect_both_also_charges_the_validation_users_up_front(small):
    obj = dp_objective(small)
    result = _tune(obj, protect="both")
    assert obj.seen == [(1, 1)] * len(obj.seen) and len(obj.seen) >= 1
    assert len(obj.ledger.training.records()) == 1 and len(obj.ledger.validation.records()) == 1
    validation, training = obj.ledger.validation.epsilon(DELTA), obj.ledger.training.epsilon(DELTA)
    assert 0.99 * 3.0 <= validation <= 3.0 and 0.99 * 3.0 <= training <= 3.0
    assert result.protected["validation"] == (pytest.approx(validation, rel=1e-12), DELTA)
    assert result.protected["training"] == (pytest.approx(training, rel=1e-12), DELTA)
    assert json.loads(result.to_json())["protected"]["validation"]["epsilon"] == pytest.approx(validation, rel=1e-12)
    assert f"(epsilon = {validation:.4g}, delta = {DELTA:.3g})-DP for the validation users" in result.guarantee_report()
    rows = result.released_values(as_frame=False)
    assert {r["protected"] for r in rows} == {"validation users and training records"}


def test_protect_none_picks_both_for_a_dp_trained_objective_and_validation_otherwise(small):
    obj = dp_objective(small)
    result = _tune(obj)
    assert result.method == "training_selection" and set(p for p, v in result.protected.items() if v) == {
        "training",
        "validation",
    }
    assert len(obj.ledger.validation.records()) == 1
    plain = plain_objective(small)
    result = _tune(plain, num_iterations=1, batches=FixedBatches(2))
    assert result.method == "dp_gibo" and result.protected["training"] is None and plain.calls > 0


@pytest.mark.parametrize("protect", ["training", "both"])
def test_protecting_the_training_records_of_a_plain_objective_is_refused_before_any_call(small, protect):
    obj = plain_objective(small)
    with pytest.raises(ValueError, match=rf"protect='{protect}'.*without DP-SGD"):
        _tune(obj, protect=protect)
    assert obj.calls == 0 and obj.ledger.validation.records() == [] and obj.ledger.training.records() == []


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"protect": "everything"}, r"protect must be None or one of"),
        ({"protect": "training", "method": "dp_gibo"}, r"method='dp_gibo' with protect='training'"),
        ({"protect": "training", "method": "private_random_search"}, r"method='private_random_search' with prot"),
        ({"protect": "both", "num_iterations": 2}, r"\['num_iterations'\] with protect='both'"),
        ({"protect": "both", "checkpoint_dir": "/tmp/x"}, r"checkpoint_dir='/tmp/x' with protect='both'"),
    ],
)
def test_what_the_selection_does_not_take_is_refused_by_name_before_anything(small, kw, match):
    obj = dp_objective(small)
    with pytest.raises(ValueError, match=match):
        _tune(obj, **kw)
    assert obj.seen == [] and obj.calls == 0 and obj.ledger.training.records() == []


def test_protect_validation_keeps_dp_gibo_and_states_the_composed_cost_up_front(small):
    obj = dp_objective(small)
    with pytest.warns(PrivacyWarning, match=r"up to (\d+) DP-SGD training run\(s\)") as caught:
        result = tune(
            obj,
            SPACE,
            epsilon=3.0,
            delta=DELTA,
            protect="validation",
            num_iterations=1,
            batches=FixedBatches(2),
            progress=False,
        )
    assert result.method == "dp_gibo" and result.protected["training"] is None
    message = next(str(w.message) for w in caught if "DP-SGD training run" in str(w.message))
    trainings = obj.num_trainings
    assert trainings == len(obj.ledger.training.records()) >= 1
    planned = int(message.split("up to ")[1].split(" ")[0])
    assert planned >= trainings  # the most trainings, stated before the first
    sigma, rate, steps = obj.planned_run()
    each = selection_epsilon(trial_rdp_curve(sigma, [(rate, steps)]), DELTA)
    assert f"(epsilon = {each:.4g}, delta = {DELTA:.3g}) with noise_multiplier = {sigma:.4g}" in message
    # the result states the number of trainings and each run's ε and σ
    report = result.guarantee_report()
    assert f"{trainings} training run(s)" in report
    assert f"each run alone (epsilon = {each:.4g}, delta = {DELTA:.3g}) at noise_multiplier = {sigma:.4g}" in report
    assert math.isfinite(each) and each > 0


def test_the_method_is_not_simulated_on_a_proxy():
    method = TrainingSelectionMethod(SPACE, 3.0, DELTA, 3.0)
    with pytest.raises(MethodUnavailable, match="not simulated on a proxy"):
        method.simulate(lambda X: X, None, 0)
    assert method.gdp_mu is None and "E[K] = 3" in method.describe()
