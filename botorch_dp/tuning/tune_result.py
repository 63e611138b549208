r"""What ``tune`` returns, and the helpers its strategies share (``one_call``, ``sampled``).

``TuneResult`` holds only what the procedure releases: the chosen hyperparameters in natural
units, the released runs (every configuration's with ``"enumerate"``, only the winner's with
``"sample"`` and with a selection method, whose number of trials and losing trials stay hidden),
their noisy scores and the guarantee. ``objective`` and ``proxy`` take a list
of configurations in natural units, or are ``SearchSpaceObjective``s that take θ (a
``TorchModelTuningObjective``); ``configs_objective`` gives either as DP-GIBO evaluates it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from botorch_dp.optim import DPGIBOConfig, DPGIBOResult
from botorch_dp.plan import MethodComparison, MethodRun, PrivatePlan
from botorch_dp.privacy.ledger import PrivacyLedger
from botorch_dp.privacy.statement import NO_GUARANTEE, GuaranteeStatement
from botorch_dp.tuning.search_space import SearchSpace, SearchSpaceObjective

__all__ = [
    "SCORE_PART",
    "ConfigsObjective",
    "ConfigurationRun",
    "TuneGuarantee",
    "TuneObjective",
    "TuneResult",
    "configs_objective",
    "final_losses",
]

#: What ``tune`` takes as ``objective`` (and ``proxy``): configurations ↦ losses, or a θ-objective.
TuneObjective = Callable[[list[dict[str, Any]]], Any] | SearchSpaceObjective

#: The ledger part of the choice's scores (``"enumerate"``).
SCORE_PART = "score"


@dataclass(frozen=True)
class TuneGuarantee:
    r"""The guarantee of the whole procedure for the validation users (all its runs and its choice).

    ``epsilon = inf`` (and ``mu = inf``) when a run had none (``unsafe_allow_sensitive_fitting``):
    ``holds`` is then False and the result's report and JSON say there is no guarantee."""

    mu: float  # NaN when the procedure is an RDP statement (``strategy="sample"``)
    epsilon: float
    delta: float

    @property
    def holds(self) -> bool:
        r"""Whether the procedure has a guarantee (a finite ``ε``)."""
        return math.isfinite(self.epsilon)


@dataclass
class ConfigurationRun:
    r"""One configuration's DP-GIBO run and, with several, its released noisy score.

    When ``tune`` ran another method (``TuneResult.method``, ``tuning.method_runs``), ``result``
    is its ``plan.MethodRun`` (``result.release.theta`` is the released point, ``noisy_score``
    the winner's released score; its own ``result`` is the selection's winner only) and
    ``config`` DP-GIBO's planned settings, kept for reference.
    """

    configuration: dict[str, Any]
    result: DPGIBOResult | MethodRun
    run_id: str
    num_users: int
    config: DPGIBOConfig
    plan: PrivatePlan | None = None
    noisy_score: float | None = None


