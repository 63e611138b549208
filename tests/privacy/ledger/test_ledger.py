r"""Tests for botorch_dp.privacy.ledger.ledger (``PrivacyLedger``): a ledger composed of parts with a small
public surface (no mixins), the validation side's composition and budget filter, the training side's DP-SGD runs
against Opacus, the report, several runs on one ledger, and pure-DP releases. The state is tested in
test_state.py, generic RDP training entries in ../test_ledger_training_rdp.py."""

import json
import math
import warnings

import numpy as np
import pytest
from opacus.accountants import PRVAccountant, RDPAccountant
from scipy.special import ndtr, ndtri

from botorch_dp.privacy.accountants import accountant_epsilon
from botorch_dp.privacy.analysis.gdp import gdp_epsilon, pure_dp_to_gdp_mu
from botorch_dp.privacy.ledger import DPSGDRun, Gaussian, PrivacyBudgetExceeded, PrivacyLedger, PureDP
from botorch_dp.privacy.ledger.external import ExternalReleases
from botorch_dp.privacy.ledger.views import TrainingReads, ValidationReads
from botorch_dp.privacy.seeding import PrivacyWarning

from ..ledger_helpers import DELTA, RUNS, record_runs, spend, step_key, train

#: The public surface: the charge family, the reads and the state on the ledger, the settings, and its parts.
SURFACE = {
    PrivacyLedger: {
        *("charge", "charge_training", "cancel_reservations", "settle_run", "reservation_holders"),
        *("records", "report", "state_dict", "load_state_dict", "from_state_dict"),
        *("validation_mu_budget", "validation_delta", "training_epsilon_budget", "training_delta"),
        "training_accountant",
        *("prv_eps_error", "dataset", "storage_url", "STATE_VERSION", "BUDGET_RTOL", "RDP_ORDERS"),
    },
    ValidationReads: {
        *("records", "run_ids", "steps", "mechanisms", "approximate", "release_curves", "mu", "rdp_curve"),
        "epsilon",
        *("remaining_mu", "check_admits"),
    },
    TrainingReads: {
        *("records", "run_ids", "runs", "mechanisms", "approximate", "history", "rdp_curve"),
        *("accountant_in_use", "epsilon"),
    },
    ExternalReleases: {"check", "record"},
}


def test_the_ledger_is_composed_of_parts_with_a_small_surface_and_no_mixins():
    ledger = PrivacyLedger(validation_mu_budget=1.0)
    for cls, names in SURFACE.items():
        assert cls.__mro__ == (cls, object), cls.__mro__  # no mixins, no shared base
        assert {n for n in dir(cls) if not n.startswith("_")} == names, cls
    parts = {name: type(value) for name, value in vars(ledger).items() if not name.startswith("_")}
    assert parts == {"validation": ValidationReads, "training": TrainingReads, "external": ExternalReleases}
    # the parts read and write the ledger's one state: a record through one part is read by the others
    ledger.external.record(Gaussian(0.6), run_id="r", key="step-0000")
    assert ledger.validation.mu() == 0.6 and ledger.records() == ledger.validation.records()
    assert ledger.validation.remaining_mu() == pytest.approx(0.8, rel=1e-12)
    ledger.validation_mu_budget = 0.7  # an object's own filter, lowered: every part sees it
    assert ledger.validation.remaining_mu() == pytest.approx(math.sqrt(0.49 - 0.36), rel=1e-12)
    with pytest.raises(PrivacyBudgetExceeded):
        ledger.external.check(Gaussian(0.4))


