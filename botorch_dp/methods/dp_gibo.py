r"""DP-GIBO as a method (``methods.protocol``).

Its settings are the planned config (``MethodContext.config``: the fitted kernel and the chosen
``B``, ``η``, ``T`` and batch rule); the simulation is ``methods.proxy.simulation_config`` on the
proxy, the private run ``DPGIBO(config, ledger=...).run``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from torch import Tensor

from botorch_dp.methods.protocol import MethodContext, MethodRun, MethodUnavailable, config_mu
from botorch_dp.methods.proxy import simulation_config
from botorch_dp.optim.config import DPGIBOConfig
from botorch_dp.optim.dp_gibo import DPGIBO
from botorch_dp.privacy.ledger import PrivacyLedger

__all__ = ["DPGIBOMethod"]


@dataclass(frozen=True)
class DPGIBOMethod:
    r"""DP-GIBO with the planned settings (``config``: ``None`` until ``resolved``)."""

    config: DPGIBOConfig | None = None
    name: str = dataclasses.field(default="dp_gibo", init=False)

    @property
    def gdp_mu(self) -> float | None:
        return None if self.config is None else config_mu(self.config)

    @property
    def runs_configurations(self) -> bool:
        return False  # handed one objective and a child of tune's seed; tune wraps its one release

    def with_max_trials(self, max_trials: int | None) -> DPGIBOMethod:
        return self  # no hidden number of trials

    def _config(self) -> DPGIBOConfig:
        if self.config is None:
            raise ValueError("DPGIBOMethod: resolve it first (resolved(proxy_objective, context)).")
        return self.config

    def resolved(self, proxy_objective: Callable[[Tensor], Tensor] | None, context: MethodContext) -> DPGIBOMethod:
        config = context.config if self.config is None else self.config
        if not math.isfinite(config_mu(config)):
            raise MethodUnavailable("DP-GIBO: the config has no finite privacy budget.")
        return DPGIBOMethod(config)

    def simulate(self, proxy_objective: Callable[[Tensor], Tensor], context: MethodContext, seed: int) -> Tensor:
        if context.num_proxy_users is None:
            raise ValueError("context.num_proxy_users: simulating needs the proxy's n_p, got None.")
        sim = simulation_config(self._config(), context.num_users, context.num_proxy_users, seed=seed)
        return DPGIBO(sim).run(proxy_objective, progress=False).release.theta

    def run_private(
        self,
        objective: Callable[[Tensor], Tensor],
        *,
        ledger: PrivacyLedger,
        seed: int | None = None,
        progress: bool = False,
        executor: Any = None,
    ) -> MethodRun:
        config = dataclasses.replace(self._config(), seed=seed, validation_mu_budget=None)
        optimizer = DPGIBO(config, ledger=ledger)
        result = optimizer.run(objective, progress=progress, executor=executor)
        g = result.release.guarantee
        description = (
            f"DP-GIBO, {len(result.release.batch_sizes)} Gaussian gradient steps (mu = {g.mu:.4g} Gaussian DP)"
        )
        return MethodRun(
            self.name,
            result.release.theta,
            result,
            optimizer.run_id,
            int(optimizer.num_users or 0),
            g.epsilon,
            g.delta,
            description,
            mu=ledger.validation.mu(optimizer.run_id),
            procedure=description,
            result_is_record=True,  # tune's ConfigurationRun holds the DPGIBOResult, as an enumerate run's
        )

    def describe(self) -> str:
        c = self._config()
        tol = c.batches.tolerance
        rule = "fixed batches" if tol is None else f"adaptive batches (tol {tol:.3g})"
        bound = c.clip.current(c.clip.initial_state())  # B, or B₀ of a moving bound
        return f"planned B = {bound:.4g}, eta = {c.step_size:.3g}, T = {c.num_iterations}, {rule}"
