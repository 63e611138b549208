r"""Gaussian differential privacy (GDP): composition and conversion to (ε, δ)-DP.

Pure functions on floats, following Dong, Roth & Su (2019), "Gaussian Differential
Privacy". A mechanism is μ-GDP when distinguishing neighbouring datasets from its
output is no easier than telling N(0, 1) from N(μ, 1). Its privacy profile is

    δ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2),

and μ-GDP holds exactly when the mechanism is (ε, δ(ε))-DP for every ε ≥ 0. The
Gaussian mechanism with ℓ2-sensitivity Δ and noise N(0, σ² I) is (Δ/σ)-GDP, and T such
mechanisms compose to sqrt(Σ μ_t²)-GDP (Sopa et al., Theorem 3.1).

``μ = math.inf`` stands for a non-private release: its ε is infinite at every δ < 1.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from scipy.special import log_expit, log_ndtr, ndtri, ndtri_exp

from botorch_dp.privacy.checks import (
    check_delta,
    check_nonnegative,
    check_nonnegative_int,
    check_positive,
    check_positive_int,
)

__all__ = [
    "compose_gdp",
    "gaussian_noise_std_for_mu",
    "gdp_delta",
    "gdp_epsilon",
    "gdp_mu",
    "gdp_mu_from_noise",
    "pure_dp_to_gdp_mu",
]


def _log_gdp_delta(mu: float, epsilon: float) -> float:
    r"""log δ(ε) for finite positive μ and finite ε ≥ 0.

    Both terms of δ(ε) underflow or cancel for large ε, and e^ε overflows for
    ε > 709. Writing δ = Φ(a) (1 − exp(ε + log Φ(b) − log Φ(a))) with
    a = −ε/μ + μ/2 and b = −ε/μ − μ/2 keeps everything in log space; the exponent is
    ≤ 0 because δ(ε) ≥ 0, and ``expm1`` keeps the difference accurate.
    """
    log_phi_a = float(log_ndtr(-epsilon / mu + mu / 2.0))
    log_phi_b = float(log_ndtr(-epsilon / mu - mu / 2.0))
    exponent = min(epsilon + log_phi_b - log_phi_a, 0.0)
    if exponent == 0.0:
        return -math.inf
    return log_phi_a + math.log(-math.expm1(exponent))


def compose_gdp(mus: Iterable[float]) -> float:
    r"""Compose GDP guarantees: μ = sqrt(Σ_t μ_t²).

    Args:
        mus: An iterable of per-mechanism GDP parameters μ_t ≥ 0 (``math.inf`` allowed
            for a non-private step).

    Returns:
        The GDP parameter of the adaptive composition; 0.0 for an empty iterable and
        ``math.inf`` if any μ_t is infinite.
    """
    squares = []
    for mu_t in mus:
        mu_t = check_nonnegative(mu_t, "mu_t")
        if math.isinf(mu_t):
            return math.inf
        squares.append(mu_t * mu_t)
    return math.sqrt(math.fsum(squares))


def gdp_delta(mu: float, epsilon: float) -> float:
    r"""The privacy profile δ(ε) of a μ-GDP mechanism.

    δ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2), evaluated in log space so that a
    large ε neither overflows nor cancels to a negative number.

    Args:
        mu: The GDP parameter μ ≥ 0 (``math.inf`` allowed; 0 releases nothing).
        epsilon: The privacy loss ε ≥ 0 (``math.inf`` allowed).

    Returns:
        The smallest δ for which the mechanism is (ε, δ)-DP, a float in [0, 1).
        It is 1.0 for μ = inf and finite ε, and 0.0 for μ = 0 or for ε = inf and
        finite μ.
    """
    mu = check_nonnegative(mu, "mu")
    epsilon = check_nonnegative(epsilon, "epsilon")
    if math.isinf(mu):
        return 0.0 if math.isinf(epsilon) else 1.0
    if mu == 0.0 or math.isinf(epsilon):
        return 0.0
    return math.exp(_log_gdp_delta(mu, epsilon))


def gdp_epsilon(mu: float, delta: float) -> float:
    r"""The smallest ε for which a μ-GDP mechanism is (ε, δ)-DP.

    Solves δ(ε) = δ for ε with ``scipy.optimize.brentq`` on log δ(ε), which is
    decreasing in ε. The bracket's upper end is the zCDP bound
    μ²/2 + μ sqrt(2 log(1/δ)), which always over-estimates ε.

    Args:
        mu: The GDP parameter μ ≥ 0 (``math.inf`` allowed; 0, e.g. no steps yet,
            gives ε = 0).
        delta: The target δ in (0, 1).

    Returns:
        ε ≥ 0; 0.0 when δ ≥ δ(0) = 2Φ(μ/2) − 1 (so for μ = 0), and ``math.inf``
        when μ = inf.
    """
    from scipy.optimize import brentq

    mu = check_nonnegative(mu, "mu")
    delta = check_delta(delta)
    if math.isinf(mu):
        return math.inf
    if mu == 0.0:
        return 0.0
    log_delta = math.log(delta)
    if _log_gdp_delta(mu, 0.0) <= log_delta:
        return 0.0

    def excess(epsilon: float) -> float:
        return _log_gdp_delta(mu, epsilon) - log_delta

    upper = 0.5 * mu * mu + mu * math.sqrt(-2.0 * log_delta)
    while excess(upper) > 0.0:  # guard only: the zCDP bound already suffices
        upper *= 2.0
    if excess(upper) == 0.0:
        return upper
    return float(brentq(excess, 0.0, upper, xtol=1e-14, rtol=1e-14, maxiter=500))


def gdp_mu(epsilon: float, delta: float) -> float:
    r"""The largest μ for which μ-GDP implies (ε, δ)-DP (inverse of ``gdp_epsilon``).

    δ(ε) is increasing in μ, so the root of δ_μ(ε) = δ is found with
    ``scipy.optimize.brentq`` on log δ_μ(ε) over μ.

    Args:
        epsilon: The target ε ≥ 0 (``math.inf`` gives μ = inf).
        delta: The target δ in (0, 1).

    Returns:
        μ > 0 such that ``gdp_epsilon(mu, delta) == epsilon`` (up to root-finding
        tolerance). For ε = 0 this is the closed form 2 Φ⁻¹((1 + δ)/2).
    """
    from scipy.optimize import brentq

    epsilon = check_nonnegative(epsilon, "epsilon")
    delta = check_delta(delta)
    if math.isinf(epsilon):
        return math.inf
    if epsilon == 0.0:
        return float(2.0 * ndtri(0.5 * (1.0 + delta)))
    log_delta = math.log(delta)

    def excess(mu: float) -> float:
        return _log_gdp_delta(mu, epsilon) - log_delta

    # Two lower bounds on the root: the μ whose profile reaches δ already at ε = 0,
    # and the μ at which the (looser) zCDP bound μ²/2 + μ sqrt(2 log(1/δ)) equals ε,
    # written in a form that does not cancel for small ε.
    two_log = -2.0 * log_delta
    lower = max(
        float(2.0 * ndtri(0.5 * (1.0 + delta))),
        2.0 * epsilon / (math.sqrt(two_log) + math.sqrt(two_log + 2.0 * epsilon)),
    )
    upper = 2.0 * lower
    while excess(upper) < 0.0:
        lower, upper = upper, 2.0 * upper
    if excess(lower) >= 0.0:
        return lower
    return float(brentq(excess, lower, upper, xtol=1e-14, rtol=1e-14, maxiter=500))


def gaussian_noise_std_for_mu(sensitivity: float, mu: float, steps: int = 1) -> float:
    r"""Noise standard deviation that makes ``steps`` Gaussian releases μ-GDP in total.

    Each release with ℓ2-sensitivity Δ and noise σ is (Δ/σ)-GDP; T of them compose to
    (sqrt(T) Δ/σ)-GDP, so σ = Δ sqrt(T) / μ. With Δ = 2B/n this is DP-GIBO's
    2B sqrt(T)/(n μ).

    Args:
        sensitivity: The ℓ2-sensitivity Δ > 0 of each release.
        mu: The total GDP budget μ > 0 (``math.inf`` gives σ = 0).
        steps: The number T ≥ 1 of releases.

    Returns:
        The per-release noise standard deviation σ ≥ 0.
    """
    sensitivity = check_positive(sensitivity, "sensitivity", allow_inf=False)
    mu = check_positive(mu, "mu")
    steps = check_positive_int(steps, "steps")
    if math.isinf(mu):
        return 0.0
    return sensitivity * math.sqrt(steps) / mu


def gdp_mu_from_noise(sensitivity: float, noise_std: float, steps: int = 1) -> float:
    r"""Total GDP parameter of ``steps`` Gaussian releases: μ = sqrt(T) Δ / σ.

    Args:
        sensitivity: The ℓ2-sensitivity Δ > 0 of each release.
        noise_std: The noise standard deviation σ ≥ 0 of each release (0 gives inf).
        steps: The number T ≥ 0 of releases.

    Returns:
        The GDP parameter μ of the whole sequence (0.0 when T = 0).
    """
    sensitivity = check_positive(sensitivity, "sensitivity", allow_inf=False)
    noise_std = check_nonnegative(noise_std, "noise_std")
    steps = check_nonnegative_int(steps, "steps")
    if steps == 0:
        return 0.0
    if noise_std == 0.0:
        return math.inf
    return math.sqrt(steps) * sensitivity / noise_std


def pure_dp_to_gdp_mu(epsilon: float) -> float:
    r"""The smallest μ for which an ε-DP mechanism is μ-GDP: μ = 2 Φ⁻¹(e^ε / (1 + e^ε)).

    The trade-off function of ε-DP, f_ε(α) = max(0, 1 − e^ε α, e^(−ε)(1 − α)), and the
    Gaussian one, G_μ(α) = Φ(Φ⁻¹(1 − α) − μ), are both symmetric; G_μ ≤ f_ε everywhere
    exactly when it holds at the symmetric point α* = 1/(1 + e^ε) of f_ε, where
    f_ε(α*) = α*, which gives μ = Φ⁻¹(1 − α*) − Φ⁻¹(α*) = 2 Φ⁻¹(e^ε / (1 + e^ε))
    (Dong, Roth & Su 2019, ε-DP as f-DP). The conversion is valid for any ε-DP release
    (e.g. an exponential mechanism) and conservative: μ-GDP allows more than ε-DP
    away from α*. Values: ε = 0.1 → 0.12531, 1 → 1.23204.

    Computed as μ = −2 Φ⁻¹(exp(log σ(−ε))) with σ the logistic function, which stays
    accurate for large ε, where e^ε / (1 + e^ε) rounds to 1.

    Args:
        epsilon: The pure-DP parameter ε ≥ 0 (``math.inf`` allowed, a non-private
            release).

    Returns:
        μ ≥ 0: 0.0 for ε = 0 and ``math.inf`` for ε = inf.
    """
    epsilon = check_nonnegative(epsilon, "epsilon")
    if math.isinf(epsilon):
        return math.inf
    if epsilon == 0.0:
        return 0.0
    return float(-2.0 * ndtri_exp(log_expit(-epsilon)))
