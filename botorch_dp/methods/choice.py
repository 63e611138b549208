r"""The choice of METHOD: every candidate simulated on the public proxy (paired seeds), the best recommended.

This module is the one place methods are compared. ``plan_then_compare`` (``tune``'s choice for one
configuration) plans DP-GIBO's settings on the fitting half of the proxy's users (the caller's
``planner``, ``plan.plan_private_run``, which plans settings only) and compares the candidates on the
scoring half (``methods.proxy_split``); ``tuning.mixed_methods`` compares on a mixed space's encoding
through ``compare_in_context``.

``compare_methods`` resolves each ``Method``
(``methods.protocol``) against the public ``MethodContext`` (the private run's ``n``, ``(ε, δ)``,
box, DP-GIBO's planned config and its number of evaluations), simulates it ``r`` times on the
proxy with the private run's noise (the same seeds for every method: repeat ``j`` of each method
uses seed ``j``), scores each
simulated release by the proxy's mean loss, and recommends the method with the lowest mean, unless
that is a tie: when another method's paired mean difference to the lowest is within one paired
standard error, the CHEAPER of the tied methods is recommended (cost: the method's EXPECTED number
of objective evaluations, ``expected_evaluations`` where the method states it, e.g. ``E[K]`` of a
selection, else the mean number of rows of ``q x d`` batches its simulated runs asked for; the
scoring call not counted) and ``MethodComparison.note`` says "tie (within one s.e.): chose the
cheaper X". Among equally cheap tied methods the caller's ``prefer`` (``tune``: the public rule's
method, ``methods.default_rule``) wins, else the lowest mean. A selection's cost is its ``E[K]``,
not the ``K`` its few simulations drew: with a geometric ``K`` those draws range over two orders
of magnitude, and the mixed benchmark's seed 3 at ε = 3 (``reports/mixed-auto``) was decided by
two draws that averaged 51.5 against ``E[K] = 104``.

Every candidate's score clip is the same ``C`` where the caller has one (``with_loss_clip``:
``tune`` passes its ``loss_clip``, the ``C`` of DP-GIBO's enumerate scores and of a forced
selection without a proxy), so the selections are not handed a ``C`` fitted another way than the
other candidates' and than the method run without a proxy.
The evidence is kept in the ``MethodComparison``: per method its losses, their mean ± standard
error, and against the recommended one the paired wins and the paired difference ± its
standard error. A candidate that cannot run at this budget or is too costly to simulate is
listed with the reason and never recommended.

Everything here reads only the PUBLIC proxy and public settings: it costs no privacy, and the
sensitive objective is not an argument.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import torch
from torch import Tensor

from botorch_dp.methods.dp_gibo import DPGIBOMethod
from botorch_dp.methods.dp_hypo import DPHyPOMethod
from botorch_dp.methods.private_random_search import PrivateRandomSearchMethod
from botorch_dp.methods.protocol import (
    METHOD_MEMBERS,
    CandidateMethod,
    MethodContext,
    MethodUnavailable,
    SimulatedMethod,
    TakesLossClip,
    config_mu,
    missing_members,
)
from botorch_dp.methods.proxy_split import ProxySplit
from botorch_dp.optim.config import DPGIBOConfig
from botorch_dp.optim.public_checks import SettingsWarning
from botorch_dp.privacy.analysis.gdp import gdp_epsilon
from botorch_dp.privacy.checks import check_nonnegative_int
from botorch_dp.privacy.seeding import PrivacyWarning
from botorch_dp.utils import child_seeds, progress_bar, progress_stage

__all__ = [
    "DEFAULT_METHODS",
    "MethodComparison",
    "MethodScore",
    "check_methods",
    "compare_in_context",
    "compare_methods",
    "plan_then_compare",
    "recommend",
    "with_loss_clip",
]

DEFAULT_METHODS: tuple[CandidateMethod, ...] = (DPGIBOMethod(), PrivateRandomSearchMethod(), DPHyPOMethod())
"""The candidates the planner compares by default."""

_S = TypeVar("_S")


def with_loss_clip(methods: Sequence[_S], loss_clip: float | None) -> tuple[_S, ...]:
    r"""``methods`` with every method that takes a score clip (``with_loss_clip``; the selections) and whose
    ``loss_clip`` is open (``None``) given ``C = loss_clip``
    (``None``: unchanged, each fits its own from the proxy). ``tune`` passes its ``loss_clip``: the
    ``C`` of DP-GIBO's enumerate scores and of a selection forced without a proxy, so every candidate
    scores with the same ``C`` (issue 41: a ``C`` from the proxy's loss quantile made private random
    search worse in 7 of 10 held-out seeds, and differed from the ``C`` the benchmarks' selection
    arms run at)."""
    if loss_clip is None:
        return tuple(methods)
    # a method that takes a score clip sets its own open C (``TakesLossClip``); the others keep theirs
    return tuple(m.with_loss_clip(loss_clip) if isinstance(m, TakesLossClip) else m for m in methods)


def _expected_cost(method: object, counted_rows: float) -> float:
    r"""A method's cost: its public ``expected_evaluations`` when it states one, else the rows counted."""
    expected = getattr(method, "expected_evaluations", None)
    return float(expected) if isinstance(expected, (int, float)) and math.isfinite(expected) else counted_rows


