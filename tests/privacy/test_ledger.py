r"""Tests for botorch_dp.privacy.ledger."""

import json
import math
import warnings

import pytest
from opacus.accountants import PRVAccountant, RDPAccountant

from botorch_dp.privacy.accountants import accountant_epsilon
from botorch_dp.privacy.analysis.gdp import gdp_epsilon
from botorch_dp.privacy.ledger import PrivacyBudgetExceeded, PrivacyLedger
from botorch_dp.privacy.seeding import PrivacyWarning

DELTA = 1e-5
RUNS = [("eval-0", 1.1, 0.02, 100), ("eval-1", 1.1, 0.02, 100), ("eval-2", 0.9, 0.05, 40)]


def _record_runs(ledger, runs=RUNS):
    for run_id, noise_multiplier, sample_rate, steps in runs:
        ledger.record_training_run(
            run_id=run_id, noise_multiplier=noise_multiplier, sample_rate=sample_rate, steps=steps
        )


def _key(t):
    return f"step-{t:04d}"


def test_validation_steps_compose_and_are_idempotent():
    ledger = PrivacyLedger()
    assert ledger.validation_mu() == 0.0
    assert ledger.validation_epsilon(DELTA) == 0.0
    for t in range(25):
        assert ledger.record_validation_step(mu=0.2, run_id="run-a", key=_key(t))
    assert ledger.validation_mu() == pytest.approx(1.0, rel=1e-14)
    assert ledger.validation_epsilon(DELTA) == pytest.approx(4.3772, abs=1e-3)
    # Re-recording any release of the same run with the same μ changes nothing.
    for t in range(25):
        assert not ledger.record_validation_step(mu=0.2, run_id="run-a", key=_key(t))
    assert len(ledger.validation_steps) == 25
    assert list(ledger.validation_steps)[:2] == [("run-a", "step-0000"), ("run-a", "step-0001")]
    assert ledger.validation_mu() == pytest.approx(1.0, rel=1e-14)
    with pytest.raises(ValueError, match="already recorded with mu=0.2"):
        ledger.record_validation_step(mu=0.3, run_id="run-a", key=_key(3))
    assert ledger.validation_mu() == pytest.approx(1.0, rel=1e-14)
    for bad in ("", " step", 3, None):
        with pytest.raises(ValueError, match="key must be a non-empty string"):
            ledger.record_validation_step(mu=0.3, run_id="run-a", key=bad)
        with pytest.raises(ValueError, match="run_id must be a non-empty string"):
            ledger.record_validation_step(mu=0.3, run_id=bad, key="step-0000")
    with pytest.raises(ValueError, match="mu must be positive"):
        ledger.record_validation_step(mu=0.0, run_id="run-a", key=_key(30))
    assert len(ledger.validation_steps) == 25


def test_two_runs_on_one_ledger_compose():
    """The same step index in two runs is two releases: 0.6 ⊕ 0.6 = sqrt(0.72) = 0.8485."""
    ledger = PrivacyLedger()
    mu_step = 0.6 / math.sqrt(4)
    for run_id in ("run-a", "run-b"):
        for t in range(4):
            assert ledger.record_validation_step(mu=mu_step, run_id=run_id, key=_key(t))
    assert ledger.validation_mu() == pytest.approx(math.sqrt(0.36 + 0.36), rel=1e-12)
    assert ledger.validation_mu() == pytest.approx(0.8485, abs=1e-4)
    assert ledger.validation_mu(run_id="run-a") == pytest.approx(0.6, rel=1e-12)
    assert ledger.validation_mu(run_id="run-c") == 0.0
    assert ledger.validation_run_ids() == ["run-a", "run-b"]
    report = ledger.report(DELTA)["validation"]
    assert report["num_steps"] == 8 and report["num_runs"] == 2
    # Several releases per step (room for "step-0003/grad", "step-0003/norm") are separate entries.
    ledger.record_validation_step(mu=0.3, run_id="run-c", key="step-0003/grad")
    ledger.record_validation_step(mu=0.4, run_id="run-c", key="step-0003/norm")
    assert ledger.validation_mu(run_id="run-c") == pytest.approx(0.5, rel=1e-12)
    assert ledger.validation_mu() == pytest.approx(math.sqrt(0.72 + 0.25), rel=1e-12)


