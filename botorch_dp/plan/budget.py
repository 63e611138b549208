r"""A planning budget in SECONDS: the planner's settings cut so that the planning should take at most ``budget``.

``tune(plan_budget=...)`` takes ``"auto"`` (default: ``AUTO_SHARE``, half, of the private run's estimated
time, less the time the estimate took, so that ``method="auto"`` costs at most about twice the private run
even when the estimate is tens of percent off), a number of seconds, or ``None`` (no limit: the plan options
as given). The time is ESTIMATED before any planning (``measure_costs``): one DP-GIBO step's own time (one
``ask`` at ``θ₀``, the acquisition and GP work of a step) and the proxy's time per point (the first points of
the kernel fit, evaluated through the planning's ``plan.cache.ProxyCache`` so that the fit reuses them).
``CostEstimate`` turns them into the cost of one DP-GIBO run (``T`` steps of ``b`` points, the scored final
point), of the private run (``K`` such runs, one per configuration: the private objective is taken to cost
per point what the proxy does), of a selection method's simulated run (its evaluations only) and of a
planning with given options (``K`` kernel fits of ``m`` points, each taken as ``FIT_STEPS`` steps' own time
for ``FIT_EVALUATIONS`` likelihood evaluations, the probes at ``θ₀``, the settings' and the baseline's
simulated runs, the method comparison's repeats).

``budgeted_options`` then takes the first of these cuts, in order, whose estimated planning fits the
budget: the repeats down to 2 (the least that still gives a standard error); one candidate setting per
configuration (the middle clip quantile, the given ``η`` and ``T``, the first batch rule); no baseline run
of the settings passed in; no simulated setting at all (``search_settings=False``: that one setting is
recommended unsimulated); 1 repeat; for ``method="auto"`` only, no method comparison (DP-GIBO with the
planned kernel and the probe's clip bound); a kernel fit stopped after ``CAPPED_FIT_EVALUATIONS``
likelihood evaluations; and a fit of the outputscale and noise variance only (``SCALE_FIT_EVALUATIONS``
evaluations at most), the length-scales kept at the config's (in ``tune`` the space's public
``recommended_kernel()``). The fit is never cut altogether: on the logistic task at ``d = 30`` the full fit
leaves the length-scales at their start and fits the outputscale (about 0.2 against the default 1), so the
scale-only fit gives the full fit's kernel there, while no fit at all changed the final loss by +0.055 on 4 of
4 paired seeds (weak evidence: a 1 % change of the outputscale moved it as much, the runs diverge).
What it cut, the estimate and its inputs are said in a note (``TuneResult.planning``). The estimate depends
on the machine's speed, so the cut may differ between machines; everything here is public (timings of public
computations on the public proxy).

Fewer kernel-fit points are not among the cuts: on the logistic task at ``d = 10`` (``reports/auto-cost.md``)
``m = 3 d`` and ``5 d`` fitted length-scales up to ``10⁴`` on some seeds and a worse final loss, and saved no
time (the fit's time is mostly per evaluation, not per point).
"""

from __future__ import annotations

import dataclasses
import math
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor
from torch.quasirandom import SobolEngine

from botorch_dp.optim.config import DPGIBOConfig
from botorch_dp.optim.dp_gibo import DPGIBO
from botorch_dp.optim.public_checks import SettingsWarning
from botorch_dp.plan.kernel_fit import KERNEL_FIT_POINTS_PER_DIM
from botorch_dp.plan.search import DEFAULT_CLIP_QUANTILES
from botorch_dp.privacy.checks import check_positive
from botorch_dp.privacy.seeding import PrivacyWarning
from botorch_dp.utils import child_seeds

__all__ = [
    "AUTO",
    "AUTO_SHARE",
    "CAPPED_FIT_EVALUATIONS",
    "SCALE_FIT_EVALUATIONS",
    "CostEstimate",
    "auto_budget",
    "budgeted_options",
    "check_plan_budget",
    "measure_costs",
]

