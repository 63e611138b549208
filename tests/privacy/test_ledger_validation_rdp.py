r"""Validation releases given by a Rényi-DP curve (``record_validation_mechanism``): RDP
composition with the Gaussian and pure releases, the every-order budget filter, state and
database round trips."""

from __future__ import annotations

import json
import math
import multiprocessing
import uuid
import warnings

import numpy as np
import pytest
from dp_accounting import GaussianDpEvent
from dp_accounting.rdp import RdpAccountant

from botorch_dp.privacy.analysis.gdp import compose_gdp, gdp_epsilon, pure_dp_to_gdp_mu
from botorch_dp.privacy.analysis.rdp import rdp_curve_epsilon
from botorch_dp.privacy.ledger import Gaussian, PrivacyBudgetExceeded, PrivacyLedger, PureDP, ValidationMechanism
from botorch_dp.privacy.ledger_storage import open_storage
from botorch_dp.privacy.seeding import PrivacyWarning

from . import ledger_workers
from .ledger_helpers import gone_holder, reserve_for

DELTA = 1e-5
ORDERS = PrivacyLedger.RDP_ORDERS
GRID = np.asarray(ORDERS)


def _gaussian(mu):
    return lambda alpha: alpha * mu * mu / 2.0


def _selection_like(alpha):
    r"""A curve no μ-GDP dominates: large at small orders (a ``log E[K]/(α − 1)``-like term)."""
    return 0.05 * alpha + 0.2 / (alpha - 1.0)


def _event(curve, description="curve"):
    return ValidationMechanism(description, tuple(curve(a) for a in ORDERS))


def _spend(ledger, event, run_id, part="select"):
    r"""One release through the charge protocol (admitted before, recorded at the draw)."""
    with ledger.charge({part: event}, run_id=run_id) as meter:
        meter.record(part, event)


# -------------------------------------------------------------- GDP-only: unchanged


def test_gdp_only_ledger_gives_the_closed_forms_bit_for_bit():
    mus = [0.2, 0.3, 0.25, 0.1]
    ledger = PrivacyLedger(validation_mu_budget=1.0)
    for t, mu in enumerate(mus):
        ledger.external.check(Gaussian(mu))
        ledger.external.record(Gaussian(mu), run_id="run-a", key=f"step-{t:04d}")
    ledger.external.record(PureDP(0.3), run_id="run-a", key="select")
    charged = [*mus, pure_dp_to_gdp_mu(0.3)]
    spent = compose_gdp(charged)
    assert ledger.validation.mu() == spent  # bit for bit
    assert ledger.validation.epsilon(DELTA) == gdp_epsilon(spent, DELTA)
    assert ledger.validation.remaining_mu() == math.sqrt(1.0 - spent * spent)
    assert ledger.validation.mechanisms() == {}
    report = ledger.report(DELTA)["validation"]
    assert report["mu"] == spent and "rdp_order" not in report and "rdp_releases" not in report
    assert all(
        set(e) in ({"release_id", "run_id", "key", "mu"}, {"release_id", "run_id", "key", "mu", "epsilon"})
        for e in ledger.state_dict()["validation_steps"]
    )
    # the GDP filter: exactly the room sqrt(1 - spent^2) fits, a bit more does not
    room = ledger.validation.remaining_mu()
    ledger.external.check(Gaussian(room))
    with pytest.raises(PrivacyBudgetExceeded, match="remaining mu budget"):
        ledger.external.check(Gaussian(room * (1 + 1e-6)))
    # the RDP view of a GDP-only ledger is the exact curve alpha * sum(mu_j^2) / 2 (pure: min with its eps bounds)
    eps = 0.3
    pure_curve = np.minimum(np.minimum(GRID * pure_dp_to_gdp_mu(eps) ** 2 / 2, GRID * eps * eps / 2), eps)
    expected = GRID * sum(m * m for m in mus) / 2 + pure_curve
    assert ledger.validation.rdp_curve() == pytest.approx(expected.tolist(), rel=1e-12)


# ----------------------------------------------------------------- composition