def test_validation_records_compose_and_each_release_counts():
    ledger = PrivacyLedger()
    assert ledger.validation.mu() == 0.0
    assert ledger.validation.epsilon(DELTA) == 0.0
    for t in range(25):
        assert ledger.external.record(Gaussian(0.2), run_id="run-a", key=step_key(t))
    assert ledger.validation.mu() == pytest.approx(1.0, rel=1e-14)
    assert ledger.validation.epsilon(DELTA) == pytest.approx(4.3772, abs=1e-3)
    assert list(ledger.validation.steps())[:2] == [("run-a", "step-0000"), ("run-a", "step-0001")]
    # Every record is a release made: the same (run_id, key) recorded again (a step replayed
    # with fresh noise) counts again, with its own release id; a record is never merged away.
    for t in range(25):
        assert ledger.external.record(Gaussian(0.2), run_id="run-a", key=step_key(t))
    assert len(ledger.validation.records()) == 50 and len(ledger.validation.steps()) == 25
    assert len({r.release_id for r in ledger.validation.records()}) == 50
    assert ledger.validation.steps()[("run-a", "step-0003")] == pytest.approx(0.2 * math.sqrt(2), rel=1e-14)
    assert ledger.validation.mu() == pytest.approx(math.sqrt(2), rel=1e-14)
    ledger.external.record(Gaussian(0.3), run_id="run-a", key=step_key(3))  # another cost: one more release
    assert ledger.validation.mu() == pytest.approx(math.sqrt(2 + 0.09), rel=1e-14)
    for bad in ("", " step", 3, None):
        with pytest.raises(ValueError, match="key must be a non-empty string"):
            ledger.external.record(Gaussian(0.3), run_id="run-a", key=bad)
        with pytest.raises(ValueError, match="run_id must be a non-empty string"):
            ledger.external.record(Gaussian(0.3), run_id=bad, key="step-0000")
    with pytest.raises(ValueError, match="mu must be positive"):
        ledger.external.record(Gaussian(0.0), run_id="run-a", key=step_key(30))
    assert len(ledger.validation.records()) == 51


def test_two_runs_on_one_ledger_compose():
    """The same step index in two runs is two releases: 0.6 ⊕ 0.6 = sqrt(0.72) = 0.8485."""
    ledger = PrivacyLedger()
    mu_step = 0.6 / math.sqrt(4)
    for run_id in ("run-a", "run-b"):
        for t in range(4):
            assert ledger.external.record(Gaussian(mu_step), run_id=run_id, key=step_key(t))
    assert ledger.validation.mu() == pytest.approx(math.sqrt(0.36 + 0.36), rel=1e-12)
    assert ledger.validation.mu() == pytest.approx(0.8485, abs=1e-4)
    assert ledger.validation.mu(run_id="run-a") == pytest.approx(0.6, rel=1e-12)
    assert ledger.validation.mu(run_id="run-c") == 0.0
    assert ledger.validation.run_ids() == ["run-a", "run-b"]
    report = ledger.report(DELTA)["validation"]
    assert report["num_steps"] == 8 and report["num_runs"] == 2
    # Several releases per step (room for "step-0003/grad", "step-0003/norm") are separate entries.
    ledger.external.record(Gaussian(0.3), run_id="run-c", key="step-0003/grad")
    ledger.external.record(Gaussian(0.4), run_id="run-c", key="step-0003/norm")
    assert ledger.validation.mu(run_id="run-c") == pytest.approx(0.5, rel=1e-12)
    assert ledger.validation.mu() == pytest.approx(math.sqrt(0.72 + 0.25), rel=1e-12)


def test_budget_filter_runs_over_all_runs():
    ledger = PrivacyLedger(validation_mu_budget=0.8)
    for t in range(4):
        spend(ledger, 0.3, "run-a", t)  # μ = 0.6
    ledger.external.check(Gaussian(math.sqrt(0.28)))  # 0.6 ⊕ 0.529 = 0.8 fits exactly
    with pytest.raises(PrivacyBudgetExceeded, match="remaining mu budget"):
        ledger.external.check(Gaussian(0.53))
    # A second run of μ = 0.6 (same step keys) would make 0.8485 > 0.8: its 4th step is
    # refused before anything is recorded (or drawn).
    for t in range(3):
        spend(ledger, 0.3, "run-b", t)
    with pytest.raises(PrivacyBudgetExceeded, match="step 3 of run 'run-b'.*Nothing was released"):
        with ledger.charge({"grad": Gaussian(0.3)}, run_id="run-b", step=3):
            raise AssertionError("the block must not run")
    assert len(ledger.validation.records()) == 7 and len(ledger.reservation_holders()) == 0
    assert ledger.validation.mu() == pytest.approx(math.sqrt(7 * 0.09), rel=1e-12)
    # A release made elsewhere is a fact: recorded even past the budget, which then has no room.
    ledger.external.record(Gaussian(0.3), run_id="run-b", key=step_key(3))
    assert ledger.validation.mu() > 0.8 and ledger.validation.remaining_mu() == 0.0


