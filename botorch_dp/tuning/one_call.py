r"""``tune``: the one call that tunes a model's hyperparameters at a total ``(ε, δ)``.

``tune(objective, space, epsilon=..., delta=...)`` runs DP-GIBO over the space's continuous
and integer hyperparameters (θ's coordinates). With categorical hyperparameters it
**enumerates** their configurations: one DP-GIBO run per configuration, each with an equal
share of the budget, then a private choice among the runs, the Gaussian score mechanism on
each run's final point (the clipped mean validation loss, ``C/n`` sensitivity) and the lowest
noisy score wins. Every release is charged to one ledger through the charge protocol, and the
split is exact in Gaussian DP: with ``K`` configurations and a selection share ``f``,

    μ² = K μ_run² + K μ_score²,   μ_run = μ √((1 − f)/K),   μ_score = μ √(f/K),

with ``μ = gdp_mu(ε, δ)``, so the whole procedure is ``μ``-GDP, i.e. ``(ε, δ)``-DP, for the
validation users. ``objective(configs)`` takes a list of ``q`` dicts in natural units (plain
Python values; integers rounded, the configuration's categorical values included) and returns
the ``q x n`` per-user losses.

With ``proxy=`` (an objective of the same signature on PUBLIC users) and ``num_users=n``,
each configuration's run is first planned on the proxy (``plan_private_run``: the kernel, ``B``,
``η``, ``T`` and batch rule chosen with the private run's noise simulated), at no privacy cost.
The plan also chooses the METHOD (``method="auto"``) and ``tune`` runs the recommended one unless
``method=`` forces one: without categorical hyperparameters DP-GIBO, private random search or
DP-HyPO, simulated on the proxy (``tuning.method_runs``); with them, all configurations are
planned first, then this enumerate procedure, private random search and DP-HyPO over the
space's public encoding (``tuning.encoding``) are compared on the proxy with paired seeds
(``tuning.mixed_methods``), and only then is the sensitive objective called.
``TuneResult.methods`` keeps the comparison.

``objective`` may also be a ``TorchModelTuningObjective`` (any ``SearchSpaceObjective``: it
takes θ and routes each named value, categorical ones included, to the model or the
optimizer) built on the same ``space``: each configuration's run evaluates
``objective.with_choice(configuration)``. Its DP-SGD training runs, every evaluation and each
run's scored final point, are charged to the objective's ledger, which ``tune`` then charges
too (``ledger=`` must be that one or left out), so ``TuneResult.guarantee_report()`` states
the validation users, the training records and, for people in both, the composition.

``checkpoint_dir=`` makes the call resumable (``tuning.tune_checkpoint``): called again with
the same arguments after an interruption, finished configurations are not re-run, their
releases are neither re-drawn nor re-charged, and the ledger ends with the records of an
uninterrupted call; other arguments are refused by name. ``executor=`` evaluates each
batch's rows on a ``concurrent.futures.Executor`` (``DPGIBO.run``; training runs are charged
in this process first). A tqdm bar counts the configurations (a selection: one bar, no count).
Audited: the choice's scores (``audit.one_call``, row ``tune_choice_score``). Refused: checkpoints
of a selection, and ``"sample"`` with an objective that charges training runs (either would
store or count the hidden number of trials).
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import math
import os
import uuid
import warnings
from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor

from botorch_dp.baselines.selection import check_max_trials
from botorch_dp.optim import DPGIBO, DPGIBOConfig
from botorch_dp.optim.checkpoint import STATE_FILE, kernel_fingerprint
from botorch_dp.optim.public_checks import SettingsWarning
from botorch_dp.optim.stored_config import config_to_json
from botorch_dp.plan import plan_private_run
from botorch_dp.privacy.analysis.gdp import compose_gdp, gdp_epsilon, gdp_mu
from botorch_dp.privacy.checks import check_choice, check_delta, check_positive, check_probability
from botorch_dp.privacy.ledger import Gaussian, PrivacyLedger
from botorch_dp.privacy.mechanisms import GaussianScoreMechanism
from botorch_dp.privacy.seeding import noise_generator
from botorch_dp.privacy.statement import guarantee_statement
from botorch_dp.tuning.encoding import natural_point
from botorch_dp.tuning.method_runs import check_method, run_method
from botorch_dp.tuning.mixed_methods import MixedChoice, choose_mixed_method, run_mixed_selection
from botorch_dp.tuning.sampled import sample_configurations
from botorch_dp.tuning.search_space import SearchSpace, SearchSpaceObjective
from botorch_dp.tuning.tune_checkpoint import TuneCheckpoint, seed_digest
from botorch_dp.tuning.tune_checks import (
    TuneChecks,
    bound_objective,
    check_objective,
    check_setting_names,
    training_event,
)
from botorch_dp.tuning.tune_result import (
    SCORE_PART,
    ConfigurationRun,
    TuneGuarantee,
    TuneObjective,
    TuneResult,
    configs_objective,
    final_losses,
)
from botorch_dp.utils import child_seeds, progress_bar

__all__ = ["STRATEGIES", "TUNE_DEFAULTS", "ConfigurationRun", "TuneGuarantee", "TuneResult", "tune"]

#: DP-GIBO settings of ``tune`` unless given as keywords (those of the README's main example:
#: a scaled RBF kernel on the unit cube with length-scale 0.2, AdaGrad, losses of order one).
TUNE_DEFAULTS: dict[str, Any] = dict(
    num_iterations=10, clip_bound=2.0, step_size=0.2, step_rule="adagrad", noise_variance=1e-4
)
#: How ``tune`` chooses among categorical configurations.
STRATEGIES = ("enumerate", "sample")


def tune(
    objective: TuneObjective,
    space: SearchSpace,
    *,
    epsilon: float,
    delta: float,
    ledger: PrivacyLedger | None = None,
    proxy: TuneObjective | None = None,
    num_users: int | None = None,
    plan_options: dict[str, Any] | None = None,
    strategy: str = "enumerate",
    method: str = "auto",
    mean_trials: float = 4.0,
    max_trials: int | None = None,
    selection_share: float = 0.1,
    loss_clip: float = 3.0,
    seed: int | None = None,
    progress: bool = True,
    executor: concurrent.futures.Executor | None = None,
    checkpoint_dir: str | os.PathLike | None = None,
    unsafe_allow_large_delta: bool = False,
    allow_noise_dominated: bool = False,
    **settings: Any,
) -> TuneResult:
    r"""Tune ``space`` on ``objective`` at a total ``(epsilon, delta)`` for the validation users.

    Args:
        objective: Maps a list of ``q`` hyperparameter dicts (natural units) to the ``q x n``
            per-user validation losses (sensitive); or a ``TorchModelTuningObjective`` (any
            ``SearchSpaceObjective``) built on ``space``, evaluated at θ per configuration.
        space: The ``SearchSpace`` (continuous, ``Integer`` and ``Categorical`` hyperparameters).
        epsilon: ``ε`` of the whole procedure (``μ = gdp_mu(ε, δ)``, split as the module says).
        delta: ``δ``.
        ledger: The ledger to charge (default: the objective's own ledger for an objective that
            charges training runs, else a new one whose budget is the procedure's ``μ``).
        proxy: A PUBLIC objective of either kind (its users' losses are used without noise or
            accounting): each configuration's settings are planned on it first.
        num_users: ``n`` of ``objective`` (public), needed with ``proxy`` (read from a
            ``TorchModelTuningObjective``).
        plan_options: Keywords of ``plan_private_run`` (``clip_quantiles``, ``step_sizes``, ...).
        strategy: With categorical hyperparameters: ``"enumerate"`` (default: one run per
            configuration, then the scores) or ``"sample"`` (``tuning.sampled``: a hidden random
            number of runs on randomly drawn configurations, Papernot–Steinke over each run's
            Gaussian-DP curve; cheaper for spaces with many configurations). ``"enumerate"`` is
            the default because it returned better points on the synthetic task of
            ``scripts/compare_tune_strategies.py`` at K = 4 and 16 (``reports/tune_strategies.md``).
        method: ``"auto"`` (default): with ``proxy``, the method the comparison on the proxy
            recommends (``TuneResult.methods``; on a mixed space among DP-GIBO per configuration,
            private random search and DP-HyPO over the public encoding, ``tuning.mixed_methods``),
            else DP-GIBO (also with ``strategy="sample"`` or an objective that charges DP training
            runs on a mixed space); ``"dp_gibo"``, ``"private_random_search"`` or ``"dp_hypo"``
            force one (without a proxy the last two take ``E[K]`` = DP-GIBO's evaluations, ``T``
            times its batch size plus one scored point per configuration, and ``C = loss_clip``).
            Every method charges ``ledger`` with the full ``(ε, δ)``.
        mean_trials: ``E[K]`` of ``"sample"`` (a truncated negative binomial with ``η = 1``).
        max_trials: A selection's (``"sample"``, private random search, DP-HyPO) public number of
            trials, run whatever its hidden ``K`` and discarded after the ``K``-th (``TuneResult.timing``;
            ``None``: ``K``, the wall time grows with it). DP-GIBO ignores it.
        selection_share: ``f``, the share of ``μ²`` (of each trial's ``μ₀²`` with ``"sample"``)
            for the scores (used only with more than one configuration).
        loss_clip: ``C`` of the scores (losses clamped to ``[0, C]``).
        seed: A noise seed (reproductions only: a ``PrivacyWarning``; default OS entropy).
        progress: Show progress bars (configurations, and each run's steps).
        executor: Evaluate batches on this ``concurrent.futures.Executor`` (``DPGIBO.run``).
        checkpoint_dir: Make the call resumable there (``tuning.tune_checkpoint``; private,
            created ``0700``): called again with the same arguments, it continues.
        unsafe_allow_large_delta: Run although ``delta ≥ 1/n`` (``tuning.tune_checks``: refused otherwise).
        allow_noise_dominated: Run although the budget is noise-dominated at ``n`` (refused otherwise).
            With either opt-in the result's report and JSON carry the warning (``cautions``).
        **settings: ``DPGIBOConfig`` keywords; ``TUNE_DEFAULTS`` otherwise (the kernel is
            ``space.recommended_kernel()`` unless ``kernel=`` is given).

    Returns:
        The ``TuneResult``.
    """
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
    method = check_method(method, proxy, K, strategy=strategy, trains=trains)
    mu_run = mu if K == 1 else mu * math.sqrt((1.0 - share) / K)
    mu_score = mu * math.sqrt(share / K)
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
    seeds: Sequence[int | None] = [None] * (K + 1) if seed is None else child_seeds([int(seed)], K + 1)
    flags = dict(unsafe_allow_large_delta=unsafe_allow_large_delta, allow_noise_dominated=allow_noise_dominated)
    base = {**TUNE_DEFAULTS, "kernel": space.recommended_kernel(), **settings, **flags}
    run_config = DPGIBOConfig(bounds=space.bounds, privacy_mu=mu_run, target_delta=delta, **base)  # bad settings
    given, checks = objective, TuneChecks.of(objective, run_config, epsilon, mu, K, mu_score, method, sampled, trains)
    known = num_users if num_users is not None else getattr(objective, "num_users", None)
    objective = checks.guarded(objective, known)  # refused before any call when n is known, else at the first
    mixed: MixedChoice | None = None
    if method != "dp_gibo":  # the plan's recommended method, or a forced one
        if checkpoint_dir is not None:
            raise ValueError(
                f"checkpoint_dir={checkpoint_dir!r}: method={method!r} (the planner's method choice or "
                "a selection method) is not checkpointed; pass method='dp_gibo' to resume runs."
            )
        full = DPGIBOConfig(bounds=space.bounds, privacy_mu=mu, target_delta=delta, **base)
        if K == 1:
            result = run_method(
                method,
                objective,
                space,
                full,
                proxy=proxy,
                num_users=num_users,
                plan_options=plan_options,
                ledger=ledger if ledger is not None else own,
                loss_clip=loss_clip,
                seed=seeds[0],
                progress=progress,
                executor=executor,
                max_trials=max_trials,
            )
            return checks.carry(result)
        if proxy is not None:  # every configuration planned and the methods compared, on public users only
            assert num_users is not None  # checked above
            mixed = choose_mixed_method(
                proxy,
                space,
                DPGIBOConfig(bounds=space.bounds, privacy_mu=mu_run, target_delta=delta, **base),
                full_mu=mu,
                score_mu=mu_score,
                loss_clip=loss_clip,
                num_users=num_users,
                plan_options=plan_options,
                progress=progress,
            )
            method = mixed.comparison.recommended_name if method == "auto" else method
        if method != "dp_gibo":
            result = run_mixed_selection(
                method,
                objective,
                space,
                full,
                choice=mixed,
                ledger=ledger if ledger is not None else own,
                loss_clip=loss_clip,
                seed=seeds[0],
                progress=progress,
                executor=executor,
                max_trials=max_trials,
            )
            return checks.carry(result)
    holds = run_config.options.fitting.holds  # False: unsafe_allow_sensitive_fitting, each step recorded at μ = inf
    # a new ledger holds the procedure to its μ; the sampled selection is calibrated to (ε, δ) itself (an RDP
    # curve that no Gaussian μ budget contains at every order); a run without a guarantee fits no budget
    ledger = (
        ledger
        if ledger is not None
        else own
        if own is not None
        else PrivacyLedger(validation_mu_budget=None if sampled or not holds else mu)
    )
    checkpoint = None
    if checkpoint_dir is not None:  # the arguments checked against a stored call before anything runs
        checkpoint = TuneCheckpoint(
            checkpoint_dir,
            _arguments(
                given,
                space,
                epsilon=epsilon,
                delta=delta,
                strategy=strategy,
                selection_share=share,
                loss_clip=loss_clip,
                seed=seed,
                proxy=proxy,
                num_users=num_users,
                plan_options=plan_options,
                config=run_config,
            ),
        )
    try:  # the directory is this call's until it returns or raises (checkpoint.lock)
        if trains and (checkpoint is None or not any(checkpoint.has_run(k) for k in range(K))):
            # the procedure's most trainings (every evaluation of every run and each scored final point), against
            # the objective's own limits (a DP-SGD target) before anything trains or is released; a resumed call
            # merges the runs' records first and is held by each batch's charge instead
            most = K * run_config.max_evaluations
            bound = bound_objective(objective, configurations[0])
            if callable(getattr(bound, "check_room", None)):
                bound.check_room(most + (K if K > 1 else 0))

        def run_one(
            choice: dict[str, Any],
            run_mu: float,
            run_seed: int | None,
            run_ledger: PrivacyLedger,
            k: int | None = None,
            *,
            quiet: bool = False,
        ) -> ConfigurationRun:
            shown = progress and not quiet  # no bar for a hidden trial of "sample"
            config = DPGIBOConfig(bounds=space.bounds, privacy_mu=run_mu, target_delta=delta, seed=run_seed, **base)
            plan = None
            run_dir = None if checkpoint is None or k is None else checkpoint.run_dir(k)
            if run_dir is not None and os.path.lexists(run_dir / STATE_FILE):  # releases, records back; none redrawn
                optimizer = DPGIBO.resume(run_dir, config if proxy is None else None, ledger=run_ledger)
            else:
                if mixed is not None and k is not None:  # planned before the method choice
                    plan = mixed.plans[k]
                    config = dataclasses.replace(plan.config, seed=run_seed)
                elif proxy is not None:  # public: the proxy's users only; the private run's noise simulated
                    assert num_users is not None  # checked above
                    plan = plan_private_run(
                        configs_objective(proxy, space, choice),
                        config,
                        num_users=num_users,
                        progress=shown,
                        **{"choose_method": False, "coordinate_names": space.names, **(plan_options or {})},
                    )
                    config = dataclasses.replace(plan.config, seed=run_seed)
                optimizer = DPGIBO(config, ledger=run_ledger, checkpoint_dir=run_dir)
            with optimizer:  # gives its directory up when the run ends
                result = optimizer.run(configs_objective(objective, space, choice), progress=shown, executor=executor)
            if proxy is not None and optimizer.num_users != num_users:
                warnings.warn(
                    f"The run was planned for num_users = {num_users}, but objective has {optimizer.num_users} "
                    "users: the plan simulated other noise than the run drew.",
                    SettingsWarning,
                    stacklevel=3,
                )
            return ConfigurationRun(
                choice, result, optimizer.run_id, int(optimizer.num_users or 0), optimizer.config, plan
            )

        if sampled:
            result = sample_configurations(
                objective,
                space,
                run_one,
                epsilon=epsilon,
                delta=delta,
                ledger=ledger,
                mean_trials=mean_trials,
                selection_share=share,
                loss_clip=loss_clip,
                seed=seed,
                progress=progress,
                max_trials=max_trials,
                holds=holds,
            )
            return checks.carry(result)
        runs = [
            run_one(choice, mu_run, seeds[k], ledger, k)
            for k, choice in enumerate(
                progress_bar(configurations, disable=not progress or K == 1, desc="configurations")
            )
        ]
        chosen, run_ids = 0, [r.run_id for r in runs]
        if K > 1:
            selection_id, scores = _choose(objective, space, runs, ledger, mu_score, loss_clip, seeds[K], checkpoint)
            for r, s in zip(runs, scores.tolist(), strict=True):
                r.noisy_score = float(s)
            chosen = int(torch.argmin(scores))  # post-processing of the released scores
            run_ids.append(selection_id)
        spent = compose_gdp([ledger.validation_mu(run_id) for run_id in run_ids])
        winner = runs[chosen]
        hyperparameters = natural_point(space, winner.result.release.theta, winner.configuration)
        result = TuneResult(
            hyperparameters=hyperparameters,
            guarantee=TuneGuarantee(spent, gdp_epsilon(spent, delta), delta),
            runs=runs,
            chosen=chosen,
            statement=guarantee_statement(ledger, delta),
            ledger=ledger,
            score_mu=mu_score if K > 1 else None,
            methods=None if mixed is None else mixed.comparison,
        )
        return checks.carry(result)
    finally:
        if checkpoint is not None:
            checkpoint.close()


def _choose(
    objective: Any,
    space: SearchSpace,
    runs: list[ConfigurationRun],
    ledger: PrivacyLedger,
    mu_score: float,
    loss_clip: float,
    seed: int | None,
    checkpoint: TuneCheckpoint | None,
) -> tuple[str, Tensor]:
    r"""The choice's noisy scores, released once (a resumed call reads them back): ``(run id, scores)``."""
    stored = None if checkpoint is None else checkpoint.selection(len(runs), ledger)
    if stored is not None:
        return stored
    n = runs[0].num_users
    if any(r.num_users != n for r in runs):
        raise ValueError(
            f"objective returned {sorted({r.num_users for r in runs})} users across configurations; "
            "every configuration must be scored on the same n users."
        )
    losses = torch.cat(
        [
            final_losses(
                configs_objective(objective, space, r.configuration),
                r.result.release.theta,
                n,
                f"the final point of configuration {r.configuration}",
            )
            for r in runs
        ]
    )
    mechanism = GaussianScoreMechanism(
        loss_clip=loss_clip, per_trial_mu=mu_score, generator=noise_generator(seed, stacklevel=4)
    )
    selection_id = uuid.uuid4().hex
    with ledger.charge(
        {SCORE_PART: Gaussian(mu_score * math.sqrt(len(runs)))}, run_id=selection_id, new_run=True
    ) as meter:
        scores = mechanism.release(losses, meter=meter, part=SCORE_PART).scores
    if checkpoint is not None:
        checkpoint.save_selection(selection_id, scores, ledger)
    return selection_id, scores


def _arguments(
    objective: Any,
    space: SearchSpace,
    *,
    config: DPGIBOConfig,
    seed: int | None,
    proxy: Any,
    plan_options: dict[str, Any] | None,
    **values: Any,
) -> dict[str, Any]:
    r"""The public description of a call that ``checkpoint_dir`` compares on resume."""
    what: dict[str, Any] = {"kind": type(objective).__qualname__}
    if isinstance(objective, SearchSpaceObjective):
        what.update(
            routes=getattr(objective, "routes", None),
            num_users=objective.num_users,
            training_run=repr(training_event(objective, space)),
        )
    settings = config_to_json(dataclasses.replace(config, seed=None))
    for derived in ("bounds", "privacy_mu", "target_delta"):  # from space, epsilon and delta, compared there
        settings.pop(derived)
    settings["kernel"] = kernel_fingerprint(config.kernel) if config.kernel is not None else None
    return {
        "space": space.describe(),
        "configurations": space.configurations(),
        "objective": what,
        "settings": settings,
        "seed": seed_digest(seed),
        "proxy": None if proxy is None else type(proxy).__qualname__,
        "plan_options": plan_options or {},
        **values,
    }
