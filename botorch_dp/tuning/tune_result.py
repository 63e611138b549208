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
from botorch_dp.objectives.search_space import SearchSpace, SearchSpaceObjective
from botorch_dp.optim.released_values import as_table, charges_of, finish, release_rows
from botorch_dp.privacy.analysis.gdp import gdp_epsilon
from botorch_dp.privacy.ledger import PrivacyLedger
from botorch_dp.privacy.ledger.events import DPSGDRun
from botorch_dp.privacy.statement import NO_GUARANTEE, GuaranteeStatement, guarantee_statement

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

#: What a planning proxy's users are NOT (``TuneResult.guarantee_report``).
PROXY_NOT_PROTECTED = (
    "the proxy's users (proxy=): their losses were read without noise to plan the runs (and to compare "
    "the methods); the guarantee assumes they are public data, not among the people above"
)
#: What ``protect="training"`` leaves out (``TuneResult.guarantee_report``).
VALIDATION_NOT_PROTECTED = (
    "the validation users (protect='training'): the winner was chosen by, and released with, their plain "
    "mean score; they are treated as public"
)
#: Each protected set in words (``TuneResult.protected``).
_SET_WORDS = {"validation": "validation users", "training": "training records"}
#: A private selection's trial, in words, by method (``"sample"``: ``tune(strategy="sample")``; ``{mechanism}``: what
#: the selection's training statement says each run trains with, ``_trained_with``).
_TRIALS = {
    "sample": "a DP-GIBO run on a configuration drawn at random, then its noisy score",
    "private_random_search": "a point drawn at random and its noisy score",
    "dp_hypo": "a point drawn from a density adapted to the earlier trials, and its noisy score",
    "training_selection": "one {mechanism} training run at hyperparameters drawn at random, then its score",
}
#: The cheap training methods and the untuned run, in words (``TuneResult.runs_explained``; DP-SGD only: ``tune``
#: refuses them for an AMP objective).
_CHEAP = {
    "proxy_then_train": "the configurations tried on the public proxy (no record), then ONE final DP-SGD training on "
    "the training records",
    "subsample_tuning": "ONE record for the tuning phase (all its trainings on one Poisson subset, charged as one "
    "amplified mechanism before the subset was drawn), then ONE final DP-SGD training on all the training records",
    "untuned": "ONE DP-SGD training at the public defaults, no tuning",
}


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
        method_rule: Which rule picked ``method`` and why, in one line (``tune``; ``None`` when
            built otherwise).
        protected: ``{protected set: (ε, δ) or None}`` for ``"validation"`` and ``"training"``
            (``MethodRun.guarantees``; ``None``: this procedure does not protect that set by itself).
        advice: ``method="auto"`` among the training methods: why tuning is not expected to beat one
            untuned run on the proxy (``methods.training_choice.untuned_advice``), else ``None``.
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
    protected: dict[str, tuple[float, float] | None] = field(default_factory=dict)
    method_rule: str | None = None
    advice: str | None = None

    def __repr__(self) -> str:
        g = self.guarantee
        head = (
            f"TuneResult(hyperparameters={self.hyperparameters!r}, method={self.method!r}, "
            f"epsilon={g.epsilon:.4g}, delta={g.delta:.3g})"
        )
        return head + ("" if self.advice is None else f"\nADVICE: {self.advice}") + self._method_choice()

    def _method_choice(self) -> str:
        r"""The method table on the proxy (mean ± s.e., paired wins, the chosen ``*``, a tie's note), if any."""
        planning = "" if self.planning is None else f"\n{self.planning}"
        return planning + ("" if self.methods is None else f"\n{self.methods}")

    def guarantee_report(self) -> str:
        r"""What was protected and what was NOT, in plain words (``GuaranteeStatement``), after this
        procedure's own line and the line saying which rule picked its method (``method_rule``); then
        how its configurations became the ledger's runs (``runs_explained``); then the ``cautions``;
        then the method choice on the proxy, when one was made."""
        g = self.guarantee
        if not g.holds:
            head = (
                f"tune: {NO_GUARANTEE} for the validation users (epsilon = inf): a run looked at the "
                "sensitive losses outside the mechanisms (unsafe_allow_sensitive_fitting)"
            )
        else:
            how = (
                f"by {self.procedure}"
                if self.procedure is not None
                else f"over {len(self.runs)} configuration(s) (mu = {g.mu:.4g} Gaussian DP)"
                if math.isfinite(g.mu)
                else "by Papernot–Steinke selection over a hidden number of sampled runs (RDP)"
            )
            head = f"tune: (epsilon = {g.epsilon:.4g}, delta = {g.delta:.3g})-DP for the validation users {how}"
            if self.protected.get("training") is not None:
                head = f"tune: {'; '.join(self._protected_in_words())}, by {self.procedure}"
        unprotected = ((PROXY_NOT_PROTECTED,) if self.planned_on_proxy else ()) + (
            () if self.timing is None else (self.timing,)
        )
        if self.protected.get("training") is not None and self.protected.get("validation") is None:
            unprotected += (VALIDATION_NOT_PROTECTED,)
        method = [] if self.method_rule is None else [f"Method: {self.method} ({self.method_rule})."]
        lines = [head, *method, self.statement.text(unprotected), "Configurations and runs:"]
        lines += [f"- {line}" for line in self.runs_explained()]
        cautions = "".join(f"\nWARNING: {caution}" for caution in self.cautions)
        advice = "" if self.advice is None else f"\nADVICE: {self.advice}"
        return "\n".join(lines) + cautions + advice + self._method_choice()

    def _protected_in_words(self) -> list[str]:
        r"""``"(ε, δ)-DP for <set>"`` per protected set, or that the set is not protected by this procedure."""
        words = {name: f"the {w}" for name, w in _SET_WORDS.items()}
        return [
            f"(epsilon = {p[0]:.4g}, delta = {p[1]:.3g})-DP for {words[name]}"
            if p is not None
            else f"{words[name]} NOT protected (treated as public)"
            for name, p in sorted(self.protected.items(), key=lambda item: item[0] != "training")
        ]

    @property
    def model(self) -> Any:
        r"""The released trained model of a method that trains one (the methods that protect the training
        records: the selection's winning trial, the cheap methods' final run, the untuned run), else ``None``."""
        released = self.runs[self.chosen].result if self.runs else None
        inner = getattr(released, "result", None)
        return getattr(inner, "model", None) if self.protected.get("training") is not None else None

    @property
    def planned_on_proxy(self) -> bool:
        r"""Whether a proxy's losses were read (a run planned, or the methods compared, on it)."""
        return self.methods is not None or any(r.plan is not None for r in self.runs)

    def runs_explained(self) -> list[str]:
        r"""How this procedure's configurations became the ledger's runs, in words (one line each):
        a configuration is one combination of the categorical hyperparameters' values; a run is one
        entry of the ledger (a DP-GIBO run, the one release of the choice's noisy scores, or a whole
        private selection), and every run in the ledger composes."""
        K, total = len(self.runs), self.statement.num_validation_runs
        if self.method in _CHEAP:
            lines = [f"{_CHEAP[self.method]}: only its model's hyperparameters are released (1 configuration)"]
            own = 0 if self.protected.get("validation") in (None, (0.0, self.guarantee.delta)) else 1
        elif self.method != "dp_gibo" or (K == 1 and self.score_mu is not None):  # a selection: the winner only
            trial = _TRIALS.get(self.method if self.score_mu is None else "sample", "trial and its noisy score")
            trial = trial.format(mechanism=_trained_with(self) or "DP")
            lines = [
                f"one private selection over a hidden number of trials (each {trial}), recorded in the ledger "
                "as ONE run (its whole guarantee, charged before the first trial): 1 run; only the winner is "
                "released (1 configuration), never the number of trials nor a losing trial"
            ]
            own = 0 if self.method == "training_selection" and self.protected.get("validation") is None else 1
        elif K > 1:
            lines = [
                f"{K} configuration(s) (the combinations of the categorical hyperparameters' values), each tuned "
                f"by its own DP-GIBO run ({K} runs); then ONE release of their {K} noisy scores chose the best, "
                f"and the ledger counts it as a run of its own: {K} + 1 = {K + 1} run(s), whose costs add up "
                "(their mu squared sum to the total's)"
            ]
            own = K + 1
        else:
            lines = ["1 configuration (no categorical hyperparameter to choose): one DP-GIBO run, no choice: 1 run"]
            own = 1
        if total != own:
            lines.append(
                f"the ledger holds {total} run(s) on these validation users in all "
                f"({self.statement.runs_in_words()}): runs recorded there besides this call's count too"
            )
        trainings = len(self.ledger.training.records())
        if self.method in _CHEAP:
            lines.append(f"the training records: {trainings} training record(s) in the ledger, composed (RDP)")
        elif self.method == "training_selection":
            lines.append(
                f"the training records: the whole selection's curve recorded ONCE before the first trial (1 "
                f"training record of {trainings} in the ledger), whatever the hidden number of training runs"
            )
        elif trainings:
            lines.append(
                f"{trainings} training run(s) on the training records (e.g. DP-SGD): one per model trained "
                "while tuning (every evaluation of every run, and each scored final point), composed by the "
                "training accountant; they are not validation runs" + _each_training(self.ledger, self.guarantee.delta)
            )
        return lines

    def released_values(self, *, as_frame: bool | None = None) -> Any:
        r"""One row per released quantity, like Optuna's ``trials_dataframe()`` (``optim.released_values``).

        For each released run (``run``: its index in ``runs``; ``configuration``: its categorical
        values): every DP-GIBO iterate and step release and its returned ``θ``; then each
        configuration's noisy ``score`` (``"enumerate"``) or a selection's ``winner_score``; last the
        chosen ``hyperparameters`` in natural units. ``mu`` is the Gaussian-DP charge of the row's own
        noise, read from the ledger (``None`` for a value computed from other releases, and inside a
        private selection, whose ``ε`` covers its winner as a whole); ``epsilon`` (at ``delta``) that
        of what the value depends on; ``protected`` the sets covered. A private selection's table has
        its winner only (never a losing trial, nor their number); nothing un-noised is read.

        Args:
            as_frame: ``None``: a pandas ``DataFrame`` when pandas is installed (optional), else a
                list of dicts; ``True``: a ``DataFrame`` (``ImportError`` without pandas); ``False``:
                the list of dicts.
        """
        g, ledger = self.guarantee, self.ledger
        in_ledger = set(ledger.validation.run_ids())
        rows: list[dict[str, Any]] = []
        for k, run in enumerate(self.runs):
            start = len(rows)
            release = run.result.release
            if hasattr(release, "iterates"):  # a DP-GIBO run (the winner of a sampled selection: inside its ε)
                inside = run.run_id not in in_ledger  # its own records name what it released, not what it cost
                records = run.result.records if inside else ledger.validation.records(run.run_id)
                charges = None if records is None else charges_of(records)
                rows += release_rows(release, delta=g.delta, charges=charges, within=g.epsilon if inside else None)
            else:  # a selection's winner point (private random search, DP-HyPO)
                rows.append(_row("theta", release.theta.tolist(), None, g.epsilon))
            if run.noisy_score is not None:
                chosen_by_scores = len(self.runs) > 1 and self.score_mu is not None
                if chosen_by_scores:
                    assert self.score_mu is not None
                    rows.append(_row("score", run.noisy_score, self.score_mu, gdp_epsilon(self.score_mu, g.delta)))
                else:
                    rows.append(_row("winner_score", run.noisy_score, None, g.epsilon))
            for row in rows[start:]:
                row.update(run=k, configuration=dict(run.configuration))
        rows.append({**_row("hyperparameters", dict(self.hyperparameters), None, g.epsilon), "run": self.chosen})
        rows[-1]["configuration"] = dict(self.runs[self.chosen].configuration)
        ordered = [
            {"run": r["run"], "configuration": r["configuration"], **r} for r in finish(rows, g.delta, self.statement)
        ]
        if self.protected.get("training") is not None:  # a selection over training runs: its own protected sets
            covered = " and ".join(_SET_WORDS[name] for name, p in self.protected.items() if p is not None)
            for row in ordered:
                row["protected"] = covered
        return as_table(ordered, as_frame)

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
            "method_rule": self.method_rule,
            "statement": self.statement.to_dict(),
            "warnings": list(self.cautions),
            "protected": {
                name: None if p is None else {"epsilon": p[0] if math.isfinite(p[0]) else "inf", "delta": p[1]}
                for name, p in self.protected.items()
            },
        }
        if self.timing is not None:
            out["timing"] = self.timing
        if self.advice is not None:
            out["advice"] = self.advice
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
    run: MethodRun,
    space: SearchSpace,
    ledger: PrivacyLedger,
    methods: MethodComparison | None = None,
    *,
    advice: str | None = None,
) -> TuneResult:
    r"""The ``TuneResult`` of a method's private run (the one way ``tune`` builds one): the released
    point in natural units, the released runs, and the guarantee (``μ``-GDP when ``run.mu`` is set,
    else the run's ``(ε, δ)``); ``methods`` is the comparison on the proxy, if one was made; ``advice``
    says when tuning is not expected to beat one untuned run."""
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
        protected=dict(run.guarantees),
        advice=advice,
    )