@pytest.mark.parametrize("mu0, steps", [(0.5, [0.2] * 25), (1.0, [0.3, 0.1, 0.7]), (0.05, [])])
def test_rdp_entry_composes_with_gaussian_steps_like_dp_accounting(mu0, steps):
    ledger = PrivacyLedger()
    for t, mu in enumerate(steps):
        ledger.external.record(Gaussian(mu), run_id="gibo", key=f"step-{t:04d}")
    assert ledger.external.record(ValidationMechanism.from_rdp("Gaussian", _gaussian(mu0)), run_id="hypo", key="select")
    total = mu0 * mu0 + sum(m * m for m in steps)
    eps = ledger.validation.epsilon(DELTA)
    assert eps == pytest.approx(rdp_curve_epsilon(GRID * total / 2, ORDERS, DELTA)[0], rel=1e-12)
    accountant = RdpAccountant(orders=list(ORDERS))
    for mu in [mu0, *steps]:
        accountant.compose(GaussianDpEvent(noise_multiplier=1.0 / mu))
    assert eps == pytest.approx(accountant.get_epsilon(DELTA), rel=1e-9)
    # RDP conversion on a grid is never tighter than the exact GDP conversion of the same Gaussians
    assert eps >= gdp_epsilon(math.sqrt(total), DELTA)
    assert ledger.report(DELTA)["validation"]["epsilon"] == eps


def test_validation_mu_refuses_to_ignore_rdp_entries():
    ledger = PrivacyLedger()
    ledger.external.record(Gaussian(0.4), run_id="gibo", key="step-0000")
    ledger.external.record(ValidationMechanism.from_rdp("selection", _selection_like), run_id="hypo", key="select")
    with pytest.raises(ValueError, match="validation.epsilon"):
        ledger.validation.mu()
    with pytest.raises(ValueError, match="run 'hypo'"):
        ledger.validation.mu(run_id="hypo")
    assert ledger.validation.mu(run_id="gibo") == 0.4  # a run without RDP entries still has its mu
    assert ledger.validation.run_ids() == ["gibo", "hypo"]
    assert ledger.validation.steps() == {("gibo", "step-0000"): 0.4}
    curve = [a * 0.08 + _selection_like(a) for a in ORDERS]
    assert ledger.validation.rdp_curve() == pytest.approx(curve, rel=1e-12)
    assert ledger.validation.rdp_curve(run_id="hypo") == pytest.approx([_selection_like(a) for a in ORDERS], rel=1e-12)
    report = ledger.report(DELTA)["validation"]
    eps, order = rdp_curve_epsilon(curve, ORDERS, DELTA)
    assert report["mu"] is None and report["epsilon"] == pytest.approx(eps, rel=1e-12) and report["rdp_order"] == order
    assert report["rdp_releases"] == [{"run_id": "hypo", "key": "select", "description": "selection"}]
    assert report["num_steps"] == 2 and report["num_runs"] == 2


def test_a_pure_release_next_to_an_rdp_entry_costs_its_tighter_curve():
    ledger = PrivacyLedger()
    ledger.external.record(ValidationMechanism.from_rdp("g", _gaussian(0.1)), run_id="h", key="select")
    ledger.external.record(PureDP(10.0), run_id="a", key="select")  # large eps: alpha*mu^2/2 is not the min everywhere
    mu = pure_dp_to_gdp_mu(10.0)
    pure = np.minimum(np.minimum(GRID * mu * mu / 2, GRID * 50.0), 10.0)
    assert ledger.validation.rdp_curve() == pytest.approx((GRID * 0.005 + pure).tolist(), rel=1e-12)
    assert np.any(pure < GRID * mu * mu / 2)


# ----------------------------------------------------------------- budget filter


def test_filter_refuses_a_curve_over_alpha_budget_squared_over_two_at_one_order():
    budget = 1.0
    ledger = PrivacyLedger(validation_mu_budget=budget)
    ledger.external.record(Gaussian(0.6), run_id="gibo", key="step-0000")
    room = (GRID * (budget**2 - 0.36) / 2).tolist()  # the most any curve may add at each order

    def spiky(alpha):  # within the room everywhere but at alpha = 63
        return room[ORDERS.index(alpha)] * (1.01 if alpha == 63.0 else 0.5)

    for attempt in (
        lambda r: ledger.external.check(ValidationMechanism.from_rdp("checked", r)),
        lambda r: _spend(ledger, _event(r, "spiky"), "h"),
    ):
        with pytest.raises(PrivacyBudgetExceeded, match="alpha=63"):
            attempt(spiky)
    assert ledger.validation.mechanisms() == {} and ledger.validation.mu() == 0.6  # nothing recorded
    assert ledger.validation.remaining_mu() == pytest.approx(0.8, rel=1e-12)

    # exactly the room fits; afterwards no Gaussian step does
    ledger.external.check(ValidationMechanism.from_rdp("checked", lambda a: room[ORDERS.index(a)]))
    _spend(ledger, _event(lambda a: room[ORDERS.index(a)], "exact"), "h")
    assert ledger.validation.remaining_mu() == pytest.approx(0.0, abs=1e-6)
    with pytest.raises(PrivacyBudgetExceeded, match="summed RDP"):
        ledger.external.check(Gaussian(1e-3))
    with pytest.raises(PrivacyBudgetExceeded):
        _spend(ledger, PureDP(0.01), "gibo")
    assert list(ledger.validation.steps()) == [("gibo", "step-0000")]


