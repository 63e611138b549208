r"""``tune``'s candidates: which method runs, built from the call's arguments and compared on the proxy.

``choose(call)`` builds what ``tune`` runs (``methods``: one module per method) and, with a
PUBLIC proxy, compares the candidates there before the sensitive objective is called:

* one configuration (no categorical hyperparameters) and ``method`` other than ``"dp_gibo"``:
  DP-GIBO's settings planned on the proxy's fitting half (``plan_private_run``) and DP-GIBO with
  them, private random search and DP-HyPO compared on its scoring half
  (``tuning.mixed_methods.plan_and_compare``, through ``methods.choice.plan_then_compare``), then
  the recommended or forced method; without a proxy the forced selection method takes ``E[K]`` =
  DP-GIBO's evaluations (``T`` times the batch size) and ``C = loss_clip``;
* a mixed space: with a proxy, every configuration planned and the enumerate procedure, private
  random search and DP-HyPO over the space's public encoding compared (``tuning.mixed_methods``);
  a selection method runs over the encoding (without a proxy with ``E[K] = K (T b + 1)``);
* ``protect="training"`` or ``"both"``: private selection over whole DP (DP-SGD or AMP) training runs
  (``methods.training_selection``) without a proxy, else the training methods compared on the proxy's data
  (``methods.training_choice``);
* DP-GIBO: the enumerate procedure (``methods.enumerate``; each configuration planned on the
  proxy when one is given) or, with ``strategy="sample"``, the sampled strategy
  (``methods.sampled``; every configuration planned before the first trial).

``OnSpace`` runs the chosen method on ``tune``'s objective: it hands the method the objective
it evaluates (bound per configuration, or on the encoded cube), passes the noise seed, and
reads the released point back in the space's coordinates. Every method charges the ledger with
the full ``(ε, δ)`` before anything is released.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from botorch_dp.methods.choice import DEFAULT_METHODS, MethodComparison, with_loss_clip
from botorch_dp.methods.dp_gibo import DPGIBOMethod
from botorch_dp.methods.dp_hypo import DPHyPOMethod
from botorch_dp.methods.enumerate import EnumerateMethod
from botorch_dp.methods.private_random_search import PrivateRandomSearchMethod
from botorch_dp.methods.protocol import (
    CandidateMethod,
    ConfigurationRun,
    MethodContext,
    MethodRun,
    Resumable,
    config_delta,
    config_mu,
)
from botorch_dp.methods.proxy_then_train import DEFAULT_CONFIGURATIONS
from botorch_dp.methods.sampled import SampledMethod, sampled_per_trial_mu
from botorch_dp.methods.training_choice import DEFAULT_REPEATS, choose_training_method, training_method
from botorch_dp.objectives.search_space import SearchSpace
from botorch_dp.optim import DPGIBOConfig
from botorch_dp.optim.public_checks import SettingsWarning
from botorch_dp.plan.search import PrivatePlan, plan_private_run, planned_simulations
from botorch_dp.privacy.analysis.gdp import gdp_epsilon
from botorch_dp.privacy.ledger import PrivacyLedger
from botorch_dp.privacy.seeding import PrivacyWarning
from botorch_dp.tuning.encoding import MixedEncoding
from botorch_dp.tuning.mixed_methods import choose_mixed_method, plan_and_compare
from botorch_dp.tuning.tune_call import METHODS, TuneCall, check_method, proxy_data, selection_distribution
from botorch_dp.tuning.tune_result import TuneObjective, configs_objective
from botorch_dp.utils import child_seeds, overall_progress, progress_stage

__all__ = [
    "METHODS",
    "Choice",
    "OnSpace",
    "batch_size_of",
    "check_method",
    "choose",
    "selection_timing",
    "with_max_trials",
    "without_proxy",
]

# the unresolved candidate of each forced method without a proxy (``C`` given)
_WITHOUT_PROXY: dict[str, Callable[[float], CandidateMethod]] = {
    "dp_gibo": lambda clip: DPGIBOMethod(),
    "private_random_search": lambda clip: PrivateRandomSearchMethod(loss_clip=clip),
    "dp_hypo": lambda clip: DPHyPOMethod(loss_clip=clip),
}


def without_proxy(
    method: str, loss_clip: float, config: DPGIBOConfig, bounds: Tensor, evaluations: float
) -> CandidateMethod:
    r"""A forced ``method`` without a proxy, resolved at ``config``'s full ``(ε, δ)`` over ``bounds``
    (a selection: ``E[K] = evaluations`` trials, scores clipped at ``C = loss_clip``)."""
    delta = config_delta(config)
    context = MethodContext(
        bounds=bounds,
        num_users=0,
        num_proxy_users=None,
        epsilon=gdp_epsilon(config_mu(config), delta),
        delta=delta,
        config=config,
        evaluations=float(evaluations),
    )
    return _WITHOUT_PROXY[method](loss_clip).resolved(None, context)


def with_max_trials(candidate: CandidateMethod, max_trials: int | None) -> CandidateMethod:
    r"""``candidate`` whose private run is padded to ``max_trials`` trials when it has a hidden number of
    trials (its own ``with_max_trials``; DP-GIBO has no hidden ``K``: unchanged)."""
    return candidate if max_trials is None else candidate.with_max_trials(max_trials)


def selection_timing(run: MethodRun) -> tuple[str, str | None]:
    r"""``(procedure, timing)`` of a method's run: its description without the wall-time sentence,
    and that sentence (``None`` for a run without a hidden number of trials)."""
    return (run.description if run.procedure is None else run.procedure), run.timing


def batch_size_of(config: DPGIBOConfig, dim: int) -> int:
    r"""DP-GIBO's points per step: the batch rule's size (``b``, or ``b_max`` of adaptive batches), else ``d + 1``."""
    return config.batches.per_step(dim + 1)


@dataclass(frozen=True)
class OnSpace:
    r"""A method run on ``tune``'s objective over ``space`` (see the module).

    Attributes:
        method: The resolved method.
        space: The search space.
        config: DP-GIBO's (planned) settings, kept on a single released run for reference.
        plan: The ``PrivatePlan`` of a single configuration, if planned.
        encoded: The method searches the space's public encoding (a selection on a mixed space).
        planned_for: ``n`` the plans simulated (a run on other ``n`` warns), ``None`` without a plan.
    """

    method: Any
    space: SearchSpace
    config: DPGIBOConfig
    plan: PrivatePlan | None = None
    encoded: bool = False
    planned_for: int | None = None

    @property
    def name(self) -> str:
        return str(self.method.name)

    @property
    def gdp_mu(self) -> float | None:
        return self.method.gdp_mu

    def with_checkpoint(self, checkpoint: Any) -> OnSpace:
        r"""This method, resumable in ``checkpoint`` (its ``with_checkpoint``: the enumerate procedure's;
        ``None``: unchanged); a ``ValueError`` naming the method when it cannot resume (no ``Resumable``)."""
        if checkpoint is None:
            return self
        if not isinstance(self.method, Resumable):
            raise ValueError(
                f"checkpoint_dir: method {self.name!r} ({type(self.method).__name__}) cannot resume from a "
                "checkpoint (it has no with_checkpoint); run it without checkpoint_dir."
            )
        return dataclasses.replace(self, method=self.method.with_checkpoint(checkpoint))

    def run_private(
        self,
        objective: TuneObjective,
        *,
        ledger: PrivacyLedger,
        seed: int | None = None,
        progress: bool = False,
        executor: Any = None,
    ) -> MethodRun:
        kw = dict(ledger=ledger, progress=progress, executor=executor)
        encoding = MixedEncoding(self.space)
        if self.method.runs_configurations:  # over the configurations itself; seeds its own streams
            run = self.method.run_private(encoding.objective(objective), seed=seed, **kw)
        else:
            seed = None if seed is None else child_seeds([int(seed)], 1)[0]
            evaluated = encoding.objective(objective) if self.encoded else configs_objective(objective, self.space, {})
            run = self.method.run_private(evaluated, seed=seed, **kw)
            if self.encoded:  # the relaxed coordinates, as every run's; the configuration decoded
                K = len(self.space.configurations())
                procedure = f"{str(run.procedure).rstrip('.')} (over the public encoding of {K} configurations)"
                configuration = encoding.configuration(run.theta)
                run = dataclasses.replace(
                    run, theta=run.theta[: self.space.dim], configuration=configuration, procedure=procedure
                )
            released = ConfigurationRun(  # the run's own record (DP-GIBO's) or the run: ``.release.theta`` either way
                run.configuration,
                run.configuration_result,
                run.run_id,
                run.num_users,
                self.config,
                self.plan,
                run.released_score,
            )
            run = dataclasses.replace(run, runs=[released])
        if self.planned_for is not None and any(r.num_users != self.planned_for for r in run.runs):
            warnings.warn(
                f"The run was planned for num_users = {self.planned_for}, but objective has {run.num_users} "
                "users: the plan simulated other noise than the run drew.",
                SettingsWarning,
                stacklevel=3,
            )
        return run


#: The label of ``method="auto"``'s one progress bar over the planning on the proxy.
PLANNING = "tune: planning on the proxy"


@dataclass(frozen=True)
class Choice:
    r"""What ``tune`` runs (``winner``), the comparison on the proxy that chose it (``None``: none made) and,
    for the training methods, the advice when tuning is not expected to beat one untuned run."""

    winner: OnSpace
    comparison: MethodComparison | None = None
    advice: str | None = None


def _training_choice(call: TuneCall, full: DPGIBOConfig) -> Choice:
    r"""A method that protects the training records: the one asked for, or with ``method="auto"`` and a
    proxy the best of them simulated on the proxy's PUBLIC data (``methods.training_choice``)."""
    from botorch_dp.methods.selection_charge import training_mechanism  # scipy, Opacus: late

    options = dict(call.plan_options or {})
    kw = dict(
        epsilon=call.epsilon, delta=call.delta, protect=call.protect, proxy_data=proxy_data(call.proxy),
        mean_trials=call.mean_trials, max_trials=call.max_trials, loss_clip=call.loss_clip,
        num_configurations=options.get("num_configurations", DEFAULT_CONFIGURATIONS), untuned=options.get("untuned"),
        accounting=call.accounting, tuning_share=options.get("tuning_share"),
        mechanism=training_mechanism(call.given), **selection_distribution(options, call.mean_trials),
    )  # fmt: skip
    if call.method != "auto":
        method = _split_on_proxy(training_method(call.method, call.space, **kw), kw, options)
        return Choice(OnSpace(method, call.space, full))
    objective, n = call.given, int(call.given.num_users)
    context = MethodContext(call.space.bounds.to(torch.float64), n, len(kw["proxy_data"].y_val), call.epsilon,
                            call.delta, full, float(call.mean_trials))  # fmt: skip
    with warnings.catch_warnings():  # the proxy's copies are seeded: public randomness on public data
        warnings.simplefilter("ignore", PrivacyWarning)
        chosen = choose_training_method(
            objective, call.space, context=context, num_repeats=options.get("num_repeats", DEFAULT_REPEATS),
            methods=options.get("methods"), progress=call.progress, **kw,
        )  # fmt: skip
    winner = _split_on_proxy(chosen.winner, kw, options)
    return Choice(OnSpace(winner, call.space, full), chosen.comparison, chosen.advice)