def _mean(values: Sequence[float]) -> float:
    return math.fsum(values) / len(values) if values else math.nan


def _standard_error(values: Sequence[float]) -> float:
    r = len(values)
    if r < 2:
        return math.nan
    m = _mean(values)
    return math.sqrt(math.fsum((x - m) ** 2 for x in values) / (r - 1) / r)


@dataclass(frozen=True)
class MethodScore:
    r"""One candidate on the proxy (all values public).

    Attributes:
        name: The method's ``name``.
        method: The resolved method (runs privately exactly as simulated), or ``None``; a
            ``SimulatedMethod`` that is no ``CandidateMethod`` is run by its caller.
        proxy_losses: The proxy's mean loss at the simulated release, one per repeat (paired
            with the other methods' by seed); empty when unavailable.
        unavailable: Why the method was not simulated, or ``None``.
        seconds: Wall time of its simulations.
        evaluations: Its cost: the expected number of objective evaluations of a run (the method's
            ``expected_evaluations``, e.g. a selection's ``E[K]``; else the mean number of rows of the
            ``q x d`` batches per simulated run), the final scoring call not counted (NaN when
            unavailable).
    """

    name: str
    method: SimulatedMethod | None
    proxy_losses: tuple[float, ...]
    unavailable: str | None = None
    seconds: float = 0.0
    evaluations: float = math.nan

    @property
    def mean_proxy_loss(self) -> float:
        return _mean(self.proxy_losses)

    @property
    def standard_error(self) -> float:
        r"""Standard error of ``mean_proxy_loss`` over the repeats (NaN with fewer than 2)."""
        return _standard_error(self.proxy_losses)


