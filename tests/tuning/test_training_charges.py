"""Training runs are charged in the caller's process, whatever executor trains them (issue 28).

The tuning objectives that train on private data (DP-SGD, AMP) charge each batch to the
caller's ledger before any row trains, and a worker's copy carries no ledger: the caller's
ledger holds every run on a process pool and on a Dask cluster, a batch the budget cannot
cover is refused before any row trains, run ids are never reused, and a proxy that trains
on the sensitive training rows is charged to the sensitive objective's ledger.
"""

import ast
import copy
import functools
import math
import pickle
import warnings
from pathlib import Path

import pytest
import torch
from gpytorch.kernels import RBFKernel, ScaleKernel
from torch import nn

import botorch_dp
import botorch_dp.problems.logistic_regression as lr
import botorch_dp.training.cover as tc  # where every DP-SGD run calls train_model
from botorch_dp.evaluation import evaluate_rows, process_pool
from botorch_dp.optim import DPGIBO, DPGIBOConfig
from botorch_dp.plan import plan_private_run
from botorch_dp.privacy.ledger import DPSGDRun, PrivacyBudgetExceeded, PrivacyLedger
from botorch_dp.privacy.mechanisms import ObjectivePerturbationMechanism
from botorch_dp.privacy.seeding import PrivacyWarning
from botorch_dp.problems import AMPTuningObjective, load_logistic_data
from botorch_dp.training import DPSGDConfig
from botorch_dp.training.dp_sgd import composed_training_epsilon
from botorch_dp.tuning import (
    ClassificationData,
    TorchModelTuningObjective,
    estimate_training_noise_variance,
)
from tests.objectives.charged_helpers import SPACE, TRAINING, X2, X4

DP = DPSGDConfig(noise_multiplier=1.2, max_grad_norm=1.0)


@pytest.fixture(scope="module")
def data(toy_rows):
    g = torch.Generator().manual_seed(0)
    return ClassificationData(*toy_rows(g, 60), *toy_rows(g, 15), num_classes=2, name="toy")


@pytest.fixture(scope="module")
def public_val(toy_rows):
    return toy_rows(torch.Generator().manual_seed(1), 12)


@pytest.fixture(scope="module")
def pool():
    with process_pool(2) as executor:
        yield executor


def _dpsgd(data, ledger=None, **kw):
    kw.setdefault("model_fn", functools.partial(nn.Linear, 3, 2))  # picklable on every version
    kw.setdefault("dp_sgd", DP)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)  # explicit noise seeds: reproducible runs
        return TorchModelTuningObjective(data, SPACE, training=TRAINING, ledger=ledger, **kw)


@pytest.fixture(scope="module")
def amp_data():
    return load_logistic_data("synthetic", seed=3, num_examples=200, num_features=5)


@pytest.fixture(scope="module")
def amp_budget():
    return lr.plan_amp_runs(1.0, 1e-5, num_runs=5)


def _amp(data, budget, ledger=None, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)
        return AMPTuningObjective(data, budget, ledger=ledger, **kw)


def _records(ledger):
    return [(r.run_id, r.event) for r in ledger.training.records()]


# ------------------------------------------------------------------------- executors (item 1)
def test_the_callers_ledger_records_every_run_on_a_process_pool(data, pool):
    ledger = PrivacyLedger()
    losses = evaluate_rows(_dpsgd(data, ledger, noise_seed=3), X2, executor=pool)
    assert [run_id for run_id, _ in _records(ledger)] == ["eval-0000", "eval-0001"]
    # the same runs in process: the same records and, with the same noise seed, the same losses
    serial_ledger = PrivacyLedger()
    serial = _dpsgd(data, serial_ledger, noise_seed=3)(X2)
    assert _records(ledger) == _records(serial_ledger)
    assert torch.equal(losses, serial)
    assert len(ledger.reservation_holders()) == 0


def test_amp_runs_on_a_process_pool_are_recorded_in_the_callers_ledger(amp_data, amp_budget, pool):
    ledger = PrivacyLedger(training_delta=1e-5)
    losses = evaluate_rows(_amp(amp_data, amp_budget, ledger, noise_seed=5), X2, executor=pool)
    serial_ledger = PrivacyLedger(training_delta=1e-5)
    serial = _amp(amp_data, amp_budget, serial_ledger, noise_seed=5)(X2)
    assert [run_id for run_id, _ in _records(ledger)] == ["amp-0000", "amp-0001"]
    assert _records(ledger) == _records(serial_ledger)
    assert torch.equal(losses, serial)
    assert ledger.training.epsilon(1e-5) == serial_ledger.training.epsilon(1e-5) > 0


