r"""A planning budget: the planner's settings cut so that the planning makes at most ``budget`` simulated runs.

``budgeted_options`` counts the simulated runs of planning ``K`` configurations and comparing ``M``
methods (``K (S + 1) r + M r``: ``S`` settings per configuration plus the settings passed in, ``r``
repeats, ``plan.search.planned_simulations``) and, over the budget, cuts in this order: the repeats
down to 2 (the least that still gives a standard error), the candidate settings down to one per batch
rule (the given step size, the middle clip quantile, the given ``T``, the first rule), then the
repeats down to 1. What it cut is said in a note. Everything here is public arithmetic.
"""

from __future__ import annotations

from typing import Any

from botorch_dp.optim.config import DPGIBOConfig
from botorch_dp.plan.search import DEFAULT_CLIP_QUANTILES, planned_simulations
from botorch_dp.privacy.checks import check_positive_int

__all__ = ["budgeted_options", "planning_count"]


def planning_count(config: DPGIBOConfig, options: dict[str, Any], *, num_configurations: int, num_methods: int) -> int:
    r"""Simulated runs of planning ``num_configurations`` configurations with ``options`` (keywords of
    ``plan_private_run``) and comparing ``num_methods`` methods: ``K (S + 1) r + M r``."""
    per_configuration = planned_simulations(config, **{**options, "choose_method": False})
    return num_configurations * per_configuration + num_methods * int(options.get("num_repeats", 3))


def budgeted_options(
    config: DPGIBOConfig, options: dict[str, Any] | None, *, budget: int, num_configurations: int, num_methods: int
) -> tuple[dict[str, Any], str | None]:
    r"""``options`` cut to at most ``budget`` simulated runs (see the module) and the note saying what
    was cut (``None``: within the budget as given).

    Args:
        config: The DP-GIBO settings the plans start from (its ``step_size``, ``num_iterations``).
        options: Keywords of ``plan_private_run`` (``None``: its defaults).
        budget: ``plan_budget``, the most simulated runs (a positive integer).
        num_configurations: ``K``, the configurations planned.
        num_methods: ``M``, the methods compared after the plans (0: none).

    Returns:
        ``(options, note)``.
    """
    budget = check_positive_int(budget, "plan_budget")
    given = dict(options or {})
    cut = dict(given)

    def count(opts: dict[str, Any]) -> int:
        return planning_count(config, opts, num_configurations=num_configurations, num_methods=num_methods)

    before = count(cut)
    if before <= budget:
        return cut, None
    repeats = int(cut.get("num_repeats", 3))
    while repeats > 2 and count({**cut, "num_repeats": repeats}) > budget:
        repeats -= 1
    cut["num_repeats"] = repeats
    if count(cut) > budget:  # one setting per batch rule
        quantiles = tuple(cut.get("clip_quantiles", DEFAULT_CLIP_QUANTILES))
        cut["clip_quantiles"] = (quantiles[len(quantiles) // 2],)
        cut["step_sizes"] = (config.step_size,)
        cut["num_iterations"] = (config.num_iterations,)
        if cut.get("bias_tolerances") is not None:
            cut["bias_tolerances"] = tuple(cut["bias_tolerances"])[:1]
    while cut["num_repeats"] > 1 and count(cut) > budget:
        cut["num_repeats"] -= 1
    after = count(cut)
    settings = planned_simulations(config, **{**cut, "choose_method": False, "num_repeats": 1}) - 1
    settings_before = planned_simulations(config, **{**given, "choose_method": False, "num_repeats": 1}) - 1
    note = (
        f"plan_budget = {budget} simulated runs: planned with {cut['num_repeats']} repeat(s) (of "
        f"{int(given.get('num_repeats', 3))}) and {settings} candidate setting(s) per configuration (of "
        f"{settings_before}), {after} simulated runs instead of {before}"
    )
    if after > budget:
        note += "; the least planning there is still exceeds the budget"
    return cut, note
