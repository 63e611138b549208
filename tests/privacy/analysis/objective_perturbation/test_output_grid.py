r"""Tests for botorch_dp.privacy.analysis.objective_perturbation.output_grid: AMP's released output lies
on a public power-of-two grid (issue 40), the grid rule, and the charge: ``amp_rdp`` (what the
mechanism records) equals an independent computation with the grid-enlarged sensitivity and bounds
the exact discrete-Gaussian RDP of what is released, for every ``d``; ``calibrate_amp`` calibrates
against that charge."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import norm

from botorch_dp.privacy.analysis.objective_perturbation import (
    AMP_MAX_DIM,
    amp_output_grid,
    amp_output_noise,
    amp_rdp,
    calibrate_amp,
)
from botorch_dp.privacy.analysis.rdp import DEFAULT_RDP_ORDERS, rdp_curve_epsilon
from botorch_dp.privacy.ledger.events import TRAINING_RDP_ORDERS
from botorch_dp.privacy.mechanisms import ObjectivePerturbationMechanism

from .cases import c_s, grid_s_g

DIMS = (1, 2, 3, 4, 5, 16, 17, 1000, 4096, AMP_MAX_DIM)
SIGMA_OUTS = (0.1, 0.15, 0.125, 1.0, 37.0, 1e-12, 2.0**-20 * 3)


def _objpert_rdp_independent(alpha, clip, beta, lam, sigma):
    # Thm. 3.2 written out: c + α s²/2 + log(2Φ((α − 1)s))/(α − 1)
    c, s = c_s(clip, beta, lam, sigma)
    alpha = np.asarray(alpha, dtype=np.float64)
    return c + alpha * s * s / 2.0 + np.log(2.0 * norm.cdf((alpha - 1.0) * s)) / (alpha - 1.0)


@pytest.mark.parametrize("sigma_out", SIGMA_OUTS)
def test_the_grid_is_a_public_power_of_two_far_below_the_noise(sigma_out):
    for d in DIMS:
        grid = amp_output_grid(dim=d, sigma_out=sigma_out)
        mantissa, _ = math.frexp(grid)
        assert mantissa == 0.5  # a power of two
        # √d γ ≤ 2⁻¹⁴ σ_out, and not needlessly finer: σ_out/γ ∈ [2¹⁴ √d, 2¹⁶ √d)
        assert math.sqrt(d) * grid <= 2.0**-14 * sigma_out
        assert sigma_out / grid < 2.0**16 * math.sqrt(d)
        noise = amp_output_noise(dim=d, lam=2.0, tau=5e-4, sigma_out=sigma_out)
        assert noise.grid == grid and noise.scale == math.ceil(sigma_out / grid)
        assert 2**14 <= noise.scale <= 2**24  # within the exact sampler's range
        assert sigma_out <= noise.noise_std < sigma_out * (1.0 + 2.0**-14)


def test_the_grid_refuses_what_the_sampler_cannot_draw():
    assert amp_output_noise(dim=AMP_MAX_DIM, lam=1.0, tau=1e-3, sigma_out=0.99).scale <= 2**24
    with pytest.raises(ValueError, match=r"dim \(d\) = 262145"):
        amp_output_grid(dim=AMP_MAX_DIM + 1, sigma_out=0.1)
    with pytest.raises(ValueError, match="dim"):
        ObjectivePerturbationMechanism(
            dim=AMP_MAX_DIM + 1, clip=1.0, beta=0.5, lam=2.0, sigma=1.0, tau=1e-3, sigma_out=0.1
        )
    with pytest.raises(ValueError, match="sigma_out"):
        amp_output_grid(dim=1, sigma_out=1e-305)


@pytest.mark.parametrize(
    "params",
    [
        dict(clip=math.sqrt(2.0), beta=0.5, lam=3.7335, sigma=6.85, tau=5e-4, sigma_out=0.15),  # C3 at ε = 1
        dict(clip=1.0, beta=1.0, lam=20.0, sigma=5.0, tau=0.05, sigma_out=0.1),
        dict(clip=0.1, beta=1.0, lam=1e4, sigma=0.3, tau=1e-9, sigma_out=0.015),  # 2τ/λ far below the grid
    ],
)
def test_the_charge_is_the_enlarged_sensitivity_and_bounds_the_release(params):
    orders = np.asarray(TRAINING_RDP_ORDERS, dtype=np.float64)
    objpert = _objpert_rdp_independent(orders, params["clip"], params["beta"], params["lam"], params["sigma"])
    s_g = grid_s_g(params["tau"], params["lam"], params["sigma_out"])
    expected = objpert + orders * s_g * s_g / 2.0
    np.testing.assert_allclose(amp_rdp(orders, **params), expected, rtol=1e-10)
    # what the mechanism records in the ledger, just before it draws b
    recorded = []

    class Meter:
        def record(self, run_id, event):
            recorded.append((run_id, event))

    mech = ObjectivePerturbationMechanism(dim=7, **params)
    mech.perturbation(meter=Meter(), run_id="run")
    ((run_id, event),) = recorded
    assert run_id == "run"
    np.testing.assert_allclose(event.rdp, expected, rtol=1e-10)
    # the released output's exact discrete-Gaussian RDP (CKS Thm. 14: α (Δ′/(γ s))²/2) at its rounded
    # sensitivity Δ′ = 2τ/λ + √d γ is at most the charged output part, for every d; the charge's rounding
    # term 2⁻¹⁴ is within a factor 4 of the release's √d γ/σ_out > 2⁻¹⁶
    paper = 2.0 * params["tau"] / (params["lam"] * params["sigma_out"])
    for d in DIMS:
        grid = amp_output_grid(dim=d, sigma_out=params["sigma_out"])
        scale = math.ceil(params["sigma_out"] / grid)
        ratio = (2.0 * params["tau"] / params["lam"] + math.sqrt(d) * grid) / (grid * scale)
        assert ratio * (1.0 + 1.0 / scale**2) <= s_g
        assert np.all(amp_rdp(orders, **params) - objpert >= orders * ratio * ratio / 2.0 * (1 - 1e-12))
        assert ratio > (paper + 2.0**-16) / (1.0 + 2.0**-14)


def test_calibration_charges_the_grid():
    # calibrate_amp's σ reaches ε exactly under the enlarged charge (an independent curve, converted by the
    # package's one RDP conversion), and the paper's continuous output would have spent less
    kw = dict(clip=math.sqrt(2.0), beta=0.5, sigma_out=0.15, tau=5e-4)
    sigma, lam = calibrate_amp(1.0, 1e-5, **kw)
    orders = np.asarray(DEFAULT_RDP_ORDERS)
    objpert = _objpert_rdp_independent(orders, kw["clip"], kw["beta"], lam, sigma)
    with_grid = objpert + orders * grid_s_g(kw["tau"], lam, kw["sigma_out"]) ** 2 / 2.0
    paper = objpert + orders * (2.0 * kw["tau"] / (lam * kw["sigma_out"])) ** 2 / 2.0
    assert rdp_curve_epsilon(with_grid, orders, 1e-5)[0] == pytest.approx(1.0, rel=1e-9)
    assert rdp_curve_epsilon(paper, orders, 1e-5)[0] < 1.0 - 1e-9