@pytest.mark.parametrize(
    "budget, mu_step", [(1.0, 0.2), (1.0, 0.25), (1.0, 0.3), (2.0, 0.7), (0.5, 0.6), (3.0, 1.0 / 3.0), (1.0, 0.1)]
)
def test_validation_budget_filter_closed_form(budget, mu_step):
    # k equal steps fit iff sqrt(k)·μ_t ≤ budget. The cases include exact boundaries
    # ((1, 0.25): 16 steps, (1, 0.2): 25 steps, (3, 1/3): 81 steps) where rounding
    # must not refuse the last allowed step.
    allowed = math.floor((budget / mu_step) ** 2 + 1e-9)
    ledger = PrivacyLedger(validation_mu_budget=budget)
    for k in range(allowed):
        assert ledger.validation.remaining_mu() >= mu_step * (1 - 1e-9)
        spend(ledger, mu_step, "run-a", k)
    spent = ledger.validation.mu()
    assert spent <= budget * (1 + 1e-9)
    remaining = math.sqrt(max(budget**2 - spent**2, 0.0))
    assert ledger.validation.remaining_mu() == pytest.approx(remaining, abs=1e-6)
    with pytest.raises(PrivacyBudgetExceeded, match="remaining mu budget") as info:
        ledger.external.check(Gaussian(mu_step))
    assert f"{ledger.validation.remaining_mu():.6g}" in str(info.value)
    with pytest.raises(PrivacyBudgetExceeded):
        spend(ledger, mu_step, "run-b", 0)
    # Nothing was recorded by the refused step, and its hold is gone.
    assert len(ledger.validation.records()) == allowed and len(ledger.reservation_holders()) == 0
    assert ledger.validation.mu() == spent
    # A step that fits the remainder is still accepted.
    if ledger.validation.remaining_mu() > 1e-6:
        spend(ledger, 0.99 * ledger.validation.remaining_mu(), "run-b", 0)
    assert isinstance(PrivacyBudgetExceeded("x"), RuntimeError)


def test_training_composition_matches_direct_opacus():
    ledger = PrivacyLedger()
    assert ledger.training.epsilon(DELTA) == 0.0
    record_runs(ledger)
    # Every training run has its own id: recording one again is refused, not merged.
    with pytest.raises(ValueError, match="already in the ledger"):
        record_runs(ledger, RUNS[:1])
    with pytest.raises(ValueError, match="already in the ledger"):
        train(ledger, RUNS[:1])
    assert len(ledger.training.runs()) == 3
    for name, cls in (("rdp", RDPAccountant), ("prv", PRVAccountant)):
        direct = cls()
        for _, noise_multiplier, sample_rate, steps in RUNS:
            for _ in range(steps):
                direct.step(noise_multiplier=noise_multiplier, sample_rate=sample_rate)
        assert ledger.training.epsilon(DELTA, accountant=name) == pytest.approx(
            accountant_epsilon(direct, delta=DELTA), rel=1e-9
        )
    rdp = ledger.training.epsilon(DELTA, accountant="rdp")
    assert 0.0 < ledger.training.epsilon(DELTA, accountant="prv") <= rdp
    with pytest.raises(ValueError, match="already in the ledger"):
        ledger.external.record(DPSGDRun(noise_multiplier=2.0, sample_rate=0.02, steps=100), run_id="eval-0")
    with pytest.raises(ValueError, match="sample_rate"):
        ledger.external.record(DPSGDRun(noise_multiplier=1.0, sample_rate=0.0, steps=1), run_id="bad")
    with pytest.raises(ValueError, match="accountant"):
        ledger.training.epsilon(DELTA, accountant="moments")
    ledger.external.record(DPSGDRun(noise_multiplier=0.0, sample_rate=1.0, steps=1), run_id=7)
    assert ledger.training.epsilon(DELTA) == math.inf