def test_after_an_rdp_entry_a_gaussian_step_fits_up_to_the_closed_form_remaining_mu():
    budget = 2.0
    ledger = PrivacyLedger(validation_mu_budget=budget)
    ledger.external.record(ValidationMechanism.from_rdp("selection", _selection_like), run_id="h", key="select")
    # largest mu with c(a) + a mu^2/2 <= a B^2/2 at every order: mu^2 = B^2 - max_a 2 c(a)/a
    expected = math.sqrt(budget**2 - max(2 * _selection_like(a) / a for a in ORDERS))
    assert ledger.validation.remaining_mu() == pytest.approx(expected, rel=1e-12)
    with pytest.raises(PrivacyBudgetExceeded):
        ledger.external.check(Gaussian(expected * (1 + 1e-6)))
    ledger.external.check(Gaussian(expected * (1 - 1e-6)))
    ledger.external.record(Gaussian(expected * (1 - 1e-6)), run_id="gibo", key="step-0000")
    assert ledger.validation.remaining_mu() == pytest.approx(0.0, abs=1e-2)
    # every grid order holds alpha B^2/2: the filter's guarantee
    assert np.all(np.asarray(ledger.validation.rdp_curve()) <= GRID * budget**2 / 2 * (1 + 1e-9))


def test_a_curve_that_no_budget_order_covers_is_refused_before_anything_is_recorded():
    ledger = PrivacyLedger(validation_mu_budget=3.0)
    with pytest.raises(PrivacyBudgetExceeded, match="alpha=1.1"):
        _spend(ledger, _event(lambda a: 5.0, "flat"), "h")
    _spend(ledger, _event(lambda a: 4.0, "flat"), "h")  # 4 <= 1.1*9/2
    with pytest.raises(PrivacyBudgetExceeded):
        _spend(ledger, _event(lambda a: math.inf, "no noise"), "x")
    assert list(ledger.validation.mechanisms()) == [("h", "select")] and len(ledger.reservation_holders()) == 0


# ------------------------------------------------------------ idempotence, errors


def test_every_record_counts_and_bad_input_changes_nothing():
    ledger = PrivacyLedger()
    curve = _selection_like
    assert ledger.external.record(ValidationMechanism.from_rdp("DP-HyPO", curve), run_id="h", key="select")
    once = np.asarray(ledger.validation.rdp_curve())
    # a second record under the same (run_id, key) is a second release (e.g. a run repeated
    # under a reused id): it is composed, never merged away
    assert ledger.external.record(ValidationMechanism.from_rdp("DP-HyPO", curve), run_id="h", key="select")
    assert np.allclose(ledger.validation.rdp_curve(), 2 * once, rtol=1e-12)
    assert len(ledger.validation.records("h")) == 2
    # releases of other kinds under the same key are composed too
    ledger.external.record(Gaussian(0.1), run_id="h", key="select")
    ledger.external.record(PureDP(0.2), run_id="g", key="select")
    assert len(ledger.validation.records()) == 4
    before = ledger.state_dict()
    for bad, match in [
        (dict(rdp=3.0), "callable"),
        (dict(rdp=lambda a: math.nan), "rdp at order 1.1"),
        (dict(rdp=lambda a: -1.0), ">= 0"),
        (dict(description=" "), "description"),
        (dict(run_id=""), "run_id"),
        (dict(key=3), "key"),
    ]:
        kwargs = dict(rdp=curve, run_id="new", key="select", description="d", **{})
        kwargs.update(bad)
        rdp, description = kwargs.pop("rdp"), kwargs.pop("description")
        with pytest.raises(ValueError, match=match):
            ledger.external.record(ValidationMechanism.from_rdp(description, rdp), **kwargs)
    with pytest.raises(ValueError, match="callable"):
        ledger.external.check(ValidationMechanism.from_rdp("checked", "not a curve"))
    for bound in ({}, {"select": 0.5}, {"Select": Gaussian(0.1)}, {"grad": PureDP(0.1), "x y": Gaussian(0.1)}):
        with pytest.raises(ValueError):
            with ledger.charge(bound, run_id="new"):
                raise AssertionError("not reached")
    assert ledger.state_dict() == before and len(ledger.reservation_holders()) == 0