@dataclass
class MethodComparison:
    r"""The candidates' scores on the proxy and the recommendation (all public).

    Attributes:
        scores: One ``MethodScore`` per candidate, in the order given.
        best: The index of the recommended method (lowest mean proxy loss, or the cheapest of
            those tied with it, ``recommend``).
        context: The ``MethodContext`` every candidate was resolved against.
        note: Why ``best`` is not the lowest mean (a tie), else ``None``.
    """

    scores: list[MethodScore]
    best: int
    context: MethodContext
    note: str | None = None

    @property
    def recommended_name(self) -> str:
        r"""The ``name`` of the recommended method."""
        return self.scores[self.best].name

    @property
    def recommended(self) -> CandidateMethod:
        r"""The recommended method, resolved (``run_private`` runs it as simulated)."""
        return self.get(self.recommended_name)

    def get(self, name: str) -> CandidateMethod:
        r"""The resolved candidate called ``name``; ``ValueError`` naming it and why when absent,
        unavailable or simulated only (its caller runs it)."""
        for score in self.scores:
            if score.name == name:
                if score.method is None:
                    raise ValueError(f"method={name!r} cannot run here: {score.unavailable}")
                if not isinstance(score.method, CandidateMethod):
                    if not hasattr(score.method, "run_private"):
                        raise ValueError(f"method={name!r} is simulated here only; its caller runs it privately.")
                    raise ValueError(  # meant to run privately, but without members tune picks by
                        f"method={name!r} ({type(score.method).__name__}) has run_private but lacks the Method "
                        f"members {missing_members(score.method)} (methods.protocol.Method): add them to run it "
                        "privately."
                    )
                return score.method
        raise ValueError(f"method={name!r} was not among the planned candidates {[s.name for s in self.scores]}.")

    def paired(self, index: int) -> tuple[int, float, float]:
        r"""Method ``index`` against the recommended one, repeat by repeat (same seeds):
        ``(wins, mean difference, its standard error)``, where ``wins`` counts the repeats in
        which the RECOMMENDED method's loss was lower and the difference is method minus
        recommended (positive: the recommended one is better)."""
        ours, theirs = self.scores[self.best].proxy_losses, self.scores[index].proxy_losses
        diffs = [b - a for a, b in zip(ours, theirs, strict=True)]
        return sum(d > 0 for d in diffs), _mean(diffs), _standard_error(diffs)

    def table(self) -> str:
        r"""Fixed-width table: method, mean proxy loss ± standard error, the recommended one's paired
        wins and the paired difference against it (``*`` marks the recommendation), settings."""
        r = len(self.scores[self.best].proxy_losses)
        head = (
            f"{'':1} {'method':>22} {'proxy loss':>11} {'+-':>8} {'* wins':>7} {'diff vs *':>10} {'+-':>8} "
            f"{'evals':>7}  settings (or why not run)"
        )
        lines = [head]
        for i, s in enumerate(self.scores):
            if s.method is None:
                lines.append(
                    f"{'':1} {s.name:>22} {'-':>11} {'':>8} {'':>7} {'':>10} {'':>8} {'':>7}  not run: {s.unavailable}"
                )
                continue
            se = "n/a" if math.isnan(s.standard_error) else f"{s.standard_error:.2g}"
            if i == self.best:
                wins, diff, dse = "-", "-", ""
            else:
                w, d, e = self.paired(i)
                wins, diff, dse = f"{w}/{r}", f"{d:+.4g}", "n/a" if math.isnan(e) else f"{e:.2g}"
            mark = "*" if i == self.best else ""
            lines.append(
                f"{mark:1} {s.name:>22} {s.mean_proxy_loss:>11.5g} {se:>8} {wins:>7} {diff:>10} {dse:>8} "
                f"{s.evaluations:>7.4g}  {s.method.describe()}"
            )
        if self.note is not None:
            lines.append(self.note)
        return "\n".join(lines)

    def __str__(self) -> str:
        c = self.context
        return (
            f"method choice on the proxy ({c.num_proxy_users} users) for the private run on {c.num_users} users at "
            f"epsilon = {c.epsilon:.4g}, delta = {c.delta:.3g}, d = {c.bounds.shape[1]}; noise simulated at the "
            f"private scale, {len(self.scores[self.best].proxy_losses)} paired repeats; recommended (*): "
            f"{self.scores[self.best].name}\n{self.table()}"
        )


class _Counted:
    r"""``objective`` that counts the rows (objective evaluations) it is asked for: a method's cost.
    A configuration's objective (``bound``, the encoded proxy's) counts on the same counter."""

    def __init__(self, objective: Any, counter: list[int] | None = None) -> None:
        self.objective, self.counter = objective, [0] if counter is None else counter

    @property
    def rows(self) -> int:
        return self.counter[0]

    def bound(self, *args: Any, **kwargs: Any) -> _Counted:
        return _Counted(self.objective.bound(*args, **kwargs), self.counter)

    def __getattr__(self, name: str) -> Any:  # anything else the objective offers, unchanged
        return getattr(self.__dict__["objective"], name)

    def __call__(self, X: Tensor) -> Tensor:
        self.counter[0] += int(X.reshape(-1, X.shape[-1]).shape[0])
        return self.objective(X)


_M = TypeVar("_M", bound=SimulatedMethod)


def check_methods(methods: Sequence[_M]) -> tuple[_M, ...]:
    r"""``methods`` as a tuple; a ``ValueError`` when there is none, one is no method, or two share a name."""
    methods = tuple(methods)
    if not methods:
        raise ValueError("methods must hold at least one candidate method.")
    for m in methods:
        if not isinstance(m, SimulatedMethod):
            raise ValueError(
                f"methods: {m!r} is not a CandidateMethod ({', '.join(METHOD_MEMBERS)}) nor a SimulatedMethod "
                "(name, resolved, simulate, describe)."
            )
    names = [m.name for m in methods]
    if len(set(names)) != len(names):
        raise ValueError(f"methods: the names must be unique, got {names}.")
    return methods


