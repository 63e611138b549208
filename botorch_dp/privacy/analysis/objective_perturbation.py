r"""Privacy of objective perturbation (ObjPert) and approximate minima perturbation (AMP).

Pure functions on floats (Redberg, Koskela & Wang, "Improving the Privacy and Practicality
of Objective Perturbation for Differentially Private Linear Learners"): RDP curves,
privacy profiles and their ε(δ), the classic bound of Kifer et al. (2012) for comparison,
and the authors' calibration of (σ, λ).

ObjPert releases the exact minimiser of ``Σ_z ℓ(θ; z) + (λ/2)‖θ‖² + bᵀθ``,
``b ~ N(0, σ² I)``, for a convex GLM loss with ``‖∇ℓ‖ ≤ L`` (``clip``) and ``∇²ℓ ≼ βI``
(``beta``), ``λ > β``. AMP releases an approximate minimiser ``θ̃`` with
``‖∇L^P(θ̃)‖ ≤ τ`` plus ``N(0, σ_out² I)``; it is ObjPert followed by a Gaussian
mechanism of sensitivity ``2τ/λ``. Notation: ``c = −log(1 − β/λ) > 0``, ``s = L/σ``,
``s_g = 2τ/(λ σ_out)``, ``ε* = c + s²/2``, and the Gaussian privacy profile

    δ_G(x; s) = Φ(−x/s + s/2) − e^x Φ(−x/s − s/2)   (any real x).

All bounds are for add/remove neighbours (one training record added or removed); do not
use them for replace-one. The privacy loss random variable that dominates ObjPert is
``ω = c + s²/2 + s|Z|``, ``Z ~ N(0, 1)`` (the paper's Lemma D.6), so

- RDP (Thm. 3.2): ``ε_OP(α) = c + α s²/2 + log(2Φ((α − 1)s))/(α − 1)``;
- AMP RDP (Thm. 4.1): ``ε_AMP(α) = ε_OP(α) + α s_g²/2``;
- profile (Appendix D.2, not the main-text Theorem 3.1, which is wrong):
  ``δ(ε) = E[(1 − e^{ε − ω})₊] = 2 δ_G(ε − c; s)`` for ``ε ≥ ε*`` and
  ``1 − 2 e^{ε − c} Φ(−s)`` below;
- AMP profile (the PLRVs add): ``δ_AMP(ε) = 2 ∫₀^∞ φ(z) δ_G(ε − ε* − s z; s_g) dz``.
"""

from __future__ import annotations

import math
import warnings
from typing import Callable

import numpy as np
from scipy.integrate import IntegrationWarning, quad
from scipy.optimize import brentq
from scipy.special import erf, log_ndtr

from botorch_dp.privacy.analysis.gdp import gdp_delta, gdp_epsilon, gdp_mu
from botorch_dp.privacy.analysis.rdp import DEFAULT_RDP_ORDERS, rdp_curve_epsilon
from botorch_dp.privacy.checks import (
    check_delta,
    check_greater,
    check_nonnegative,
    check_positive,
)

__all__ = [
    "amp_delta",
    "amp_epsilon",
    "amp_rdp",
    "amp_rdp_epsilon",
    "calibrate_amp",
    "gaussian_profile_delta",
    "kifer_delta",
    "objpert_delta",
    "objpert_epsilon",
    "objpert_rdp",
    "objpert_rdp_epsilon",
]

_LOG2 = math.log(2.0)
_SQRT_HALF = math.sqrt(0.5)
_MAX_LAMBDA_STEPS = 2000
_Z_MAX = 40.0  # φ(z) < 1e-300 beyond: the half-normal integrals of (P3) stop here


# ---------------------------------------------------------------------------- arguments
def _objpert_params(clip: float, beta: float, lam: float, sigma: float) -> tuple[float, float]:
    r"""Check ``(L, β, λ, σ)`` and return ``(c, s) = (−log(1 − β/λ), L/σ)``."""
    clip = check_positive(clip, "clip", allow_inf=False)
    beta = check_nonnegative(beta, "beta", allow_inf=False)
    lam = check_positive(lam, "lam", allow_inf=False)
    if not lam > beta:
        raise ValueError(f"lam must exceed beta (λ > β), got lam={lam!r} and beta={beta!r}.")
    sigma = check_positive(sigma, "sigma", allow_inf=False)
    return -math.log1p(-beta / lam), clip / sigma


