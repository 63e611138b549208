r"""The authors' calibration of AMP's noise σ and regularisation λ for a target (ε, δ).

``calibrate_amp`` walks λ up from ``2β/ε`` in steps of 5% and, at each λ, finds the smallest σ
whose AMP RDP curve converts to at most ε; it stops at the first σ within ``factor`` of the
analytic Gaussian's noise.
"""

from __future__ import annotations

import math

import numpy as np

from botorch_dp.privacy.analysis.gdp import gdp_mu
from botorch_dp.privacy.analysis.objective_perturbation._params import _output_noise_param
from botorch_dp.privacy.analysis.objective_perturbation.rdp_curves import amp_rdp_epsilon
from botorch_dp.privacy.analysis.rdp import DEFAULT_RDP_ORDERS, rdp_curve_epsilon
from botorch_dp.privacy.checks import check_delta, check_greater, check_nonnegative, check_positive

__all__ = ["calibrate_amp"]

_MAX_LAMBDA_STEPS = 2000


def _sigma_for_epsilon(
    epsilon: float, delta: float, *, clip: float, beta: float, lam: float, tau: float, sigma_out: float
) -> float | None:
    r"""The smallest σ whose AMP run has RDP-grid ``ε ≤ epsilon`` at ``delta``, or ``None``.

    ``ε(σ)`` decreases in σ towards the ε of the curve ``c + α s_g²/2`` (σ = ∞); when that
    limit already exceeds the target, no σ works at this λ.
    """
    from scipy.optimize import brentq

    c = -math.log1p(-beta / lam)
    s_g = _output_noise_param(lam, tau, sigma_out)  # the grid-enlarged output part, as amp_rdp charges it
    orders = np.asarray(DEFAULT_RDP_ORDERS)
    if rdp_curve_epsilon(c + orders * (s_g * s_g / 2.0), orders, delta)[0] >= epsilon:
        return None

    def excess(log_sigma: float) -> float:
        return (
            amp_rdp_epsilon(
                delta, clip=clip, beta=beta, lam=lam, sigma=math.exp(log_sigma), tau=tau, sigma_out=sigma_out
            )
            - epsilon
        )

    lo = hi = math.log(clip)
    while excess(hi) > 0.0:
        hi += math.log(2.0)
    while excess(lo) <= 0.0:
        lo -= math.log(2.0)
    return math.exp(brentq(excess, lo, hi, xtol=1e-12, rtol=1e-12, maxiter=500))


def calibrate_amp(
    epsilon: float, delta: float, *, clip: float, beta: float, sigma_out: float, tau: float, factor: float = 1.3
) -> tuple[float, float]:
    r"""Choose ``(σ, λ)`` for one AMP run at ``(ε, δ)`` (the authors' procedure, spec C3).

    ``σ_G = L/μ`` with ``μ = gdp_mu(ε, δ)`` is the analytic-Gaussian noise for ``(ε, δ)`` at
    sensitivity ``L``. Starting at ``λ = 2β/ε``: find the smallest σ for which the AMP RDP
    curve on ``DEFAULT_RDP_ORDERS``, converted by ``analysis.rdp.rdp_curve_epsilon``,
    gives at most ε at δ (``brentq`` on ``log σ``); return ``(σ, λ)`` as soon as
    ``σ ≤ factor · σ_G``, else ``λ ← 1.05 λ``. So ``λ = (2β/ε)·1.05^j`` for the first
    such ``j``; a ``λ ≤ β``, or one at which no σ reaches ε, is skipped. Unlike the
    authors' code, the returned λ is the one σ was calibrated at (theirs is one step
    larger).

    Args:
        epsilon: Target ``ε > 0``.
        delta: Target ``δ ∈ (0, 1)``.
        clip: ``L > 0``.
        beta: ``β > 0`` (``β = 0`` would start at λ = 0).
        sigma_out: ``σ_out > 0``.
        tau: ``τ ≥ 0``.
        factor: ``f > 1``: how much more noise than the Gaussian's is accepted.

    Returns:
        ``(σ, λ)``.

    Raises:
        ValueError: If no ``j`` below 2000 gives ``σ ≤ factor·σ_G`` (e.g. a large τ/σ_out).
    """
    epsilon = check_positive(epsilon, "epsilon", allow_inf=False)
    delta = check_delta(delta)
    clip = check_positive(clip, "clip", allow_inf=False)
    beta = check_positive(beta, "beta", allow_inf=False)
    sigma_out = check_positive(sigma_out, "sigma_out", allow_inf=False)
    tau = check_nonnegative(tau, "tau", allow_inf=False)
    factor = check_greater(factor, "factor", 1.0)
    sigma_gauss = clip / gdp_mu(epsilon, delta)
    lam_start = 2.0 * beta / epsilon
    for step in range(_MAX_LAMBDA_STEPS):
        lam = lam_start * 1.05**step
        if lam > beta:
            sigma = _sigma_for_epsilon(epsilon, delta, clip=clip, beta=beta, lam=lam, tau=tau, sigma_out=sigma_out)
            if sigma is not None and sigma <= factor * sigma_gauss:
                return sigma, lam
    raise ValueError(
        f"calibrate_amp found no lambda with sigma <= factor * sigma_G within {_MAX_LAMBDA_STEPS} steps; "
        "increase factor or sigma_out, or decrease tau."
    )