# ---------------------------------------------------------------------- state


def _mixed_ledger(unbounded: bool = False):
    r"""Every kind of validation release; ``unbounded``: the last curve is ``inf`` above α = 60
    (no budget admits it: ``alpha B^2/2`` is finite)."""
    ledger = PrivacyLedger(validation_mu_budget=None if unbounded else 5.0)
    ledger.external.record(Gaussian(0.3), run_id="gibo", key="step-0000")
    ledger.external.record(ValidationMechanism.from_rdp("selection", _selection_like), run_id="hypo", key="select")
    ledger.external.record(PureDP(0.5), run_id="gibo", key="select")
    ledger.external.record(
        ValidationMechanism.from_rdp("bounded orders", lambda a: math.inf if unbounded and a > 60 else a / 50),
        run_id="hypo-2",
        key="select",
    )
    return ledger


def test_state_round_trip_keeps_rdp_entries_in_recording_order():
    ledger = _mixed_ledger(unbounded=True)
    assert ledger.validation.epsilon(DELTA) < math.inf  # the orders <= 60 still convert
    state = ledger.state_dict()
    assert state["version"] == PrivacyLedger.STATE_VERSION == 7
    assert [(e["run_id"], e["key"]) for e in state["validation_steps"]] == [
        ("gibo", "step-0000"),
        ("hypo", "select"),
        ("gibo", "select"),
        ("hypo-2", "select"),
    ]
    assert set(state["validation_steps"][1]) == {"release_id", "run_id", "key", "description", "rdp"}
    resumed = PrivacyLedger.from_state_dict(json.loads(json.dumps(state)))
    assert resumed.state_dict() == state
    assert resumed.validation.mechanisms() == ledger.validation.mechanisms()
    assert resumed.validation.epsilon(DELTA) == ledger.validation.epsilon(DELTA)
    assert resumed.report(DELTA) == ledger.report(DELTA)
    resumed.load_state_dict(json.loads(json.dumps(state)))  # loading it again merges: nothing changes
    assert resumed.state_dict() == state
    # version 3 (no validation curves, no release ids) still loads; a version-3 state with a curve is damage
    strip = lambda e: {k: v for k, v in e.items() if k != "release_id"}  # noqa: E731
    v3 = {
        **state,
        "version": 3,
        "validation_steps": [strip(state["validation_steps"][0]), strip(state["validation_steps"][2])],
        "training_runs": [],
    }
    old = PrivacyLedger.from_state_dict(v3)
    assert old.validation.mu() == compose_gdp([0.3, pure_dp_to_gdp_mu(0.5)])
    with pytest.raises(ValueError, match="exactly the keys"):
        PrivacyLedger.from_state_dict({**v3, "validation_steps": [strip(e) for e in state["validation_steps"]]})
    damaged = json.loads(json.dumps(state))
    damaged["validation_steps"][1]["rdp"] = damaged["validation_steps"][1]["rdp"][:-1]
    with pytest.raises(ValueError, match="one per order"):
        PrivacyLedger.from_state_dict(damaged)
    damaged = json.loads(json.dumps(state))
    damaged["validation_steps"].append({**state["validation_steps"][1]})
    with pytest.raises(ValueError, match="repeated release"):
        PrivacyLedger.from_state_dict(damaged)


# -------------------------------------------------------------------- storage


