r"""Non-private GIBO as a baseline: DP-GIBO with ``privacy_mu = inf`` and no clipping.

``gibo`` runs it; ``from_dp_gibo_result`` turns any ``DPGIBOResult`` into a
``BaselineResult`` so that DP-GIBO and the baselines share one result type.
"""

from __future__ import annotations

import math

import torch
from gpytorch.kernels import Kernel

from botorch_dp.baselines.base import BaselineGuarantee, BaselineHistory, BaselineResult, Objective
from botorch_dp.optim import DPGIBO, DPGIBOConfig, DPGIBOResult
from botorch_dp.optim.options import FixedClip

NO_CLIP = 1e30
"""Clip bound used by ``gibo`` when none is given: large enough that nothing is clipped."""


def from_dp_gibo_result(result: DPGIBOResult) -> BaselineResult:
    r"""View a ``DPGIBOResult`` as a ``BaselineResult``.

    ``history.iterates`` are ``θ_0..θ_T`` and ``history.evaluations`` the cumulative
    evaluations when each was formed; the original result is in
    ``history.extras["dp_gibo_result"]``. The history is public exactly when the run
    was private (everything in ``release`` is).
    """
    release = result.release
    g = release.guarantee
    evaluations = torch.tensor([0] + list(release.batch_sizes)).cumsum(0)
    private = g.holds and not math.isinf(g.mu)
    guarantee = None
    if private:
        guarantee = BaselineGuarantee(
            epsilon=g.epsilon,
            delta=g.delta,
            mu=g.mu,
            description=f"DP-GIBO: {g.num_steps} Gaussian steps composed to {g.mu:g}-GDP.",
            details={"noise_std": g.noise_std, "noise_multiplier": g.noise_multiplier},
        )
    history = BaselineHistory(
        iterates=release.iterates,
        evaluations=evaluations,
        points=release.evaluation_points,
        mean_losses=None,
        public=private,
        extras={"dp_gibo_result": result},
    )
    return BaselineResult(
        theta=release.theta.clone(),
        num_evaluations=int(release.evaluation_points.shape[0]),
        guarantee=guarantee,
        history=history,
    )


def gibo(
    objective: Objective,
    bounds: torch.Tensor,
    *,
    kernel: Kernel,
    num_iterations: int = 25,
    clip_bound: float = NO_CLIP,
    progress: bool = False,
    **config_kwargs,
) -> BaselineResult:
    r"""Non-private GIBO (Müller et al. 2021, as in Sopa et al.): DP-GIBO with ``μ = ∞``.

    Args:
        objective: A ``PerUserProblem`` or a callable ``q x d -> q x n`` per-user losses.
        bounds: ``2 x d`` box.
        kernel: GPyTorch kernel with fixed hyperparameters.
        num_iterations: ``T``.
        clip_bound: ``B``; the default clips nothing.
        progress: Show DP-GIBO's progress bar.
        **config_kwargs (Any): Further ``DPGIBOConfig`` fields (``step_size``, ``step_rule``,
            ``batches``, ``theta0``, ``noise_variance``, ``seed``...).
            ``privacy_mu`` is not accepted.

    Returns:
        A NON-PRIVATE ``BaselineResult`` (see ``from_dp_gibo_result``).
    """
    if "privacy_mu" in config_kwargs:
        raise TypeError("gibo is non-private (privacy_mu = inf); use DPGIBO for a private run.")
    config = DPGIBOConfig(
        bounds=bounds,
        kernel=kernel,
        num_iterations=num_iterations,
        privacy_mu=math.inf,
        clip=FixedClip(clip_bound),
        **config_kwargs,
    )
    return from_dp_gibo_result(DPGIBO(config).run(objective, progress=progress))