def _split_on_proxy(method: Any, kw: dict[str, Any], options: dict[str, Any]) -> Any:
    r"""A method that splits ε between a tuning phase and its final training (``with_tuning_share``: subsample
    tuning) runs with ``plan_options["tuning_share"]``, or without it chooses the split on the proxy's PUBLIC
    data when it runs; any other method as it is."""
    split = getattr(method, "with_tuning_share", None)
    return method if split is None else split(options.get("tuning_share"), kw["proxy_data"])


def choose(call: TuneCall) -> Choice:
    r"""Build ``call``'s candidates and choose the one to run, on the PUBLIC proxy only (see the module)."""
    space, K, method, n = call.space, call.K, call.method, call.num_users
    full = call.config(call.mu)
    if call.selects_trainings:  # the training records protected (methods.training_choice)
        return _training_choice(call, full)
    if method != "dp_gibo" and K == 1:
        if call.proxy is None:
            evaluations = full.num_iterations * batch_size_of(full, space.dim)
            candidate = without_proxy(method, call.loss_clip, full, space.bounds, evaluations)
            return Choice(OnSpace(with_max_trials(candidate, call.max_trials), space, full))
        assert n is not None  # checked with the proxy
        plan = _single_plan(call, full)
        if plan.methods is None:
            if method not in ("auto", "dp_gibo"):
                raise ValueError(f"method={method!r}: plan_options turned the method choice off (choose_method=False).")
            candidate = plan.recommended_method
        else:
            candidate = plan.methods.recommended if method == "auto" else plan.methods.get(method)
        winner = OnSpace(with_max_trials(candidate, call.max_trials), space, plan.config, plan, planned_for=n)
        return Choice(winner, plan.methods)
    mixed = None
    if method != "dp_gibo" and call.proxy is not None:  # every configuration planned, the methods compared
        assert n is not None  # checked with the proxy
        options = {**(call.plan_options or {}), "choose_method": False}
        given = options.pop("methods", None)
        total = K * planned_simulations(call.run_config, **options) + (3 if given is None else len(given)) * int(
            options.get("num_repeats", 3)
        )  # every configuration's plan, then the methods compared (tuning.mixed_methods)
        with overall_progress(total=total, desc=PLANNING, disable=not call.progress):
            mixed = choose_mixed_method(
                call.proxy,
                space,
                call.run_config,
                full_mu=call.mu,
                score_mu=call.mu_score,
                loss_clip=call.loss_clip,
                num_users=n,
                plan_options=call.plan_options,
                progress=call.progress,
            )
        method = mixed.comparison.recommended_name if method == "auto" else method
    comparison = None if mixed is None else mixed.comparison
    if method != "dp_gibo":  # a selection over the space's public encoding
        if mixed is not None:
            candidate = mixed.comparison.get(method)
        else:  # each configuration's run: T batches, then its scored final point
            evaluations = K * (full.num_iterations * batch_size_of(full, space.dim) + 1)
            candidate = without_proxy(method, call.loss_clip, full, MixedEncoding(space).bounds, evaluations)
        return Choice(OnSpace(with_max_trials(candidate, call.max_trials), space, full, encoded=True), comparison)
    configurations = tuple(call.configurations)
    if call.sampled:
        per_trial_mu = sampled_per_trial_mu(call.epsilon, call.delta, call.mean_trials)
        configs, plans = _planned(call, per_trial_mu * math.sqrt(1.0 - call.share), progress=False)
        sampled = SampledMethod(
            configurations, configs, call.epsilon, call.delta, call.mean_trials, call.share, call.loss_clip,
            call.max_trials, plans, call.holds,
        )  # fmt: skip
        return Choice(OnSpace(sampled, space, call.run_config, planned_for=n if plans else None))
    configs = (call.config(call.mu_run),) * K
    plans = () if mixed is None else tuple(mixed.plans)
    planner = None if call.proxy is None or mixed is not None else functools.partial(_plan, call, call.mu_run)
    procedure = EnumerateMethod(
        configurations, tuple(p.config for p in plans) or configs, call.mu_score, call.loss_clip, call.mu, plans,
        planner=planner,
    )  # fmt: skip
    planned_for = n if call.proxy is not None else None
    return Choice(OnSpace(procedure, space, call.run_config, planned_for=planned_for), comparison)


