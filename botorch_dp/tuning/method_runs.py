r"""``tune(method=...)``: run the method the planner recommends (or the one forced) and release it
in ``TuneResult`` form.

With ``proxy=`` and ``method="auto"`` (``tune``'s default) the space is planned on the PUBLIC
proxy (``plan_private_run``, which also compares DP-GIBO with its planned settings, private
random search and DP-HyPO, ``plan.method_choice``) and the recommended method runs privately;
``method="dp_gibo" | "private_random_search" | "dp_hypo"`` forces one (with a proxy, from the
same plan; without one, the selection methods take ``E[K]`` from DP-GIBO's settings, ``T`` times
the batch size, and ``C`` from ``tune``'s ``loss_clip``). The method's ``run_private`` charges
``tune``'s ledger through the charge protocol with the full ``(ε, δ)`` before anything is
released. This path serves spaces without categorical hyperparameters (one configuration);
with them, ``tuning.mixed_methods`` compares ``tune``'s DP-GIBO per configuration with the
selection methods over the space's public encoding.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Callable
from typing import Any

from torch import Tensor

from botorch_dp.baselines.selection import PrivateSelectionResult
from botorch_dp.optim import DPGIBOConfig, DPGIBOResult
from botorch_dp.optim.public_checks import SettingsWarning
from botorch_dp.plan import plan_private_run
from botorch_dp.plan.method_dp_gibo import DPGIBOMethod
from botorch_dp.plan.method_dp_hypo import DPHyPOMethod
from botorch_dp.plan.method_protocol import CandidateMethod, MethodContext, MethodRun, config_delta, config_mu
from botorch_dp.plan.method_random_search import PrivateRandomSearchMethod
from botorch_dp.privacy.analysis.gdp import gdp_epsilon
from botorch_dp.privacy.checks import did_you_mean
from botorch_dp.privacy.ledger import PrivacyLedger
from botorch_dp.privacy.statement import guarantee_statement
from botorch_dp.tuning.encoding import natural_point
from botorch_dp.tuning.search_space import SearchSpace
from botorch_dp.tuning.tune_result import ConfigurationRun, TuneGuarantee, TuneObjective, TuneResult, configs_objective

__all__ = [
    "METHODS",
    "batch_size_of",
    "check_method",
    "run_method",
    "selection_timing",
    "with_max_trials",
    "without_proxy",
]

METHODS = ("auto", "dp_gibo", "private_random_search", "dp_hypo")
"""``tune``'s ``method`` values."""
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
    r"""``candidate`` whose private run is padded to ``max_trials`` trials when it is a selection
    (``PrivateRandomSearchMethod`` and ``DPHyPOMethod``; DP-GIBO has no hidden ``K``: unchanged)."""
    if max_trials is None or not isinstance(candidate, PrivateRandomSearchMethod):
        return candidate
    return dataclasses.replace(candidate, max_trials=max_trials)


def selection_timing(run: MethodRun) -> tuple[str, str | None]:
    r"""``(procedure, timing)`` of a method's run: its description without the wall-time sentence,
    and that sentence (``None`` for a run without a hidden number of trials)."""
    if not isinstance(run.result, PrivateSelectionResult):
        return run.description, None
    timing = run.result.guarantee.details.get("timing")
    if not isinstance(timing, str):
        return run.description, None
    return run.description.removesuffix(" " + timing), timing


def batch_size_of(config: DPGIBOConfig, dim: int) -> int:
    r"""DP-GIBO's points per step: ``batch_size``, else ``max_batch_size``, else ``d + 1``."""
    return config.batch_size or config.max_batch_size or dim + 1


