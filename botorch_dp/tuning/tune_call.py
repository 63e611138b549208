r"""A checked ``tune`` call: every argument checked before anything is called, and what follows from them.

``TuneCall.checked(...)`` runs ``tune``'s argument checks in order (each ``ValueError`` names the
argument and its value; ``tuning.tune_checks`` adds the ``δ ≥ 1/n`` and noise-dominated
refusals) and derives the public facts the rest of the call uses: ``μ = gdp_mu(ε, δ)``, the
configurations ``K``, the method asked for (``tuning.method_runs.check_method``), the split
``μ_run``, ``μ_score`` of the enumerate procedure, the noise seeds, the DP-GIBO settings and the
ledger to charge. ``opened_checkpoint`` compares the call with a stored one (``checkpoint_dir``)
and ``check_room_for_trainings`` holds a DP-trained objective to its own limits, both before the
first release.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import math
import os
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from botorch_dp.baselines.selection import check_max_trials
from botorch_dp.optim import DPGIBOConfig
from botorch_dp.optim.checkpoint import kernel_fingerprint
from botorch_dp.optim.stored_config import config_to_json
from botorch_dp.privacy.analysis.gdp import gdp_mu
from botorch_dp.privacy.checks import check_choice, check_delta, check_positive, check_probability, did_you_mean
from botorch_dp.privacy.ledger import PrivacyLedger
from botorch_dp.privacy.ledger.events import DPSGDRun
from botorch_dp.privacy.seeding import PrivacyWarning
from botorch_dp.tuning.discrete import Integer
from botorch_dp.tuning.search_space import SearchSpace, SearchSpaceObjective
from botorch_dp.tuning.tune_checkpoint import TuneCheckpoint, seed_digest
from botorch_dp.tuning.tune_checks import (
    TuneChecks,
    bound_objective,
    check_objective,
    check_setting_names,
    training_event,
)

__all__ = [
    "METHODS",
    "PROTECT",
    "STRATEGIES",
    "TUNE_DEFAULTS",
    "TuneCall",
    "check_method",
    "check_protect",
    "picked_method",
]

#: DP-GIBO settings of ``tune`` unless given as keywords (those of the README's main example:
#: a scaled RBF kernel on the unit cube with length-scale 0.2, AdaGrad, losses of order one).
TUNE_DEFAULTS: dict[str, Any] = dict(
    num_iterations=10, clip_bound=2.0, step_size=0.2, step_rule="adagrad", noise_variance=1e-4
)
#: How ``tune`` chooses among categorical configurations.
STRATEGIES = ("enumerate", "sample")
#: ``tune``'s ``method`` values.
METHODS = ("auto", "dp_gibo", "private_random_search", "dp_hypo")
#: ``tune``'s ``protect`` values (``None``: what the objective makes possible, ``check_protect``).
PROTECT = ("validation", "training", "both")
#: The method that protects the training records: private selection over whole DP-SGD runs.
TRAINING_SELECTION = "training_selection"


def selects_training_runs(objective: Any) -> bool:
    r"""Whether ``objective`` can run a private selection over whole DP-SGD training runs (a
    ``TorchModelTuningObjective`` built with ``dp_sgd=``)."""
    planned = getattr(objective, "planned_run", None)
    return callable(getattr(objective, "train_covered", None)) and callable(planned) and planned() is not None


def check_protect(protect: str | None, objective: Any, method: str) -> str:
    r"""``protect`` checked (``ValueError`` naming it) and resolved: ``None`` is ``"both"`` for an
    objective that trains with DP-SGD and ``method="auto"``, else ``"validation"``; ``"training"`` and
    ``"both"`` need such an objective and ``method="auto"`` (the selection over whole training runs)."""
    if protect is not None and protect not in PROTECT:
        raise ValueError(f"protect must be None or one of {PROTECT}, got {protect!r}.{did_you_mean(protect, PROTECT)}")
    capable = selects_training_runs(objective)
    if protect is None:
        return "both" if capable and method == "auto" else "validation"
    if protect == "validation":
        return protect
    if not capable:
        without = " without DP-SGD" if callable(getattr(objective, "planned_run", None)) else ""
        raise ValueError(
            f"protect={protect!r}: the training records are protected only by an objective that trains with "
            f"DP-SGD (a TorchModelTuningObjective built with dp_sgd=DPSGDConfig(...)), got "
            f"{type(objective).__name__}{without}; "
            "use protect='validation'."
        )
    if method != "auto":
        raise ValueError(
            f"method={method!r} with protect={protect!r}: the training records are protected by private "
            "selection over whole DP-SGD training runs (method='auto'); use method='auto', or "
            "protect='validation' to run this method with every training run charged on its own."
        )
    return protect


def check_method(
    method: str, proxy: Any, num_configurations: int, *, strategy: str = "enumerate", trains: bool = False
) -> str:
    r"""``method`` checked; ``"auto"`` becomes ``"dp_gibo"`` with an objective that charges DP training
    runs (where a forced selection method is refused: the training ledger would count its hidden
    number of trials, on any space) and on a mixed space (categorical configurations) with
    ``strategy="sample"``; otherwise it stays ``"auto"`` (with a proxy: the comparison there;
    without one: the public rule, ``methods.default_rule``)."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}.{did_you_mean(method, METHODS)}")
    if trains and method not in ("auto", "dp_gibo"):
        raise ValueError(
            f"method={method!r} with an objective that charges DP training runs: the training ledger "
            "would count the selection's hidden number of trials; use method='dp_gibo'."
        )
    if method == "auto" and (trains or (num_configurations > 1 and strategy != "enumerate")):
        return "dp_gibo"
    return method  # "auto" without a proxy: ``default_method`` (``TuneCall.checked``)


