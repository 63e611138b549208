r"""Tests for botorch_dp.privacy.analysis.private_selection: the Papernot–Steinke bounds, by
hand and against dp_accounting's RepeatAndSelectDpEvent; the generic bounds over any RDP
curve, and the Gaussian special case reproducing the values of the earlier Gaussian-only
implementation bit for bit. The distributions of the number of trials are tested in
test_private_selection_trials.py."""

from __future__ import annotations

import json
import math
from pathlib import Path

import dp_accounting
import numpy as np
import pytest
from scipy.stats import norm

from botorch_dp.privacy.analysis.gdp import gdp_epsilon
from botorch_dp.privacy.analysis.objective_perturbation import amp_delta, amp_rdp, amp_rdp_epsilon
from botorch_dp.privacy.analysis.private_selection import (
    per_trial_mu_for_epsilon,
    poisson_mean_for_tail,
    private_selection_epsilon,
    private_selection_epsilon_generic,
    private_selection_rdp,
    private_selection_rdp_curve,
    private_selection_rdp_generic,
    tnb_gamma_for_mean,
    tnb_log_pmf,
    tnb_mean,
)
from botorch_dp.privacy.analysis.rdp import DEFAULT_RDP_ORDERS, rdp_curve_delta, rdp_to_epsilon


# ------------------------------------------------------------------------- guarantee
def test_tnb_rdp_matches_hand_computation():
    # geometric K (η = 1), E[K] = 10 -> γ = 0.1; per-trial μ0 = 0.2 -> ρ = 0.02; order λ = 8
    rho, gamma, lam = 0.02, 0.1, 8.0
    # Papernot-Steinke Thm. 2 with ε(λ) = λρ, minimizing over λ̂ ≥ 1 on a fine grid
    lam_hat = np.linspace(1.0, 50.0, 200_001)
    inner = (2.0 * (1 - 1 / lam_hat) * lam_hat * rho + 2.0 * math.log(1 / gamma) / lam_hat).min()
    by_hand = lam * rho + inner + math.log(10.0) / (lam - 1)
    assert by_hand == pytest.approx(1.307329, abs=1e-5)  # 0.16 + 0.818388 + 0.328941
    value = private_selection_rdp(lam, per_trial_mu=0.2, mean_trials=10.0, tnb_eta=1.0)
    assert value == pytest.approx(by_hand, rel=1e-7)


def test_poisson_rdp_matches_hand_computation():
    mu0, m, lam = 0.2, 10.0, 8.0
    eps_hat = math.log(lam / (lam - 1))  # largest ε̂ allowed by Thm. 6: e^ε̂ = 1 + 1/(λ − 1)
    delta_hat = norm.cdf(-eps_hat / mu0 + mu0 / 2) - math.exp(eps_hat) * norm.cdf(-eps_hat / mu0 - mu0 / 2)
    by_hand = lam * mu0**2 / 2 + m * delta_hat + math.log(m) / (lam - 1)
    value = private_selection_rdp(lam, per_trial_mu=mu0, mean_trials=m, distribution="poisson")
    assert value == pytest.approx(by_hand, rel=1e-9)


@pytest.mark.parametrize("distribution", ["truncated_negative_binomial", "poisson"])
def test_epsilon_is_the_optimal_rdp_conversion(distribution):
    kw = dict(per_trial_mu=0.1, mean_trials=50.0, distribution=distribution)
    delta = 1e-5
    eps = private_selection_epsilon(target_delta=delta, **kw)
    orders = 1.0 + np.exp(np.linspace(math.log(1e-2), math.log(1e4), 4001))
    rdp = np.array([private_selection_rdp(o, **kw) for o in orders])
    cks = rdp + np.log1p(-1 / orders) - (math.log(delta) + np.log(orders)) / (orders - 1)
    classic = rdp + math.log(1 / delta) / (orders - 1)
    assert eps == pytest.approx(cks.min(), rel=1e-4)
    assert eps <= classic.min()
    assert eps > 0


@pytest.mark.parametrize("distribution", ["truncated_negative_binomial", "poisson"])
def test_epsilon_monotone_in_per_trial_budget_and_trials(distribution):
    mus = [0.01, 0.03, 0.1, 0.3, 1.0]
    eps = [
        private_selection_epsilon(per_trial_mu=m, mean_trials=100.0, target_delta=1e-5, distribution=distribution)
        for m in mus
    ]
    assert all(a < b for a, b in zip(eps, eps[1:], strict=False))
    eps_k = [
        private_selection_epsilon(per_trial_mu=0.1, mean_trials=k, target_delta=1e-5, distribution=distribution)
        for k in (5.0, 50.0, 500.0)
    ]
    assert all(a < b for a, b in zip(eps_k, eps_k[1:], strict=False))
    # a single Gaussian trial is never cheaper than the whole selection
    assert eps[2] > gdp_epsilon(0.1, 1e-5)


