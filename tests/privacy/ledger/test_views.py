r"""What a ledger has recorded, read back (botorch_dp/privacy/ledger/views.py): per run and composed
(``√Σμ²``), per key with replays composed, ε by the exact GDP conversion, the remaining μ in closed
form, an RDP entry refused by the μ views, the report's counts, and a second ledger object on the
same stored dataset reading what the first recorded."""

import math

import pytest

from botorch_dp.privacy.analysis.gdp import gdp_epsilon
from botorch_dp.privacy.ledger import TRAINING_RDP_ORDERS, Gaussian, PrivacyLedger, ValidationMechanism


def _three_releases(ledger):
    ledger.external.record(Gaussian(0.3), run_id="a", key="step-0000")
    ledger.external.record(Gaussian(0.4), run_id="a", key="step-0000")  # replayed with fresh noise
    ledger.external.record(Gaussian(0.5), run_id="b", key="step-0000")


def test_the_views_compose_per_run_per_key_and_overall():
    ledger = PrivacyLedger(validation_mu_budget=1.0)
    _three_releases(ledger)
    assert ledger.validation.mu("a") == pytest.approx(0.5, rel=1e-12)
    assert ledger.validation.mu() == pytest.approx(math.sqrt(0.5), rel=1e-12)
    assert ledger.validation.steps() == {("a", "step-0000"): pytest.approx(0.5), ("b", "step-0000"): 0.5}
    assert ledger.validation.run_ids() == ["a", "b"] and ledger.records(run_id="b") and not ledger.records(run_id="c")
    assert ledger.validation.epsilon(1e-5) == pytest.approx(gdp_epsilon(math.sqrt(0.5), 1e-5), rel=1e-12)
    assert ledger.validation.remaining_mu() == pytest.approx(math.sqrt(0.5), rel=1e-12)  # 0.5 + 0.5 = 1
    report = ledger.report(1e-5)
    assert report["validation"]["num_steps"] == 3 and report["validation"]["num_runs"] == 2
    assert report["validation"]["mu"] == pytest.approx(math.sqrt(0.5)) and report["training"]["num_runs"] == 0


def test_an_rdp_entry_makes_the_mu_views_refuse_and_the_curve_sum():
    ledger = PrivacyLedger()
    ledger.external.record(Gaussian(0.5), run_id="a", key="step-0000")
    ledger.external.record(ValidationMechanism.from_rdp("sigma=2", lambda a: a / 8.0), run_id="b", key="hypo")
    assert ledger.validation.mu("a") == 0.5
    with pytest.raises(ValueError, match="run 'b' holds releases given by a Renyi-DP curve"):
        ledger.validation.mu("b")
    expected = [a * 0.125 + a / 8.0 for a in TRAINING_RDP_ORDERS]
    assert ledger.validation.rdp_curve() == pytest.approx(expected, rel=1e-12)
    assert ledger.report(1e-5)["validation"]["mu"] is None


def test_a_second_object_on_a_stored_dataset_reads_what_the_first_recorded(tmp_path):
    url = f"sqlite:///{tmp_path / 'budget.db'}"
    writer = PrivacyLedger(storage=url, dataset="clinic", validation_mu_budget=1.0)
    reader = PrivacyLedger(storage=url, dataset="clinic")
    assert reader.validation.mu() == 0.0
    _three_releases(writer)
    assert reader.validation.mu() == pytest.approx(math.sqrt(0.5), rel=1e-12)
    assert reader.validation.remaining_mu() == pytest.approx(math.sqrt(0.5), rel=1e-12)
    assert len(reader.validation.records("a")) == 2
