r"""Private selection over whole DP training runs as a method (``methods.protocol``).

``TrainingSelectionMethod`` wraps ``methods.training_runs.select_training_runs``
(Papernot & Steinke over ``K`` training runs at random hyperparameters, ``K`` hidden; each run DP-SGD, or
AMP for an ``AMPTuningObjective``: whatever the objective trains with, ``mechanism``):
the whole procedure is charged ONCE (on the training records at its privacy-profile bound where
that is tighter, else its Rényi-DP curve; ``accounting``) to the objective's ledger before the first
trial, on the training records and, with ``protect="both"``, on the validation users too (the
scores noised). Its private run releases the winning trial's hyperparameters (as ``θ`` and its
categorical ``configuration``), its trained model (``MethodRun.result.model``) and its score;
``MethodRun.guarantees`` states ``(ε, δ)`` for ``"training"`` and, with ``protect="both"``,
``"validation"`` (with ``protect="training"`` the validation users are treated as public:
``None``).

``simulate`` (on a proxy objective) raises ``MethodUnavailable``; ``simulate_training(proxy, seed)``
simulates it on a proxy's DATA (``methods.training_proxy``): ``K`` drawn from its distribution, ``K``
trainings at random points at the selection's own ``σ`` (scaled to the proxy), the winner chosen at
the precision of the private run's choice on the objective's ``n`` validation users: once per
scoring-half user, on the proxy's other users, with the real run's sampling noise topped up and,
under ``"both"``, the private scores' Gaussian noise (``TrainingProxy.held_out_scores``), each choice
scored by its own model's loss at that held-out user. ``tune(method="auto", proxy=...)`` compares it there with the
cheap methods; without a proxy ``tune`` runs it directly when the training records are protected.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor

from botorch_dp.methods.protocol import MethodContext, MethodRun, MethodUnavailable
from botorch_dp.methods.training_proxy import TrainingProxy, random_configurations, refuse_a_searched_run
from botorch_dp.privacy.ledger import TRAINING_RDP_ORDERS, PrivacyLedger

__all__ = ["TrainingSelectionMethod"]


@dataclass(frozen=True)
class TrainingSelectionMethod:
    r"""Papernot–Steinke private selection over whole DP training runs (see the module).

    Attributes:
        space: The objective's ``SearchSpace`` (the released hyperparameters are read back on it).
        epsilon: ``ε`` of the whole selection on the training records (and on the validation
            users with ``protect="both"``).
        delta: ``δ`` of every statement.
        mean_trials: ``E[K] > 1``.
        protect: ``"training"`` or ``"both"``.
        distribution: ``K``'s distribution (``"tnb"``: truncated negative binomial with ``η = 1``;
            ``"poisson"`` may release no trial, which ``run_private`` refuses to turn into a point).
        max_trials: Pad the run to this many trials (the wall time then does not reveal ``K``).
        loss_clip: ``C`` of the noisy scores with ``protect="both"`` (``None``: the objective's
            ``loss_cap``).
        accounting: How the training records' charge is accounted (``select_training_runs``):
            ``"auto"`` (the privacy-profile bound where it is tighter and the ledger's training side is
            empty, else RDP), ``"profile"`` or ``"rdp"``; the guarantee says which was used.
        binomial_rounds: ``m`` of ``distribution="binomial"`` (``K ~ Binomial(m, E[K]/m)``; may be 0 trials,
            which ``run_private`` refuses to turn into a point, as for Poisson).
        tnb_eta: ``η`` of ``distribution="tnb"`` (1: geometric).
        mechanism: What the objective trains each run with, in words (``selection_charge.training_mechanism``:
            ``"DP-SGD"`` or AMP's), stated by ``describe``; ``None``: not known (``describe`` says "DP").
    """

    space: Any
    epsilon: float
    delta: float
    mean_trials: float
    protect: str = "both"
    distribution: str = "tnb"
    max_trials: int | None = None
    loss_clip: float | None = None
    accounting: str = "auto"
    binomial_rounds: int | None = None
    tnb_eta: float = 1.0
    mechanism: str | None = None
    name: str = dataclasses.field(default="training_selection", init=False)

    @property
    def gdp_mu(self) -> float | None:
        return None  # a Rényi-DP curve, charged to the objective's own ledger

    @property
    def runs_configurations(self) -> bool:
        return False  # handed one objective and a child of tune's seed; tune wraps its one release

    def with_max_trials(self, max_trials: int | None) -> TrainingSelectionMethod:
        r"""Padded to ``max_trials`` trials (``None``: unchanged): the wall time does not reveal ``K``."""
        return self if max_trials is None else dataclasses.replace(self, max_trials=max_trials)

    def resolved(self, proxy_objective: Callable[[Tensor], Tensor] | None, context: MethodContext) -> Any:
        return self

    def simulate(self, proxy_objective: Callable[[Tensor], Tensor], context: MethodContext, seed: int) -> Tensor:
        raise MethodUnavailable(
            "training_selection: private selection over whole DP training runs is not simulated on a "
            "proxy objective (it trains one model per trial on the private training records); simulate_training "
            "simulates it on a proxy's data."
        )

    @property
    def private_trainings(self) -> float:
        r"""The expected DP trainings on the private records (``max(K, max_trials)``: at least ``E[K]``)."""
        return float(max(self.mean_trials, self.max_trials or 0))

    @property
    def _distribution(self) -> str:
        return _LONG_NAMES.get(self.distribution, self.distribution)

    @property
    def _k_args(self) -> dict[str, Any]:
        k_args: dict[str, Any] = dict(mean_trials=self.mean_trials, distribution=self._distribution)
        if self._distribution == "binomial":
            k_args["binomial_rounds"] = self.binomial_rounds
        if self._distribution == "truncated_negative_binomial":
            k_args["tnb_eta"] = self.tnb_eta
        return k_args

    def simulate_training(self, proxy: TrainingProxy, seed: int) -> float:
        r"""The scoring half's mean loss of the simulated selection's winning model (public; see the module)."""
        from botorch_dp.privacy.analysis.private_selection import per_trial_mu_for_epsilon, sample_num_trials

        objective = proxy.objective
        refuse_a_searched_run(self.name, objective)
        sigma = _trial_noise(self.epsilon, self.delta, tuple(objective.possible_run_shapes()), self.mean_trials,
                             self._distribution, self.binomial_rounds, self.tnb_eta)  # fmt: skip
        rng = np.random.default_rng([int(seed), 4103])
        K = max(1, sample_num_trials(rng=rng, **self._k_args))
        configs = random_configurations(self.space, K, seed)
        noise, clip = 0.0, None
        if self.protect == "both":  # the private score's noise on the mean of n clipped losses
            clip = objective.loss_cap if self.loss_clip is None else self.loss_clip
            mu = per_trial_mu_for_epsilon(
                target_epsilon=self.epsilon, target_delta=self.delta, orders=TRAINING_RDP_ORDERS, **self._k_args
            )
            noise = clip / (objective.num_users * mu)
        per_model = proxy.trained(configs, sigma, seed)
        users, choices = proxy.held_out_choices(
            per_model, objective.num_users, seed, score_noise=noise, score_clip=clip
        )  # the private run chooses on the objective's n validation users
        return proxy.held_out_score(per_model, users, choices)  # the winner's own model is released

    def describe(self) -> str:
        rounds = f" over m = {self.binomial_rounds} rounds" if self._distribution == "binomial" else ""
        if self._distribution == "truncated_negative_binomial" and self.tnb_eta != 1.0:
            rounds = f" with eta = {self.tnb_eta:g}"
        return (
            f"private selection over whole {self.mechanism or 'DP'} training runs (E[K] = {self.mean_trials:g}, K ~ "
            f"{self.distribution}{rounds}, hidden; protects {self.protect}; accounting={self.accounting!r})"
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
        r"""Run the selection on ``objective`` (a ``TorchModelTuningObjective`` built with ``dp_sgd=``, or an
        ``AMPTuningObjective``: its trials are AMP runs below ``plan_amp_selection``'s reference; whose ledger is
        ``ledger``), charged once up front; ``executor`` is not used (trials train in turn)."""
        from botorch_dp.methods.training_runs import select_training_runs

        result = select_training_runs(
            objective,
            self.space,
            epsilon=self.epsilon,
            delta=self.delta,
            mean_trials=self.mean_trials,
            protect=self.protect,
            distribution=self.distribution,
            loss_clip=self.loss_clip,
            max_trials=self.max_trials,
            seed=seed,
            ledger=ledger,
            progress=progress,
            accounting=self.accounting,
            binomial_rounds=self.binomial_rounds,
            tnb_eta=self.tnb_eta,
        )
        if result.hyperparameters is None:  # Poisson K = 0: the selection released "no trial"
            raise ValueError(
                f"distribution={self.distribution!r}: the selection released no trial (K = 0), so there "
                "are no hyperparameters to return; use distribution='tnb' (K >= 1; tune's "
                "plan_options={'distribution': 'geometric'}, the default)."
            )
        training = result.guarantee["training"]
        free = self.space.configurations()[0].keys()
        configuration = {name: result.hyperparameters[name] for name in free}
        theta = self.space.from_natural(result.hyperparameters).to(torch.float64)
        timing = str(training.details["timing"])
        description = training.description.removesuffix(f". {timing}")
        procedure = f"{description} ({'; '.join(_stated(result.guarantee))})"
        return MethodRun(
            method=self.name,
            theta=theta,
            result=result,
            run_id=str(training.details["ledger_run_id"]),
            num_users=int(objective.num_users),
            epsilon=training.epsilon,
            delta=training.delta,
            description=f"{procedure}. {timing}",
            released_score=result.released_score,
            configuration=configuration,
            procedure=procedure,
            timing=timing,
            guarantees=result.guarantees,
        )


_LONG_NAMES = {"tnb": "truncated_negative_binomial"}


@functools.lru_cache(maxsize=32)
def _trial_noise(
    epsilon: float,
    delta: float,
    shapes: tuple[tuple[float, int], ...],
    mean_trials: float,
    distribution: str,
    binomial_rounds: int | None = None,
    tnb_eta: float = 1.0,
) -> float:
    r"""Every trial's ``σ`` of the selection at ``(ε, δ)`` (``calibrate_selection_noise``; public)."""
    from botorch_dp.training.selection_accounting import calibrate_selection_noise  # scipy, Opacus: late

    return calibrate_selection_noise(
        target_epsilon=epsilon,
        target_delta=delta,
        shapes=shapes,
        mean_trials=mean_trials,
        distribution=distribution,
        binomial_rounds=binomial_rounds,
        tnb_eta=tnb_eta,
    )


def _stated(guarantee: dict[str, Any]) -> list[str]:
    r"""``"<set>: (ε, δ)"`` for each protected set of a selection's guarantee."""
    return [f"{name}: (epsilon = {g.epsilon:.4g}, delta = {g.delta:.3g})" for name, g in guarantee.items()]