def picked_method(
    given: str, resolved: str, space: SearchSpace, *, proxy: Any, trains: bool, protect: str, resumable: bool
) -> tuple[str, str]:
    r"""The method ``tune`` runs and the one line saying which rule picked it: ``given`` as passed,
    ``resolved`` as ``check_method`` (or ``protect``) left it; ``"auto"`` without a proxy follows the
    public rule ``methods.default_rule.default_method`` (the space's kinds and dimension only)."""
    if resolved == TRAINING_SELECTION:
        return resolved, f"protect={protect!r}: private selection over whole DP-SGD training runs"
    if given != "auto":
        return resolved, f"method={given!r} given"
    if resolved == "auto" and proxy is None:
        from botorch_dp.methods.default_rule import default_method

        rule = default_method(
            num_continuous=sum(not isinstance(h, Integer) for h in space.relaxed),
            num_integer=sum(isinstance(h, Integer) for h in space.relaxed),
            num_categorical=sum(h.name not in space.fixed for h in space.categoricals),
            resumable=resumable,
        )
        return rule.method, rule.reason
    if resolved == "auto":
        return resolved, "method='auto' with a proxy: the method the comparison on the proxy recommends (methods)"
    why = (
        "an objective that charges DP training runs (the training ledger would count a selection's hidden trials)"
        if trains
        else "strategy='sample' (Papernot–Steinke over DP-GIBO runs on sampled configurations)"
    )
    return resolved, f"method='auto' with {why}: DP-GIBO"