def _trained_with(result: TuneResult) -> str | None:
    r"""What the chosen run's trials trained with, as its training statement's ``details["mechanism"]`` says
    (``selection_charge.training_mechanism``; ``None`` where it states none)."""
    released = getattr(result.runs[result.chosen].result, "result", None) if result.runs else None
    guarantee = getattr(released, "guarantee", None)  # per protected set for the training methods
    details = getattr(guarantee.get("training"), "details", None) if isinstance(guarantee, dict) else None
    mechanism = details.get("mechanism") if isinstance(details, dict) else None
    return mechanism if isinstance(mechanism, str) else None


def _each_training(ledger: PrivacyLedger, delta: float) -> str:
    r"""``"; each ... (ε, σ)"`` when every training record is a DP-SGD run of one shape, else ``""``."""
    events = {r.event for r in ledger.training.records()}
    if len(events) != 1 or not isinstance(event := next(iter(events)), DPSGDRun):
        return ""
    from botorch_dp.training.selection_accounting import dp_sgd_runs_epsilon  # scipy, Opacus: late

    alone = dp_sgd_runs_epsilon(event.noise_multiplier, event.sample_rate, event.steps, delta)
    sigma = event.noise_multiplier
    return f"; each run alone (epsilon = {alone:.4g}, delta = {delta:.3g}) at noise_multiplier = {sigma:.4g}"


def _row(quantity: str, value: Any, mu: float | None, epsilon: float) -> dict[str, Any]:
    return {"quantity": quantity, "step": None, "value": value, "mu": mu, "epsilon": epsilon}
