r"""One privacy budget shared by many runs and machines, in a database (issue 17 item 5).

Every storage test runs twice: on an SQLite file and on a real PostgreSQL server started
by the ``postgres_url`` fixture (tests/privacy/conftest.py). Concurrent runs are separate
processes: one fresh ``spawn`` process per test that forks the runs (see
``ledger_workers``), never a copy of the test process and its connections.
"""

from __future__ import annotations

import json
import math
import multiprocessing
import signal
import uuid

import pytest

from botorch_dp.privacy.analysis.gdp import compose_gdp
from botorch_dp.privacy.ledger import (
    TRAINING_RDP_ORDERS,
    DPSGDRun,
    Gaussian,
    PrivacyBudgetExceeded,
    PrivacyLedger,
    PureDP,
    TrainingMechanism,
)
from botorch_dp.privacy.ledger_storage import open_storage

from . import ledger_workers
from .ledger_helpers import elsewhere_holder, gone_holder, reserve_for

MU, BUDGET = 0.2, 0.45  # 5 releases of 0.2 compose to 0.4472 <= 0.45; 6 to 0.4899 > 0.45


def _dataset() -> str:
    return f"clinic-{uuid.uuid4().hex[:12]}"


def _rows(url, dataset):
    return open_storage(url).rows(dataset)


def _in_a_fresh_process(target, *args, expect: int) -> list:
    r"""Run ``target(*args, queue)`` in a spawned process; the ``expect`` items it reports."""
    ctx = multiprocessing.get_context("spawn")
    results = ctx.Queue()
    helper = ctx.Process(target=target, args=(*args, results))
    helper.start()
    reported = [results.get(timeout=180) for _ in range(expect)]
    helper.join(timeout=60)
    assert helper.exitcode == 0
    return reported


def _gaussian_rdp(sigma):
    return lambda alpha: alpha / (2.0 * sigma**2)


def _curve(sigma, description):
    return TrainingMechanism(description, tuple(_gaussian_rdp(sigma)(a) for a in TRAINING_RDP_ORDERS))


def _spend(ledger, event, run_id, step=None, part="grad"):
    with ledger.charge({part: event}, run_id=run_id, step=step) as meter:
        meter.record(part, event)


def _train(ledger, run_id, event):
    with ledger.charge_training({run_id: event}) as meter:
        meter.record(run_id)


def _without_ids(state):
    r"""A ledger state with the records' random release ids left out (two ledgers that made
    the same releases hold the same records under different ids)."""
    strip = lambda entries: [{k: v for k, v in e.items() if k != "release_id"} for e in entries]  # noqa: E731
    return {
        **state,
        "validation_steps": strip(state["validation_steps"]),
        "training_runs": strip(state["training_runs"]),
    }


# ------------------------------------------------------------------ composition


def _script(ledger: PrivacyLedger) -> list[str]:
    r"""The same charged releases and training entries; what was refused."""
    refused = []
    for t in range(6):
        mu = 0.3 if t % 2 else 0.25
        try:
            _spend(ledger, Gaussian(mu), "run-a", t)
        except PrivacyBudgetExceeded:
            refused.append(f"step-{t}")
    _spend(ledger, PureDP(0.2), "run-a", part="select")
    _train(ledger, 0, DPSGDRun(1.1, 0.01, 200))
    for i, sigma in enumerate([3.0, 2.0, 4.0, 1.5, 3.0, 2.5]):
        try:
            _train(ledger, f"amp-{i}", _curve(sigma, f"Gaussian sigma={sigma}"))
        except PrivacyBudgetExceeded:
            refused.append(f"amp-{i}")
    return refused


def test_a_stored_ledger_composes_exactly_as_in_memory(url):
    settings = dict(validation_mu_budget=0.66, training_epsilon_budget=4.0, training_delta=1e-5)
    memory = PrivacyLedger(**settings)
    dataset = _dataset()
    stored = PrivacyLedger(storage=url, dataset=dataset, **settings)
    refused = _script(memory)
    assert refused and refused == _script(stored)  # some refused, the same ones
    assert "step-5" in refused and any(r.startswith("amp-") for r in refused)
    reopened = PrivacyLedger(storage=url, dataset=dataset)
    for ledger in (stored, reopened):
        assert _without_ids(ledger.state_dict()) == _without_ids(memory.state_dict())
        assert ledger.report(1e-6) == memory.report(1e-6)
        assert ledger.validation.mu() == memory.validation.mu()  # bit for bit
        assert ledger.training.epsilon(1e-5) == memory.training.epsilon(1e-5)
    assert all(r.status == "recorded" for r in _rows(url, dataset))  # every reservation consumed
    entries = [json.loads(json.dumps(r.entry)) for r in _rows(url, dataset)]
    assert entries[0] == {"mu": 0.25}  # plain JSON, no pickle


