r"""Rényi-DP curves of ObjPert and AMP, and the ε an RDP ledger charges for one run.

``objpert_rdp`` is the paper's Theorem 3.2 and ``amp_rdp`` its Theorem 4.1 (ObjPert plus the
output noise, charged for the grid release of ``output_grid``); the ``*_rdp_epsilon`` functions
convert a curve on a grid of orders with ``analysis.rdp.rdp_curve_epsilon``, the one conversion
of the package.
"""

from __future__ import annotations

import math
from typing import TypedDict, overload

import numpy as np
from scipy.special import erf, log_ndtr

from botorch_dp.privacy.analysis.objective_perturbation._params import (
    _LOG2,
    _check_orders,
    _objpert_params,
    _output_noise_param,
    _scalar_or_array,
)
from botorch_dp.privacy.analysis.rdp import DEFAULT_RDP_ORDERS, rdp_curve_epsilon

__all__ = ["AMPParameters", "amp_rdp", "amp_rdp_epsilon", "objpert_rdp", "objpert_rdp_epsilon"]

_SQRT_HALF = math.sqrt(0.5)


class AMPParameters(TypedDict):
    r"""The privacy parameters of one AMP run: the keyword arguments of ``amp_rdp``,
    ``amp_epsilon``, ``amp_rdp_epsilon`` and ``ObjectivePerturbationMechanism``
    (``training.objective_perturbation.AMPConfig.privacy_parameters``)."""

    clip: float
    beta: float
    lam: float
    sigma: float
    tau: float
    sigma_out: float


def _log_two_phi(x: np.ndarray) -> np.ndarray:
    r"""``log(2Φ(x))`` for ``x > 0``: ``log1p(erf(x/√2))`` near 0 (where ``log 2 +
    log Φ(x)`` would cancel), ``log 2 + log_ndtr(x)`` beyond."""
    small = x < 1.0
    return np.where(small, np.log1p(erf(np.where(small, x, 0.0) * _SQRT_HALF)), _LOG2 + log_ndtr(x))


@overload
def objpert_rdp(alpha: float, *, clip: float, beta: float, lam: float, sigma: float) -> float: ...
@overload
def objpert_rdp(alpha: np.ndarray, *, clip: float, beta: float, lam: float, sigma: float) -> np.ndarray: ...
def objpert_rdp(alpha: float | np.ndarray, *, clip: float, beta: float, lam: float, sigma: float) -> float | np.ndarray:
    r"""Rényi-DP curve of objective perturbation (the paper's Theorem 3.2, spec R1).

    ``ε_OP(α) = c + s²/2 + log E[e^{(α−1)|X|}]/(α − 1)``, ``X ~ N(0, s²)``, i.e.
    ``c + α s²/2 + log(2Φ((α − 1)s))/(α − 1)`` with ``c = −log(1 − β/λ)``, ``s = L/σ``.
    It is at least the Gaussian ``α s²/2``, and the gap decreases to ``c`` as α → ∞.

    Args:
        alpha: Order(s) ``α > 1``, finite: a float or a numpy array of any shape.
        clip: ``L > 0``, bound on the per-example gradient norm ``‖∇ℓ(θ; z)‖``.
        beta: ``β ≥ 0``, smoothness of the loss in θ (``∇²ℓ ≼ βI``).
        lam: ``λ > β``, the regularisation strength (objective is a sum over records).
        sigma: ``σ > 0``, std of the objective's noise ``b ~ N(0, σ² I)``.

    Returns:
        ``ε_OP(α)``: a float for a scalar ``alpha``, else an array of its shape.
    """
    c, s = _objpert_params(clip, beta, lam, sigma)
    a = _check_orders(alpha)
    t = a - 1.0
    value = c + a * (s * s / 2.0) + _log_two_phi(t * s) / t
    return _scalar_or_array(value, alpha)


@overload
def amp_rdp(
    alpha: float, *, clip: float, beta: float, lam: float, sigma: float, tau: float, sigma_out: float
) -> float: ...
@overload
def amp_rdp(
    alpha: np.ndarray, *, clip: float, beta: float, lam: float, sigma: float, tau: float, sigma_out: float
) -> np.ndarray: ...
def amp_rdp(
    alpha: float | np.ndarray, *, clip: float, beta: float, lam: float, sigma: float, tau: float, sigma_out: float
) -> float | np.ndarray:
    r"""Rényi-DP curve of AMP as released here (the paper's Theorem 4.1 on the grid, spec R2).

    ``ε_AMP(α) = ε_OP(α) + α s_g²/2``: ObjPert composed with the output noise, whose
    sensitivity given the exact perturbed minimiser is ``2τ/λ`` (the paper's
    ``s_g = 2τ/(λ σ_out)``). The output is rounded to a public grid and drawn from an exact
    discrete Gaussian (``output_grid``), so the charged ``s_g = (2τ/(λ σ_out) + 2⁻¹⁴)(1 + 2⁻²⁷)``
    bounds the rounded sensitivity over the noise scale for every ``d ≤ AMP_MAX_DIM``; the
    discrete Gaussian's RDP is at most the continuous one's at that ratio (Canonne, Kamath &
    Steinke 2020, Thm. 14).

    Args:
        alpha: Order(s) ``α > 1`` (float or numpy array).
        clip: ``L > 0``.
        beta: ``β ≥ 0``.
        lam: ``λ > β``.
        sigma: ``σ > 0``.
        tau: ``τ ≥ 0``, the gradient-norm tolerance ``‖∇L^P(θ̃)‖ ≤ τ``.
        sigma_out: ``σ_out > 0``, std of the output noise.

    Returns:
        ``ε_AMP(α)`` (float, or array of ``alpha``'s shape).
    """
    base = objpert_rdp(alpha, clip=clip, beta=beta, lam=lam, sigma=sigma)
    s_g = _output_noise_param(lam, tau, sigma_out)
    value = np.asarray(base) + np.asarray(alpha, dtype=np.float64) * (s_g * s_g / 2.0)
    return _scalar_or_array(value, alpha)


def objpert_rdp_epsilon(
    delta: float, *, clip: float, beta: float, lam: float, sigma: float, orders: tuple[float, ...] = DEFAULT_RDP_ORDERS
) -> float:
    r"""``ε`` at ``δ`` of one ObjPert run via its RDP curve on a grid of orders.

    Evaluates ``objpert_rdp`` on ``orders`` and converts with
    ``analysis.rdp.rdp_curve_epsilon``. Looser than ``objpert_epsilon`` (the profile);
    this is what an RDP ledger charges.
    """
    values = objpert_rdp(np.asarray(orders, dtype=np.float64), clip=clip, beta=beta, lam=lam, sigma=sigma)
    return rdp_curve_epsilon(values, orders, delta)[0]


def amp_rdp_epsilon(
    delta: float,
    *,
    clip: float,
    beta: float,
    lam: float,
    sigma: float,
    tau: float,
    sigma_out: float,
    orders: tuple[float, ...] = DEFAULT_RDP_ORDERS,
) -> float:
    r"""``ε`` at ``δ`` of one AMP run via its RDP curve on a grid of orders
    (``amp_rdp`` on ``orders``, converted by ``analysis.rdp.rdp_curve_epsilon``)."""
    values = amp_rdp(
        np.asarray(orders, dtype=np.float64), clip=clip, beta=beta, lam=lam, sigma=sigma, tau=tau, sigma_out=sigma_out
    )
    return rdp_curve_epsilon(values, orders, delta)[0]