@dataclass
class TuneResult:
    r"""What ``tune`` releases: the chosen hyperparameters in natural units and the guarantee.

    Attributes:
        hyperparameters: ``{name: value}`` in the space's order, plain Python values.
        guarantee: ``TuneGuarantee`` of this procedure (``.epsilon``, ``.delta``, ``.mu``).
        runs: The ``ConfigurationRun`` of each configuration, in ``space.configurations()`` order.
        chosen: The index of the chosen run.
        statement: What the ledger protected (all its runs; ``privacy.statement``).
        score_mu: ``μ_score``, the GDP parameter of each configuration's noisy score (``None``
            with one configuration: no choice is made).
        method: The method that ran (``"dp_gibo"``, ``"private_random_search"``, ``"dp_hypo"``;
            ``tuning.method_runs``).
        procedure: That method's mechanism and guarantee in words (``None``: DP-GIBO per
            configuration, described by ``guarantee``).
        methods: The method choice on the proxy (``plan.MethodComparison``; ``str`` gives its
            table), when ``method="auto"`` or a forced method was compared there; else ``None``.
        cautions: Warnings the guarantee carries: settings refused by default that the call was
            opted into (``δ ≥ 1/n``, a noise-dominated budget; ``tuning.tune_checks``).
        timing: For a private selection (a hidden number of trials ``K``): what the run's wall
            time reveals and whether it was padded to ``max_trials`` (``None`` otherwise).
    """

    hyperparameters: dict[str, Any]
    guarantee: TuneGuarantee
    runs: list[ConfigurationRun]
    chosen: int
    statement: GuaranteeStatement
    ledger: PrivacyLedger = field(repr=False)
    score_mu: float | None = None
    method: str = "dp_gibo"
    procedure: str | None = None
    methods: MethodComparison | None = field(default=None, repr=False)
    cautions: tuple[str, ...] = ()
    timing: str | None = None

    def guarantee_report(self) -> str:
        r"""What was protected, in plain words (``GuaranteeStatement``), after this procedure's own line."""
        g = self.guarantee
        if not g.holds:
            return (
                f"tune: {NO_GUARANTEE} for the validation users (epsilon = inf): a run looked at the "
                f"sensitive losses outside the mechanisms (unsafe_allow_sensitive_fitting)\n{self.statement}"
            )
        how = (
            f"by {self.procedure}"
            if self.procedure is not None
            else f"over {len(self.runs)} configuration(s) (mu = {g.mu:.4g} Gaussian DP)"
            if math.isfinite(g.mu)
            else "by Papernot–Steinke selection over a hidden number of sampled runs (RDP)"
        )
        timing = "" if self.timing is None else f"{self.timing}\n"
        return (
            f"tune: (epsilon = {g.epsilon:.4g}, delta = {g.delta:.3g})-DP for the validation users {how}\n"
            f"{timing}{self.statement}" + "".join(f"\nWARNING: {caution}" for caution in self.cautions)
        )

    def to_json(self, path: str | None = None) -> str:
        r"""The released hyperparameters, scores and guarantee as strict JSON (no noise seed)."""
        out = {
            "hyperparameters": self.hyperparameters,
            "guarantee": {
                "holds": self.guarantee.holds,
                "mu": self.guarantee.mu if math.isfinite(self.guarantee.mu) else None,
                "epsilon": self.guarantee.epsilon if self.guarantee.holds else "inf",  # holds False: no guarantee
                "delta": self.guarantee.delta,
            },
            "configurations": [
                {
                    "configuration": r.configuration,
                    "noisy_score": r.noisy_score,
                    "theta": r.result.release.theta.tolist(),
                }
                for r in self.runs
            ],
            "chosen": self.chosen,
            "method": self.method,
            "statement": self.statement.to_dict(),
            "warnings": list(self.cautions),
        }
        if self.timing is not None:
            out["timing"] = self.timing
        text = json.dumps(out, indent=1, allow_nan=False)
        if path is not None:
            with open(path, "w") as f:
                f.write(text + "\n")
        return text


class ConfigsObjective:
    r"""θ-batch → ``objective``'s losses at the batch's natural configurations (public points).

    A class rather than a closure, so that it pickles for a process or cluster executor
    whenever ``objective`` does.
    """

    def __init__(
        self, objective: Callable[[list[dict[str, Any]]], Any], space: SearchSpace, choice: dict[str, Any]
    ) -> None:
        self.objective, self.space, self.choice = objective, space, dict(choice)

    def __call__(self, X: Tensor) -> Tensor:
        rows = self.space.to_natural(X.reshape(-1, self.space.dim), choice=self.choice)
        assert isinstance(rows, list)  # one dict per row of a q x d batch
        return torch.as_tensor(self.objective(list(rows)), dtype=torch.float64)


def configs_objective(
    objective: TuneObjective, space: SearchSpace, choice: dict[str, Any]
) -> Callable[[Tensor], Tensor]:
    r"""``objective`` as DP-GIBO evaluates it for configuration ``choice``: a
    ``SearchSpaceObjective`` (e.g. ``TorchModelTuningObjective``, which takes θ itself and
    charges its training runs) bound with ``with_choice``; any other callable, which takes a
    list of configurations in natural units, wrapped in a ``ConfigsObjective``."""
    if isinstance(objective, SearchSpaceObjective):
        bound: Any = objective.with_choice(choice) if choice else objective
        return bound
    return ConfigsObjective(objective, space, choice)


def final_losses(evaluate: Callable[[Tensor], Tensor], theta: Tensor, num_users: int, what: str) -> Tensor:
    losses = evaluate(theta.reshape(1, -1))
    if losses.shape != (1, num_users):
        raise ValueError(f"objective returned shape {tuple(losses.shape)} at {what}, expected (1, {num_users}).")
    if not torch.isfinite(losses).all():
        raise ValueError(f"objective returned non-finite losses at {what}; nothing was released for the choice.")
    return losses
