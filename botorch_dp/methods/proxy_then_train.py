r"""Tune on a PUBLIC proxy at no privacy cost, then ONE DP-SGD training on the private data, as a method.

``ProxyThenTrainMethod`` wraps ``methods.cheap_tuning.tune_on_proxy_then_train``: the configurations
are trained and compared on the public proxy (at the final run's ``(q, steps)`` and its noise scaled
to the proxy), the best is trained once on the private training records with DP-SGD at the whole
``ε`` (``σ_f`` of ``cheap_plan.final_only_noise``). The ε split: all of it to the final run, none
to the tuning (stated in ``MethodRun.procedure``). The validation users' losses are never read:
``MethodRun.guarantees["validation"]`` is ``(0, δ)``.

``simulate_training(proxy, seed)`` (``methods.training_proxy``) simulates the procedure on the
proxy: the configurations chosen by the fitting half's losses at ``σ_f``, then a fresh training at
the choice, scored on the scoring half.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from botorch_dp.methods.protocol import MethodContext, MethodRun, MethodUnavailable
from botorch_dp.methods.training_proxy import TrainingProxy, random_configurations
from botorch_dp.privacy.ledger import PrivacyLedger

__all__ = ["DEFAULT_CONFIGURATIONS", "ProxyThenTrainMethod", "cheap_method_run"]

#: The number of random configurations the cheap methods try (``tune``'s default; public).
DEFAULT_CONFIGURATIONS = 8


def not_on_a_proxy_objective(name: str) -> MethodUnavailable:
    r"""The refusal of ``simulate``: a training method is simulated with ``simulate_training``."""
    return MethodUnavailable(
        f"{name}: a method that trains on the private training records is simulated on the proxy's DATA "
        "(simulate_training, methods.training_proxy), not on a proxy objective."
    )


def cheap_method_run(name: str, result: Any, space: Any, objective: Any, ledger: PrivacyLedger) -> MethodRun:
    r"""The ``MethodRun`` of a cheap tuning ``CheapTuneResult``: its hyperparameters read back on ``space``
    (θ and the categorical ``configuration``), its per-set guarantee, its split in words."""
    free = space.configurations()[0].keys()
    configuration = {key: result.hyperparameters[key] for key in free}
    theta = space.from_natural(result.hyperparameters).to(torch.float64)
    training = result.guarantee["training records"]
    guarantees = {"training": training, "validation": result.guarantee["validation users"]}
    stated = "; ".join(
        f"{key}: (epsilon = {g[0]:.4g}, delta = {g[1]:.3g})" if g is not None else f"{key}: not protected"
        for key, g in guarantees.items()
    )
    procedure = f"{result.split}; {result.carried} ({stated})"
    return MethodRun(
        method=name,
        theta=theta,
        result=result,
        run_id=ledger.training.run_ids()[-1],
        num_users=int(objective.num_users),
        epsilon=float(training[0]),
        delta=float(training[1]),
        description=procedure,
        configuration=configuration,
        procedure=procedure,
        guarantees=guarantees,
    )


@dataclass(frozen=True)
class ProxyThenTrainMethod:
    r"""Tune on a public proxy, then one final DP-SGD training at the whole ``ε`` (see the module).

    Attributes:
        space: The objective's ``SearchSpace``.
        epsilon: ``ε`` of the final run (the whole procedure) on the training records.
        delta: ``δ``.
        proxy: The PUBLIC ``ClassificationData`` the configurations are tried on.
        num_configurations: The number of random configurations tried on the proxy.
    """

    space: Any
    epsilon: float
    delta: float
    proxy: Any
    num_configurations: int = DEFAULT_CONFIGURATIONS
    name: str = dataclasses.field(default="proxy_then_train", init=False)

    @property
    def gdp_mu(self) -> float | None:
        return None  # a DP-SGD run's Rényi-DP curve, charged to the objective's own ledger

    @property
    def private_trainings(self) -> float:
        r"""The DP-SGD trainings on the private records: the final run only."""
        return 1.0

    def resolved(self, proxy_objective: Callable[[Tensor], Tensor] | None, context: MethodContext) -> Any:
        return self

    def simulate(self, proxy_objective: Callable[[Tensor], Tensor], context: MethodContext, seed: int) -> Tensor:
        raise not_on_a_proxy_objective(self.name)

    def final_noise(self, proxy: TrainingProxy) -> float:
        r"""``σ_f``: the final run alone at ``(ε, δ)``."""
        from botorch_dp.methods.cheap_plan import final_only_noise  # late: loaded when used

        rate, steps, _ = proxy.run_shape()
        return final_only_noise(epsilon=self.epsilon, delta=self.delta, sample_rate=rate, steps=steps)[0]

    def simulate_training(self, proxy: TrainingProxy, seed: int) -> float:
        r"""The scoring half's mean loss of the simulated procedure's final model (public)."""
        sigma = self.final_noise(proxy)
        configs = random_configurations(self.space, self.num_configurations, seed)
        best, _ = proxy.best_of(configs, sigma, seed)
        return proxy.final_score(configs[best], sigma, seed)

    def describe(self) -> str:
        return (
            f"{self.num_configurations} configurations tried on the public proxy (no epsilon), then one DP-SGD "
            f"training at the whole epsilon = {self.epsilon:g} (1 private training)"
        )

    def run_private(
        self,
        objective: Any,
        *,
        ledger: PrivacyLedger,
        seed: int | None = None,
        progress: bool = False,
        executor: Any = None,
    ) -> MethodRun:
        r"""Tune on the proxy, train once on ``objective``'s data (its ledger is ``ledger``); ``seed`` seeds
        the public configurations; ``progress`` and ``executor`` are not used."""
        from botorch_dp.methods.cheap_tuning import tune_on_proxy_then_train  # late: loaded when used

        if ledger is not objective.ledger:
            raise ValueError("ledger: the final run is charged to objective.ledger; pass that ledger or none.")
        result = tune_on_proxy_then_train(
            objective,
            self.space,
            self.proxy,
            epsilon=self.epsilon,
            delta=self.delta,
            tuner=self.num_configurations,
            seed=seed,
        )
        return cheap_method_run(self.name, result, self.space, objective, ledger)
