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
import os
import pickle
import signal
import sqlite3
import uuid

import pytest
import sqlalchemy as sa

from botorch_dp.privacy.analysis.gdp import compose_gdp, pure_dp_to_gdp_mu
from botorch_dp.privacy.ledger import PrivacyBudgetExceeded, PrivacyLedger
from botorch_dp.privacy.ledger_storage import SCHEMA_VERSION, open_storage, storage_url

from . import ledger_workers

MU, BUDGET = 0.2, 0.45  # 5 releases of 0.2 compose to 0.4472 <= 0.45; 6 to 0.4899 > 0.45


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request, tmp_path):
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'budget.db'}"
    return request.getfixturevalue("postgres_url")


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


# ------------------------------------------------------------------------ in memory


def test_in_memory_ledger_is_the_default_and_unchanged():
    ledger = PrivacyLedger(validation_mu_budget=1.0)
    assert ledger.storage_url is None and ledger.dataset is None
    for t in range(25):
        ledger.record_validation_step(mu=0.2, run_id="run-a", key=f"step-{t:04d}")
    assert ledger.validation_epsilon(1e-5) == pytest.approx(4.377, abs=1e-3)
    with pytest.raises(PrivacyBudgetExceeded):
        ledger.check_validation_step(0.01)
    state = ledger.state_dict()
    assert set(state) == {
        "version", "validation_mu_budget", "training_epsilon_budget", "training_delta", "training_accountant",
        "prv_eps_error", "rdp_orders", "validation_steps", "training_runs",
    }
    assert pickle.loads(pickle.dumps(ledger)).state_dict() == state
    assert ledger.cancel_reservations() == 0
    with pytest.raises(ValueError, match="dataset needs storage"):
        PrivacyLedger(dataset="clinic")
    with pytest.raises(ValueError, match="storage needs dataset"):
        PrivacyLedger(storage="sqlite:///nowhere.db")


def test_storage_urls():
    assert storage_url("budget.db") == "sqlite:///" + os.path.abspath("budget.db")
    assert storage_url("sqlite:///x.db") == "sqlite:///x.db"
    assert storage_url("postgresql://u@/db?host=/s") == "postgresql+psycopg://u@/db?host=/s"
    with pytest.raises(ValueError, match="storage"):
        storage_url("")
    with pytest.raises(ValueError, match="only SQLite and PostgreSQL"):
        open_storage("mysql://u@h/db")


# ------------------------------------------------------------------ composition


def _script(ledger: PrivacyLedger) -> list[str]:
    r"""The same releases and training entries, with a check before each record; what was refused."""
    refused = []
    for t in range(6):
        mu = 0.3 if t % 2 else 0.25
        try:
            ledger.check_validation_step(mu)
            ledger.record_validation_step(mu, run_id="run-a", key=f"step-{t:04d}")
        except PrivacyBudgetExceeded:
            refused.append(f"step-{t}")
    ledger.check_validation_step(pure_dp_to_gdp_mu(0.2))
    ledger.record_validation_pure(0.2, run_id="run-a", key="select")
    assert ledger.record_validation_step(0.25, run_id="run-a", key="step-0000") is False  # replay
    ledger.record_training_run(run_id=0, noise_multiplier=1.1, sample_rate=0.01, steps=200)
    for i, sigma in enumerate([3.0, 2.0, 4.0, 1.5, 3.0, 2.5]):
        try:
            ledger.check_training_mechanism(rdp=_gaussian_rdp(sigma))
            ledger.record_training_mechanism(f"amp-{i}", rdp=_gaussian_rdp(sigma), description=f"Gaussian sigma={sigma}")
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
        assert ledger.state_dict() == memory.state_dict()
        assert ledger.report(1e-6) == memory.report(1e-6)
        assert ledger.validation_mu() == memory.validation_mu()  # bit for bit
        assert ledger.training_epsilon(1e-5) == memory.training_epsilon(1e-5)
    assert all(r.status == "recorded" for r in _rows(url, dataset))  # every reservation consumed
    entries = [json.loads(json.dumps(r.entry)) for r in _rows(url, dataset)]
    assert entries[0] == {"mu": 0.25}  # plain JSON, no pickle


