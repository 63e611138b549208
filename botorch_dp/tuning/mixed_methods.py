r"""``tune``'s method choice on the proxy: one configuration (``plan_and_compare``) and a mixed space
(categorical hyperparameters, ``choose_mixed_method``: the choice over the space's public encoding).

Both compare through ``methods.choice``, the one place methods are compared; ``plan_private_run`` plans
DP-GIBO's settings only. ``plan_and_compare`` plans them on the fitting half of the proxy's users and
compares DP-GIBO with them, private random search and DP-HyPO on the scoring half
(``methods.choice.plan_then_compare``).

With ``proxy=`` (PUBLIC users), ``choose_mixed_method`` first plans every configuration's
DP-GIBO run on the proxy (``plan_private_run``, as ``tune``'s enumerate path does, at ``μ_run``),
then compares on the proxy, with fresh paired seeds (``methods.choice.compare_in_context``, the one place
methods are compared; one configuration's choice is ``methods.choice.plan_then_compare``):

* ``"dp_gibo"``: ``tune``'s enumerate procedure with those plans (``methods.enumerate``),
* ``"private_random_search"`` and ``"dp_hypo"`` over the encoded cube (``tuning.encoding``),
  with ``E[K]`` the enumerate procedure's planned evaluations (every run's points and the
  ``K`` scored final points) and ``C = loss_clip``, the enumerate scores' ``C`` (as without a
  proxy; ``methods.choice.with_loss_clip``), calibrated to the full ``(ε, δ)``.

A tie on the proxy between equally costly methods (every candidate's cost is the same planned
number of evaluations) goes to the public rule's method (``methods.default_rule``: private
random search on a space with an integer or a categorical hyperparameter).

The proxy's users are split first (``methods.proxy_split.ProxySplit(seed)``, public and seeded): the plans
read the fitting half, every candidate is simulated and scored on the scoring half, so no method is
scored on the users its settings were fitted on.

Everything here reads the proxy and public settings only; the sensitive objective is not an
argument. The recommended method then runs privately through ``tuning.method_runs.OnSpace``
(a selection on the encoded objective, whose rows ``EncodedObjective`` decodes to natural-unit
configurations), charging the ledger with the full ``(ε, δ)`` before the first evaluation.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from torch import Tensor

from botorch_dp.methods.choice import (
    DEFAULT_METHODS,
    MethodComparison,
    compare_in_context,
    plan_then_compare,
    with_loss_clip,
)
from botorch_dp.methods.default_rule import default_method, space_kinds
from botorch_dp.methods.dp_hypo import DPHyPOMethod
from botorch_dp.methods.enumerate import EnumerateMethod
from botorch_dp.methods.private_random_search import PrivateRandomSearchMethod
from botorch_dp.methods.protocol import MethodContext, SimulatedMethod, config_delta
from botorch_dp.methods.proxy_split import ProxySplit
from botorch_dp.objectives.search_space import SearchSpace
from botorch_dp.optim import DPGIBOConfig
from botorch_dp.plan.search import PrivatePlan, plan_private_run
from botorch_dp.privacy.analysis.gdp import gdp_epsilon
from botorch_dp.tuning.encoding import MixedEncoding
from botorch_dp.tuning.tune_result import TuneObjective, configs_objective
from botorch_dp.utils import child_seeds, progress_stage

__all__ = ["MixedChoice", "choose_mixed_method", "plan_and_compare"]


def plan_and_compare(
    proxy_objective: Callable[[Tensor], Tensor],
    config: DPGIBOConfig,
    *,
    num_users: int,
    methods: Sequence[SimulatedMethod] | None = None,
    seed: int = 0,
    num_repeats: int = 3,
    progress: bool = True,
    **plan_options: Any,
) -> PrivatePlan:
    r"""DP-GIBO's settings planned on the PUBLIC proxy and the methods compared there: what
    ``tune(method="auto", proxy=...)`` does for one configuration.

    The proxy's users are split (``methods.proxy_split.ProxySplit(seed)``); ``plan_private_run(...,
    **plan_options)`` plans the settings on the fitting half, and ``methods`` (default DP-GIBO with those
    settings, private random search and DP-HyPO) are simulated on the scoring half with the private run's
    noise, ``num_repeats`` times with fresh paired seeds (``methods.choice.plan_then_compare``).

    Returns:
        The plan with the comparison attached (``PrivatePlan.methods``, ``proxy_split``,
        ``recommended_method``); for a config without a finite privacy budget, the plan alone.
    """
    options = dict(num_users=num_users, seed=seed, num_repeats=num_repeats, progress=progress, **plan_options)
    assert config.privacy_mu is not None  # DPGIBOConfig resolves it
    if not math.isfinite(config.privacy_mu):  # no noise to simulate: no comparison
        return plan_private_run(proxy_objective, config, **options)
    plan, comparison, split = plan_then_compare(
        proxy_objective,
        lambda fitting: plan_private_run(fitting, config, **options),
        DEFAULT_METHODS if methods is None else methods,
        num_users=num_users,
        seed=seed,
        num_repeats=num_repeats,
        progress=progress,
    )
    return dataclasses.replace(plan, methods=comparison, proxy_split=split)


@dataclass
class MixedChoice:
    r"""The plans and the method comparison on the proxy (all public).

    Attributes:
        plans: Each configuration's ``PrivatePlan`` (``space.configurations()`` order).
        comparison: The ``MethodComparison`` on the encoded proxy (``str`` gives the table).
    """

    plans: list[PrivatePlan]
    comparison: MethodComparison


def _rule_method(space: SearchSpace) -> str | None:
    r"""The public rule's method for ``space`` (``methods.default_rule``), or ``None`` when the rule has none."""
    try:
        return default_method(space_kinds(space)).method
    except ValueError:  # no coordinate to tune: the rule does not apply
        return None


