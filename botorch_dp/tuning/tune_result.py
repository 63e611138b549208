r"""What ``tune`` returns (built one way: ``tune_result`` from the winner's ``MethodRun``), and how
its objective is evaluated at θ (``configs_objective``).

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

from botorch_dp.methods.choice import MethodComparison
from botorch_dp.methods.enumerate import SCORE_PART, final_losses
from botorch_dp.methods.protocol import ConfigurationRun, MethodRun
from botorch_dp.privacy.analysis.gdp import gdp_epsilon
from botorch_dp.privacy.ledger import PrivacyLedger
from botorch_dp.privacy.statement import NO_GUARANTEE, GuaranteeStatement, guarantee_statement
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
    "tune_result",
]

#: What ``tune`` takes as ``objective`` (and ``proxy``): configurations ↦ losses, or a θ-objective.
TuneObjective = Callable[[list[dict[str, Any]]], Any] | SearchSpaceObjective


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
        planning: What ``plan_budget`` cut from the planning on the proxy (``None``: nothing).
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
    planning: str | None = None

    def __repr__(self) -> str:
        g = self.guarantee
        head = (
            f"TuneResult(hyperparameters={self.hyperparameters!r}, method={self.method!r}, "
            f"epsilon={g.epsilon:.4g}, delta={g.delta:.3g})"
        )
        return head + self._method_choice()

    def _method_choice(self) -> str:
        r"""The method table on the proxy (mean ± s.e., paired wins, the chosen ``*``, a tie's note), if any."""
        planning = "" if self.planning is None else f"\n{self.planning}"
        return planning + ("" if self.methods is None else f"\n{self.methods}")

    def guarantee_report(self) -> str:
        r"""What was protected, in plain words (``GuaranteeStatement``), after this procedure's own line;
        then the method choice on the proxy, when one was made."""
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
            f"{timing}{self.statement}"
            + "".join(f"\nWARNING: {caution}" for caution in self.cautions)
            + self._method_choice()
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


def tune_result(
    run: MethodRun, space: SearchSpace, ledger: PrivacyLedger, methods: MethodComparison | None = None
) -> TuneResult:
    r"""The ``TuneResult`` of a method's private run (the one way ``tune`` builds one): the released
    point in natural units, the released runs, and the guarantee (``μ``-GDP when ``run.mu`` is set,
    else the run's ``(ε, δ)``); ``methods`` is the comparison on the proxy, if one was made."""
    if run.mu is not None:
        guarantee = TuneGuarantee(run.mu, gdp_epsilon(run.mu, run.delta), run.delta)
    else:
        guarantee = TuneGuarantee(math.nan, run.epsilon, run.delta)
    natural = space.to_natural(torch.as_tensor(run.theta, dtype=torch.float64).reshape(-1), choice=run.configuration)
    assert isinstance(natural, dict)  # one point
    return TuneResult(
        hyperparameters=dict(natural),
        guarantee=guarantee,
        runs=run.runs,
        chosen=run.chosen,
        statement=guarantee_statement(ledger, run.delta),
        ledger=ledger,
        score_mu=run.score_mu,
        method=run.method,
        procedure=run.procedure,
        methods=methods,
        timing=run.timing,
    )
