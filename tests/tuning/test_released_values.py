"""TuneResult.released_values (issue 43, item 6): one row per released quantity, each equal to the
release object's value, with the mu charged to the ledger for it (recomposed here from the ledger's
records) and the epsilon of what it depends on; a private selection's table holds its winner only; no
per-user loss nor any value computed without noise appears (checked against the objective's own losses
and the NON-PRIVATE diagnostics)."""

import sys
import warnings

import pytest
import torch

from botorch_dp import tune
from botorch_dp.privacy.analysis.gdp import compose_gdp, gdp_epsilon

from .test_guarantee_report import CONTINUOUS
from .test_hidden_k import BOX, SPACE, TINY, _prs_trials, _seeds_with_K, losses
from .test_one_call import FAST, MIXED, objective

DELTA = 1e-5


class Recorded:
    """The objective, keeping every per-user loss it returned (NON-PRIVATE, for the test)."""

    def __init__(self, fn=objective):
        self.fn, self.calls = fn, []

    def __call__(self, configs):
        out = torch.as_tensor(self.fn(configs), dtype=torch.float64)
        self.calls.append((list(configs), out.clone()))
        return out


def _tune(fn, space, **kw):
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
    result = _tune(
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
        result = _tune(recorded, SPACE, strategy="sample", mean_trials=2.0, seed=seed, **TINY)
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
    result = _tune(Recorded(losses), BOX, method="private_random_search", seed=seed, **TINY)
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
    result = _tune(objective, CONTINUOUS, **{**FAST, "num_iterations": 1})
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