def test_budget_filter_runs_over_all_runs():
    ledger = PrivacyLedger(validation_mu_budget=0.8)
    for t in range(4):
        ledger.record_validation_step(mu=0.3, run_id="run-a", key=_key(t))  # μ = 0.6
    ledger.check_validation_step(math.sqrt(0.28))  # 0.6 ⊕ 0.529 = 0.8 fits exactly
    with pytest.raises(PrivacyBudgetExceeded, match="remaining mu budget"):
        ledger.check_validation_step(0.53)
    # A second run of μ = 0.6 (same step keys) would make 0.8485 > 0.8: its 4th step is refused.
    for t in range(3):
        ledger.record_validation_step(mu=0.3, run_id="run-b", key=_key(t))
    with pytest.raises(PrivacyBudgetExceeded):
        ledger.record_validation_step(mu=0.3, run_id="run-b", key=_key(3))
    assert len(ledger.validation_steps) == 7
    assert ledger.validation_mu() == pytest.approx(math.sqrt(7 * 0.09), rel=1e-12)
    # A replay of a recorded release is not a new release: accepted at the budget's edge.
    assert not ledger.record_validation_step(mu=0.3, run_id="run-b", key=_key(2))


def test_state_dict_json_round_trip_does_not_double_count():
    ledger = PrivacyLedger(training_delta=1e-6, training_accountant="rdp")
    mus = [0.1, 0.3, 0.2, 0.25]
    for t, mu in enumerate(mus):
        ledger.record_validation_step(mu=mu, run_id="run-a", key=_key(t))
    ledger.record_validation_step(mu=0.5, run_id="run-b", key=_key(0))
    _record_runs(ledger, RUNS[:2])
    state = ledger.state_dict()
    assert state["version"] == 2 == PrivacyLedger.STATE_VERSION
    assert state["validation_steps"][0] == {"run_id": "run-a", "key": "step-0000", "mu": 0.1}
    saved = json.dumps(state)
    resumed = PrivacyLedger.from_state_dict(json.loads(saved))
    assert resumed.state_dict() == ledger.state_dict()
    assert resumed.validation_steps == ledger.validation_steps
    # A resumed loop replays the last step and the last run before continuing.
    assert not resumed.record_validation_step(mu=mus[-1], run_id="run-a", key=_key(len(mus) - 1))
    _record_runs(resumed, RUNS[1:2])
    assert resumed.validation_mu() == pytest.approx(ledger.validation_mu(), rel=1e-15)
    assert resumed.training_epsilon(1e-6) == ledger.training_epsilon(1e-6)
    # Then it goes on.
    resumed.record_validation_step(mu=0.4, run_id="run-a", key=_key(len(mus)))
    _record_runs(resumed, RUNS[2:])
    expected_mu = math.sqrt(sum(mu**2 for mu in mus) + 0.4**2 + 0.5**2)
    assert resumed.validation_mu() == pytest.approx(expected_mu, rel=1e-14)
    assert len(resumed.training_runs) == 3
    # load_state_dict replaces the state of an existing ledger.
    other = PrivacyLedger(validation_mu_budget=9.0)
    other.record_validation_step(mu=5.0, run_id="x", key=_key(99))
    other.load_state_dict(json.loads(saved))
    assert other.state_dict() == ledger.state_dict()
    with pytest.raises(ValueError, match="version 99"):
        PrivacyLedger.from_state_dict({"version": 99})


def test_old_and_damaged_states_are_refused_and_change_nothing():
    ledger = PrivacyLedger()
    ledger.record_validation_step(mu=0.5, run_id="run-a", key=_key(0))
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
    ledger.record_validation_step(mu=0.5, run_id="run-a", key=_key(0))
    ledger.record_validation_step(mu=math.inf, run_id="run-a", key=_key(1))
    assert ledger.validation_mu() == math.inf
    assert ledger.validation_epsilon(DELTA) == math.inf
    assert not ledger.record_validation_step(mu=math.inf, run_id="run-a", key=_key(1))
    resumed = PrivacyLedger.from_state_dict(json.loads(json.dumps(ledger.state_dict())))
    assert resumed.validation_mu() == math.inf
    assert resumed.report(DELTA)["validation"]["mu"] == math.inf
    budgeted = PrivacyLedger(validation_mu_budget=10.0)
    with pytest.raises(PrivacyBudgetExceeded):
        budgeted.record_validation_step(mu=math.inf, run_id="run-a", key=_key(0))


