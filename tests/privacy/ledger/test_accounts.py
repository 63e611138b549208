r"""Where a ``PrivacyLedger`` keeps its rows and budgets (botorch_dp/privacy/ledger/accounts.py): in
memory by default, refusing to be pickled when a copy could lose charges; a stored dataset keeps its
budget, refuses a different one and lends it to a ledger that passes None; an object's own budget may
be tighter, never looser than the stored one; settings compare as numbers within 1e-9."""

import pickle
import uuid

import pytest

from botorch_dp.privacy.ledger import Gaussian, PrivacyBudgetExceeded, PrivacyLedger
from botorch_dp.privacy.ledger.accounts import same_setting


def _dataset() -> str:
    return f"clinic-{uuid.uuid4().hex[:12]}"


def test_in_memory_ledger_is_the_default_and_refuses_to_be_copied_into_a_worker():
    ledger = PrivacyLedger(validation_mu_budget=1.0)
    assert ledger.storage_url is None and ledger.dataset is None
    for t in range(25):
        ledger.external.record(Gaussian(0.2), run_id="run-a", key=f"step-{t:04d}")
    assert ledger.validation.epsilon(1e-5) == pytest.approx(4.377, abs=1e-3)
    with pytest.raises(PrivacyBudgetExceeded):
        ledger.external.check(Gaussian(0.01))
    state = ledger.state_dict()
    assert set(state) == {
        "version",
        "validation_mu_budget",
        "validation_delta",
        "training_epsilon_budget",
        "training_delta",
        "training_accountant",
        "prv_eps_error",
        "rdp_orders",
        "validation_steps",
        "training_runs",
    }
    # a copy in another process would record charges there that are then lost: refused
    for holder in (
        ledger,
        PrivacyLedger(validation_mu_budget=1.0),
        PrivacyLedger(training_epsilon_budget=1.0, training_delta=1e-5),
    ):
        with pytest.raises(TypeError, match="cannot be pickled.*storage="):
            pickle.dumps(holder)
    empty = pickle.loads(pickle.dumps(PrivacyLedger()))  # an empty ledger without budget holds nothing to lose
    assert empty.records() == []
    assert ledger.cancel_reservations() == 0
    with pytest.raises(ValueError, match="dataset needs storage"):
        PrivacyLedger(dataset="clinic")
    with pytest.raises(ValueError, match="storage needs dataset"):
        PrivacyLedger(storage="sqlite:///nowhere.db")


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
        same.external.check(Gaussian(0.6))
    adopted.external.check(Gaussian(0.6))  # the others keep the stored budget
    adopted.validation_mu_budget = 5.0  # never looser than the stored one
    with pytest.raises(PrivacyBudgetExceeded):
        adopted.external.check(Gaussian(1.1))
    assert PrivacyLedger(storage=url, dataset=_dataset()).validation_mu_budget is None


def test_a_stored_ledger_pickles_as_its_address_and_the_copy_sees_the_same_records(tmp_path):
    url = f"sqlite:///{tmp_path / 'budget.db'}"
    ledger = PrivacyLedger(storage=url, dataset="clinic", validation_mu_budget=1.0)
    ledger.external.record(Gaussian(0.3), run_id="run", key="step-0000")
    copy = pickle.loads(pickle.dumps(ledger))
    assert copy.storage_url == ledger.storage_url and copy.dataset == "clinic"
    assert copy.validation.mu() == pytest.approx(0.3)
    copy.external.record(Gaussian(0.4), run_id="run", key="step-0001")
    assert ledger.validation.mu() == pytest.approx(0.5)  # 0.3-0.4-0.5: one budget, seen from both


def test_settings_compare_as_numbers_within_a_relative_1e_9():
    assert same_setting(1.0, 1.0 + 1e-12) and same_setting(1, 1.0) and same_setting("rdp", "rdp")
    assert not same_setting(1.0, 1.0 + 1e-6) and not same_setting("rdp", "prv")
    assert not same_setting(None, 0.0) and not same_setting(None, 1e-5)
