r"""``tune``: the one call that tunes a model's hyperparameters at a total ``(ε, δ)``.

``tune(objective, space, epsilon=..., delta=..., method="dp_gibo")`` runs DP-GIBO over the space's
continuous and integer hyperparameters (θ's coordinates). With categorical hyperparameters it
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
Without a proxy, ``method="auto"`` follows a public rule measured on the benchmarks
(``methods.default_rule``: the space's kinds of hyperparameters). With one, the
plan also chooses the METHOD (``method="auto"``) and ``tune`` runs the recommended one unless
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

The call is five steps: its arguments checked (``tuning.tune_call``, ``tuning.tune_checks``),
the candidate methods built and, with a proxy, compared there (``tuning.method_runs.choose``;
the methods are ``botorch_dp.methods``), the winner run privately (``run_private``), and the
``TuneResult`` built from its ``MethodRun`` (``tuning.tune_result.tune_result``).

``checkpoint_dir=`` makes the call resumable (``tuning.tune_checkpoint``): called again with
the same arguments after an interruption, finished configurations are not re-run, their
releases are neither re-drawn nor re-charged, and the ledger ends with the records of an
uninterrupted call; other arguments are refused by name. ``executor=`` evaluates each
batch's rows on a ``concurrent.futures.Executor`` (``DPGIBO.run``; training runs are charged
in this process first). A tqdm bar counts the configurations (a selection: one bar, no count); before it, with a proxy
and ``method="auto"``, ONE bar covers all of the planning on the proxy (``utils.overall_progress``:
its total is the public count of planned simulations, ``plan.planned_simulations``, its ETA the
planning's, its description the configuration and method in hand).
Audited: the choice's scores (``audit.one_call``, row ``tune_choice_score``). Refused: checkpoints
of a selection, and ``"sample"`` with an objective that charges training runs (either would
store or count the hidden number of trials).
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import functools
import os
import warnings
from typing import Any

from botorch_dp.methods.default_rule import default_method, space_kinds
from botorch_dp.methods.protocol import ConfigurationRun
from botorch_dp.objectives.datasets import ClassificationData
from botorch_dp.objectives.search_space import SearchSpace
from botorch_dp.optim.public_checks import SettingsWarning, named_coordinates
from botorch_dp.plan import budget as plan_budgets
from botorch_dp.plan.budget import AUTO, budgeted_options, check_plan_budget, measure_costs
from botorch_dp.plan.cache import ProxyCache
from botorch_dp.privacy.ledger import PrivacyLedger
from botorch_dp.tuning.method_runs import choose
from botorch_dp.tuning.proxy_cache import CachedProxy
from botorch_dp.tuning.tune_call import STRATEGIES, TUNE_DEFAULTS, TuneCall
from botorch_dp.tuning.tune_result import TuneGuarantee, TuneObjective, TuneResult, configs_objective, tune_result

__all__ = ["STRATEGIES", "TUNE_DEFAULTS", "ConfigurationRun", "TuneGuarantee", "TuneResult", "tune"]


def tune(
    objective: TuneObjective,
    space: SearchSpace,
    *,
    epsilon: float,
    delta: float,
    ledger: PrivacyLedger | None = None,
    proxy: TuneObjective | ClassificationData | tuple[Any, ...] | None = None,
    num_users: int | None = None,
    plan_options: dict[str, Any] | None = None,
    plan_budget: float | str | None = AUTO,
    strategy: str = "enumerate",
    method: str = "auto",
    protect: str | None = None,
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
    accounting: str = "auto",
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
            accounting): each configuration's settings are planned on it first. For a DP-trained
            objective, public data of the same kind: a ``ClassificationData``, a tuple
            ``(X_train, y_train, X_val, y_val[, X_test, y_test])`` or a ``TorchModelTuningObjective``.
        num_users: ``n`` of ``objective`` (public), needed with ``proxy`` (read from a
            ``TorchModelTuningObjective``).
        plan_options: Keywords of ``plan_private_run`` (``clip_quantiles``, ``step_sizes``, ...). With
            ``protect="training"`` or ``"both"``, with or without ``proxy``: ``K``'s distribution of the
            selection over training runs (``tune_call.selection_distribution``: ``"distribution"``, one of
            ``"geometric"`` (default), ``"truncated_negative_binomial"`` with ``"tnb_eta"``, ``"poisson"``,
            ``"binomial"`` with ``"binomial_rounds"``); with ``method="subsample_tuning"``, with or without
            ``proxy``: ``"tuning_share"``, its fixed τ (refused by name with any other method).
        plan_budget: The SECONDS the planning on the proxy should take (every configuration's settings
            search and the method comparison), estimated before it starts from the timed proxy and one
            timed DP-GIBO step (``plan.budget``): over it, ``budgeted_options`` cuts the repeats, the
            candidate settings, the baseline run, the settings' simulations, then (``method="auto"``)
            the comparison, then the kernel fit (shorter, then none: the space's recommended kernel),
            and ``TuneResult.planning`` says what was cut. ``"auto"`` (default): half the estimated time
            of the private run, less the estimate's own time, so that the whole call stays within
            about twice the private run; ``None``: no limit (``plan_options`` as given).
            The planning's proxy evaluations are shared through one memo (``plan.cache``): one
            evaluation per point and configuration.
        strategy: With categorical hyperparameters: ``"enumerate"`` (default: one run per
            configuration, then the scores) or ``"sample"`` (``tuning.sampled``: a hidden random
            number of runs on randomly drawn configurations, Papernot–Steinke over each run's
            Gaussian-DP curve; cheaper for spaces with many configurations). ``"enumerate"`` is
            the default because it returned better points on the synthetic task of
            ``scripts/compare_tune_strategies.py`` at K = 4 and 16 (``reports/tune_strategies.md``).
        method: ``"auto"`` (default): with ``proxy``, the method the comparison on the proxy
            recommends (``TuneResult.methods``; on a mixed space among DP-GIBO per configuration,
            private random search and DP-HyPO over the public encoding, ``tuning.mixed_methods``);
            without one, the public rule ``methods.default_rule.default_method`` (private random
            search on a space with an integer or categorical hyperparameter, DP-GIBO on a continuous
            one and with ``checkpoint_dir``); DP-GIBO with ``strategy="sample"`` or an objective that
            charges DP training runs. ``TuneResult.method_rule`` says which rule picked the method and
            why. ``"dp_gibo"``, ``"private_random_search"`` or ``"dp_hypo"`` force one (without a proxy
            the last two take ``E[K]`` = DP-GIBO's evaluations, ``T`` times its batch size plus one
            scored point per configuration, and ``C = loss_clip``).
            Every method charges ``ledger`` with the full ``(ε, δ)``.
        protect: What the ``(ε, δ)`` protects: ``"validation"`` (the users whose losses score the
            hyperparameters), ``"training"`` (the records a DP-trained objective trains on) or ``"both"``.
            ``None`` (default): ``"both"`` for a ``TorchModelTuningObjective`` built with ``dp_sgd=`` and
            ``method="auto"``, else ``"validation"``. ``"training"`` and ``"both"`` run private selection
            over whole DP-SGD (or AMP) training runs (``methods.training_selection``: ``E[K] = mean_trials``, the
            whole procedure charged once to the objective's ledger before the first trial, ``K`` hidden;
            no checkpoint or DP-GIBO setting) and are refused by name for any other objective. With
            ``proxy`` (PUBLIC data: a ``ClassificationData``, a tuple, or a ``TorchModelTuningObjective``'s
            ``data``) ``method="auto"`` instead chooses among ``"training_selection"``, ``"subsample_tuning"``
            and ``"proxy_then_train"`` simulated there at each one's own noise (``methods.training_choice``;
            ``plan_options``: ``num_repeats``, ``num_configurations``, ``methods``, ``untuned``,
            ``tuning_share``: subsample tuning's ε split, else chosen on the proxy when it runs), and says
            when tuning is not expected to beat one untuned run (``TuneResult.advice`` and a
            ``SettingsWarning``): unless the chosen tuning method beats the untuned run there by more
            than one paired standard error it runs that one training instead (``result.method ==
            "untuned"``); each of those, and ``"untuned"``, can be forced by ``method=``.
            ``"validation"`` with a DP-trained objective runs DP-GIBO with every training run charged on
            its own (a ``PrivacyWarning`` states their number, each one's ``ε`` and ``σ`` up front).
        mean_trials: ``E[K]`` of ``"sample"`` and of the selection over training runs (``protect``;
            a truncated negative binomial with ``η = 1``).
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
        accounting: How the private selection over whole DP training runs (``protect="training"`` or
            ``"both"``) accounts the training records' charge (``methods.training_runs.select_training_runs``):
            ``"auto"`` (default: its privacy-profile bound where that needs less noise and the ledger's
            training side is empty, else the Papernot–Steinke RDP curve), ``"profile"`` (refused when the
            ledger already holds training entries) or ``"rdp"``. The result's description, report and JSON
            say which was used and why; refused by name where no such selection runs.
        **settings: ``DPGIBOConfig`` keywords; ``TUNE_DEFAULTS`` otherwise (the kernel is
            ``space.recommended_kernel()`` unless ``kernel=`` is given).

    Returns:
        The ``TuneResult``.
    """
    call = TuneCall.checked(
        tune, objective, space, epsilon=epsilon, delta=delta, ledger=ledger, proxy=proxy, num_users=num_users,
        plan_options=plan_options, strategy=strategy, method=method, protect=protect, mean_trials=mean_trials,
        max_trials=max_trials,
        selection_share=selection_share, loss_clip=loss_clip, seed=seed, progress=progress, executor=executor,
        checkpoint_dir=checkpoint_dir, unsafe_allow_large_delta=unsafe_allow_large_delta,
        allow_noise_dominated=allow_noise_dominated, settings=settings, accounting=accounting,
    )  # fmt: skip
    given = call  # the checkpoint compares the arguments as given, not the budget's cut (machine-dependent)
    with named_coordinates(space.names):  # warnings name the hyperparameters, not θ[i]
        call, planning = _budgeted(call, check_plan_budget(plan_budget))
        choice = choose(call)  # the candidates, compared on the PUBLIC proxy when one is given: no release yet
        if choice.advice is not None:  # the training methods: one untuned run did as well on the proxy
            warnings.warn(choice.advice, SettingsWarning, stacklevel=2)
        ledger = call.ledger_for(choice.winner.gdp_mu)
        with given.opened_checkpoint() as checkpoint:  # the arguments checked against a stored call first
            call.check_room_for_trainings(checkpoint)
            winner = choice.winner.with_checkpoint(checkpoint)
            run = winner.run_private(call.objective, ledger=ledger, seed=seed, progress=progress, executor=executor)
    result = call.checks.carry(tune_result(run, space, ledger, choice.comparison, advice=choice.advice))
    return dataclasses.replace(result, planning=planning, method_rule=call.method_rule)


