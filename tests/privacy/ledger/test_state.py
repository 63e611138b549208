r"""The ledger's state as JSON (botorch_dp/privacy/ledger/state.py, through PrivacyLedger's
state_dict/load_state_dict): round trips that never count a release twice, merging into a
ledger that holds other records, a non-private step surviving JSON, version 3 states with
curves and pure releases, old version 2 states, and damaged or old states refused with
nothing changed."""

import json
import math

import pytest

from botorch_dp.privacy.analysis.gdp import pure_dp_to_gdp_mu
from botorch_dp.privacy.ledger import (
    TRAINING_RDP_ORDERS,
    DPSGDRun,
    Gaussian,
    PrivacyBudgetExceeded,
    PrivacyLedger,
    PureDP,
    TrainingMechanism,
)

from ..ledger_helpers import DELTA, RUNS, gaussian_curve, record_runs, spend, step_key, train


def test_state_dict_json_round_trip_does_not_double_count():
    ledger = PrivacyLedger(training_delta=1e-6, training_accountant="rdp")
    mus = [0.1, 0.3, 0.2, 0.25]
    for t, mu in enumerate(mus):
        spend(ledger, mu, "run-a", t)
    spend(ledger, 0.5, "run-b", 0)
    train(ledger, RUNS[:2])
    state = ledger.state_dict()
    assert state["version"] == 7 == PrivacyLedger.STATE_VERSION
    first = state["validation_steps"][0]
    assert {k: v for k, v in first.items() if k != "release_id"} == {"run_id": "run-a", "key": "step-0000", "mu": 0.1}
    assert len(first["release_id"]) == 32
    saved = json.dumps(state)
    resumed = PrivacyLedger.from_state_dict(json.loads(saved))
    assert resumed.state_dict() == ledger.state_dict()
    assert resumed.validation.steps() == ledger.validation.steps()
    # Loading the same state again merges by release id: nothing is counted twice.
    resumed.load_state_dict(json.loads(saved))
    assert resumed.state_dict() == ledger.state_dict()
    assert resumed.validation.mu() == pytest.approx(ledger.validation.mu(), rel=1e-15)
    assert resumed.training.epsilon(1e-6) == ledger.training.epsilon(1e-6)
    # Then it goes on.
    spend(resumed, 0.4, "run-a", len(mus))
    train(resumed, RUNS[2:])
    expected_mu = math.sqrt(sum(mu**2 for mu in mus) + 0.4**2 + 0.5**2)
    assert resumed.validation.mu() == pytest.approx(expected_mu, rel=1e-14)
    assert len(resumed.training.runs()) == 3
    # load_state_dict into a ledger that holds other records MERGES: they stay.
    other = PrivacyLedger(validation_mu_budget=9.0)
    other.external.record(Gaussian(5.0), run_id="x", key=step_key(99))
    other.load_state_dict(json.loads(saved))
    assert other.validation.mu() == pytest.approx(math.sqrt(25.0 + ledger.validation.mu() ** 2), rel=1e-14)
    assert other.validation_mu_budget == 9.0 and len(other.records()) == len(ledger.records()) + 1
    # the same release id with another cost is a contradiction, refused with nothing changed
    forged = json.loads(saved)
    forged["validation_steps"][0]["mu"] = 0.01
    before = other.state_dict()
    with pytest.raises(ValueError, match="release .* is .* here but"):
        other.load_state_dict(forged)
    assert other.state_dict() == before
    with pytest.raises(ValueError, match="version 99"):
        PrivacyLedger.from_state_dict({"version": 99})