AUTO = "auto"
"""``plan_budget``'s default: ``auto_budget``, a share of the estimated private run (``CostEstimate.private_run``)."""
#: The share of the private run's estimated time that ``plan_budget="auto"`` gives the planning: half, so that
#: ``method="auto"`` stays within twice the private run when the estimate is off by tens of percent (timings on a
#: shared machine move that much between calls).
AUTO_SHARE = 0.5
#: A kernel fit's likelihood evaluations as the estimate counts them (uncapped fits: 50 to 70 on the logistic
#: task at d = 10), costing ``FIT_STEPS`` DP-GIBO steps' own time together.
FIT_EVALUATIONS = 60
FIT_STEPS = 10
#: The cap of the budget's shorter kernel fit (``kernel_fit_evaluations``): at d = 10 it stops the fit at about
#: two thirds of its evaluations (its final loss was no worse over 12 paired seeds); a fit that converges sooner
#: (small ``d``) is the full fit.
CAPPED_FIT_EVALUATIONS = 40
#: The cap of the budget's least fit, of the outputscale and noise only (``kernel_fit_lengthscales=False``): two
#: hyperparameters, 15 to 18 evaluations on the logistic task at d = 10 and 30.
SCALE_FIT_EVALUATIONS = 20


def check_plan_budget(plan_budget: Any) -> float | str | None:
    r"""``plan_budget`` checked: ``"auto"``, ``None`` or a positive finite number of seconds."""
    if plan_budget is None or plan_budget == AUTO:
        return plan_budget
    if isinstance(plan_budget, bool) or not isinstance(plan_budget, (int, float)):
        raise ValueError(f"plan_budget must be 'auto', None (no limit) or a number of seconds, got {plan_budget!r}.")
    return check_positive(float(plan_budget), "plan_budget (seconds)", allow_inf=False)


@dataclass(frozen=True)
class CostEstimate:
    r"""The measured unit costs and the public sizes the planning's cost is estimated from (see the module).

    Attributes:
        seconds_per_row: The proxy's wall time per evaluated point.
        seconds_per_step: One DP-GIBO step's own time (one ``ask`` at ``θ₀``).
        num_configurations: ``K``.
        num_iterations: ``T``.
        batch_size: ``b``, points per step (the most with adaptive batches).
        fit_points: ``m``, the kernel fit's points per configuration.
        seconds_measuring: The time ``measure_costs`` spent on its timed step and proxy points (before any
            planning).
    """

    seconds_per_row: float
    seconds_per_step: float
    num_configurations: int
    num_iterations: int
    batch_size: int
    fit_points: int
    seconds_measuring: float = 0.0

    def run(self) -> float:
        r"""One DP-GIBO run on one configuration: ``T (b t_row + t_step) + t_row``."""
        return self.num_iterations * (self.batch_size * self.seconds_per_row + self.seconds_per_step) + (
            self.seconds_per_row
        )

    def private_run(self) -> float:
        r"""The private run: ``K`` DP-GIBO runs (the private objective costing per point what the proxy does)."""
        return self.num_configurations * self.run()

    def selection(self) -> float:
        r"""A selection method's simulated run: ``K (T b + 1)`` evaluations, its own time left out."""
        return self.num_configurations * (self.num_iterations * self.batch_size + 1) * self.seconds_per_row

    def fit(self, options: dict[str, Any]) -> float:
        r"""One kernel fit with ``options``: ``m`` proxy points and ``FIT_STEPS`` steps' own time for
        ``FIT_EVALUATIONS`` likelihood evaluations, prorated to ``kernel_fit_evaluations`` when fewer;
        0 with ``fit_kernel=False``."""
        if options.get("fit_kernel", True) is False:
            return 0.0
        points = int(options.get("kernel_fit_points") or self.fit_points)
        evaluations = min(int(options.get("kernel_fit_evaluations") or FIT_EVALUATIONS), FIT_EVALUATIONS)
        return points * self.seconds_per_row + FIT_STEPS * evaluations / FIT_EVALUATIONS * self.seconds_per_step

    def planning(self, options: dict[str, Any], num_methods: int) -> float:
        r"""The planning with ``options`` (keywords of ``plan_private_run``) and ``num_methods`` compared
        (0: no comparison): ``K`` fits (``fit``), the probes, the settings' and baseline's runs, and ``r``
        repeats of the comparison."""
        repeats = int(options.get("num_repeats", 3))
        search, baseline = options.get("search_settings", True), options.get("baseline", True)
        settings = len(tuple(options.get("clip_quantiles", DEFAULT_CLIP_QUANTILES)))
        settings *= len(tuple(options.get("step_sizes") or (0, 0, 0))) * len(
            tuple(options.get("num_iterations") or (0,))
        )
        rules = len(tuple(options.get("bias_tolerances") or (None,)))
        settings = settings * rules if search else 0
        probe = self.batch_size * self.seconds_per_row + self.seconds_per_step
        simulated = (settings + baseline) * repeats * self.run()
        per_configuration = self.fit(options) + (rules + baseline) * probe + simulated
        comparison = repeats * (self.private_run() + max(num_methods - 1, 0) * self.selection()) if num_methods else 0.0
        return self.num_configurations * per_configuration + comparison

    def describe(self) -> str:
        return (
            f"{self.seconds_per_row:.3g} s per proxy point, {self.seconds_per_step:.3g} s per DP-GIBO step, "
            f"K = {self.num_configurations}, T = {self.num_iterations}, b = {self.batch_size}"
        )


