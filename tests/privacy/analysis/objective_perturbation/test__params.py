r"""The objective-perturbation bounds' argument checks and derived parameters
(``privacy.analysis.objective_perturbation._params``): ``(c, s)`` and the output part's charged
``s_g`` against independent computations (``cases``), ``s_g`` dominating the exact
discrete-Gaussian GDP parameter of the released output for every ``d`` and tight at the largest,
and every refusal naming its argument.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from botorch_dp.privacy.analysis.discrete_gaussian import discrete_gaussian_mu
from botorch_dp.privacy.analysis.objective_perturbation import AMP_MAX_DIM, amp_output_grid
from botorch_dp.privacy.analysis.objective_perturbation._params import (
    AMP_GRID_SHARE,
    _check_epsilon,
    _check_orders,
    _objpert_params,
    _output_noise_param,
    _scalar_or_array,
)

from .cases import FIG1_LEFT, FIG1_RIGHT, FIG4, c_s, grid_s_g


@pytest.mark.parametrize("params", [FIG1_LEFT, FIG1_RIGHT, FIG4, dict(clip=3.0, beta=0.0, lam=0.5, sigma=0.1)])
def test_objpert_params_are_c_and_s(params):
    c, s = _objpert_params(**params)
    assert (c, s) == pytest.approx(c_s(**params), rel=1e-15)
    assert c_s(**FIG1_LEFT)[0] == pytest.approx(0.051293, abs=1e-6)  # the spec's c of Fig. 1 (left)


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(clip=0.0, beta=0.5, lam=1.0, sigma=1.0), "clip"),
        (dict(clip=math.inf, beta=0.5, lam=1.0, sigma=1.0), "clip"),
        (dict(clip=1.0, beta=-0.1, lam=1.0, sigma=1.0), "beta"),
        (dict(clip=1.0, beta=0.5, lam=math.nan, sigma=1.0), "lam"),
        (dict(clip=1.0, beta=1.0, lam=1.0, sigma=1.0), r"lam must exceed beta .*lam=1\.0 and beta=1\.0"),
        (dict(clip=1.0, beta=0.5, lam=1.0, sigma=0.0), "sigma"),
    ],
)
def test_objpert_params_refuse_bad_arguments_naming_them(kwargs, name):
    with pytest.raises(ValueError, match=name):
        _objpert_params(**kwargs)


@pytest.mark.parametrize(
    "lam, tau, sigma_out", [(20.0, 0.05, 0.1), (1.0, 1e-6, 1.0), (3.7, 0.0, 0.25), (0.1, 1.0, 37.0)]
)
def test_the_output_charge_is_the_grid_enlarged_ratio(lam, tau, sigma_out):
    assert _output_noise_param(lam, tau, sigma_out) == pytest.approx(grid_s_g(tau, lam, sigma_out), rel=1e-15)
    assert AMP_GRID_SHARE == 2.0**-14


@pytest.mark.parametrize("lam, tau, sigma_out", [(20.0, 0.05, 0.1), (1.0, 1e-6, 1.0), (0.1, 1.0, 37.0)])
def test_the_output_charge_dominates_the_exact_discrete_gaussian_mu_for_every_dim(lam, tau, sigma_out):
    r"""For each ``d`` the released output is ``γ(round(θ̃/γ) + k)``, ``k ~ N_Z(0, s²)``, ``s = ⌈σ_out/γ⌉``:
    its exact GDP parameter ``((2τ/λ + √d γ)/(γ s))(1 + 1/s²)`` never exceeds the charged ``s_g``,
    and at the largest ``d`` (the rounding's share near its cap) the charge is tight to 1e-4."""
    charged = _output_noise_param(lam, tau, sigma_out)
    gaps = []
    for dim in (1, 2, 3, 17, 1000, 4097, AMP_MAX_DIM // 3, AMP_MAX_DIM):
        grid = amp_output_grid(dim=dim, sigma_out=sigma_out)
        scale = math.ceil(sigma_out / grid)
        exact = discrete_gaussian_mu(2 * tau / lam + math.sqrt(dim) * grid, grid, scale)
        assert exact <= charged, (dim, exact, charged)
        gaps.append((charged - exact) / charged)
    assert min(gaps) < 1e-4 * (1 + 1 / charged)


def test_epsilon_may_be_any_real_number_but_nan():
    assert (
        _check_epsilon(-3) == -3.0 and _check_epsilon(np.float64(0.5)) == 0.5 and _check_epsilon(math.inf) == math.inf
    )
    for bad in (math.nan, True, "one", None):
        with pytest.raises(ValueError, match=r"target_eps must be a real number"):
            _check_epsilon(bad, "target_eps")


def test_orders_are_finite_and_above_one_in_every_entry():
    assert _check_orders(2).tolist() == 2.0 and _check_orders([1.5, 64]).tolist() == [1.5, 64.0]
    for bad in (1.0, 0.5, math.inf, math.nan, [2.0, 1.0], [], True, "two", [[2.0], [3.0, 4.0]]):
        with pytest.raises(ValueError, match="alpha"):
            _check_orders(bad)
    assert _scalar_or_array(np.array(2.5), 3.0) == 2.5 and isinstance(_scalar_or_array(np.array(2.5), 3.0), float)
    arr = np.array([1.0, 2.0])
    assert _scalar_or_array(arr, np.array([2.0, 3.0])) is arr