def _single_plan(call: TuneCall, full: DPGIBOConfig) -> PrivatePlan:
    r"""One configuration's DP-GIBO settings planned on the PUBLIC proxy and, unless ``plan_options`` turn it
    off (``choose_method=False``) or the budget is not finite, the methods compared there
    (``tuning.mixed_methods.plan_and_compare``: settings on the fitting half, candidates scored on the
    other), the comparison kept on the plan (``PrivatePlan.methods``, ``proxy_split``)."""
    assert call.num_users is not None  # checked with the proxy
    options = {"coordinate_names": call.space.names, **(call.plan_options or {})}
    choose_method = options.pop("choose_method", True)
    if not isinstance(choose_method, bool):
        raise ValueError(f"choose_method must be True or False, got {choose_method!r}.")
    # every candidate scores with tune's C (methods.choice.with_loss_clip), as without a proxy
    methods = with_loss_clip(options.pop("methods", None) or DEFAULT_METHODS, call.loss_clip)
    total = planned_simulations(full, choose_method=choose_method, methods=methods, **options)
    proxy = configs_objective(call.proxy, call.space, {})
    n, progress = call.num_users, call.progress
    with overall_progress(total=total, desc=PLANNING, disable=not progress):
        progress_stage(configuration="1/1")
        if not choose_method:
            return plan_private_run(proxy, full, num_users=n, progress=progress, **options)
        return plan_and_compare(proxy, full, num_users=n, methods=methods, progress=progress, **options)


def _plan(call: TuneCall, mu: float, k: int, *, progress: bool | None = None) -> PrivatePlan:
    r"""Configuration ``k``'s DP-GIBO settings at ``mu`` planned on the PUBLIC proxy (the private run's
    noise simulated; no method choice)."""
    assert call.num_users is not None  # checked with the proxy
    options = {"coordinate_names": call.space.names, **(call.plan_options or {})}
    for name in ("choose_method", "methods"):  # tune's method choice, not the plan's
        options.pop(name, None)
    return plan_private_run(
        configs_objective(call.proxy, call.space, call.configurations[k]),
        call.config(mu),
        num_users=call.num_users,
        progress=call.progress if progress is None else progress,
        **options,
    )


def _planned(call: TuneCall, mu: float, *, progress: bool) -> tuple[tuple[DPGIBOConfig, ...], tuple[PrivatePlan, ...]]:
    r"""Each configuration's DP-GIBO settings at ``mu``: planned on the PUBLIC proxy (``_plan``), or
    ``tune``'s own without one (no plans)."""
    if call.proxy is None:
        return (call.config(mu),) * call.K, ()
    plans = tuple(_plan(call, mu, k, progress=progress) for k in range(call.K))
    return tuple(p.config for p in plans), plans
