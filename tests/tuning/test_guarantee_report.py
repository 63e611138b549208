"""TuneResult.guarantee_report (issue 43, item 4): it names the protected sets and the ones that are NOT
protected, and explains configurations against the ledger's runs with numbers recomputed here from the
ledger's own records (a validation-only tune, a DP-SGD tune, an enumerate over categoricals, selections)."""

import functools
import json
import warnings

import pytest
import torch
from torch import nn

from botorch_dp import tune
from botorch_dp.privacy.ledger import PrivacyLedger
from botorch_dp.training import DPSGDConfig, TrainingConfig
from botorch_dp.tuning import Categorical, Hyperparameter, SearchSpace, TorchModelTuningObjective

from .test_one_call import FAST, MIXED, objective
from .test_tune_torch import _data

CONTINUOUS = SearchSpace([Hyperparameter("lr", 1e-4, 1e-1, log_scale=True)])
TORCH_SPACE = SearchSpace(
    [Hyperparameter("lr", 1e-3, 1e-1, log_scale=True), Categorical("activation", ["relu", "tanh"])]
)


def _tune(fn, space, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return tune(fn, space, **{"epsilon": 3.0, "delta": 1e-5, "seed": 7, "progress": False, **FAST, **kw})


def _model(activation):
    act = {"relu": nn.ReLU, "tanh": nn.Tanh}[activation]
    return nn.Sequential(nn.Linear(4, 3), act(), nn.Linear(3, 2)).double()


def _dp_sgd_tune():
    torch_objective = TorchModelTuningObjective(
        _data(),
        TORCH_SPACE,
        model_fn=_model,
        optimizer=lambda params, lr: torch.optim.SGD(params, lr=lr),
        training=TrainingConfig(epochs=1, batch_size=10, seed=0),
        dp_sgd=DPSGDConfig(noise_multiplier=1.5, max_grad_norm=1.0),
    )
    return _tune(torch_objective, TORCH_SPACE, epsilon=2.0, num_iterations=1, protect="validation")


_CASES = {
    "continuous": lambda: _tune(objective, CONTINUOUS),
    "enumerate": lambda: _tune(objective, MIXED, method="dp_gibo"),
    "sample": lambda: _tune(objective, MIXED, strategy="sample", mean_trials=2.0, num_iterations=2),
    "private_random_search": lambda: _tune(objective, CONTINUOUS, method="private_random_search"),
    "dp_sgd": _dp_sgd_tune,
}


@functools.cache
def _result(case):
    return _CASES[case]()


def _sections(report):
    """The report's protected, NOT protected and runs sections (the text between their headings)."""
    protected = report.split("What was protected")[1].split("What was NOT protected:")[0]
    unprotected = report.split("What was NOT protected:")[1].split("Configurations and runs:")[0]
    runs = report.split("Configurations and runs:")[1]
    return protected, unprotected, runs


def _ledger_runs(ledger):
    """{run id: its keys}, read from the ledger's records (independently of the statement)."""
    keys = {}
    for record in ledger.validation.records():
        keys.setdefault(record.run_id, set()).add(record.key)
    return keys


@pytest.mark.parametrize("case", ["continuous", "enumerate", "sample", "private_random_search", "dp_sgd"])
def test_the_report_names_what_was_protected_and_what_was_not(case):
    result = _result(case)
    protected, unprotected, _ = _sections(result.guarantee_report())
    assert "validation users (replace one user's losses): (epsilon = " in protected
    assert "the number of validation users n" in unprotected and "a final model" in unprotected
    trained = bool(result.ledger.training.records())
    assert trained == (case == "dp_sgd")
    if trained:  # the training rows are protected (DP-SGD on this ledger) and so not listed as unprotected
        assert "training records (add or remove one record): (epsilon = " in protected
        assert "if the same people are in both sets" in protected and "training records" not in unprotected
    else:  # no DP training recorded: the training rows have no guarantee, and the report says so
        assert "training records" not in protected
        assert "training records: NO guarantee" in unprotected and "dp_sgd=" in unprotected
    # a selection's wall time is among what is not covered; a fixed procedure has no such line
    assert ("wall time" in unprotected) == (case in ("sample", "private_random_search"))
    assert "proxy" not in unprotected  # no proxy was read


@pytest.mark.parametrize("case", list(_CASES))
def test_configurations_and_runs_are_explained_with_the_ledger_s_numbers(case):
    _check_runs(case, _result(case))


def test_an_enumerate_s_runs_are_its_configurations_and_the_scores_release():
    # the fast version: 2 configurations, one step each
    result = _tune(objective, MIXED, num_iterations=1, method="dp_gibo")
    _check_runs("enumerate", result)
    _, unprotected, _ = _sections(result.guarantee_report())
    assert "training records: NO guarantee" in unprotected


def _check_runs(case, result):
    report = result.guarantee_report()
    _, _, runs_text = _sections(report)
    keys = _ledger_runs(result.ledger)
    total = len(keys)
    scores = sum(k == {"score"} for k in keys.values())
    steps = sum(any(key.startswith("step-") for key in k) for k in keys.values())
    selections = sum(k <= {"select", "sample", "fit"} for k in keys.values())
    assert total == steps + scores + selections  # every run is one of the three kinds here
    assert f"composed over {total} run(s) on these users" in report
    K = len(result.runs)
    if case in ("enumerate", "dp_sgd"):  # one DP-GIBO run per configuration, plus the scores' release
        assert K == len(MIXED.configurations()) == 2 and (steps, scores, selections) == (K, 1, 0)
        assert f"{K} configuration(s)" in runs_text and f"{K} + {scores} = {total} run(s)" in runs_text
        assert f"{steps} DP-GIBO runs (noisy steps), {scores} release of the noisy scores" in report
    elif case == "continuous":
        assert (K, total, steps) == (1, 1, 1) and "1 configuration (no categorical" in runs_text
    else:  # a selection: the winner only, and ONE run in the ledger for all its hidden trials
        assert (K, total, selections) == (1, 1, 1)
        assert "recorded in the ledger as ONE run" in runs_text and "never the number of trials" in runs_text
        assert "1 private selection (one entry for all its hidden trials)" in report
    trainings = len(result.ledger.training.records())
    assert (f"{trainings} training run(s)" in runs_text) == (trainings > 0)
    assert "ledger holds" not in runs_text  # nothing was recorded besides this call's runs


def test_a_shared_ledger_s_earlier_runs_are_counted_and_said():
    ledger = PrivacyLedger()
    _tune(objective, CONTINUOUS, ledger=ledger, num_iterations=2)
    again = _tune(objective, MIXED, ledger=ledger, num_iterations=2, method="dp_gibo")
    keys = _ledger_runs(again.ledger)
    _, _, runs_text = _sections(again.guarantee_report())
    assert len(keys) == 1 + 3  # the first call's run, then this call's two runs and its scores
    assert f"the ledger holds {len(keys)} run(s) on these validation users in all" in runs_text
    assert "3 DP-GIBO runs (noisy steps), 1 release of the noisy scores" in runs_text


def test_the_statement_json_carries_the_runs_and_what_was_not_protected():
    out = json.loads(_result("enumerate").to_json())["statement"]
    assert out["validation_runs"] == {"steps": 2, "scores": 1}
    assert any(line.startswith("training records: NO guarantee") for line in out["not_protected"])
    trained = json.loads(_result("dp_sgd").to_json())["statement"]["not_protected"]
    assert not any("training records" in line for line in trained)


def test_a_proxy_s_users_are_named_among_what_was_not_protected():
    proxy_noise = torch.randn(80, generator=torch.Generator().manual_seed(1), dtype=torch.float64) * 0.1

    def proxy(configs):  # public users: their losses are read without noise
        return (objective(configs)[:, :80] + proxy_noise).clamp(min=0)

    plan_options = dict(fit_kernel=False, clip_quantiles=(0.9,), step_sizes=(0.2,), num_repeats=1)
    result = _tune(
        objective, CONTINUOUS, proxy=proxy, num_users=300, method="dp_gibo", plan_options=plan_options, num_iterations=2
    )
    assert result.planned_on_proxy and result.runs[0].plan is not None
    _, unprotected, _ = _sections(result.guarantee_report())
    assert "the proxy's users (proxy=): their losses were read without noise" in unprotected
    assert not _result("continuous").planned_on_proxy