def test_per_trial_mu_for_epsilon_inverts_the_guarantee():
    mu0 = per_trial_mu_for_epsilon(target_epsilon=4.3772, target_delta=1e-5, mean_trials=230.0)
    eps = private_selection_epsilon(per_trial_mu=mu0, mean_trials=230.0, target_delta=1e-5)
    assert eps == pytest.approx(4.3772, rel=1e-6)
    mu_p = per_trial_mu_for_epsilon(target_epsilon=4.3772, target_delta=1e-5, mean_trials=230.0, distribution="poisson")
    assert 0 < mu_p < mu0  # the Poisson bound pays m·δ̂ and is looser at this many trials


@pytest.mark.parametrize("target", [0.5, 1.0, 3.0])
@pytest.mark.parametrize("mean_trials", [4.0, 18.0, 50.0, 200.0])
def test_per_trial_mu_on_a_grid_of_orders_is_within_the_target_on_that_grid(target, mean_trials):
    from botorch_dp.privacy.analysis.rdp import rdp_curve_epsilon
    from botorch_dp.privacy.ledger import TRAINING_RDP_ORDERS

    grid = per_trial_mu_for_epsilon(
        target_epsilon=target, target_delta=1e-5, mean_trials=mean_trials, orders=TRAINING_RDP_ORDERS
    )
    free = per_trial_mu_for_epsilon(target_epsilon=target, target_delta=1e-5, mean_trials=mean_trials)
    # the ledger's conversion, recomputed from the curve's values at its orders: within the target, and tight
    curve = [private_selection_rdp(a, per_trial_mu=grid, mean_trials=mean_trials) for a in TRAINING_RDP_ORDERS]
    on_grid = rdp_curve_epsilon(curve, TRAINING_RDP_ORDERS, 1e-5)[0]
    assert on_grid <= target and on_grid == pytest.approx(target, rel=1e-7)
    # a continuous order can only be tighter, so its calibration allows at least as much per trial
    assert grid <= free
    assert private_selection_epsilon(per_trial_mu=free, mean_trials=mean_trials, target_delta=1e-5) <= target


def test_input_validation():
    for call, match in [
        (lambda: private_selection_rdp(1.0, per_trial_mu=0.1, mean_trials=10.0), "order"),
        (lambda: private_selection_rdp(2.0, per_trial_mu=math.inf, mean_trials=10.0), "per_trial_mu"),
        (lambda: private_selection_rdp(2.0, per_trial_mu=0.1, mean_trials=0.0), "mean_trials"),
        (
            lambda: private_selection_rdp(2.0, per_trial_mu=0.1, mean_trials=10.0, distribution="binomial"),
            "distribution",
        ),
        (lambda: tnb_gamma_for_mean(eta=1.0, mean_trials=1.0), "mean_trials"),
        (lambda: tnb_mean(eta=-1.0, gamma=0.5), "eta"),
        (lambda: tnb_log_pmf(np.array([1]), eta=1.0, gamma=1.0), "gamma"),
        (lambda: private_selection_epsilon(per_trial_mu=0.1, mean_trials=10.0, target_delta=0.0), "target_delta"),
        (lambda: per_trial_mu_for_epsilon(target_epsilon=-1.0, target_delta=1e-5, mean_trials=10.0), "target_epsilon"),
    ]:
        with pytest.raises(ValueError, match=match):
            call()


# ------------------------------------------------------------------------- against dp_accounting
# dp_accounting's RdpAccountant implements the same theorems for RepeatAndSelectDpEvent
# (event, mean, shape): shape = η of the truncated negative binomial (1 geometric, 0
# logarithmic), shape = inf for the Poisson. Our trial, μ₀-GDP Gaussian, is its
# GaussianDpEvent with noise multiplier 1/μ₀ (RDP α/(2σ²) = αμ₀²/2). It works on a
# finite set of orders (for λ and λ̂) and rounds γ conservatively; we minimize over
# continuous orders, so ours can only be lower, by the grid's discretization.
_DENSE_ORDERS = list(1.0 + np.geomspace(1e-3, 1e4, 800))


