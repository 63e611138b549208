r"""The parameter sets of the spec's figures (seeds-002-004.md §3.8), shared by the tests of
``botorch_dp.privacy.analysis.objective_perturbation``."""

import math

import numpy as np

from botorch_dp.privacy.analysis.rdp import DEFAULT_RDP_ORDERS

FIG1_LEFT = dict(clip=1.0, beta=1.0, lam=20.0, sigma=5.0)  # c = 0.051293, ε* = 0.071293
FIG1_RIGHT = dict(clip=1.0, beta=1.0, lam=5.0, sigma=10.0)
FIG4 = dict(clip=1.0, beta=1.0, lam=10.0, sigma=8.0)
AMP_MC = dict(FIG1_LEFT, tau=0.05, sigma_out=0.1)  # the paper's s_g = 2τ/(λσ_out) = 0.05
ORDERS = np.asarray(DEFAULT_RDP_ORDERS)


def c_s(clip, beta, lam, sigma):
    r"""``(c, s) = (−log(1 − β/λ), L/σ)``, computed here independently of the package."""
    return -math.log(1.0 - beta / lam), clip / sigma


def grid_s_g(tau, lam, sigma_out):
    r"""The output part's charged ratio for AMP's grid release, computed here independently of the
    package: the rounded sensitivity ``2τ/λ + √d γ`` with ``√d γ ≤ 2⁻¹⁴ σ_out``, over the scale
    ``γ s ≥ σ_out``, times ``1 + 2⁻²⁷`` (the discrete Gaussian's ``1 + 1/s²``, ``s ≥ 2¹⁴``)."""
    return (2.0 * tau / (lam * sigma_out) + 2.0**-14) * (1.0 + 2.0**-27)


AMP_MC_S_G = grid_s_g(AMP_MC["tau"], AMP_MC["lam"], AMP_MC["sigma_out"])  # 0.05 + 6.1e-5
