"""DPGIBOResult.released_values (issue 43, item 6): one row per released quantity of a run, each equal to
the release's value, with the mu of the run's own ledger record and the epsilon of what it depends on
(recomposed here from the ledger's records); the NON-PRIVATE diagnostics never appear."""

import dataclasses

import pytest

from botorch_dp.optim import DPGIBO
from botorch_dp.optim.released_values import release_rows
from botorch_dp.privacy.analysis.gdp import compose_gdp, gdp_epsilon
from botorch_dp.privacy.ledger import parse_release_key

from .loop_helpers import nl_config, normal_location

ADAPTIVE = dict(
    clip_bound="adaptive", noise_schedule="adaptive_norm", selection="noisy_loss", selection_mu=0.2, loss_clip=3.0
)
EXPONENTIAL = dict(selection="exponential", selection_epsilon=0.5, loss_clip=3.0)
PARTS = {"gradient": "grad", "gradient_norm": "norm", "clip_count": "clip", "selection": "select"}


def _run(**kw):
    _, objective = normal_location(n=40, d=2)
    opt = DPGIBO(nl_config(d=2, privacy_mu=1.0, num_iterations=3, seed=5, record_non_private_diagnostics=True, **kw))
    return opt, opt.run(objective, progress=False)


@pytest.mark.parametrize("options", [ADAPTIVE, EXPONENTIAL], ids=["adaptive_noisy_loss", "exponential"])
def test_each_row_is_a_release_with_its_ledger_charge(options):
    opt, result = _run(**options)
    rows = result.released_values(as_frame=False)
    release, delta = result.release, result.release.guarantee.delta
    records = opt.ledger.validation.records(opt.run_id)
    assert [r.key for r in records] == [r.key for r in result.records]
    charged = [r for r in rows if r["mu"] is not None]
    # a row per record, with the record's mu (its own epsilon: the exact GDP one, or the pure epsilon)
    keys = [parse_release_key(r.key) for r in records]
    assert sorted(((r["step"], PARTS[r["quantity"]]) for r in charged), key=str) == sorted(keys, key=str)
    by_key = {parse_release_key(r.key): r.event for r in records}
    for row in charged:
        event = by_key[(row["step"], PARTS[row["quantity"]])]
        assert row["mu"] == event.mu
        pure = getattr(event, "epsilon", None)
        expected = gdp_epsilon(event.mu, delta) if pure is None else min(pure, gdp_epsilon(event.mu, delta))
        assert row["epsilon"] == pytest.approx(expected, rel=1e-12)
    assert len(charged) == len(records)

    # the values are the release's
    def values(quantity):
        return [r["value"] for r in rows if r["quantity"] == quantity]

    assert values("gradient") == release.released_gradients.tolist()
    assert values("iterate") == release.iterates.tolist() and values("theta") == [release.theta.tolist()]
    assert values("gradient_norm") == release.noisy_norms and values("clip_count") == release.clip_counts
    if release.selection_scores is not None:
        assert values("selection") == [release.selection_scores.tolist()]
    else:
        assert values("selection") == [release.selected_index]
    # an iterate's epsilon is that of every release before its step; theta's that of the whole run
    for row in (r for r in rows if r["quantity"] == "iterate"):
        before = [e.mu for (s, _), e in by_key.items() if s is not None and s < row["step"]]
        assert row["epsilon"] == pytest.approx(gdp_epsilon(compose_gdp(before), delta), rel=1e-12, abs=1e-12)
    assert values("theta") and rows[-1]["epsilon"] == pytest.approx(
        gdp_epsilon(opt.ledger.validation.mu(opt.run_id), delta), rel=1e-12
    )
    assert {r["protected"] for r in rows} == {"validation users"}
    # nothing un-noised: no coordinate of an un-noised gradient
    table = {x for r in rows for x in _flat(r["value"])}
    unnoised = set(result.diagnostics.unnoised_gradients.flatten().tolist())
    assert unnoised and not table & unnoised


def test_without_its_records_a_result_states_only_the_charges_its_release_holds():
    _, result = _run(**EXPONENTIAL)
    rows = release_rows(result.release, delta=1e-5)
    grads = [r for r in rows if r["quantity"] == "gradient"]
    assert [r["mu"] for r in grads] == result.release.step_mus
    selection = next(r for r in rows if r["quantity"] == "selection")
    assert selection["mu"] is None and selection["epsilon"] is None  # not in the release: not guessed
    assert rows[-1]["quantity"] == "theta" and rows[-1]["epsilon"] is None


def _flat(value):
    if isinstance(value, list):
        return [x for v in value for x in _flat(v)]
    return [float(value)] if isinstance(value, (int, float)) else []


def test_a_new_options_record_describes_its_own_rows():
    r"""Issue 42 item 3: the rows come from what each record says it released (``released()``) and
    charged (``charged()``), so a new option's record shows without a change here: its part's rows
    come in its step, after the named parts, with the μ it holds (``None``: not held, not guessed)."""

    class Tally:  # a user's strategy's record: one noisy tally per step, the first charged 0.3 here
        def released(self):
            return {(0, "tally"): 4.5, (1, "tally"): 5.5}

        def charged(self):
            return {(0, "tally"): 0.3, (1, "tally"): None}

    _, result = _run()
    release = dataclasses.replace(result.release, records={**result.release.records, "tally": Tally()})
    rows = release_rows(release, delta=1e-5)
    tallies = [(r["step"], r["value"], r["mu"]) for r in rows if r["quantity"] == "tally"]
    assert tallies == [(0, 4.5, 0.3), (1, 5.5, None)]
    step_0 = [r["quantity"] for r in rows if r["step"] == 0]
    assert step_0 == ["iterate", "gradient", "tally"]
    plain = release_rows(result.release, delta=1e-5)
    assert [(r["quantity"], r["step"], r["value"], r["mu"]) for r in plain] == [
        (r["quantity"], r["step"], r["value"], r["mu"]) for r in rows if r["quantity"] != "tally"
    ]
    # what an iterate depends on now includes the tally: its charge where held, else unknown
    iterate = {r["step"]: r["epsilon"] for r in rows if r["quantity"] == "iterate"}
    mu_0 = result.release.step_mus[0]
    assert iterate[1] == pytest.approx(gdp_epsilon(compose_gdp([mu_0, 0.3]), 1e-5), rel=1e-12)
    assert iterate[2] is None and rows[-1]["epsilon"] is None