def _dp_accounting_epsilon(per_trial_mu, mean_trials, shape, delta, orders=None):
    event = dp_accounting.dp_event.RepeatAndSelectDpEvent(
        dp_accounting.GaussianDpEvent(1.0 / per_trial_mu), mean_trials, shape
    )
    accountant = dp_accounting.rdp.RdpAccountant(orders=orders)
    accountant.compose(event)
    return accountant.get_epsilon(delta)


@pytest.mark.parametrize(
    "per_trial_mu,mean_trials,eta",
    [(0.05, 50.0, 1.0), (0.2, 5.0, 1.0), (1.0, 500.0, 1.0), (0.2, 50.0, 0.0), (0.05, 500.0, 0.5), (1.0, 50.0, 3.0)],
)
def test_truncated_negative_binomial_agrees_with_dp_accounting(per_trial_mu, mean_trials, eta):
    delta = 1e-5
    ours = private_selection_epsilon(
        per_trial_mu=per_trial_mu, mean_trials=mean_trials, target_delta=delta, tnb_eta=eta
    )
    dense = _dp_accounting_epsilon(per_trial_mu, mean_trials, eta, delta, _DENSE_ORDERS)
    default = _dp_accounting_epsilon(per_trial_mu, mean_trials, eta, delta)
    # never looser than either order grid, and within 1e-4 (relative) of the dense one
    # (measured: 3e-6 to 5e-5)
    assert ours <= min(dense, default) + 1e-12
    assert dense - ours <= 1e-4 * dense


@pytest.mark.parametrize("per_trial_mu,mean_trials", [(0.05, 5.0), (0.2, 50.0), (1.0, 500.0)])
def test_poisson_agrees_with_dp_accounting_up_to_the_per_trial_delta(per_trial_mu, mean_trials):
    # P&S Thm. 6 needs δ̂, the trial's δ at ε̂ = log(λ/(λ − 1)). We use the Gaussian's
    # exact privacy profile (gdp_delta); dp_accounting bounds δ̂ from the trial's RDP
    # curve (compute_delta), which is larger. So ours is lower (by 16-43% here); with
    # their δ̂ swapped into our curve, the two agree like the TNB case.
    delta = 1e-5
    kw = dict(per_trial_mu=per_trial_mu, mean_trials=mean_trials, distribution="poisson")
    ours = private_selection_epsilon(target_delta=delta, **kw)
    theirs = _dp_accounting_epsilon(per_trial_mu, mean_trials, math.inf, delta, _DENSE_ORDERS)
    assert ours <= theirs
    rho = per_trial_mu**2 / 2
    orders = np.array(_DENSE_ORDERS)

    def with_rdp_delta_hat(order):
        eps_hat = math.log1p(1.0 / (order - 1.0))
        exact = norm.cdf(-eps_hat / per_trial_mu + per_trial_mu / 2) - math.exp(eps_hat) * norm.cdf(
            -eps_hat / per_trial_mu - per_trial_mu / 2
        )
        rdp_bound, _ = dp_accounting.rdp.rdp_privacy_accountant.compute_delta(orders, orders * rho, eps_hat)
        assert exact <= rdp_bound
        return private_selection_rdp(order, **kw) + mean_trials * (rdp_bound - exact)

    swapped, _ = rdp_to_epsilon(with_rdp_delta_hat, delta)
    assert swapped <= theirs + 1e-12
    assert theirs - swapped <= 1e-4 * theirs


# ------------------------------------------------------------------------- generic base mechanisms
_REGRESSION = json.loads((Path(__file__).parent / "private_selection_gaussian_regression.json").read_text())


def test_gaussian_special_case_reproduces_the_earlier_implementation_exactly():
    # 456 values recorded from the Gaussian-only code (commit 355ee13) before it became a
    # special case of the generic bounds: every one is reproduced bit for bit.
    for dist, eta, mu, m, order, value in _REGRESSION["private_selection_rdp"]["rows"]:
        kw = dict(per_trial_mu=mu, mean_trials=m, distribution=dist, tnb_eta=eta)
        assert private_selection_rdp(order, **kw) == float.fromhex(value)
    for dist, eta, mu, m, delta, value in _REGRESSION["private_selection_epsilon"]["rows"]:
        kw = dict(per_trial_mu=mu, mean_trials=m, distribution=dist, tnb_eta=eta)
        assert private_selection_epsilon(target_delta=delta, **kw) == float.fromhex(value)
    moved = 0
    for dist, eta, eps, m, value in _REGRESSION["per_trial_mu_for_epsilon"]["rows"]:
        kw = dict(mean_trials=m, distribution=dist, tnb_eta=eta)
        mu0, earlier = per_trial_mu_for_epsilon(target_epsilon=eps, target_delta=1e-5, **kw), float.fromhex(value)
        # bit for bit, except where the earlier root read a rounding error above the target: that one now
        # steps just below it (one 1e-10 step of log mu0), within the target
        if mu0 != earlier:
            moved += 1
            assert private_selection_epsilon(per_trial_mu=earlier, target_delta=1e-5, **kw) > eps
            assert mu0 < earlier and mu0 == pytest.approx(earlier, rel=2e-10)
        assert private_selection_epsilon(per_trial_mu=mu0, target_delta=1e-5, **kw) <= eps
    assert moved < len(_REGRESSION["per_trial_mu_for_epsilon"]["rows"]) / 2