def _output_noise_param(lam: float, tau: float, sigma_out: float) -> float:
    r"""Check ``(τ, σ_out)`` and return ``s_g = 2τ/(λ σ_out)`` (λ already checked)."""
    tau = check_nonnegative(tau, "tau", allow_inf=False)
    sigma_out = check_positive(sigma_out, "sigma_out", allow_inf=False)
    return 2.0 * tau / (float(lam) * sigma_out)


def _check_epsilon(epsilon: float, name: str = "epsilon") -> float:
    r"""A real ε (negative allowed: a profile is defined on the whole line; NaN refused)."""
    try:
        value = float(epsilon)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{name} must be a real number, got {epsilon!r}.") from err
    if isinstance(epsilon, bool) or math.isnan(value):
        raise ValueError(f"{name} must be a real number, got {epsilon!r}.")
    return value


def _check_orders(alpha: float | np.ndarray) -> np.ndarray:
    r"""``α`` as a float64 array, every entry finite and ``> 1``."""
    try:
        arr = np.asarray(alpha, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise ValueError(f"alpha must be a number or an array of numbers, got {alpha!r}.") from err
    if isinstance(alpha, bool) or arr.size == 0 or not np.all(np.isfinite(arr) & (arr > 1.0)):
        raise ValueError(f"alpha must be finite and exceed 1 (every entry), got {alpha!r}.")
    return arr


def _scalar_or_array(value: np.ndarray, like: float | np.ndarray) -> float | np.ndarray:
    return float(value) if np.ndim(like) == 0 else value


# ---------------------------------------------------------------------------- Gaussian profile
def _gaussian_profile(x: float, s: float) -> float:
    r"""``δ_G(x; s)`` for a real ``x`` and ``s > 0``.

    For ``x ≥ 0`` this is the μ-GDP profile with μ = s (``gdp_delta``, log space). For
    ``x < 0`` the symmetry of the Gaussian pair gives ``δ_G(x) = 1 − e^x + e^x δ_G(−x)``,
    which never cancels.
    """
    if x >= 0.0:
        return gdp_delta(s, x)
    return -math.expm1(x) + math.exp(x) * gdp_delta(s, -x)


def gaussian_profile_delta(epsilon: float, *, sensitivity_over_sigma: float) -> float:
    r"""The privacy profile of the Gaussian mechanism, ``δ_G(ε; s)``, for any real ε.

    ``δ_G(ε; s) = Φ(−ε/s + s/2) − e^ε Φ(−ε/s − s/2)`` with ``s = Δ/σ``. For ObjPert it
    is a lower bound (the paper's Lemma 3.4: the linear loss ``ℓ = xᵀθ`` attains it), so
    no valid upper bound on ObjPert's δ may fall below it.

    Args:
        epsilon: ``ε`` (any real number; ``math.inf`` gives 0, ``-math.inf`` gives 1).
        sensitivity_over_sigma: ``s = Δ/σ > 0``, finite.

    Returns:
        ``δ_G(ε; s) ∈ [0, 1]``.
    """
    epsilon = _check_epsilon(epsilon)
    s = check_positive(sensitivity_over_sigma, "sensitivity_over_sigma", allow_inf=False)
    if epsilon == -math.inf:
        return 1.0
    return _gaussian_profile(epsilon, s)


# ---------------------------------------------------------------------------- RDP
def _log_two_phi(x: np.ndarray) -> np.ndarray:
    r"""``log(2Φ(x))`` for ``x > 0``: ``log1p(erf(x/√2))`` near 0 (where ``log 2 +
    log Φ(x)`` would cancel), ``log 2 + log_ndtr(x)`` beyond."""
    small = x < 1.0
    return np.where(small, np.log1p(erf(np.where(small, x, 0.0) * _SQRT_HALF)), _LOG2 + log_ndtr(x))


def objpert_rdp(
    alpha: float | np.ndarray, *, clip: float, beta: float, lam: float, sigma: float
) -> float | np.ndarray:
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


def amp_rdp(
    alpha: float | np.ndarray,
    *,
    clip: float,
    beta: float,
    lam: float,
    sigma: float,
    tau: float,
    sigma_out: float,
) -> float | np.ndarray:
    r"""Rényi-DP curve of AMP (the paper's Theorem 4.1, spec R2).

    ``ε_AMP(α) = ε_OP(α) + α (2τ/λ)²/(2σ_out²)``: ObjPert composed with the Gaussian
    output noise, whose sensitivity given the exact perturbed minimiser is ``2τ/λ``.

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
    delta: float,
    *,
    clip: float,
    beta: float,
    lam: float,
    sigma: float,
    orders: tuple[float, ...] = DEFAULT_RDP_ORDERS,
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
        np.asarray(orders, dtype=np.float64),
        clip=clip, beta=beta, lam=lam, sigma=sigma, tau=tau, sigma_out=sigma_out,
    )
    return rdp_curve_epsilon(values, orders, delta)[0]


# ---------------------------------------------------------------------------- privacy profiles
def _objpert_profile(epsilon: float, c: float, s: float) -> float:
    eps_star = c + s * s / 2.0
    if epsilon >= eps_star:
        return 2.0 * _gaussian_profile(epsilon - c, s)
    # 1 − 2 e^{ε − c} Φ(−s); the exponent is < s²/2 + log Φ(−s) + log 2 < 0 here
    return -math.expm1(_LOG2 + (epsilon - c) + float(log_ndtr(-s)))


def objpert_delta(epsilon: float, *, clip: float, beta: float, lam: float, sigma: float) -> float:
    r"""Privacy profile ``δ(ε)`` of objective perturbation (the paper's Appendix D.2; spec P1).

    With ``ε* = c + s²/2``: ``δ(ε) = 2 δ_G(ε − c; s)`` for ``ε ≥ ε*`` and
    ``δ(ε) = 1 − 2 e^{ε − c} Φ(−s)`` for ``ε < ε*``. This is ``E[(1 − e^{ε − ω})₊]`` for
    the dominating privacy loss ``ω = c + s²/2 + s|Z|``: continuous, non-increasing, at
    least the Gaussian lower bound ``δ_G(ε; s)``. The main text's Theorem 3.1 differs
    (ε + c instead of ε − c, ``e^{L²/σ²}``) and is not a valid bound (spec E4.1).

    Args:
        epsilon: ``ε``, any real number (``math.inf`` gives 0).
        clip: ``L > 0``.
        beta: ``β ≥ 0``.
        lam: ``λ > β``.
        sigma: ``σ > 0``.

    Returns:
        The smallest ``δ ∈ [0, 1]`` for which one ObjPert release is ``(ε, δ)``-DP (for
        this dominating pair).
    """
    c, s = _objpert_params(clip, beta, lam, sigma)
    epsilon = _check_epsilon(epsilon)
    if epsilon == math.inf:
        return 0.0
    if epsilon == -math.inf:
        return 1.0
    return _objpert_profile(epsilon, c, s)


def _amp_profile(epsilon: float, c: float, s: float, s_g: float) -> float:
    r"""``2 ∫₀^∞ φ(z) δ_G(ε − ε* − s z; s_g) dz``, as (P1) plus a quadrature of the excess.

    ``δ_G(x; s_g) = (1 − e^x)₊ + e^{min(x, 0)} δ_G(|x|; s_g)`` (the symmetry of the Gaussian
    pair), and the first term integrates to ``objpert_delta`` in closed form. What is left,
    ``2 ∫ φ(z) e^{min(x, 0)} δ_G(|x|; s_g) dz`` with ``x = ε − ε* − s z``, is positive, has
    no cancellation, and lives around ``z_k = (ε − ε*)/s`` (a kink there) within
    ``(s_g²/2 + a few s_g)/s``, and in the bulk of ``φ``; those are ``quad``'s break
    points. ``φ(z) < 1e-300`` beyond ``z = 40``, where the range stops.
    """
    base = _objpert_profile(epsilon, c, s)
    if s_g == 0.0:
        return base
    eps_star = c + s * s / 2.0
    inv_sqrt_2pi = 1.0 / math.sqrt(2.0 * math.pi)

    def excess(z: float) -> float:
        x = epsilon - eps_star - s * z
        return inv_sqrt_2pi * math.exp(-0.5 * z * z + min(x, 0.0)) * gdp_delta(s_g, abs(x))

    z_k = (epsilon - eps_star) / s
    offsets = [0.0] + [(s_g * s_g / 2.0 + w * s_g) / s for w in (0.0, 3.0, 10.0)]
    candidates = [1.0, 4.0] + [z_k + sign * o for o in offsets for sign in (-1.0, 1.0)]
    points = sorted({p for p in candidates if 0.0 < p < _Z_MAX})
    with warnings.catch_warnings():
        # round-off reports come from pieces far below the total; their share is negligible
        warnings.simplefilter("ignore", IntegrationWarning)
        extra = quad(excess, 0.0, _Z_MAX, points=points, epsabs=0.0, epsrel=1e-12, limit=500)[0]
    return min(base + 2.0 * extra, 1.0)


def amp_delta(
    epsilon: float,
    *,
    clip: float,
    beta: float,
    lam: float,
    sigma: float,
    tau: float,
    sigma_out: float,
) -> float:
    r"""Privacy profile ``δ_AMP(ε)`` of one AMP release (spec P3).

    AMP is ObjPert followed by a Gaussian of sensitivity ``2τ/λ`` and noise ``σ_out``; the
    privacy losses of the two dominating pairs add, so
    ``δ_AMP(ε) = E[(1 − e^{ε − ω − ω_g})₊] = 2 ∫₀^∞ φ(z) δ_G(ε − c − s²/2 − s z; s_g) dz``,
    ``s_g = 2τ/(λ σ_out)``, evaluated by ``scipy.integrate.quad`` (relative tolerance
    1e-12). ``τ = 0`` gives ``objpert_delta``.

    Args:
        epsilon: ``ε``, any real number (``math.inf`` gives 0).
        clip: ``L > 0``.
        beta: ``β ≥ 0``.
        lam: ``λ > β``.
        sigma: ``σ > 0``.
        tau: ``τ ≥ 0``.
        sigma_out: ``σ_out > 0``.

    Returns:
        ``δ_AMP(ε) ∈ [0, 1]``.
    """
    c, s = _objpert_params(clip, beta, lam, sigma)
    s_g = _output_noise_param(lam, tau, sigma_out)
    epsilon = _check_epsilon(epsilon)
    if epsilon == math.inf:
        return 0.0
    if epsilon == -math.inf:
        return 1.0
    return _amp_profile(epsilon, c, s, s_g)


def _profile_epsilon(profile: Callable[[float], float], delta: float, upper: float) -> float:
    r"""The ``ε ≥ 0`` with ``profile(ε) = δ`` (``brentq`` on ``log δ(ε)``, decreasing);
    0 when ``profile(0) ≤ δ``. ``upper`` is a first guess of an ε with ``δ(ε) ≤ δ``."""
    log_delta = math.log(delta)

    def excess(epsilon: float) -> float:
        value = profile(epsilon)
        return (math.log(value) if value > 0.0 else -math.inf) - log_delta

    if excess(0.0) <= 0.0:
        return 0.0
    upper = max(upper, 1e-3)
    while excess(upper) > 0.0:
        upper *= 2.0
    return float(brentq(excess, 0.0, upper, xtol=1e-13, rtol=1e-13, maxiter=500))


def objpert_epsilon(delta: float, *, clip: float, beta: float, lam: float, sigma: float) -> float:
    r"""The smallest ``ε ≥ 0`` at which one ObjPert release is ``(ε, δ)``-DP (profile P1).

    The profile is strictly decreasing, so its inverse is explicit per branch: for
    ``δ < δ(ε*)``, ``2 δ_G(ε − c; s) = δ`` gives ``ε = c + gdp_epsilon(s, δ/2)`` (the
    μ-GDP inverse, itself ``brentq`` on ``log δ``); above, ``1 − 2 e^{ε − c} Φ(−s) = δ``
    gives ``ε = c + log((1 − δ)/(2Φ(−s)))``. Floored at 0.

    Args:
        delta: ``δ ∈ (0, 1)``.
        clip: ``L > 0``.
        beta: ``β ≥ 0``.
        lam: ``λ > β``.
        sigma: ``σ > 0``.

    Returns:
        ``ε ≥ 0``.
    """
    c, s = _objpert_params(clip, beta, lam, sigma)
    delta = check_delta(delta)
    if delta < _objpert_profile(c + s * s / 2.0, c, s):
        epsilon = c + gdp_epsilon(s, delta / 2.0)
    else:
        epsilon = c + math.log1p(-delta) - _LOG2 - float(log_ndtr(-s))
    return max(epsilon, 0.0)


def amp_epsilon(
    delta: float,
    *,
    clip: float,
    beta: float,
    lam: float,
    sigma: float,
    tau: float,
    sigma_out: float,
) -> float:
    r"""The smallest ``ε ≥ 0`` at which one AMP release is ``(ε, δ)``-DP (profile P3).

    ``brentq`` on ``log δ_AMP(ε) = log δ`` (``δ_AMP`` decreases in ε), bracketed by 0 and
    the (looser) RDP value ``amp_rdp_epsilon``.

    Args:
        delta: ``δ ∈ (0, 1)``.
        clip: ``L > 0``.
        beta: ``β ≥ 0``.
        lam: ``λ > β``.
        sigma: ``σ > 0``.
        tau: ``τ ≥ 0``.
        sigma_out: ``σ_out > 0``.

    Returns:
        ``ε ≥ 0``.
    """
    c, s = _objpert_params(clip, beta, lam, sigma)
    s_g = _output_noise_param(lam, tau, sigma_out)
    delta = check_delta(delta)
    if s_g == 0.0:
        return objpert_epsilon(delta, clip=clip, beta=beta, lam=lam, sigma=sigma)
    upper = amp_rdp_epsilon(delta, clip=clip, beta=beta, lam=lam, sigma=sigma, tau=tau, sigma_out=sigma_out)
    return _profile_epsilon(lambda e: _amp_profile(e, c, s, s_g), delta, 1.001 * upper)


# ---------------------------------------------------------------------------- classic bound
def kifer_delta(epsilon: float, *, clip: float, beta: float, lam: float, sigma: float) -> float:
    r"""The smallest δ that the classic theorem of Kifer, Smith & Thakurta (2012) certifies.

    Their Theorem (the paper's Thm. 2.8): ObjPert is ``(ε, δ)``-DP when ``λ ≥ 2β/ε`` and
    ``σ ≥ L √(8 log(2/δ) + 4ε)/ε``. For given ``(σ, λ, ε)`` the second condition is
    ``log(2/δ) ≤ (ε²σ²/L² − 4ε)/8``, so the smallest certified δ is
    ``2 exp(−(ε²σ²/L² − 4ε)/8)``, capped at 1; when ``ε ≤ 0`` or ``λ < 2β/ε`` the
    theorem certifies nothing and the result is the trivial ``δ = 1``. For comparison
    only: it is far looser than ``objpert_delta``.

    Args:
        epsilon: ``ε`` (any real number; only ``ε > 0`` can give ``δ < 1``).
        clip: ``L > 0``.
        beta: ``β ≥ 0``.
        lam: ``λ > β``.
        sigma: ``σ > 0``.

    Returns:
        ``δ ∈ (0, 1]``.
    """
    _objpert_params(clip, beta, lam, sigma)
    epsilon = _check_epsilon(epsilon)
    if epsilon <= 0.0 or lam * epsilon < 2.0 * beta:
        return 1.0
    if epsilon == math.inf:
        return 0.0
    exponent = -(epsilon * epsilon * sigma * sigma / (clip * clip) - 4.0 * epsilon) / 8.0
    return min(1.0, 2.0 * math.exp(exponent))


# ---------------------------------------------------------------------------- calibration
def _sigma_for_epsilon(
    epsilon: float, delta: float, *, clip: float, beta: float, lam: float, tau: float, sigma_out: float
) -> float | None:
    r"""The smallest σ whose AMP run has RDP-grid ``ε ≤ epsilon`` at ``delta``, or ``None``.

    ``ε(σ)`` decreases in σ towards the ε of the curve ``c + α s_g²/2`` (σ = ∞); when that
    limit already exceeds the target, no σ works at this λ.
    """
    c = -math.log1p(-beta / lam)
    s_g = 2.0 * tau / (lam * sigma_out)
    orders = np.asarray(DEFAULT_RDP_ORDERS)
    if rdp_curve_epsilon(c + orders * (s_g * s_g / 2.0), orders, delta)[0] >= epsilon:
        return None

    def excess(log_sigma: float) -> float:
        return amp_rdp_epsilon(
            delta, clip=clip, beta=beta, lam=lam, sigma=math.exp(log_sigma), tau=tau, sigma_out=sigma_out
        ) - epsilon

    lo = hi = math.log(clip)
    while excess(hi) > 0.0:
        hi += math.log(2.0)
    while excess(lo) <= 0.0:
        lo -= math.log(2.0)
    return math.exp(brentq(excess, lo, hi, xtol=1e-12, rtol=1e-12, maxiter=500))


def calibrate_amp(
    epsilon: float,
    delta: float,
    *,
    clip: float,
    beta: float,
    sigma_out: float,
    tau: float,
    factor: float = 1.3,
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
            sigma = _sigma_for_epsilon(
                epsilon, delta, clip=clip, beta=beta, lam=lam, tau=tau, sigma_out=sigma_out
            )
            if sigma is not None and sigma <= factor * sigma_gauss:
                return sigma, lam
    raise ValueError(
        f"calibrate_amp found no lambda with sigma <= factor * sigma_G within {_MAX_LAMBDA_STEPS} steps; "
        "increase factor or sigma_out, or decrease tau."
    )