def test_sqlite_round_trip_and_reservations(tmp_path):
    url = f"sqlite:///{tmp_path / 'budget.db'}"
    memory = _mixed_ledger()
    stored = PrivacyLedger(storage=url, dataset="d", validation_mu_budget=5.0)
    stored.load_state_dict(memory.state_dict())  # merged into the database
    reopened = PrivacyLedger(storage=url, dataset="d")
    assert reopened.state_dict() == memory.state_dict()
    assert reopened.validation.epsilon(DELTA) == memory.validation.epsilon(DELTA)
    assert reopened.validation.mechanisms() == memory.validation.mechanisms()
    stored.load_state_dict(memory.state_dict())  # merging again changes nothing
    assert len(open_storage(url).rows("d")) == 4

    # a charge reserves its worst case in the database: another object sees the budget taken
    budget_room = reopened.validation.remaining_mu()
    half = budget_room / math.sqrt(2.0)
    with stored.charge({"select": _event(_gaussian(half), "g")}, run_id="late") as meter:
        rows = open_storage(url).rows("d")
        assert rows[-1].status == "reserved" and "rdp" in rows[-1].entry and rows[-1].run_id == "late"
        assert reopened.validation.remaining_mu() == pytest.approx(half, rel=1e-9)
        with pytest.raises(PrivacyBudgetExceeded):
            reopened.external.check(ValidationMechanism.from_rdp("checked", _gaussian(half * 1.01)))
        meter.record("select", _event(_gaussian(half), "g"))  # the record uses up the reservation
    assert [r.status for r in open_storage(url).rows("d")] == ["recorded"] * 5
    assert reopened.validation.remaining_mu() == pytest.approx(half, rel=1e-9)
    # a reservation left by a process that died inside its charge stays counted until a settle
    # finds its holder gone (DPGIBO.resume settles its run's); records are never touched
    reserve_for(open_storage(url), "d", "dead", 0.1, gone_holder(), lease=60.0)  # what a killed process leaves
    assert reopened.validation.remaining_mu() < half and len(reopened.reservation_holders()) == 1
    assert stored.cancel_reservations("someone-else") == 0
    assert stored.cancel_reservations("dead") == 1
    assert reopened.validation.remaining_mu() == pytest.approx(half, rel=1e-9)
    # a stored conflicting state is refused and changes nothing
    conflicting = memory.state_dict()
    conflicting["validation_steps"][1]["description"] = "other"
    with pytest.raises(ValueError, match="here but"):
        stored.load_state_dict(conflicting)
    assert len(open_storage(url).rows("d")) == 5


def test_threads_sharing_one_stored_ledger_spend_exactly_the_budget(tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    url = f"sqlite:///{tmp_path / 'budget.db'}"
    ledger = PrivacyLedger(storage=url, dataset="d", validation_mu_budget=0.45)
    event = _event(_gaussian(0.2), "g")  # 5 fit (0.2 <= 0.2025), 6 do not

    def spend(i):
        try:
            _spend(ledger, event, f"thread-{i}")
        except PrivacyBudgetExceeded:
            return False
        return True

    with ThreadPoolExecutor(8) as pool:
        outcomes = list(pool.map(spend, range(8)))
    assert sum(outcomes) == 5
    assert [r.status for r in open_storage(url).rows("d")] == ["recorded"] * 5


def test_eight_processes_race_for_a_budget_of_five_curves(tmp_path):
    url = f"sqlite:///{tmp_path / 'budget.db'}"
    dataset = f"clinic-{uuid.uuid4().hex[:12]}"
    PrivacyLedger(storage=url, dataset=dataset, validation_mu_budget=0.45)
    ctx = multiprocessing.get_context("spawn")
    results = ctx.Queue()
    helper = ctx.Process(target=ledger_workers.race, args=(url, dataset, 0.2, 8, results, True))
    helper.start()
    reported = [results.get(timeout=180) for _ in range(9)]
    helper.join(timeout=60)
    assert helper.exitcode == 0 and reported[-1] == ("exitcodes", [0] * 8)
    outcomes = dict(reported[:-1])
    assert sum(o == "released" for o in outcomes.values()) == 5
    rows = open_storage(url).rows(dataset)
    assert [r.status for r in rows] == ["recorded"] * 5
    ledger = PrivacyLedger(storage=url, dataset=dataset)
    assert np.all(np.asarray(ledger.validation.rdp_curve()) <= GRID * 0.45**2 / 2)


# --------------------------------------------------------------------- DP-GIBO


def test_dp_gibo_on_a_ledger_with_an_rdp_entry_reports_the_rdp_composition():
    from botorch_dp.optim.dp_gibo import DPGIBO
    from tests.optim.loop_helpers import nl_config, normal_location

    _, losses = normal_location(n=20, d=2)
    ledger = PrivacyLedger(validation_mu_budget=3.0)
    ledger.external.record(ValidationMechanism.from_rdp("selection", _selection_like), run_id="hypo", key="select")
    config = nl_config(d=2, privacy_mu=0.6, clip_bound=2.0, num_iterations=3, seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)
        opt = DPGIBO(config, ledger=ledger)
    result = opt.run(losses, progress=True)  # the progress bar reads the guarantee
    g = result.release.guarantee
    assert math.isnan(g.mu) and g.epsilon == ledger.validation.epsilon(config.target_delta)
    assert ledger.validation.mu(run_id=opt.run_id) == pytest.approx(0.6, rel=1e-12)
    curve = [_selection_like(a) + a * 0.36 / 2 for a in ORDERS]
    assert g.epsilon == pytest.approx(rdp_curve_epsilon(curve, ORDERS, config.target_delta)[0], rel=1e-9)
    assert isinstance(ledger.validation.mechanisms()[("hypo", "select")], ValidationMechanism)
