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
from botorch_dp.methods.default_rule import picked_method, space_kinds
from botorch_dp.objectives.search_space import SearchSpace, SearchSpaceObjective
from botorch_dp.optim import DPGIBOConfig
from botorch_dp.optim.checkpoint import kernel_fingerprint
from botorch_dp.optim.legacy_options import with_new_spelling
from botorch_dp.optim.options import AdaGrad, FixedClip
from botorch_dp.optim.stored_config import config_to_json
from botorch_dp.privacy.analysis.gdp import gdp_mu
from botorch_dp.privacy.checks import (
    check_choice,
    check_delta,
    check_greater,
    check_positive,
    check_probability,
    did_you_mean,
)
from botorch_dp.privacy.ledger import PrivacyLedger
from botorch_dp.privacy.ledger.events import DPSGDRun
from botorch_dp.privacy.seeding import PrivacyWarning
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
    "K_DISTRIBUTIONS",
    "K_DISTRIBUTION_OPTIONS",
    "NO_PROXY_PLAN_OPTIONS",
    "TRAINING_METHODS",
    "TUNE_DEFAULTS",
    "TuneCall",
    "check_method",
    "check_protect",
    "proxy_data",
    "selection_distribution",
]

#: DP-GIBO settings of ``tune`` unless given as keywords (those of the README's main example:
#: a scaled RBF kernel on the unit cube with length-scale 0.2, AdaGrad, losses of order one).
TUNE_DEFAULTS: dict[str, Any] = dict(
    num_iterations=10, clip=FixedClip(2.0), step_size=0.2, step_rule=AdaGrad(), noise_variance=1e-4
)
#: How ``tune`` chooses among categorical configurations.
STRATEGIES = ("enumerate", "sample")
#: ``tune``'s ``method`` values.
METHODS = ("auto", "dp_gibo", "private_random_search", "dp_hypo")
#: ``tune``'s ``protect`` values (``None``: what the objective makes possible, ``check_protect``).
PROTECT = ("validation", "training", "both")
#: The method that protects the training records: private selection over whole DP-SGD (or AMP) runs.
TRAINING_SELECTION = "training_selection"


#: The methods that protect the training records (``methods.training_choice``), by ``tune``'s names.
TRAINING_METHODS = ("training_selection", "subsample_tuning", "proxy_then_train", "untuned")
#: What ``plan_options`` may hold, with or without a proxy, when the training records are protected: the hidden
#: ``K``'s distribution of the private selection over whole training runs (``selection_distribution``).
K_DISTRIBUTION_OPTIONS = ("distribution", "tnb_eta", "binomial_rounds")
#: What ``plan_options`` may hold without a proxy (each checked against ``protect`` and ``method``): ``K``'s
#: distribution and subsample tuning's fixed τ (``tuning_share``; the proxy only chooses τ when it is not fixed).
NO_PROXY_PLAN_OPTIONS = (*K_DISTRIBUTION_OPTIONS, "tuning_share")
#: What ``plan_options`` may hold with a proxy when the training records are protected (``tuning_share``: subsample
#: tuning's τ, fixed instead of chosen on the proxy).
TRAINING_PLAN_OPTIONS = (
    "methods",
    "num_repeats",
    "num_configurations",
    "untuned",
    "tuning_share",
    *K_DISTRIBUTION_OPTIONS,
)
#: The training methods that take a proxy: ``"auto"`` compares the methods there, ``"proxy_then_train"`` tunes on
#: it, ``"subsample_tuning"`` chooses its ε split τ on it.
PROXY_TRAINING_METHODS = ("auto", "proxy_then_train", "subsample_tuning")
#: ``plan_options["distribution"]``: ``"geometric"`` is the truncated negative binomial with ``η = 1`` (the default);
#: ``"tnb"`` is ``select_training_runs``' short name of the truncated negative binomial.
K_DISTRIBUTIONS = ("geometric", "truncated_negative_binomial", "tnb", "poisson", "binomial")


