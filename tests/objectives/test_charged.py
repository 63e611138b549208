"""botorch_dp.objectives.charged, the fast twin of tests/tuning/test_training_charges.py (a slow path;
issue 40, item 6): every training run is recorded in the caller's ledger before it trains, also
when the rows go to an executor that pickles them as a process pool does (emulated in this
process), a batch the budget cannot cover is refused before any row trains, and a worker's
copy carries no ledger."""

import concurrent.futures
import functools
import pickle
import warnings

import pytest
import torch
from torch import nn

import botorch_dp.training.cover as tc  # where every DP-SGD run calls train_model
from botorch_dp.evaluation import evaluate_rows
from botorch_dp.privacy.ledger import PrivacyBudgetExceeded, PrivacyLedger
from botorch_dp.privacy.seeding import PrivacyWarning
from botorch_dp.training import DPSGDConfig
from botorch_dp.training.dp_sgd import composed_training_epsilon
from botorch_dp.tuning import ClassificationData, TorchModelTuningObjective
from tests.objectives.charged_helpers import SPACE, TRAINING, X2, X4

pytestmark = pytest.mark.privacy_fast  # the fast version of privacy properties (tests/conftest.py)


@pytest.fixture(scope="module")
def data(toy_rows):
    g = torch.Generator().manual_seed(0)
    return ClassificationData(*toy_rows(g, 40), *toy_rows(g, 10), num_classes=2, name="toy")


def _dpsgd(data, ledger=None, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)  # explicit noise seeds: reproducible runs
        return TorchModelTuningObjective(
            data,
            SPACE,
            training=TRAINING,
            ledger=ledger,
            model_fn=functools.partial(nn.Linear, 3, 2),
            dp_sgd=DPSGDConfig(noise_multiplier=1.2, max_grad_norm=1.0),
            **kw,
        )


class _PicklingExecutor(concurrent.futures.Executor):
    r"""Runs each task in this process on a pickled copy of it, as a process pool would see it."""

    def submit(self, fn, /, *args, **kwargs):
        fn, args, kwargs = pickle.loads(pickle.dumps((fn, args, kwargs)))
        future: concurrent.futures.Future = concurrent.futures.Future()
        future.set_result(fn(*args, **kwargs))
        return future


@pytest.fixture
def trainings(monkeypatch):
    r"""The ledger's training run ids seen at the start of each training (in this process)."""
    seen: list = []
    real = tc.train_model

    def spy(*args, **kwargs):
        seen.append(len(seen))
        return real(*args, **kwargs)

    monkeypatch.setattr(tc, "train_model", spy)
    return seen


def test_each_run_is_recorded_in_the_callers_ledger_before_it_trains(data, monkeypatch):
    # rows sent to an executor that pickles them: the copies train, and the caller's ledger already
    # records the whole batch when the first row starts training
    ledger = PrivacyLedger()
    objective = _dpsgd(data, ledger, noise_seed=3)
    seen = []
    real = tc.train_model
    monkeypatch.setattr(tc, "train_model", lambda *a, **k: seen.append(ledger.training.run_ids()) or real(*a, **k))
    losses = evaluate_rows(objective, X2, executor=_PicklingExecutor())
    assert seen == [["eval-0000", "eval-0001"]] * 2 and losses.shape == (2, 10)
    assert all(r.event == objective.planned_run() for r in ledger.training.records())
    assert len(ledger.reservation_holders()) == 0
    worker = pickle.loads(pickle.dumps(objective))
    assert worker.ledger is None and worker.runs == []


def test_a_batch_the_budget_cannot_cover_is_refused_before_any_row_trains(data, trainings):
    run = _dpsgd(data).planned_run()
    two = composed_training_epsilon([run] * 2, 1e-5, "rdp", 0.01)
    ledger = PrivacyLedger(training_epsilon_budget=two * 1.001, training_delta=1e-5)
    objective = _dpsgd(data, ledger)
    for executor in (None, _PicklingExecutor()):
        with pytest.raises(PrivacyBudgetExceeded):
            evaluate_rows(objective, X4, executor=executor)
        assert trainings == [] and ledger.training.records() == [] and len(ledger.reservation_holders()) == 0
    assert evaluate_rows(objective, X2, executor=_PicklingExecutor()).shape == (2, 10)
    assert len(ledger.training.records()) == 2 and len(trainings) == 2
    with pytest.raises(PrivacyBudgetExceeded):
        objective(X2[:1])
    assert len(trainings) == 2 and len(ledger.training.records()) == 2
