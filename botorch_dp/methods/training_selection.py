r"""Private selection over whole DP-SGD training runs as a method (``methods.protocol``).

``TrainingSelectionMethod`` wraps ``training.private_selection.select_training_runs``
(Papernot & Steinke over ``K`` DP-SGD training runs at random hyperparameters, ``K`` hidden):
the whole procedure is charged ONCE (on the training records at its privacy-profile bound where
that is tighter, else its Rényi-DP curve; ``accounting``) to the objective's ledger before the first
trial, on the training records and, with ``protect="both"``, on the validation users too (the
scores noised). Its private run releases the winning trial's hyperparameters (as ``θ`` and its
categorical ``configuration``), its trained model (``MethodRun.result.model``) and its score;
``MethodRun.guarantees`` states ``(ε, δ)`` for ``"training"`` and, with ``protect="both"``,
``"validation"`` (with ``protect="training"`` the validation users are treated as public:
``None``).

It is not simulated on a proxy (``simulate`` raises ``MethodUnavailable``): ``tune`` runs it
directly when the training records are to be protected.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from botorch_dp.methods.protocol import MethodContext, MethodRun, MethodUnavailable
from botorch_dp.privacy.ledger import PrivacyLedger

__all__ = ["TrainingSelectionMethod"]


@dataclass(frozen=True)
class TrainingSelectionMethod:
    r"""Papernot–Steinke private selection over whole DP-SGD training runs (see the module).

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
    name: str = dataclasses.field(default="training_selection", init=False)

    @property
    def gdp_mu(self) -> float | None:
        return None  # a Rényi-DP curve, charged to the objective's own ledger

    def resolved(self, proxy_objective: Callable[[Tensor], Tensor] | None, context: MethodContext) -> Any:
        return self

    def simulate(self, proxy_objective: Callable[[Tensor], Tensor], context: MethodContext, seed: int) -> Tensor:
        raise MethodUnavailable(
            "training_selection: private selection over whole DP-SGD training runs is not simulated on a "
            "proxy (it trains one model per trial on the private training records)."
        )

    def describe(self) -> str:
        return (
            f"private selection over whole DP-SGD training runs (E[K] = {self.mean_trials:g}, K ~ "
            f"{self.distribution}, hidden; protects {self.protect})"
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
        r"""Run the selection on ``objective`` (a ``TorchModelTuningObjective`` built with ``dp_sgd=``,
        whose ledger is ``ledger``), charged once up front; ``executor`` is not used (trials train in turn)."""
        from botorch_dp.training.private_selection import select_training_runs

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
        )
        if result.hyperparameters is None:  # Poisson K = 0: the selection released "no trial"
            raise ValueError(
                f"distribution={self.distribution!r}: the selection released no trial (K = 0), so there "
                "are no hyperparameters to return; use distribution='tnb' (K >= 1)."
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


def _stated(guarantee: dict[str, Any]) -> list[str]:
    r"""``"<set>: (ε, δ)"`` for each protected set of a selection's guarantee."""
    return [f"{name}: (epsilon = {g.epsilon:.4g}, delta = {g.delta:.3g})" for name, g in guarantee.items()]