@dataclass(frozen=True)
class TuneCall:
    r"""The checked arguments of one ``tune`` call and the public facts derived from them."""

    objective: Any  # guarded by ``checks`` (refused before a release when n says so)
    given: Any  # as passed (its description goes to a checkpoint)
    space: SearchSpace
    epsilon: float
    delta: float
    mu: float
    share: float
    configurations: list[dict[str, Any]]
    trains: bool
    protect: str
    own: PrivacyLedger | None
    ledger: PrivacyLedger | None
    proxy: Any
    num_users: int | None
    plan_options: dict[str, Any] | None
    strategy: str
    method: str
    mean_trials: float
    max_trials: int | None
    loss_clip: float
    seed: int | None
    progress: bool
    executor: concurrent.futures.Executor | None
    checkpoint_dir: Any
    base: dict[str, Any]
    run_config: DPGIBOConfig
    checks: TuneChecks
    method_rule: str = ""  # which rule picked ``method``, and why (one line; ``picked_method``)

    @property
    def K(self) -> int:
        return len(self.configurations)

    @property
    def mu_run(self) -> float:
        r"""``μ_run``: each configuration's DP-GIBO run in the enumerate procedure."""
        return self.mu if self.K == 1 else self.mu * math.sqrt((1.0 - self.share) / self.K)

    @property
    def mu_score(self) -> float:
        r"""``μ_score``: each configuration's noisy score in the enumerate procedure."""
        return self.mu * math.sqrt(self.share / self.K)

    @property
    def holds(self) -> bool:
        r"""Whether the runs' settings carry a guarantee (``False``: ``unsafe_allow_sensitive_fitting``)."""
        return bool(self.run_config.options.fitting.holds)

    @property
    def selects_trainings(self) -> bool:
        r"""Whether the call runs private selection over whole DP-SGD training runs (``protect`` covers training)."""
        return self.method == TRAINING_SELECTION

    @property
    def sampled(self) -> bool:
        return self.strategy == "sample" and self.K > 1 and self.method == "dp_gibo"

    def config(self, mu: float) -> DPGIBOConfig:
        r"""``tune``'s DP-GIBO settings over the space at ``μ`` (the call's ``δ``)."""
        return DPGIBOConfig(bounds=self.space.bounds, privacy_mu=mu, target_delta=self.delta, **self.base)

    def ledger_for(self, budget_mu: float | None) -> PrivacyLedger:
        r"""The ledger to charge: the one given, else the objective's own (it records the training runs),
        else a new one that holds the procedure to ``budget_mu`` (``None``: an RDP curve calibrated to
        ``(ε, δ)`` itself, which no Gaussian ``μ`` budget contains at every order; a run without a
        guarantee fits no budget)."""
        if self.ledger is not None:
            return self.ledger
        return (
            self.own if self.own is not None else PrivacyLedger(validation_mu_budget=budget_mu if self.holds else None)
        )

    @contextmanager
    def opened_checkpoint(self) -> Iterator[TuneCheckpoint | None]:
        r"""The checkpoint directory, owned by this call while the block runs (the call's arguments
        compared with the stored ones before anything runs), or ``None`` without ``checkpoint_dir``."""
        if self.checkpoint_dir is None:
            yield None
            return
        checkpoint = TuneCheckpoint(self.checkpoint_dir, self.arguments())
        try:  # the directory is this call's until it returns or raises (checkpoint.lock)
            yield checkpoint
        finally:
            checkpoint.close()

    def check_room_for_trainings(self, checkpoint: TuneCheckpoint | None) -> None:
        r"""The procedure's most trainings (every evaluation of every run and each scored final point),
        against a DP-trained objective's own limits (a DP-SGD target), before anything trains or is
        released; a resumed call merges the runs' records first and is held by each batch's charge."""
        if self.selects_trainings or not self.trains:
            return
        trainings = self.K * self.run_config.max_evaluations + (self.K if self.K > 1 else 0)
        composed_cost_warning(self.objective, self.space, trainings, self.delta)
        if checkpoint is not None and any(checkpoint.has_run(k) for k in range(self.K)):
            return
        bound = bound_objective(self.objective, self.configurations[0])
        if callable(getattr(bound, "check_room", None)):
            bound.check_room(trainings)

    def arguments(self) -> dict[str, Any]:
        r"""The public description of the call that ``checkpoint_dir`` compares on resume."""
        what: dict[str, Any] = {"kind": type(self.given).__qualname__}
        if isinstance(self.given, SearchSpaceObjective):
            what.update(
                routes=getattr(self.given, "routes", None),
                num_users=self.given.num_users,
                training_run=repr(training_event(self.given, self.space)),
            )
        settings = config_to_json(dataclasses.replace(self.run_config, seed=None))
        for derived in ("bounds", "privacy_mu", "target_delta"):  # from space, epsilon and delta, compared there
            settings.pop(derived)
        kernel = self.run_config.kernel
        settings["kernel"] = kernel_fingerprint(kernel) if kernel is not None else None
        return {
            "space": self.space.describe(),
            "configurations": self.space.configurations(),
            "objective": what,
            "settings": settings,
            "seed": seed_digest(self.seed),
            "proxy": None if self.proxy is None else type(self.proxy).__qualname__,
            "plan_options": self.plan_options or {},
            "epsilon": self.epsilon,
            "delta": self.delta,
            "strategy": self.strategy,
            "selection_share": self.share,
            "loss_clip": self.loss_clip,
            "num_users": self.num_users,
        }

    @classmethod
    def checked(
        cls,
        tune: Any,
        objective: Any,
        space: Any,
        *,
        epsilon: float,
        delta: float,
        ledger: PrivacyLedger | None,
        proxy: Any,
        num_users: int | None,
        plan_options: dict[str, Any] | None,
        strategy: str,
        method: str,
        protect: str | None,
        mean_trials: float,
        max_trials: int | None,
        selection_share: float,
        loss_clip: float,
        seed: int | None,
        progress: bool,
        executor: Any,
        checkpoint_dir: str | os.PathLike | None,
        unsafe_allow_large_delta: bool,
        allow_noise_dominated: bool,
        settings: dict[str, Any],
    ) -> TuneCall:
        r"""Check ``tune``'s arguments (``tune``: the function, whose keywords ``settings`` may also name)."""
        if not isinstance(space, SearchSpace):
            raise ValueError(f"space must be a SearchSpace, got {type(space).__name__}.")
        mu = gdp_mu(check_positive(epsilon, "epsilon", allow_inf=False), check_delta(delta))
        share = check_probability(selection_share, "selection_share")
        max_trials = check_max_trials(max_trials)
        check_positive(loss_clip, "loss_clip (C)", allow_inf=False)
        blocked = {"bounds", "privacy_mu", "epsilon", "delta", "seed", "validation_mu_budget"} & set(settings)
        if blocked:
            raise ValueError(f"tune sets {sorted(blocked)} itself; give epsilon, delta and seed to tune().")
        check_setting_names(settings, tune)
        for name, fn in (("objective", objective), ("proxy", proxy)):
            check_objective(name, fn, space)
        if proxy is not None and num_users is None and isinstance(objective, SearchSpaceObjective):
            num_users = objective.num_users
        if proxy is not None and (num_users is None or isinstance(num_users, bool) or not isinstance(num_users, int)):
            raise ValueError(
                f"num_users: planning on a proxy needs n, the number of users of objective (public), got {num_users!r}."
            )
        if proxy is None and plan_options:
            raise ValueError("plan_options: give proxy= to plan on.")
        check_choice(strategy, "strategy", STRATEGIES)
        if executor is not None and not callable(getattr(executor, "submit", None)):
            raise ValueError(f"executor must be a concurrent.futures.Executor (with submit), got {executor!r}.")
        configurations = space.configurations()
        K = len(configurations)
        trains = training_event(objective, space) is not None
        protect = check_protect(protect, objective, method)
        if protect == "validation":
            resolved = check_method(method, proxy, K, strategy=strategy, trains=trains)
        else:
            resolved = TRAINING_SELECTION
        method, method_rule = picked_method(
            method, resolved, space, proxy=proxy, trains=trains, protect=protect, resumable=checkpoint_dir is not None
        )
        sampled = strategy == "sample" and K > 1 and method == "dp_gibo"
        if sampled and checkpoint_dir is not None:
            raise ValueError(
                f"checkpoint_dir={checkpoint_dir!r}: strategy='sample' is not checkpointed (its number of "
                "trials and their configurations stay hidden); use strategy='enumerate' to resume."
            )
        if sampled and trains:
            raise ValueError(
                "strategy='sample' with an objective that charges DP training runs: the training ledger "
                "would count the hidden number of trials. Use strategy='enumerate'."
            )
        own = getattr(objective, "ledger", None) if trains else None
        if ledger is not None and own is not None and ledger is not own:
            raise ValueError(
                f"ledger={ledger!r}: the objective records its training runs in objective.ledger; leave "
                "ledger out (tune charges that one) or build the objective with ledger=this ledger."
            )
        flags = dict(unsafe_allow_large_delta=unsafe_allow_large_delta, allow_noise_dominated=allow_noise_dominated)
        base = {**TUNE_DEFAULTS, "kernel": space.recommended_kernel(), **settings, **flags}
        mu_run = mu if K == 1 else mu * math.sqrt((1.0 - share) / K)
        mu_score = mu * math.sqrt(share / K)
        run_config = DPGIBOConfig(bounds=space.bounds, privacy_mu=mu_run, target_delta=delta, **base)  # bad settings
        checks = TuneChecks.of(objective, run_config, epsilon, mu, K, mu_score, method, sampled, trains)
        known = num_users if num_users is not None else getattr(objective, "num_users", None)
        guarded = checks.guarded(objective, known)  # refused before any call when n is known, else at the first
        if method == TRAINING_SELECTION:
            _check_training_selection(protect, proxy, strategy, checkpoint_dir, settings)
        elif method != "dp_gibo" and checkpoint_dir is not None:
            raise ValueError(
                f"checkpoint_dir={checkpoint_dir!r}: method={method!r} (the planner's method choice or "
                "a selection method) is not checkpointed; pass method='dp_gibo' to resume runs."
            )
        return cls(
            guarded, objective, space, epsilon, delta, mu, share, configurations, trains, protect, own, ledger, proxy,
            num_users, plan_options, strategy, method, mean_trials, max_trials, loss_clip, seed, progress,
            executor, checkpoint_dir, base, run_config, checks, method_rule,
        )  # fmt: skip