def compare_methods(
    proxy_objective: Callable[[Tensor], Tensor],
    config: DPGIBOConfig,
    methods: Sequence[SimulatedMethod] = DEFAULT_METHODS,
    *,
    num_users: int,
    num_proxy_users: int,
    evaluations: float,
    seeds: Sequence[int],
    progress: bool = True,
    fitting_objective: Callable[[Tensor], Tensor] | None = None,
    prefer: str | None = None,
) -> MethodComparison:
    r"""Simulate every candidate on the PUBLIC proxy at the private run's noise and recommend one.

    Args:
        proxy_objective: ``q x d`` points to the ``q x n_p`` per-user losses of PUBLIC users.
        config: DP-GIBO's planned config at the private budget (``privacy_mu`` finite; its
            ``target_delta`` is the run's ``δ``, ``ε = gdp_epsilon(μ, δ)``).
        methods: The candidates (``CandidateMethod``; default DP-GIBO, private random search,
            DP-HyPO).
        num_users: ``n`` of the private run.
        num_proxy_users: ``n_p``.
        evaluations: DP-GIBO's number of evaluations with ``config`` (the selection methods'
            default ``E[K]``).
        seeds: One seed per repeat, the same for every method (paired repeats).
        progress: Show a tqdm bar (public values only).
        fitting_objective: The PUBLIC users the candidates' open settings (the selection
            methods' loss clip) are fitted on, when not those they are scored on
            (``methods.proxy_split``: ``plan_then_compare`` passes the fitting half and scores on the
            other); ``None``: ``proxy_objective``.
        prefer: The method recommended among tied, equally cheap ones (``recommend``).

    Returns:
        The ``MethodComparison``.

    Raises:
        ValueError: Naming ``methods`` for a bad candidate list, or when no candidate can run.
    """
    delta = float(config.target_delta) if config.target_delta is not None else math.nan
    context = MethodContext(
        bounds=config.bounds.to(torch.float64),
        num_users=int(num_users),
        num_proxy_users=int(num_proxy_users),
        epsilon=gdp_epsilon(config_mu(config), delta),
        delta=delta,
        config=config,
        evaluations=float(evaluations),
    )
    return compare_in_context(
        proxy_objective,
        context,
        methods,
        seeds=seeds,
        progress=progress,
        fitting_objective=fitting_objective,
        prefer=prefer,
    )


def plan_then_compare(
    proxy_objective: Callable[[Tensor], Tensor],
    planner: Callable[[Callable[[Tensor], Tensor]], Any],
    methods: Sequence[SimulatedMethod] = DEFAULT_METHODS,
    *,
    num_users: int,
    seed: int = 0,
    num_repeats: int = 3,
    progress: bool = True,
) -> tuple[Any, MethodComparison, ProxySplit]:
    r"""Plan DP-GIBO's settings on one half of the PUBLIC proxy's users, then compare ``methods`` on the other.

    The proxy's users are split (``ProxySplit(seed)``, public and seeded); ``planner`` plans DP-GIBO's
    settings on the fitting half (``tune`` passes ``plan.plan_private_run`` with the call's options, the
    same ``seed`` and ``num_repeats``); the candidates' open settings are fitted on that half too, and
    every candidate is simulated and scored on the scoring half (``compare_methods``), ``num_repeats``
    times with fresh seeds paired across the methods (``child_seeds([seed, 1], num_repeats)``, not those
    the settings were chosen on), against DP-GIBO's planned config and its planned number of evaluations.

    Args:
        proxy_objective: ``q x d`` points to the ``q x n_p`` per-user losses of PUBLIC users (``n_p ≥ 4``).
        planner: The fitting half to a plan with ``config``, ``trials``, ``best`` and ``gradient_points``
            (a ``plan.PrivatePlan``).
        methods: The candidates (default DP-GIBO, private random search, DP-HyPO).
        num_users: ``n`` of the private run.
        seed: The split's and the comparison's seed (the plan's).
        num_repeats: The comparison's paired repeats (the plan's).
        progress: Show a tqdm bar (public values only).

    Returns:
        ``(plan, comparison, split)``.
    """
    methods = check_methods(methods)
    split = ProxySplit(seed)
    fitting = split.fitting(proxy_objective)  # settings fitted on one half, every candidate scored on the other
    plan = planner(fitting)
    scoring = split.scoring(proxy_objective)
    comparison = compare_methods(
        scoring,
        plan.config,
        methods,
        num_users=num_users,
        num_proxy_users=scoring.count(plan.gradient_points[:1]),
        evaluations=plan.trials[plan.best].num_evaluations,
        seeds=child_seeds([check_nonnegative_int(seed, "seed"), 1], int(num_repeats)),
        progress=progress,
        fitting_objective=fitting,
    )
    return plan, comparison, split