def check_method(
    method: str, proxy: Any, num_configurations: int, *, strategy: str = "enumerate", trains: bool = False
) -> str:
    r"""``method`` checked; ``"auto"`` becomes ``"dp_gibo"`` without a proxy, with an objective that
    charges DP training runs (where a forced selection method is refused: the training ledger
    would count its hidden number of trials, on any space), and on a mixed space (categorical
    configurations) with ``strategy="sample"``."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}.{did_you_mean(method, METHODS)}")
    if trains and method not in ("auto", "dp_gibo"):
        raise ValueError(
            f"method={method!r} with an objective that charges DP training runs: the training ledger "
            "would count the selection's hidden number of trials; use method='dp_gibo'."
        )
    if method == "auto" and (proxy is None or trains or (num_configurations > 1 and strategy != "enumerate")):
        return "dp_gibo"
    return method


def run_method(
    method: str,
    objective: TuneObjective,
    space: SearchSpace,
    config: DPGIBOConfig,
    *,
    proxy: TuneObjective | None,
    num_users: int | None,
    plan_options: dict[str, Any] | None,
    ledger: PrivacyLedger | None,
    loss_clip: float,
    seed: int | None,
    progress: bool,
    executor: Any,
    max_trials: int | None = None,
) -> TuneResult:
    r"""Plan (with a proxy), resolve ``method`` (``"auto"``: the plan's recommendation) and run it
    privately on ``objective``; see the module.

    Args:
        config: DP-GIBO's settings at the full budget (``privacy_mu``, ``target_delta``); the
            selection methods run at ``(gdp_epsilon(μ, δ), δ)``.
        ledger: The ledger to charge; default a new one whose μ budget is the method's μ (DP-GIBO)
            or none (private selection: an RDP curve calibrated to ``(ε, δ)`` itself).
        max_trials: A selection's public number of trials (``with_max_trials``).
    """
    delta = config_delta(config)
    plan = None
    space_objective = configs_objective(objective, space, {})
    if proxy is not None:  # public: the proxy's users only, the private run's noise simulated
        if num_users is None:
            raise ValueError("num_users: planning on a proxy needs n, the number of users of objective (public).")
        plan = plan_private_run(
            configs_objective(proxy, space, {}),
            config,
            num_users=num_users,
            progress=progress,
            **{"coordinate_names": space.names, **(plan_options or {})},
        )
        if plan.methods is None:
            candidate = plan.recommended_method if method in ("auto", "dp_gibo") else None
            if candidate is None:
                raise ValueError(f"method={method!r}: plan_options turned the method choice off (choose_method=False).")
        else:
            candidate = plan.methods.recommended if method == "auto" else plan.methods.get(method)
    else:
        evaluations = config.num_iterations * batch_size_of(config, space.dim)
        candidate = without_proxy(method, loss_clip, config, space.bounds, evaluations)
    candidate = with_max_trials(candidate, max_trials)
    budget = candidate.gdp_mu if config.options.fitting.holds else None  # no guarantee fits no budget
    ledger = ledger if ledger is not None else PrivacyLedger(validation_mu_budget=budget)
    run = candidate.run_private(space_objective, ledger=ledger, seed=seed, progress=progress, executor=executor)
    if plan is not None and run.num_users != num_users:
        warnings.warn(
            f"The run was planned for num_users = {num_users}, but objective has {run.num_users} users: the "
            "plan simulated other noise than the run drew.",
            SettingsWarning,
            stacklevel=3,
        )
    if candidate.gdp_mu is not None:
        spent = ledger.validation_mu(run.run_id)
        guarantee = TuneGuarantee(spent, gdp_epsilon(spent, delta), delta)
    else:
        guarantee = TuneGuarantee(math.nan, run.epsilon, delta)
    result = run.result if isinstance(run.result, DPGIBOResult) else run  # ``.release.theta`` either way
    planned = plan.config if plan is not None else config
    configuration = ConfigurationRun({}, result, run.run_id, run.num_users, planned, plan, run.released_score)
    procedure, timing = selection_timing(run)
    return TuneResult(
        hyperparameters=natural_point(space, run.theta),
        guarantee=guarantee,
        runs=[configuration],
        chosen=0,
        statement=guarantee_statement(ledger, delta),
        ledger=ledger,
        score_mu=None,
        method=run.method,
        procedure=procedure,
        methods=None if plan is None else plan.methods,
        timing=timing,
    )
