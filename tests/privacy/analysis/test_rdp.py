r"""Tests for botorch_dp.privacy.analysis.rdp: the one RDP→(ε, δ) conversion."""

import math

import dp_accounting
import numpy as np
import pytest
from scipy.optimize import minimize_scalar

from botorch_dp.privacy.analysis.rdp import DEFAULT_RDP_ORDERS, rdp_curve_epsilon, rdp_to_epsilon
from botorch_dp.privacy.analysis.zcdp import zcdp_epsilon, zcdp_epsilon_cks


def _cks(order, rdp_value, delta):
    return rdp_value + math.log1p(-1.0 / order) - (math.log(delta) + math.log(order)) / (order - 1.0)


def _zcdp_by_brent(rho, delta):
    # An independent minimizer of the same formula (the former zcdp_epsilon_cks): Brent's
    # bounded method over log(α − 1) around the Bun–Steinke order, no grid.
    x_bs = 0.5 * (math.log(-math.log(delta)) - math.log(rho))
    objective = lambda x: _cks(1.0 + math.exp(x), (1.0 + math.exp(x)) * rho, delta)
    result = minimize_scalar(objective, bounds=(x_bs - 12.0, x_bs + 12.0), method="bounded", options={"xatol": 1e-10})
    return max(min(float(result.fun), objective(x_bs)), 0.0)


@pytest.mark.parametrize("delta", [1e-12, 1e-5, 1e-2, 0.5])
def test_zcdp_curve_agrees_with_an_independent_minimizer(delta):
    # ρ from 1e-12 (optimal order λ − 1 ≈ 5e6, beyond the starting grid's 1e5) to 1e6
    # (λ − 1 ≈ 2e-3): two minimizers of one formula agree to 1e-12 relative.
    for rho in np.geomspace(1e-12, 1e6, 37):
        ours, order = rdp_to_epsilon(lambda a, rho=rho: a * rho, delta)
        assert ours == pytest.approx(_zcdp_by_brent(rho, delta), rel=1e-12, abs=1e-300)
        assert ours == zcdp_epsilon_cks(rho, delta)  # zCDP calls this conversion
        assert ours <= zcdp_epsilon(rho, delta) + 1e-15 * zcdp_epsilon(rho, delta)
        # the returned order attains ε
        if ours > 0:
            assert _cks(order, order * rho, delta) == pytest.approx(ours, rel=1e-12)


def test_rdp_to_epsilon_for_a_gaussian_matches_zcdp_conversion():
    rho = 0.125
    eps, _ = rdp_to_epsilon(lambda a: a * rho, 1e-5)
    assert eps == pytest.approx(zcdp_epsilon_cks(rho, 1e-5), rel=1e-6)


def test_agrees_with_dp_accounting_on_a_curve_that_is_not_linear():
    # Laplace mechanism with ε₀ = 1 (Mironov 2017, Prop. 6), composed 10 times; the
    # conversion of dp_accounting evaluates the same formula on the orders it is given.
    eps0 = 1.0

    def laplace(order):
        return eps0 + math.log1p((order - 1) * math.expm1((1 - 2 * order) * eps0) / (2 * order - 1)) / (order - 1)

    rdp = lambda order: 10 * laplace(order)
    orders = 1.0 + np.geomspace(2e-2, 1e3, 4000)
    theirs, _ = dp_accounting.rdp.compute_epsilon(orders, [rdp(a) for a in orders], 1e-6)
    ours, _ = rdp_to_epsilon(rdp, 1e-6)
    assert ours <= theirs + 1e-12  # the continuous minimum is never above a grid's
    assert theirs - ours < 1e-5 * theirs
    classic = min(rdp(a) + math.log(1e6) / (a - 1) for a in orders)
    assert ours < classic


def test_refuses_bad_delta():
    for delta in (0.0, 1.0, math.nan):
        with pytest.raises(ValueError, match="delta must lie"):
            rdp_to_epsilon(lambda a: a, delta)


