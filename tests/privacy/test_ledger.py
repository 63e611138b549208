r"""Tests for botorch_dp.privacy.ledger."""

import json
import math
import warnings
from collections.abc import Callable

import dp_accounting
import numpy as np
import pytest
from dp_accounting.rdp import RdpAccountant
from opacus.accountants import PRVAccountant, RDPAccountant
from scipy.special import ndtr, ndtri

from botorch_dp.privacy.accountants import accountant_epsilon
from botorch_dp.privacy.analysis.gdp import gdp_epsilon, pure_dp_to_gdp_mu
from botorch_dp.privacy.analysis.rdp import rdp_to_epsilon
from botorch_dp.privacy.analysis.zcdp import zcdp_epsilon_cks
from botorch_dp.privacy.ledger import (
    TRAINING_RDP_ORDERS,
    DPSGDRun,
    Gaussian,
    PrivacyBudgetExceeded,
    PrivacyLedger,
    PureDP,
    TrainingMechanism,
)
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


def _spend(ledger, mu, run_id, step, part="grad"):
    """One release through the charge protocol: admitted before, recorded at the draw."""
    event = Gaussian(mu)
    with ledger.charge({part: event}, run_id=run_id, step=step) as meter:
        meter.record(part, event)


def _train(ledger, runs=RUNS):
    """DP-SGD runs through the training charge (admitted before, recorded before training)."""
    for run_id, noise_multiplier, sample_rate, steps in runs:
        with ledger.charge_training({run_id: DPSGDRun.checked(noise_multiplier, sample_rate, steps)}) as meter:
            meter.record(run_id)


def _train_curve(ledger, run_id, curve, description):
    event = TrainingMechanism(description, tuple(curve(a) for a in TRAINING_RDP_ORDERS))
    with ledger.charge_training({run_id: event}) as meter:
        meter.record(run_id)


def test_validation_records_compose_and_each_release_counts():
    ledger = PrivacyLedger()
    assert ledger.validation_mu() == 0.0
    assert ledger.validation_epsilon(DELTA) == 0.0
    for t in range(25):
        assert ledger.record_validation_step(mu=0.2, run_id="run-a", key=_key(t))
    assert ledger.validation_mu() == pytest.approx(1.0, rel=1e-14)
    assert ledger.validation_epsilon(DELTA) == pytest.approx(4.3772, abs=1e-3)
    assert list(ledger.validation_steps)[:2] == [("run-a", "step-0000"), ("run-a", "step-0001")]
    # Every record is a release made: the same (run_id, key) recorded again (a step replayed
    # with fresh noise) counts again, with its own release id; a record is never merged away.
    for t in range(25):
        assert ledger.record_validation_step(mu=0.2, run_id="run-a", key=_key(t))
    assert len(ledger.validation_records()) == 50 and len(ledger.validation_steps) == 25
    assert len({r.release_id for r in ledger.validation_records()}) == 50
    assert ledger.validation_steps[("run-a", "step-0003")] == pytest.approx(0.2 * math.sqrt(2), rel=1e-14)
    assert ledger.validation_mu() == pytest.approx(math.sqrt(2), rel=1e-14)
    ledger.record_validation_step(mu=0.3, run_id="run-a", key=_key(3))  # another cost: one more release
    assert ledger.validation_mu() == pytest.approx(math.sqrt(2 + 0.09), rel=1e-14)
    for bad in ("", " step", 3, None):
        with pytest.raises(ValueError, match="key must be a non-empty string"):
            ledger.record_validation_step(mu=0.3, run_id="run-a", key=bad)
        with pytest.raises(ValueError, match="run_id must be a non-empty string"):
            ledger.record_validation_step(mu=0.3, run_id=bad, key="step-0000")
    with pytest.raises(ValueError, match="mu must be positive"):
        ledger.record_validation_step(mu=0.0, run_id="run-a", key=_key(30))
    assert len(ledger.validation_records()) == 51


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
        _spend(ledger, 0.3, "run-a", t)  # μ = 0.6
    ledger.check_validation_step(math.sqrt(0.28))  # 0.6 ⊕ 0.529 = 0.8 fits exactly
    with pytest.raises(PrivacyBudgetExceeded, match="remaining mu budget"):
        ledger.check_validation_step(0.53)
    # A second run of μ = 0.6 (same step keys) would make 0.8485 > 0.8: its 4th step is
    # refused before anything is recorded (or drawn).
    for t in range(3):
        _spend(ledger, 0.3, "run-b", t)
    with pytest.raises(PrivacyBudgetExceeded, match="step 3 of run 'run-b'.*Nothing was released"):
        with ledger.charge({"grad": Gaussian(0.3)}, run_id="run-b", step=3):
            raise AssertionError("the block must not run")
    assert len(ledger.validation_records()) == 7 and ledger.num_reservations() == 0
    assert ledger.validation_mu() == pytest.approx(math.sqrt(7 * 0.09), rel=1e-12)
    # A release made elsewhere is a fact: recorded even past the budget, which then has no room.
    ledger.record_validation_step(mu=0.3, run_id="run-b", key=_key(3))
    assert ledger.validation_mu() > 0.8 and ledger.remaining_validation_mu() == 0.0


