r"""``tuning.tune_call``: the checks and resolutions of ``tune``'s arguments before anything is computed
(``protect``, ``method``, the proxy's data) and the warning that states the composed cost of DP-GIBO's
training runs. The whole call is tested through ``tune`` in the other modules of this folder."""

from types import SimpleNamespace

import pytest
import torch

from botorch_dp.objectives.datasets import ClassificationData
from botorch_dp.privacy.ledger.events import DPSGDRun
from botorch_dp.privacy.seeding import PrivacyWarning
from botorch_dp.tuning import Hyperparameter, SearchSpace
from botorch_dp.tuning import tune_call as tune_call_module
from botorch_dp.tuning.tune_call import (
    METHODS,
    PROTECT,
    TRAINING_METHODS,
    check_method,
    check_protect,
    check_training_method,
    composed_cost_warning,
    proxy_data,
    selects_training_runs,
)
from tests.methods.method_helpers import training_proxy_data as _proxy_data
from tests.training.test_selection_accounting import DELTA, SHAPES, _ledger_epsilon

#: An objective that trains with DP-SGD (what ``selects_training_runs`` looks for), and ones that do not.
DP_SGD = SimpleNamespace(train_covered=lambda *a: None, planned_run=lambda: "a planned run")
WITHOUT_DP_SGD = SimpleNamespace(train_covered=lambda *a: None, planned_run=lambda: None)
PLAIN = object()


def test_only_an_objective_with_a_planned_dp_sgd_run_selects_training_runs():
    assert selects_training_runs(DP_SGD)
    assert not selects_training_runs(WITHOUT_DP_SGD) and not selects_training_runs(PLAIN)
    assert not selects_training_runs(SimpleNamespace(train_covered=None, planned_run=lambda: "run"))


@pytest.mark.parametrize("method", [*METHODS, *TRAINING_METHODS])
@pytest.mark.parametrize("objective", [DP_SGD, WITHOUT_DP_SGD, PLAIN], ids=["dp_sgd", "without", "plain"])
@pytest.mark.parametrize("protect", [None, *PROTECT])
def test_protect_resolves_by_the_stated_table(protect, objective, method):
    capable, trains = objective is DP_SGD, method in TRAINING_METHODS
    if protect is None:  # the default: "both" where the training records can be protected, else "validation"
        expected = "both" if (capable and (method == "auto" or trains)) else ("error" if trains else "validation")
    elif protect == "validation":
        expected = "error" if trains else "validation"
    else:  # "training" or "both": a DP-SGD objective and auto or a training method
        expected = protect if capable and (method == "auto" or trains) else "error"
    if expected == "error":
        with pytest.raises(ValueError, match=r"protect|method="):
            check_protect(protect, objective, method)
    else:
        assert check_protect(protect, objective, method) == expected


def test_a_bad_protect_is_refused_by_name_with_a_suggestion():
    with pytest.raises(ValueError, match=r"protect must be None or one of .*got 'training_records'"):
        check_protect("training_records", DP_SGD, "auto")
    with pytest.raises(ValueError, match="without DP-SGD"):
        check_protect("both", WITHOUT_DP_SGD, "auto")


def test_the_training_method_is_the_selection_without_a_proxy_and_proxy_then_train_needs_one():
    proxy = _proxy_data()
    assert check_training_method("auto", "both", proxy) == "auto"
    assert check_training_method("auto", "training", None) == "training_selection"
    for method in TRAINING_METHODS:
        assert check_training_method(method, "both", proxy) == method
    with pytest.raises(ValueError, match="proxy_then_train' needs proxy="):
        check_training_method("proxy_then_train", "both", None)


def test_the_proxys_data_is_read_from_each_public_form_and_nothing_else():
    data = _proxy_data()
    assert proxy_data(data) is data
    rows = (data.X_train, data.y_train, data.X_val, data.y_val)
    for given in (rows, list(rows)):
        read = proxy_data(given)
        assert isinstance(read, ClassificationData)
        assert all(torch.equal(getattr(read, k), getattr(data, k)) for k in ("X_train", "y_train", "X_val", "y_val"))
    for other in (None, rows[:3], lambda X: X, SimpleNamespace(data=data)):  # data only from a tuning objective
        assert proxy_data(other) is None


def test_an_unknown_method_is_refused_by_name_with_a_suggestion():
    with pytest.raises(ValueError, match=r"method must be one of .*got 'dp_gbo'.*dp_gibo"):
        check_method("dp_gbo", None, 1)


def test_an_objective_that_charges_training_keeps_dp_gibo_and_refuses_forced_selections():

    proxy = object()
    assert check_method("auto", proxy, 2, trains=True) == "dp_gibo"  # the training ledger would count trials
    assert check_method("auto", proxy, 2, trains=False) == "auto"
    # without a proxy "auto" is left to the public rule (methods.default_rule; tests/tuning/test_tune_default_rule.py)
    assert check_method("auto", None, 2) == "auto" and check_method("auto", None, 2, trains=True) == "dp_gibo"
    assert check_method("auto", proxy, 2, strategy="sample") == "dp_gibo"
    with pytest.raises(ValueError, match=r"method='dp_hypo' with an objective that charges DP training runs"):
        check_method("dp_hypo", proxy, 2, trains=True)


def test_a_continuous_space_with_a_training_objective_refuses_selections_too():
    # one configuration: the selection's hidden K would still show as the number of charged trainings

    proxy = object()
    assert check_method("auto", proxy, 1, trains=True) == "dp_gibo"
    assert check_method("auto", proxy, 1, trains=False) == "auto"
    for method in ("private_random_search", "dp_hypo"):
        with pytest.raises(ValueError, match=rf"method='{method}' with an objective that charges DP training runs"):
            check_method(method, None, 1, trains=True)
        assert check_method(method, None, 1, trains=False) == method


def test_the_composed_cost_warning_states_the_ledgers_epsilons(monkeypatch):

    sigma, rate, steps = SHAPES[1]
    monkeypatch.setattr(tune_call_module, "training_event", lambda objective, space: DPSGDRun(sigma, rate, steps))
    space = SearchSpace([Hyperparameter("lr", 1e-3, 1.0, log_scale=True)])
    with pytest.warns(PrivacyWarning, match=r"up to 31 DP-SGD training run\(s\)") as caught:
        composed_cost_warning(object(), space, 31, DELTA)
    message = str(caught[0].message)
    each, total = _ledger_epsilon(sigma, rate, steps, 1), _ledger_epsilon(sigma, rate, steps, 31)
    assert f"(epsilon = {each:.4g}, delta = {DELTA:.3g}) with noise_multiplier = {sigma:.4g}" in message
    assert f"composed (RDP) up to epsilon = {total:.4g}" in message