@pytest.mark.parametrize(
    "distribution,eta",
    [
        ("truncated_negative_binomial", 1.0),
        ("truncated_negative_binomial", 0.0),
        ("truncated_negative_binomial", -0.5),
        ("poisson", 1.0),
    ],
)
def test_generic_with_a_gaussian_curve_and_numerical_order_hat_matches_the_closed_form(distribution, eta):
    # no closed-form λ̂ and a plain callable: the numerical minimum over λ̂ ≥ 1 agrees
    for mu, m in [(0.05, 5.0), (0.2, 50.0), (1.0, 500.0), (3.0, 10.0)]:
        rho = mu * mu / 2.0
        base_delta = (
            (lambda e, mu=mu: norm.cdf(-e / mu + mu / 2) - math.exp(e) * norm.cdf(-e / mu - mu / 2))
            if distribution == "poisson"
            else None
        )
        kw = dict(mean_trials=m, distribution=distribution, tnb_eta=eta)
        for order in (1.5, 4.0, 32.0):
            generic = private_selection_rdp_generic(order, lambda a, rho=rho: a * rho, base_delta=base_delta, **kw)
            assert generic == pytest.approx(private_selection_rdp(order, per_trial_mu=mu, **kw), rel=1e-12)


def _laplace_rdp(eps0, order):
    # Mironov 2017, Prop. 6: the Laplace mechanism with pure ε₀
    return eps0 + math.log1p((order - 1) * math.expm1((1 - 2 * order) * eps0) / (2 * order - 1)) / (order - 1)


@pytest.mark.parametrize("eps0,mean_trials,eta", [(0.1, 20.0, 1.0), (0.5, 10.0, 0.0), (0.05, 200.0, 2.0)])
def test_generic_tnb_agrees_with_dp_accounting_for_a_laplace_base(eps0, mean_trials, eta):
    # a curve that is not linear; dp_accounting minimises over λ̂ and λ on its grid only. The
    # curve is bounded (pure DP), so the best λ is beyond 1/δ: the grid reaches 1e9.
    base = lambda a: _laplace_rdp(eps0, a)
    ours = private_selection_epsilon_generic(base, mean_trials=mean_trials, target_delta=1e-5, tnb_eta=eta)
    event = dp_accounting.dp_event.RepeatAndSelectDpEvent(dp_accounting.LaplaceDpEvent(1.0 / eps0), mean_trials, eta)
    accountant = dp_accounting.rdp.RdpAccountant(orders=list(1.0 + np.geomspace(1e-3, 1e9, 1200)))
    accountant.compose(event)
    theirs = accountant.get_epsilon(1e-5)
    # dp_accounting also takes the monotone envelope ε'(λ) ← min_{λ' ≥ λ} ε'(λ') (RDP grows
    # with the order), worth ~1e-5 here; our continuous orders are worth about as much
    assert ours == pytest.approx(theirs, rel=1e-4)


@pytest.mark.parametrize("eps0,mean_trials", [(0.1, 15.4066), (0.5, 5.0)])
def test_generic_poisson_with_rdp_derived_delta_hat_equals_dp_accounting_on_the_same_grid(eps0, mean_trials):
    # base_delta=None: δ̂ from the RDP curve on DEFAULT_RDP_ORDERS, as dp_accounting does on its orders
    orders = list(DEFAULT_RDP_ORDERS)
    base = lambda a: _laplace_rdp(eps0, a)
    ours = private_selection_epsilon_generic(
        base, mean_trials=mean_trials, target_delta=1e-5, distribution="poisson", orders=orders
    )
    event = dp_accounting.dp_event.RepeatAndSelectDpEvent(
        dp_accounting.LaplaceDpEvent(1.0 / eps0), mean_trials, math.inf
    )
    accountant = dp_accounting.rdp.RdpAccountant(orders=orders)
    accountant.compose(event)
    assert ours == pytest.approx(accountant.get_epsilon(1e-5), rel=1e-10)
    # with the exact Laplace profile instead, δ̂ and hence ε are smaller
    exact = lambda e: max(0.0, 1.0 - math.exp((e - eps0) / 2.0))  # δ(ε) of Laplace with pure ε₀
    assert (
        private_selection_epsilon_generic(
            base, base_delta=exact, mean_trials=mean_trials, target_delta=1e-5, distribution="poisson", orders=orders
        )
        < ours
    )


