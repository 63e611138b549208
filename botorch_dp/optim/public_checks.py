r"""Checks that save a run before anything is spent: settings that make it useless or weaker than meant.

Each reads only public things (the settings, the kernel, the bounds, ``n``), so it costs no
privacy, and each runs before the first release: the kernel checks when ``DPGIBO`` is built
(before any evaluation), the checks that need ``n`` when the first batch is told (before its
release). A check refuses (``ValueError`` naming the argument and its value) what cannot work
at all, and warns (``SettingsWarning``; ``PrivacyWarning`` for a weak guarantee) about what
will probably not work. ``δ ≥ 1/n`` (``delta_caution``) allows a mechanism that publishes one
user's data outright.

The cautions are REFUSED (``enforce``: a ``ValueError`` naming the argument, its value, the
threshold and the opt-in) unless the caller opts in, ``unsafe_allow_large_delta=True`` for
``δ ≥ 1/n`` and ``allow_noise_dominated=True`` for the noise; with the opt-in they are warned
and carried by the result (its guarantee report and JSON). The noise rule reads public facts
only. A Gaussian release of the mean of ``n`` per-user values, each of norm at most ``B``
(clipped gradients: replace-one sensitivity ``2B/n``) or in ``[0, C]`` (clipped losses:
``C/n``), at ``μ``-GDP has noise std ``2B/(nμ)`` (``C/(nμ)``) per coordinate. A run that
spends ``μ_g`` on gradient releases in any split over its steps, ``Σ μ_t² = μ_g²``, can at
best pool them into one estimate of a single gradient with per-coordinate noise ``2B/(n μ_g)``
(precisions add), and with SGD steps the signal part of its total movement is at most
``1/R`` of the noise part, ``R = 2√k/(n μ_g)`` (``k`` released coordinates, the signal's norm at
most ``B``); for a score, ``R = 1/(n μ_score)`` is the noise std in units of the loss range.
``R ≥ 10`` (e.g. ``ε = 0.01``, ``δ = 1e-5``, ``n = 20`` users: ``R ≈ 24`` for ``k = 1``) is refused.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
import warnings
from collections.abc import Callable, Iterator, Sequence

import torch
from gpytorch.kernels import Kernel
from torch import Tensor

from botorch_dp.privacy.seeding import PrivacyWarning

__all__ = [
    "FAR_CORRELATION",
    "FLAT_CORRELATION",
    "LARGE_DELTA_OPT_IN",
    "NOISE_DOMINATED_OPT_IN",
    "NOISE_DOMINATED_RATIO",
    "SettingsWarning",
    "check_kernel",
    "check_kernel_variance",
    "coordinate_name",
    "delta_caution",
    "enforce",
    "gradient_noise_caution",
    "named_coordinates",
    "score_noise_caution",
    "warn_noise",
]

#: Below this correlation between ``θ₀`` and a point one search radius away, the kernel sees
#: the local box as unrelated points (its length-scale is far below the radius).
FAR_CORRELATION = 1e-3
#: Above ``1 −`` this, the kernel is flat across the search radius (length-scale far above it).
FLAT_CORRELATION = 1e-4
#: A budget whose best-case noise-to-signal ratio ``R`` (module docstring) is at least this is refused.
NOISE_DOMINATED_RATIO = 10.0
#: The opt-in of a run at ``δ ≥ 1/n`` (a keyword of ``DPGIBOConfig`` and ``tune``).
LARGE_DELTA_OPT_IN = "unsafe_allow_large_delta"
#: The opt-in of a noise-dominated budget (a keyword of ``DPGIBOConfig`` and ``tune``).
NOISE_DOMINATED_OPT_IN = "allow_noise_dominated"


class SettingsWarning(UserWarning):
    r"""A public setting that will probably make the run useless (it still runs as asked)."""


def check_kernel_variance(kernel: Kernel, theta0: Tensor, value: float | None = None) -> float:
    r"""``k(θ₀, θ₀)``, or a ``ValueError`` when it is not positive and finite (``DPGIBOConfig`` checks
    this when it is built; ``value``: the variance if already computed)."""
    if value is None:
        dtype = next((q.dtype for q in kernel.parameters() if q.is_floating_point()), torch.float64)
        with torch.no_grad():
            x = torch.as_tensor(theta0).reshape(1, -1).to(dtype)  # the kernel's own dtype (a float32 one too)
            value = float(kernel(x, x).to_dense().reshape(-1)[0])
    if not math.isfinite(value) or value <= 0.0:
        raise ValueError(
            f"kernel: k(θ₀, θ₀) = {value!r}, so the GP carries no gradient information and θ never moves "
            "(e.g. a ScaleKernel with outputscale 0). Give the kernel a positive outputscale."
        )
    return value


_NAMES: contextvars.ContextVar[tuple[str, ...] | None] = contextvars.ContextVar("coordinate_names", default=None)


@contextlib.contextmanager
def named_coordinates(names: Sequence[str] | None) -> Iterator[None]:
    r"""Inside the block, warnings about θ's coordinates name them (``tune`` passes the search space's
    hyperparameter names: ``dropout``, not ``θ[2]``); ``None`` or another length: ``θ[i]``."""
    token = _NAMES.set(None if names is None else tuple(str(n) for n in names))
    try:
        yield
    finally:
        _NAMES.reset(token)


def coordinate_name(j: int, d: int, names: Sequence[str] | None = None) -> str:
    r"""Coordinate ``j`` of ``d`` by name: ``names`` (else those of ``named_coordinates``) when they name
    all ``d`` coordinates, else ``θ[j]``."""
    names = _NAMES.get() if names is None else tuple(names)
    return str(names[j]) if names is not None and len(names) == d else f"θ[{j}]"


def check_kernel(
    kernel: Kernel, theta0: Tensor, radius: Tensor, stacklevel: int = 3, names: Sequence[str] | None = None
) -> None:
    r"""Refuse a kernel with no variance at ``θ₀``; warn when the search radius and the kernel's
    length-scales do not match in some coordinate (public: the kernel, ``θ₀`` and the radius). The
    warning names the coordinates by ``names`` (or ``named_coordinates``'), else as ``θ[i]``."""
    d = theta0.shape[-1]
    with torch.no_grad():
        points = torch.cat([theta0[None], theta0[None] + torch.diag(radius)]).to(torch.float64)
        k = torch.as_tensor(kernel(points[:1], points).to_dense(), dtype=torch.float64).reshape(-1)
        variances = torch.as_tensor(kernel(points, points, diag=True), dtype=torch.float64).reshape(-1)
    k0 = check_kernel_variance(kernel, theta0, float(k[0]))
    if not torch.allclose(variances, variances[0], rtol=1e-9, atol=0.0):
        return  # not stationary (e.g. polynomial): no length-scale to compare with the radius
    rho = (k[1:] / k0).tolist()
    far = [j for j in range(d) if rho[j] < FAR_CORRELATION]
    flat = [j for j in range(d) if 1.0 - rho[j] < FLAT_CORRELATION]
    for coords, what in (
        (far, "spans many of the kernel's length-scales"),
        (flat, "is a tiny fraction of a length-scale"),
    ):
        if coords:
            shown = ", ".join(
                f"{coordinate_name(j, d, names)}: radius {float(radius[j]):.3g}, correlation {rho[j]:.3g}"
                for j in coords[:4]
            )
            warnings.warn(
                f"The search radius {what} in {len(coords)} of {d} coordinate(s) "
                f"({shown}{', ...' if len(coords) > 4 else ''}), "
                "so the GP's gradient estimates carry little information there and θ will hardly move. Are the bounds "
                "in natural units while the kernel is meant for the unit cube (or the reverse)? Use unit-cube bounds "
                "(botorch_dp.tuning.SearchSpace maps natural units onto them), or a kernel whose length-scales fit the "
                "bounds (botorch_dp.plan_private_run fits one on a public proxy).",
                SettingsWarning,
                stacklevel=stacklevel,
            )


def delta_caution(delta: float, num_users: int, *, argument: str = "delta", users: str = "users") -> str | None:
    r"""The caution of ``δ ≥ 1/n`` (``None`` when ``δ < 1/n``), naming ``argument``, its value and ``1/n``."""
    if delta < 1.0 / num_users:
        return None
    return (
        f"{argument} = {delta!r} is at least 1/n = {1.0 / num_users:.3g} (n = {num_users} {users}), the threshold: "
        "an (ε, δ) guarantee with δ ≥ 1/n allows a mechanism that publishes one person's data outright. "
        "Give δ well below 1/n (e.g. 1e-5, or 1/n²)."
    )


def gradient_noise_caution(
    num_users: int, gradient_mu: float, dims: int, *, argument: str, value: float, needed: Callable[[float], float]
) -> str | None:
    r"""The caution of gradient releases whose pooled noise is at least ``NOISE_DOMINATED_RATIO``
    times the largest clipped mean (``R = 2√k/(n μ_g)``, module docstring), else ``None``.

    Args:
        num_users: ``n``.
        gradient_mu: ``μ_g``, the run's whole gradient budget.
        dims: ``k``, the coordinates each release noises.
        argument: The budget's argument (``"epsilon"``, ``"privacy_mu"``), named in the message.
        value: Its value.
        needed: The argument's value when every ``μ`` of the procedure is scaled by a factor
            (the caller's conversion, e.g. ``μ ↦ gdp_epsilon(μ, δ)``), read at the factor that
            brings ``R`` down to the threshold.
    """
    if not (math.isfinite(gradient_mu) and gradient_mu > 0.0):
        return None
    ratio = 2.0 * math.sqrt(dims) / (num_users * gradient_mu)
    if ratio < NOISE_DOMINATED_RATIO:
        return None
    return (
        f"{argument} = {value:.4g} leaves the run noise-dominated: even pooling all of its gradient releases "
        f"(mu_g = {gradient_mu:.3g} Gaussian DP over k = {dims} coordinate(s), n = {num_users} users), the noise's "
        f"expected norm is 2√k/(n mu_g) = {ratio:.3g} times the largest possible clipped mean gradient, at or "
        f"above the threshold {NOISE_DOMINATED_RATIO:g}: the run would move by noise alone. It needs {argument} "
        f"above {needed(ratio / NOISE_DOMINATED_RATIO):.4g} at this n (or more users, or fewer coordinates)."
    )


def score_noise_caution(
    num_users: int,
    score_mu: float,
    *,
    argument: str,
    value: float,
    needed: Callable[[float], float],
    what: str = "each noisy validation score",
) -> str | None:
    r"""The caution of a score release whose noise std is at least ``NOISE_DOMINATED_RATIO`` times
    the loss range ``C`` (``R = 1/(n μ_score)``), else ``None`` (arguments as ``gradient_noise_caution``;
    ``what``: the release, in words)."""
    if not (math.isfinite(score_mu) and score_mu > 0.0):
        return None
    ratio = 1.0 / (num_users * score_mu)
    if ratio < NOISE_DOMINATED_RATIO:
        return None
    return (
        f"{argument} = {value:.4g} leaves the choice noise-dominated: {what} "
        f"(mu = {score_mu:.3g} Gaussian DP or less, n = {num_users} users) has noise std of at least "
        f"1/(n mu) = {ratio:.3g} times the whole loss range [0, C], at or above the threshold "
        f"{NOISE_DOMINATED_RATIO:g}: the choice would be a coin toss. "
        f"It needs {argument} above {needed(ratio / NOISE_DOMINATED_RATIO):.4g} at this n (or more users)."
    )


def enforce(
    caution: str | None, opt_in: str, allow: bool, *, because: str | None = None, stacklevel: int = 3
) -> str | None:
    r"""Refuse ``caution`` (``ValueError`` ending with the opt-in) unless ``allow``; with ``allow``
    warn it (``PrivacyWarning``; ``because`` says why it runs, default the opt-in) and return it,
    for the result to carry. ``None``: nothing to do."""
    if caution is None:
        return None
    if not allow:
        raise ValueError(
            f"{caution} Refused before anything is evaluated or released; pass {opt_in}=True to run anyway "
            "(the result's guarantee report and JSON then carry this warning)."
        )
    warnings.warn(f"{caution} Running anyway ({because or opt_in + '=True'}).", PrivacyWarning, stacklevel=stacklevel)
    return caution


def warn_noise(
    noise_std: float, dims: int, bound: float, num_users: int, privacy_mu: float, stacklevel: int = 3
) -> None:
    r"""``SettingsWarning`` when the first step's expected noise norm ``σ√k`` is at least the
    clip bound ``B`` (the clipped mean's norm is at most ``B``, so the noise dominates whatever
    the data say)."""
    if not (noise_std > 0.0 and math.isfinite(noise_std) and bound > 0.0):
        return
    ratio = noise_std * math.sqrt(dims) / bound
    if ratio >= 1.0:
        warnings.warn(
            "Every step will be mostly noise: the gradient noise has expected norm "
            f"σ√k = {noise_std * math.sqrt(dims):.3g} "
            f"(σ = {noise_std:.3g} in k = {dims} coordinates), {ratio:.3g}× the largest possible clipped mean "
            f"(clip bound B = {bound:.3g}), with n = {num_users} users at privacy_mu = {privacy_mu:.3g}. Raise the "
            "budget, take fewer iterations, use noise_schedule='adaptive_norm', or plan the run on a public proxy "
            "(botorch_dp.plan_private_run) to see the expected noise-to-signal ratio.",
            SettingsWarning,
            stacklevel=stacklevel,
        )
