r"""The training side's generic RDP entries (PrivacyLedger.record_training_mechanism and the
training charge): the order grid, Gaussian curves composing to the closed form and to
dp_accounting, large orders for small ε, a DP-SGD run equal to its RDP curve, the PRV
accountant only for DP-SGD runs, the budget filter refusing before recording and working at
the one order fixed by the first entry, and the checks on each record."""

import math
import warnings
from collections.abc import Callable

import dp_accounting
import numpy as np
import pytest
from dp_accounting.rdp import RdpAccountant
from opacus.accountants import RDPAccountant

from botorch_dp.privacy.analysis.rdp import rdp_to_epsilon
from botorch_dp.privacy.analysis.zcdp import zcdp_epsilon_cks
from botorch_dp.privacy.ledger import (
    TRAINING_RDP_ORDERS,
    DPSGDRun,
    PrivacyBudgetExceeded,
    PrivacyLedger,
    TrainingMechanism,
)

from .ledger_helpers import RUNS, gaussian_curve, record_runs, train, train_curve


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
    "sigmas, sensitivity", [([2.0, 3.0, 5.0], 1.0), ([30.0], 1.0), ([100.0], 1.0), ([0.5, 0.7], 1.0), ([4.0, 4.0], 0.5)]
)
def test_gaussian_rdp_entries_compose_to_the_closed_form(sigmas, sensitivity):
    ledger = PrivacyLedger()
    for i, sigma in enumerate(sigmas):
        assert ledger.external.record(
            TrainingMechanism.from_rdp(f"Gaussian sigma={sigma}", gaussian_curve(sigma, sensitivity)),
            run_id=f"gauss-{i}",
        )
    rho = sum(sensitivity**2 / (2.0 * sigma**2) for sigma in sigmas)
    # The composed curve is α·ρ at every order of the grid.
    curve = ledger.training.rdp_curve()
    assert curve == pytest.approx([alpha * rho for alpha in TRAINING_RDP_ORDERS], rel=1e-13)
    for delta in (1e-5, 1e-8):
        eps = ledger.training.epsilon(delta)
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
    ledger.external.record(DPSGDRun(noise_multiplier=100.0, sample_rate=1.0, steps=1), run_id="one")
    opacus = RDPAccountant()
    opacus.step(noise_multiplier=100.0, sample_rate=1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # optimal order at the end of Opacus's grid
        opacus_eps = opacus.get_epsilon(1e-5)
    eps = ledger.training.epsilon(1e-5)
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
        old_way.external.record(DPSGDRun(noise_multiplier=sigma, sample_rate=rate, steps=steps), run_id=run_id)
        as_curve.external.record(
            TrainingMechanism.from_rdp(
                f"DP-SGD sigma={sigma} q={rate} steps={steps}",
                lambda alpha, s=sigma, q=rate, n=steps: compute_rdp(q=q, noise_multiplier=s, steps=n, orders=alpha),
            ),
            run_id=run_id,
        )
    assert as_curve.training.history() == [] and len(as_curve.training.mechanisms()) == 3
    assert as_curve.training.rdp_curve() == pytest.approx(old_way.training.rdp_curve(), rel=1e-12)
    for delta in (1e-5, 1e-6):
        eps = old_way.training.epsilon(delta, accountant="rdp")
        assert as_curve.training.epsilon(delta) == pytest.approx(eps, rel=1e-12)
        # and both agree with Opacus's own RDPAccountant (its optimum is inside its grid here)
        direct = RDPAccountant()
        direct.history = [(s, q, n) for _, s, q, n in RUNS]
        assert eps == pytest.approx(direct.get_epsilon(delta), rel=1e-9)
    # Mixed: one run each way composes like both the old way.
    mixed = PrivacyLedger()
    mixed.external.record(DPSGDRun(noise_multiplier=1.1, sample_rate=0.02, steps=100), run_id="a")
    mixed.external.record(
        TrainingMechanism.from_rdp(
            "DP-SGD", lambda alpha: compute_rdp(q=0.02, noise_multiplier=1.1, steps=100, orders=alpha)
        ),
        run_id="b",
    )
    both = PrivacyLedger()
    both.external.record(DPSGDRun(noise_multiplier=1.1, sample_rate=0.02, steps=200), run_id="ab")
    assert mixed.training.epsilon(1e-5) == pytest.approx(both.training.epsilon(1e-5), rel=1e-12)


def test_prv_only_when_every_training_entry_is_dp_sgd():
    ledger = PrivacyLedger(training_accountant="prv", training_delta=1e-5)
    record_runs(ledger, RUNS[:2])
    assert ledger.training.accountant_in_use() == (
        "prv",
        "training_accountant='prv' and every training entry is a DP-SGD run",
    )
    prv = ledger.training.epsilon(1e-5)
    assert prv == ledger.training.epsilon(1e-5, accountant="prv") < ledger.training.epsilon(1e-5, accountant="rdp")
    assert ledger.report(1e-5)["training"]["accountant"] == "prv"
    assert ledger.report(1e-5)["training"]["rdp_order"] is None
    ledger.external.record(TrainingMechanism.from_rdp("AMP, lambda=3.7", gaussian_curve(20.0)), run_id="amp-0")
    with pytest.raises(ValueError, match="PRV accountant composes only DP-SGD runs.*'AMP, lambda=3.7'"):
        ledger.training.epsilon(1e-5, accountant="prv")
    with pytest.raises(ValueError, match="PRV accountant composes only DP-SGD runs"):
        ledger.training.accountant_in_use("prv")
    # The default falls back to RDP, and the report says so.
    rdp = ledger.training.epsilon(1e-5, accountant="rdp")
    assert ledger.training.epsilon(1e-5) == rdp
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
        three.external.record(TrainingMechanism.from_rdp("Gaussian", gaussian_curve(sigma)), run_id=f"m{i}")
    budget = three.training.epsilon(delta)
    assert budget == pytest.approx(
        min(
            3 * a / (2 * sigma**2) + math.log1p(-1 / a) - (math.log(delta) + math.log(a)) / (a - 1)
            for a in TRAINING_RDP_ORDERS
        ),
        rel=1e-12,
    )
    ledger = PrivacyLedger(training_epsilon_budget=budget, training_delta=delta)
    for i in range(3):  # exactly at the budget: accepted
        ledger.external.check(TrainingMechanism.from_rdp("checked", gaussian_curve(sigma)))
        train_curve(ledger, f"m{i}", gaussian_curve(sigma), "Gaussian")
    before = ledger.state_dict()
    with pytest.raises(PrivacyBudgetExceeded, match=r"mechanism 'Gaussian'.*\(rdp, delta=1e-06\).*Spent so far"):
        train_curve(ledger, "m3", gaussian_curve(sigma), "Gaussian")
    with pytest.raises(PrivacyBudgetExceeded):
        ledger.external.check(TrainingMechanism.from_rdp("checked", gaussian_curve(100.0 * sigma)))
    with pytest.raises(PrivacyBudgetExceeded):  # a DP-SGD run goes through the same filter
        train(ledger, [("sgd", 50.0, 0.01, 10)])
    assert ledger.state_dict() == before and len(ledger.reservation_holders()) == 0
    assert ledger.training.epsilon(delta) == budget
    # With a "prv" ledger, a mechanism makes the filter compose with RDP.
    prv = PrivacyLedger(training_accountant="prv", training_epsilon_budget=1.5, training_delta=1e-5)
    train(prv, [("sgd", 1.1, 0.02, 100)])
    with pytest.raises(PrivacyBudgetExceeded, match=r"\(rdp, delta=1e-05\)"):
        train_curve(prv, "m", gaussian_curve(1.2), "Gaussian")
    assert list(prv.training.runs()) == ["sgd"] and prv.training.mechanisms() == {}


def test_training_mechanism_records_are_checked_and_never_share_an_id():
    ledger = PrivacyLedger()
    calls = []

    def curve(alpha):
        calls.append(alpha)
        return alpha / 50.0

    assert ledger.external.record(TrainingMechanism.from_rdp("AMP", curve), run_id="amp-0000")
    assert calls == list(TRAINING_RDP_ORDERS)  # evaluated once per order, at record time
    eps = ledger.training.epsilon(1e-5)
    with pytest.raises(ValueError, match="'amp-0000' is already in the ledger"):  # same curve: still a second run
        ledger.external.record(TrainingMechanism.from_rdp("AMP", curve), run_id="amp-0000")
    assert ledger.training.epsilon(1e-5) == eps and len(ledger.training.mechanisms()) == 1
    assert ledger.training.mechanisms()["amp-0000"] == TrainingMechanism(
        "AMP", tuple(a / 50.0 for a in TRAINING_RDP_ORDERS)
    )
    ledger.external.record(DPSGDRun(noise_multiplier=1.0, sample_rate=0.1, steps=5), run_id=3)
    with pytest.raises(ValueError, match="already in the ledger"):
        ledger.external.record(TrainingMechanism.from_rdp("AMP", curve), run_id=3)
    with pytest.raises(ValueError, match="already in the ledger"):
        ledger.external.record(DPSGDRun(noise_multiplier=1.0, sample_rate=0.1, steps=5), run_id="amp-0000")
    assert ledger.training.run_ids() == ["amp-0000", 3]
    bad_curves = [
        (lambda a: -1e-3, "rdp at order 1.1 must be >= 0"),
        (lambda a: math.nan if a > 100 else 0.1, "rdp at order 128 must be >= 0"),
        (lambda a: "x", "rdp at order 1.1 must be a number"),
        (lambda a: None, "must be a number"),
        (0.5, "rdp must be a callable"),
    ]
    for rdp, message in bad_curves:
        with pytest.raises(ValueError, match=message):
            ledger.external.record(TrainingMechanism.from_rdp("bad", rdp), run_id="bad")
    for bad in ("", "  ", None, 3):
        with pytest.raises(ValueError, match="description must be a non-empty string"):
            ledger.external.record(TrainingMechanism.from_rdp(bad, curve), run_id="bad")
    for bad in (None, 1.5, True, ("a",)):
        with pytest.raises(ValueError, match="run_id must be a str or an int"):
            ledger.external.record(TrainingMechanism.from_rdp("AMP", curve), run_id=bad)
    assert ledger.training.run_ids() == ["amp-0000", 3]
    # An infinite curve (a mechanism without noise) makes ε infinite; finite at some orders only is fine.
    partial = PrivacyLedger()
    partial.external.record(
        TrainingMechanism.from_rdp("bounded orders", lambda a: a / 50.0 if a <= 20 else math.inf), run_id="p"
    )
    assert partial.training.epsilon(1e-5) == pytest.approx(
        min(
            a / 50.0 + math.log1p(-1 / a) - (math.log(1e-5) + math.log(a)) / (a - 1)
            for a in TRAINING_RDP_ORDERS
            if a <= 20
        ),
        rel=1e-12,
    )
    partial.external.record(TrainingMechanism.from_rdp("no noise", lambda a: math.inf), run_id="q")
    assert partial.training.epsilon(1e-5) == math.inf
    assert partial.report(1e-5)["training"]["rdp_order"] is None


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
            train_curve(ledger, f"run-{count}", curve, "gaussian")
        except PrivacyBudgetExceeded:
            break
        count += 1
    assert ledger.training.epsilon(delta) <= budget * (1 + 1e-9)
    brute = PrivacyLedger()
    for i in range(count + 1):
        brute.external.record(TrainingMechanism.from_rdp("gaussian", curve), run_id=f"run-{i}")
    assert brute.training.epsilon(delta) > budget  # one more would not have fitted
    # The order is fixed by the first entry: after a Gaussian-like first run, a run whose
    # RDP is tiny at large orders but huge at that order is refused, although its grid
    # epsilon composed with the first run (at a large order) would fit.
    first = _linear_curve(0.002)
    order = filter_order(budget, delta, np.array([first(a) for a in TRAINING_RDP_ORDERS]))
    spiky = lambda a: 50.0 if a == order else 1e-9  # noqa: E731
    ledger = PrivacyLedger(training_epsilon_budget=budget, training_delta=delta)
    train_curve(ledger, "first", first, "gaussian")
    with pytest.raises(PrivacyBudgetExceeded, match=f"alpha={order:g}"):
        train_curve(ledger, "spiky", spiky, "adversarial")
    both = PrivacyLedger()
    both.external.record(TrainingMechanism.from_rdp("gaussian", first), run_id="first")
    both.external.record(TrainingMechanism.from_rdp("adversarial", spiky), run_id="spiky")
    assert both.training.epsilon(delta) < budget  # "some order has room" would have accepted
    assert list(ledger.training.mechanisms()) == ["first"]