@pytest.mark.parametrize(
    "budget, mu_step",
    [(1.0, 0.2), (1.0, 0.25), (1.0, 0.3), (2.0, 0.7), (0.5, 0.6), (3.0, 1.0 / 3.0), (1.0, 0.1)],
)
def test_validation_budget_filter_closed_form(budget, mu_step):
    # k equal steps fit iff sqrt(k)·μ_t ≤ budget. The cases include exact boundaries
    # ((1, 0.25): 16 steps, (1, 0.2): 25 steps, (3, 1/3): 81 steps) where rounding
    # must not refuse the last allowed step.
    allowed = math.floor((budget / mu_step) ** 2 + 1e-9)
    ledger = PrivacyLedger(validation_mu_budget=budget)
    for k in range(allowed):
        assert ledger.remaining_validation_mu() >= mu_step * (1 - 1e-9)
        ledger.record_validation_step(mu=mu_step, run_id="run-a", key=_key(k))
    spent = ledger.validation_mu()
    assert spent <= budget * (1 + 1e-9)
    remaining = math.sqrt(max(budget**2 - spent**2, 0.0))
    assert ledger.remaining_validation_mu() == pytest.approx(remaining, abs=1e-6)
    with pytest.raises(PrivacyBudgetExceeded, match="remaining mu budget") as info:
        ledger.check_validation_step(mu_step)
    assert f"{ledger.remaining_validation_mu():.6g}" in str(info.value)
    with pytest.raises(PrivacyBudgetExceeded):
        ledger.record_validation_step(mu=mu_step, run_id="run-b", key=_key(0))
    # Nothing was recorded by the refused step.
    assert len(ledger.validation_steps) == allowed
    assert ledger.validation_mu() == spent
    # A step that fits the remainder is still accepted.
    if ledger.remaining_validation_mu() > 1e-6:
        ledger.record_validation_step(mu=0.99 * ledger.remaining_validation_mu(), run_id="run-b", key=_key(0))
    assert isinstance(PrivacyBudgetExceeded("x"), RuntimeError)


def test_training_composition_matches_direct_opacus():
    ledger = PrivacyLedger()
    assert ledger.training_epsilon(DELTA) == 0.0
    _record_runs(ledger)
    # Re-recording a run does not count it twice.
    _record_runs(ledger, RUNS[:1])
    assert len(ledger.training_runs) == 3
    for name, cls in (("rdp", RDPAccountant), ("prv", PRVAccountant)):
        direct = cls()
        for _, noise_multiplier, sample_rate, steps in RUNS:
            for _ in range(steps):
                direct.step(noise_multiplier=noise_multiplier, sample_rate=sample_rate)
        assert ledger.training_epsilon(DELTA, accountant=name) == pytest.approx(
            accountant_epsilon(direct, delta=DELTA), rel=1e-9
        )
    rdp = ledger.training_epsilon(DELTA, accountant="rdp")
    assert 0.0 < ledger.training_epsilon(DELTA, accountant="prv") <= rdp
    with pytest.raises(ValueError, match="already recorded"):
        ledger.record_training_run(run_id="eval-0", noise_multiplier=2.0, sample_rate=0.02, steps=100)
    with pytest.raises(ValueError, match="sample_rate"):
        ledger.record_training_run(run_id="bad", noise_multiplier=1.0, sample_rate=0.0, steps=1)
    with pytest.raises(ValueError, match="accountant"):
        ledger.training_epsilon(DELTA, accountant="moments")
    ledger.record_training_run(run_id=7, noise_multiplier=0.0, sample_rate=1.0, steps=1)
    assert ledger.training_epsilon(DELTA) == math.inf


def test_training_budget_filter():
    two_runs = PrivacyLedger()
    _record_runs(two_runs, RUNS[:2])
    budget = two_runs.training_epsilon(1e-6)
    ledger = PrivacyLedger(training_epsilon_budget=budget, training_delta=1e-6)
    _record_runs(ledger, RUNS[:2])
    with pytest.raises(PrivacyBudgetExceeded, match="Spent so far"):
        _record_runs(ledger, RUNS[2:])
    assert len(ledger.training_runs) == 2
    with pytest.raises(ValueError, match="training_delta"):
        PrivacyLedger(training_epsilon_budget=1.0)


