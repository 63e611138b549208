r"""Privacy profiles δ(ε) of ObjPert and AMP, their inverses ε(δ), and two bounds to compare with.

The profiles are tight for the dominating privacy loss ``ω = c + s²/2 + s|Z|`` (Appendix D.2;
AMP adds the output Gaussian's loss). ``gaussian_profile_delta`` is the lower bound that no
valid ObjPert bound may fall below, and ``kifer_delta`` the classic, much looser certificate
of Kifer et al. (2012).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable

from scipy.special import log_ndtr

from botorch_dp.privacy.analysis.gdp import gdp_delta, gdp_epsilon
from botorch_dp.privacy.analysis.objective_perturbation._params import (
    _LOG2,
    _check_epsilon,
    _objpert_params,
    _output_noise_param,
)
from botorch_dp.privacy.analysis.objective_perturbation.rdp_curves import amp_rdp_epsilon
from botorch_dp.privacy.checks import check_delta, check_positive

__all__ = ["amp_delta", "amp_epsilon", "gaussian_profile_delta", "kifer_delta", "objpert_delta", "objpert_epsilon"]

_Z_MAX = 40.0  # φ(z) < 1e-300 beyond: the half-normal integrals of (P3) stop here


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
    from scipy.integrate import IntegrationWarning, quad

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
    epsilon: float, *, clip: float, beta: float, lam: float, sigma: float, tau: float, sigma_out: float
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
    from scipy.optimize import brentq

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
    delta: float, *, clip: float, beta: float, lam: float, sigma: float, tau: float, sigma_out: float
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