def test_a_training_record_takes_its_reservations_place_so_the_filter_order_is_kept(url):
    r"""Run A checks first, run B checks and records in between, A records: the entries'
    order (and so ``filter_order``, fixed by the FIRST entry) is that of the checks. A's
    Gaussian curve fixes the order at 10.2, where a further Gaussian entry fits; had B's flat
    curve come first, the order would be 512, where it does not."""
    dataset = _dataset()
    settings = dict(training_epsilon_budget=2.0, training_delta=1e-5)
    a = PrivacyLedger(storage=url, dataset=dataset, **settings)
    b = PrivacyLedger(storage=url, dataset=dataset)
    flat = lambda alpha: 0.5  # noqa: E731
    a.check_training_mechanism(rdp=_gaussian_rdp(4.0))
    b.check_training_mechanism(rdp=flat)
    b.record_training_mechanism("b", rdp=flat, description="B")
    a.record_training_mechanism("a", rdp=_gaussian_rdp(4.0), description="A")
    in_order, reversed_ = PrivacyLedger(**settings), PrivacyLedger(**settings)
    in_order.record_training_mechanism("a", rdp=_gaussian_rdp(4.0), description="A")
    in_order.record_training_mechanism("b", rdp=flat, description="B")
    assert b.training_run_ids() == ["a", "b"] and b.state_dict() == in_order.state_dict()
    b.check_training_mechanism(rdp=_gaussian_rdp(5.0))
    in_order.check_training_mechanism(rdp=_gaussian_rdp(5.0))
    reversed_.record_training_mechanism("b", rdp=flat, description="B")
    with pytest.raises(PrivacyBudgetExceeded, match="alpha=512"):  # what appending A after B would do
        reversed_.check_training_mechanism(rdp=_gaussian_rdp(4.0))
    with pytest.raises(PrivacyBudgetExceeded, match="alpha=10.2"):
        b.check_training_mechanism(rdp=_gaussian_rdp(4.0))


# --------------------------------------------------------------------- budgets


def test_the_budget_is_stored_with_the_dataset_and_a_different_one_refused(url):
    dataset = _dataset()
    PrivacyLedger(storage=url, dataset=dataset, validation_mu_budget=1.0)
    for other in (2.0, 0.5):  # looser and tighter alike: one shared budget has one value
        with pytest.raises(ValueError, match="validation_mu_budget=.*stored with dataset"):
            PrivacyLedger(storage=url, dataset=dataset, validation_mu_budget=other)
    with pytest.raises(ValueError, match="training_accountant"):
        PrivacyLedger(storage=url, dataset=dataset, training_accountant="prv")
    adopted = PrivacyLedger(storage=url, dataset=dataset)
    assert adopted.validation_mu_budget == 1.0
    same = PrivacyLedger(storage=url, dataset=dataset, validation_mu_budget=1.0)
    same.validation_mu_budget = 0.5  # this object's own filter, tightened
    with pytest.raises(PrivacyBudgetExceeded):
        same.check_validation_step(0.6)
    adopted.check_validation_step(0.6)  # the others keep the stored budget
    adopted.validation_mu_budget = 5.0  # never looser than the stored one
    with pytest.raises(PrivacyBudgetExceeded):
        adopted.check_validation_step(0.9)
    assert PrivacyLedger(storage=url, dataset=_dataset()).validation_mu_budget is None


def test_a_check_reserves_and_a_vanished_runs_reservation_stays_counted(url):
    dataset = _dataset()
    a = PrivacyLedger(storage=url, dataset=dataset, validation_mu_budget=BUDGET)
    b = PrivacyLedger(storage=url, dataset=dataset)
    a.check_validation_step(0.4)  # ... and run a never records (it crashed before its release)
    assert b.validation_mu() == 0.0 and b.validation_steps == {}
    assert b.remaining_validation_mu() == pytest.approx(math.sqrt(BUDGET**2 - 0.4**2))
    with pytest.raises(PrivacyBudgetExceeded, match="recorded and reserved"):
        b.check_validation_step(0.3)
    assert b.cancel_reservations() == 0  # not b's to drop
    assert a.cancel_reservations() == 1
    # one check of a composed mu covers its records (by mu^2); nothing is left reserved
    b.check_validation_step(compose_gdp([0.3, 0.2]))
    b.record_validation_step(0.3, run_id="b", key="step-0000/precond")
    assert [r.status for r in _rows(url, dataset)] == ["reserved", "recorded"]
    b.record_validation_step(0.2, run_id="b", key="step-0000")
    assert [r.status for r in _rows(url, dataset)] == ["recorded", "recorded"]
    assert a.validation_mu() == compose_gdp([0.3, 0.2])


def test_load_state_dict_merges_into_a_stored_ledger(url):
    dataset = _dataset()
    stored = PrivacyLedger(storage=url, dataset=dataset, validation_mu_budget=1.0)
    stored.record_validation_step(0.3, run_id="a", key="step-0000")
    memory = PrivacyLedger(validation_mu_budget=0.8)
    memory.record_validation_step(0.3, run_id="a", key="step-0000")
    memory.record_validation_step(0.4, run_id="a", key="step-0001")
    memory.record_training_run(run_id=7, noise_multiplier=1.0, sample_rate=0.01, steps=10)
    stored.load_state_dict(memory.state_dict())
    stored.load_state_dict(memory.state_dict())  # twice: nothing new
    assert stored.state_dict()["validation_steps"] == memory.state_dict()["validation_steps"]
    assert stored.training_runs == {7: (1.0, 0.01, 10)} and stored.validation_mu_budget == 0.8
    assert PrivacyLedger(storage=url, dataset=dataset).validation_mu_budget == 1.0  # the stored one
    conflicting = PrivacyLedger()
    conflicting.record_validation_step(0.5, run_id="a", key="step-0000")
    before = _rows(url, dataset)
    with pytest.raises(ValueError, match="already recorded"):
        stored.load_state_dict(conflicting.state_dict())
    looser = PrivacyLedger(validation_mu_budget=2.0)
    with pytest.raises(ValueError, match="looser"):
        stored.load_state_dict(looser.state_dict())
    assert _rows(url, dataset) == before