def selection_distribution(plan_options: dict[str, Any] | None, mean_trials: float) -> dict[str, Any]:
    r"""The hidden ``K``'s distribution of the private selection over whole training runs asked for in
    ``plan_options`` (``K_DISTRIBUTION_OPTIONS``), checked (``ValueError`` naming the key and its value) and as
    ``select_training_runs`` takes it: ``{"distribution": "tnb" | "poisson" | "binomial", "tnb_eta": η,
    "binomial_rounds": m or None}``. Without ``"distribution"``: geometric (``"tnb"``, ``η = 1``). ``tnb_eta``
    (``η > -1``) is taken only with ``"truncated_negative_binomial"`` (``"geometric"`` is ``η = 1``),
    ``binomial_rounds`` (``m ≥ E[K]``, an integer) is required with ``"binomial"`` and taken with it only."""
    options = dict(plan_options or {})
    name = options.get("distribution", "geometric")
    if not isinstance(name, str) or name not in K_DISTRIBUTIONS:
        raise ValueError(
            f"plan_options['distribution'] must be one of {K_DISTRIBUTIONS}, got {name!r}."
            f"{did_you_mean(name, K_DISTRIBUTIONS)}"
        )
    tnb = name in ("truncated_negative_binomial", "tnb")
    if "tnb_eta" in options and not tnb:
        raise ValueError(
            f"plan_options['tnb_eta']={options['tnb_eta']!r} with distribution={name!r}: eta is the truncated "
            "negative binomial's (geometric is eta = 1); pass distribution='truncated_negative_binomial' or leave "
            "tnb_eta out."
        )
    eta = check_greater(options.get("tnb_eta", 1.0), "plan_options['tnb_eta']", -1.0) if tnb else 1.0
    rounds = options.get("binomial_rounds")
    if name != "binomial" and "binomial_rounds" in options:
        raise ValueError(
            f"plan_options['binomial_rounds']={rounds!r} is the number of rounds of distribution='binomial'; "
            f"leave it out with distribution={name!r}."
        )
    if name == "binomial":
        from botorch_dp.privacy.analysis.private_selection_trials import binomial_probability  # scipy: late

        try:
            binomial_probability(mean_trials=mean_trials, binomial_rounds=rounds)
        except ValueError as err:
            raise ValueError(f"plan_options['binomial_rounds']: {err}") from None
        assert rounds is not None  # checked: an integer >= 1
        rounds = int(rounds)
    distribution = "tnb" if tnb or name == "geometric" else name
    return {"distribution": distribution, "tnb_eta": eta, "binomial_rounds": rounds}


def selects_training_runs(objective: Any) -> bool:
    r"""Whether ``objective`` can run a private selection over whole DP training runs (a
    ``TorchModelTuningObjective`` built with ``dp_sgd=``, or an AMP objective: ``is_amp_objective``)."""
    from botorch_dp.methods.selection_charge import is_amp_objective

    if is_amp_objective(objective):
        return True
    planned = getattr(objective, "planned_run", None)
    return callable(getattr(objective, "train_covered", None)) and callable(planned) and planned() is not None