def test_a_training_record_takes_its_reservations_place_so_the_filter_order_is_kept(url):
    r"""Run A is admitted first, run B is admitted and recorded in between, A records: the
    entries' order (and so ``filter_order``, fixed by the FIRST entry) is that of the
    admissions. A's Gaussian curve fixes the order at 10.2, where a further Gaussian entry
    fits; had B's flat curve come first, the order would be 512, where it does not."""
    dataset = _dataset()
    settings = dict(training_epsilon_budget=2.0, training_delta=1e-5)
    a = PrivacyLedger(storage=url, dataset=dataset, **settings)
    b = PrivacyLedger(storage=url, dataset=dataset)
    flat = TrainingMechanism("B", (0.5,) * len(TRAINING_RDP_ORDERS))
    with a.charge_training({"a": _curve(4.0, "A")}) as meter:
        _train(b, "b", flat)
        meter.record("a")
    in_order, reversed_ = PrivacyLedger(**settings), PrivacyLedger(**settings)
    _train(in_order, "a", _curve(4.0, "A"))
    _train(in_order, "b", flat)
    assert b.training.run_ids() == ["a", "b"] and _without_ids(b.state_dict()) == _without_ids(in_order.state_dict())
    b.external.check(TrainingMechanism.from_rdp("checked", _gaussian_rdp(5.0)))
    in_order.external.check(TrainingMechanism.from_rdp("checked", _gaussian_rdp(5.0)))
    _train(reversed_, "b", flat)
    with pytest.raises(PrivacyBudgetExceeded, match="alpha=512"):  # what appending A after B would do
        reversed_.external.check(TrainingMechanism.from_rdp("checked", _gaussian_rdp(4.0)))
    with pytest.raises(PrivacyBudgetExceeded, match="alpha=10.2"):
        b.external.check(TrainingMechanism.from_rdp("checked", _gaussian_rdp(4.0)))


def test_a_charge_reserves_and_a_dead_runs_reservation_stays_counted_until_its_run_cancels_it(url):
    dataset = _dataset()
    a = PrivacyLedger(storage=url, dataset=dataset, validation_mu_budget=BUDGET)
    b = PrivacyLedger(storage=url, dataset=dataset)
    with a.charge({"grad": Gaussian(0.4)}, run_id="a", step=0):  # held while the step runs ...
        assert [(r.status, r.run_id) for r in _rows(url, dataset)] == [("reserved", "a")]
        assert b.validation.remaining_mu() == pytest.approx(math.sqrt(BUDGET**2 - 0.4**2))
        with pytest.raises(PrivacyBudgetExceeded, match="recorded and reserved"):
            _spend(b, Gaussian(0.3), "b", 0)
    assert _rows(url, dataset) == [] and b.validation.remaining_mu() == pytest.approx(BUDGET)  # ... and given back
    # a process killed inside its charge leaves its hold, counted (an over-count) until a settle
    # finds its holder gone (its process ended, or its lease expired); a live holder's stays
    store = open_storage(url)
    reserve_for(store, dataset, "a", 0.4, gone_holder(), lease=60.0)
    reserve_for(store, dataset, "a", 0.01, elsewhere_holder(), lease=60.0)  # alive elsewhere, lease running
    reserve_for(store, dataset, "a", 0.01, elsewhere_holder(), lease=-1.0)  # its lease expired
    reserve_for(store, dataset, "a", 0.01)  # written before holders: never settled on its own
    with pytest.raises(PrivacyBudgetExceeded):
        _spend(b, Gaussian(0.3), "b", 0)
    assert b.cancel_reservations("b") == 0
    assert a.cancel_reservations("a") == 2 and len(a.reservation_holders()) == 2
    assert a.cancel_reservations() == 0
    with pytest.raises(RuntimeError, match="process 1 on host 'elsewhere'"):
        a.settle_run("a")
    assert a.cancel_reservations("a", holderless=True) == 1 and len(a.reservation_holders()) == 1
    with pytest.raises(ValueError, match="holderless=True needs the run_id"):
        a.cancel_reservations(holderless=True)
    assert [row.holder["host"] for row in _rows(url, dataset)] == ["elsewhere"]
    with store.transaction(dataset) as tx:  # its lease runs out
        tx.renew_leases(["x" * 32], 0.0)
    assert a.settle_run("a") == 1 and len(a.reservation_holders()) == 0
    # one charge of several parts holds their composed mu; each record takes its mu^2 off
    with b.charge({"grad": Gaussian(0.2), "precond": Gaussian(0.3)}, run_id="b", step=0) as meter:
        meter.record("precond", Gaussian(0.3))
        rows = _rows(url, dataset)
        assert [r.status for r in rows] == ["reserved", "recorded"] and rows[0].entry["mu"] == pytest.approx(0.2)
        meter.record("grad", Gaussian(0.2))
        assert [r.status for r in _rows(url, dataset)] == ["recorded", "recorded"]
    assert a.validation.mu() == compose_gdp([0.3, 0.2])


