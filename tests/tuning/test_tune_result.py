"""What ``tune`` returns (``tuning.tune_result``).

TuneResult.guarantee_report (issue 43, item 4): it names the protected sets and the ones that are NOT
protected, and explains configurations against the ledger's runs with numbers recomputed here from the
ledger's own records (a validation-only tune, a DP-SGD tune, an enumerate over categoricals, selections).

TuneResult.released_values (issue 43, item 6): one row per released quantity, each equal to the
release object's value, with the mu charged to the ledger for it (recomposed here from the ledger's
records) and the epsilon of what it depends on; a private selection's table holds its winner only; no
per-user loss nor any value computed without noise appears (checked against the objective's own losses
and the NON-PRIVATE diagnostics)."""

import functools
import json
import sys
import warnings

import pytest
import torch
from torch import nn

from botorch_dp import tune
from botorch_dp.privacy.analysis.gdp import compose_gdp, gdp_epsilon
from botorch_dp.privacy.ledger import PrivacyLedger
from botorch_dp.training import DPSGDConfig, TrainingConfig
from botorch_dp.tuning import Categorical, Hyperparameter, SearchSpace, TorchModelTuningObjective

from .test_hidden_k import BOX, SPACE, TINY, _prs_trials, _seeds_with_K, losses
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


# ------------------------------------------------------------------ released_values (issue 43, item 6)
DELTA = 1e-5


class Recorded:
    """The objective, keeping every per-user loss it returned (NON-PRIVATE, for the test)."""

    def __init__(self, fn=objective):
        self.fn, self.calls = fn, []

    def __call__(self, configs):
        out = torch.as_tensor(self.fn(configs), dtype=torch.float64)
        self.calls.append((list(configs), out.clone()))
        return out


def _tune_plain(fn, space, **kw):  # without FAST: the released-values tests' own settings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return tune(fn, space, **{"epsilon": 3.0, "delta": DELTA, "seed": 7, "progress": False, **kw})


def _floats(value):
    """Every number in a row's value (nested lists and dicts flattened)."""
    if isinstance(value, dict):
        return [x for v in value.values() for x in _floats(v)]
    if isinstance(value, (list, tuple)):
        return [x for v in value for x in _floats(v)]
    return [float(value)] if isinstance(value, (int, float)) and not isinstance(value, bool) else []


def _sensitive(recorded, loss_clip=3.0):
    """Every per-user loss the objective returned, each row's mean and its [0, C]-clipped mean."""
    out = set()
    for _, losses_ in recorded.calls:
        out.update(losses_.flatten().tolist())
        out.update(losses_.mean(-1).tolist())
        out.update(losses_.clamp(0.0, loss_clip).mean(-1).tolist())
    return out


def test_an_enumerate_table_is_its_releases_with_the_ledger_s_charges_and_nothing_sensitive():
    recorded = Recorded()
    result = _tune_plain(
        recorded, MIXED, **{**FAST, "num_iterations": 2}, record_non_private_diagnostics=True, method="dp_gibo"
    )
    rows = result.released_values(as_frame=False)
    ledger = result.ledger
    for k, run in enumerate(result.runs):
        mine = [r for r in rows if r["run"] == k and r["quantity"] != "hyperparameters"]
        assert all(r["configuration"] == run.configuration for r in mine)
        release = run.result.release
        by = {(r["quantity"], r["step"]): r for r in mine}
        assert len(by) == len(mine)  # one row per released quantity
        T = release.released_gradients.shape[0]
        assert sorted(by) == sorted(
            [("gradient", t) for t in range(T)]
            + [("iterate", t) for t in range(T + 1)]
            + [("theta", None), ("score", None)]
        )
        # the values are the release's, bit for bit
        for t in range(T):
            assert torch.equal(
                torch.tensor(by["gradient", t]["value"], dtype=torch.float64), release.released_gradients[t]
            )
        for t in range(T + 1):
            assert torch.equal(torch.tensor(by["iterate", t]["value"], dtype=torch.float64), release.iterates[t])
        assert by["theta", None]["value"] == release.theta.tolist() and by["score", None]["value"] == run.noisy_score
        # each gradient's mu is its ledger record's; the run's rows compose to what the ledger holds for it
        records = {r.key: r.event.mu for r in ledger.validation.records(run.run_id)}
        for t in range(T):
            assert by["gradient", t]["mu"] == records[f"step-{t:04d}"]
            assert by["gradient", t]["epsilon"] == pytest.approx(
                gdp_epsilon(records[f"step-{t:04d}"], DELTA), rel=1e-12
            )
        charged = [r["mu"] for r in mine if r["quantity"] != "score" and r["mu"] is not None]
        assert len(charged) == len(records) == T  # a row for every record of the run
        assert compose_gdp(charged) == pytest.approx(ledger.validation.mu(run.run_id), rel=1e-12)
        # an iterate depends on the steps before it
        for t in range(T + 1):
            before = compose_gdp(records[f"step-{s:04d}"] for s in range(t))
            assert by["iterate", t]["epsilon"] == pytest.approx(gdp_epsilon(before, DELTA), rel=1e-12, abs=1e-12)
            assert by["iterate", t]["mu"] is None
    # the K scores compose to the one charge of the scores' release
    (score_run,) = {r.run_id for r in ledger.validation.records() if r.key == "score"}
    scores = [r for r in rows if r["quantity"] == "score"]
    assert len(scores) == len(result.runs)
    assert compose_gdp(r["mu"] for r in scores) == pytest.approx(ledger.validation.mu(score_run), rel=1e-12)
    # last: the chosen hyperparameters in natural units, under the whole procedure's guarantee
    last = rows[-1]
    assert last["quantity"] == "hyperparameters" and last["value"] == result.hyperparameters
    assert last["run"] == result.chosen and last["epsilon"] == pytest.approx(3.0, rel=1e-9)
    assert {r["protected"] for r in rows} == {"validation users"} and {r["delta"] for r in rows} == {DELTA}
    # nothing sensitive: no per-user loss, no (clipped) mean loss, no un-noised gradient coordinate
    released = {x for r in rows for x in _floats(r["value"])}
    assert not released & _sensitive(recorded)
    unnoised = {x for run in result.runs for x in run.result.diagnostics.unnoised_gradients.flatten().tolist()}
    assert unnoised and not released & unnoised