def check_protect(protect: str | None, objective: Any, method: str) -> str:
    r"""``protect`` checked (``ValueError`` naming it) and resolved: ``None`` is ``"both"`` for an
    objective that trains with DP-SGD and ``method="auto"``, and for a method of ``TRAINING_METHODS``, else
    ``"validation"``; ``"training"`` and ``"both"`` need such an objective and ``method="auto"`` or one of
    ``TRAINING_METHODS`` (``methods.training_choice``)."""
    if protect is not None and protect not in PROTECT:
        raise ValueError(f"protect must be None or one of {PROTECT}, got {protect!r}.{did_you_mean(protect, PROTECT)}")
    capable = selects_training_runs(objective)
    if protect is None and method in TRAINING_METHODS:
        protect = "both"  # checked below: such a method needs a DP-SGD objective
    elif protect is None:
        return "both" if capable and method == "auto" else "validation"
    if protect == "validation":
        if method in TRAINING_METHODS:
            raise ValueError(
                f"method={method!r} with protect='validation': it protects the training records of a DP-SGD "
                "objective; use protect='training' or 'both' (or None)."
            )
        return protect
    if not capable:
        without = " without DP-SGD" if callable(getattr(objective, "planned_run", None)) else ""
        raise ValueError(
            f"protect={protect!r}: the training records are protected only by an objective that trains with "
            f"DP-SGD (a TorchModelTuningObjective built with dp_sgd=DPSGDConfig(...)) or AMP (AMPTuningObjective), got "
            f"{type(objective).__name__}{without}; "
            "use protect='validation'."
        )
    if method != "auto" and method not in TRAINING_METHODS:
        raise ValueError(
            f"method={method!r} with protect={protect!r}: the training records are protected by the methods "
            f"{TRAINING_METHODS} (method='auto' chooses among them); use one of those, or "
            "protect='validation' to run this method with every training run charged on its own."
        )
    return protect


def check_training_method(method: str, protect: str, proxy: Any) -> str:
    r"""``method`` of a call that protects the training records (``protect`` is ``"training"`` or ``"both"``):
    ``"auto"`` stays ``"auto"`` with a proxy (``methods.training_choice`` compares the methods there) and
    is private selection over whole training runs without one; ``"proxy_then_train"`` needs a proxy."""
    if method == "auto":
        return "auto" if proxy is not None else TRAINING_SELECTION
    if method == "proxy_then_train" and proxy is None:
        raise ValueError("method='proxy_then_train' needs proxy= (public data to tune on).")
    return method


def check_amp_training(objective: Any, method: str) -> None:
    r"""An AMP objective protects its training records by private selection over whole AMP runs only
    (``methods.training_runs``): any other training method (``"auto"`` with a proxy included, which compares the
    DP-SGD methods there) is refused by name (``ValueError``) before anything is charged."""
    from botorch_dp.methods.selection_charge import is_amp_objective

    if is_amp_objective(objective) and method != TRAINING_SELECTION:
        raise ValueError(
            f"method={method!r} with an AMP objective ({type(objective).__name__}): its training records are "
            f"protected by private selection over whole AMP runs only; use method={TRAINING_SELECTION!r} (or "
            "'auto' without proxy=)."
        )


def proxy_data(proxy: Any) -> Any:
    r"""The PUBLIC data of a proxy given to the training methods: a ``ClassificationData``, a tuple
    ``(X_train, y_train, X_val, y_val[, X_test, y_test])``, or a ``TorchModelTuningObjective``'s ``data``;
    ``None`` for anything else."""
    from botorch_dp.objectives.datasets import ClassificationData

    if isinstance(proxy, ClassificationData):
        return proxy
    if isinstance(proxy, (tuple, list)) and len(proxy) in (4, 6):
        return ClassificationData(*proxy)
    data = getattr(proxy, "data", None) if isinstance(proxy, SearchSpaceObjective) else None
    return data if isinstance(data, ClassificationData) else None


