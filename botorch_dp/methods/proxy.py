r"""The public proxy as a stand-in for the private run: its checked losses and simulated noise.

``simulation_config`` scales every privacy parameter of a config by ``n/n_p``, so a run on
``n_p`` proxy users draws noise of exactly the distribution the private run on ``n`` users
will draw; ``proxy_losses`` checks that the proxy returns finite per-user losses.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import TypeVar

import torch
from torch import Tensor

from botorch_dp.optim.config import DPGIBOConfig, check_per_user_losses
from botorch_dp.privacy.checks import check_positive_int

__all__ = ["proxy_losses", "simulation_config"]


def proxy_losses(proxy_objective: Callable[[Tensor], Tensor], points: Tensor) -> Tensor:
    r"""The proxy's ``q x n_p`` per-user losses at ``q x d`` points, checked, in float64."""
    losses = torch.as_tensor(proxy_objective(points)).detach().to(torch.float64)
    if losses.dim() != 2 or losses.shape[0] != points.shape[0]:
        raise ValueError(
            f"proxy_objective must return a q x n_p tensor of per-user losses, got shape {tuple(losses.shape)}."
        )
    check_per_user_losses(losses.shape[1], 1.0)
    if not torch.isfinite(losses).all():
        raise ValueError("proxy_objective returned non-finite losses.")
    return losses


def simulation_config(config: DPGIBOConfig, num_users: int, num_proxy_users: int, **changes) -> DPGIBOConfig:
    r"""The config whose run on ``n_p`` proxy users draws the noise the private run on ``n``
    users will draw.

    Every release's noise is ``c/(n μ_j)`` on the scale of the mean, so each GDP parameter is
    scaled by ``s = n/n_p``: the steps' ``μ_steps`` (and with it every per-step ``μ``, the
    adaptive schedule's and the clip counts'), ``selection_mu``, ``max_step_mu``, and for the
    exponential selection ``ε_sel`` (its scores' sensitivity is ``C/n`` too). ``privacy_mu``
    is then ``√((s μ_steps)² + μ_sel'²)``. The budget filter is dropped (the proxy is public).

    Args:
        config: The private run's config.
        num_users: ``n``.
        num_proxy_users: ``n_p``.
        **changes (Any): Further fields to replace (e.g. ``clip``, ``seed``).
    """
    scale = check_positive_int(num_users, "num_users (n)") / check_positive_int(num_proxy_users, "num_proxy_users")
    c = config
    # every GDP parameter a strategy holds, scaled (by its spec's name: ε_sel, μ_sel, μ_max)
    selection = _scaled(c.selection, ("epsilon", "mu"), scale)
    noise = _scaled(c.noise, ("max_step_mu",), scale)
    assert c.privacy_mu is not None  # DPGIBOConfig resolves it
    mu = math.inf if math.isinf(c.privacy_mu) else math.hypot(scale * c.mu_split.steps_mu, selection.charge)
    return dataclasses.replace(
        c,
        privacy_mu=mu,
        epsilon=None,
        delta=None,
        validation_mu_budget=None,
        selection=selection,
        noise=noise,
        **changes,
    )


_S = TypeVar("_S")


def _scaled(strategy: _S, names: tuple[str, ...], scale: float) -> _S:
    r"""``strategy`` with the GDP parameters ``names`` of its spec (those it has and sets) times ``scale``."""
    spec = strategy.spec()  # type: ignore[attr-defined]
    scaled = {name: spec[name] * scale for name in names if spec.get(name) is not None}
    return dataclasses.replace(strategy, **scaled) if scaled else strategy  # type: ignore[type-var]