def test_a_database_of_another_schema_version_is_refused(tmp_path):
    path = tmp_path / "old.db"
    PrivacyLedger(storage=path, dataset="d")
    with sqlite3.connect(path) as db:
        db.execute("UPDATE botorch_dp_ledger_meta SET value = '99' WHERE name = 'schema_version'")
    with pytest.raises(ValueError, match=f"schema version 99.*reads version {SCHEMA_VERSION}"):
        from botorch_dp.privacy.ledger_storage import LedgerStorage

        LedgerStorage(storage_url(path))


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
    assert ledger.validation_mu() == pytest.approx(math.sqrt(5) * MU, rel=1e-12) and ledger.validation_mu() <= BUDGET


def test_threads_sharing_one_stored_ledger_object_spend_five_releases(tmp_path):
    r"""A thread pool evaluating candidates with one objective shares its ledger object:
    check, release, record from 8 threads at once still spend exactly 5 releases."""
    from concurrent.futures import ThreadPoolExecutor

    url = f"sqlite:///{tmp_path / 'budget.db'}"
    ledger = PrivacyLedger(storage=url, dataset="d", validation_mu_budget=BUDGET)

    def spend(i):
        try:
            ledger.check_validation_step(MU)
        except PrivacyBudgetExceeded:
            return False
        ledger.record_validation_step(MU, run_id=f"thread-{i}", key="step-0000")
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
        ledger.check_validation_step(MU)
        ledger.record_validation_step(MU, run_id="after", key=f"step-{t:04d}")
    with pytest.raises(PrivacyBudgetExceeded):
        ledger.check_validation_step(MU)
    assert [r.run_id for r in _rows(url, dataset)] == ["after"] * 5


# -------------------------------------------------------------------- DP-GIBO


def test_dpgibo_runs_sharing_a_stored_ledger_record_what_they_would_in_memory(tmp_path):
    r"""DP-GIBO checks before each release and records after it; with a stored ledger the
    checks reserve and the records consume, so two seeded runs leave exactly the entries of
    the same runs on an in-memory ledger, and no reservation."""
    import torch
    from gpytorch.kernels import PolynomialKernel

    from botorch_dp.optim.dp_gibo import DPGIBO, DPGIBOConfig

    def config(**kw):
        kernel = PolynomialKernel(power=2)
        kernel.offset = 1.0
        return DPGIBOConfig(
            kernel=kernel, bounds=torch.tensor([[-2.0, -2.0], [4.0, 4.0]], dtype=torch.float64), privacy_mu=0.6, clip_bound=2.0,
            num_iterations=2, step_size=0.5, batch_size=3, theta0=torch.zeros(2, dtype=torch.float64),
            search_radius=0.5, num_restarts=2, raw_samples=32, **kw,
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
    assert stored.state_dict() == memory.state_dict()
    keys = {key.split("/")[-1] for _, key in memory.validation_steps}
    assert {"step-0000", "step-0001", "norm", "grad", "select"} <= keys  # every kind of release
    assert [r.status for r in _rows(url, dataset)] == ["recorded"] * len(memory.validation_steps)
    with pytest.raises(PrivacyBudgetExceeded):  # a third run of mu 0.6 does not fit 1.0
        DPGIBO(configs[0], ledger=PrivacyLedger(storage=url, dataset=dataset)).run(objective, progress=False)


def test_the_sqlite_file_holds_json_text(tmp_path):
    path = tmp_path / "budget.db"
    ledger = PrivacyLedger(storage=path, dataset="d", validation_mu_budget=1.0)
    ledger.record_validation_pure(0.5, run_id="r", key="select")
    engine = sa.create_engine(f"sqlite:///{path}")
    with engine.connect() as db:
        row = db.execute(sa.text("SELECT run_id, release_key, entry FROM botorch_dp_ledger_entries")).one()
        settings = db.execute(sa.text("SELECT settings FROM botorch_dp_ledger_datasets")).scalar_one()
    engine.dispose()
    assert row.run_id == '"r"' and row.release_key == "select"
    assert json.loads(row.entry) == {"mu": pure_dp_to_gdp_mu(0.5), "epsilon": 0.5}
    assert json.loads(settings)["validation_mu_budget"] == 1.0
