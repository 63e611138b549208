r"""Checks that save a run before anything is spent: settings that make it useless or weaker than meant.

Each reads only public things (the settings, the kernel, the bounds, ``n``), so it costs no
privacy, and each runs before the first release: the kernel checks when ``DPGIBO`` is built
(before any evaluation), the checks that need ``n`` when the first batch is told (before its
release). A check refuses (``ValueError`` naming the argument and its value) what cannot work
at all, and warns (``SettingsWarning``; ``PrivacyWarning`` for a weak guarantee) about what
will probably not work:

- ``check_kernel``: a kernel with ``k(θ₀, θ₀) = 0`` (e.g. a ``ScaleKernel`` with outputscale 0)
  carries no gradient information, so θ never moves: refused. For a stationary kernel, a search
  radius that spans many length-scales, or a tiny fraction of one, in some coordinate (bounds in
  natural units with a kernel meant for the unit cube, or the reverse): warned, with the
  correlation between ``θ₀`` and a point one radius away.
- ``warn_delta``: ``δ ≥ 1/n`` allows a mechanism that publishes one user's data outright.
- ``warn_noise``: the first step's gradient noise, ``σ√k`` in expectation, is at least ``B``,
  the norm of the largest possible clipped mean: every step is then mostly noise.
"""

from __future__ import annotations

import math
import warnings

import torch
from gpytorch.kernels import Kernel
from torch import Tensor

from botorch_dp.privacy.seeding import PrivacyWarning

__all__ = [
    "FAR_CORRELATION",
    "FLAT_CORRELATION",
    "SettingsWarning",
    "check_kernel",
    "check_kernel_variance",
    "warn_delta",
    "warn_noise",
]

#: Below this correlation between ``θ₀`` and a point one search radius away, the kernel sees
#: the local box as unrelated points (its length-scale is far below the radius).
FAR_CORRELATION = 1e-3
#: Above ``1 −`` this, the kernel is flat across the search radius (length-scale far above it).
FLAT_CORRELATION = 1e-4


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


def check_kernel(kernel: Kernel, theta0: Tensor, radius: Tensor, stacklevel: int = 3) -> None:
    r"""Refuse a kernel with no variance at ``θ₀``; warn when the search radius and the kernel's
    length-scales do not match in some coordinate (public: the kernel, ``θ₀`` and the radius)."""
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
            shown = ", ".join(f"θ[{j}]: radius {float(radius[j]):.3g}, correlation {rho[j]:.3g}" for j in coords[:4])
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


def warn_delta(delta: float, num_users: int, stacklevel: int = 3) -> None:
    r"""``PrivacyWarning`` when the reported ``δ`` is at least ``1/n``."""
    if delta >= 1.0 / num_users:
        warnings.warn(
            f"delta = {delta!r} is at least 1/n = {1.0 / num_users:.3g} (n = {num_users} users): an (ε, δ) guarantee "
            "with δ ≥ 1/n allows a mechanism that publishes one user's data outright. Report at a δ well below 1/n "
            "(target_delta, or delta with a target epsilon).",
            PrivacyWarning,
            stacklevel=stacklevel,
        )


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
