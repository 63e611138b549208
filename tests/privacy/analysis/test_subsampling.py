"""Poisson-subsampling amplification of a whole mechanism (Zhu & Wang 2019, Thm. 6)."""

import math

import numpy as np
import pytest
from opacus.accountants.analysis.rdp import compute_rdp

from botorch_dp.privacy.analysis.subsampling import poisson_subsampled_rdp, zhu_wang_bound


def _renyi(p: np.ndarray, q: np.ndarray, alpha: int) -> float:
    return float(np.log(np.sum(p**alpha * q ** (1 - alpha))) / (alpha - 1))


@pytest.mark.parametrize("sigma", [0.8, 2.0, 5.0])
@pytest.mark.parametrize("gamma", [0.02, 0.25, 0.7])
def test_the_bound_lies_above_the_exact_subsampled_gaussian(sigma, gamma):
    # Opacus's curve of ONE Poisson-subsampled Gaussian step (Mironov et al. 2019) is exact for it
    orders = np.arange(2, 65, dtype=np.float64)
    bound = zhu_wang_bound(orders / (2 * sigma**2), gamma)
    exact = np.asarray(compute_rdp(q=gamma, noise_multiplier=sigma, steps=1, orders=orders))
    assert np.all(bound >= exact * (1 - 1e-9))


def test_the_bound_covers_both_directions_of_a_brute_force_subsampled_mechanism():
    # any mechanism: on S it outputs p, on S + {x} it outputs q (discrete, exact Rényi divergences); subsampled,
    # the neighbour outputs the mixture (1 - γ) p + γ q. Both divergences must lie under the bound.
    rng = np.random.default_rng(0)
    for _ in range(30):
        p = rng.dirichlet(np.ones(5))
        q = rng.dirichlet(np.ones(5) * 0.7)
        gamma = float(rng.uniform(0.01, 0.9))
        base = np.array([max(_renyi(q, p, a), _renyi(p, q, a)) for a in range(2, 21)])
        bound = zhu_wang_bound(base, gamma)
        mix = (1 - gamma) * p + gamma * q
        for i, alpha in enumerate(range(2, 21)):
            exact = max(_renyi(mix, p, alpha), _renyi(p, mix, alpha))
            assert exact <= bound[i] * (1 + 1e-9) + 1e-12, (alpha, gamma)


def test_the_formula_written_out_at_small_orders():
    eps = {2: 0.3, 3: 0.5, 4: 0.8}
    gamma = 0.2
    got = zhu_wang_bound(np.array([eps[2], eps[3], eps[4]]), gamma)
    for alpha in (2, 3, 4):
        total = (1 - gamma) ** (alpha - 1) * (alpha * gamma - gamma + 1)
        total += math.comb(alpha, 2) * gamma**2 * (1 - gamma) ** (alpha - 2) * math.exp(eps[2])
        for ell in range(3, alpha + 1):
            total += (
                3 * math.comb(alpha, ell) * gamma**ell * (1 - gamma) ** (alpha - ell) * math.exp((ell - 1) * eps[ell])
            )
        assert got[alpha - 2] == pytest.approx(math.log(total) / (alpha - 1), rel=1e-12)


def test_curve_on_a_grid_ceiling_orders_overflow_and_gamma_one():
    def base(orders):
        return 0.05 * np.asarray(orders)

    grid = np.array([1.5, 2.0, 2.5, 10.9, 64.0, 80.0])
    out = poisson_subsampled_rdp(base, sample_rate=0.1, orders=grid, max_integer_order=64)
    amplified = zhu_wang_bound(0.05 * np.arange(2, 65.0), 0.1)
    assert out[0] == out[1] == pytest.approx(amplified[0])  # (1, 2] takes the value at 2
    assert out[2] == pytest.approx(amplified[1])  # 2.5 -> 3
    assert out[3] == pytest.approx(amplified[9])  # 10.9 -> 11
    assert out[5] == pytest.approx(0.05 * 80)  # above the integer range: no amplification claimed
    assert np.all(out <= base(np.ceil(grid)) + 1e-12)
    one = poisson_subsampled_rdp(base, sample_rate=1.0, orders=np.array([2.0, 7.0]))
    assert one.tolist() == pytest.approx([0.1, 0.35])

    def overflowing(orders):
        orders = np.asarray(orders, dtype=float)
        return np.where(orders >= 30, np.nan, 0.01 * orders)  # Opacus's NaN at large orders

    out = poisson_subsampled_rdp(overflowing, sample_rate=0.3, orders=np.array([10.0, 29.0, 30.0, 40.0]))
    assert np.isfinite(out[:2]).all() and np.isinf(out[2:]).all()


def test_refusals_name_the_argument():
    with pytest.raises(ValueError, match="sample_rate"):
        zhu_wang_bound(np.array([0.1]), 0.0)
    with pytest.raises(ValueError, match="orders"):
        poisson_subsampled_rdp(lambda a: a, sample_rate=0.5, orders=[0.5])
    with pytest.raises(ValueError, match="max_integer_order"):
        poisson_subsampled_rdp(lambda a: a, sample_rate=0.5, orders=[2.0], max_integer_order=1)