def check_method(
    method: str, proxy: Any, num_configurations: int, *, strategy: str = "enumerate", trains: bool = False
) -> str:
    r"""``method`` checked; ``"auto"`` becomes ``"dp_gibo"`` with an objective that charges DP training
    runs (where a forced selection method is refused: the training ledger would count its hidden
    number of trials, on any space) and on a mixed space (categorical configurations) with
    ``strategy="sample"``; otherwise it stays ``"auto"`` (with a proxy: the comparison there;
    without one: the public rule, ``methods.default_rule``)."""
    if method not in METHODS:
        known = METHODS + TRAINING_METHODS
        raise ValueError(f"method must be one of {known}, got {method!r}.{did_you_mean(method, known)}")
    if trains and method not in ("auto", "dp_gibo"):
        raise ValueError(
            f"method={method!r} with an objective that charges DP training runs: the training ledger "
            "would count the selection's hidden number of trials; use method='dp_gibo'."
        )
    if method == "auto" and (trains or (num_configurations > 1 and strategy != "enumerate")):
        return "dp_gibo"
    return method  # "auto" without a proxy: ``default_method`` (``TuneCall.checked``)


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
    accounting: str = "auto"  # the selection over training runs' accounting (``select_training_runs``)

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
        r"""Whether the call protects the training records (private selection over whole DP training runs,
        cheap tuning, an untuned run, or ``"auto"`` among them with a proxy)."""
        return self.protect != "validation"

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
        try:  # the directory is this call's until it returns or raises (storage.lock)
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
        accounting: str = "auto",
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
        from botorch_dp.methods.selection_charge import training_mechanism  # scipy, Opacus: late
        from botorch_dp.training.selection_accounting import ACCOUNTINGS

        check_choice(accounting, "accounting", ACCOUNTINGS)
        check_objective("objective", objective, space)
        if proxy_data(proxy) is None or isinstance(proxy, SearchSpaceObjective):
            check_objective("proxy", proxy, space)
        if proxy is not None and num_users is None and isinstance(objective, SearchSpaceObjective):
            num_users = objective.num_users
        if proxy is not None and (num_users is None or isinstance(num_users, bool) or not isinstance(num_users, int)):
            raise ValueError(
                f"num_users: planning on a proxy needs n, the number of users of objective (public), got {num_users!r}."
            )
        if proxy is None and set(plan_options or {}) - set(NO_PROXY_PLAN_OPTIONS):  # protect and method: below
            raise ValueError("plan_options: give proxy= to plan on.")
        check_choice(strategy, "strategy", STRATEGIES)
        if executor is not None and not callable(getattr(executor, "submit", None)):
            raise ValueError(f"executor must be a concurrent.futures.Executor (with submit), got {executor!r}.")
        configurations = space.configurations()
        K = len(configurations)
        trains = training_event(objective, space) is not None
        protect = check_protect(protect, objective, method)
        if protect == "validation":
            if proxy is not None and not callable(proxy):
                raise ValueError(
                    "proxy: data (not an objective) is a proxy of the methods that protect the training records; "
                    "with protect='validation' give a proxy objective on public users."
                )
            resolved = check_method(method, proxy, K, strategy=strategy, trains=trains)
        else:
            resolved = check_training_method(method, protect, proxy)
            check_amp_training(objective, resolved)
        kinds = space_kinds(space)  # public: the rule reads them
        method, method_rule = picked_method(
            method, resolved, kinds, proxy=proxy is not None, trains=trains, protect=protect,
            resumable=checkpoint_dir is not None, trained_with=training_mechanism(objective) if trains else None,
        )  # fmt: skip
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
        base = with_new_spelling({"kernel": space.recommended_kernel(), **settings, **flags}, TUNE_DEFAULTS)
        mu_run = mu if K == 1 else mu * math.sqrt((1.0 - share) / K)
        mu_score = mu * math.sqrt(share / K)
        run_config = DPGIBOConfig(bounds=space.bounds, privacy_mu=mu_run, target_delta=delta, **base)  # bad settings
        checks = TuneChecks.of(objective, run_config, epsilon, mu, K, mu_score, method, sampled, trains)
        known = num_users if num_users is not None else getattr(objective, "num_users", None)
        guarded = checks.guarded(objective, known)  # refused before any call when n is known, else at the first
        if accounting != "auto" and (protect == "validation" or method not in ("auto", "training_selection")):
            raise ValueError(
                f"accounting={accounting!r} is how the private selection over whole DP training runs is "
                f"accounted (protect='training' or 'both', method='training_selection' or 'auto'); with "
                f"protect={protect!r} and method={method!r} nothing takes it: leave it out."
            )
        chosen_k = sorted(set(plan_options or {}) & set(K_DISTRIBUTION_OPTIONS))
        if chosen_k and (protect == "validation" or method not in ("auto", "training_selection")):
            raise ValueError(
                f"plan_options: {chosen_k} choose K's distribution of the private selection over whole DP "
                f"training runs (protect='training' or 'both', method='training_selection' or 'auto'); with "
                f"protect={protect!r} and method={method!r} nothing takes it: leave it out."
            )
        if "tuning_share" in (plan_options or {}) and protect == "validation":
            raise ValueError(
                f"plan_options['tuning_share'] with protect={protect!r}: tuning_share is subsample tuning's split of "
                "epsilon between its tuning phase and its final training (protect='training' or 'both', "
                "method='subsample_tuning' or 'auto' with proxy=); with protect='validation' nothing takes it: leave "
                "it out."
            )
        if protect != "validation":
            _check_training_selection(protect, method, proxy, strategy, checkpoint_dir, settings, plan_options)
            selection_distribution(plan_options, mean_trials)  # refused by name before anything runs
        elif method != "dp_gibo" and checkpoint_dir is not None:
            raise ValueError(
                f"checkpoint_dir={checkpoint_dir!r}: method={method!r} (the planner's method choice or "
                "a selection method) is not checkpointed; pass method='dp_gibo' to resume runs."
            )
        return cls(
            guarded, objective, space, epsilon, delta, mu, share, configurations, trains, protect, own, ledger, proxy,
            num_users, plan_options, strategy, method, mean_trials, max_trials, loss_clip, seed, progress,
            executor, checkpoint_dir, base, run_config, checks, method_rule, accounting,
        )  # fmt: skip