def test_old_and_damaged_states_are_refused_and_change_nothing():
    ledger = PrivacyLedger()
    ledger.external.record(Gaussian(0.5), run_id="run-a", key=step_key(0))
    before = ledger.state_dict()
    v1 = {"version": 1, "validation_steps": [[0, 0.5], [1, 0.5]], "training_runs": []}
    with pytest.raises(ValueError, match="version 1 is not supported.*counted as one"):
        ledger.load_state_dict(v1)
    good = ledger.state_dict()
    damaged = [
        {**good, "validation_steps": [[0, 0.5]]},
        {**good, "validation_steps": [{"run_id": "a", "key": "k"}]},
        {**good, "validation_steps": [{"run_id": "a", "key": "", "mu": 0.5}]},
        {**good, "validation_steps": [{"run_id": 7, "key": "k", "mu": 0.5}]},
        {**good, "validation_steps": [{"run_id": "a", "key": "k", "mu": -1.0}]},
        {**good, "validation_steps": [{"run_id": "a", "key": "k", "mu": 0.5}] * 2},
        {**good, "validation_steps": {"a": 1}},
        {**good, "training_runs": [{"run_id": [1], "noise_multiplier": 1.0, "sample_rate": 0.1, "steps": 1}]},
        {**good, "training_runs": [{"run_id": "r", "noise_multiplier": 1.0, "sample_rate": 0.1}]},
        "not a mapping",
    ]
    for state in damaged:
        with pytest.raises(ValueError):
            ledger.load_state_dict(state)
        assert ledger.state_dict() == before


def test_non_private_step_makes_mu_infinite_and_survives_json():
    ledger = PrivacyLedger()
    ledger.external.record(Gaussian(0.5), run_id="run-a", key=step_key(0))
    ledger.external.record(Gaussian(math.inf), run_id="run-a", key=step_key(1))
    assert ledger.validation.mu() == math.inf
    assert ledger.validation.epsilon(DELTA) == math.inf
    resumed = PrivacyLedger.from_state_dict(json.loads(json.dumps(ledger.state_dict())))
    assert resumed.validation.mu() == math.inf
    assert resumed.report(DELTA)["validation"]["mu"] == math.inf
    budgeted = PrivacyLedger(validation_mu_budget=10.0)
    with pytest.raises(PrivacyBudgetExceeded):
        spend(budgeted, math.inf, "run-a", 0)
    assert budgeted.validation.records() == []


# ------------------------------------------------------------------------ state v3 / v2


def _v3_ledger():
    ledger = PrivacyLedger(validation_mu_budget=3.0, training_delta=1e-6, training_accountant="prv")
    ledger.external.record(Gaussian(0.3), run_id="run-a", key="step-0000/grad")
    ledger.external.record(PureDP(1.0), run_id="run-a", key="select")
    ledger.external.record(DPSGDRun(noise_multiplier=1.1, sample_rate=0.02, steps=100), run_id="eval-0000")
    ledger.external.record(TrainingMechanism.from_rdp("AMP, lambda=3.7", gaussian_curve(6.0)), run_id="amp-0001")
    ledger.external.record(TrainingMechanism.from_rdp("bounded", lambda a: a / 80.0 if a < 30 else math.inf), run_id=7)
    return ledger


def test_state_v3_json_round_trip_with_curves_and_pure_releases():
    ledger = _v3_ledger()
    state = ledger.state_dict()
    assert state["version"] == 7 and state["rdp_orders"] == list(TRAINING_RDP_ORDERS)
    select = {k: v for k, v in state["validation_steps"][1].items() if k != "release_id"}
    assert select == {"run_id": "run-a", "key": "select", "mu": pure_dp_to_gdp_mu(1.0), "epsilon": 1.0}
    assert [e["run_id"] for e in state["training_runs"]] == ["eval-0000", "amp-0001", 7]
    assert state["training_runs"][1]["description"] == "AMP, lambda=3.7"
    saved = json.dumps(state)
    resumed = PrivacyLedger.from_state_dict(json.loads(saved))
    assert resumed.state_dict() == state
    assert resumed.training.run_ids() == ["eval-0000", "amp-0001", 7]
    assert resumed.training.mechanisms() == ledger.training.mechanisms()
    assert resumed.validation.records() == ledger.validation.records()
    assert resumed.training.epsilon(1e-6) == ledger.training.epsilon(1e-6)
    assert resumed.report(1e-5) == ledger.report(1e-5)
    # Loading the state again (a resumed loop) merges: nothing changes.
    resumed.load_state_dict(json.loads(saved))
    assert resumed.state_dict() == state


