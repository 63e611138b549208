r"""``tune``'s per-configuration DP-GIBO on a mixed space, as a candidate of the method choice.

``EnumerateMethod`` is a ``plan.method_protocol.SimulatedMethod`` on the mixed space's public
encoding (``tuning.encoding``): its ``simulate`` runs the whole ``strategy="enumerate"``
procedure on the PUBLIC proxy at the private run's noise, one DP-GIBO run per configuration
with that configuration's planned config (``plan.proxy.simulation_config``: ``μ_run n/n_p``),
then the Gaussian scores of the runs' final points at ``μ_score n/n_p`` (noise ``C/(n μ_score)``,
as the private choice draws), and returns the encoded point of the lowest noisy score. Private
random search and DP-HyPO are simulated on the same encoded proxy with the same seeds, so the
comparison (``plan.method_choice.compare_in_context``) is paired. Its private run is ``tune``'s
own enumerate path with the same plans (checkpointing, training charges and executors
included), hence a ``SimulatedMethod`` and no ``CandidateMethod``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from botorch_dp.optim import DPGIBO, DPGIBOConfig
from botorch_dp.plan.method_protocol import MethodContext, MethodUnavailable, config_mu
from botorch_dp.plan.proxy import simulation_config
from botorch_dp.privacy.mechanisms import GaussianScoreMechanism
from botorch_dp.tuning.encoding import MixedEncoding
from botorch_dp.utils import child_seeds

__all__ = ["EnumerateMethod"]


class _Bound:
    r"""An encoded objective at fixed categorical coordinates: ``q x d`` relaxed points ↦ losses."""

    def __init__(self, encoded: Callable[[Tensor], Tensor], centre: Tensor) -> None:
        self.encoded, self.centre = encoded, centre

    def __call__(self, X: Tensor) -> Tensor:
        X = torch.as_tensor(X, dtype=torch.float64)
        return self.encoded(torch.cat([X, self.centre.expand(X.shape[0], -1)], dim=1))


@dataclass(frozen=True)
class EnumerateMethod:
    r"""One DP-GIBO run per configuration, then the lowest Gaussian noisy score (``tune``'s
    ``strategy="enumerate"``), on the encoded space.

    Attributes:
        encoding: The space's ``MixedEncoding``.
        configurations: The configurations, in ``space.configurations()`` order.
        configs: Each configuration's planned ``DPGIBOConfig`` at ``μ_run``.
        score_mu: ``μ_score``, each noisy score's GDP parameter.
        loss_clip: ``C`` of the scores.
    """

    encoding: MixedEncoding
    configurations: tuple[dict[str, Any], ...]
    configs: tuple[DPGIBOConfig, ...]
    score_mu: float
    loss_clip: float
    name: str = dataclasses.field(default="dp_gibo", init=False)

    def __post_init__(self) -> None:
        if len(self.configurations) != len(self.configs) or len(self.configs) < 2:
            raise ValueError(
                f"configs: one planned config per configuration (at least 2), got {len(self.configs)} "
                f"for {len(self.configurations)} configurations."
            )

    def resolved(self, proxy_objective: Callable[[Tensor], Tensor] | None, context: MethodContext) -> EnumerateMethod:
        if not all(math.isfinite(config_mu(c)) for c in self.configs):
            raise MethodUnavailable("DP-GIBO per configuration: a config has no finite privacy budget.")
        return self

    def simulate(self, proxy_objective: Callable[[Tensor], Tensor], context: MethodContext, seed: int) -> Tensor:
        n, n_p = context.num_users, context.num_proxy_users
        if n_p is None:
            raise ValueError("context.num_proxy_users: simulating needs the proxy's n_p, got None.")
        K, d = len(self.configs), self.encoding.space.dim
        streams = child_seeds([int(seed)], K + 1)
        points = []
        for k, (choice, config) in enumerate(zip(self.configurations, self.configs, strict=True)):
            centre = self.encoding.encode(torch.zeros(d, dtype=torch.float64), choice)[d:]
            sim = simulation_config(config, n, n_p, seed=streams[k])
            theta = DPGIBO(sim).run(_Bound(proxy_objective, centre), progress=False).release.theta
            points.append(self.encoding.encode(theta, choice))
        X = torch.stack(points)
        losses = torch.as_tensor(proxy_objective(X)).to(torch.float64)  # K x n_p, public
        mechanism = GaussianScoreMechanism(
            loss_clip=self.loss_clip,
            per_trial_mu=self.score_mu * n / n_p,
            generator=torch.Generator().manual_seed(streams[K]),
        )
        return X[int(torch.argmin(mechanism.release(losses).scores))]

    def describe(self) -> str:
        steps = "T = " + "/".join(str(c.num_iterations) for c in self.configs)
        return (
            f"{len(self.configs)} planned DP-GIBO runs (mu = {config_mu(self.configs[0]):.4g} each, {steps}), "
            f"then Gaussian scores (mu = {self.score_mu:.4g} each, C = {self.loss_clip:.4g})"
        )