def test_state_dict_json_round_trip_does_not_double_count():
    ledger = PrivacyLedger(training_delta=1e-6, training_accountant="rdp")
    mus = [0.1, 0.3, 0.2, 0.25]
    for t, mu in enumerate(mus):
        _spend(ledger, mu, "run-a", t)
    _spend(ledger, 0.5, "run-b", 0)
    _train(ledger, RUNS[:2])
    state = ledger.state_dict()
    assert state["version"] == 5 == PrivacyLedger.STATE_VERSION
    first = state["validation_steps"][0]
    assert {k: v for k, v in first.items() if k != "release_id"} == {"run_id": "run-a", "key": "step-0000", "mu": 0.1}
    assert len(first["release_id"]) == 32
    saved = json.dumps(state)
    resumed = PrivacyLedger.from_state_dict(json.loads(saved))
    assert resumed.state_dict() == ledger.state_dict()
    assert resumed.validation_steps == ledger.validation_steps
    # Loading the same state again merges by release id: nothing is counted twice.
    resumed.load_state_dict(json.loads(saved))
    assert resumed.state_dict() == ledger.state_dict()
    assert resumed.validation_mu() == pytest.approx(ledger.validation_mu(), rel=1e-15)
    assert resumed.training_epsilon(1e-6) == ledger.training_epsilon(1e-6)
    # Then it goes on.
    _spend(resumed, 0.4, "run-a", len(mus))
    _train(resumed, RUNS[2:])
    expected_mu = math.sqrt(sum(mu**2 for mu in mus) + 0.4**2 + 0.5**2)
    assert resumed.validation_mu() == pytest.approx(expected_mu, rel=1e-14)
    assert len(resumed.training_runs) == 3
    # load_state_dict into a ledger that holds other records MERGES: they stay.
    other = PrivacyLedger(validation_mu_budget=9.0)
    other.record_validation_step(mu=5.0, run_id="x", key=_key(99))
    other.load_state_dict(json.loads(saved))
    assert other.validation_mu() == pytest.approx(math.sqrt(25.0 + ledger.validation_mu() ** 2), rel=1e-14)
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
    resumed = PrivacyLedger.from_state_dict(json.loads(json.dumps(ledger.state_dict())))
    assert resumed.validation_mu() == math.inf
    assert resumed.report(DELTA)["validation"]["mu"] == math.inf
    budgeted = PrivacyLedger(validation_mu_budget=10.0)
    with pytest.raises(PrivacyBudgetExceeded):
        _spend(budgeted, math.inf, "run-a", 0)
    assert budgeted.validation_records() == []


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
        _spend(ledger, mu_step, "run-a", k)
    spent = ledger.validation_mu()
    assert spent <= budget * (1 + 1e-9)
    remaining = math.sqrt(max(budget**2 - spent**2, 0.0))
    assert ledger.remaining_validation_mu() == pytest.approx(remaining, abs=1e-6)
    with pytest.raises(PrivacyBudgetExceeded, match="remaining mu budget") as info:
        ledger.check_validation_step(mu_step)
    assert f"{ledger.remaining_validation_mu():.6g}" in str(info.value)
    with pytest.raises(PrivacyBudgetExceeded):
        _spend(ledger, mu_step, "run-b", 0)
    # Nothing was recorded by the refused step, and its hold is gone.
    assert len(ledger.validation_records()) == allowed and ledger.num_reservations() == 0
    assert ledger.validation_mu() == spent
    # A step that fits the remainder is still accepted.
    if ledger.remaining_validation_mu() > 1e-6:
        _spend(ledger, 0.99 * ledger.remaining_validation_mu(), "run-b", 0)
    assert isinstance(PrivacyBudgetExceeded("x"), RuntimeError)