def test_dp_gibo_over_a_pool_charges_every_training_run_to_the_shared_ledger(amp_data, amp_budget, pool):
    def run(executor):
        ledger = PrivacyLedger(validation_mu_budget=1.0, training_delta=1e-5)
        objective = _amp(amp_data, amp_budget, ledger, noise_seed=2)
        kernel = objective.recommended_kernel()
        config = DPGIBOConfig(
            bounds=objective.bounds,
            kernel=kernel,
            num_iterations=2,
            privacy_mu=1.0,
            clip_bound=1.0,
            step_size=0.2,
            batch_size=2,
            noise_variance=1e-2,
            seed=4,
            num_restarts=1,
            raw_samples=8,
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PrivacyWarning)
            release = DPGIBO(config, ledger=ledger).run(objective, progress=False, executor=executor).release
        return ledger, release

    pooled, pooled_release = run(pool)
    serial, serial_release = run(None)
    assert len(pooled.training.records()) == len(serial.training.records()) == 4
    assert _records(pooled) == _records(serial) and torch.equal(pooled_release.iterates, serial_release.iterates)
    assert pooled.validation.mu() == pytest.approx(1.0)


def test_the_callers_ledger_records_every_run_on_a_dask_cluster(data):
    distributed = pytest.importorskip("distributed")
    ledger = PrivacyLedger()
    with (
        distributed.LocalCluster(n_workers=1, processes=True, threads_per_worker=1, dashboard_address=None) as cluster,
        distributed.Client(cluster) as client,
    ):
        losses = evaluate_rows(_dpsgd(data, ledger, noise_seed=8), X2, executor=client.get_executor())
    serial_ledger = PrivacyLedger()
    serial = _dpsgd(data, serial_ledger, noise_seed=8)(X2)
    assert [run_id for run_id, _ in _records(ledger)] == ["eval-0000", "eval-0001"]
    assert _records(ledger) == _records(serial_ledger) and torch.equal(losses, serial)


def _two_run_ledger(data):
    run = _dpsgd(data).planned_run()
    two = composed_training_epsilon([run] * 2, 1e-5, "rdp", 0.01)
    return PrivacyLedger(training_epsilon_budget=two * 1.001, training_delta=1e-5)


def test_a_batch_the_budget_cannot_cover_is_refused_before_any_row_trains(data, pool, monkeypatch):
    trained = []
    real = tc.train_model
    monkeypatch.setattr(tc, "train_model", lambda *a, **k: trained.append(1) or real(*a, **k))
    ledger = _two_run_ledger(data)
    objective = _dpsgd(data, ledger)
    with pytest.raises(PrivacyBudgetExceeded):
        objective(X4)
    assert trained == [] and ledger.training.records() == [] and len(ledger.reservation_holders()) == 0
    with pytest.raises(PrivacyBudgetExceeded):
        evaluate_rows(objective, X4, executor=pool)
    assert ledger.training.records() == [] and len(ledger.reservation_holders()) == 0
    # the budget holds two runs: a batch of two is admitted, a third run is not
    assert evaluate_rows(objective, X2, executor=pool).shape == (2, 15)
    assert len(ledger.training.records()) == 2 and trained == []  # trained in the pool's processes
    with pytest.raises(PrivacyBudgetExceeded):
        objective(X2[:1])
    assert trained == [] and len(ledger.training.records()) == 2