def measure_costs(
    proxy_objective: Callable[[Tensor], Tensor],
    config: DPGIBOConfig,
    *,
    num_configurations: int,
    seed: int = 0,
    fit_kernel: bool = True,
) -> CostEstimate:
    r"""Time one DP-GIBO ``ask`` at ``θ₀`` with ``config`` (the planner's first search seed, ``seed``'s first
    child) and the PUBLIC proxy at points the planning evaluates anyway, so that a ``ProxyCache`` reuses
    them: the first ``b`` of the kernel fit's Sobol points of ``Θ`` (``fit_kernel``), else the asked batch,
    which is the planner's probe at ``θ₀`` when the kernel is not fitted. The two timed parts together are
    ``seconds_measuring`` (building the probe is left out: the first call of a process pays one-time imports
    there, e.g. ``torch._dynamo`` with the first torch optimizer, which any call pays, the private run's too)."""
    d = config.bounds.shape[1]
    with warnings.catch_warnings():  # public randomness on public settings; the kernel is not yet fitted
        warnings.filterwarnings("ignore", category=PrivacyWarning)
        warnings.filterwarnings("ignore", category=SettingsWarning)
        probe = DPGIBO(dataclasses.replace(config, seed=child_seeds([seed], 1)[0], validation_mu_budget=None))
        start = time.perf_counter()
        points = probe.ask()
        step = time.perf_counter() - start
    b = int(points.shape[0])
    if fit_kernel:
        bounds = config.bounds.to(torch.float64)
        points = bounds[0] + (bounds[1] - bounds[0]) * SobolEngine(d, scramble=True, seed=seed).draw(
            b, dtype=torch.float64
        )
    start = time.perf_counter()
    proxy_objective(points)
    proxy_time = time.perf_counter() - start
    per_row = proxy_time / b
    batch = max(b, math.ceil(config.max_evaluations / config.num_iterations))
    fit_points = KERNEL_FIT_POINTS_PER_DIM * d
    measuring = step + proxy_time
    return CostEstimate(per_row, step, int(num_configurations), config.num_iterations, batch, fit_points, measuring)


def auto_budget(estimate: CostEstimate) -> float:
    r"""``plan_budget="auto"`` in seconds: ``AUTO_SHARE`` of the estimated private run, less the time the
    estimate took (at least 0)."""
    return max(AUTO_SHARE * estimate.private_run() - estimate.seconds_measuring, 0.0)


