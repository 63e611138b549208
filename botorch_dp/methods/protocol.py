r"""A candidate method: one that can be simulated on a public proxy and run privately.

The planner (``plan.method_choice``) compares methods through this protocol only; it never
reads a method's option fields. A method

* ``resolved(proxy_objective, context)``: fixes every setting it still leaves open from the
  PUBLIC proxy and the public ``MethodContext`` (the private run's ``n``, ``(ε, δ)``, box,
  DP-GIBO's planned config and its number of evaluations), and returns a new instance that
  runs exactly as simulated; raises ``MethodUnavailable`` with the reason when it cannot run
  at this budget or is too costly to simulate;
* ``simulate(proxy_objective, context, seed)``: runs on the proxy's ``n_p`` users with the
  noise the private run on ``n`` users will draw (every release's noise is ``c/(n μ)``, so
  ``μ' = μ n/n_p`` on the proxy draws the same noise, ``plan.proxy.simulation_config``) and
  returns the ``θ`` it would release;
* ``run_private(objective, ledger=..., seed=..., progress=..., executor=...)``: the private
  run on the sensitive objective, every release charged to ``ledger`` through its one charge
  protocol before its noise is drawn; returns a ``MethodRun``;
* ``gdp_mu``: the GDP parameter of the private run when it is ``μ``-GDP (a ledger with a
  ``μ`` budget holds it), ``None`` when its guarantee is a Rényi-DP curve (private selection);
* ``describe()``: the resolved public settings in one line.

A ``SimulatedMethod`` has only ``name``, ``resolved``, ``simulate`` and ``describe``: it can be
compared on the proxy, and its private run is another caller's (``tune``'s per-configuration
DP-GIBO on a mixed space, ``tuning.method_enumerate``, runs through ``tune`` itself).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from torch import Tensor

from botorch_dp.optim.config import DPGIBOConfig
from botorch_dp.privacy.ledger import PrivacyLedger

__all__ = [
    "CandidateMethod",
    "MethodContext",
    "MethodRun",
    "MethodUnavailable",
    "SimulatedMethod",
    "config_delta",
    "config_mu",
]


def config_mu(config: DPGIBOConfig) -> float:
    r"""``config.privacy_mu`` (set by the config's checks; ``ValueError`` naming it when absent)."""
    if config.privacy_mu is None:
        raise ValueError("config.privacy_mu: the config has no privacy budget (give privacy_mu or epsilon and delta).")
    return float(config.privacy_mu)


def config_delta(config: DPGIBOConfig) -> float:
    r"""``config.target_delta``, the run's ``δ`` (``ValueError`` naming it when absent)."""
    if config.target_delta is None:
        raise ValueError("config.target_delta: the run's delta is needed to state its (epsilon, delta), got None.")
    return float(config.target_delta)


class MethodUnavailable(ValueError):
    r"""A candidate that cannot run at this budget (or is too costly to simulate); says why."""


@dataclass(frozen=True)
class MethodContext:
    r"""The public settings every candidate is resolved against (no sensitive value).

    Attributes:
        bounds: ``2 x d`` box ``Θ``.
        num_users: ``n`` of the private run.
        num_proxy_users: ``n_p`` of the proxy (``None`` when no proxy is used).
        epsilon: ``ε`` of the private run (``gdp_epsilon(μ, δ)`` of the DP-GIBO config).
        delta: ``δ`` of the private run (the config's ``target_delta``).
        config: DP-GIBO's (planned) config at the private budget.
        evaluations: The number of objective evaluations of DP-GIBO's run with ``config``
            (the mean over its simulated runs): the budget in evaluations the selection
            methods get by default (``E[K]``).
    """

    bounds: Tensor
    num_users: int
    num_proxy_users: int | None
    epsilon: float
    delta: float
    config: DPGIBOConfig
    evaluations: float

    @property
    def proxy_scale(self) -> float:
        r"""``n/n_p``: the factor on a GDP parameter that makes a run on the proxy's ``n_p`` users
        draw the private run's noise (``ValueError`` without a proxy)."""
        if self.num_proxy_users is None:
            raise ValueError("context.num_proxy_users: simulating needs the proxy's n_p, got None.")
        return self.num_users / self.num_proxy_users


@dataclass
class MethodRun:
    r"""What a candidate's private run returns (everything here is released or public).

    Attributes:
        method: The method's ``name``.
        theta: The released ``d`` point.
        result: The method's own result: a ``DPGIBOResult``, or a selection's
            ``baselines.selection.PrivateSelectionResult`` (the winner only: no trial count, no
            losing trial).
        run_id: The run's id in the ledger.
        num_users: ``n`` of the objective.
        epsilon: ``ε`` of this run alone at ``delta``.
        delta: ``δ``.
        description: The mechanism and its guarantee, in words.
        released_score: The winner's noisy score (private selection), else ``None``.
    """

    method: str
    theta: Tensor
    result: Any
    run_id: str
    num_users: int
    epsilon: float
    delta: float
    description: str
    released_score: float | None = None

    @property
    def release(self) -> Any:
        r"""``result.release`` for DP-GIBO, else ``self`` (whose ``theta`` is the release)."""
        return getattr(self.result, "release", self)


@runtime_checkable
class SimulatedMethod(Protocol):
    r"""A method that can be resolved and simulated on a public proxy (see the module)."""

    @property
    def name(self) -> str: ...

    def resolved(
        self, proxy_objective: Callable[[Tensor], Tensor] | None, context: MethodContext
    ) -> SimulatedMethod: ...

    def simulate(self, proxy_objective: Callable[[Tensor], Tensor], context: MethodContext, seed: int) -> Tensor: ...

    def describe(self) -> str: ...


@runtime_checkable
class CandidateMethod(SimulatedMethod, Protocol):
    r"""A method that can be simulated on a public proxy and run privately (see the module)."""

    @property
    def gdp_mu(self) -> float | None: ...

    def resolved(
        self, proxy_objective: Callable[[Tensor], Tensor] | None, context: MethodContext
    ) -> CandidateMethod: ...

    def run_private(
        self,
        objective: Callable[[Tensor], Tensor],
        *,
        ledger: PrivacyLedger,
        seed: int | None = None,
        progress: bool = False,
        executor: Any = None,
    ) -> MethodRun: ...

    def describe(self) -> str: ...
