r"""The enumerate procedure as a simulated-only candidate on a mixed space's encoding (old interface).

The procedure itself (simulated and private) is ``methods.enumerate.EnumerateMethod``. This
``EnumerateMethod`` keeps the old signature ``EnumerateMethod(encoding, configurations, configs,
score_mu, loss_clip)``: a ``methods.protocol.SimulatedMethod`` (at least two configurations)
whose ``simulate`` is that procedure's on the encoded proxy; ``tune`` runs the procedure itself.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from torch import Tensor

from botorch_dp.methods.enumerate import EnumerateMethod as _Procedure
from botorch_dp.methods.protocol import MethodContext
from botorch_dp.optim import DPGIBOConfig
from botorch_dp.tuning.encoding import MixedEncoding

__all__ = ["EnumerateMethod"]


@dataclass(frozen=True)
class EnumerateMethod:
    r"""One DP-GIBO run per configuration, then the lowest Gaussian noisy score, on the encoded space.

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

    @property
    def procedure(self) -> _Procedure:
        r"""The procedure (``methods.enumerate.EnumerateMethod``) with these settings."""
        return _Procedure(self.configurations, self.configs, self.score_mu, self.loss_clip)

    def resolved(self, proxy_objective: Callable[[Tensor], Tensor] | None, context: MethodContext) -> EnumerateMethod:
        self.procedure.resolved(proxy_objective, context)
        return self

    def simulate(self, proxy_objective: Callable[[Tensor], Tensor], context: MethodContext, seed: int) -> Tensor:
        return self.procedure.simulate(proxy_objective, context, seed)

    def describe(self) -> str:
        return self.procedure.describe()