# ------------------------------------------------------------------------- grid conversion
def test_default_orders_are_opacus_defaults_plus_large_orders():
    from opacus.accountants import RDPAccountant

    assert list(DEFAULT_RDP_ORDERS[:-4]) == [float(a) for a in RDPAccountant.DEFAULT_ALPHAS]
    assert DEFAULT_RDP_ORDERS[-4:] == (80.0, 128.0, 256.0, 512.0)
    assert all(a < b for a, b in zip(DEFAULT_RDP_ORDERS, DEFAULT_RDP_ORDERS[1:], strict=False))


@pytest.mark.filterwarnings("ignore:Optimal order is the largest alpha")  # Opacus, for the Laplace curve at 1e-8
@pytest.mark.parametrize("delta", [1e-8, 1e-5, 1e-2])
def test_grid_conversion_agrees_with_dp_accounting_and_opacus(delta):
    from opacus.accountants.analysis.rdp import compute_rdp, get_privacy_spent

    orders = np.asarray(DEFAULT_RDP_ORDERS)
    # a DP-SGD curve (Opacus), a composed Laplace-like curve and a zCDP line
    curves = [
        compute_rdp(q=0.01, noise_multiplier=1.1, steps=1000, orders=list(orders)),
        np.array([10 * (1.0 + math.log1p((a - 1) * math.expm1(1 - 2 * a) / (2 * a - 1)) / (a - 1)) for a in orders]),
        0.02 * orders,
    ]
    for values in curves:
        ours, order = rdp_curve_epsilon(values, orders, delta)
        theirs, their_order = dp_accounting.rdp.compute_epsilon(list(orders), list(values), delta)
        assert ours == pytest.approx(theirs, rel=1e-12) and order == their_order
        opacus_eps, opacus_order = get_privacy_spent(orders=list(orders), rdp=list(values), delta=delta)
        assert ours == pytest.approx(opacus_eps, rel=1e-12) and order == opacus_order
        # the continuous minimum (of the piecewise-linear interpolant) is never above the
        # grid's, up to the continuous search's tolerance around a kink
        continuous, _ = rdp_to_epsilon(lambda a, values=values: float(np.interp(a, orders, values)), delta)
        assert continuous <= ours * (1 + 1e-8)


def test_grid_conversion_of_a_gaussian_matches_the_continuous_one_within_the_grid_gap():
    rho = 0.05
    grid, order = rdp_curve_epsilon(rho * np.asarray(DEFAULT_RDP_ORDERS), DEFAULT_RDP_ORDERS, 1e-5)
    continuous, best = rdp_to_epsilon(lambda a: a * rho, 1e-5)
    assert continuous <= grid <= continuous * (1 + 1e-3)
    assert order in DEFAULT_RDP_ORDERS and abs(order - best) < 1.0


def test_grid_conversion_edge_cases_and_validation():
    orders = [2.0, 4.0]
    eps, order = rdp_curve_epsilon([math.inf, math.inf], orders, 1e-5)
    assert eps == math.inf and math.isnan(order)
    assert rdp_curve_epsilon([math.inf, 0.1], orders, 1e-5)[1] == 4.0
    assert rdp_curve_epsilon([0.0, 0.0], orders, 0.5)[0] == 0.0  # floored at 0
    for args, match in [
        (([0.1], orders, 1e-5), "one value per order"),
        (([0.1, 0.2], [1.0, 2.0], 1e-5), "orders must be finite and exceed 1"),
        (([0.1, math.nan], orders, 1e-5), "rdp_values"),
        (([0.1, -0.2], orders, 1e-5), "rdp_values"),
        (([0.1, 0.2], orders, 0.0), "delta"),
        (([], [], 1e-5), "orders"),
    ]:
        with pytest.raises(ValueError, match=match):
            rdp_curve_epsilon(*args)