def test_report_keeps_the_two_datasets_separate():
    ledger = PrivacyLedger(validation_mu_budget=2.0, training_delta=1e-6)
    ledger.record_validation_step(mu=1.0, run_id="run-a", key=_key(0))
    _record_runs(ledger)
    report = ledger.report(DELTA)
    assert json.loads(json.dumps(report)) == report
    assert report["validation"] == {
        "mu": 1.0,
        "epsilon": gdp_epsilon(1.0, DELTA),
        "delta": DELTA,
        "num_steps": 1,
        "num_runs": 1,
        "mu_budget": 2.0,
        "remaining_mu": pytest.approx(math.sqrt(3.0)),
    }
    assert report["training"]["delta"] == 1e-6
    assert report["training"]["num_runs"] == 3
    assert report["training"]["accountant"] == "rdp"
    assert report["training"]["epsilon"] == ledger.training_epsilon(1e-6)


def test_identical_training_runs_are_merged_without_changing_epsilon():
    """Many equal runs compose to the same ε as one history entry per run (and fast)."""
    import time

    ledger = PrivacyLedger()
    for i in range(34):
        ledger.record_training_run(run_id=i, noise_multiplier=1.5, sample_rate=1 / 15, steps=150)
    ledger.record_training_run(run_id="other", noise_multiplier=2.0, sample_rate=0.1, steps=10)
    direct = RDPAccountant()
    direct.history = ledger.training_history()  # 35 separate entries
    assert len(direct.history) == 35
    expected = direct.get_epsilon(delta=1e-5)
    assert ledger.training_epsilon(1e-5, accountant="rdp") == pytest.approx(expected, rel=1e-12)
    start = time.perf_counter()
    ledger.training_epsilon(1e-5, accountant="prv")
    assert time.perf_counter() - start < 10.0


def test_two_dp_gibo_runs_sharing_a_ledger_compose():
    """Two real DP-GIBO runs of μ = 0.6 on one ledger: the ledger holds μ = 0.8485, not 0.6."""
    from botorch_dp.optim.dp_gibo import DPGIBO
    from tests.optim.loop_helpers import nl_config, normal_location

    _, losses = normal_location(n=20, d=2)
    ledger = PrivacyLedger()
    runs = []
    for seed in (1, 2):
        config = nl_config(d=2, privacy_mu=0.6, clip_bound=2.0, num_iterations=3, seed=seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PrivacyWarning)  # an explicit seed warns (issue 13)
            opt = DPGIBO(config, ledger=ledger)
        opt.run(losses, progress=False)
        runs.append(opt)
    assert runs[0].run_id != runs[1].run_id
    assert len(runs[0].run_id) == 32 and int(runs[0].run_id, 16) >= 0  # uuid4 hex
    assert set(ledger.validation_steps) == {
        (opt.run_id, f"step-{t:04d}") for opt in runs for t in range(3)
    }
    assert ledger.validation_run_ids() == [runs[0].run_id, runs[1].run_id]
    for opt in runs:
        assert ledger.validation_mu(run_id=opt.run_id) == pytest.approx(0.6, rel=1e-12)
    assert ledger.validation_mu() == pytest.approx(math.sqrt(0.36 + 0.36), rel=1e-12)
    assert ledger.validation_mu() == pytest.approx(0.8485, abs=1e-4)


def test_budget_filter_stops_a_second_dp_gibo_run():
    """A μ = 1 budget fits one μ = 0.8 run; a second run on the same ledger is refused before its
    first release that would exceed it, and nothing over the budget is recorded."""
    from botorch_dp.optim.dp_gibo import DPGIBO
    from tests.optim.loop_helpers import nl_config, normal_location

    _, losses = normal_location(n=20, d=2)
    ledger = PrivacyLedger(validation_mu_budget=1.0)
    config = nl_config(d=2, privacy_mu=0.8, clip_bound=2.0, num_iterations=4, seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)
        DPGIBO(config, ledger=ledger).run(losses, progress=False)
        second = DPGIBO(config, ledger=ledger)
    # 0.8² + k·0.4² ≤ 1 allows k = 2 steps of the second run (0.8 ⊕ 0.4 ⊕ 0.4 = 0.98)
    with pytest.raises(PrivacyBudgetExceeded):
        second.run(losses, progress=False)
    assert second.iteration == 2
    assert ledger.validation_mu(run_id=second.run_id) == pytest.approx(math.sqrt(2 * 0.16), rel=1e-12)
    assert ledger.validation_mu() <= 1.0