def choose_mixed_method(
    proxy: TuneObjective,
    space: SearchSpace,
    run_config: DPGIBOConfig,
    *,
    full_mu: float,
    score_mu: float,
    loss_clip: float,
    num_users: int,
    plan_options: dict[str, Any] | None,
    progress: bool,
) -> MixedChoice:
    r"""Plan each configuration on the PUBLIC ``proxy``, then compare the methods there (see the module).

    Args:
        run_config: Each configuration's DP-GIBO settings at ``μ_run`` (what the plans start from).
        full_mu: ``μ`` of the whole procedure (the selection methods run at ``gdp_epsilon(μ, δ)``).
        score_mu: ``μ_score`` of the enumerate procedure's scores.
        loss_clip: ``C`` of those scores, and of the selections whose ``C`` is open.
        num_users: ``n`` of the private objective (public).
        plan_options: Keywords of ``plan_private_run`` for each configuration; ``num_repeats`` and
            ``seed`` also set the comparison's repeats (fresh seeds), ``methods`` its candidates
            (one named ``"dp_gibo"`` stands for the enumerate procedure; default: it, private
            random search and DP-HyPO).
    """
    options = {"coordinate_names": space.names, **(plan_options or {})}
    given = options.pop("methods", None)
    options.pop("choose_method", None)
    configurations = space.configurations()
    split = ProxySplit(int(options.get("seed", 0)))  # settings on the fitting half, scores on the other
    plans = []
    for k, choice in enumerate(configurations):
        named = ", ".join(f"{name}={value}" for name, value in choice.items())
        progress_stage(configuration=f"{k + 1}/{len(configurations)} ({named})")
        plans.append(
            plan_private_run(
                split.fitting(configs_objective(proxy, space, choice)),
                run_config,
                num_users=num_users,
                progress=progress,
                **options,
            )
        )
    progress_stage(configuration=f"all {len(configurations)} (encoded)")
    n_p = {p.num_proxy_users for p in plans}
    if len(n_p) != 1:
        raise ValueError(
            f"proxy returned {sorted(n_p)} users across configurations; it must score every "
            "configuration on the same users."
        )
    encoding = MixedEncoding(space)
    enumerate_method = EnumerateMethod(
        tuple(configurations), tuple(p.config for p in plans), score_mu, loss_clip, full_mu, tuple(plans)
    )
    methods: tuple[SimulatedMethod, ...] = with_loss_clip(
        [enumerate_method, PrivateRandomSearchMethod(), DPHyPOMethod()]
        if given is None
        else [enumerate_method if m.name == "dp_gibo" else m for m in given],
        loss_clip,
    )
    delta = config_delta(run_config)
    evaluations = math.fsum(p.trials[p.best].num_evaluations for p in plans) + len(plans)
    scoring = split.scoring(encoding.objective(proxy))
    n_p.pop()  # the fitting half's size; the candidates are simulated on the scoring half's
    context = MethodContext(
        bounds=encoding.bounds,
        num_users=int(num_users),
        num_proxy_users=scoring.count(encoding.bounds[:1]),
        epsilon=gdp_epsilon(full_mu, delta),
        delta=delta,
        config=dataclasses.replace(run_config, privacy_mu=full_mu),
        evaluations=evaluations,
    )
    seeds = child_seeds([int(options.get("seed", 0)), 2], int(options.get("num_repeats", 3)))
    comparison = compare_in_context(
        scoring,
        context,
        methods,
        seeds=seeds,
        progress=progress,
        fitting_objective=split.fitting(encoding.objective(proxy)),
        prefer=_rule_method(space),
    )
    return MixedChoice(plans, comparison)