def test_old_v2_state_still_loads():
    """A state written by the version-2 ledger (DP-SGD runs, Gaussian releases), as JSON."""
    v2 = json.loads(
        '{"version": 2, "validation_mu_budget": 2.0, "training_epsilon_budget": null, '
        '"training_delta": 1e-06, "training_accountant": "rdp", "prv_eps_error": 0.01, '
        '"validation_steps": [{"run_id": "run-a", "key": "step-0000", "mu": 0.6}, '
        '{"run_id": "run-a", "key": "step-0001", "mu": Infinity}], '
        '"training_runs": [{"run_id": "eval-0", "noise_multiplier": 1.1, "sample_rate": 0.02, "steps": 100}, '
        '{"run_id": 4, "noise_multiplier": 0.9, "sample_rate": 0.05, "steps": 40}]}'
    )
    ledger = PrivacyLedger.from_state_dict(v2)
    assert ledger.validation.steps() == {("run-a", "step-0000"): 0.6, ("run-a", "step-0001"): math.inf}
    assert ledger.training.runs() == {"eval-0": (1.1, 0.02, 100), 4: (0.9, 0.05, 40)}
    fresh = PrivacyLedger()
    record_runs(fresh, [("eval-0", 1.1, 0.02, 100), (4, 0.9, 0.05, 40)])
    assert ledger.training.epsilon(1e-6) == fresh.training.epsilon(1e-6)
    assert ledger.state_dict()["version"] == 7  # written back as version 7
    assert PrivacyLedger.from_state_dict(ledger.state_dict()).state_dict() == ledger.state_dict()
    # its records got ids that depend only on (side, run id, key): loading it twice is one copy
    assert [r.release_id for r in ledger.validation.records()][0] == 'legacy:validation:"run-a":step-0000'
    ledger.load_state_dict(v2)
    assert len(ledger.records()) == 4
    # Version 2 never held curves or pure releases: such entries in a v2 state are damage.
    bad_v2 = [
        {**v2, "training_runs": [{"run_id": "m", "description": "AMP", "rdp": [0.1] * len(TRAINING_RDP_ORDERS)}]},
        {**v2, "validation_steps": [{"run_id": "a", "key": "k", "mu": pure_dp_to_gdp_mu(1.0), "epsilon": 1.0}]},
    ]
    for state in bad_v2:
        with pytest.raises(ValueError, match="exactly the keys"):
            PrivacyLedger.from_state_dict(state)


def test_damaged_v3_states_are_refused_and_change_nothing():
    ledger = _v3_ledger()
    good = ledger.state_dict()
    n = len(TRAINING_RDP_ORDERS)
    mechanism = {"run_id": "m", "description": "AMP", "rdp": [0.1] * n}
    damaged = [
        {**good, "version": True},
        {**good, "rdp_orders": good["rdp_orders"][:-1]},
        {**good, "rdp_orders": good["rdp_orders"][:-1] + [1024.0]},
        {key: value for key, value in good.items() if key != "rdp_orders"},
        {**good, "training_runs": [{**mechanism, "rdp": [0.1] * (n - 1)}]},
        {**good, "training_runs": [{**mechanism, "rdp": [0.1] * (n - 1) + [math.nan]}]},
        {**good, "training_runs": [{**mechanism, "rdp": [-0.1] + [0.1] * (n - 1)}]},
        {**good, "training_runs": [{**mechanism, "rdp": "0.1"}]},
        {**good, "training_runs": [{**mechanism, "description": ""}]},
        {**good, "training_runs": [{k: v for k, v in mechanism.items() if k != "description"}]},
        {**good, "training_runs": [mechanism, {**mechanism}]},
        {**good, "validation_steps": [{"run_id": "a", "key": "k", "mu": 0.5, "epsilon": 1.0}]},
        {**good, "validation_steps": [{"run_id": "a", "key": "k", "mu": 0.5, "epsilon": -1.0}]},
    ]
    for state in damaged:
        with pytest.raises(ValueError):
            ledger.load_state_dict(json.loads(json.dumps(state)))
        assert ledger.state_dict() == good