def test_load_state_dict_merges_into_a_stored_ledger(url):
    dataset = _dataset()
    stored = PrivacyLedger(storage=url, dataset=dataset, validation_mu_budget=1.0)
    stored.external.record(Gaussian(0.3), run_id="a", key="step-0000")
    memory = PrivacyLedger(validation_mu_budget=0.8)
    memory.load_state_dict(stored.state_dict())  # the same release, by its id
    memory.external.record(Gaussian(0.4), run_id="a", key="step-0001")
    memory.external.record(DPSGDRun(noise_multiplier=1.0, sample_rate=0.01, steps=10), run_id=7)
    stored.load_state_dict(memory.state_dict())
    stored.load_state_dict(memory.state_dict())  # twice: nothing new
    assert stored.state_dict()["validation_steps"] == memory.state_dict()["validation_steps"]
    assert stored.training.runs() == {7: (1.0, 0.01, 10)} and stored.validation_mu_budget == 0.8
    assert PrivacyLedger(storage=url, dataset=dataset).validation_mu_budget == 1.0  # the stored one
    # another ledger's release under the same (run id, key) is another release: both are kept
    other = PrivacyLedger()
    other.external.record(Gaussian(0.5), run_id="a", key="step-0000")
    stored.load_state_dict(other.state_dict())
    assert stored.validation.mu() == pytest.approx(compose_gdp([0.3, 0.4, 0.5]), rel=1e-14)
    # the same release id with another cost is a contradiction: refused, nothing written
    forged = stored.state_dict()
    forged["validation_steps"][0]["mu"] = 0.01
    before = _rows(url, dataset)
    with pytest.raises(ValueError, match="here but"):
        stored.load_state_dict(forged)
    looser = PrivacyLedger(validation_mu_budget=2.0)
    stored.load_state_dict(looser.state_dict())  # a state never loosens a budget
    assert stored.validation_mu_budget == 0.8
    assert _rows(url, dataset) == before


# -------------------------------------------------------------- concurrent runs


def test_eight_processes_race_for_a_budget_of_five_releases(url):
    dataset = _dataset()
    PrivacyLedger(storage=url, dataset=dataset, validation_mu_budget=BUDGET)
    reported = _in_a_fresh_process(ledger_workers.race, url, dataset, MU, 8, expect=9)
    assert reported[-1] == ("exitcodes", [0] * 8)
    outcomes = dict(reported[:-1])
    released = sorted(run for run, outcome in outcomes.items() if outcome == "released")
    assert len(outcomes) == 8 and len(released) == 5 and sum(o == "refused" for o in outcomes.values()) == 3
    rows = _rows(url, dataset)
    assert [r.status for r in rows] == ["recorded"] * 5  # the refused recorded (and reserved) nothing
    assert sorted(r.run_id for r in rows) == released
    ledger = PrivacyLedger(storage=url, dataset=dataset)
    assert ledger.validation.mu() == pytest.approx(math.sqrt(5) * MU, rel=1e-12) and ledger.validation.mu() <= BUDGET