def test_a_sampled_selection_s_table_has_its_winner_only():
    for seed in _seeds_with_K([3]):  # three trials: two of them lost
        recorded = Recorded(losses)
        result = _tune_plain(recorded, SPACE, strategy="sample", mean_trials=2.0, seed=seed, **TINY)
        rows = result.released_values(as_frame=False)
        winner = result.runs[0].result.release
        assert {r["run"] for r in rows} == {0} and len(result.runs) == 1
        assert [r["value"] for r in rows if r["quantity"] == "winner_score"] == [result.runs[0].noisy_score]
        iterates = [r["value"] for r in rows if r["quantity"] == "iterate"]
        assert iterates == winner.iterates.tolist()
        # every trial's final point was scored (a one-row call): the losing ones appear nowhere in the table
        finals = [configs[0] for configs, out in recorded.calls if len(configs) == 1]
        assert len(finals) == 3 and finals.count(result.hyperparameters) >= 1
        released = [r["value"] for r in rows if r["quantity"] == "hyperparameters"]
        assert released == [result.hyperparameters]
        losers = [c for c in finals if c != result.hyperparameters]
        table = {x for r in rows for x in _floats(r["value"])}
        assert losers and not any(c["lr"] in table for c in losers)  # neither in natural units ...
        assert not any(SPACE.from_natural({"lr": c["lr"]}).tolist()[0] in table for c in losers)  # ... nor as theta
        assert not table & _sensitive(recorded)
        # inside the selection no row has a charge of its own: the selection's epsilon covers them all
        assert {r["mu"] for r in rows} == {None} and {r["epsilon"] for r in rows} == {result.guarantee.epsilon}


def test_a_private_random_search_table_has_the_winner_and_no_losing_score():
    seed = 0
    result = _tune_plain(Recorded(losses), BOX, method="private_random_search", seed=seed, **TINY)
    mu0 = result.runs[0].result.result.guarantee.details["per_trial_mu"]
    trials = _prs_trials(seed, mu0)  # NON-PRIVATE: every trial, to check none leaks
    rows = result.released_values(as_frame=False)
    assert [r["quantity"] for r in rows] == ["theta", "winner_score", "hyperparameters"]
    assert rows[1]["value"] == trials.released_score and rows[0]["value"] == trials.theta.tolist()
    losers = [s for s in trials.history.extras["noisy_scores"].tolist() if s != trials.released_score]
    table = {x for r in rows for x in _floats(r["value"])}
    assert not table & set(losers)
    assert all(r["epsilon"] == result.guarantee.epsilon and r["mu"] is None for r in rows)


def test_a_data_frame_when_pandas_is_installed_else_a_list_of_dicts(monkeypatch):
    pandas = pytest.importorskip("pandas")
    result = _tune_plain(objective, CONTINUOUS, **{**FAST, "num_iterations": 1})
    frame = result.released_values()
    rows = result.released_values(as_frame=False)
    assert isinstance(frame, pandas.DataFrame) and len(frame) == len(rows)
    assert list(frame.columns) == [
        "run",
        "configuration",
        "quantity",
        "step",
        "value",
        "mu",
        "epsilon",
        "delta",
        "protected",
    ]
    assert frame["quantity"].tolist() == [r["quantity"] for r in rows] and str(frame["step"].dtype) == "Int64"
    monkeypatch.setitem(sys.modules, "pandas", None)  # as if pandas were not installed
    assert result.released_values() == rows
    with pytest.raises(ImportError, match="as_frame=True needs pandas"):
        result.released_values(as_frame=True)
