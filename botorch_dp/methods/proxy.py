r"""The public proxy as a stand-in for the private run: its checked losses and simulated noise.

``simulation_config`` scales every privacy parameter of a config by ``n/n_p``, so a run on
``n_p`` proxy users draws noise of exactly the distribution the private run on ``n`` users
will draw; ``_proxy_losses`` checks that the proxy returns finite per-user losses.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import torch
from torch import Tensor

from botorch_dp.optim.config import DPGIBOConfig, check_per_user_losses
from botorch_dp.privacy.analysis.gdp import pure_dp_to_gdp_mu
from botorch_dp.privacy.checks import check_positive_int

__all__ = ["simulation_config"]


def _proxy_losses(proxy_objective: Callable[[Tensor], Tensor], points: Tensor) -> Tensor:
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
        **changes (Any): Further fields to replace (e.g. ``clip_bound``, ``seed``).
    """
    scale = check_positive_int(num_users, "num_users (n)") / check_positive_int(num_proxy_users, "num_proxy_users")
    c = config
    selection_epsilon = None if c.selection_epsilon is None else c.selection_epsilon * scale
    selection_mu = None if c.selection_mu is None else c.selection_mu * scale
    assert c.privacy_mu is not None  # DPGIBOConfig resolves it
    if math.isinf(c.privacy_mu):
        mu = math.inf
    else:
        mu_sel = 0.0
        if selection_epsilon is not None:
            mu_sel = pure_dp_to_gdp_mu(selection_epsilon)
        elif selection_mu is not None:
            mu_sel = selection_mu
        mu = math.hypot(scale * c.mu_split.steps_mu, mu_sel)
    return dataclasses.replace(
        c,
        privacy_mu=mu,
        epsilon=None,
        delta=None,
        validation_mu_budget=None,
        selection_epsilon=selection_epsilon,
        selection_mu=selection_mu,
        max_step_mu=None if c.max_step_mu is None else c.max_step_mu * scale,
        **changes,
    )
