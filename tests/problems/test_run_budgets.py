"""Tests for problems/run_budgets.py: the per-run AMP budgets (domination of the reference
curve, the smallest λ, the plans for composed runs and for P&S selection) and the DP-SGD
noise of an honest selection."""

import math

import numpy as np
import pytest

import botorch_dp.problems.run_budgets as rb
from botorch_dp.privacy.accountants import dp_sgd_rdp
from botorch_dp.privacy.analysis.objective_perturbation import amp_rdp
from botorch_dp.privacy.analysis.private_selection import private_selection_epsilon_generic
from botorch_dp.privacy.analysis.rdp import DEFAULT_RDP_ORDERS, rdp_curve_epsilon

ORDERS = np.asarray(DEFAULT_RDP_ORDERS)
AMP = dict(clip=math.sqrt(2.0), beta=0.5, tau=5e-4, sigma_out=0.15)


@pytest.fixture(scope="module")
def budget():
    return rb.plan_amp_runs(1.0, 1e-5, num_runs=5)


def test_sigma_for_curve_is_the_smallest_dominated_sigma(budget):
    ref = budget.rdp_values()
    for lam in (budget.lam, 2.0 * budget.lam, 40.0 * budget.lam, 1.2 * budget.min_lam()):
        sigma = budget.sigma_at(lam)
        curve = amp_rdp(ORDERS, lam=lam, sigma=sigma, **AMP)
        assert np.all(curve <= ref)  # below the reference at every grid order
        assert np.any(amp_rdp(ORDERS, lam=lam, sigma=sigma * (1 - 1e-6), **AMP) > ref)  # and the smallest
    assert budget.sigma_at(budget.lam) == pytest.approx(budget.sigma, rel=1e-9)
    heavier = budget.sigma_at(2.0 * budget.lam, weight=3.0)
    assert np.all(amp_rdp(ORDERS, lam=2.0 * budget.lam, sigma=heavier, **AMP) <= 3.0 * ref)
    assert heavier < budget.sigma_at(2.0 * budget.lam)


def test_min_lam_is_where_the_sigma_to_infinity_limit_meets_the_reference(budget):
    floor = budget.min_lam()
    assert budget.beta < floor < budget.lam
    assert budget.sigma_at(floor * (1 - 1e-6)) is None
    assert budget.sigma_at(floor * (1 + 1e-3)) is not None
    with pytest.raises(ValueError, match="lam"):
        budget.sigma_at(0.4)  # λ ≤ β


def _first_accepted_by_scan(epsilon, delta, k, factor=1.3):
    """Brute force for plan_amp_runs: σ by scanning a log grid (coarse 5 %, then 0.05 % steps),
    λ by a linear scan of the 1.05 grid from 2βk/ε."""
    total = lambda sigma, lam: rdp_curve_epsilon(k * amp_rdp(ORDERS, lam=lam, sigma=sigma, **AMP), ORDERS, delta)[0]

    def sigma_at(lam):
        coarse = next((s for s in 0.5 * 1.05 ** np.arange(400) if total(s, lam) <= epsilon), None)
        if coarse is None:
            return None
        return next(s for s in coarse / 1.05 * 1.0005 ** np.arange(200) if total(s, lam) <= epsilon)

    sigma_inf = sigma_at(0.5e12)
    step = 0
    while True:
        lam = 2 * 0.5 * k / epsilon * 1.05**step
        sigma = sigma_at(lam)
        if sigma is not None and sigma <= factor * sigma_inf:
            return lam, sigma
        step += 1


@pytest.mark.parametrize("epsilon,k", [(1.0, 5), (8.0, 9.0)])
def test_plan_amp_runs_spends_epsilon_at_the_first_accepted_lambda(epsilon, k):
    plan = rb.plan_amp_runs(epsilon, 1e-5, num_runs=k)
    assert plan.epsilon(1e-5, k) <= epsilon and plan.epsilon(1e-5, k) == pytest.approx(epsilon, rel=1e-9)
    lam, sigma = _first_accepted_by_scan(epsilon, 1e-5, k)
    assert plan.lam == pytest.approx(lam, rel=1e-12)
    assert plan.sigma == pytest.approx(sigma, rel=1e-3)  # the scan's σ grid has steps of 0.05 %
    with pytest.raises(ValueError, match="num_runs"):
        rb.plan_amp_runs(1.0, 1e-5, num_runs=0)


def test_plan_amp_selection_spends_epsilon_under_the_generic_ps_bound():
    plan = rb.plan_amp_selection(1.0, 1e-5, mean_trials=15.4066)
    eps = private_selection_epsilon_generic(
        plan.rdp, mean_trials=15.4066, target_delta=1e-5, distribution="poisson", orders=DEFAULT_RDP_ORDERS
    )
    assert eps <= 1.0 and eps == pytest.approx(1.0, rel=1e-9)
    # one trial alone is much cheaper than the selection
    assert plan.epsilon(1e-5) < 0.5


def test_dp_sgd_noise_for_selection_meets_epsilon():
    q, steps = 0.05, 100
    sigma = rb.dp_sgd_noise_for_selection(1.0, 1e-5, sample_rate=q, steps=steps, mean_trials=15.4066)
    base = lambda a: float(max(dp_sgd_rdp(noise_multiplier=sigma, sample_rate=q, steps=steps, orders=[a])[0], 0.0))
    eps = private_selection_epsilon_generic(
        base, mean_trials=15.4066, target_delta=1e-5, distribution="poisson", orders=DEFAULT_RDP_ORDERS
    )
    assert eps <= 1.0 and eps == pytest.approx(1.0, rel=1e-3)
    curve = rb.dp_sgd_curve(noise_multiplier=0.99 * sigma, sample_rate=q, steps=steps)
    values = rb.selection_curve(curve, mean_trials=15.4066)
    assert rdp_curve_epsilon(values, ORDERS, 1e-5)[0] > 1.0
