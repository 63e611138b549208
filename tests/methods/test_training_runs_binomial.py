"""select_training_runs with a binomial number of trials (Koskela, Redberg & Wang): K ~ Binomial(m, E[K]/m) is drawn
after the one up-front charge, the charged RDP curve is the binomial bound of the reference trial curve, padding to
m trials hides K from the run's length entirely, the release shows nothing of K, and binomial_rounds is checked by
name before anything trains."""

import json
import re

import numpy as np
import pytest

from botorch_dp.methods.training_runs import select_training_runs
from botorch_dp.privacy.ledger import TrainingMechanism
from botorch_dp.training.selection_accounting import selection_epsilon, selection_rdp_curve, trial_rdp_curve
from tests.methods.test_training_runs import DELTA, SPACE, objective

BINOMIAL = dict(distribution="binomial", mean_trials=2.0, binomial_rounds=4)


@pytest.fixture(scope="module")
def small(data):
    return (data.X_train[:200], data.y_train[:200], data.X_val[:60], data.y_val[:60])


def trials_started(obj):
    r"""The training records the ledger held as each trial started (``objective`` notes them)."""
    return [training for training, _ in obj.seen]


def _masked(text):
    return re.sub(r"-?\d+(\.\d+)?(e-?\d+)?", "#", re.sub(r"[0-9a-f]{32}", "ID", text))


def test_binomial_selection_is_charged_once_up_front_at_its_bound_and_hides_k(small):
    runs = {}
    for seed in range(1, 12):
        obj = objective(small)
        result = select_training_runs(
            obj,
            epsilon=3.0,
            delta=DELTA,
            seed=seed,
            max_trials=4,
            accounting="rdp",
            non_private_trials=True,
            **BINOMIAL,
        )
        assert 0 <= result.num_trials <= 4
        assert trials_started(obj) == [1] * 4  # padded to m = 4 trials, each after the one record
        (record,) = obj.ledger.training.records()
        assert type(record.event) is TrainingMechanism
        sigma = result.guarantee["training"].details["noise_multiplier"]
        expected = selection_rdp_curve(trial_rdp_curve(sigma, [(0.1, 10)]), **BINOMIAL)
        np.testing.assert_allclose(record.event.rdp, expected, rtol=1e-12)
        assert 0.99 * 3.0 <= selection_epsilon(expected, DELTA) <= 3.0
        assert obj.ledger.training.epsilon(DELTA) == pytest.approx(selection_epsilon(expected, DELTA), rel=1e-12)
        assert result.guarantee["training"].details["p_more_than_max_trials"] == 0.0  # K <= m always
        runs.setdefault(result.num_trials >= 1 and result.num_trials, (seed, result.release))
        if len([k for k in runs if k]) >= 2:
            break
    released = [release for k, (_, release) in runs.items() if k]
    assert len(released) >= 2  # two seeds whose K (both >= 1) differ
    masked = {(_masked(repr(r)), _masked(json.dumps(r.to_json(), sort_keys=True))) for r in released}
    assert len(masked) == 1
    text = "".join(masked.pop())
    assert "binomial(m = #, gamma = #)" in text and not re.search(r"num_trials|\bK\s*=\s*\d", text)


@pytest.mark.parametrize(
    "kw, match",
    [
        ({"distribution": "binomial", "mean_trials": 2.0}, "binomial_rounds must be an integer"),
        ({"distribution": "binomial", "mean_trials": 5.0, "binomial_rounds": 4}, "exceeds binomial_rounds=4"),
        ({"distribution": "tnb", "mean_trials": 2.0, "binomial_rounds": 4}, "binomial_rounds=4"),
    ],
)
def test_binomial_rounds_is_checked_by_name_before_anything(small, kw, match):
    obj = objective(small)
    with pytest.raises(ValueError, match=match):
        select_training_runs(obj, epsilon=3.0, delta=DELTA, seed=1, **kw)
    assert obj.seen == [] and obj.ledger.training.records() == []


def test_the_selection_method_runs_binomial_k_and_says_so(small):
    from botorch_dp.methods.training_selection import TrainingSelectionMethod

    method = TrainingSelectionMethod(
        SPACE, 3.0, DELTA, 2.0, "training", distribution="binomial", max_trials=4, binomial_rounds=4,
        accounting="rdp",
    )  # fmt: skip
    assert "over m = 4 rounds" in method.describe() and "accounting='rdp'" in method.describe()
    for seed in range(1, 8):
        obj = objective(small)
        try:
            run = method.run_private(obj, ledger=obj.ledger, seed=seed)
        except ValueError as err:  # K = 0: no point to return (charged all the same)
            assert "K = 0" in str(err) and len(obj.ledger.training.records()) == 1
            continue
        break
    assert trials_started(obj) == [1] * 4  # padded to m = 4 trials after the one record
    assert "binomial(m = 4, gamma = 0.5)" in run.description and "accounting='rdp'" in run.description
    assert run.guarantees["training"][0] <= 3.0 and run.guarantees["validation"] is None
