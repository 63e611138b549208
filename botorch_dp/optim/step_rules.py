r"""Projected steps on released gradients: ``θ ← Π_Θ(θ − η · rule(g))`` via ``torch.optim``.

The iterate ``θ`` is the one parameter of a ``torch.optim.SGD`` or ``torch.optim.Adagrad``;
each step hands it a released (already privatized) gradient, lets the optimizer update,
then projects onto the box ``Θ`` once. Steps are post-processing of the releases, so any
optimizer is private; its ``state_dict`` (AdaGrad's sum of squares) goes into the checkpoint.
"""

from __future__ import annotations

from typing import Literal, get_args

import torch
from torch import Tensor

from botorch_dp.utils import project_to_box

StepRule = Literal["sgd", "adagrad"]
STEP_RULES: tuple[str, ...] = get_args(StepRule)

#: ``eps`` added to AdaGrad's denominator ``√(Σ g²) + eps`` (the package's historical value;
#: ``torch.optim.Adagrad``'s own default is 1e-10).
ADAGRAD_EPS = 1e-8


def check_step_rule(step_rule: str) -> str:
    r"""Refuse an unknown step rule.

    Args:
        step_rule: One of ``"sgd"`` or ``"adagrad"``.

    Returns:
        ``step_rule``.
    """
    if step_rule not in STEP_RULES:
        raise ValueError(f"step_rule must be one of {STEP_RULES}, got {step_rule!r}.")
    return step_rule


def make_step_optimizer(theta: Tensor, step_rule: StepRule, step_size: float) -> torch.optim.Optimizer:
    r"""A ``torch.optim`` optimizer over a copy of ``θ``.

    Args:
        theta: The ``d`` start ``θ_0``; the optimizer holds (and updates) its own copy.
        step_rule: ``"sgd"`` (``θ ← θ − η g``) or ``"adagrad"``
            (``θ ← θ − η g / (√(Σ_{s≤t} g_s²) + eps)``, coordinate-wise; ``eps`` is
            ``ADAGRAD_EPS``).
        step_size: ``η > 0``.

    Returns:
        A ``torch.optim.SGD`` or ``torch.optim.Adagrad`` with one parameter, ``θ``.
    """
    param = theta.detach().clone()
    if check_step_rule(step_rule) == "adagrad":
        return torch.optim.Adagrad([param], lr=step_size, eps=ADAGRAD_EPS)
    return torch.optim.SGD([param], lr=step_size)


def projected_step(optimizer: torch.optim.Optimizer, gradient: Tensor, bounds: Tensor) -> Tensor:
    r"""One optimizer step on a released gradient, then the projection ``Π_Θ``.

    Args:
        optimizer: From ``make_step_optimizer``.
        gradient: The ``d`` released gradient ``g_t`` (public).
        bounds: The ``2 x d`` box ``Θ``.

    Returns:
        The new ``d`` iterate ``θ_{t+1}`` (a copy).
    """
    theta = optimizer.param_groups[0]["params"][0]
    theta.grad = gradient.detach().to(theta)
    optimizer.step()
    theta.grad = None
    with torch.no_grad():
        theta.copy_(project_to_box(theta, bounds))
    return theta.detach().clone()