def test_rdp_curve_delta_agrees_with_dp_accounting():
    from dp_accounting.rdp.rdp_privacy_accountant import compute_delta

    orders = np.asarray(DEFAULT_RDP_ORDERS)
    for values in (0.01 * orders, np.array([_laplace_rdp(0.3, a) for a in orders])):
        for epsilon in (0.0, 0.1, 0.5, 2.0):
            ours, order = rdp_curve_delta(values, orders, epsilon)
            theirs, their_order = compute_delta(list(orders), list(values), epsilon)
            assert ours == pytest.approx(theirs, rel=1e-12) and order == their_order


def test_amp_base_mechanism():
    # P&S over AMP trials: each trial has the AMP RDP curve and profile (spec C4(b))
    amp = dict(clip=math.sqrt(2.0), beta=0.5, lam=3.7335, sigma=6.85, tau=5e-4, sigma_out=0.15)
    base_rdp = lambda a: amp_rdp(a, **amp)
    base_delta = lambda e: amp_delta(e, **amp)
    single = amp_rdp_epsilon(1e-5, **amp)
    m = poisson_mean_for_tail(threshold=10, probability=0.9)
    with_profile = private_selection_epsilon_generic(
        base_rdp, base_delta=base_delta, mean_trials=m, target_delta=1e-5, distribution="poisson"
    )
    with_rdp_delta = private_selection_epsilon_generic(
        base_rdp, mean_trials=m, target_delta=1e-5, distribution="poisson"
    )
    tnb = private_selection_epsilon_generic(base_rdp, mean_trials=m, target_delta=1e-5)
    assert single < with_profile < with_rdp_delta  # the exact profile gives the smaller δ̂
    assert single < tnb
    # the curve built once equals the per-order function, and is valid at every order
    curve = private_selection_rdp_curve(base_rdp, base_delta=base_delta, mean_trials=m, distribution="poisson")
    for order in (1.5, 3.0, 20.0):
        value = private_selection_rdp_generic(
            order, base_rdp, base_delta=base_delta, mean_trials=m, distribution="poisson"
        )
        assert curve(order) == value
        eps_hat = math.log1p(1.0 / (order - 1.0))
        assert value == pytest.approx(
            base_rdp(order) + m * base_delta(eps_hat) + math.log(m) / (order - 1.0), rel=1e-12
        )


def test_generic_input_validation():
    base = lambda a: 0.1 * a
    # a non-finite base value (Opacus's overflow) is no error: it reads inf, no guarantee (issue 41)
    assert private_selection_rdp_generic(2.0, lambda a: math.nan, mean_trials=10.0) == math.inf
    for call, match in [
        (lambda: private_selection_rdp_generic(1.0, base, mean_trials=10.0), "order"),
        (lambda: private_selection_rdp_generic(2.0, "x", mean_trials=10.0), "base_rdp"),
        (lambda: private_selection_rdp_generic(2.0, lambda a: -1.0, mean_trials=10.0), "base_rdp"),
        (
            lambda: private_selection_rdp_generic(
                2.0, lambda a: -1.0, mean_trials=10.0, distribution="poisson", base_delta=lambda e: 0.1
            ),
            "base_rdp",
        ),
        (
            lambda: private_selection_rdp_generic(
                2.0, base, mean_trials=10.0, distribution="poisson", base_delta=lambda e: 2.0
            ),
            "base_delta",
        ),
        (
            lambda: private_selection_rdp_generic(2.0, base, mean_trials=10.0, distribution="poisson", base_delta=3.0),
            "base_delta",
        ),
        (lambda: private_selection_rdp_generic(2.0, base, mean_trials=-1.0), "mean_trials"),
        (lambda: private_selection_rdp_generic(2.0, base, mean_trials=10.0, distribution="uniform"), "distribution"),
        (lambda: private_selection_epsilon_generic(base, mean_trials=10.0, target_delta=1.0), "target_delta"),
        (lambda: poisson_mean_for_tail(threshold=-1, probability=0.5), "threshold"),
        (lambda: poisson_mean_for_tail(threshold=10, probability=1.0), "probability"),
    ]:
        with pytest.raises(ValueError, match=match):
            call()
