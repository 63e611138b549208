r"""The one module that draws privacy noise: every Gaussian release (``release_gaussian``,
``release_goe``, and AMP's output through ``release_on_grid``: the exact discrete Gaussian on a
public power-of-two grid), Gumbel draws, and AMP's perturbation ``b`` (``_gaussian``,
continuous, never released), from the operating system's entropy unless a caller seeded a
generator, each preceded by its release's record.

``_charged`` records a release's cost through its charged step's meter immediately before
the draw (``PrivacyLedger.charge``); every draw of the package goes through this module
(``tests/privacy/test_boundary.py`` checks that no other module draws; the integer sampler
``_discrete_gaussian`` only transforms the random words given to it here). A released value
is ``γ·(M + k)`` with integers ``M = round(m/γ)`` and ``k ~ N_Z(0, s²)``, exact in float64, so
its low-order bits carry nothing about ``m`` (``analysis.discrete_gaussian``). The
OS-entropy float samplers below serve the Gumbel draws and AMP's unreleased ``b``.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable

import torch
from torch import Tensor

from botorch_dp.privacy.analysis.discrete_gaussian import DiscreteGaussianNoise, calibrate_discrete_gaussian
from botorch_dp.privacy.checks import check_positive
from botorch_dp.privacy.ledger.events import ValidationEvent
from botorch_dp.privacy.ledger.meter import Meter
from botorch_dp.privacy.mechanisms._discrete_gaussian import discrete_gaussian_from_words


def _charged(meter: Meter | None, part: str, event: ValidationEvent) -> None:
    r"""Record a release's cost through its step's meter; called immediately before the draw.

    A meter refuses an event above its bound: then nothing is recorded or drawn. (The exact
    discrete Gaussian of ``release_gaussian`` has no truncation, so no per-release ``μ`` is
    refused here; the continuous ``_gaussian`` still refuses ``μ > MAX_OS_ENTROPY_RELEASE_MU``
    on its OS-entropy path.)
    """
    if meter is not None:
        meter.record(part, event)


def _gaussian(
    size: int,
    std: float,
    generator: torch.Generator | None,
    secure_rng: bool,
    dtype: torch.dtype,
    device: torch.device | None,
    *,
    release_mu: float | None = None,
) -> Tensor:
    r"""``size`` draws of continuous ``N(0, std²)``: AMP's perturbation ``b`` (never released) and
    ``sample_goe``; every released Gaussian goes through ``release_on_grid``.

    ``generator=None`` (the default everywhere) or ``secure_rng`` draws from the operating
    system's entropy (``os_entropy_normal``); a generator is used only when the caller seeded
    one explicitly (tests, reproductions), which ``seeding.noise_generator`` warns about.

    ``release_mu``, the release's per-release GDP parameter ``μ = Δ/std``, is optional: when a
    caller passes it, a finite ``μ > MAX_OS_ENTROPY_RELEASE_MU`` is refused on the OS-entropy
    path before anything is drawn (see ``os_entropy_normal``). A caller that does not pass it
    is not checked. ``std = 0`` (``μ = inf``) returns zeros and draws nothing.
    """
    if std == 0.0:
        return torch.zeros(size, dtype=dtype, device=device)
    if secure_rng or generator is None:
        w = os_entropy_normal(size, dtype=dtype, device=device, release_mu=release_mu)
    elif device is not None and generator.device != torch.device(device):
        # a generator lives on one device: draw there, then move (same numbers everywhere)
        w = torch.randn(size, generator=generator, dtype=dtype, device=generator.device).to(device)
    else:
        w = torch.randn(size, generator=generator, dtype=dtype, device=device)
    return std * w


#: Leading zero bits beyond which the OS-entropy uniforms stop counting: ``u`` is then
#: ``2⁻¹⁰⁷⁴``, the smallest positive float64 (probability ``2⁻¹⁰⁷³`` per draw).
_OS_ENTROPY_MAX_ZEROS = 1072


#: The largest ``|Z|`` that ``os_entropy_normal`` can return, ``−Φ⁻¹(2⁻¹⁰⁷⁴) = 38.4674…``.
OS_ENTROPY_NORMAL_MAX_ABS = 38.467405617144344


#: The largest finite per-release GDP parameter ``μ = Δ/σ`` that ``os_entropy_normal``
#: (and ``_gaussian`` on its OS-entropy path) accepts when told the release's ``μ``:
#: the truncation mass ``Φ̄(38.467 − 26) ≈ 5·10⁻³⁶`` is below ``10⁻³⁰`` (see ``os_entropy_normal``).
MAX_OS_ENTROPY_RELEASE_MU = 26.0


_SIGN_BIT = -(2**63)  # int64 with only bit 63 set


_EXPONENT_BITS = 0x7FF << 52


_LOW_52, _LOW_53 = 2**52 - 1, 2**53 - 1


def _os_entropy_words(count: int) -> Tensor:
    r"""``count`` int64 words of 64 random bits each from ``os.urandom``."""
    if count == 0:
        return torch.zeros(0, dtype=torch.int64)
    return torch.frombuffer(bytearray(os.urandom(8 * count)), dtype=torch.int64)


def _leading_zeros(field: Tensor) -> Tensor:
    r"""Leading zero bits of 53-bit fields (``0 <= field < 2^53``: the float64 conversion is
    exact, so ``frexp`` gives the bit length)."""
    return 53 - torch.frexp(field.to(torch.float64)).exponent.to(torch.int64)


def _half_uniform_from_bits(zeros: Tensor, mantissa: Tensor) -> Tensor:
    r"""``u = 2^{-(k+2)} (1 + m 2^{-52})`` for ``k = zeros`` (``0 <= k <= 1072``) and 52-bit ``m``.

    Built from its bit pattern, so ``u`` is exact for ``k <= 1020`` (normal floats) and
    correctly rounded to the subnormal grid beyond; ``u`` lies in ``[2⁻¹⁰⁷⁴, 1/2)``.
    """
    excess = (zeros - 1020).clamp(min=0)  # binades below the normal range, at most 52
    normal = (((1021 - zeros + excess) << 52) | mantissa).view(torch.float64)
    return normal * ((1023 - excess) << 52).view(torch.float64)


def _half_uniform_from_words(a: Tensor, b: Tensor) -> tuple[Tensor, Tensor]:
    r"""Uniforms on ``(0, 1/2)`` with full float64 precision near 0, and fair sign bits, from
    two random int64 words per draw (see ``_os_entropy_half_uniform``).

    ``a`` gives the 52 mantissa bits ``m`` and, in bit 63, the sign (returned as an int64
    that is 0 or has only bit 63 set). ``b``'s low 53 bits begin a random bit string whose
    count of leading zeros ``k`` has ``P(k) = 2^{-(k+1)}``; ``u = 2^{-(k+2)} (1 + m 2^{-52})``,
    i.e. ``u`` is uniform on ``(0, 1/2)`` rounded down to 52 bits in its binade. When those
    53 bits are all zero (probability ``2⁻⁵³`` per draw), the string goes on with the low 53
    bits of further words from ``_os_entropy_words``, for just those draws, round after
    round, until a one appears or ``k`` reaches 1072 (``u = 2⁻¹⁰⁷⁴``, at most 20 rounds).
    """
    mantissa, sign, head = a & _LOW_52, a & _SIGN_BIT, b & _LOW_53
    # head >= 1 (k = 53 - bitlen(head) <= 52): head's binade, scaled by 2^-54, is u's binade
    u = ((head.to(torch.float64).view(torch.int64) & _EXPONENT_BITS) | mantissa).view(torch.float64) * 2.0**-54
    all_zero = head == 0
    if bool(all_zero.any()):  # probability size·2^-53; otherwise no branch depends on the draws
        index = all_zero.nonzero().reshape(-1)
        zeros = torch.full_like(index, 53)
        still = torch.arange(index.numel())
        while still.numel() > 0:
            more = _os_entropy_words(still.numel()) & _LOW_53
            zeros[still] += _leading_zeros(more)
            still = still[(more == 0) & (zeros[still] < _OS_ENTROPY_MAX_ZEROS)]
        u[index] = _half_uniform_from_bits(zeros.clamp(max=_OS_ENTROPY_MAX_ZEROS), mantissa[index])
    return u, sign


def _os_entropy_half_uniform(size: int) -> tuple[Tensor, Tensor]:
    r"""``size`` float64 uniforms on ``(0, 1/2)``, exact to 52 bits in every binade down to
    ``2⁻¹⁰⁷⁴``, and ``size`` independent fair signs, from ``os.urandom`` (16 bytes per draw).

    Returns ``(u, sign)``; ``sign`` is an int64 tensor, 0 or ``−2⁶³`` (only bit 63 set).
    See ``_half_uniform_from_words`` for the construction. Its branch for the deep draws
    (past 53 zero bits) is the only Python-level branch that depends on the draws, and it is
    taken with probability ``size·2⁻⁵³``. That is why a whole second word starts the zero
    count: starting it in the 11 spare bits of the first would take the branch for 1 draw in
    2048, and its time would tell whether some ``|Z|`` exceeded 3.3. (Element-wise
    floating-point timing is not addressed.)
    """
    words = _os_entropy_words(2 * size).reshape(2, size)
    return _half_uniform_from_words(words[0], words[1])


def os_entropy_normal(
    size: int,
    *,
    dtype: torch.dtype = torch.float64,
    device: torch.device | None = None,
    release_mu: float | None = None,
) -> Tensor:
    r"""``size`` standard normal draws from the operating system's entropy (inverse CDF).

    ``Z = ±Φ⁻¹(u)`` with a random sign and ``u`` uniform on ``(0, 1/2)`` at full float64
    precision down to ``2⁻¹⁰⁷⁴`` (``_os_entropy_half_uniform``: a geometric binade from
    random bits and 52 random mantissa bits); ``Φ⁻¹`` is ``torch.special.ndtri``, accurate
    to a few ulps over that whole range. The draws are as unpredictable as the OS source
    and are not reproducible. The largest possible magnitude is
    ``OS_ENTROPY_NORMAL_MAX_ABS = −Φ⁻¹(2⁻¹⁰⁷⁴) ≈ 38.47``; the exact normal exceeds it with
    probability ``2Φ̄(38.47) ≈ 10⁻³²³``.

    Truncation and the accepted ``μ``: noise bounded by ``z_max = 38.47`` is not exactly
    Gaussian. For a release with per-release GDP parameter ``μ = Δ/σ``, the outputs that a
    neighbour can produce and the data set itself cannot have mass at most
    ``Φ̄(z_max − μ)`` (one coordinate carrying the whole shift is the worst case); more
    generally, the sampler equals an exact normal draw except with probability ``2⁻¹⁰⁷³``
    per coordinate (up to float64 rounding, which this bound does not cover), so a
    ``d``-coordinate release's trade-off curve is within
    ``Φ̄(Φ⁻¹(1 − d·2⁻¹⁰⁷³) − μ) + d·2⁻¹⁰⁷³`` of ``G_μ``. At ``μ ≤ MAX_OS_ENTROPY_RELEASE_MU
    = 26`` both are below ``10⁻³⁰`` (``Φ̄(12.47) ≈ 5·10⁻³⁶``; the second for any
    ``d ≤ 10¹⁶``). A finite ``release_mu`` above 26 therefore raises ``ValueError`` before
    anything is drawn; ``release_mu=None`` (no ``μ`` given) or ``inf`` is not checked.

    Args:
        size: Number of draws.
        dtype: Output dtype (the draws are made in float64).
        device: Output device (the draws are made on the CPU).
        release_mu: The per-release GDP parameter of the release the draws are for.

    Returns:
        A ``size`` tensor of independent ``N(0, 1)`` draws.
    """
    if release_mu is not None:
        release_mu = check_positive(release_mu, "release_mu (per-release μ)")
        if math.isfinite(release_mu) and release_mu > MAX_OS_ENTROPY_RELEASE_MU:
            raise ValueError(
                f"release_mu (per-release μ) = {release_mu!r} exceeds MAX_OS_ENTROPY_RELEASE_MU = "
                f"{MAX_OS_ENTROPY_RELEASE_MU}: the OS-entropy normal sampler's support ends at "
                f"|Z| = {OS_ENTROPY_NORMAL_MAX_ABS:.2f}, so at this μ the truncation mass "
                "Φ̄(z_max − μ) would exceed 1e-30 and the release would not be μ-GDP. "
                "Nothing was drawn."
            )
    return _normal_from_half_uniform(*_os_entropy_half_uniform(size)).to(dtype=dtype, device=device)


def _normal_from_half_uniform(u: Tensor, sign: Tensor) -> Tensor:
    r"""``Φ⁻¹(u)`` (negative for ``u < 1/2``) with its sign flipped where ``sign`` has bit 63 set."""
    return (torch.special.ndtri(u).view(torch.int64) ^ sign).view(torch.float64)


def os_entropy_uniform(size: int, *, dtype: torch.dtype = torch.float64, device: torch.device | None = None) -> Tensor:
    r"""``size`` uniform draws in the open interval ``(0, 1)`` from the operating system's
    entropy.

    A random half, and in it ``_os_entropy_half_uniform``'s ``u``: the draw is ``u`` (full
    float64 precision down to ``2⁻¹⁰⁷⁴``) or ``1 − u``. Near 1, float64 itself has a step
    of ``2⁻⁵³``, so the upper half is rounded to that grid and capped at ``1 − 2⁻⁵³``.
    That is why the exponential mechanism's Gumbel noise does not go through this
    function: ``−log(−log U)`` of it could not exceed ``36.7`` (see ``os_entropy_gumbel``).
    """
    u, sign = _os_entropy_half_uniform(size)
    draws = torch.where(sign != 0, (1.0 - u).clamp(max=1.0 - 2.0**-53), u)
    return draws.to(dtype=dtype, device=device)


def os_entropy_gumbel(size: int) -> Tensor:
    r"""``size`` float64 Gumbel(0, 1) draws ``G = −log E`` from the operating system's entropy.

    ``E = −log U`` is an Exp(1) draw taken from ``U``'s half directly, without forming
    ``U`` near 1: ``E = −log u`` in the lower half and ``E = −log(1 − u)`` in the upper
    (``u`` from ``_os_entropy_half_uniform``, down to ``2⁻¹⁰⁷⁴``), so both ends of ``E``,
    hence of ``G``, keep full float64 precision. The support is
    ``G ∈ [−log 744.44, 744.44] = [−6.61, 744.44]`` (``744.44 = 1074 ln 2``); 53-bit uniforms
    gave ``[−3.62, 37.43]``.

    Why the support matters (Gumbel-max, ``gumbel_max_index``): with ``G`` confined to an
    interval of width ``W``, a candidate whose log-weight is more than ``W`` below the best
    can never be chosen, while a neighbouring data set (log-weights moved by at most ``ε``)
    may choose it; pure ``ε``-DP then fails. With 53-bit uniforms (``W = 41``) such
    failures had probability of order ``q e^ε 2⁻⁵³`` (``q`` candidates), about ``10⁻¹⁴``
    for ``q = 10`` and ``ε = 1``.
    Here the sampler equals an exact Gumbel draw except with probability ``2⁻¹⁰⁷³`` per
    draw (up to float64 rounding, which this bound does not cover), so the chosen index is
    ``(ε, (1 + e^ε)·q·2⁻¹⁰⁷³)``-DP: ``δ < 10⁻³⁰`` whenever ``ε + ln q ≤ 673``. Nothing is
    refused above that (``gumbel_max_index`` does not see ``ε``); ``ε`` in the hundreds
    makes the selection an argmin anyway.
    """
    return _gumbel_from_half_uniform(*_os_entropy_half_uniform(size))


def _gumbel_from_half_uniform(u: Tensor, sign: Tensor) -> Tensor:
    r"""``−log(−log U)`` for ``U = u`` (``sign`` 0) or ``U = 1 − u`` (``sign`` set), ``u < 1/2``."""
    # −log(1 − u) = u + u²/2 + u³/3 + …: torch's log1p returns 0 for subnormal u, so the
    # series (exact to rounding for u < 2⁻²⁷) stands in for small u
    upper = torch.where(u < 2.0**-27, u + 0.5 * u * u, -torch.log1p(-u))
    return -torch.log(torch.where(sign != 0, upper, -torch.log(u)))


def _gumbel(size: int, generator: torch.Generator | None, secure_rng: bool) -> Tensor:
    r"""``size`` float64 Gumbel(0, 1) draws: the only place selection randomness is drawn
    (OS entropy, ``os_entropy_gumbel``, unless a generator is given, as for ``_gaussian``)."""
    if secure_rng or generator is None:
        return os_entropy_gumbel(size)
    # torch.rand gives multiples of 2^-53 in [0, 1); shifting by half a step keeps 0 and 1 out
    u = torch.rand(size, generator=generator, dtype=torch.float64, device=generator.device).cpu() + 2.0**-54
    return -torch.log(-torch.log(u))


def _goe(
    k: int,
    std: float,
    generator: torch.Generator | None,
    secure_rng: bool,
    dtype: torch.dtype,
    device: torch.device | None,
    *,
    release_mu: float | None = None,
) -> Tensor:
    r"""``std · M`` with ``M = (Z + Zᵀ)/√2``, ``Z`` a ``k x k`` matrix of iid ``N(0, 1)``
    (all zeros, and no draw, when ``std = 0``)."""
    Z = _gaussian(k * k, std, generator, secure_rng, dtype, device, release_mu=release_mu).reshape(k, k)
    return (Z + Z.transpose(0, 1)) / math.sqrt(2.0)


# ---- exact releases on a public grid (the discrete Gaussian) ----

_WORD_MASK = 2**62 - 1  # 62 random bits per int64 word


def _word_source(
    generator: torch.Generator | None, secure_rng: bool, device: torch.device | None = None
) -> Callable[[int], Tensor]:
    r"""A function ``n ↦`` ``n`` uniform int64 words in ``[0, 2^62)`` on ``device`` (default the CPU):
    OS entropy, or the caller's seeded generator (``randint`` over a power-of-two range is exactly
    uniform)."""
    target = torch.device("cpu") if device is None else torch.device(device)
    if secure_rng or generator is None:
        return lambda n: (_os_entropy_words(n) & _WORD_MASK).to(target)
    gen = generator
    return lambda n: torch.randint(0, 2**62, (n,), generator=gen, dtype=torch.int64, device=gen.device).to(target)


def discrete_gaussian_integers(
    count: int,
    scale: int,
    *,
    generator: torch.Generator | None = None,
    secure_rng: bool = False,
    device: torch.device | None = None,
) -> Tensor:
    r"""``count`` exact draws of the discrete Gaussian ``N_Z(0, s²)``, ``P(k) ∝ exp(−k²/(2s²))``.

    Canonne, Kamath & Steinke (2020), Algorithms 1–3, with integer arithmetic only (int64,
    vectorised over the draws: ``_discrete_gaussian``). The bits come from the operating
    system's entropy unless a seeded ``generator`` is given (then the integers are reproducible).
    Running time depends on the draws (not on any data).

    Args:
        count: Number of draws ``>= 0``.
        scale: ``s``, an integer in ``[1, MAX_DISCRETE_GAUSSIAN_SCALE]``.
        generator: A seeded generator for reproducible draws (``None``: OS entropy).
        secure_rng: Draw from OS entropy even if a ``generator`` is given.
        device: Where the integer work runs and the draws are returned (default the CPU).

    Returns:
        A ``count`` int64 tensor on ``device``.
    """
    return discrete_gaussian_from_words(count, scale, _word_source(generator, secure_rng, device), device)


def _on_grid(statistic: Tensor, grid: float) -> Tensor:
    r"""``M = round(m/γ)`` as int64 on the statistic's device (``m/γ`` is exact for a power of two
    ``γ``), clamped to ``|M| <= 2^62``: rounding and clamping are 1-Lipschitz per coordinate.

    The grid keeps ``|M|`` below ``2^52`` whenever the public magnitude bound holds, and then
    ``γ (M + k)`` is exact in float64. Beyond it (a statistic without a bound, far above its
    noise) the float64 value is the integer ``M + k`` rounded to 53 bits: still a function of the
    released integer alone (``|k| < 2^37``: the sampler stops at ``V > 2^12``, so no int64
    overflow)."""
    scaled = statistic.detach().to(dtype=torch.float64) / grid
    if not bool(torch.isfinite(scaled).all()):
        raise ValueError("The statistic to release is not finite; nothing was released.")
    return torch.round(scaled).clamp(-(2.0**62), 2.0**62).to(torch.int64)


def release_gaussian(
    statistic: Tensor,
    *,
    sensitivity: float,
    mu: float,
    generator: torch.Generator | None,
    secure_rng: bool,
    per_coordinate: bool = False,
    magnitude_bound: float | None = None,
) -> tuple[Tensor, DiscreteGaussianNoise | None]:
    r"""Release ``γ (round(m/γ) + k)``, ``k ~ N_Z(0, s²)`` per coordinate: the only Gaussian release.

    The grid ``γ`` and scale ``s`` come from ``calibrate_discrete_gaussian`` (public inputs
    only): the release is ``μ``-GDP for a statistic of L2 sensitivity ``Δ`` over its ``d =
    statistic.numel()`` coordinates (``per_coordinate``: each coordinate is its own 1-D release
    of sensitivity ``Δ`` at ``μ``, e.g. one score each). The integers are exact, and so is the
    released float64 ``γ (M + k)`` (``|M + k| < 2^53`` under the public magnitude bound, see
    ``_on_grid``); the integers are drawn on the statistic's device, and the result is cast to
    its dtype afterwards (post-processing). ``μ = inf`` releases the statistic itself.

    Args:
        statistic: The SENSITIVE tensor ``m`` (any shape).
        sensitivity: ``Δ > 0``, its L2 sensitivity (per coordinate when ``per_coordinate``).
        mu: ``μ > 0``: the release's GDP parameter (``inf``: no noise, non-private).
        generator: A seeded generator (``None``: OS entropy).
        secure_rng: Draw from OS entropy even if a ``generator`` is given.
        per_coordinate: Calibrate each coordinate as a 1-D release.
        magnitude_bound: A public bound on every ``|m_i|`` (see ``discrete_gaussian_grid``).

    Returns:
        ``(released, noise)``: the released tensor (shape and dtype of ``statistic``) and its
        ``DiscreteGaussianNoise`` (``None`` for ``μ = inf``).
    """
    if math.isinf(check_positive(mu, "mu (μ)")):
        return statistic.detach().clone(), None
    dim = 1 if per_coordinate else max(statistic.numel(), 1)
    noise = calibrate_discrete_gaussian(sensitivity=sensitivity, mu=mu, dim=dim, magnitude_bound=magnitude_bound)
    return release_on_grid(statistic, noise, generator=generator, secure_rng=secure_rng), noise


def release_on_grid(
    statistic: Tensor, noise: DiscreteGaussianNoise, *, generator: torch.Generator | None, secure_rng: bool
) -> Tensor:
    r"""Release ``γ (round(m/γ) + k)``, ``k ~ N_Z(0, s²)`` per coordinate, for an already calibrated
    ``noise`` (``γ = noise.grid``, ``s = noise.scale``): the draw of ``release_gaussian``, also used
    by AMP's output (``analysis.objective_perturbation.amp_output_noise``). The caller charges
    ``noise``; the result has ``statistic``'s shape and dtype (see ``release_gaussian``).
    """
    rounded = _on_grid(statistic, noise.grid).reshape(-1)
    k = discrete_gaussian_integers(
        rounded.numel(), noise.scale, generator=generator, secure_rng=secure_rng, device=rounded.device
    )
    released = (rounded + k).to(torch.float64) * noise.grid
    return released.reshape(statistic.shape).to(dtype=statistic.dtype)


def release_goe(
    G: Tensor,
    *,
    sensitivity: float,
    mu: float,
    generator: torch.Generator | None,
    secure_rng: bool,
    magnitude_bound: float | None = None,
) -> tuple[Tensor, DiscreteGaussianNoise | None]:
    r"""Release a symmetric ``k x k`` matrix with discrete GOE-shaped noise on the grid.

    In the coordinates ``w = (G_ii/√2, G_ij (i<j))``, ``‖w − w′‖₂ = ‖G − G′‖_F/√2 ≤ Δ``
    (``sensitivity``). Off-diagonal entries get ``N_Z(0, s²)`` and diagonal entries
    ``N_Z(0, s_d²)`` with ``s_d = isqrt(2s²) + 1 > √2 s`` (the continuous GOE's ``√2``), each
    after rounding to ``γ``; by the triangle inequality the rounding adds at most
    ``‖(1/√2, …, 1, …)‖ = k/√2`` steps, so the calibration uses ``d = k²/2`` and the release
    is ``μ``-GDP. ``μ = inf`` releases ``G``.

    Args:
        G: The SENSITIVE symmetric ``k x k`` matrix.
        sensitivity: ``Δ``, the largest ``‖G − G′‖_F/√2`` (the L2 sensitivity of ``w``).
        mu: ``μ > 0`` (``inf``: no noise).
        generator: A seeded generator (``None``: OS entropy).
        secure_rng: Draw from OS entropy even if a ``generator`` is given.
        magnitude_bound: A public bound on every ``|G_ij|``.

    Returns:
        ``(released, noise)`` as for ``release_gaussian`` (``noise.scale`` is the off-diagonal ``s``).
    """
    if math.isinf(check_positive(mu, "mu (μ)")):
        return G.detach().clone(), None
    k = G.shape[-1]
    noise = calibrate_discrete_gaussian(
        sensitivity=sensitivity, mu=mu, dim=k * k / 2.0, magnitude_bound=magnitude_bound
    )
    rounded = _on_grid(G, noise.grid)
    upper = torch.triu_indices(k, k, offset=1, device=G.device)
    off, diag = (
        discrete_gaussian_integers(count, scale, generator=generator, secure_rng=secure_rng, device=G.device)
        for count, scale in ((upper.shape[1], noise.scale), (k, math.isqrt(2 * noise.scale * noise.scale) + 1))
    )
    steps = torch.zeros(k, k, dtype=torch.int64, device=G.device)
    steps[upper[0], upper[1]] = off
    steps = steps + steps.transpose(0, 1) + torch.diag(diag)
    # the upper triangle and diagonal are released; the lower triangle copies them (post-processing)
    symmetric = torch.triu(rounded) + torch.triu(rounded, diagonal=1).transpose(0, 1)
    released = (symmetric + steps).to(torch.float64) * noise.grid
    return released.to(dtype=G.dtype), noise