def _one_setting(config: DPGIBOConfig, options: dict[str, Any]) -> dict[str, Any]:
    quantiles = tuple(options.get("clip_quantiles", DEFAULT_CLIP_QUANTILES))
    cut = {**options, "clip_quantiles": (quantiles[len(quantiles) // 2],), "step_sizes": (config.step_size,)}
    cut["num_iterations"] = (config.num_iterations,)
    if options.get("bias_tolerances") is not None:
        cut["bias_tolerances"] = tuple(options["bias_tolerances"])[:1]
    return cut


def budgeted_options(
    config: DPGIBOConfig,
    options: dict[str, Any] | None,
    *,
    budget: float,
    estimate: CostEstimate,
    num_methods: int,
    may_skip_comparison: bool,
    fit_cuts: bool = True,
) -> tuple[dict[str, Any], bool, str | None]:
    r"""``options`` cut so that the estimated planning takes at most ``budget`` seconds (see the module).

    Args:
        config: The DP-GIBO settings the plans start from (its ``step_size``, ``num_iterations``).
        options: Keywords of ``plan_private_run`` (``None``: its defaults).
        budget: Seconds.
        estimate: The ``CostEstimate``.
        num_methods: ``M``, the methods compared after the plans (0: none).
        may_skip_comparison: The cut of the method comparison is allowed (``method="auto"``).
        fit_cuts: The kernel fit's cuts (a shorter fit, then none) are allowed after the others (``False``:
            the planning stops at the comparison's cut, e.g. when a public rule then picks a method that
            uses no plan).

    Returns:
        ``(options, compare, note)``: ``compare`` is ``False`` when the comparison was cut; ``note`` is
        ``None`` when nothing was cut.
    """
    given = dict(options or {})
    repeats = int(given.get("num_repeats", 3))
    cuts: list[tuple[str, dict[str, Any], int]] = []  # (what, options, methods compared)
    cut = dict(given)
    if repeats > 2:
        cut = {**cut, "num_repeats": 2}
        cuts.append(("2 repeats", cut, num_methods))
    cut = _one_setting(config, cut)
    cuts.append(("one candidate setting per configuration", cut, num_methods))
    cut = {**cut, "baseline": False}
    cuts.append(("no baseline run of the settings passed in", cut, num_methods))
    cut = {**cut, "search_settings": False}
    cuts.append(("no simulated setting (the middle clip quantile, the given step size and T)", cut, num_methods))
    cut = {**cut, "num_repeats": 1}
    cuts.append(("1 repeat", cut, num_methods))
    methods = num_methods
    if may_skip_comparison and num_methods:
        methods = 0
        cuts.append(("no method comparison (DP-GIBO with the planned settings)", cut, methods))
    if fit_cuts and given.get("fit_kernel", True) is not False and given.get("kernel_fit_lengthscales", True):
        if int(given.get("kernel_fit_evaluations") or FIT_EVALUATIONS) > CAPPED_FIT_EVALUATIONS:
            cut = {**cut, "kernel_fit_evaluations": CAPPED_FIT_EVALUATIONS}
            what = f"a kernel fit of at most {CAPPED_FIT_EVALUATIONS} likelihood evaluations"
            cuts.append((what, cut, methods))
        cut = {**cut, "kernel_fit_evaluations": SCALE_FIT_EVALUATIONS, "kernel_fit_lengthscales": False}
        what = (
            f"a kernel fit of the outputscale and noise only, at most {SCALE_FIT_EVALUATIONS} likelihood evaluations "
            "(the length-scales kept: in tune, the space's recommended_kernel()'s)"
        )
        cuts.append((what, cut, methods))
    before = estimate.planning(given, num_methods)
    said = f"estimated from {estimate.describe()}"
    if before <= budget:
        return given, True, None
    done = []
    for what, opts, compared in cuts:
        done.append(what)
        after = estimate.planning(opts, compared)
        if after <= budget:
            return opts, compared > 0 or num_methods == 0, _note(budget, done, before, after, said)
    note = _note(budget, done, before, after, said) + "; the least planning still exceeds the budget"
    return opts, compared > 0 or num_methods == 0, note


def _note(budget: float, done: list[str], before: float, after: float, said: str) -> str:
    return (
        f"plan_budget = {budget:.3g} s: planned with {'; '.join(done)}; estimated planning {after:.3g} s instead of "
        f"{before:.3g} s ({said})"
    )
