r"""Noisy gradient descent with exact per-user gradients (DP-GD, the paper's E.4 baseline).

Per-user gradients are clipped to ``B``, averaged and noised by the same Gaussian
mechanism as DP-GIBO (noise ``2B√T/(nμ)``), so ``T`` steps are ``μ``-GDP in total.
"""

from __future__ import annotations

import math
from typing import Callable, Union

import torch
from torch import Tensor

from botorch_dp.baselines.base import BaselineGuarantee, BaselineHistory, BaselineResult
from botorch_dp.optim.step_rules import StepRule, make_step_optimizer, projected_step
from botorch_dp.privacy.analysis.gdp import gdp_epsilon
from botorch_dp.privacy.mechanisms import GaussianGradientMechanism
from botorch_dp.privacy.seeding import noise_generator
from botorch_dp.problems.base import PerUserProblem
from botorch_dp.utils import check_bounds

#: A ``PerUserProblem`` (its ``per_user_gradient`` is used) or a callable
#: mapping a ``1 x d`` tensor to the ``1 x n x d`` per-user gradients.
GradientOracle = Union[PerUserProblem, Callable[[Tensor], Tensor]]


def _per_user_gradients(oracle: GradientOracle, theta: Tensor, num_users: int | None) -> Tensor:
    fn = oracle.per_user_gradient if isinstance(oracle, PerUserProblem) else oracle
    G = torch.as_tensor(fn(theta.unsqueeze(0)))
    if G.dim() == 3:
        G = G[0]
    if G.dim() != 2 or G.shape[-1] != theta.shape[0]:
        raise ValueError(f"per-user gradients must be 1 x n x d or n x d, got shape {tuple(G.shape)}.")
    if num_users is not None and G.shape[0] != num_users:
        raise ValueError(f"got {G.shape[0]} users, earlier steps had {num_users}.")
    if not torch.isfinite(G).all():
        raise ValueError("per-user gradients contain non-finite values; nothing was released.")
    return G.to(torch.float64)


def noisy_gradient_descent(
    oracle: GradientOracle,
    bounds: Tensor,
    *,
    num_iterations: int,
    clip_bound: float,
    step_size: float,
    privacy_mu: float,
    theta0: Tensor | None = None,
    step_rule: StepRule = "sgd",
    target_delta: float = 1e-5,
    seed: int | None = None,
) -> BaselineResult:
    r"""``T`` steps of projected noisy gradient descent on ``f = (1/n) Σ ℓ_i``.

    Each step: ``g = (1/n) Σ_i clip_B(∇ℓ_i(θ_t)) + N(0, (2B√T/(nμ))² I)``, then
    ``θ_{t+1} = Π_Θ(θ_t − η g)`` (or an AdaGrad step on the noised ``g``; both through
    ``optim.step_rules``, as in DP-GIBO). The clipped
    mean has replace-one sensitivity ``2B/n``, so each step is ``μ/√T``-GDP and the run
    ``μ``-GDP (the accounting of DP-GIBO, seed 000 Thm. 3.1). ``privacy_mu = inf`` gives
    clipped, noise-free gradient descent (non-private).

    Args:
        oracle: A ``PerUserProblem`` with ``per_user_gradient`` or a callable
            ``1 x d -> 1 x n x d`` of per-user gradients (sensitive).
        bounds: ``2 x d`` box ``Θ``.
        num_iterations: ``T``.
        clip_bound: ``B``.
        step_size: ``η``.
        privacy_mu: ``μ``, total GDP budget (``math.inf``: non-private).
        theta0: ``d`` start (default: box centre).
        step_rule: ``"sgd"`` or ``"adagrad"`` (``torch.optim.SGD``/``Adagrad``).
        target_delta: ``δ`` at which ``ε`` is reported.
        seed: ``None`` (default): the noise comes from OS entropy, so nobody can
            regenerate it. An integer: reproducible noise (tests, reproductions), with a
            ``PrivacyWarning``; the guarantee then assumes the seed stays secret. The
            noise is the only randomness of the method.

    Returns:
        A ``BaselineResult``; ``num_evaluations = T`` (per-user gradient evaluations).
        The history is public (post-processing of the noised gradients): ``iterates``
        are ``θ_0..θ_T``, ``extras["released_gradients"]`` the ``T x d`` noised gradients,
        ``extras["noise_std"]`` the per-coordinate noise standard deviation.
    """
    bounds = check_bounds(bounds)
    d = bounds.shape[1]
    if int(num_iterations) != num_iterations or num_iterations < 1:
        raise ValueError(f"num_iterations (T) must be an integer >= 1, got {num_iterations}.")
    if not step_size > 0:
        raise ValueError(f"step_size (η) must be positive, got {step_size}.")
    theta = bounds.mean(0) if theta0 is None else torch.as_tensor(theta0, dtype=torch.float64).reshape(d).clone()
    if (theta < bounds[0]).any() or (theta > bounds[1]).any():
        raise ValueError("theta0 must lie inside the bounds.")
    # None: no generator, the mechanism draws from OS entropy; a seed warns, and its stream
    # is derived as before issue 13 (manual_seed(seed)), so seeded runs are unchanged
    generator = None if seed is None else noise_generator(seed).manual_seed(int(seed))
    eye = torch.eye(d, dtype=torch.float64)
    mechanism, n = None, None
    iterates, released = [theta.clone()], []
    optimizer = make_step_optimizer(theta, step_rule, step_size)  # refuses an unknown step_rule
    for _ in range(int(num_iterations)):
        G = _per_user_gradients(oracle, theta, n)  # n x d, sensitive
        if mechanism is None:
            n = G.shape[0]
            mechanism = GaussianGradientMechanism(
                clip_bound=clip_bound, num_users=n, privacy_mu=privacy_mu, num_steps=int(num_iterations),
                generator=generator,
            )
        # the mechanism clips the rows of (A Y)ᵀ; with A = I and Y = Gᵀ those are the ∇ℓ_i
        g = mechanism.release(eye, G.T).gradient
        released.append(g)
        theta = projected_step(optimizer, g, bounds)  # post-processing of the release
        iterates.append(theta.clone())
    iterates_t = torch.stack(iterates)
    guarantee = None
    if not math.isinf(privacy_mu):
        guarantee = BaselineGuarantee(
            epsilon=gdp_epsilon(privacy_mu, target_delta),
            delta=target_delta,
            mu=float(privacy_mu),
            description=(
                f"{num_iterations} Gaussian steps, each {privacy_mu / math.sqrt(num_iterations):.4g}-GDP "
                f"(sensitivity 2B/n, noise 2B√T/(nμ)), composed to {privacy_mu:g}-GDP; exact GDP→(ε, δ)."
            ),
            details={"noise_std": mechanism.noise_std, "clip_bound": float(clip_bound), "num_users": n},
        )
    history = BaselineHistory(
        iterates=iterates_t,
        evaluations=torch.arange(0, int(num_iterations) + 1),
        points=iterates_t[:-1],
        mean_losses=None,
        public=True,
        extras={"released_gradients": torch.stack(released), "noise_std": mechanism.noise_std},
    )
    return BaselineResult(theta=theta, num_evaluations=int(num_iterations), guarantee=guarantee, history=history)