def _budgeted(call: TuneCall, plan_budget: float | str | None) -> tuple[TuneCall, str | None]:
    r"""``call`` planning through one ``ProxyCache`` with its ``plan_options`` cut to ``plan_budget`` seconds
    (``plan.budget``), and the note (``None``: none cut)."""
    if call.proxy is None or call.selects_trainings:
        if plan_budget is not None and plan_budget != AUTO:
            if call.proxy is not None:
                raise ValueError(
                    f"plan_budget={plan_budget!r}: the training methods' comparison is sized by plan_options "
                    "(num_repeats, num_configurations, methods), not by plan_budget."
                )
            raise ValueError(f"plan_budget={plan_budget!r}: there is no planning without proxy=.")
        return call, None
    call = dataclasses.replace(call, proxy=CachedProxy(call.proxy, call.space, ProxyCache()))
    if plan_budget is None:
        return call, None
    options = dict(call.plan_options or {})
    compared = call.method != "dp_gibo" and options.get("choose_method", True) is not False
    num_methods = (3 if options.get("methods") is None else len(options["methods"])) if compared else 0
    config = call.config(call.mu_run)
    proxy = configs_objective(call.proxy, call.space, call.configurations[0])
    fits = options.get("fit_kernel", True) is not False and options.get("kernel_fit_radius") is None
    seed = int(options.get("seed", 0))
    estimate = measure_costs(proxy, config, num_configurations=call.K, seed=seed, fit_kernel=fits)
    budget = plan_budgets.auto_budget(estimate) if plan_budget == AUTO else float(plan_budget)
    cut = functools.partial(
        budgeted_options, config, budget=budget, estimate=estimate, num_methods=num_methods,
        may_skip_comparison=call.method == "auto",
    )  # fmt: skip
    options, compare, note = cut(options)
    auto_said = (
        f"plan_budget = 'auto' ({budget:.3g} s; the private run estimated at {estimate.private_run():.3g} s, "
        f"the estimate itself took {estimate.seconds_measuring:.2g} s)"
    )
    if note is not None and plan_budget == AUTO:
        note = note.replace(f"plan_budget = {budget:.3g} s", auto_said)
    if compare or call.method != "auto":
        return dataclasses.replace(call, plan_options=options), note
    # no room for the comparison: the public rule picks, as without a proxy
    rule = default_method(space_kinds(call.space), resumable=call.checkpoint_dir is not None)
    why = f"the planning budget left no room to compare methods on the proxy; {rule.reason}"
    if rule.method == "dp_gibo" and call.K == 1:  # the plan itself recommends DP-GIBO without a comparison
        return dataclasses.replace(call, plan_options={**options, "choose_method": False}, method_rule=why), note
    if rule.method == "dp_gibo":
        return dataclasses.replace(call, plan_options=options, method="dp_gibo", method_rule=why), note
    # a selection method: DP-GIBO's settings are of no use to it, so the proxy is not used further (nor the fit's cuts)
    _, _, note = cut(dict(call.plan_options or {}), fit_cuts=False)
    if note is not None and plan_budget == AUTO:
        note = note.replace(f"plan_budget = {budget:.3g} s", auto_said)
    note = (note or "").replace(
        "no method comparison (DP-GIBO with the planned settings)",
        f"no method comparison ({rule.method.replace('_', ' ')} by the public rule, with its default settings: "
        "the proxy was not used further)",
    )
    return dataclasses.replace(call, proxy=None, plan_options=None, method=rule.method, method_rule=why), note