def compare_in_context(
    proxy_objective: Callable[[Tensor], Tensor],
    context: MethodContext,
    methods: Sequence[SimulatedMethod],
    *,
    seeds: Sequence[int],
    progress: bool = True,
    fitting_objective: Callable[[Tensor], Tensor] | None = None,
    prefer: str | None = None,
) -> MethodComparison:
    r"""``compare_methods`` against a given public ``context`` (its box may be another than DP-GIBO's:
    ``tune`` compares on a mixed space's encoded cube, ``tuning.mixed_methods``).

    Args:
        proxy_objective: ``q x D`` points of ``context.bounds`` to the ``q x n_p`` per-user losses
            of PUBLIC users.
        context: The public ``MethodContext`` (``num_proxy_users`` set).
        methods: The candidates (``SimulatedMethod``s: ``CandidateMethod``s, or methods their
            caller runs privately).
        seeds: One seed per repeat, the same for every method (paired repeats).
        progress: Show a tqdm bar (public values only).
        fitting_objective: Where ``resolved`` fits the open settings (``None``: ``proxy_objective``).
        prefer: The method recommended among tied, equally cheap ones (``recommend``).

    Returns:
        The ``MethodComparison``.
    """
    methods = check_methods(methods)
    seeds = tuple(int(s) for s in seeds)
    if not seeds:
        raise ValueError("seeds must hold at least one seed (one per repeat).")
    if context.num_proxy_users is None:
        raise ValueError("context.num_proxy_users: the comparison simulates on a proxy of n_p users, got None.")
    scores: list[MethodScore] = []
    bar = progress_bar(total=len(methods) * len(seeds), disable=not progress, desc="choosing the method", unit="run")
    with warnings.catch_warnings():
        # seeded simulations are public randomness on public data, not releases; the proxy's n is not the run's
        warnings.filterwarnings("ignore", category=PrivacyWarning)
        warnings.filterwarnings("ignore", category=SettingsWarning)
        try:
            for m in methods:
                progress_stage(method=m.name)
                start = time.perf_counter()
                try:
                    resolved = m.resolved(proxy_objective if fitting_objective is None else fitting_objective, context)
                except MethodUnavailable as err:
                    scores.append(MethodScore(m.name, None, (), str(err)))
                    bar.update(len(seeds))
                    continue
                losses, counted = [], _Counted(proxy_objective)
                for s in seeds:
                    theta = resolved.simulate(counted, context, s)
                    value = torch.as_tensor(proxy_objective(theta.reshape(1, -1))).to(torch.float64).mean()
                    losses.append(float(value))
                    bar.update(1)
                seconds = time.perf_counter() - start
                cost = _expected_cost(resolved, counted.rows / len(seeds))
                scores.append(MethodScore(m.name, resolved, tuple(losses), None, seconds, cost))
        finally:
            bar.close()
    if all(s.method is None for s in scores):
        raise ValueError(
            "methods: no candidate can run at this budget: " + "; ".join(f"{s.name}: {s.unavailable}" for s in scores)
        )
    best, note = recommend(scores, prefer=prefer)
    return MethodComparison(scores, best, context, note)


def recommend(scores: Sequence[MethodScore], *, prefer: str | None = None) -> tuple[int, str | None]:
    r"""The recommended index among the available ``scores`` and the tie note (``None``: no tie).

    The lowest mean proxy loss wins, unless another available method's paired difference to it
    (same seeds) is within one paired standard error: then the cheapest of the tied methods
    (fewest ``evaluations``) wins; among equally cheap ones the method named ``prefer`` (``tune``:
    the public rule's method, ``methods.default_rule``), else the lowest mean; the note says so.
    With fewer than two repeats there is no standard error and no tie.
    """
    available = [i for i, s in enumerate(scores) if s.method is not None]
    lowest = min(available, key=lambda i: scores[i].mean_proxy_loss)
    tied = [lowest]
    for i in available:
        if i == lowest:
            continue
        diffs = [b - a for a, b in zip(scores[lowest].proxy_losses, scores[i].proxy_losses, strict=True)]
        se = _standard_error(diffs)
        if math.isfinite(se) and _mean(diffs) <= se:
            tied.append(i)
    best = min(tied, key=lambda i: (scores[i].evaluations, scores[i].name != prefer, scores[i].mean_proxy_loss))
    if best == lowest:
        return best, None
    if scores[best].evaluations == scores[lowest].evaluations:
        return best, (
            f"tie (within one s.e.) at the same cost ({scores[best].evaluations:.4g} evaluations per run): chose "
            f"{scores[best].name}, the public rule's method, over {scores[lowest].name}, whose mean proxy loss "
            "was lowest"
        )
    return best, (
        f"tie (within one s.e.): chose the cheaper {scores[best].name} ({scores[best].evaluations:.4g} evaluations "
        f"per run against {scores[lowest].evaluations:.4g} of {scores[lowest].name}, whose mean proxy loss was lowest)"
    )
