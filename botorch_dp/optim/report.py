r"""What a DP-GIBO run plans, checks and reports, from explicit arguments (its config, strategies,
``RunState``, ledger and ``RunPlan``; never the run object): the ``RunPlan``, the next batch, each
step's worst case and the check of the next release before its points are searched, the public
checks of a told batch, the guarantee, and the ``PrivateRelease`` with each strategy's record (and
opt-in NON-PRIVATE diagnostics)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from botorch_dp.distributed.partitions import PartitionedObjective
from botorch_dp.optim.config import check_per_user_losses
from botorch_dp.optim.options import EvaluatedSelection, Options, RunPlan
from botorch_dp.optim.options.batches import moved_batch
from botorch_dp.optim.options.selection import SELECTION_KEY
from botorch_dp.optim.privacy_target import DEFAULT_TARGET_DELTA
from botorch_dp.optim.public_checks import (
    LARGE_DELTA_OPT_IN,
    NOISE_DOMINATED_OPT_IN,
    delta_caution,
    enforce,
    gradient_noise_caution,
    warn_noise,
)
from botorch_dp.optim.results import DPGIBOResult, NonPrivateDiagnostics, PrivacyGuarantee, PrivateRelease
from botorch_dp.optim.state import RunState
from botorch_dp.privacy.analysis.gdp import gdp_epsilon
from botorch_dp.privacy.checks import check_told_batch
from botorch_dp.privacy.ledger import PrivacyLedger, parse_release_key
from botorch_dp.privacy.statement import guarantee_statement

__all__ = [
    "budget_cautions",
    "check_known_users",
    "check_next_release",
    "checked_batch",
    "checked_partitioned",
    "guarantee",
    "next_batch",
    "release_records",
    "result",
    "run_plan",
    "spent",
    "step_bound",
]

#: What the checks of a first batch read to plan its noise: ``n`` to the run's ``RunPlan``.
PlanFor = Callable[[int], RunPlan]


def run_plan(config: Any, options: Options, dim: int, num_users: int | None, generator: Any) -> RunPlan:
    r"""The public ``RunPlan`` of a run of ``config`` and its strategies on ``num_users`` users (``None``
    or 0: not known yet), drawing its privacy noise from ``generator`` (``None``: OS entropy)."""
    c = config
    return RunPlan(
        num_iterations=c.num_iterations,
        iteration_cap=c.iteration_cap,
        dim=dim,
        num_users=num_users or 0,
        split=options.split(c.privacy_mu),
        generator=generator,
        chunk_size=c.user_chunk_size,
        diagnostics=c.record_non_private_diagnostics,
    )


def next_batch(config: Any, options: Options, state: RunState, box: Tensor, generator: Any) -> Tensor:
    r"""The batch rule's next points around ``θ_t`` in the ``2 x d`` ``box`` (public: the GP's inputs and
    the iterates; ``generator``: the public search stream), on the gradient-information acquisition in
    the projection's coordinates (the same public ``Ṽ_t`` as the step computes), warm-started from the
    previous batch moved by the step."""
    s, o = state, options
    return o.batches.select(
        s.gp,
        s.theta,
        box,
        generator,
        default=o.projection.default_batch_size(s.theta.shape[-1]),
        num_restarts=config.num_restarts,
        basis=o.projection.acquisition_basis(s.theta, s.gp, s.records.track),
        raw_samples=config.raw_samples,
        previous=moved_batch(s.X, s.batch_sizes, s.iterates),
    )


def spent(ledger: Any, run_id: str) -> list[float]:
    r"""The μ of every norm and gradient release run ``run_id`` has recorded in ``ledger``, in order (an
    adaptive schedule's spent budget; a release made twice, e.g. by a copy of the run, counts twice)."""
    records = ledger.validation.records(run_id)
    return [r.event.mu for r in records if parse_release_key(r.key)[1] in ("norm", "grad")]


def step_bound(
    options: Options, state: RunState, ledger: PrivacyLedger, plan: RunPlan, run_id: str
) -> tuple[dict[str, Any], list[float], float]:
    r"""The next step's worst case (``Options.step_bound``, public) with what it reads: the run's
    spent norm and gradient μ's and the ledger's room."""
    spent_mus, room = spent(ledger, run_id), ledger.validation.remaining_mu()
    return options.step_bound(plan, state.records.noise, spent_mus, room), spent_mus, room


def check_next_release(
    options: Options, state: RunState, ledger: PrivacyLedger, plan: RunPlan, run_id: str, steps_done: bool
) -> None:
    r"""Refuse the next release's worst case (``PrivacyBudgetExceeded``) before its points are
    searched for or evaluated, so that a ledger which cannot pay for one more step costs the user
    no evaluation: the step's bound (``Options.step_bound`` at ``plan``: ``n`` does not enter it, so
    1 stands in before the first ``tell``) or, once the steps are done, the evaluated selection's
    charge. Public: settings and the ledger only. ``tell`` charges the same bound again (other runs
    may spend in between)."""
    if steps_done:  # only an evaluated selection is left to release once the steps are done
        if not (selection := options.selection).evaluated or not isinstance(selection, EvaluatedSelection):
            raise RuntimeError(f"selection={selection.name!r} releases nothing after the steps.")
        bound, what = {SELECTION_KEY: selection.event()}, f"the selection of run {run_id!r}"
    else:
        bound = step_bound(options, state, ledger, plan, run_id)[0]
        what = f"step {state.iteration} of run {run_id!r}"
    ledger.validation.check_admits(bound, f"{what} (checked before its points are evaluated)")


def _last_bound(options: Options, state: RunState) -> float:
    r"""The bound the latest step was clipped at (the first step's before any)."""
    clip = state.records.clip
    if clip.bounds and state.iteration:
        return clip.bounds[state.iteration - 1]
    return options.clip.current(clip)


def guarantee(
    config: Any, options: Options, state: RunState, ledger: PrivacyLedger, plan_for: PlanFor, delta: float | None = None
) -> PrivacyGuarantee:
    r"""The validation-data guarantee of the steps taken so far.

    ``mu`` and ``epsilon`` are the ledger's, all runs on it; when the ledger's validation side
    also holds a release known only by its RDP curve (a DP-HyPO run on the same users), no μ
    covers the composition: ``mu`` is NaN and ``epsilon`` the ledger's RDP conversion. The noise
    is the latest gradient release's (0 before any), read off the run's plan at ``n``
    (``plan_for(n)``; at 1 before ``n`` is known)."""
    holds = options.fitting.holds
    mu, rdp = math.inf, False
    if holds:
        try:
            mu = ledger.validation.mu()
        except ValueError:  # the ledger's validation side holds an RDP entry: no μ covers it
            mu, rdp = math.nan, True
    delta = config.target_delta if delta is None else delta
    epsilon = ledger.validation.epsilon(delta) if rdp else gdp_epsilon(mu, delta)
    plan = plan_for(state.num_users or 1)
    std, multiplier = options.noise.noise(plan, state.records.noise, _last_bound(options, state))
    return PrivacyGuarantee(
        mu=mu,
        epsilon=epsilon,
        delta=delta,
        noise_std=std if state.iteration else 0.0,
        noise_multiplier=multiplier,
        num_steps=state.iteration,
        holds=holds,
        cautions=budget_cautions(config, state.num_users),
    )


def release_records(options: Options, state: RunState, plan: RunPlan) -> dict[str, Any]:
    r"""Each strategy's public record of the run (``PrivateRelease.records``), made by the strategy."""
    r = state.records
    return {
        "clip": options.clip.record(r.clip),
        "noise": options.noise.record(r.noise),
        "projection": options.projection.record(r.track),
        "step_rule": options.step_rule.record(plan, r.track),
        "selection": options.selection.record(len(state.iterates), r.noise.noisy_norms, r.selected, r.selection_scores),
    }


def result(
    config: Any, options: Options, state: RunState, ledger: PrivacyLedger, plan_for: PlanFor, run_id: str
) -> DPGIBOResult:
    r"""The private release of run ``run_id`` (``plan_for``: as for ``guarantee``) and, if
    ``config.record_non_private_diagnostics``, NON-PRIVATE diagnostics."""
    s, dim = state, state.theta.shape[-1]
    records = release_records(options, s, plan_for(s.num_users or 1))
    selected = records["selection"].index
    release = PrivateRelease(
        theta=(s.theta if selected is None else s.iterates[selected]).clone(),
        iterates=torch.stack(s.iterates),
        evaluation_points=s.X.clone(),
        batch_sizes=list(s.batch_sizes),
        posterior_traces=list(s.traces),
        released_gradients=s.released_matrix(dim),
        guarantee=guarantee(config, options, s, ledger, plan_for),
        records=records,
    )
    diagnostics = None
    if config.record_non_private_diagnostics:
        diagnostics = NonPrivateDiagnostics.from_releases(list(s.diagnostics), dim)
    return DPGIBOResult(
        release=release,
        diagnostics=diagnostics,
        statement=guarantee_statement(ledger, release.guarantee.delta),
        records=tuple(ledger.validation.records(run_id)),
    )


def _check_pending(state: RunState, done: bool, call: str) -> Tensor:
    r"""The asked points; ``RuntimeError`` when nothing is asked (``call``: what to call first)."""
    if state.pending is None:
        if done:
            raise RuntimeError(f"The run is finished ({state.iteration} iterations); nothing to tell.")
        raise RuntimeError(f"Call ask() before {call}().")
    return state.pending


def checked_partitioned(
    points: Any,
    partitions: PartitionedObjective,
    config: Any,
    options: Options,
    state: RunState,
    plan_for: PlanFor,
    *,
    done: bool,
) -> Tensor:
    r"""The asked points, for users held in ``partitions``; ``RuntimeError`` (losses held here, no
    pending ask) or ``ValueError`` (other points, another ``n``, sensitive fitting) before
    anything is evaluated or released (``done``: whether the run is finished)."""
    s = state
    if s.users is not None:
        raise RuntimeError("This run's losses are held in this process: use tell().")
    if not options.fitting.holds:
        raise ValueError(
            "partitions: partitioned users do not support hyperparameter_fit or a standardizing model "
            "(they need the raw losses, which never leave the partitions)."
        )
    pending = _check_pending(s, done, "tell_partitioned")
    points = torch.as_tensor(points).detach().to(pending.device, torch.float64)
    if points.shape != pending.shape or not torch.allclose(points, pending):
        raise ValueError("tell_partitioned() must receive the points returned by the last ask().")
    n = partitions.num_users
    if s.num_users is None:
        check_per_user_losses(n, config.privacy_mu)
        _first_batch_checks(config, options, s, plan_for(n))
    elif n != s.num_users:
        raise ValueError(f"partitions hold {n} users, earlier steps had {s.num_users}; n must stay fixed.")
    return pending.clone()


def checked_batch(
    points: Any, losses: Any, config: Any, options: Options, state: RunState, plan_for: PlanFor, done: bool
) -> tuple[Tensor, Tensor]:
    r"""The asked points and a float64 COPY of the told losses on the points' device (detached, so a caller reusing
    its buffer cannot change what is stored), or a ``RuntimeError`` (no pending ask) /
    ``ValueError`` naming the problem; nothing changes before this returns."""
    s = state
    pending = _check_pending(s, done, "tell")
    points, losses = check_told_batch(points, losses, pending, s.num_users, config.nonfinite_losses)
    if s.num_users is None:  # the first batch fixes n: one loss per user, n >= 2
        check_per_user_losses(losses.shape[1], config.privacy_mu)
        _first_batch_checks(config, options, s, plan_for(losses.shape[1]))
    return points, losses


def _first_batch_checks(config: Any, options: Options, state: RunState, plan: RunPlan) -> None:
    r"""The checks that need ``n`` (``plan.num_users``), when the first batch is told (before its
    release), or before the first evaluation when ``run``'s objective knows ``n``
    (``check_known_users``): ``δ ≥ 1/n`` and a noise-dominated budget are refused unless opted in
    (``budget_cautions``), a first step that is mostly noise is warned (``optim.public_checks``;
    public)."""
    c, o, n = config, options, plan.num_users
    if math.isinf(c.privacy_mu):
        return
    for caution, opt_in, allow, because in _cautions(c, n):
        enforce(caution, opt_in, allow, because=because, stacklevel=6)
    bound = o.clip.current(state.records.clip)
    noise_std, _ = o.noise.noise(plan, state.records.noise, bound)
    warn_noise(noise_std, o.projection.released_dim(plan.dim), bound, n, c.privacy_mu, stacklevel=5)


def check_known_users(config: Any, n: Any, num_users: int | None) -> None:
    r"""Refuse, before anything is evaluated, what the first batch's checks would refuse at ``n`` (an
    objective's ``num_users``, if it declares an ``int``; nothing once the run has its ``num_users``).
    Warnings wait for the first batch."""
    if not isinstance(n, int) or isinstance(n, bool):  # the objective does not say its n
        return
    if num_users is None and not math.isinf(config.privacy_mu):
        check_per_user_losses(n, config.privacy_mu)
        for caution, opt_in, allow, _ in _cautions(config, n):
            if not allow:
                enforce(caution, opt_in, allow)


def _cautions(config: Any, n: int) -> list[tuple[str, str, bool, str | None]]:
    r"""``(caution, opt-in, allowed, why it runs)`` of each public check of ``config`` at ``n`` that fires."""
    c = config
    if math.isinf(c.privacy_mu):
        return []
    found: list[tuple[str, str, bool, str | None]] = []
    # a privacy_mu run at the default target_delta: the run is μ-GDP and δ only where its ε is read (warned)
    default_delta = c.epsilon is None and c.target_delta == DEFAULT_TARGET_DELTA
    caution = delta_caution(c.target_delta, n, argument="delta" if c.epsilon is not None else "target_delta")
    if caution is not None:
        because = "target_delta is the default of a privacy_mu run" if default_delta else None
        found.append((caution, LARGE_DELTA_OPT_IN, c.unsafe_allow_large_delta or default_delta, because))
    mu = c.privacy_mu
    argument, value = ("epsilon", c.epsilon) if c.epsilon is not None else ("privacy_mu", mu)

    def needed(factor: float) -> float:
        return mu * factor if c.epsilon is None else gdp_epsilon(mu * factor, c.delta)

    caution = gradient_noise_caution(
        n,
        c.mu_split.gradient_mu,
        c.options.projection.released_dim(c.bounds.shape[-1]),
        argument=argument,
        value=value,
        needed=needed,
    )
    if caution is not None:
        found.append((caution, NOISE_DOMINATED_OPT_IN, c.allow_noise_dominated, None))
    return found


def budget_cautions(config: Any, num_users: int | None) -> tuple[str, ...]:
    r"""The warnings a run of ``config`` on ``num_users`` users carries (its checks' opted-in or
    warned cautions; public: the settings and ``n``). Empty before ``n`` is known."""
    if not num_users:
        return ()
    return tuple(caution for caution, _, allow, _ in _cautions(config, num_users) if allow)