def test_training_composition_matches_direct_opacus():
    ledger = PrivacyLedger()
    assert ledger.training_epsilon(DELTA) == 0.0
    _record_runs(ledger)
    # Every training run has its own id: recording one again is refused, not merged.
    with pytest.raises(ValueError, match="already in the ledger"):
        _record_runs(ledger, RUNS[:1])
    with pytest.raises(ValueError, match="already in the ledger"):
        _train(ledger, RUNS[:1])
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
    with pytest.raises(ValueError, match="already in the ledger"):
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
    _train(ledger, RUNS[:2])
    with pytest.raises(PrivacyBudgetExceeded, match="Training privacy budget exceeded.*Nothing was trained"):
        _train(ledger, RUNS[2:])
    assert len(ledger.training_runs) == 2 and ledger.num_reservations() == 0
    # two runs admitted together are checked together, before either trains
    fresh = PrivacyLedger(training_epsilon_budget=budget, training_delta=1e-6)
    with pytest.raises(PrivacyBudgetExceeded):
        with fresh.charge_training({r[0]: DPSGDRun(*r[1:]) for r in RUNS}):
            raise AssertionError("the block must not run")
    assert fresh.training_runs == {}
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
        "pure_releases": [],
    }
    assert report["training"]["delta"] == 1e-6
    assert report["training"]["num_runs"] == report["training"]["num_dp_sgd_runs"] == 3
    assert report["training"]["num_mechanisms"] == 0
    assert report["training"]["accountant"] == "rdp"
    assert report["training"]["accountant_reason"] == "training_accountant='rdp'"
    assert report["training"]["rdp_order"] in PrivacyLedger.RDP_ORDERS
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


# ------------------------------------------------------------- generic training side


def _gaussian_curve(sigma, sensitivity=1.0):
    """RDP of the Gaussian mechanism: ε(α) = α·Δ²/(2σ²)."""
    return lambda alpha: alpha * sensitivity**2 / (2.0 * sigma**2)


def _continuous_cks_epsilon(rho, delta):
    """The same conversion minimised over all orders α > 1 (the grid can only be larger)."""
    return rdp_to_epsilon(lambda alpha: alpha * rho, delta)[0]


def test_the_order_grid_is_opacus_default_plus_large_orders():
    orders = PrivacyLedger.RDP_ORDERS
    assert orders == TRAINING_RDP_ORDERS
    assert list(orders[: len(RDPAccountant.DEFAULT_ALPHAS)]) == [float(a) for a in RDPAccountant.DEFAULT_ALPHAS]
    assert orders[len(RDPAccountant.DEFAULT_ALPHAS) :] == (80.0, 128.0, 256.0, 512.0)
    assert orders[0] == 1.1 and orders[98] == 10.9 and orders[99] == 12.0 and orders[150] == 63.0
    assert all(a < b for a, b in zip(orders, orders[1:], strict=False))


@pytest.mark.parametrize(
    "sigmas, sensitivity",
    [([2.0, 3.0, 5.0], 1.0), ([30.0], 1.0), ([100.0], 1.0), ([0.5, 0.7], 1.0), ([4.0, 4.0], 0.5)],
)
def test_gaussian_rdp_entries_compose_to_the_closed_form(sigmas, sensitivity):
    ledger = PrivacyLedger()
    for i, sigma in enumerate(sigmas):
        assert ledger.record_training_mechanism(
            f"gauss-{i}", rdp=_gaussian_curve(sigma, sensitivity), description=f"Gaussian sigma={sigma}"
        )
    rho = sum(sensitivity**2 / (2.0 * sigma**2) for sigma in sigmas)
    # The composed curve is α·ρ at every order of the grid.
    curve = ledger.training_rdp_curve()
    assert curve == pytest.approx([alpha * rho for alpha in TRAINING_RDP_ORDERS], rel=1e-13)
    for delta in (1e-5, 1e-8):
        eps = ledger.training_epsilon(delta)
        # dp_accounting's RdpAccountant with Gaussian events (its own RDP and conversion),
        # on the same grid: the same number.
        same_grid = RdpAccountant(orders=list(TRAINING_RDP_ORDERS))
        default_grid = RdpAccountant()
        for sigma in sigmas:
            event = dp_accounting.GaussianDpEvent(sigma / sensitivity)
            same_grid.compose(event)
            default_grid.compose(event)
        assert eps == pytest.approx(same_grid.get_epsilon(delta), rel=1e-12)
        # Its default grid ends 63, 128, 256, 512, 1024 (ours 63, 80, 128, 256, 512).
        assert eps == pytest.approx(default_grid.get_epsilon(delta), rel=0.05)
        # The grid minimum is above the continuous minimum (ρ-zCDP, CKS) and within the
        # grid's resolution of it.
        exact = _continuous_cks_epsilon(rho, delta)
        assert exact == pytest.approx(zcdp_epsilon_cks(rho, delta), rel=1e-9)
        assert exact - 1e-12 <= eps <= exact * 1.06


