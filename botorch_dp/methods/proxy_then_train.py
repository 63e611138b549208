r"""Tune on a PUBLIC proxy at no privacy cost, then ONE DP-SGD training on the private data, as a method.

``ProxyThenTrainMethod`` wraps ``methods.cheap_tuning.tune_on_proxy_then_train``: the configurations
are trained and compared on the public proxy (at the final run's ``(q, steps)`` and its noise scaled
to the proxy), the best is trained once on the private training records with DP-SGD at the whole
``ε`` (``σ_f`` of ``cheap_plan.final_only_noise``). The ε split: all of it to the final run, none
to the tuning (stated in ``MethodRun.procedure``). The validation users' losses are never read:
``MethodRun.guarantees["validation"]`` is ``(0, δ)``.

The search on the proxy (``methods.proxy_search``): the public defaults (given ones, else the
centre of the space) and ``num_configurations`` random configurations, each trained ``repeats``
times with its own noise, the ``finalists`` best trained again with fresh noise, the lowest fresh
mean loss wins. ``simulate_training(proxy, seed)`` (``methods.training_proxy``) simulates the
procedure on the proxy: the same search by the fitting half's losses at ``σ_f``, then a fresh
training at the choice, scored on the scoring half.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from botorch_dp.methods.protocol import MethodContext, MethodRun, MethodUnavailable
from botorch_dp.methods.proxy_search import DEFAULT_FINALISTS, DEFAULT_REPEATS, ProxySearch, with_defaults
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
        repeats: Proxy trainings per candidate (and per finalist), each with its own noise.
        finalists: Candidates retrained with fresh noise after the screening (1: none).
        defaults: Public default configurations always among the candidates (natural units; None:
            the centre of the space; ``()``: none).
    """

    space: Any
    epsilon: float
    delta: float
    proxy: Any
    num_configurations: int = DEFAULT_CONFIGURATIONS
    repeats: int = DEFAULT_REPEATS
    finalists: int = DEFAULT_FINALISTS
    defaults: Sequence[Mapping[str, Any]] | None = None
    name: str = dataclasses.field(default="proxy_then_train", init=False)

    def __post_init__(self) -> None:
        ProxySearch(self.repeats, self.finalists)  # checks both before anything trains

    @property
    def gdp_mu(self) -> float | None:
        return None  # a DP-SGD run's Rényi-DP curve, charged to the objective's own ledger

    @property
    def runs_configurations(self) -> bool:
        return False  # handed one objective and a child of tune's seed; tune wraps its one release

    def with_max_trials(self, max_trials: int | None) -> ProxyThenTrainMethod:
        return self  # one private training: nothing to pad

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
        configs = with_defaults(
            self.space, random_configurations(self.space, self.num_configurations, seed), self.defaults
        )
        copy = proxy.copy(sigma, proxy.stream(seed, 0))  # its runs: one noise stream each (by run index)
        outcome = ProxySearch(self.repeats, self.finalists).choose(
            lambda config: proxy.fitting_mean(proxy.losses(copy, config)), configs
        )
        return proxy.final_score(configs[outcome.index], sigma, seed)

    def describe(self) -> str:
        defaults = "the centre of the space" if self.defaults is None else f"{len(self.defaults)} given default(s)"
        return (
            f"{self.num_configurations} random configurations and {defaults} tried on the public proxy (no epsilon; "
            f"{self.repeats} trainings each, the {self.finalists} best again with fresh noise), then one DP-SGD "
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
            repeats=self.repeats,
            finalists=self.finalists,
            defaults=self.defaults,
        )
        return cheap_method_run(self.name, result, self.space, objective, ledger)