def _check_training_selection(
    protect: str, proxy: Any, strategy: str, checkpoint_dir: Any, settings: dict[str, Any]
) -> None:
    r"""Refuse (``ValueError`` naming it) what the selection over whole training runs does not take."""
    refused = {
        "proxy": proxy is not None,
        "strategy": strategy != "enumerate",
        "checkpoint_dir": checkpoint_dir is not None,
    }
    given = {"proxy": proxy, "strategy": strategy, "checkpoint_dir": checkpoint_dir}
    for name, bad in refused.items():
        if bad:
            raise ValueError(
                f"{name}={given[name]!r} with protect={protect!r}: private selection over whole DP-SGD training "
                f"runs takes no {name} (it is not planned on a proxy, samples its configurations itself and is "
                "not checkpointed); leave it out, or pass protect='validation' for DP-GIBO with every training "
                "run charged on its own."
            )
    if settings:
        raise ValueError(
            f"{sorted(settings)} with protect={protect!r}: these are DP-GIBO settings, which private selection "
            "over whole DP-SGD training runs does not use; leave them out, or pass protect='validation'."
        )


def composed_cost_warning(objective: Any, space: SearchSpace, trainings: int, delta: float) -> None:
    r"""A ``PrivacyWarning``, before anything trains, stating what DP-GIBO's composed path costs the
    training records: at most ``trainings`` DP-SGD runs, each run's ``ε`` (at ``delta``) and ``σ``, and
    their RDP composition (``protect="both"`` charges a selection over whole runs once instead)."""
    event = training_event(objective, space)
    if not isinstance(event, DPSGDRun):
        return
    from botorch_dp.training.selection_accounting import dp_sgd_runs_epsilon  # scipy, Opacus: late

    each = dp_sgd_runs_epsilon(event.noise_multiplier, event.sample_rate, event.steps, delta)
    total = dp_sgd_runs_epsilon(event.noise_multiplier, event.sample_rate, event.steps, delta, num_runs=trainings)
    warnings.warn(
        f"tune(protect='validation'): up to {trainings} DP-SGD training run(s), each charged on its own to the "
        f"training records at (epsilon = {each:.4g}, delta = {delta:.3g}) with noise_multiplier = "
        f"{event.noise_multiplier:.4g}; composed (RDP) up to epsilon = {total:.4g} on the training records. "
        "protect='both' charges one private selection over whole training runs instead.",
        PrivacyWarning,
        stacklevel=4,
    )