def test_a_pickled_objective_carries_no_in_memory_ledger(data, tmp_path):
    ledger = PrivacyLedger(training_epsilon_budget=50.0, training_delta=1e-5)
    objective = _dpsgd(data, ledger)
    objective(X2[:1])
    worker = pickle.loads(pickle.dumps(objective))
    assert worker.ledger is None and worker.runs == []
    with pytest.raises(RuntimeError, match="evaluate_rows.*storage="):
        worker(X2)
    tickets = objective.charge_rows(X2)  # charged here, trained by the copy
    assert worker.evaluate_charged(X2, tickets).shape == (2, 15)
    assert [r.run_id for r in ledger.training.records()] == ["eval-0000", "eval-0001", "eval-0002"]
    with pytest.raises(RuntimeError, match="already trained"):
        worker.evaluate_charged(X2[:1], tickets[:1])
    with pytest.raises(ValueError, match="tickets"):
        worker.evaluate_charged(X2, tickets[:1])
    assert copy.deepcopy(objective).ledger is ledger and copy.copy(objective).ledger is ledger
    # the default model (an MLP) pickles too
    assert (
        pickle.loads(pickle.dumps(TorchModelTuningObjective(data, training=TRAINING))).model_fn().__class__
        is nn.Sequential
    )
    # a stored ledger travels by its address: a copy charges the same database
    stored = PrivacyLedger(storage=tmp_path / "ledger.db", dataset="toy")
    remote = pickle.loads(pickle.dumps(_dpsgd(data, stored)))
    remote(X2[:1])
    assert PrivacyLedger(storage=tmp_path / "ledger.db", dataset="toy").training.run_ids() == ["eval-0000"]


# ------------------------------------------------------------------------- run ids (item 2)
class _TrainsAnother:
    """A model_fn that evaluates another objective the first time it builds a model."""

    def __init__(self, other):
        self.other, self.done = other, False

    def __call__(self):
        if not self.done:
            self.done = True
            self.other(X2[:1])
        return nn.Linear(3, 2)


@pytest.mark.parametrize("stored", [False, True], ids=["memory", "sqlite"])
def test_objectives_sharing_a_ledger_and_a_prefix_never_reuse_a_run_id(data, tmp_path, stored):
    def ledger():
        return PrivacyLedger(storage=tmp_path / "shared.db", dataset="toy") if stored else shared

    shared = PrivacyLedger()
    inner = _dpsgd(data, ledger())
    outer = _dpsgd(data, ledger(), model_fn=_TrainsAnother(inner))  # a second object on the same ledger
    outer(X2[:1])  # the inner run starts while the outer one trains
    outer(X2[1:])
    ids = ledger().training.run_ids()
    assert ids == ["eval-0000", "eval-0001", "eval-0002"] and len(set(ids)) == 3
    assert [r.run_id for r in outer.runs] == ["eval-0000", "eval-0002"] and [r.run_id for r in inner.runs] == [
        "eval-0001"
    ]


def test_a_taken_id_is_skipped_and_a_clashing_index_is_refused_before_training(data, monkeypatch):
    ledger = PrivacyLedger()
    ledger.external.record(DPSGDRun(noise_multiplier=1.0, sample_rate=0.5, steps=2), run_id="eval-0005")
    objective = _dpsgd(data, ledger)
    stale = iter([5])  # a numbering that has not yet seen eval-0005 (another process took it)
    real = objective.next_run_index
    monkeypatch.setattr(objective, "next_run_index", lambda: next(stale, None) or real())
    assert [t.run_id for t in objective.charge_rows(X2)] == ["eval-0006", "eval-0007"]
    # another process recorded the same index under another label: refused, loudly, before training
    ledger.external.record(DPSGDRun(noise_multiplier=1.0, sample_rate=0.5, steps=2), run_id="eval-0008-final")
    monkeypatch.setattr(objective, "next_run_index", lambda: 8)
    monkeypatch.setattr(tc, "train_model", lambda *a, **k: pytest.fail("trained under a clashing index"))
    with pytest.raises(RuntimeError, match="index 8 .* recorded twice"):
        objective(X2[:1])


# ------------------------------------------------------------------------- planning (item 3)
def test_a_proxy_on_the_sensitive_training_rows_is_charged_to_the_callers_ledger(data, public_val, toy_rows):
    ledger = PrivacyLedger()
    objective = _dpsgd(data, ledger)
    proxy = objective.with_data(ClassificationData(data.X_train.float(), data.y_train, *public_val, num_classes=2))
    proxy(X2)
    assert proxy.ledger is ledger and ledger.training.run_ids() == ["eval-0000", "eval-0001"]
    report = proxy.training_report(1e-5)
    assert report["epsilon"] > 0 and report["epsilon"] == objective.training_report(1e-5)["epsilon"]
    shared = ClassificationData(data.X_train[:30], data.y_train[:30], *public_val, num_classes=2)  # half the rows
    with pytest.raises(ValueError, match="ledger=.*shares 30 training record"):
        objective.with_data(shared, ledger=PrivacyLedger())
    with pytest.raises(ValueError, match="dp_sgd=None"):
        objective.with_data(shared, dp_sgd=None)
    with pytest.raises(ValueError, match="ledger="):  # a pilot must be public: refused on the sensitive rows
        estimate_training_noise_variance(objective, shared, X2, num_repeats=2)
    # a target ε covers every run on the sensitive rows, the proxy's included
    target = _dpsgd(data, PrivacyLedger(), dp_sgd=DPSGDConfig(target_epsilon=2.0, target_delta=1e-5, planned_runs=2))
    target_proxy = target.with_data(ClassificationData(data.X_train, data.y_train, *public_val, num_classes=2))
    target_proxy(X2)
    for spent in (target, target_proxy):
        with pytest.raises(PrivacyBudgetExceeded, match="target"):
            spent(X2[:1])
    g = torch.Generator().manual_seed(5)  # public training rows: a free pilot, with its own ledger
    public = objective.with_data(ClassificationData(*toy_rows(g, 60), *public_val, num_classes=2))
    public(X2[:1])
    assert public.ledger is not ledger and len(ledger.training.run_ids()) == 2