def _check_training_selection(
    protect: str,
    method: str,
    proxy: Any,
    strategy: str,
    checkpoint_dir: Any,
    settings: dict[str, Any],
    plan_options: dict[str, Any] | None,
) -> None:
    r"""Refuse (``ValueError`` naming it) what the methods that protect the training records do not take."""
    if proxy is not None and method in PROXY_TRAINING_METHODS and proxy_data(proxy) is None:
        raise ValueError(
            f"proxy: the training methods tune on a proxy's PUBLIC data (a ClassificationData, a tuple "
            f"(X_train, y_train, X_val, y_val[, X_test, y_test]) or a TorchModelTuningObjective), got "
            f"{type(proxy).__name__}."
        )
    unknown = sorted(set(plan_options or {}) - set(TRAINING_PLAN_OPTIONS))
    if unknown:
        raise ValueError(
            f"plan_options: {unknown} with protect={protect!r}; the comparison of the training methods takes "
            f"{TRAINING_PLAN_OPTIONS}."
        )
    options = plan_options or {}
    if "tuning_share" in options:
        if method not in ("auto", "subsample_tuning"):
            raise ValueError(
                f"plan_options['tuning_share'] with method={method!r}: only subsample tuning splits epsilon between "
                "a tuning phase and its final training (method='subsample_tuning', or 'auto' with proxy=); leave it "
                "out."
            )
        check_probability(options["tuning_share"], "plan_options['tuning_share']")
    refused = {
        "proxy": proxy is not None and method not in PROXY_TRAINING_METHODS,
        "strategy": strategy != "enumerate",
        "checkpoint_dir": checkpoint_dir is not None,
    }
    given = {"proxy": proxy, "strategy": strategy, "checkpoint_dir": checkpoint_dir}
    for name, bad in refused.items():
        if bad:
            raise ValueError(
                f"{name}={given[name]!r} with protect={protect!r} and method={method!r}: the methods that protect "
                f"the training records take no {name} (only method='auto', 'proxy_then_train' and "
                "'subsample_tuning' take a proxy; "
                "they sample their configurations themselves and are not checkpointed); leave it out, or pass "
                "protect='validation' for DP-GIBO with every training run charged on its own."
            )
    if settings:
        raise ValueError(
            f"{sorted(settings)} with protect={protect!r}: these are DP-GIBO settings, which the methods that "
            "protect the training records do not use; leave them out, or pass protect='validation'."
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