def test_training_budget_filter():
    two_runs = PrivacyLedger()
    record_runs(two_runs, RUNS[:2])
    budget = two_runs.training.epsilon(1e-6)
    ledger = PrivacyLedger(training_epsilon_budget=budget, training_delta=1e-6)
    train(ledger, RUNS[:2])
    with pytest.raises(PrivacyBudgetExceeded, match="Training privacy budget exceeded.*Nothing was trained"):
        train(ledger, RUNS[2:])
    assert len(ledger.training.runs()) == 2 and len(ledger.reservation_holders()) == 0
    # two runs admitted together are checked together, before either trains
    fresh = PrivacyLedger(training_epsilon_budget=budget, training_delta=1e-6)
    with pytest.raises(PrivacyBudgetExceeded):
        with fresh.charge_training({r[0]: DPSGDRun(*r[1:]) for r in RUNS}):
            raise AssertionError("the block must not run")
    assert fresh.training.runs() == {}
    with pytest.raises(ValueError, match="training_delta"):
        PrivacyLedger(training_epsilon_budget=1.0)


def test_report_keeps_the_two_datasets_separate():
    ledger = PrivacyLedger(validation_mu_budget=2.0, training_delta=1e-6)
    ledger.external.record(Gaussian(1.0), run_id="run-a", key=step_key(0))
    record_runs(ledger)
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
        "approximate_dp": [],
    }
    assert report["training"]["delta"] == 1e-6
    assert report["training"]["num_runs"] == report["training"]["num_dp_sgd_runs"] == 3
    assert report["training"]["num_mechanisms"] == 0
    assert report["training"]["accountant"] == "rdp"
    assert report["training"]["accountant_reason"] == "training_accountant='rdp'"
    assert report["training"]["rdp_order"] in PrivacyLedger.RDP_ORDERS
    assert report["training"]["epsilon"] == ledger.training.epsilon(1e-6)


def test_identical_training_runs_are_merged_without_changing_epsilon():
    """Many equal runs compose to the same ε as one history entry per run (and fast)."""
    import time

    ledger = PrivacyLedger()
    for i in range(34):
        ledger.external.record(DPSGDRun(noise_multiplier=1.5, sample_rate=1 / 15, steps=150), run_id=i)
    ledger.external.record(DPSGDRun(noise_multiplier=2.0, sample_rate=0.1, steps=10), run_id="other")
    direct = RDPAccountant()
    direct.history = ledger.training.history()  # 35 separate entries
    assert len(direct.history) == 35
    expected = direct.get_epsilon(delta=1e-5)
    assert ledger.training.epsilon(1e-5, accountant="rdp") == pytest.approx(expected, rel=1e-12)
    start = time.perf_counter()
    ledger.training.epsilon(1e-5, accountant="prv")
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
    assert set(ledger.validation.steps()) == {(opt.run_id, f"step-{t:04d}") for opt in runs for t in range(3)}
    assert ledger.validation.run_ids() == [runs[0].run_id, runs[1].run_id]
    for opt in runs:
        assert ledger.validation.mu(run_id=opt.run_id) == pytest.approx(0.6, rel=1e-12)
    assert ledger.validation.mu() == pytest.approx(math.sqrt(0.36 + 0.36), rel=1e-12)
    assert ledger.validation.mu() == pytest.approx(0.8485, abs=1e-4)


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
    assert ledger.validation.mu(run_id=second.run_id) == pytest.approx(math.sqrt(2 * 0.16), rel=1e-12)
    assert ledger.validation.mu() <= 1.0


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
    assert [r.key for r in ledger.validation.records()] == ["step-0003/norm", "step-0003/grad", "select"]
    assert ledger.validation.steps()[("run-a", "select")] == mu_select
    assert ledger.validation.records()[-1].event == PureDP(0.5)
    assert ledger.validation.mu() == pytest.approx(math.sqrt(0.16 + 0.0625 + mu_select**2), rel=1e-14)
    assert len(ledger.reservation_holders()) == 0
    with pytest.raises(ValueError, match="epsilon must be positive"):
        ledger.external.record(PureDP(0.0), run_id="run-a", key="select-2")
    # The GDP filter charges the converted μ: what is left admits ε = 0.4 but not ε = 0.5.
    remaining = ledger.validation.remaining_mu()
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