def test_planning_on_a_proxy_that_trains_on_the_sensitive_rows_is_charged(data, public_val):
    ledger = PrivacyLedger()
    objective = _dpsgd(data, ledger)
    proxy = objective.with_data(ClassificationData(data.X_train, data.y_train, *public_val, num_classes=2))
    kernel = ScaleKernel(RBFKernel())
    kernel.base_kernel.lengthscale = 0.3
    config = DPGIBOConfig(
        bounds=objective.bounds,
        kernel=kernel,
        privacy_mu=1.0,
        num_iterations=1,
        step_size=0.1,
        batch_size=2,
        noise_variance=1e-2,
        clip_bound=1.0,
        num_restarts=1,
        raw_samples=8,
    )
    plan_private_run(
        proxy,
        config,
        num_users=objective.num_users,
        clip_quantiles=(0.5,),
        step_sizes=(0.1,),
        fit_kernel=False,
        num_repeats=1,
    )
    assert proxy.num_trainings > 0 and len(ledger.training.runs()) == proxy.num_trainings
    assert objective.training_report(1e-5)["epsilon"] > 0


# ------------------------------------------------------------------------- the one charge protocol
def test_train_records_its_run_before_the_noise_and_a_failure_before_it_records_nothing(
    data, amp_data, amp_budget, monkeypatch
):
    ledger = PrivacyLedger(training_delta=1e-5)
    seen = []
    real_train = tc.train_model
    monkeypatch.setattr(
        tc, "train_model", lambda *a, **k: seen.append(ledger.training.run_ids()) or real_train(*a, **k)
    )
    _dpsgd(data, ledger).train(X2[0], label="final")
    assert seen == [["eval-0000-final"]]  # recorded when DP-SGD started
    ledger = PrivacyLedger(training_delta=1e-5)
    objective = _amp(amp_data, amp_budget, ledger)
    real_draw = ObjectivePerturbationMechanism.perturbation

    def draw(self, **kwargs):
        b = real_draw(self, **kwargs)
        seen.append(ledger.training.run_ids())
        return b

    monkeypatch.setattr(ObjectivePerturbationMechanism, "perturbation", draw)
    final = objective.train(torch.tensor([0.3]), label="final", budget_weight=2.0)
    assert seen[-1] == ["amp-0000-final"]  # recorded by the mechanism with b, before the solver ran
    (record,) = ledger.training.records()
    assert record.run_id == "amp-0000-final" and record.event.description == final.description
    assert math.isclose(record.event.rdp[10], float(final.rdp(ledger.RDP_ORDERS[10])), rel_tol=1e-12)

    def fails(*args, meter=None, run_id=None, **kwargs):
        raise ValueError("refused before the draw")

    monkeypatch.setattr(lr, "fit_amp", fails)
    with pytest.raises(ValueError, match="before the draw"):
        objective.train(torch.tensor([0.5]))
    assert len(ledger.training.records()) == 1 and len(ledger.reservation_holders()) == 0


def test_no_module_of_the_package_writes_or_checks_the_ledger_outside_it():
    package = Path(botorch_dp.__file__).parent
    found = []
    for path in sorted(package.rglob("*.py")):
        if path.parent.name == "ledger" and path.parent.parent.name == "privacy":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                name = node.func.attr
                if name.startswith(("record_training", "record_validation", "check_training", "check_validation")):
                    found.append(f"{path.relative_to(package)}:{node.lineno} {name}")
    assert found == []