def test_large_orders_matter_for_small_epsilon():
    """One Gaussian release with σ = 100: Opacus's default grid (up to α = 63) gives ε = 0.106 at
    δ = 1e-5; the grid with α up to 512 gives 0.0323, near the continuous 0.0308."""
    ledger = PrivacyLedger()
    ledger.record_training_run(run_id="one", noise_multiplier=100.0, sample_rate=1.0, steps=1)
    opacus = RDPAccountant()
    opacus.step(noise_multiplier=100.0, sample_rate=1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # optimal order at the end of Opacus's grid
        opacus_eps = opacus.get_epsilon(1e-5)
    eps = ledger.training_epsilon(1e-5)
    assert opacus_eps == pytest.approx(0.10602, abs=1e-4)
    assert eps == pytest.approx(0.032289, abs=1e-5)
    assert _continuous_cks_epsilon(1 / (2 * 100.0**2), 1e-5) == pytest.approx(0.030821, abs=1e-5)
    assert ledger.report(1e-5)["training"]["rdp_order"] == 256.0


def test_dp_sgd_run_and_its_rdp_curve_give_the_same_epsilon():
    """A DP-SGD run recorded as (σ, q, steps) and the same run recorded as the RDP curve
    compute_rdp(q, σ, steps, α) are the same entry for the RDP accountant."""
    from opacus.accountants.analysis.rdp import compute_rdp

    old_way, as_curve = PrivacyLedger(), PrivacyLedger()
    for run_id, sigma, rate, steps in RUNS:
        old_way.record_training_run(run_id=run_id, noise_multiplier=sigma, sample_rate=rate, steps=steps)
        as_curve.record_training_mechanism(
            run_id,
            rdp=lambda alpha, s=sigma, q=rate, n=steps: compute_rdp(q=q, noise_multiplier=s, steps=n, orders=alpha),
            description=f"DP-SGD sigma={sigma} q={rate} steps={steps}",
        )
    assert as_curve.training_history() == [] and len(as_curve.training_mechanisms) == 3
    assert as_curve.training_rdp_curve() == pytest.approx(old_way.training_rdp_curve(), rel=1e-12)
    for delta in (1e-5, 1e-6):
        eps = old_way.training_epsilon(delta, accountant="rdp")
        assert as_curve.training_epsilon(delta) == pytest.approx(eps, rel=1e-12)
        # and both agree with Opacus's own RDPAccountant (its optimum is inside its grid here)
        direct = RDPAccountant()
        direct.history = [(s, q, n) for _, s, q, n in RUNS]
        assert eps == pytest.approx(direct.get_epsilon(delta), rel=1e-9)
    # Mixed: one run each way composes like both the old way.
    mixed = PrivacyLedger()
    mixed.record_training_run(run_id="a", noise_multiplier=1.1, sample_rate=0.02, steps=100)
    mixed.record_training_mechanism(
        "b", rdp=lambda alpha: compute_rdp(q=0.02, noise_multiplier=1.1, steps=100, orders=alpha), description="DP-SGD"
    )
    both = PrivacyLedger()
    both.record_training_run(run_id="ab", noise_multiplier=1.1, sample_rate=0.02, steps=200)
    assert mixed.training_epsilon(1e-5) == pytest.approx(both.training_epsilon(1e-5), rel=1e-12)


def test_prv_only_when_every_training_entry_is_dp_sgd():
    ledger = PrivacyLedger(training_accountant="prv", training_delta=1e-5)
    _record_runs(ledger, RUNS[:2])
    assert ledger.training_accountant_in_use() == (
        "prv", "training_accountant='prv' and every training entry is a DP-SGD run"
    )
    prv = ledger.training_epsilon(1e-5)
    assert prv == ledger.training_epsilon(1e-5, accountant="prv") < ledger.training_epsilon(1e-5, accountant="rdp")
    assert ledger.report(1e-5)["training"]["accountant"] == "prv"
    assert ledger.report(1e-5)["training"]["rdp_order"] is None
    ledger.record_training_mechanism("amp-0", rdp=_gaussian_curve(20.0), description="AMP, lambda=3.7")
    with pytest.raises(ValueError, match="PRV accountant composes only DP-SGD runs.*'AMP, lambda=3.7'"):
        ledger.training_epsilon(1e-5, accountant="prv")
    with pytest.raises(ValueError, match="PRV accountant composes only DP-SGD runs"):
        ledger.training_accountant_in_use("prv")
    # The default falls back to RDP, and the report says so.
    rdp = ledger.training_epsilon(1e-5, accountant="rdp")
    assert ledger.training_epsilon(1e-5) == rdp
    training = ledger.report(1e-5)["training"]
    assert training["accountant"] == "rdp" and training["epsilon"] == rdp
    assert "falls back to RDP" in training["accountant_reason"]
    assert "'AMP, lambda=3.7'" in training["accountant_reason"]
    assert training["num_runs"] == 3 and training["num_dp_sgd_runs"] == 2 and training["num_mechanisms"] == 1
    assert ledger.training_accountant == "prv"  # the setting is kept


def test_training_budget_filter_on_rdp_curves_refuses_before_recording():
    sigma, delta = 8.0, 1e-6
    three = PrivacyLedger()
    for i in range(3):
        three.record_training_mechanism(f"m{i}", rdp=_gaussian_curve(sigma), description="Gaussian")
    budget = three.training_epsilon(delta)
    assert budget == pytest.approx(
        min(
            3 * a / (2 * sigma**2) + math.log1p(-1 / a) - (math.log(delta) + math.log(a)) / (a - 1)
            for a in TRAINING_RDP_ORDERS
        ),
        rel=1e-12,
    )
    ledger = PrivacyLedger(training_epsilon_budget=budget, training_delta=delta)
    for i in range(3):  # exactly at the budget: accepted
        ledger.check_training_mechanism(rdp=_gaussian_curve(sigma))
        _train_curve(ledger, f"m{i}", _gaussian_curve(sigma), "Gaussian")
    before = ledger.state_dict()
    with pytest.raises(PrivacyBudgetExceeded, match=r"mechanism 'Gaussian'.*\(rdp, delta=1e-06\).*Spent so far"):
        _train_curve(ledger, "m3", _gaussian_curve(sigma), "Gaussian")
    with pytest.raises(PrivacyBudgetExceeded):
        ledger.check_training_mechanism(rdp=_gaussian_curve(100.0 * sigma))
    with pytest.raises(PrivacyBudgetExceeded):  # a DP-SGD run goes through the same filter
        _train(ledger, [("sgd", 50.0, 0.01, 10)])
    assert ledger.state_dict() == before and ledger.num_reservations() == 0
    assert ledger.training_epsilon(delta) == budget
    # With a "prv" ledger, a mechanism makes the filter compose with RDP.
    prv = PrivacyLedger(training_accountant="prv", training_epsilon_budget=1.5, training_delta=1e-5)
    _train(prv, [("sgd", 1.1, 0.02, 100)])
    with pytest.raises(PrivacyBudgetExceeded, match=r"\(rdp, delta=1e-05\)"):
        _train_curve(prv, "m", _gaussian_curve(1.2), "Gaussian")
    assert list(prv.training_runs) == ["sgd"] and prv.training_mechanisms == {}


def test_training_mechanism_records_are_checked_and_never_share_an_id():
    ledger = PrivacyLedger()
    calls = []

    def curve(alpha):
        calls.append(alpha)
        return alpha / 50.0

    assert ledger.record_training_mechanism("amp-0000", rdp=curve, description="AMP")
    assert calls == list(TRAINING_RDP_ORDERS)  # evaluated once per order, at record time
    eps = ledger.training_epsilon(1e-5)
    with pytest.raises(ValueError, match="'amp-0000' is already in the ledger"):  # same curve: still a second run
        ledger.record_training_mechanism("amp-0000", rdp=curve, description="AMP")
    assert ledger.training_epsilon(1e-5) == eps and len(ledger.training_mechanisms) == 1
    assert ledger.training_mechanisms["amp-0000"] == TrainingMechanism(
        "AMP", tuple(a / 50.0 for a in TRAINING_RDP_ORDERS)
    )
    ledger.record_training_run(run_id=3, noise_multiplier=1.0, sample_rate=0.1, steps=5)
    with pytest.raises(ValueError, match="already in the ledger"):
        ledger.record_training_mechanism(3, rdp=curve, description="AMP")
    with pytest.raises(ValueError, match="already in the ledger"):
        ledger.record_training_run(run_id="amp-0000", noise_multiplier=1.0, sample_rate=0.1, steps=5)
    assert ledger.training_run_ids() == ["amp-0000", 3]
    bad_curves = [
        (lambda a: -1e-3, "rdp at order 1.1 must be >= 0"),
        (lambda a: math.nan if a > 100 else 0.1, "rdp at order 128 must be >= 0"),
        (lambda a: "x", "rdp at order 1.1 must be a number"),
        (lambda a: None, "must be a number"),
        (0.5, "rdp must be a callable"),
    ]
    for rdp, message in bad_curves:
        with pytest.raises(ValueError, match=message):
            ledger.record_training_mechanism("bad", rdp=rdp, description="bad")
    for bad in ("", "  ", None, 3):
        with pytest.raises(ValueError, match="description must be a non-empty string"):
            ledger.record_training_mechanism("bad", rdp=curve, description=bad)
    for bad in (None, 1.5, True, ("a",)):
        with pytest.raises(ValueError, match="run_id must be a str or an int"):
            ledger.record_training_mechanism(bad, rdp=curve, description="AMP")
    assert ledger.training_run_ids() == ["amp-0000", 3]
    # An infinite curve (a mechanism without noise) makes ε infinite; finite at some orders only is fine.
    partial = PrivacyLedger()
    partial.record_training_mechanism(
        "p", rdp=lambda a: a / 50.0 if a <= 20 else math.inf, description="bounded orders"
    )
    assert partial.training_epsilon(1e-5) == pytest.approx(
        min(
            a / 50.0 + math.log1p(-1 / a) - (math.log(1e-5) + math.log(a)) / (a - 1)
            for a in TRAINING_RDP_ORDERS
            if a <= 20
        ),
        rel=1e-12,
    )
    partial.record_training_mechanism("q", rdp=lambda a: math.inf, description="no noise")
    assert partial.training_epsilon(1e-5) == math.inf
    assert partial.report(1e-5)["training"]["rdp_order"] is None


# ------------------------------------------------------------ several releases, pure DP


@pytest.mark.parametrize("epsilon, mu", [(0.1, 0.12531), (0.5, 0.62389), (1.0, 1.23204), (2.0, 2.35796)])
def test_pure_dp_to_gdp_mu_spec_values(epsilon, mu):
    assert pure_dp_to_gdp_mu(epsilon) == pytest.approx(mu, abs=5e-6)


@pytest.mark.parametrize("epsilon", [0.01, 0.1, 0.5, 1.0, 2.0, 5.0, 20.0])
def test_pure_dp_to_gdp_mu_is_the_smallest_dominating_gaussian(epsilon):
    """Brute force on the trade-off functions: G_μ ≤ f_ε on a fine grid of α, with equality at
    α* = 1/(1 + e^ε), and a 0.1 % smaller μ is no longer below f_ε."""
    mu = pure_dp_to_gdp_mu(epsilon)
    star = 1.0 / (1.0 + math.exp(epsilon))
    alpha = np.sort(np.concatenate([np.logspace(-300, -3, 4000), np.linspace(1e-3, 1 - 1e-3, 200_001), [star]]))
    f_eps = np.maximum.reduce([np.zeros_like(alpha), 1 - math.exp(epsilon) * alpha, math.exp(-epsilon) * (1 - alpha)])

    def gaussian_tradeoff(m):
        return ndtr(-ndtri(alpha) - m)  # Φ(Φ⁻¹(1 − α) − μ)

    assert np.all(gaussian_tradeoff(mu) <= f_eps * (1 + 1e-9) + 1e-300)
    assert ndtr(-ndtri(star) - mu) == pytest.approx(star, rel=1e-9)
    assert np.any(gaussian_tradeoff(0.999 * mu) > f_eps * (1 + 1e-6))
    assert pure_dp_to_gdp_mu(0.0) == 0.0 and pure_dp_to_gdp_mu(math.inf) == math.inf
    with pytest.raises(ValueError, match="epsilon"):
        pure_dp_to_gdp_mu(-0.1)
    # large ε: no overflow, and μ grows like 2·sqrt(2ε)
    assert math.isfinite(pure_dp_to_gdp_mu(800.0)) and pure_dp_to_gdp_mu(800.0) > pure_dp_to_gdp_mu(700.0)


def test_several_releases_per_iteration_and_a_pure_selection():
    ledger = PrivacyLedger(validation_mu_budget=1.0)
    with ledger.charge({"grad": Gaussian(0.3), "norm": Gaussian(0.4)}, run_id="run-a", step=3) as meter:
        assert meter.key("grad") == "step-0003/grad" and meter.key("norm") == "step-0003/norm"
        meter.record("norm", Gaussian(0.4))
        meter.record("grad", Gaussian(0.25))  # below its bound: the rest is given back
        with pytest.raises(RuntimeError, match="already recorded"):
            meter.record("norm", Gaussian(0.4))
        with pytest.raises(ValueError, match="not in this step's bound"):
            meter.record("clip", Gaussian(0.1))
    with pytest.raises(RuntimeError, match="charge has ended"):
        meter.record("grad", Gaussian(0.1))
    with ledger.charge({"select": PureDP(0.5)}, run_id="run-a") as meter:
        with pytest.raises(ValueError, match="exceeds the step's bound"):
            meter.record("select", PureDP(0.6))
        meter.record("select", PureDP(0.5))
    mu_select = pure_dp_to_gdp_mu(0.5)
    assert [r.key for r in ledger.validation_records()] == ["step-0003/norm", "step-0003/grad", "select"]
    assert ledger.validation_steps[("run-a", "select")] == mu_select
    assert ledger.validation_pure_epsilons == {("run-a", "select"): 0.5}
    assert ledger.validation_mu() == pytest.approx(math.sqrt(0.16 + 0.0625 + mu_select**2), rel=1e-14)
    assert ledger.num_reservations() == 0
    with pytest.raises(ValueError, match="epsilon must be positive"):
        ledger.record_validation_pure(0.0, run_id="run-a", key="select-2")
    # The GDP filter charges the converted μ: what is left admits ε = 0.4 but not ε = 0.5.
    remaining = ledger.remaining_validation_mu()
    with pytest.raises(PrivacyBudgetExceeded):
        with ledger.charge({"select": PureDP(0.5)}, run_id="run-b"):
            raise AssertionError("not reached")
    with ledger.charge({"select": PureDP(0.4)}, run_id="run-b") as meter:
        meter.record("select", PureDP(0.4))
    assert pure_dp_to_gdp_mu(0.4) <= remaining < pure_dp_to_gdp_mu(0.5)
    report = ledger.report(DELTA)["validation"]
    assert report["num_steps"] == 4 and report["num_runs"] == 2
    assert report["pure_releases"] == [
        {"run_id": "run-a", "key": "select", "epsilon": 0.5, "mu": mu_select},
        {"run_id": "run-b", "key": "select", "epsilon": 0.4, "mu": pure_dp_to_gdp_mu(0.4)},
    ]
    # a run id chosen by the caller is refused when taken (new_run), before anything
    with pytest.raises(ValueError, match="'run-b' is already in the ledger"):
        with ledger.charge({"select": PureDP(0.01)}, run_id="run-b", new_run=True):
            raise AssertionError("not reached")


# ------------------------------------------------------------------------ state v3 / v2


def _v3_ledger():
    ledger = PrivacyLedger(validation_mu_budget=3.0, training_delta=1e-6, training_accountant="prv")
    ledger.record_validation_step(mu=0.3, run_id="run-a", key="step-0000/grad")
    ledger.record_validation_pure(1.0, run_id="run-a", key="select")
    ledger.record_training_run(run_id="eval-0000", noise_multiplier=1.1, sample_rate=0.02, steps=100)
    ledger.record_training_mechanism("amp-0001", rdp=_gaussian_curve(6.0), description="AMP, lambda=3.7")
    ledger.record_training_mechanism(7, rdp=lambda a: a / 80.0 if a < 30 else math.inf, description="bounded")
    return ledger


def test_state_v3_json_round_trip_with_curves_and_pure_releases():
    ledger = _v3_ledger()
    state = ledger.state_dict()
    assert state["version"] == 5 and state["rdp_orders"] == list(TRAINING_RDP_ORDERS)
    select = {k: v for k, v in state["validation_steps"][1].items() if k != "release_id"}
    assert select == {"run_id": "run-a", "key": "select", "mu": pure_dp_to_gdp_mu(1.0), "epsilon": 1.0}
    assert [e["run_id"] for e in state["training_runs"]] == ["eval-0000", "amp-0001", 7]
    assert state["training_runs"][1]["description"] == "AMP, lambda=3.7"
    saved = json.dumps(state)
    resumed = PrivacyLedger.from_state_dict(json.loads(saved))
    assert resumed.state_dict() == state
    assert resumed.training_run_ids() == ["eval-0000", "amp-0001", 7]
    assert resumed.training_mechanisms == ledger.training_mechanisms
    assert resumed.validation_pure_epsilons == ledger.validation_pure_epsilons
    assert resumed.training_epsilon(1e-6) == ledger.training_epsilon(1e-6)
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
    assert ledger.validation_steps == {("run-a", "step-0000"): 0.6, ("run-a", "step-0001"): math.inf}
    assert ledger.training_runs == {"eval-0": (1.1, 0.02, 100), 4: (0.9, 0.05, 40)}
    fresh = PrivacyLedger()
    _record_runs(fresh, [("eval-0", 1.1, 0.02, 100), (4, 0.9, 0.05, 40)])
    assert ledger.training_epsilon(1e-6) == fresh.training_epsilon(1e-6)
    assert ledger.state_dict()["version"] == 5  # written back as version 5
    assert PrivacyLedger.from_state_dict(ledger.state_dict()).state_dict() == ledger.state_dict()
    # its records got ids that depend only on (side, run id, key): loading it twice is one copy
    assert [r.release_id for r in ledger.validation_records()][0] == 'legacy:validation:"run-a":step-0000'
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


def _linear_curve(rho: float, shift: float = 0.0) -> Callable[[float], float]:
    return lambda order: shift + rho * order


def test_training_filter_works_at_one_order_fixed_by_the_first_entry():
    from botorch_dp.privacy.ledger import TRAINING_RDP_ORDERS, filter_order

    budget, delta = 2.0, 1e-6
    # Identical entries are accepted exactly as long as their grid epsilon fits.
    ledger = PrivacyLedger(training_epsilon_budget=budget, training_delta=delta)
    curve = _linear_curve(0.01)
    count = 0
    while True:
        try:
            _train_curve(ledger, f"run-{count}", curve, "gaussian")
        except PrivacyBudgetExceeded:
            break
        count += 1
    assert ledger.training_epsilon(delta) <= budget * (1 + 1e-9)
    brute = PrivacyLedger()
    for i in range(count + 1):
        brute.record_training_mechanism(f"run-{i}", rdp=curve, description="gaussian")
    assert brute.training_epsilon(delta) > budget  # one more would not have fitted
    # The order is fixed by the first entry: after a Gaussian-like first run, a run whose
    # RDP is tiny at large orders but huge at that order is refused, although its grid
    # epsilon composed with the first run (at a large order) would fit.
    first = _linear_curve(0.002)
    order = filter_order(budget, delta, np.array([first(a) for a in TRAINING_RDP_ORDERS]))
    spiky = lambda a: 50.0 if a == order else 1e-9  # noqa: E731
    ledger = PrivacyLedger(training_epsilon_budget=budget, training_delta=delta)
    _train_curve(ledger, "first", first, "gaussian")
    with pytest.raises(PrivacyBudgetExceeded, match=f"alpha={order:g}"):
        _train_curve(ledger, "spiky", spiky, "adversarial")
    both = PrivacyLedger()
    both.record_training_mechanism("first", rdp=first, description="gaussian")
    both.record_training_mechanism("spiky", rdp=spiky, description="adversarial")
    assert both.training_epsilon(delta) < budget  # "some order has room" would have accepted
    assert list(ledger.training_mechanisms) == ["first"]