def test_threads_sharing_one_stored_ledger_object_spend_five_releases(tmp_path):
    r"""A thread pool evaluating candidates with one objective shares its ledger object:
    charges from 8 threads at once still spend exactly 5 releases."""
    from concurrent.futures import ThreadPoolExecutor

    url = f"sqlite:///{tmp_path / 'budget.db'}"
    ledger = PrivacyLedger(storage=url, dataset="d", validation_mu_budget=BUDGET)

    def spend(i):
        try:
            _spend(ledger, Gaussian(MU), f"thread-{i}", 0)
        except PrivacyBudgetExceeded:
            return False
        return True

    with ThreadPoolExecutor(8) as pool:
        outcomes = list(pool.map(spend, range(8)))
    assert sum(outcomes) == 5
    assert [r.status for r in _rows(url, "d")] == ["recorded"] * 5


def test_a_process_killed_inside_its_transaction_leaves_nothing(url):
    dataset = _dataset()
    PrivacyLedger(storage=url, dataset=dataset, validation_mu_budget=BUDGET)
    reported = _in_a_fresh_process(ledger_workers.crash, url, dataset, MU, expect=3)
    assert reported == [("hang-before-commit", -signal.SIGKILL), ("exit-before-insert", 3), ("exit-before-commit", 3)]
    assert _rows(url, dataset) == []
    ledger = PrivacyLedger(storage=url, dataset=dataset)  # the lock is free, the budget whole
    for t in range(5):
        _spend(ledger, Gaussian(MU), "after", t)
    with pytest.raises(PrivacyBudgetExceeded):
        _spend(ledger, Gaussian(MU), "after", 5)
    assert [r.run_id for r in _rows(url, dataset)] == ["after"] * 5


# -------------------------------------------------------------------- DP-GIBO


def test_dpgibo_runs_sharing_a_stored_ledger_record_what_they_would_in_memory(tmp_path):
    r"""DP-GIBO charges each step before its releases and records each at its draw; with a
    stored ledger the charges reserve and the records consume, so two seeded runs leave
    exactly the entries of the same runs on an in-memory ledger, and no reservation."""
    import torch
    from gpytorch.kernels import PolynomialKernel

    from botorch_dp.optim.dp_gibo import DPGIBO, DPGIBOConfig

    def config(**kw):
        kernel = PolynomialKernel(power=2)
        kernel.offset = 1.0
        return DPGIBOConfig(
            kernel=kernel,
            bounds=torch.tensor([[-2.0, -2.0], [4.0, 4.0]], dtype=torch.float64),
            privacy_mu=0.6,
            clip_bound=2.0,
            num_iterations=2,
            step_size=0.5,
            batch_size=3,
            theta0=torch.zeros(2, dtype=torch.float64),
            search_radius=0.5,
            num_restarts=2,
            raw_samples=32,
            **kw,
        )

    configs = [
        config(seed=4),
        config(seed=5, noise_schedule="adaptive_norm", selection="exponential", selection_epsilon=0.3, loss_clip=20.0),
    ]
    users = 1 + torch.randn(30, 2, generator=torch.Generator().manual_seed(0), dtype=torch.float64)

    def objective(X):
        return 0.5 * (X[:, None, :] - users[None]).pow(2).sum(-1)

    url, dataset = f"sqlite:///{tmp_path / 'budget.db'}", "validation"
    stored = PrivacyLedger(storage=url, dataset=dataset, validation_mu_budget=1.0)
    memory = PrivacyLedger(validation_mu_budget=1.0)
    for cfg in configs:
        runs = [DPGIBO(cfg, ledger=ledger) for ledger in (stored, memory)]
        runs[0].run_id = runs[1].run_id
        results = [opt.run(objective, progress=False) for opt in runs]
        assert results[0].release.theta.equal(results[1].release.theta)
    assert _without_ids(stored.state_dict()) == _without_ids(memory.state_dict())
    keys = {key.split("/")[-1] for _, key in memory.validation.steps()}
    assert {"step-0000", "step-0001", "norm", "grad", "select"} <= keys  # every kind of release
    assert [r.status for r in _rows(url, dataset)] == ["recorded"] * len(memory.validation.records())
    with pytest.raises(PrivacyBudgetExceeded):  # a third run of mu 0.6 does not fit 1.0
        DPGIBO(configs[0], ledger=PrivacyLedger(storage=url, dataset=dataset)).run(objective, progress=False)
